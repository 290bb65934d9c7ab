// The megaflow classifier against a linear scan of the installed megaflows
// through churn, bursts, Install/Remove, LookupInSubtable, and the subtable
// ranking that orders lookups.
#include "dataplane/dpcls/megaflow_classifier.h"

#include <algorithm>
#include <bit>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/dpcls/megaflow_classifier_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/megaflow_testing.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

// Brute-force reference: the list of installed megaflows.
using RefEntry = InstalledMegaflow;

class Reference {
 public:
  const Megaflow* Lookup(const FlowKey& key) const {
    return CoveringMegaflow(entries_, key);
  }
  bool OverlapsAny(const Flow& value, const Flow& mask) const {
    for (const RefEntry& e : entries_)
      if (MegaflowsOverlap(value, mask, e.value, e.mask)) return true;
    return false;
  }
  std::vector<RefEntry>& entries() { return entries_; }
  const std::vector<RefEntry>& entries() const { return entries_; }
  size_t SubtableCount() const {
    std::set<std::pair<uint64_t, std::vector<uint64_t>>> shapes;
    for (const RefEntry& e : entries_)
      shapes.insert({e.value.Get(Field::kInPort),
                     std::vector<uint64_t>(e.mask.w.begin(), e.mask.w.end())});
    return shapes.size();
  }

 private:
  std::vector<RefEntry> entries_;
};

// Checks every structural figure against the reference.
void CheckConsistent(const MegaflowClassifier& c, const Reference& ref,
                     const MegaflowPool& pool) {
  ASSERT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants();
  ASSERT_EQ(c.megaflow_count(), ref.entries().size());
  ASSERT_EQ(pool.live(), ref.entries().size());
  ASSERT_EQ(c.subtable_count(), ref.SubtableCount());
  size_t total = 0;
  for (const SubtableInfo& info : c.Subtables()) {
    total += info.megaflows;
    EXPECT_GT(info.megaflows, 0u);
    EXPECT_EQ(c.RankOf(info.id), info.rank);
  }
  EXPECT_EQ(total, ref.entries().size());
  for (const RefEntry& e : ref.entries()) {
    ASSERT_TRUE(e.mf->live);
    EXPECT_EQ(e.mf->value, e.value);
    EXPECT_EQ(e.mf->mask, e.mask);
    EXPECT_GE(c.RankOf(e.mf->subtable), 0);
  }
}

// ------------------------------------------------------------ creation ----

TEST(MegaflowClassifierTest, CreateRejectsBadOptions) {
  MegaflowPool pool(16);
  EXPECT_THAT(MegaflowClassifier::Create(nullptr).status().message(),
              HasSubstr("pool"));
  MegaflowClassifierOptions o;
  o.max_subtables = 0;
  EXPECT_THAT(MegaflowClassifier::Create(&pool, o).status().message(),
              HasSubstr("max_subtables"));
  o.max_subtables = 70000;
  EXPECT_THAT(MegaflowClassifier::Create(&pool, o).status().message(),
              HasSubstr("max_subtables"));
  o = {};
  o.max_ports = 0;
  EXPECT_THAT(MegaflowClassifier::Create(&pool, o).status().message(),
              HasSubstr("max_ports"));
  o = {};
  o.max_ports = 60000;
  o.max_subtables = 60000;
  EXPECT_THAT(MegaflowClassifier::Create(&pool, o).status().message(),
              HasSubstr("max_ports x max_subtables"));
  auto ok = MegaflowClassifier::Create(&pool);
  ASSERT_TRUE(ok.ok());
  EXPECT_GE((*ok)->table_capacity(), 32u);  // >= 2 x pool capacity
}

// --------------------------------------------------------- differential ----

class DifferentialTest : public ::testing::TestWithParam<HashCase> {};

