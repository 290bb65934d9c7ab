// Tests for RuleTable: range splitting, lookup semantics (priority, tie-break,
// early stop, megaflow mask), batch semantics and atomicity, copies.  Bad
// batches are in rule_table_batch_test.cc, concurrent readers in
// rule_table_concurrent_test.cc, the differential test against
// ReferenceClassifier in rule_table_differential_test.cc.
#include "dataplane/rules/rule_table.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/random_rules.h"
#include "tests/common/reference_classifier.h"
#include "tests/common/rule_builders.h"
#include "tests/common/rule_table_testing.h"

// Counts heap allocations so LookupAllocatesNothing can check the hot path.
namespace {
std::atomic<long> g_allocations{0};
}  // namespace
// Out of line (noinline) so GCC does not pair the malloc/free it would see
// after inlining with new/delete expressions (-Wmismatched-new-delete).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
__attribute__((noinline)) void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
#pragma GCC diagnostic pop

namespace flowclass {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

Flow InPortOnly() {
  Flow f;
  f.Set(Field::kInPort, 0xffffffff);
  return f;
}

// ---------------------------------------------------------------------------
// RangeToPrefixes

// Number of prefixes of the canonical (minimal) cover, computed independently
// by descending the binary trie of the 16-bit space.
int TrieCount(uint32_t lo, uint32_t hi, uint32_t a = 0, uint32_t b = 0xffff) {
  if (hi < a || b < lo) return 0;
  if (lo <= a && b <= hi) return 1;
  const uint32_t mid = a + (b - a) / 2;
  return TrieCount(lo, hi, a, mid) + TrieCount(lo, hi, mid + 1, b);
}

void CheckCover(uint16_t lo, uint16_t hi) {
  SCOPED_TRACE(absl::StrCat("[", lo, ",", hi, "]"));
  const auto prefixes = RangeToPrefixes(lo, hi);
  uint32_t next = lo;
  for (const auto& [value, mask] : prefixes) {
    // A prefix mask: ones then zeros.
    const uint16_t inv = static_cast<uint16_t>(~mask);
    ASSERT_EQ(inv & (inv + 1), 0) << "mask " << mask << " is not a prefix";
    ASSERT_EQ(value & inv, 0) << "value " << value << " not aligned";
    // Contiguous, in order: disjoint and without holes.
    ASSERT_EQ(value, next);
    next = uint32_t{value} + inv + 1;
  }
  ASSERT_EQ(next, uint32_t{hi} + 1);  // the union is exactly [lo, hi]
  ASSERT_EQ(static_cast<int>(prefixes.size()), TrieCount(lo, hi));
}

TEST(RangeToPrefixesTest, KnownValues) {
  EXPECT_EQ(RangeToPrefixes(1, 65534).size(), 30u);
  EXPECT_THAT(RangeToPrefixes(0, 65535), ElementsAre(Pair(0, 0)));
  EXPECT_THAT(RangeToPrefixes(80, 80), ElementsAre(Pair(80, 0xffff)));
  EXPECT_THAT(RangeToPrefixes(0, 1023), ElementsAre(Pair(0, 0xfc00)));
  EXPECT_THAT(RangeToPrefixes(1024, 65535),
              ElementsAre(Pair(1024, 0xfc00), Pair(2048, 0xf800),
                          Pair(4096, 0xf000), Pair(8192, 0xe000),
                          Pair(16384, 0xc000), Pair(32768, 0x8000)));
  EXPECT_THAT(RangeToPrefixes(6, 9),
              ElementsAre(Pair(6, 0xfffe), Pair(8, 0xfffe)));
  EXPECT_TRUE(RangeToPrefixes(5, 4).empty());
}

TEST(RangeToPrefixesTest, ExhaustiveAtBothEndsAndRandomInBetween) {
  std::vector<uint32_t> values;
  const uint32_t edge = kSanitized ? 70 : 260;
  for (uint32_t v = 0; v < edge; ++v) values.push_back(v);
  for (uint32_t v = 65536 - edge; v < 65536; ++v) values.push_back(v);
  for (int k = 1; k < 16; ++k) {
    for (int d = -1; d <= 1; ++d) values.push_back((1u << k) + d);
  }
  for (uint32_t lo : values) {
    for (uint32_t hi : values) {
      if (lo > hi) continue;
      CheckCover(static_cast<uint16_t>(lo), static_cast<uint16_t>(hi));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  RandomRuleGen gen(1);
  for (int i = 0; i < Scaled(20000); ++i) {
    uint16_t a = static_cast<uint16_t>(gen.Uniform(65536));
    uint16_t b = static_cast<uint16_t>(gen.Uniform(65536));
    if (a > b) std::swap(a, b);
    CheckCover(a, b);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---------------------------------------------------------------------------
// Lookup semantics

TEST(RuleTableTest, EmptyTable) {
  RuleTable t;
  Flow wc;
  int visited = -1;
  EXPECT_EQ(t.Lookup(V4Key(1, 2), &wc, &visited), nullptr);
  EXPECT_EQ(visited, 0);
  EXPECT_EQ(wc, InPortOnly());
  const RuleTableStats s = t.Stats();
  EXPECT_EQ(s.rules, 0u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.subtables, 0u);
  EXPECT_EQ(s.generation, 0u);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.Find(1), nullptr);
}

TEST(RuleTableTest, PriorityThenLowestIdWins) {
  std::vector<Rule> rules;
  Rule a = V4Rule(5, 10);
  a.match.SetMasked(Field::kIpv4Src, 0x0a000000, Prefix32(8));
  Rule b = V4Rule(3, 10);  // same priority as a, other subtable, lower id
  b.match.SetMasked(Field::kIpv4Dst, 0xc0a80000, Prefix32(16));
  Rule c = V4Rule(9, 20);
  c.match.SetMasked(Field::kIpv4Src, 0x0a010000, Prefix32(16));
  c.match.SetExact(Field::kNwProto, kIpProtoTcp);
  Rule d = V4Rule(1, 5);  // every IPv4 packet
  rules = {a, b, c, d};
  RuleTable t;
  ReferenceClassifier ref;
  std::vector<RuleOp> ops;
  for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));
  ApplyOk(&t, ops);
  ASSERT_TRUE(ref.ApplyBatch(ops).ok());

  struct Probe {
    Flow key;
    uint64_t want;
  };
  const std::vector<Probe> probes = {
      {V4Key(0x0a000001, 0xc0a80001), 3},                     // a, b, d
      {V4Key(0x0a010001, 0xc0a80001, 1, 2, kIpProtoTcp), 9},  // c
      {V4Key(0x0a010001, 0x01010101, 1, 2, kIpProtoUdp), 5},  // a, d
      {V4Key(0x0b000001, 0x01010101), 1},                     // d
  };
  for (const Probe& p : probes) {
    Flow wc;
    EXPECT_EQ(IdOf(t.Lookup(p.key, &wc)), p.want) << Dump(p.key);
    EXPECT_EQ(IdOf(ref.Lookup(p.key)), p.want);
  }
  // Non-IP packets match nothing.
  Flow arp;
  arp.Set(Field::kEthType, kEthTypeArp);
  Flow wc;
  EXPECT_EQ(t.Lookup(arp, &wc), nullptr);
}

TEST(RuleTableTest, SameMatchSharesABucket) {
  Rule r7 = V4Rule(7, 1);
  r7.match.SetExact(Field::kTpDst, 80);
  Rule r4 = r7;
  r4.id = 4;
  Rule r8 = r7;
  r8.id = 8;
  r8.priority = 2;
  RuleTable t;
  ApplyOk(&t, {RuleOp::Insert(r7), RuleOp::Insert(r4)});
  EXPECT_EQ(t.Stats().subtables, 1u);
  EXPECT_EQ(t.Stats().entries, 2u);
  Flow wc;
  const Flow key = V4Key(1, 2, 3, 80);
  EXPECT_EQ(IdOf(t.Lookup(key, &wc)), 4u);
  ApplyOk(&t, {RuleOp::Insert(r8)});
  EXPECT_EQ(IdOf(t.Lookup(key, &wc)), 8u);
  ApplyOk(&t, {RuleOp::Delete(8), RuleOp::Delete(4)});
  EXPECT_EQ(IdOf(t.Lookup(key, &wc)), 7u);
  ApplyOk(&t, {RuleOp::Delete(7)});
  EXPECT_EQ(t.Lookup(key, &wc), nullptr);
  EXPECT_EQ(t.Stats().subtables, 0u);
}

TEST(RuleTableTest, EarlyStopAndMegaflowMask) {
  Rule high = SrcRule(1, 100, 0x0a000001);
  Rule low = DstRule(2, 1, 0x14000000, 8);
  RuleTable t;
  ApplyOk(&t, {RuleOp::Insert(high), RuleOp::Insert(low)});

  Flow wc;
  int visited = 0;
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0a000001, 0x14000001), &wc, &visited)), 1u);
  EXPECT_EQ(visited, 1);  // the priority-1 subtable cannot win
  EXPECT_EQ(wc, high.match.mask | InPortOnly());

  wc = Flow{};
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0a000002, 0x14000001), &wc, &visited)), 2u);
  EXPECT_EQ(visited, 2);
  EXPECT_EQ(wc, high.match.mask | low.match.mask | InPortOnly());

  // An equal-priority subtable must still be consulted (the tie-break may
  // pick its rule), so it is visited and its mask is in the megaflow (the
  // rule has no address: its port is in its table mask).
  Rule tie = V4Rule(3, 100);
  tie.match.SetExact(Field::kTpDst, 80);
  ApplyOk(&t, {RuleOp::Insert(tie)});
  wc = Flow{};
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0a000001, 0x14000001, 1, 80), &wc, &visited)),
            1u);
  EXPECT_EQ(visited, 2);
  EXPECT_EQ(wc, high.match.mask | tie.match.mask | InPortOnly());
  // ... and wins the tie when its id is lower: move the high rule to id 10.
  ApplyOk(&t, {RuleOp::Delete(1), RuleOp::Insert([&] {
                 Rule h = high;
                 h.id = 10;
                 return h;
               }())});
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0a000001, 0x14000001, 1, 80), &wc)), 3u);
}

