// Tests for RuleTable: range splitting, lookup semantics (priority, tie-break,
// early stop, megaflow mask), batch semantics and atomicity, copies, and a
// differential test against ReferenceClassifier over random rule sets.
#include "dataplane/rule_table.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/flow.h"
#include "dataplane/rule.h"
#include "dataplane/rule_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/random_rules.h"
#include "tests/common/reference_classifier.h"
#include "tests/common/rule_builders.h"

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
using ::testing::StartsWith;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
// Iteration counts shrink under ASan so every binary stays well under 20 s.
int Scaled(int n) { return kSanitized ? std::max(1, n / 10) : n; }

uint64_t IdOf(const Rule* r) { return r == nullptr ? 0 : r->id; }

std::string Dump(const Flow& f) {
  std::string out;
  for (int i = 0; i < kFlowWords; ++i)
    absl::StrAppend(&out, i ? " " : "", absl::StrFormat("%016x", f.w[i]));
  return out;
}

std::vector<Rule> Snapshot(const RuleTable& t) {
  std::vector<Rule> out;
  for (const Rule* r : t.Rules()) out.push_back(*r);
  return out;
}

// The rule builders of tests/common with output:<id>.
Rule V4Rule(uint64_t id, uint32_t priority) {
  return Ipv4Rule(id, priority, Action::Output(static_cast<uint32_t>(id)));
}
Rule SrcRule(uint64_t id, uint32_t priority, uint32_t src) {
  return Ipv4SrcRule(id, priority, src, 32, Action::Output(static_cast<uint32_t>(id)));
}
Rule DstRule(uint64_t id, uint32_t priority, uint32_t dst, int len) {
  return Ipv4DstRule(id, priority, dst, len, Action::Output(static_cast<uint32_t>(id)));
}

Flow V4Key(uint32_t src, uint32_t dst, uint16_t sp = 1000, uint16_t dp = 80,
           uint8_t proto = kIpProtoTcp, uint32_t in_port = 1) {
  return MakeFiveTupleKey(src, dst, sp, dp, proto, in_port).ToFlow();
}

void ApplyOk(RuleTable* t, const std::vector<RuleOp>& ops) {
  const auto r = t->ApplyBatch(ops);
  ASSERT_TRUE(r.ok()) << r.status();
}

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

// A group's change set: the batches' matches, merged without copies and
// grown in chunks, are all there and only they are (MayAffect per megaflow).
TEST(RuleChangeSetTest, MergedBatchesNameEveryMatchAndNoOther) {
  RuleTable table;
  RuleChangeSet group;
  std::vector<Rule> inserted;
  uint64_t id = 0;
  // Batches on port 1, port 2, port 1 again and, every third rule, on no
  // exact port; each of a different size so chunks end at different places.
  const int ports[] = {1, 2, 1, 1};
  const int sizes[] = {700, 17, 1500, 40};
  for (int b = 0; b < 4; ++b) {
    std::vector<RuleOp> ops;
    for (int i = 0; i < sizes[b]; ++i) {
      ++id;
      Rule r = Ipv4SrcRule(id, 10, 0x0a000000u + static_cast<uint32_t>(id), 32,
                           Action::Output(1));
      if (id % 3 != 0) r.match.SetExact(Field::kInPort, static_cast<uint64_t>(ports[b]));
      inserted.push_back(r);
      ops.push_back(RuleOp::Insert(r));
    }
    RuleChangeSet cs = MakeRuleChangeSet(table, ops);
    EXPECT_EQ(cs.size(), ops.size());
    ASSERT_TRUE(table.ApplyBatch(ops).ok());
    group.Merge(std::move(cs));
    EXPECT_EQ(cs.size(), 0u);  // taken over
  }
  EXPECT_EQ(group.size(), inserted.size());
  EXPECT_EQ(group.by_in_port.size(), 2u);
  auto megaflow = [](uint32_t port, uint32_t src, Flow* value, Flow* mask) {
    value->Set(Field::kInPort, port);
    mask->Set(Field::kInPort, 0xffffffffu);
    value->Set(Field::kEthType, kEthTypeIpv4);
    mask->Set(Field::kEthType, 0xffff);
    value->Set(Field::kIpv4Src, src);
    mask->Set(Field::kIpv4Src, 0xffffffffu);
  };
  for (const Rule& r : inserted) {
    const bool any_port = r.match.mask.Get(Field::kInPort) == 0;
    const auto port = static_cast<uint32_t>(r.match.value.Get(Field::kInPort));
    const auto src = static_cast<uint32_t>(r.match.value.Get(Field::kIpv4Src));
    for (uint32_t on : {1u, 2u, 3u}) {
      Flow value, mask;
      megaflow(on, src, &value, &mask);
      EXPECT_EQ(group.MayAffect(value, mask, 0), any_port || on == port)
          << "rule " << r.id << " on port " << on;
    }
  }
  Flow value, mask;
  megaflow(1, 0x0b000000u, &value, &mask);  // overlaps no rule
  EXPECT_FALSE(group.MayAffect(value, mask, 0));
  group.Clear();
  EXPECT_EQ(group.size(), 0u);
}