// Install/Remove churn with bursts of random keys near installed megaflows;
// every key must give the reference's megaflow or a miss, and the
// lookups_on_hits figure must be the sum of (rank + 1) over hits.
TEST_P(DifferentialTest, MatchesLinearScanThroughChurn) {
  const bool constant = GetParam().fn == &ConstantHash;
  MegaflowPool pool(constant ? 64 : 512);
  MegaflowClassifierOptions options;
  options.hash_override = GetParam().fn;
  auto c = MakeClassifier(&pool, options);
  Reference ref;
  Generator gen(0xc1a55 + (GetParam().fn ? 1 : 0));
  std::mt19937_64& rng = gen.rng();

  int installed = 0, failed = 0, hits_checked = 0, misses_checked = 0;
  int suggested_hits = 0, suggested_misses = 0;
  for (int round = 0; round < 20 * kScale; ++round) {
    // Installs: non-overlapping candidates only.
    for (int k = 0; k < 40; ++k) {
      auto [value, mask] = gen.RandomMegaflow();
      if (ref.OverlapsAny(value, mask)) continue;
      Megaflow* mf = c->Install(value, mask, Out(round));
      if (mf == nullptr) {
        ++failed;
        continue;
      }
      ++installed;
      ref.entries().push_back({value, mask, mf});
      ASSERT_EQ(&pool.Get(mf->index), mf);
      EXPECT_EQ(mf->verdict, Out(round));
    }
    // Removals.
    for (size_t k = 0; k < ref.entries().size();) {
      if (rng() % 5 == 0) {
        c->Remove(ref.entries()[k].mf);
        ref.entries()[k] = ref.entries().back();
        ref.entries().pop_back();
      } else {
        ++k;
      }
    }
    ASSERT_NO_FATAL_FAILURE(CheckConsistent(*c, ref, pool));
    if (round % 7 == 3) c->Rank();

    // Lookups: one burst per port, keys near live megaflows or random.
    for (int b = 0; b < 6; ++b) {
      const uint32_t port = gen.RandomPort();
      std::vector<const RefEntry*> of_port;
      for (const RefEntry& e : ref.entries())
        if (e.value.Get(Field::kInPort) == port) of_port.push_back(&e);
      FlowKey keys[kMaxBurst];
      const int n = 1 + rng() % kMaxBurst;
      for (int i = 0; i < n; ++i) {
        if (!of_port.empty() && rng() % 8 != 0) {
          const RefEntry* e = of_port[rng() % of_port.size()];
          keys[i] = gen.KeyNear(e->value, e->mask);
        } else {
          keys[i] = FlowKey::FromFlow(gen.RandomFlow(port));
        }
      }
      Megaflow* out[kMaxBurst] = {};
      int ranks[kMaxBurst];
      uint64_t expected_lookups = 0;
      for (int i = 0; i < n; ++i) {
        const Megaflow* want = ref.Lookup(keys[i]);
        ranks[i] = want ? c->RankOf(want->subtable) : -1;
      }
      uint64_t lookups = 0;
      const uint32_t hits =
          c->LookupBurst(port, keys, BurstMap(n), out, &lookups);
      for (int i = 0; i < n; ++i) {
        const Megaflow* want = ref.Lookup(keys[i]);
        if (want != nullptr) {
          ASSERT_TRUE(hits & (1u << i)) << "key " << i << " should hit";
          ASSERT_EQ(out[i], want);
          expected_lookups += ranks[i] + 1;
          ++hits_checked;
        } else {
          ASSERT_FALSE(hits & (1u << i)) << "key " << i << " should miss";
          ASSERT_EQ(out[i], nullptr);
          ++misses_checked;
        }
      }
      EXPECT_EQ(hits & ~BurstMap(n), 0u);
      EXPECT_EQ(lookups, expected_lookups);

      // The Cuckoo Distributor's path over the same keys: each key probes
      // only the subtable suggested for it -- mostly its megaflow's, else
      // another live subtable, a destroyed or unused id, or one out of
      // range -- and must get what LookupInSubtable gives for that id
      // alone.  Every few rounds under the autovalidator, which takes the
      // one-key-at-a-time route.
      const bool validating = round % 3 == 1;
      ASSERT_TRUE(
          c->SetLookupPriority("autovalidator", validating ? 255 : 0).ok());
      const std::vector<SubtableInfo> subtables = c->Subtables();
      // Some keys of the burst are left out of the map.
      const uint32_t todo = BurstMap(n) & ~static_cast<uint32_t>(rng() % 4);
      uint16_t sub[kMaxBurst];
      uint32_t want_hits = 0;
      uint64_t want_ranks = 0;
      Megaflow* want_out[kMaxBurst] = {};
      for (int i = 0; i < n; ++i) {
        const Megaflow* want = ref.Lookup(keys[i]);
        const uint32_t pick = rng() % 8;
        if (want != nullptr && pick < 5) {
          sub[i] = want->subtable;
        } else if (!subtables.empty() && pick < 7) {
          sub[i] = subtables[rng() % subtables.size()].id;
        } else {
          sub[i] = static_cast<uint16_t>(rng() % 70000);  // any id at all
        }
        Megaflow* one[1] = {};
        if ((todo >> i & 1u) && c->LookupInSubtable(sub[i], &keys[i], 1, one) != 0) {
          --one[0]->hits;  // the check itself counted nothing
          want_hits |= 1u << i;
          want_out[i] = one[0];
          want_ranks += static_cast<uint64_t>(c->RankOf(sub[i])) + 1;
        }
      }
      Megaflow* got[kMaxBurst] = {};
      uint64_t rank_sum = 0;
      ASSERT_EQ(c->LookupSuggested(keys, todo, sub, got, &rank_sum), want_hits)
          << "round " << round << (validating ? " (autovalidator)" : "");
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(got[i], (want_hits >> i & 1u) ? want_out[i] : nullptr) << i;
      EXPECT_EQ(rank_sum, want_ranks);
      suggested_hits += std::popcount(want_hits);
      suggested_misses += std::popcount(todo & ~want_hits);
    }
  }
  ASSERT_TRUE(c->SetLookupPriority("autovalidator", 0).ok());
  EXPECT_GT(suggested_hits, 50);
  EXPECT_GT(suggested_misses, 20);
  EXPECT_EQ(c->lookup_mismatches(), 0u);
  EXPECT_GT(hits_checked, 100);
  EXPECT_GT(misses_checked, 20);
  if (constant) {
    // Every entry shares two buckets: at most 16 live megaflows.
    EXPECT_LE(c->megaflow_count(), 16u);
    EXPECT_GT(failed, 0);
  } else {
    EXPECT_GT(installed, 200);
  }
  c->Clear();
  EXPECT_EQ(pool.live(), 0u);
  EXPECT_EQ(c->megaflow_count(), 0u);
  EXPECT_EQ(c->subtable_count(), 0u);
  EXPECT_EQ(c->port_count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Hashes, DifferentialTest,
                         ::testing::ValuesIn(kTestHashes), HashCaseName);

// ------------------------------------------------------------- bursts ----

class BurstTest : public ::testing::TestWithParam<HashCase> {};

// Every burst size 0..32 with every other key a hit; out[] pre-filled with a
// marker that must survive at misses and past the burst.
TEST_P(BurstTest, EverySizeWritesOnlyHits) {
  MegaflowPool pool(64);
  MegaflowClassifierOptions options;
  options.hash_override = GetParam().fn;
  auto c = MakeClassifier(&pool, options);
  const Flow mask = PortMask({{Field::kTpDst, 0xffff}});
  std::vector<Megaflow*> mfs;
  for (int i = 0; i < 16; ++i) {
    Megaflow* mf =
        c->Install(PortFlow(3, {{Field::kTpDst, 1000 + i}}), mask, Out(i));
    ASSERT_NE(mf, nullptr) << i;
    mfs.push_back(mf);
  }
  Megaflow marker;
  for (int n = 0; n <= kMaxBurst; ++n) {
    FlowKey keys[kMaxBurst];
    for (int i = 0; i < n; ++i) {
      const bool hit = i % 2 == 0;
      keys[i] = MakeFiveTupleKey(1, 2, 3, hit ? 1000 + i % 16 : 7, 6, 3);
    }
    Megaflow* out[kMaxBurst + 8];
    std::fill(std::begin(out), std::end(out), &marker);
    uint64_t lookups = 0;
    const uint32_t hits = c->LookupBurst(3, keys, BurstMap(n), out, &lookups);
    uint32_t want = 0;
    for (int i = 0; i < n; i += 2) want |= 1u << i;
    ASSERT_EQ(hits, want) << "n=" << n;
    for (int i = 0; i < kMaxBurst + 8; ++i) {
      if (i < kMaxBurst && (hits >> i) & 1) {
        EXPECT_EQ(out[i], mfs[i % 16]) << "n=" << n << " i=" << i;
      } else {
        EXPECT_EQ(out[i], &marker) << "n=" << n << " i=" << i;
      }
    }
    EXPECT_EQ(lookups, static_cast<uint64_t>(std::popcount(want)));
  }
}

INSTANTIATE_TEST_SUITE_P(Hashes, BurstTest, ::testing::ValuesIn(kTestHashes),
                         HashCaseName);

TEST(MegaflowClassifierTest, SparseTodoMapReadsAndWritesOnlyItsKeys) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  Megaflow* mf = c->Install(PortFlow(5), PortMask(), Out(1));
  ASSERT_NE(mf, nullptr);
  FlowKey keys[kMaxBurst];
  for (auto& k : keys) k = MakeFiveTupleKey(1, 2, 3, 4, 6, 5);  // all hit
  Megaflow marker;
  Megaflow* out[kMaxBurst];
  std::fill(std::begin(out), std::end(out), &marker);
  const uint32_t todo = 0x80010042u;
  uint64_t lookups = 0;
  EXPECT_EQ(c->LookupBurst(5, keys, todo, out, &lookups), todo);
  for (int i = 0; i < kMaxBurst; ++i)
    EXPECT_EQ(out[i], (todo >> i) & 1 ? mf : &marker) << i;
  EXPECT_EQ(mf->hits, 4u);
  EXPECT_EQ(lookups, 4u);
  // Nothing to do, nothing done (lookups_on_hits may be null).
  EXPECT_EQ(c->LookupBurst(5, keys, 0, out, nullptr), 0u);
  EXPECT_EQ(c->LookupBurst(6, keys, todo, out, nullptr), 0u);  // unknown port
}