TEST(RuleTableTest, PortsWalkTheirOwnSubtablesAndTheShared) {
  // Rules with in_port exact live in their port's partition: a key walks its
  // port's subtables merged (by priority) with those of rules without
  // in_port, never another port's.
  auto on_port = [](Rule r, uint32_t port) {
    r.match.SetExact(Field::kInPort, port);
    return r;
  };
  RuleTable t;
  // Port 1: three shapes.  Port 2: one shape.  Shared: one shape, between
  // port 1's priorities.
  ApplyOk(&t, {RuleOp::Insert(on_port(SrcRule(1, 100, 0x0a000001), 1)),
               RuleOp::Insert(on_port(DstRule(2, 90, 0x14000000, 8), 1)),
               RuleOp::Insert(on_port(DstRule(4, 90, 0x14000000, 8), 2)),  // same mask
               RuleOp::Insert(on_port(DstRule(3, 10, 0x14000000, 16), 1)),
               RuleOp::Insert(DstRule(5, 50, 0x14000000, 24))});
  EXPECT_EQ(t.Stats().subtables, 5u);  // one per (partition, mask)
  const Flow miss1 = V4Key(0x0c000001, 0x15000001, 1000, 80, kIpProtoTcp, 1);
  const Flow miss2 = V4Key(0x0c000001, 0x15000001, 1000, 80, kIpProtoTcp, 2);
  const Flow miss3 = V4Key(0x0c000001, 0x15000001, 1000, 80, kIpProtoTcp, 3);
  int visited = 0;
  Flow wc;
  EXPECT_EQ(t.Lookup(miss1, &wc, &visited), nullptr);
  EXPECT_EQ(visited, 4);  // port 1's three and the shared one
  EXPECT_EQ(t.Lookup(miss2, &wc, &visited), nullptr);
  EXPECT_EQ(visited, 2);
  wc = Flow{};
  EXPECT_EQ(t.Lookup(miss3, &wc, &visited), nullptr);
  EXPECT_EQ(visited, 1);  // no rules of its own: the shared one only
  // No rule's ipv4_dst starts with the key's 0x15: that byte is the whole
  // proof (not the subtable's mask, nor eth_type).
  Flow dst_byte = InPortOnly();
  dst_byte.Set(Field::kIpv4Dst, 0xff000000);
  EXPECT_EQ(wc, dst_byte);
  // The shared rule beats port 1's priority-10 rule, not its priority-90 one.
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0b000001, 0x14000001, 1000, 80, kIpProtoTcp, 1), &wc)), 2u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0b000001, 0x14140001, 1000, 80, kIpProtoTcp, 1), &wc)), 2u);
  ApplyOk(&t, {RuleOp::Delete(2)});
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0b000001, 0x14000001, 1000, 80, kIpProtoTcp, 1), &wc)), 5u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0b000001, 0x14000101, 1000, 80, kIpProtoTcp, 1), &wc)), 3u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0b000001, 0x14000001, 1000, 80, kIpProtoTcp, 2), &wc)), 4u);
  // A shared subtable that comes later reaches every port's walk.
  ApplyOk(&t, {RuleOp::Insert(SrcRule(6, 200, 0x0b000001))});
  for (uint32_t port : {1u, 2u, 3u})
    EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0b000001, 0x14000001, 1000, 80, kIpProtoTcp, port), &wc)), 6u)
        << "port " << port;
  // Port 2's partition empties and goes: its keys walk the shared subtables.
  ApplyOk(&t, {RuleOp::Delete(4)});
  EXPECT_EQ(t.Lookup(miss2, &wc, &visited), nullptr);
  EXPECT_EQ(visited, 2);
  EXPECT_EQ(t.Stats().subtables, 4u);
  // And comes back.
  ApplyOk(&t, {RuleOp::Insert(on_port(DstRule(4, 300, 0x14000000, 8), 2))});
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0b000001, 0x14000001, 1000, 80, kIpProtoTcp, 2), &wc)), 4u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0b000001, 0x14000001, 1000, 80, kIpProtoTcp, 1), &wc)), 6u);
  EXPECT_THAT(t.DebugString(), HasSubstr("in_port 2 subtable 0: max_priority=300"));
}