// The sealed index (by the top byte of ipv4_src) answers MayAffect as the
// unsealed scan does: matches and megaflows with prefixes shorter, equal
// and longer than a byte, on ports with and without exact in_port.
TEST(RuleChangeSetTest, DeleteByCookieNamesTheRulesCarryingItAtThatPoint) {
  // deleted_ids resets a rule's hits (a new rule): a delete by cookie names
  // the rules that carry the cookie where it stands in the batch.
  auto with_cookie = [](uint64_t id, uint64_t cookie) {
    Rule r = Ipv4SrcRule(id, 10, 0x0a000000u + static_cast<uint32_t>(id), 32, Action::Output(1));
    r.cookie = cookie;
    return r;
  };
  RuleTable table;
  ASSERT_TRUE(table
                  .ApplyBatch({RuleOp::Insert(with_cookie(1, 7)), RuleOp::Insert(with_cookie(2, 8)),
                               RuleOp::Insert(with_cookie(3, 7))})
                  .ok());
  // Rule 2 takes cookie 7 only after the delete: it stays (replaced).
  // Rule 3 loses cookie 7 before it: it stays (replaced).  Rule 4 is
  // inserted with 7 before it: gone.  Rule 5 comes after it: stays.
  const std::vector<RuleOp> ops = {
      RuleOp::Replace(with_cookie(3, 9)), RuleOp::Insert(with_cookie(4, 7)),
      RuleOp::DeleteByCookie(7), RuleOp::Replace(with_cookie(2, 7)),
      RuleOp::Insert(with_cookie(5, 7))};
  const RuleChangeSet cs = MakeRuleChangeSet(table, ops);
  EXPECT_THAT(cs.deleted_ids, ::testing::UnorderedElementsAre(1u, 4u));
  EXPECT_THAT(cs.removed_ids, ::testing::UnorderedElementsAre(1u, 2u, 3u, 4u));
  ASSERT_TRUE(table.ApplyBatch(ops).ok());
  EXPECT_EQ(table.Find(1), nullptr);
  EXPECT_EQ(table.Find(4), nullptr);
  for (uint64_t id : {2u, 3u, 5u}) EXPECT_NE(table.Find(id), nullptr) << id;
}

TEST(RuleChangeSetTest, SealedIndexAnswersAsTheScan) {
  std::mt19937 rng(5);
  const int lens[] = {0, 4, 7, 8, 9, 16, 24, 32};
  auto prefix = [&](Flow* value, Flow* mask, Field f, int min_len = 0) {
    int len = lens[rng() % 8];
    while (len < min_len) len = lens[rng() % 8];
    const uint32_t m = Prefix32(len);
    // Few top bytes, so that buckets hold several matches.
    const uint32_t a = (static_cast<uint32_t>(rng() % 6) << 24) | (static_cast<uint32_t>(rng()) & 0xffffff);
    value->Set(f, a & m);
    mask->Set(f, m);
  };
  RuleChangeSet unsealed;
  for (int batch = 0; batch < 3; ++batch) {
    RuleChangeSet cs;
    for (int i = 0; i < 40; ++i) {
      Match m;
      m.SetExact(Field::kEthType, kEthTypeIpv4);
      if (rng() % 8 != 0) m.SetExact(Field::kInPort, 1 + rng() % 3);
      prefix(&m.value, &m.mask, Field::kIpv4Src, /*min_len=*/4);
      prefix(&m.value, &m.mask, Field::kIpv4Dst, /*min_len=*/16);
      if (m.mask.Get(Field::kInPort) != 0) {
        cs.by_in_port[static_cast<uint32_t>(m.value.Get(Field::kInPort))].push_back(m);
      } else {
        cs.any_in_port.push_back(m);
      }
    }
    unsealed.Merge(std::move(cs));
  }
  RuleChangeSet sealed = unsealed;  // a copy: not indexed
  sealed.Seal();
  const RuleChangeSet copy_of_sealed = sealed;
  int affected = 0;
  for (int i = 0; i < 20000; ++i) {
    Flow value, mask;
    value.Set(Field::kInPort, 1 + rng() % 4);
    mask.Set(Field::kInPort, 0xffffffffu);
    value.Set(Field::kEthType, kEthTypeIpv4);
    mask.Set(Field::kEthType, 0xffff);
    prefix(&value, &mask, Field::kIpv4Src);
    prefix(&value, &mask, Field::kIpv4Dst);
    const bool want = unsealed.MayAffect(value, mask, 0);
    ASSERT_EQ(sealed.MayAffect(value, mask, 0), want) << i;
    ASSERT_EQ(copy_of_sealed.MayAffect(value, mask, 0), want) << i;
    affected += want;
  }
  EXPECT_GT(affected, 1000);   // both answers occur often
  EXPECT_LT(affected, 19000);
}

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
  // pick its rule), so it is visited and its mask is in the megaflow.
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
  EXPECT_EQ(wc, DstRule(5, 50, 0x14000000, 24).match.mask | InPortOnly());
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