// ---------------------------------------------------- install / remove ----

TEST(MegaflowClassifierTest, InstallEqualMegaflowReturnsExisting) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  const Flow mask = PortMask({{Field::kIpv4Dst, 0xffffff00}});
  // Bits outside the mask are dropped.
  Flow v = PortFlow(1, {{Field::kIpv4Dst, 0x0a000001}});
  Megaflow* a = c->Install(v, mask, Out(1));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->value.Get(Field::kIpv4Dst), 0x0a000000u);
  v.Set(Field::kIpv4Dst, 0x0a000077);
  Megaflow* b = c->Install(v, mask, Out(2));
  EXPECT_EQ(a, b);
  EXPECT_EQ(b->verdict, Out(1));
  EXPECT_EQ(c->megaflow_count(), 1u);
  EXPECT_EQ(pool.live(), 1u);
}

TEST(MegaflowClassifierTest, MaskWithoutExactInPortIsRejected) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  Flow mask;
  mask.Set(Field::kTpDst, 0xffff);
  EXPECT_EQ(c->Install(Flow{}, mask, Out(1)), nullptr);
  mask.Set(Field::kInPort, 0xffff0000);
  EXPECT_EQ(c->Install(Flow{}, mask, Out(1)), nullptr);
  EXPECT_EQ(c->megaflow_count(), 0u);
  EXPECT_EQ(c->subtable_count(), 0u);
  EXPECT_EQ(pool.live(), 0u);
}