TEST(RuleTableTest, MaxPriorityFollowsDeletes) {
  // Subtable X (ipv4_src /32) holds priorities 100 and 1; subtable Y
  // (ipv4_dst /8) holds 50.
  Rule x100 = SrcRule(1, 100, 0x0a000001);
  Rule x1 = SrcRule(2, 1, 0x0a000002);
  Rule y50 = DstRule(3, 50, 0x14000000, 8);
  RuleTable t;
  ApplyOk(&t, {RuleOp::Insert(x100), RuleOp::Insert(x1), RuleOp::Insert(y50)});
  const Flow key = V4Key(0x0a000002, 0x14000001);
  Flow wc;
  int visited = 0;
  EXPECT_EQ(IdOf(t.Lookup(key, &wc, &visited)), 3u);
  EXPECT_EQ(visited, 2);  // X first (max 100), then Y
  EXPECT_THAT(t.DebugString(), HasSubstr("max_priority=100"));

  ApplyOk(&t, {RuleOp::Delete(1)});
  wc = Flow{};
  EXPECT_EQ(IdOf(t.Lookup(key, &wc, &visited)), 3u);
  EXPECT_EQ(visited, 1);  // Y (50) first; X now tops out at 1
  EXPECT_EQ(wc, y50.match.mask | InPortOnly());
  EXPECT_THAT(t.DebugString(), Not(HasSubstr("max_priority=100")));
}