TEST(RuleTableTest, PortRangesExpandAndMatchAtTheEdges) {
  Rule r = V4Rule(1, 10);
  r.match.tp_src = {1, 65534};
  r.match.tp_dst = {1024, 65535};
  Rule one = V4Rule(2, 5);
  one.match.tp_dst = {80, 80};
  RuleTable t;
  ApplyOk(&t, {RuleOp::Insert(r), RuleOp::Insert(one)});
  RuleTableStats s = t.Stats();
  EXPECT_EQ(s.rules, 2u);
  EXPECT_EQ(s.entries, 30u * 6u + 1u);
  EXPECT_EQ(s.expanded_rules, 1u);
  EXPECT_THAT(t.DebugString(), HasSubstr("entries=180"));
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

// A table with concurrent readers gives, at its latest generation, what a
// plain table gives; at the generation before a batch, what the plain table
// gave before it (deleted rules stay linked until RemoveDeleted), through
// inserts, deletes, replaces, deletes by cookie and subtables that empty and
// come back (the last-subtable cache must not outlive its subtable).
TEST(RuleTableTest, ConcurrentReadersTableKeepsEachGeneration) {
  RandomRuleOptions opts;
  opts.cookies = 4;
  RandomRuleGen gen(2024, opts);
  std::vector<Rule> live;
  uint64_t next_id = 1;
  RuleTable plain, versioned({}, /*concurrent_readers=*/true);
  size_t unlinked = 0, freed = 0;
  auto apply_both = [&](const std::vector<RuleOp>& ops, int b) {
    // The answers before the batch, for keys near the rules before and after.
    std::vector<Flow> keys;
    std::vector<std::pair<uint64_t, Flow>> before;
    for (int k = 0; k < 40; ++k) {
      keys.push_back(gen.NextKeyNear(live));
      Flow wc;
      const uint64_t id = IdOf(plain.Lookup(keys.back(), &wc));
      before.emplace_back(id, wc);
    }
    const uint64_t old_gen = plain.generation();
    absl::StatusOr<BatchResult> r = plain.ApplyBatch(ops);
    ASSERT_TRUE(r.ok()) << r.status();
    absl::StatusOr<BatchResult> v = versioned.ApplyBatch(ops);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->generation, r->generation);
    EXPECT_EQ(v->inserted, r->inserted);
    EXPECT_EQ(v->deleted, r->deleted);
    EXPECT_EQ(v->replaced, r->replaced);
    EXPECT_EQ(v->rules, r->rules);
    for (int k = 0; k < 40; ++k) {
      Flow wp, wv, wold;
      ASSERT_EQ(IdOf(versioned.Lookup(keys[k], &wv)), IdOf(plain.Lookup(keys[k], &wp)))
          << "batch " << b << " key " << k;
      ASSERT_EQ(IdOf(versioned.Lookup(keys[k], &wold, nullptr, old_gen)), before[k].first)
          << "batch " << b << " key " << k << " at the generation before";
      // Deleted rules' subtables are still visited: the mask may be wider.
      for (int w = 0; w < kFlowWords; ++w)
        ASSERT_EQ(wold.w[w] & before[k].second.w[w], before[k].second.w[w]);
    }
    unlinked += versioned.RemoveDeleted();
    freed += versioned.FreeRetired();
    EXPECT_EQ(versioned.Stats().subtables, plain.Stats().subtables) << "batch " << b;
    ASSERT_EQ(versioned.DebugString(), plain.DebugString()) << "batch " << b;
    for (int k = 0; k < 40; ++k) {
      Flow wp, wv;
      ASSERT_EQ(IdOf(versioned.Lookup(keys[k], &wv)), IdOf(plain.Lookup(keys[k], &wp)));
      ASSERT_EQ(wv, wp);
    }
  };
  for (int b = 0; b < 60; ++b) {
    apply_both(gen.NextBatch(b % 10 == 9 ? 0 : 25, &live, &next_id), b);
    if (b % 15 == 14) {  // empty every subtable, then refill the same shapes
      std::vector<RuleOp> wipe;
      for (const Rule& rule : live) wipe.push_back(RuleOp::Delete(rule.id));
      apply_both(wipe, b);
      std::vector<RuleOp> back;
      for (Rule rule : live) {
        rule.id = next_id++;
        back.push_back(RuleOp::Insert(rule));
      }
      live.clear();
      for (const RuleOp& op : back) live.push_back(op.rule);
      apply_both(back, b);
    }
  }
  EXPECT_GT(plain.size(), 0u);
  EXPECT_GT(unlinked, 0u);
  EXPECT_GT(freed, 0u);
  // A plain table unlinks and frees as it goes.
  EXPECT_EQ(plain.RemoveDeleted(), 0u);
  EXPECT_EQ(plain.FreeRetired(), 0u);
}

// A key that takes many rules in one batch (rules that differ only in
// priority and id) grows its list in place, doubling: a copy per rule would
// all be retired until the publication (quadratic memory).  Unlinking them
// all leaves holes and compacts now and then.  FreeRetired's count of freed
// blocks tells how many lists were replaced.
TEST(RuleTableTest, ManyRulesOnOneKeyRetireFewLists) {
  constexpr int kRules = 2000;
  RuleTable t({}, /*concurrent_readers=*/true);
  std::vector<RuleOp> ops, dels;
  for (int i = 0; i < kRules; ++i) {
    Rule r = V4Rule(i + 1, static_cast<uint32_t>(i % 7));
    ops.push_back(RuleOp::Insert(r));
    dels.push_back(RuleOp::Delete(i + 1));
  }
  ASSERT_TRUE(t.ApplyBatch(ops).ok());
  Flow wc;
  const Flow key = V4Key(1, 2, 3, 4);
  // Priority 6 at ids 7, 14, ...: the lowest id of the top priority wins.
  EXPECT_EQ(IdOf(t.Lookup(key, &wc)), 7u);
  const size_t grown = t.FreeRetired();
  EXPECT_LE(grown, 16u);  // ~log2(2000) doublings, plus the order and arrays
  ASSERT_TRUE(t.ApplyBatch(dels).ok());
  EXPECT_EQ(t.Lookup(key, &wc), nullptr);
  EXPECT_EQ(IdOf(t.Lookup(key, &wc, nullptr, 1)), 7u);  // still linked
  EXPECT_EQ(t.RemoveDeleted(), size_t{kRules});
  const size_t unlinked = t.FreeRetired();
  EXPECT_LE(unlinked, size_t{kRules} + 32);  // the nodes, a few lists, the order
  EXPECT_GE(unlinked, size_t{kRules});
}