TEST(MegaflowClassifierTest, RemoveIgnoresDeadAndForeignMegaflows) {
  MegaflowPool pool(16);
  MegaflowPool other_pool(16);
  auto c = MakeClassifier(&pool);
  const Flow v = PortFlow(1);
  Megaflow* mf = c->Install(v, PortMask(), Out(1));
  ASSERT_NE(mf, nullptr);
  Megaflow* foreign = other_pool.Alloc();
  foreign->value = v;
  foreign->mask = PortMask();
  foreign->subtable = mf->subtable;
  c->Remove(foreign);
  c->Remove(nullptr);
  EXPECT_EQ(c->megaflow_count(), 1u);
  EXPECT_TRUE(foreign->live);
  c->Remove(mf);
  EXPECT_EQ(c->megaflow_count(), 0u);
  EXPECT_EQ(c->subtable_count(), 0u);
  EXPECT_FALSE(mf->live);
  c->Remove(mf);  // twice: ignored
  EXPECT_EQ(pool.live(), 0u);
}

// ------------------------------------------------------ LookupInSubtable ----

TEST(MegaflowClassifierTest, LookupInSubtableRightWrongAndStaleIds) {
  MegaflowPool pool(16);
  MegaflowClassifierOptions options;
  options.max_subtables = 4;
  auto c = MakeClassifier(&pool, options);
  Megaflow* a = c->Install(PortFlow(9, {{Field::kTpDst, 80}}),
                            PortMask({{Field::kTpDst, 0xffff}}), Out(1));
  Megaflow* b = c->Install(PortFlow(9, {{Field::kIpv4Src, 0x01020304}}),
                            PortMask({{Field::kIpv4Src, 0xffffffff}}), Out(2));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(a->subtable, b->subtable);
  const uint16_t id_a = a->subtable;
  const uint16_t id_b = b->subtable;

  FlowKey keys[2] = {MakeFiveTupleKey(7, 8, 1, 80, 6, 9),
                     MakeFiveTupleKey(7, 8, 1, 81, 6, 9)};
  Megaflow marker;
  Megaflow* out[2] = {&marker, &marker};
  EXPECT_EQ(c->LookupInSubtable(id_a, keys, 0b11, out), 0b01u);
  EXPECT_EQ(out[0], a);
  EXPECT_EQ(out[1], &marker);
  EXPECT_EQ(a->hits, 1u);
  out[0] = &marker;
  EXPECT_EQ(c->LookupInSubtable(id_b, keys, 0b11, out), 0u);  // wrong id
  EXPECT_EQ(c->LookupInSubtable(3, keys, 0b11, out), 0u);     // never used
  EXPECT_EQ(c->LookupInSubtable(4, keys, 0b11, out), 0u);     // out of range
  EXPECT_EQ(c->LookupInSubtable(0xffff, keys, 0b11, out), 0u);
  EXPECT_EQ(out[0], &marker);

  // Stale: destroy subtable a; its id is dead, then reused by a new shape.
  c->Remove(a);
  EXPECT_EQ(c->RankOf(id_a), -1);
  EXPECT_EQ(c->LookupInSubtable(id_a, keys, 0b11, out), 0u);
  Megaflow* mc = c->Install(PortFlow(9, {{Field::kNwProto, 17}}),
                             PortMask({{Field::kNwProto, 0xff}}), Out(3));
  ASSERT_NE(mc, nullptr);
  EXPECT_EQ(mc->subtable, id_a);  // lowest free id reused
  EXPECT_EQ(c->LookupInSubtable(id_a, keys, 0b11, out), 0u);  // tcp keys
  FlowKey udp = MakeFiveTupleKey(7, 8, 1, 80, 17, 9);
  EXPECT_EQ(c->LookupInSubtable(id_a, &udp, 1, out), 1u);
  EXPECT_EQ(out[0], mc);
}

