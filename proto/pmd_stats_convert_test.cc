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

// uint64 fields of v1.PmdStats that are in neither table: the snapshot's
// sizes (filled by the service).
const std::set<std::string> kNotInTable = {"emc_occupancy", "emc_entries", "smc_occupancy",
                                           "smc_entries", "megaflows"};

// v1.PmdStats fields of the loop table's entries.
std::set<std::string> LoopNames() {
  std::set<std::string> n;
  for (const PmdLoopCounterInfo& c : kPmdLoopCounters) n.insert(c.name);
  return n;
}

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
    const bool in_a_table = rpc.count(f->name()) + LoopNames().count(f->name()) > 0;
    EXPECT_TRUE(in_a_table + kNotInTable.count(f->name()) == 1)
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

// GetStats carries every pipeline counter: a counter of the table that
// v1.PmdStats does not carry is a counter `flowclassctl stats` and GetStats
// users never see.
TEST(PmdStatsConvertTest, EveryPipelineCounterReachesItsFieldWithItsValue) {
  PmdStats s;
  for (size_t i = 0; i < kNumPmdCounters; ++i) s.*kPmdCounters[i].field = ValueOf(i);
  v1::PmdStats p;
  PmdCountersToProto(s, &p);
  for (size_t i = 0; i < kNumPmdCounters; ++i) {
    const PmdCounterInfo& c = kPmdCounters[i];
    EXPECT_TRUE(c.rpc) << c.name << ": not in GetStats (rpc = false in dataplane/pmd_counters.h)";
    EXPECT_NE(PmdStatsField(c.id), nullptr) << c.name;
    EXPECT_EQ(PmdCounterFromProto(p, c.id), ValueOf(i)) << c.name;
  }
  // The counters that were GetStats-less once, through the generated accessors.
  EXPECT_EQ(p.cycles_classifier(), s.cycles);
  EXPECT_EQ(p.revalidations(), s.revalidations);
  EXPECT_EQ(p.megaflows_revalidated_out(), s.megaflows_revalidated_out);
  EXPECT_EQ(p.megaflows_reverdicted(), s.megaflows_reverdicted);
  EXPECT_EQ(p.megaflows_rechecked(), s.megaflows_rechecked);
}

// Every loop counter has a uint64 field of its name; filled after the
// pipeline's, the loop's value wins where the two share a field (packets,
// no_match) and is not 0, and the pipeline's stays where the loop has 0.
TEST(PmdStatsConvertTest, EveryLoopCounterReachesItsFieldAndWinsASharedOne) {
  const Descriptor* d = v1::PmdStats::descriptor();
  PmdStats s;
  for (size_t i = 0; i < kNumPmdCounters; ++i) s.*kPmdCounters[i].field = ValueOf(i);
  PmdLoopStats l;
  for (size_t i = 0; i < kNumPmdLoopCounters; ++i) l.*kPmdLoopCounters[i].field = ValueOf(100 + i);
  v1::PmdStats p;
  PmdCountersToProto(s, &p);
  PmdLoopCountersToProto(l, &p);
  for (size_t i = 0; i < kNumPmdLoopCounters; ++i) {
    const PmdLoopCounterInfo& c = kPmdLoopCounters[i];
    const FieldDescriptor* f = d->FindFieldByName(c.name);
    ASSERT_NE(f, nullptr) << c.name << ": a loop counter v1.PmdStats has no field for";
    EXPECT_EQ(f->cpp_type(), FieldDescriptor::CPPTYPE_UINT64) << c.name;
    EXPECT_EQ(PmdStatsField(c.id), f) << c.name;
    EXPECT_EQ(PmdLoopCounterFromProto(p, c.id), ValueOf(100 + i)) << c.name;
  }
  EXPECT_EQ(p.packets(), l.rx_packets);
  EXPECT_EQ(p.no_match(), l.no_match);
  EXPECT_EQ(p.cycles_busy(), l.busy_cycles);
  EXPECT_EQ(p.generation(), l.generation);
  // A loop that keeps no count of its own (the fake, a replay) leaves the
  // pipeline's.
  v1::PmdStats q;
  PmdCountersToProto(s, &q);
  PmdLoopCountersToProto(PmdLoopStats{}, &q);
  EXPECT_EQ(q.packets(), s.packets);
  EXPECT_EQ(q.no_match(), s.no_match);
}

}  // namespace
}  // namespace flowclass