// One thread applies batches to a concurrent-readers table and publishes
// each generation; another looks up keys at the generation it last saw, and
// must get exactly what a plain table gave at that generation, while the
// writer inserts, grows key sets, replaces lists and subtables and unlinks.
// The writer unlinks and frees only once the reader has reported a newer
// generation (the dataplane's grace period).  ASan (make test's sanitizer
// build) catches memory freed too early.
TEST(RuleTableTest, LookupsOnAnotherThreadSeeThePublishedGeneration) {
  RandomRuleOptions opts;
  opts.cookies = 4;
  RandomRuleGen gen(4242, opts);
  std::vector<Rule> live;
  uint64_t next_id = 1;
  constexpr int kBatches = 120;
  constexpr int kKeys = 48;
  // The batches (each one a new generation), then per generation the plain
  // table's answers for the keys.
  std::vector<std::vector<RuleOp>> batches;
  std::vector<Flow> keys;
  {
    RuleTable sim;
    for (int b = 0; b < kBatches; ++b) {
      std::vector<RuleOp> ops;
      if (b % 30 == 29) {  // empty every subtable
        for (const Rule& rule : live) ops.push_back(RuleOp::Delete(rule.id));
        live.clear();
      } else {
        ops = gen.NextBatch(40, &live, &next_id);
      }
      ASSERT_TRUE(sim.ApplyBatch(ops).ok());
      if (sim.generation() != batches.size() + 1) continue;  // changed nothing
      batches.push_back(std::move(ops));
      if (keys.size() < kKeys && b % 2 == 0) keys.push_back(gen.NextKeyNear(live));
    }
  }
  while (keys.size() < kKeys) keys.push_back(gen.NextKeyNear(live));
  ASSERT_GE(batches.size(), size_t{kBatches} * 9 / 10);
  RuleTable plain;
  std::vector<std::vector<uint64_t>> want;  // [generation][key]
  auto answers = [&](const RuleTable& t) {
    std::vector<uint64_t> ids;
    for (const Flow& key : keys) {
      Flow wc;
      ids.push_back(IdOf(t.Lookup(key, &wc)));
    }
    return ids;
  };
  want.push_back(answers(plain));
  for (const std::vector<RuleOp>& ops : batches) {
    ASSERT_TRUE(plain.ApplyBatch(ops).ok());
    ASSERT_EQ(plain.generation(), want.size());
    want.push_back(answers(plain));
  }

  RuleTable table({}, /*concurrent_readers=*/true);
  std::atomic<uint64_t> published{0}, reported{0};
  std::atomic<bool> done{false};
  std::atomic<uint64_t> lookups{0}, wrong{0};
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {
      const uint64_t g = published.load(std::memory_order_acquire);
      for (int k = 0; k < kKeys; ++k) {
        Flow wc;
        if (IdOf(table.Lookup(keys[k], &wc, nullptr, g)) != want[g][k])
          wrong.fetch_add(1, std::memory_order_relaxed);
        lookups.fetch_add(1, std::memory_order_relaxed);
      }
      reported.store(g, std::memory_order_release);  // quiescent point
    }
  });
  auto wait_for_reader = [&](uint64_t g) {
    while (reported.load(std::memory_order_acquire) < g) std::this_thread::yield();
  };
  for (const std::vector<RuleOp>& ops : batches) {
    absl::StatusOr<BatchResult> r = table.ApplyBatch(ops);
    ASSERT_TRUE(r.ok()) << r.status();
    published.store(r->generation, std::memory_order_release);
    wait_for_reader(r->generation);
    table.FreeRetired();   // retired before the publication
    table.RemoveDeleted(); // nobody reads an older generation now
  }
  done.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(wrong.load(), 0u) << "of " << lookups.load() << " lookups";
  EXPECT_GE(lookups.load(), uint64_t{kKeys} * batches.size());
  EXPECT_EQ(table.DebugString(), plain.DebugString());
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

// DeleteAll on a table with concurrent readers deletes as a batch does:
// readers at the generation before still see every rule until RemoveDeleted.
TEST(RuleTableTest, DeleteAllWithConcurrentReadersKeepsOlderGenerations) {
  RuleTable t({}, /*concurrent_readers=*/true);
  ApplyOk(&t, {RuleOp::Insert(V4Rule(1, 1)), RuleOp::Insert(SrcRule(2, 5, 0x0a000001))});
  const Flow key = V4Key(0x0a000001, 2, 3, 4);
  Flow wc;
  ASSERT_EQ(IdOf(t.Lookup(key, &wc)), 2u);
  const BatchResult r = t.DeleteAll();
  EXPECT_EQ(r.deleted, 2u);
  EXPECT_EQ(r.generation, 2u);
  EXPECT_EQ(r.rules, 0u);
  EXPECT_EQ(t.Lookup(key, &wc), nullptr);
  EXPECT_EQ(IdOf(t.Lookup(key, &wc, nullptr, 1)), 2u);
  EXPECT_EQ(t.Find(2), nullptr);
  EXPECT_EQ(t.RemoveDeleted(), 2u);
  EXPECT_EQ(t.Stats().subtables, 0u);
  EXPECT_EQ(t.Stats().entries, 0u);
  EXPECT_GE(t.FreeRetired(), 2u);
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
  r.match.SetMasked(Field::kIpv4Src, 0x0a000000, Prefix32(8));
  r.match.tp_dst = {1000, 1999};
  RuleTable t;
  ApplyOk(&t, {RuleOp::Insert(r)});
  const std::string d = t.DebugString();
  EXPECT_THAT(d, HasSubstr("generation=1 rules=1"));
  EXPECT_THAT(d, HasSubstr("subtables=" + std::to_string(t.Stats().subtables)));
  EXPECT_THAT(d, HasSubstr("max_priority=77"));
  EXPECT_THAT(d, HasSubstr("ipv4_src/0xff000000"));
  EXPECT_THAT(d, HasSubstr("id=12 priority=77 cookie=0xab"));
  EXPECT_THAT(d, HasSubstr("ipv4_src=10.0.0.0/8"));
  EXPECT_THAT(d, HasSubstr("tp_dst=1000-1999"));
  EXPECT_THAT(d, HasSubstr("actions=output:12"));
}