// ------------------------------------------------------------- ranking ----

TEST(MegaflowClassifierTest, RankOrdersByRecentHitsAndDrivesLookupCost) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  // Three shapes on port 1, created in order A, B, C.
  Megaflow* mf[3];
  const Field fields[3] = {Field::kTpDst, Field::kTpSrc, Field::kNwProto};
  for (int s = 0; s < 3; ++s) {
    mf[s] = c->Install(PortFlow(1, {{fields[s], 50 + s}}),
                       PortMask({{fields[s], 0xff}}), Out(s));
    ASSERT_NE(mf[s], nullptr);
    EXPECT_EQ(c->RankOf(mf[s]->subtable), s);
  }
  auto key_for = [](int s) {
    return MakeFiveTupleKey(0, 0, s == 1 ? 51 : 1, s == 0 ? 50 : 1,
                            s == 2 ? 52 : 6, 1);
  };
  auto send = [&](int s, int count, uint64_t* lookups) {
    for (int i = 0; i < count; ++i) {
      FlowKey k = key_for(s);
      Megaflow* out = nullptr;
      ASSERT_EQ(c->LookupBurst(1, &k, 1, &out, lookups), 1u);
      ASSERT_EQ(out, mf[s]);
    }
  };
  uint64_t lookups = 0;
  send(2, 1, &lookups);
  EXPECT_EQ(lookups, 3u);  // C is third
  send(0, 10, &lookups);
  send(1, 50, &lookups);
  send(2, 99, &lookups);
  c->Rank();
  EXPECT_EQ(c->RankOf(mf[2]->subtable), 0);
  EXPECT_EQ(c->RankOf(mf[1]->subtable), 1);
  EXPECT_EQ(c->RankOf(mf[0]->subtable), 2);
  std::vector<SubtableInfo> infos = c->Subtables();
  ASSERT_EQ(infos.size(), 3u);
  EXPECT_EQ(infos[0].id, mf[2]->subtable);
  EXPECT_EQ(infos[0].hits, 100u);
  // Default lookup priorities: the best implementation available.
  EXPECT_EQ(infos[0].lookup_fn, CpuHasAvx512Lookup() ? "avx512" : "specialised");
  EXPECT_EQ(infos[2].hits, 10u);
  lookups = 0;
  send(2, 1, &lookups);
  EXPECT_EQ(lookups, 1u);  // C is now first
  send(0, 1, &lookups);
  EXPECT_EQ(lookups, 4u);  // A is third

  // Counters were zeroed: with equal recent hits (1 each for C and A, 0 for
  // B) the sort is stable: C before A, B last.
  c->Rank();
  EXPECT_EQ(c->RankOf(mf[2]->subtable), 0);
  EXPECT_EQ(c->RankOf(mf[0]->subtable), 1);
  EXPECT_EQ(c->RankOf(mf[1]->subtable), 2);
  // No traffic: order unchanged.
  c->Rank();
  EXPECT_EQ(c->RankOf(mf[2]->subtable), 0);
  EXPECT_EQ(c->RankOf(mf[0]->subtable), 1);
  // CD hits count for ranking too.
  FlowKey kb = key_for(1);
  Megaflow* out = nullptr;
  EXPECT_EQ(c->LookupInSubtable(mf[1]->subtable, &kb, 1, &out), 1u);
  c->Rank();
  EXPECT_EQ(c->RankOf(mf[1]->subtable), 0);
  // Destroying the first subtable closes the gap.
  c->Remove(mf[1]);
  EXPECT_EQ(c->RankOf(mf[2]->subtable), 0);
  EXPECT_EQ(c->RankOf(mf[0]->subtable), 1);
  EXPECT_THAT(c->DebugString(), HasSubstr("2 subtables"));
}