// The subtable order is rebuilt only when it may have changed: a rule above
// its subtable's top priority is such a change (a stale order would stop
// the walk before the subtable that now holds the winner).
TEST(RuleTableTest, MaxPriorityFollowsInserts) {
  // Subtable X (ipv4_src /32) holds 10; subtable Y (ipv4_dst /8) holds 20.
  Rule x10 = SrcRule(1, 10, 0x0a000001);
  Rule y20 = DstRule(2, 20, 0x14000000, 8);
  RuleTable t;
  ApplyOk(&t, {RuleOp::Insert(x10), RuleOp::Insert(y20)});
  const Flow key = V4Key(0x0a000002, 0x14000001);
  Flow wc;
  EXPECT_EQ(IdOf(t.Lookup(key, &wc)), 2u);
  // Into X, above both: X must now be walked first.
  Rule x30 = SrcRule(3, 30, 0x0a000002);
  ApplyOk(&t, {RuleOp::Insert(x30)});
  int visited = 0;
  wc = Flow{};
  EXPECT_EQ(IdOf(t.Lookup(key, &wc, &visited)), 3u);
  EXPECT_EQ(visited, 1);  // X (max 30) first; Y (max 20) cannot win: not probed
  EXPECT_THAT(t.DebugString(), HasSubstr("max_priority=30"));
  // Into X below its top: nothing to reorder, answers unchanged.
  Rule x5 = SrcRule(4, 5, 0x0a000003);
  ApplyOk(&t, {RuleOp::Insert(x5)});
  wc = Flow{};
  EXPECT_EQ(IdOf(t.Lookup(key, &wc)), 3u);
  wc = Flow{};
  EXPECT_EQ(IdOf(t.Lookup(V4Key(0x0a000003, 0x14000001), &wc)), 2u);
}