// ---------------------------------------------------------------------------
// Bad batches: the right error, and nothing changed.

struct BadCase {
  std::string name;
  std::vector<RuleOp> tail;  // appended after the valid prelude
  absl::StatusCode code;
  std::string prefix;  // "operation <i> (rule id <id>): <field>..."
  // The typed error (its index and rule id: those of `prefix`).
  RuleErrorKind kind;
  RuleField field;
};

class BadBatchTest : public ::testing::Test {
 protected:
  static constexpr size_t kInitial = 30;
  BadBatchTest() : table_(RuleTableLimits{40, 400}), gen_(7) {
    RandomRuleOptions o;
    o.range_fraction = 0.05;  // keep entries well under max_entries
    RandomRuleGen small(7, o);
    std::vector<RuleOp> ops;
    for (uint64_t id = 1; id <= kInitial; ++id) {
      Rule r = small.NextRule(id);
      r.match.tp_src = {};
      r.match.tp_dst = {};
      initial_.push_back(r);
      ops.push_back(RuleOp::Insert(r));
    }
    Rule c = Good(100);
    c.cookie = 99;
    initial_.push_back(c);
    ops.push_back(RuleOp::Insert(c));
    EXPECT_TRUE(table_.ApplyBatch(ops).ok());
  }

  static Rule Good(uint64_t id) {
    Rule r = V4Rule(id, 3);
    r.match.SetMasked(Field::kIpv4Dst, 0x0a000000, 0xff000000);
    return r;
  }
  // Three valid operations that would change the table.
  std::vector<RuleOp> Prelude() {
    Rule replaced = Good(2);
    replaced.priority = 1000;
    return {RuleOp::Insert(Good(500)), RuleOp::Delete(1),
            RuleOp::Replace(replaced)};
  }

  RuleTable table_;
  RandomRuleGen gen_;
  std::vector<Rule> initial_;
};

