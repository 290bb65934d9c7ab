#include "proto/pmd_stats_convert.h"

#include <array>

namespace flowclass {
namespace {

using google::protobuf::FieldDescriptor;

const std::array<const FieldDescriptor*, kNumPmdCounters>& Fields() {
  static const std::array<const FieldDescriptor*, kNumPmdCounters> fields = [] {
    std::array<const FieldDescriptor*, kNumPmdCounters> f{};
    const google::protobuf::Descriptor* d = v1::PmdStats::descriptor();
    for (size_t i = 0; i < kNumPmdCounters; ++i) {
      if (!kPmdCounters[i].rpc) continue;
      const FieldDescriptor* fd = d->FindFieldByName(kPmdCounters[i].name);
      if (fd != nullptr && !fd->is_repeated() && fd->cpp_type() == FieldDescriptor::CPPTYPE_UINT64)
        f[i] = fd;
    }
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

}  // namespace flowclass