// A rule is one entry whatever its ranges (they are checked per candidate,
// not expanded into prefixes).
TEST(RuleTableTest, PortRangesAreOneEntryAndMatchAtTheEdges) {
  Rule r = V4Rule(1, 10);
  r.match.tp_src = {1, 65534};
  r.match.tp_dst = {1024, 65535};
  Rule one = V4Rule(2, 5);
  one.match.tp_dst = {80, 80};
  RuleTable t;
  ApplyOk(&t, {RuleOp::Insert(r), RuleOp::Insert(one)});
  RuleTableStats s = t.Stats();
  EXPECT_EQ(s.rules, 2u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.expanded_rules, 0u);
  EXPECT_THAT(t.DebugString(), HasSubstr("tp_dst=1024-65535 actions=output:1 entries=1"));
  Flow wc;
  EXPECT_EQ(IdOf(t.Lookup(V4Key(1, 2, 0, 2000), &wc)), 0u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(1, 2, 1, 2000), &wc)), 1u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(1, 2, 65534, 2000), &wc)), 1u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(1, 2, 65535, 2000), &wc)), 0u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(1, 2, 7, 1023), &wc)), 0u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(1, 2, 7, 1024), &wc)), 1u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(1, 2, 7, 65535), &wc)), 1u);
  EXPECT_EQ(IdOf(t.Lookup(V4Key(1, 2, 0, 80), &wc)), 2u);
  ApplyOk(&t, {RuleOp::Delete(1)});
  s = t.Stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.expanded_rules, 0u);
  EXPECT_EQ(s.subtables, 1u);
}

TEST(RuleTableTest, BatchSemantics) {
  RuleTable t;
  Rule r1 = V4Rule(1, 1);
  r1.cookie = 7;
  Rule r2 = V4Rule(2, 2);
  r2.match.SetExact(Field::kNwProto, kIpProtoUdp);
  r2.cookie = 7;
  Rule r3 = V4Rule(3, 3);
  r3.match.SetExact(Field::kTpDst, 22);
  r3.cookie = 8;

  // Empty batch: OK, no generation bump.
  auto res = t.ApplyBatch({});
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->generation, 0u);
  EXPECT_EQ(t.generation(), 0u);

  res = t.ApplyBatch(
      {RuleOp::Insert(r1), RuleOp::Insert(r2), RuleOp::Insert(r3)});
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->inserted, 3u);
  EXPECT_EQ(res->generation, 1u);
  EXPECT_EQ(res->rules, 3u);
  EXPECT_EQ(t.generation(), 1u);

  // Insert then delete the same id, delete then re-insert, replace of an id
  // inserted earlier in the batch: all fine.
  Rule r4 = V4Rule(4, 4);
  Rule r3b = r3;
  r3b.priority = 30;
  r3b.cookie = 9;
  Rule r4b = r4;
  r4b.action = Action::Drop();
  res = t.ApplyBatch({RuleOp::Insert(r4), RuleOp::Delete(4), RuleOp::Delete(3),
                      RuleOp::Insert(r3b), RuleOp::Insert(r4),
                      RuleOp::Replace(r4b)});
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->inserted, 3u);
  EXPECT_EQ(res->deleted, 2u);
  EXPECT_EQ(res->replaced, 1u);
  EXPECT_EQ(res->rules, 4u);  // 1, 2, 3 (replaced by r3b) and 4
  EXPECT_EQ(t.generation(), 2u);
  ASSERT_NE(t.Find(4), nullptr);
  EXPECT_EQ(t.Find(4)->action, Action::Drop());
  EXPECT_EQ(t.Find(3)->priority, 30u);

  // Delete by cookie sees rules inserted earlier in the same batch, and
  // matches the cookie as it is after earlier replaces.
  Rule r5 = V4Rule(5, 5);
  r5.cookie = 7;
  Rule r2b = r2;
  r2b.cookie = 9;  // r2 no longer carries cookie 7
  Rule r5b = r5;
  r5b.cookie = 8;
  res = t.ApplyBatch({RuleOp::Insert(r5), RuleOp::Replace(r2b),
                      RuleOp::DeleteByCookie(7), RuleOp::Replace(r2b),
                      RuleOp::Insert(r5b)});  // r5 is gone: insert is fine
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->deleted, 2u);  // r1 and r5
  EXPECT_EQ(res->inserted, 2u);
  EXPECT_EQ(res->rules, 4u);
  EXPECT_EQ(t.Find(1), nullptr);
  ASSERT_NE(t.Find(5), nullptr);
  EXPECT_EQ(t.Find(5)->cookie, 8u);
  ASSERT_NE(t.Find(2), nullptr);
  // A cookie nobody has: the batch changes nothing, and keeps the generation
  // (nothing for PMDs to revalidate, no new rule set to acknowledge).
  res = t.ApplyBatch({RuleOp::DeleteByCookie(12345), RuleOp::DeleteByCookie(54321)});
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->deleted, 0u);
  EXPECT_EQ(res->generation, 3u);
  EXPECT_EQ(t.generation(), 3u);

  std::vector<uint64_t> ids;
  for (const Rule* r : t.Rules()) ids.push_back(r->id);
  EXPECT_THAT(ids, ElementsAre(3, 5, 4, 2));  // priorities 30, 5, 4, 2
  EXPECT_EQ(t.size(), 4u);
  res = t.ApplyBatch({RuleOp::DeleteByCookie(9)});  // r3b and r2b
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->deleted, 2u);
  EXPECT_EQ(t.size(), 2u);
}