TEST_F(BadBatchTest, EachErrorLeavesTheTableUnchanged) {
  auto with = [](std::function<void(Rule*)> f, uint64_t id = 501) {
    Rule r = Good(id);
    f(&r);
    return r;
  };
  // 31 rules after the prelude, limit 40: the tenth insert is one too many.
  std::vector<RuleOp> too_many;
  for (uint64_t id = 600; id < 611; ++id)
    too_many.push_back(RuleOp::Insert(Good(id)));
  const Rule huge = with([](Rule* r) {
    r->match.tp_src = {1, 65534};
    r->match.tp_dst = {1, 65534};
  });
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  const std::vector<BadCase> cases = {
      {"id_zero",
       {RuleOp::Insert(with([](Rule* r) { r->id = 0; }))},
       kInvalid,
       "operation 3 (rule id 0): id: ",
       RuleErrorKind::kInvalid, RuleField::kId},
      {"value_outside_mask",
       {RuleOp::Insert(with(
           [](Rule* r) { r->match.value.Set(Field::kIpv4Dst, 0x0a000001); }))},
       kInvalid,
       "operation 3 (rule id 501): ipv4_dst: value 0x0a000001 has bits "
       "outside",
       RuleErrorKind::kInvalid, RuleField::kIpv4Dst},
      {"range_lo_gt_hi_in_replace",
       {RuleOp::Replace(with(
           [](Rule* r) {
             r->match.tp_src = {9, 8};
           },
           3))},
       kInvalid,
       "operation 3 (rule id 3): tp_src: range lo 9",
       RuleErrorKind::kInvalid, RuleField::kTpSrc},
      {"range_with_mask",
       {RuleOp::Insert(with([](Rule* r) {
         r->match.tp_dst = {1, 2};
         r->match.SetExact(Field::kTpDst, 1);
       }))},
       kInvalid,
       "operation 3 (rule id 501): tp_dst: range 1-2 combined",
       RuleErrorKind::kInvalid, RuleField::kTpDst},
      {"ipv4_without_eth_type",
       {RuleOp::Insert(with([](Rule* r) {
         r->match.mask.Set(Field::kEthType, 0);
         r->match.value.Set(Field::kEthType, 0);
       }))},
       kInvalid,
       "operation 3 (rule id 501): ipv4_dst: requires eth_type=0x0800",
       RuleErrorKind::kInvalid, RuleField::kIpv4Dst},
      {"ipv6_with_ipv4",
       {RuleOp::Insert(
           with([](Rule* r) { r->match.SetExact(Field::kIpv6SrcHi, 1); }))},
       kInvalid,
       "operation 3 (rule id 501): ipv6_src: requires eth_type=0x86dd",
       RuleErrorKind::kInvalid, RuleField::kIpv6Src},
      {"nw_proto_without_ip",
       {RuleOp::Insert([] {
         Rule r;
         r.id = 501;
         r.match.SetExact(Field::kNwProto, 6);
         return r;
       }())},
       kInvalid,
       "operation 3 (rule id 501): nw_proto: requires an IP eth_type",
       RuleErrorKind::kInvalid, RuleField::kNwProto},
      {"stray_bits",
       {RuleOp::Insert(with(
           [](Rule* r) { r->match.mask.w[kWordMeta] |= uint64_t{1} << 62; }))},
       kInvalid,
       "operation 3 (rule id 501): match: word 0 has bits outside",
       RuleErrorKind::kInvalid, RuleField::kMatch},
      {"ipv6_without_eth_type",
       {RuleOp::Insert([] {
         Rule r;
         r.id = 501;
         r.match.SetMasked(Field::kIpv6DstHi, 0x2001000000000000,
                           0xffff000000000000);
         return r;
       }())},
       kInvalid,
       "operation 3 (rule id 501): ipv6_dst: requires eth_type=0x86dd",
       RuleErrorKind::kInvalid, RuleField::kIpv6Dst},
      {"tp_range_without_ip",
       {RuleOp::Insert([] {
         Rule r;
         r.id = 501;
         r.match.SetExact(Field::kEthType, kEthTypeArp);
         r.match.tp_src = {0, 1023};
         return r;
       }())},
       kInvalid,
       "operation 3 (rule id 501): tp_src: requires an IP eth_type",
       RuleErrorKind::kInvalid, RuleField::kTpSrc},
      {"tcp_flags_without_ip",
       {RuleOp::Insert([] {
         Rule r;
         r.id = 501;
         r.match.SetMasked(Field::kTcpFlags, 2, 2);
         return r;
       }())},
       kInvalid,
       "operation 3 (rule id 501): tcp_flags: requires an IP eth_type",
       RuleErrorKind::kInvalid, RuleField::kTcpFlags},
      {"vlan1_pcp_without_present",
       {RuleOp::Insert(with([](Rule* r) {
         r->match.SetMasked(Field::kVlan1Tci, 0x2000, 0xe000);
       }))},
       kInvalid,
       "operation 3 (rule id 501): vlan1_tci: matches vid/pcp",
       RuleErrorKind::kInvalid, RuleField::kVlan1Tci},
      {"vlan_without_present",
       {RuleOp::Insert(with(
           [](Rule* r) { r->match.SetMasked(Field::kVlan0Tci, 5, 0x0fff); }))},
       kInvalid,
       "operation 3 (rule id 501): vlan0_tci: ",
       RuleErrorKind::kInvalid, RuleField::kVlan0Tci},
      {"unknown_action",
       {RuleOp::Insert(with(
           [](Rule* r) { r->action.kind = static_cast<Action::Kind>(9); }))},
       kInvalid,
       "operation 3 (rule id 501): action: unknown action kind 9",
       RuleErrorKind::kInvalid, RuleField::kAction},
      {"port_too_big",
       {RuleOp::Replace(
           with([](Rule* r) { r->action = Action::Output(70000); }, 4))},
       kInvalid,
       "operation 3 (rule id 4): action: output port 70000",
       RuleErrorKind::kInvalid, RuleField::kAction},
      {"delete_unknown",
       {RuleOp::Delete(9999)},
       kInvalid,
       "operation 3 (rule id 9999): id: delete of unknown rule id 9999",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"replace_unknown",
       {RuleOp::Replace(Good(9999))},
       kInvalid,
       "operation 3 (rule id 9999): id: replace of unknown rule id 9999",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"insert_existing",
       {RuleOp::Insert(Good(5))},
       kInvalid,
       "operation 3 (rule id 5): id: insert of rule id 5 which already exists",
       RuleErrorKind::kAlreadyExists, RuleField::kId},
      {"insert_twice_in_batch",
       {RuleOp::Insert(Good(500))},
       kInvalid,
       "operation 3 (rule id 500): id: insert of rule id 500 which already exists "
       "(operation 0 of this batch inserted it)",
       RuleErrorKind::kAlreadyExists, RuleField::kId},
      {"delete_twice_in_batch",
       {RuleOp::Delete(1)},
       kInvalid,
       "operation 3 (rule id 1): id: delete of unknown rule id 1 (operation 1 of this "
       "batch deleted it)",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"replace_after_delete_in_batch",
       {RuleOp::Replace(Good(1))},
       kInvalid,
       "operation 3 (rule id 1): id: replace of unknown rule id 1 (operation 1 of this "
       "batch deleted it)",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"replace_after_delete_by_cookie",
       {RuleOp::DeleteByCookie(99), RuleOp::Replace(Good(100))},
       kInvalid,
       "operation 4 (rule id 100): id: replace of unknown rule id 100 (operation 3 of "
       "this batch deleted it by its cookie)",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"max_rules", too_many, absl::StatusCode::kResourceExhausted,
       "operation 12 (rule id 609): max_rules: the table would hold 41 rules, "
       "limit 40",
       RuleErrorKind::kLimit, RuleField::kMaxRules},
      {"max_entries",
       {RuleOp::Insert(huge)},
       absl::StatusCode::kResourceExhausted,
       "operation 3 (rule id 501): max_entries: ",
       RuleErrorKind::kLimit, RuleField::kMaxEntries},
      {"max_entries_by_replace",
       {RuleOp::Replace(with(
           [](Rule* r) {
             r->match.tp_src = {1, 65534};
             r->match.tp_dst = {1, 65534};
           },
           6))},
       absl::StatusCode::kResourceExhausted,
       "operation 3 (rule id 6): max_entries: ",
       RuleErrorKind::kLimit, RuleField::kMaxEntries},
  };

  std::vector<Flow> keys;
  for (int i = 0; i < 500; ++i) keys.push_back(gen_.NextKeyNear(initial_));
  auto lookups = [&] {
    std::vector<uint64_t> out;
    for (const Flow& k : keys) {
      Flow wc;
      out.push_back(IdOf(table_.Lookup(k, &wc)));
    }
    return out;
  };
  const std::vector<Rule> rules_before = Snapshot(table_);
  const std::string debug_before = table_.DebugString();
  const uint64_t gen_before = table_.generation();
  const std::vector<uint64_t> lookups_before = lookups();
  ASSERT_GT(std::count_if(lookups_before.begin(), lookups_before.end(),
                          [](uint64_t id) { return id != 0; }),
            100);

  for (bool bad_first : {false, true}) {
    for (const BadCase& c : cases) {
      SCOPED_TRACE(c.name + (bad_first ? " (bad op first)" : ""));
      std::vector<RuleOp> ops = Prelude();
      ops.insert(ops.end(), c.tail.begin(), c.tail.end());
      std::string prefix = c.prefix;
      if (bad_first) {
        // The same bad op at index 0, then valid ones: only cases that do
        // not depend on the prelude.
        if (c.tail.size() != 1 ||
            c.name.find("in_batch") != std::string::npos ||
            c.name == "max_rules")
          continue;
        ops = {c.tail[0], RuleOp::Insert(Good(700))};
        prefix.replace(0, std::string("operation 3").size(), "operation 0");
      }
      const auto res = table_.ApplyBatch(ops);
      ASSERT_FALSE(res.ok());
      EXPECT_EQ(res.status().code(), c.code) << res.status();
      EXPECT_THAT(std::string(res.status().message()), StartsWith(prefix));
      // The payload says what the message says: index, rule id, field.
      const std::optional<RuleOpError> e = GetRuleOpError(res.status());
      ASSERT_TRUE(e.has_value()) << res.status();
      EXPECT_EQ(e->kind, c.kind);
      EXPECT_EQ(e->field, c.field);
      EXPECT_TRUE(e->has_op);
      EXPECT_THAT(prefix, StartsWith(absl::StrCat(OperationPrefix(e->index, e->rule_id),
                                                  NativeName(e->field), ": ")));
      EXPECT_EQ(Snapshot(table_), rules_before);
      EXPECT_EQ(table_.DebugString(), debug_before);
      EXPECT_EQ(table_.generation(), gen_before);
      EXPECT_EQ(lookups(), lookups_before);
    }
  }
  // The prelude itself is fine: the failures came from the bad operations.
  const auto res = table_.ApplyBatch(Prelude());
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_NE(table_.DebugString(), debug_before);
}