TEST(MegaflowClassifierTest, LookupsOnHitsSumsRankPlusOneOverABurst) {
  MegaflowPool pool(64);
  auto c = MakeClassifier(&pool);
  // Subtable r (rank r) holds tp_dst == 100 + r; its tp_src mask makes the
  // shape distinct (keys have tp_src 0, so only tp_dst decides).
  std::vector<Megaflow*> mfs;
  for (int r = 0; r < 5; ++r) {
    // A new shape per r.
    const Flow mask =
        PortMask({{Field::kTpDst, 0xffff}, {Field::kTpSrc, 0xffff >> r}});
    mfs.push_back(
        c->Install(PortFlow(2, {{Field::kTpDst, 100 + r}}), mask, Out(r)));
    ASSERT_NE(mfs.back(), nullptr);
    ASSERT_EQ(c->RankOf(mfs.back()->subtable), r);
  }
  FlowKey keys[6];
  for (int r = 0; r < 5; ++r) keys[r] = MakeFiveTupleKey(1, 1, 0, 100 + r, 6, 2);
  keys[5] = MakeFiveTupleKey(1, 1, 0, 99, 6, 2);  // miss: costs nothing
  Megaflow* out[6] = {};
  uint64_t lookups = 7;  // accumulates
  EXPECT_EQ(c->LookupBurst(2, keys, 0x3f, out, &lookups), 0x1fu);
  EXPECT_EQ(lookups, 7u + 1 + 2 + 3 + 4 + 5);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(out[r], mfs[r]);
}

}  // namespace
}  // namespace flowclass