TEST(RuleTableTest, RulesOrderIsPriorityThenId) {
  RuleTable t;
  std::vector<RuleOp> ops;
  const uint32_t prios[] = {5, 9, 5, 1, 9, 5};
  for (uint64_t id = 6; id >= 1; --id) {
    Rule r = V4Rule(id, prios[id - 1]);
    r.match.SetExact(Field::kTpSrc, id);
    ops.push_back(RuleOp::Insert(r));
  }
  ApplyOk(&t, ops);
  std::vector<uint64_t> ids;
  for (const Rule* r : t.Rules()) ids.push_back(r->id);
  EXPECT_THAT(ids, ElementsAre(2, 5, 1, 3, 6, 4));
}

TEST(RuleTableTest, CopyIsIndependent) {
  RandomRuleGen gen(42);
  std::vector<Rule> live;
  uint64_t next_id = 1;
  RuleTable t;
  ApplyOk(&t, gen.NextBatch(60, &live, &next_id));
  const RuleTable copy(t);
  EXPECT_EQ(copy.DebugString(), t.DebugString());
  EXPECT_EQ(Snapshot(copy), Snapshot(t));
  EXPECT_EQ(copy.generation(), t.generation());
  const std::string before = copy.DebugString();
  std::vector<Flow> keys;
  std::vector<uint64_t> want;
  for (int i = 0; i < 300; ++i) {
    keys.push_back(gen.NextKeyNear(live));
    Flow wc;
    want.push_back(IdOf(t.Lookup(keys.back(), &wc)));
  }
  // Changing the original leaves the copy alone: the copy has structures of
  // its own and shares only the immutable Rule objects, which outlive the
  // original's references to them (ASan would see a use after free).
  std::vector<RuleOp> wipe;
  for (const Rule* r : t.Rules()) wipe.push_back(RuleOp::Delete(r->id));
  ApplyOk(&t, wipe);
  live.clear();
  ApplyOk(&t, gen.NextBatch(30, &live, &next_id));
  EXPECT_EQ(copy.DebugString(), before);
  for (size_t i = 0; i < keys.size(); ++i) {
    Flow wc;
    EXPECT_EQ(IdOf(copy.Lookup(keys[i], &wc)), want[i]);
  }
}

