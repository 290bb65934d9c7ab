// The counter table against v1.PmdStats: which entries GetStats carries, and
// that filling the message from the table is enough for a new counter.
#include "proto/pmd_stats_convert.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// uint64 fields of v1.PmdStats that are not pipeline counters: the PMD
// loop's own counts and the snapshot's sizes (filled by the service).
const std::set<std::string> kNotInTable = {
    "cycles_busy", "cycles_idle",   "generation",   "tx_packets", "tx_dropped",
    "rule_drops",  "bad_port",      "parse_errors", "iterations", "emc_occupancy",
    "emc_entries", "smc_occupancy", "smc_entries",  "megaflows"};

// A value per counter that no other counter has.
uint64_t ValueOf(size_t i) { return 1000 * (i + 1) + 7; }

TEST(PmdStatsConvertTest, EveryRpcEntryNamesAUint64FieldAndNoOtherDoes) {
  const Descriptor* d = v1::PmdStats::descriptor();
  for (const PmdCounterInfo& c : kPmdCounters) {
    const FieldDescriptor* f = d->FindFieldByName(c.name);
    if (c.rpc) {
      ASSERT_NE(f, nullptr) << c.name << ": rpc, but v1.PmdStats has no such field";
      EXPECT_EQ(f->cpp_type(), FieldDescriptor::CPPTYPE_UINT64) << c.name;
      EXPECT_FALSE(f->is_repeated()) << c.name;
      EXPECT_EQ(PmdStatsField(c.id), f) << c.name;
    } else {
      // A field of that name would be left at 0: say rpc in the table.
      EXPECT_EQ(f, nullptr) << c.name << ": v1.PmdStats has it, the table says rpc = false";
      EXPECT_EQ(PmdStatsField(c.id), nullptr) << c.name;
    }
    EXPECT_EQ(kNotInTable.count(c.name), 0u) << c.name;
  }
}

TEST(PmdStatsConvertTest, EveryUint64FieldIsATableEntryOrFilledElsewhere) {
  std::set<std::string> rpc;
  for (const PmdCounterInfo& c : kPmdCounters)
    if (c.rpc) rpc.insert(c.name);
  const Descriptor* d = v1::PmdStats::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_UINT64 || f->is_repeated()) continue;
    EXPECT_TRUE(rpc.count(f->name()) + kNotInTable.count(f->name()) == 1)
        << f->name() << ": a counter of v1.PmdStats with no table entry (dataplane/pmd_counters.h)";
  }
}

TEST(PmdStatsConvertTest, FillSetsOneFieldPerRpcEntryWithItsValue) {
  PmdStats s;
  for (size_t i = 0; i < kNumPmdCounters; ++i) s.*kPmdCounters[i].field = ValueOf(i);
  v1::PmdStats p;
  PmdCountersToProto(s, &p);
  std::vector<const FieldDescriptor*> set;
  p.GetReflection()->ListFields(p, &set);
  std::set<std::string> set_names;
  for (const FieldDescriptor* f : set) set_names.insert(f->name());
  std::set<std::string> want;
  for (size_t i = 0; i < kNumPmdCounters; ++i) {
    const PmdCounterInfo& c = kPmdCounters[i];
    EXPECT_EQ(PmdCounterFromProto(p, c.id), c.rpc ? ValueOf(i) : 0) << c.name;
    if (c.rpc) want.insert(c.name);
  }
  EXPECT_EQ(set_names, want);
  // Spot checks through the generated accessors.
  EXPECT_EQ(p.emc_hits(), s.emc_hits);
  EXPECT_EQ(p.cycles_revalidation(), s.revalidation_cycles);
  EXPECT_EQ(p.cycles_upcall(), s.upcall_cycles);
}

}  // namespace
}  // namespace flowclass