// ---------------------------------------------------------------------------
// Differential test against the linear-scan reference.

struct DiffConfig {
  std::string name;
  int seeds;
  size_t min_rules;
  size_t max_rules;
  int rounds;
  int keys_per_round;
  int max_batch;
  RandomRuleOptions options;
};

struct DiffTotals {
  long keys = 0;
  long matched = 0;
  long megaflow_checks = 0;
  long rejected_batches = 0;
};

void RunDifferential(uint64_t seed, const DiffConfig& cfg, DiffTotals* totals) {
  SCOPED_TRACE(absl::StrCat(cfg.name, " seed ", seed));
  RandomRuleGen gen(seed, cfg.options);
  RuleTable table;
  ReferenceClassifier ref;
  std::vector<Rule> live;
  uint64_t next_id = 1;
  const size_t target =
      cfg.min_rules + gen.Uniform(cfg.max_rules - cfg.min_rules + 1);
  while (live.size() < target) {
    std::vector<RuleOp> ops;
    for (size_t i = 0; i < 256 && live.size() < target; ++i) {
      live.push_back(gen.NextRule(next_id++));
      ops.push_back(RuleOp::Insert(live.back()));
    }
    ApplyOk(&table, ops);
    ASSERT_TRUE(ref.ApplyBatch(ops).ok());
  }
  for (int round = 0; round < cfg.rounds; ++round) {
    if (round > 0) {
      if (round % 3 == 0) {
        // A batch both must reject (an unknown id at the end): neither changes.
        std::vector<Rule> scratch = live;
        uint64_t scratch_id = next_id;
        std::vector<RuleOp> ops = gen.NextBatch(1 + gen.Uniform(cfg.max_batch),
                                                &scratch, &scratch_id);
        ops.push_back(RuleOp::Delete(next_id + 1000000));
        ASSERT_FALSE(table.ApplyBatch(ops).ok());
        ASSERT_FALSE(ref.ApplyBatch(ops).ok());
        ++totals->rejected_batches;
      }
      const std::vector<RuleOp> ops =
          gen.NextBatch(1 + gen.Uniform(cfg.max_batch), &live, &next_id);
      const auto res = table.ApplyBatch(ops);
      ASSERT_TRUE(res.ok()) << res.status();
      ASSERT_TRUE(ref.ApplyBatch(ops).ok());
    }
    ASSERT_EQ(table.size(), ref.size());
    ASSERT_EQ(table.size(), live.size());
    const std::vector<const Rule*> ordered = table.Rules();
    for (size_t i = 0; i < ordered.size(); ++i)
      ASSERT_EQ(*ordered[i], ref.rules()[i]);

    for (int k = 0; k < cfg.keys_per_round; ++k) {
      const Flow key = gen.NextKeyNear(live);
      Flow wc;
      int visited = 0;
      const Rule* got = table.Lookup(key, &wc, &visited);
      const Rule* want = ref.Lookup(key);
      ASSERT_EQ(IdOf(got), IdOf(want)) << "key " << Dump(key);
      ASSERT_EQ(wc.Get(Field::kInPort), 0xffffffffu);
      ++totals->keys;
      totals->matched += want != nullptr;
      // The megaflow property: a key that agrees on wc gets the same rule.
      const Flow other = gen.NextKeyAgreeing(key, wc);
      ASSERT_EQ(IdOf(ref.Lookup(other)), IdOf(want))
          << "key " << Dump(key) << "\nwc  " << Dump(wc) << "\nkey'"
          << Dump(other);
      Flow wc2;
      ASSERT_EQ(IdOf(table.Lookup(other, &wc2)), IdOf(want));
      ++totals->megaflow_checks;
    }
  }
}