// The walks are edited batch by batch (internal/rule_walk.h), never built
// again: after every batch of a random churn (one-rule inserts, deletes and
// replaces that make subtables come, go and change max priority, on three
// ports and the shared partition; now and then a bigger batch), the table
// prints and answers like a copy, whose walks are sorted whole: the same
// rule, megaflow mask and subtables visited for every key.  With and
// without concurrent readers (whose deletes are unlinked later).
TEST(RuleTableTest, EditedWalksEqualAFromScratchBuildUnderChurn) {
  for (const bool concurrent : {false, true}) {
    SCOPED_TRACE(concurrent ? "concurrent readers" : "plain");
    RandomRuleOptions options;
    options.max_priority = 40;
    options.in_ports = 3;
    RandomRuleGen gen(concurrent ? 2213 : 2212, options);
    std::vector<Rule> live;
    uint64_t next_id = 1;
    RuleTable t({}, concurrent);
    ApplyOk(&t, gen.NextBatch(150, &live, &next_id));
    const int steps = Scaled(1500);
    for (int step = 0; step < steps; ++step) {
      std::vector<RuleOp> ops;
      const uint64_t c = gen.Uniform(10);
      if (c == 0) {
        ops = gen.NextBatch(1 + static_cast<int>(gen.Uniform(20)), &live, &next_id);
      } else if (c <= 3 || live.size() < 50) {
        live.push_back(gen.NextRule(next_id++));
        ops.push_back(RuleOp::Insert(live.back()));
      } else if (c <= 6) {
        const size_t i = gen.Uniform(live.size());
        ops.push_back(RuleOp::Delete(live[i].id));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {  // the same id, another match and priority
        const size_t i = gen.Uniform(live.size());
        live[i] = gen.NextRule(live[i].id);
        ops.push_back(RuleOp::Replace(live[i]));
      }
      ApplyOk(&t, ops);
      if (concurrent) {
        t.RemoveDeleted();  // else deleted rules still count in the walks
        if (gen.Chance(0.5)) t.FreeRetired();
      }
      const RuleTable copy(t);
      ASSERT_EQ(t.DebugString(), copy.DebugString()) << "step " << step;
      for (int k = 0; k < 20; ++k) {
        const Flow key = gen.NextKeyNear(live);
        Flow wc, copy_wc;
        int visited = 0, copy_visited = 0;
        const uint64_t id = IdOf(t.Lookup(key, &wc, &visited));
        ASSERT_EQ(id, IdOf(copy.Lookup(key, &copy_wc, &copy_visited)))
            << "step " << step << " key " << Dump(key);
        ASSERT_EQ(Dump(wc), Dump(copy_wc)) << "step " << step << " key " << Dump(key);
        ASSERT_EQ(visited, copy_visited) << "step " << step << " key " << Dump(key);
      }
    }
    if (concurrent) t.FreeRetired();
  }
}

// DeleteAll is one batch that deletes every rule: the same table as a batch
// deleting each rule by id, limits kept, ids free for reuse.
TEST(RuleTableTest, DeleteAllIsABatchDeletingEveryRule) {
  RandomRuleOptions opts;
  opts.cookies = 3;
  RandomRuleGen gen(77, opts);
  std::vector<Rule> live;
  uint64_t next_id = 1;
  RuleTableLimits limits;
  limits.max_rules = 200;
  RuleTable all(limits), by_id(limits);
  for (int b = 0; b < 4; ++b) {
    const std::vector<RuleOp> ops = gen.NextBatch(30, &live, &next_id);
    ASSERT_TRUE(all.ApplyBatch(ops).ok());
    ASSERT_TRUE(by_id.ApplyBatch(ops).ok());
  }
  ASSERT_FALSE(live.empty());
  std::vector<RuleOp> wipe;
  for (const Rule& rule : live) wipe.push_back(RuleOp::Delete(rule.id));
  absl::StatusOr<BatchResult> want = by_id.ApplyBatch(wipe);
  ASSERT_TRUE(want.ok()) << want.status();
  const BatchResult got = all.DeleteAll();
  EXPECT_EQ(got.deleted, live.size());
  EXPECT_EQ(got.deleted, want->deleted);
  EXPECT_EQ(got.generation, want->generation);
  EXPECT_EQ(got.rules, 0u);
  EXPECT_EQ(all.DebugString(), by_id.DebugString());
  for (const Rule& rule : live) EXPECT_EQ(all.Find(rule.id), nullptr);
  Flow wc;
  EXPECT_EQ(all.Lookup(gen.NextKeyNear(live), &wc), nullptr);

  // Nothing to delete: nothing changes.
  const BatchResult again = all.DeleteAll();
  EXPECT_EQ(again.deleted, 0u);
  EXPECT_EQ(again.generation, got.generation);

  // The old ids insert again, the limit still holds, and the refilled
  // tables agree.
  std::vector<RuleOp> back;
  for (const Rule& rule : live) back.push_back(RuleOp::Insert(rule));
  ASSERT_TRUE(all.ApplyBatch(back).ok());
  ASSERT_TRUE(by_id.ApplyBatch(back).ok());
  EXPECT_EQ(all.DebugString(), by_id.DebugString());
  std::vector<RuleOp> too_many;
  for (size_t i = 0; i <= limits.max_rules - live.size(); ++i) {
    Rule r = live.front();
    r.id = 1000000 + i;
    too_many.push_back(RuleOp::Insert(r));
  }
  EXPECT_EQ(all.ApplyBatch(too_many).status().code(), absl::StatusCode::kResourceExhausted);
}

// An empty batch, and one that changes nothing, keep the generation.
TEST(RuleTableTest, EmptyBatchChangesNothing) {
  RuleTable t;
  ASSERT_TRUE(t.ApplyBatch({RuleOp::Insert(V4Rule(1, 1))}).ok());
  absl::StatusOr<BatchResult> r = t.ApplyBatch({});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->generation, 1u);
  EXPECT_EQ(r->rules, 1u);
  ASSERT_TRUE(t.ApplyBatch({RuleOp::Insert(V4Rule(2, 1))}).ok());
  r = t.ApplyBatch({RuleOp::DeleteByCookie(777)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->generation, 2u);
  EXPECT_EQ(r->rules, 2u);
}

TEST(RuleTableTest, FlowKeyLookupEqualsFlowLookup) {
  RandomRuleGen gen(3);
  std::vector<Rule> live;
  uint64_t next_id = 1;
  RuleTable t;
  ApplyOk(&t, gen.NextBatch(100, &live, &next_id));
  for (int i = 0; i < 2000; ++i) {
    const Flow key = gen.NextKeyNear(live);
    Flow wc1, wc2;
    int v1 = 0, v2 = 0;
    const Rule* a = t.Lookup(key, &wc1, &v1);
    const Rule* b = t.Lookup(FlowKey::FromFlow(key), &wc2, &v2);
    ASSERT_EQ(a, b);
    ASSERT_EQ(wc1, wc2);
    ASSERT_EQ(v1, v2);
  }
}

TEST(RuleTableTest, LookupAllocatesNothing) {
  RandomRuleGen gen(5);
  std::vector<Rule> live;
  uint64_t next_id = 1;
  RuleTable t;
  ApplyOk(&t, gen.NextBatch(300, &live, &next_id));
  std::vector<Flow> keys;
  std::vector<FlowKey> fkeys;
  for (int i = 0; i < 1000; ++i) {
    keys.push_back(gen.NextKeyNear(live));
    fkeys.push_back(FlowKey::FromFlow(keys.back()));
  }
  uint64_t sum = 0;
  const long before = g_allocations.load();
  for (size_t i = 0; i < keys.size(); ++i) {
    Flow wc;
    int visited;
    sum += IdOf(t.Lookup(keys[i], &wc, &visited));
    sum += IdOf(t.Lookup(fkeys[i], &wc, nullptr));
  }
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_GT(sum, 0u);
}

TEST(RuleTableTest, DebugStringShowsSubtablesAndRules) {
  Rule r = V4Rule(12, 77);
  r.cookie = 0xab;
  r.match.SetMasked(Field::kIpv4Src, 0x0a010000, Prefix32(16));
  r.match.tp_dst = {1000, 1999};
  RuleTable t;
  ApplyOk(&t, {RuleOp::Insert(r)});
  const std::string d = t.DebugString();
  // The subtable's mask: the rule's, relaxed (a /16 stays, the range is
  // checked per rule).
  EXPECT_THAT(d, HasSubstr("generation=1 rules=1"));
  EXPECT_THAT(d, HasSubstr("subtables=" + std::to_string(t.Stats().subtables)));
  EXPECT_THAT(d, HasSubstr("max_priority=77"));
  EXPECT_THAT(d, HasSubstr("mask=eth_type/0xffff,ipv4_src/0xffff0000\n"));
  EXPECT_THAT(d, HasSubstr("id=12 priority=77 cookie=0xab"));
  EXPECT_THAT(d, HasSubstr("ipv4_src=10.1.0.0/16"));
  EXPECT_THAT(d, HasSubstr("tp_dst=1000-1999"));
  EXPECT_THAT(d, HasSubstr("actions=output:12"));
}

}  // namespace
}  // namespace flowclass
