#include "proto/pmd_stats_convert.h"

#include <array>

namespace flowclass {
namespace {

using google::protobuf::FieldDescriptor;

// The singular uint64 field `name` of v1.PmdStats, or nullptr.
const FieldDescriptor* Uint64Field(const char* name) {
  const FieldDescriptor* fd = v1::PmdStats::descriptor()->FindFieldByName(name);
  return fd != nullptr && !fd->is_repeated() && fd->cpp_type() == FieldDescriptor::CPPTYPE_UINT64
             ? fd
             : nullptr;
}

const std::array<const FieldDescriptor*, kNumPmdCounters>& Fields() {
  static const std::array<const FieldDescriptor*, kNumPmdCounters> fields = [] {
    std::array<const FieldDescriptor*, kNumPmdCounters> f{};
    for (size_t i = 0; i < kNumPmdCounters; ++i)
      if (kPmdCounters[i].rpc) f[i] = Uint64Field(kPmdCounters[i].name);
    return f;
  }();
  return fields;
}

const std::array<const FieldDescriptor*, kNumPmdLoopCounters>& LoopFields() {
  static const std::array<const FieldDescriptor*, kNumPmdLoopCounters> fields = [] {
    std::array<const FieldDescriptor*, kNumPmdLoopCounters> f{};
    for (size_t i = 0; i < kNumPmdLoopCounters; ++i) f[i] = Uint64Field(kPmdLoopCounters[i].name);
    return f;
  }();
  return fields;
}

}  // namespace

const FieldDescriptor* PmdStatsField(PmdCounter c) { return Fields()[static_cast<size_t>(c)]; }

void PmdCountersToProto(const PmdStats& s, v1::PmdStats* out) {
  const google::protobuf::Reflection* r = out->GetReflection();
  for (size_t i = 0; i < kNumPmdCounters; ++i)
    if (const FieldDescriptor* f = Fields()[i]) r->SetUInt64(out, f, s.*kPmdCounters[i].field);
}

uint64_t PmdCounterFromProto(const v1::PmdStats& p, PmdCounter c) {
  const FieldDescriptor* f = PmdStatsField(c);
  return f ? p.GetReflection()->GetUInt64(p, f) : 0;
}

const FieldDescriptor* PmdStatsField(PmdLoopCounter c) {
  return LoopFields()[PmdLoopCounterIndex(c)];
}

void PmdLoopCountersToProto(const PmdLoopStats& s, v1::PmdStats* out) {
  const google::protobuf::Reflection* r = out->GetReflection();
  for (size_t i = 0; i < kNumPmdLoopCounters; ++i) {
    const uint64_t v = s.*kPmdLoopCounters[i].field;
    if (const FieldDescriptor* f = LoopFields()[i]; f != nullptr && v != 0) r->SetUInt64(out, f, v);
  }
}

uint64_t PmdLoopCounterFromProto(const v1::PmdStats& p, PmdLoopCounter c) {
  const FieldDescriptor* f = PmdStatsField(c);
  return f ? p.GetReflection()->GetUInt64(p, f) : 0;
}

}  // namespace flowclass