TEST(RuleTableDifferentialTest, MatchesReferenceOnRandomRuleSets) {
  RandomRuleOptions ties;  // few priorities: ties everywhere
  ties.max_priority = 2;
  RandomRuleOptions wide;
  wide.max_priority = 100000;
  wide.range_fraction = 0.35;
  RandomRuleOptions big;
  big.cookies = 64;  // delete-by-cookie removes ~2% of a large set
  const std::vector<DiffConfig> configs = {
      {"small", Scaled(150), 1, 50, 8, 400, 8, {}},
      {"small_ties", Scaled(100), 1, 50, 8, 400, 8, ties},
      {"small_wide", Scaled(100), 1, 50, 8, 400, 8, wide},
      {"large", kSanitized ? 1 : 4, 500, 2000, 4, 6000, 40, big},
  };
  DiffTotals totals;
  uint64_t seed = 1000;
  for (const DiffConfig& cfg : configs) {
    for (int s = 0; s < cfg.seeds; ++s) {
      RunDifferential(seed++, cfg, &totals);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  std::printf(
      "differential: %ld keys (%ld matched), %ld megaflow checks, "
      "%ld rejected batches\n",
      totals.keys, totals.matched, totals.megaflow_checks,
      totals.rejected_batches);
  EXPECT_GE(totals.keys, kSanitized ? 100000 : 1000000);
  // The key generator must make most keys hit something, or the comparison
  // says little.
  EXPECT_GT(totals.matched, totals.keys * 6 / 10);
}

// ---------------------------------------------------------------------------
// ClassBench-shaped rules built by hand (the full replay test is elsewhere).

struct CbRule {
  uint32_t src;
  int src_len;
  uint32_t dst;
  int dst_len;
  uint16_t sp_lo, sp_hi, dp_lo, dp_hi;
  uint8_t proto, proto_mask;
};

Rule FromClassBench(const CbRule& c, uint64_t id, uint32_t priority) {
  Rule r;
  r.id = id;
  r.priority = priority;
  r.match.SetExact(Field::kEthType, kEthTypeIpv4);
  if (c.src_len) r.match.SetMasked(Field::kIpv4Src, c.src, Prefix32(c.src_len));
  if (c.dst_len) r.match.SetMasked(Field::kIpv4Dst, c.dst, Prefix32(c.dst_len));
  r.match.tp_src = {c.sp_lo, c.sp_hi};
  r.match.tp_dst = {c.dp_lo, c.dp_hi};
  if (c.proto_mask) r.match.SetMasked(Field::kNwProto, c.proto, c.proto_mask);
  r.action = Action::Output(static_cast<uint32_t>(id));
  return r;
}

TEST(RuleTableClassBenchTest, HandBuiltFiveTupleRules) {
  // In ClassBench order: the first rule has the highest priority.
  const std::vector<CbRule> cb = {
      {0xc0a80100, 24, 0x0a000000, 8, 0, 65535, 80, 80, 6, 0xff},
      {0xc0a80000, 16, 0, 0, 1024, 65535, 0, 1023, 17, 0xff},
      {0, 0, 0x0a010000, 16, 0, 65535, 0, 65535, 0, 0},
      {0xc0a8010a, 32, 0x0a000005, 32, 53, 53, 1, 65534, 17, 0xff},
      {0, 0, 0, 0, 0, 65535, 0, 65535, 0, 0},
  };
  std::vector<RuleOp> ops;
  for (size_t i = 0; i < cb.size(); ++i)
    ops.push_back(RuleOp::Insert(FromClassBench(cb[i], i + 1, cb.size() - i)));
  RuleTable t;
  ReferenceClassifier ref;
  ApplyOk(&t, ops);
  ASSERT_TRUE(ref.ApplyBatch(ops).ok());
  const RuleTableStats s = t.Stats();
  EXPECT_EQ(s.rules, 5u);
  EXPECT_EQ(s.entries, 1u + 6u + 1u + 30u + 1u);
  EXPECT_EQ(s.expanded_rules, 2u);

  struct Probe {
    FlowKey key;
    uint64_t want;
  };
  const std::vector<Probe> probes = {
      {MakeFiveTupleKey(0xc0a80105, 0x0a020304, 1234, 80, 6), 1},
      {MakeFiveTupleKey(0xc0a80105, 0x0a010304, 1234, 80, 17), 2},
      {MakeFiveTupleKey(0xc0a80105, 0x0a010304, 80, 80, 17), 3},
      {MakeFiveTupleKey(0xc0a8010a, 0x0a000005, 53, 0, 17), 5},
      {MakeFiveTupleKey(0xc0a8010a, 0x0a000005, 53, 65534, 17), 4},
      {MakeFiveTupleKey(0xc0a8010a, 0x0a000005, 53, 65535, 17), 5},
      {MakeFiveTupleKey(0xac100001, 0x08080808, 1, 2, 6), 5},
  };
  for (const Probe& p : probes) {
    Flow wc;
    EXPECT_EQ(IdOf(t.Lookup(p.key, &wc)), p.want) << p.key.ToFlow().w[3];
    EXPECT_EQ(IdOf(ref.Lookup(p.key)), p.want);
  }
}

}  // namespace
}  // namespace flowclass
