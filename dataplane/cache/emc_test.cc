#include "dataplane/cache/emc.h"

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/cache_testing.h"
#include "tests/common/flow_gen.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

class EmcTest : public CacheTest {
 protected:
  EmcTest() : CacheTest(/*seed=*/42) {}

  static EmcConfig Config(EmcPolicy policy, uint32_t entries = 8192,
                          uint64_t seed = 1) {
    EmcConfig c;
    c.entries = entries;
    c.policy = policy;
    c.seed = seed;
    c.insert_inv_prob = 1;
    return c;
  }

  // Three new keys with hashes ha, hb, hc, then an exact megaflow of each
  // (none inserted).
  struct ThreeKeys {
    FlowKey a, b, c;
    uint32_t ia, ib, ic;
  };
  ThreeKeys NewKeysWithHashes(uint64_t ha, uint64_t hb, uint64_t hc) {
    ThreeKeys k;
    k.a = WithHash(NewKey(), ha);
    k.b = WithHash(NewKey(), hb);
    k.c = WithHash(NewKey(), hc);
    k.ia = Install(k.a);
    k.ib = Install(k.b);
    k.ic = Install(k.c);
    return k;
  }
};

constexpr EmcPolicy kAllPolicies[] = {
    EmcPolicy::kRandomVictim, EmcPolicy::kOlderVictim, EmcPolicy::kCuckoo};

TEST_F(EmcTest, DefaultsMatchTheArchitecture) {
  Emc emc(&pool_);
  EXPECT_EQ(emc.entries(), 8192u);
  EXPECT_EQ(emc.insert_inv_prob(), 100u);
  EXPECT_EQ(emc.Occupancy(), 0u);
}

TEST_F(EmcTest, HitAfterInsertMissOtherwise) {
  for (EmcPolicy p : kAllPolicies) {
    Emc emc(&pool_, Config(p));
    const FlowKey a = NewKey();
    const FlowKey b = NewKey();
    EXPECT_EQ(emc.Lookup(a), kInvalidIndex);
    const uint32_t ia = Install(a);
    emc.Insert(a, ia);
    EXPECT_EQ(emc.Lookup(a), ia) << EmcPolicyName(p);
    EXPECT_EQ(emc.Lookup(b), kInvalidIndex) << EmcPolicyName(p);
    // Same hash, different words: the full-key compare must reject it.
    EXPECT_EQ(emc.Lookup(WithHash(b, a.hash)), kInvalidIndex);
    // Same words, different map (one word moved): rejected too.
    FlowKey c = a;
    c.map = static_cast<FlowMap>(c.map ^ 0x3);
    EXPECT_EQ(emc.Lookup(c), kInvalidIndex);
    EXPECT_EQ(emc.Occupancy(), 1u);
  }
}

TEST_F(EmcTest, KeyDifferingInOneWordUnderTheSameHashMisses) {
  // The probe compares the whole key even when the hash matches: change any
  // one word (inline or overflow) of a 5-word and of a 9-word key, keep the
  // hash, and the lookup must miss.
  for (int n_words : {5, kFlowWords}) {
    Emc emc(&pool_, Config(EmcPolicy::kRandomVictim));
    Flow f;
    for (int w = 0; w < n_words; ++w) f.w[w] = 0x1111111111111111ULL * static_cast<uint64_t>(w + 1);
    const FlowKey a = FlowKey::FromFlow(f);
    ASSERT_EQ(a.n_words, n_words);
    const uint32_t ia = Install(a);
    emc.Insert(a, ia);
    ASSERT_EQ(emc.Lookup(a), ia);
    for (int w = 0; w < n_words; ++w) {
      FlowKey b = a;
      b.words[w] ^= 0x0100;  // still non-zero
      EXPECT_EQ(emc.Lookup(b), kInvalidIndex) << n_words << " words, word " << w;
    }
    FlowKey c = a;
    c.hash ^= 1;
    EXPECT_EQ(emc.Lookup(c), kInvalidIndex);
  }
}

TEST_F(EmcTest, InsertUpdatesInPlace) {
  Emc emc(&pool_, Config(EmcPolicy::kRandomVictim));
  ExpectInsertUpdatesInPlace(emc);
}

TEST_F(EmcTest, FreedMegaflowMisses) {
  Emc emc(&pool_, Config(EmcPolicy::kCuckoo));
  const auto [a, ia] = NewCachedKey(emc);
  ASSERT_EQ(emc.Lookup(a), ia);
  Free(ia);
  EXPECT_EQ(emc.Lookup(a), kInvalidIndex);
  EXPECT_EQ(emc.Occupancy(), 0u);
}

TEST_F(EmcTest, ReusedSlotWithNewVersionMisses) {
  Emc emc(&pool_, Config(EmcPolicy::kCuckoo));
  const auto [a, ia] = NewCachedKey(emc);
  Free(ia);
  // The pool hands the same index back with a new version, even for the
  // very same flow: the old entry must not come back to life.
  const uint32_t again = Install(a);
  ASSERT_EQ(again, ia);
  EXPECT_EQ(emc.Lookup(a), kInvalidIndex);
  emc.Insert(a, again);
  EXPECT_EQ(emc.Lookup(a), again);
}

TEST_F(EmcTest, DeadSlotPreferredOverLive) {
  constexpr uint64_t kHash = 0x123456789abcdefULL;
  for (EmcPolicy p : kAllPolicies) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      Emc emc(&pool_, Config(p, 64, seed));
      const auto [a, b, c, ia, ib, ic] =
          NewKeysWithHashes(kHash, kHash, kHash);
      emc.Insert(a, ia);
      emc.Insert(b, ib);
      ASSERT_EQ(emc.Lookup(a), ia);
      ASSERT_EQ(emc.Lookup(b), ib);
      Free(ia);
      emc.Insert(c, ic);
      EXPECT_EQ(emc.Lookup(b), ib) << EmcPolicyName(p) << " seed " << seed;
      EXPECT_EQ(emc.Lookup(c), ic) << EmcPolicyName(p) << " seed " << seed;
      EXPECT_EQ(emc.stats().evictions, 0u);
      Free(ib);
      Free(ic);
    }
  }
}

TEST_F(EmcTest, RandomVictimEvictsOneOfTheTwo) {
  constexpr uint64_t kHash = 0xfeedfacecafef00dULL;
  int evicted_a = 0, evicted_b = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    Emc emc(&pool_, Config(EmcPolicy::kRandomVictim, 64, seed));
    const auto [a, b, c, ia, ib, ic] =
        NewKeysWithHashes(kHash, kHash, kHash);
    emc.Insert(a, ia);
    emc.Insert(b, ib);
    emc.Insert(c, ic);
    EXPECT_EQ(emc.Lookup(c), ic);
    const bool has_a = emc.Lookup(a) == ia;
    const bool has_b = emc.Lookup(b) == ib;
    EXPECT_NE(has_a, has_b) << "exactly one of a, b must be evicted";
    evicted_a += !has_a;
    evicted_b += !has_b;
    EXPECT_EQ(emc.stats().evictions, 1u);
    Free(ia);
    Free(ib);
    Free(ic);
  }
  // The choice is random, not always the same slot.
  EXPECT_GT(evicted_a, 10);
  EXPECT_GT(evicted_b, 10);
}

TEST_F(EmcTest, OlderVictimEvictsTheEarlierInsert) {
  constexpr uint64_t kHash = 0x0badc0de0badc0deULL;
  Emc emc(&pool_, Config(EmcPolicy::kOlderVictim, 64));
  const auto [a, b, c, ia, ib, ic] =
      NewKeysWithHashes(kHash, kHash, kHash);
  emc.Insert(a, ia);
  emc.Insert(b, ib);
  emc.Insert(c, ic);  // evicts a
  EXPECT_EQ(emc.Lookup(a), kInvalidIndex);
  EXPECT_EQ(emc.Lookup(b), ib);
  EXPECT_EQ(emc.Lookup(c), ic);
  emc.Insert(a, ia);  // now b is the older one
  EXPECT_EQ(emc.Lookup(a), ia);
  EXPECT_EQ(emc.Lookup(b), kInvalidIndex);
  EXPECT_EQ(emc.Lookup(c), ic);
}

// With entries=16: slot0 = hash & 15, slot1 = (hash >> 4) & 15.
constexpr uint64_t HashFor(uint32_t s0, uint32_t s1) { return s0 | (s1 << 4); }

TEST_F(EmcTest, CuckooMovesTheDisplacedEntryToItsOtherSlot) {
  for (uint64_t seed = 1; seed <= 32; ++seed) {
    Emc emc(&pool_, Config(EmcPolicy::kCuckoo, 16, seed));
    const auto [a, b, c, ia, ib, ic] =
        NewKeysWithHashes(HashFor(2, 3), HashFor(3, 5), HashFor(2, 3));
    emc.Insert(a, ia);  // slot 2
    emc.Insert(b, ib);  // slot 3
    emc.Insert(c, ic);  // 2 and 3 live: someone moves, b ends in slot 5
    EXPECT_EQ(emc.Lookup(a), ia) << "seed " << seed;
    EXPECT_EQ(emc.Lookup(b), ib) << "seed " << seed;
    EXPECT_EQ(emc.Lookup(c), ic) << "seed " << seed;
    EXPECT_EQ(emc.stats().evictions, 0u);
    EXPECT_GE(emc.stats().moves, 1u);
    EXPECT_EQ(emc.Occupancy(), 3u);
    Free(ia);
    Free(ib);
    Free(ic);
  }
}

TEST_F(EmcTest, CuckooWithZeroMovesIsRandomVictim) {
  EmcConfig cfg = Config(EmcPolicy::kCuckoo, 16);
  cfg.max_moves = 0;
  Emc emc(&pool_, cfg);
  const auto [a, b, c, ia, ib, ic] =
      NewKeysWithHashes(HashFor(2, 3), HashFor(3, 5), HashFor(2, 3));
  emc.Insert(a, ia);
  emc.Insert(b, ib);
  emc.Insert(c, ic);
  EXPECT_EQ(emc.Lookup(c), ic);
  EXPECT_EQ(emc.Occupancy(), 2u);
  EXPECT_EQ(emc.stats().evictions, 1u);
}

TEST_F(EmcTest, SlotsAreDistinctEvenWhenHashBitsAgree) {
  // hash 0x11 with 16 entries: slot0 == slot1 == 1, so slot1 becomes 0.
  Emc emc(&pool_, Config(EmcPolicy::kRandomVictim, 16));
  const FlowKey a = WithHash(NewKey(), HashFor(1, 1));
  const FlowKey b = WithHash(NewKey(), HashFor(1, 1));
  const uint32_t ia = Install(a), ib = Install(b);
  emc.Insert(a, ia);
  emc.Insert(b, ib);
  EXPECT_EQ(emc.Lookup(a), ia);
  EXPECT_EQ(emc.Lookup(b), ib);
  EXPECT_EQ(emc.stats().evictions, 0u);
}

// Every key gets the same hash: all collide on the same two slots.  The EMC
// must never answer with another key's megaflow, and exactly two keys can be
// resident.
TEST_F(EmcTest, ConstantHashNeverReturnsAWrongMegaflow) {
  constexpr int kKeys = 500;
  for (EmcPolicy p : kAllPolicies) {
    SCOPED_TRACE(EmcPolicyName(p));
    Emc emc(&pool_, Config(p, 256, 7));
    std::vector<FlowKey> keys;
    std::vector<uint32_t> idx;
    for (int i = 0; i < kKeys; ++i) {
      keys.push_back(WithHash(NewKey(), 0x5555aaaa5555aaaaULL));
      idx.push_back(Install(keys.back()));
    }
    ASSERT_NO_FATAL_FAILURE(LookupOrInsert(emc, keys, idx, /*seed=*/3,
                                           4 * kKeys, /*check_insert=*/true));
    int resident = 0;
    ASSERT_NO_FATAL_FAILURE(CountResident(emc, keys, idx, &resident));
    EXPECT_EQ(resident, 2) << EmcPolicyName(p);
    EXPECT_EQ(emc.Occupancy(), 2u);
    for (uint32_t i : idx) Free(i);
  }
}

// A poor hash (small integers): all slot1 values are 0 or 1.  Still correct.
TEST_F(EmcTest, LowEntropyHashStaysCorrect) {
  for (EmcPolicy p : kAllPolicies) {
    SCOPED_TRACE(EmcPolicyName(p));
    Emc emc(&pool_, Config(p, 1024, 9));
    std::vector<FlowKey> keys;
    std::vector<uint32_t> idx;
    for (int i = 0; i < 600; ++i) {
      keys.push_back(WithHash(NewKey(), static_cast<uint64_t>(i)));
      idx.push_back(Install(keys.back()));
      emc.Insert(keys.back(), idx.back());
    }
    int resident = 0;
    ASSERT_NO_FATAL_FAILURE(CountResident(emc, keys, idx, &resident));
    EXPECT_EQ(static_cast<uint32_t>(resident), emc.Occupancy());
    EXPECT_GT(resident, 0);
    for (uint32_t i : idx) Free(i);
  }
}

TEST_F(EmcTest, InsertProbabilityOneAlwaysZeroNever) {
  const FlowKey a = NewKey();
  const uint32_t ia = Install(a);
  EmcConfig cfg;
  cfg.insert_inv_prob = 1;
  Emc always(&pool_, cfg);
  for (int i = 0; i < 1000; ++i) always.MaybeInsert(a, ia);
  EXPECT_EQ(always.stats().inserts, 1000u);
  EXPECT_EQ(always.stats().skipped, 0u);
  EXPECT_EQ(always.Lookup(a), ia);

  cfg.insert_inv_prob = 0;
  Emc never(&pool_, cfg);
  for (int i = 0; i < 1000; ++i) never.MaybeInsert(NewKey(), ia);
  never.MaybeInsert(a, ia);
  EXPECT_EQ(never.stats().inserts, 0u);
  EXPECT_EQ(never.Occupancy(), 0u);
  EXPECT_EQ(never.Lookup(a), kInvalidIndex);
  // Insert() itself is unconditional, and lookups still work when off.
  never.Insert(a, ia);
  EXPECT_EQ(never.Lookup(a), ia);
}

TEST_F(EmcTest, InsertProbabilityOneInAHundred) {
  const FlowKey a = NewKey();
  const uint32_t ia = Install(a);
  constexpr int kTrials = 100000;
  Emc emc(&pool_);  // default N = 100
  for (int i = 0; i < kTrials; ++i) emc.MaybeInsert(a, ia);
  // Expect 1000, sd ~31.5: +-200 is > 6 sd.
  EXPECT_GT(emc.stats().inserts, 800u);
  EXPECT_LT(emc.stats().inserts, 1200u);
  EXPECT_EQ(emc.stats().inserts + emc.stats().skipped, uint64_t{kTrials});

  emc.set_insert_inv_prob(10);
  const uint64_t before = emc.stats().inserts;
  for (int i = 0; i < 10000; ++i) emc.MaybeInsert(a, ia);
  const uint64_t got = emc.stats().inserts - before;
  EXPECT_GT(got, 800u);  // expect 1000, sd 30
  EXPECT_LT(got, 1200u);
}

TEST_F(EmcTest, InsertDecisionsAreDeterministicGivenTheSeed) {
  const FlowKey a = NewKey();
  const uint32_t ia = Install(a);
  auto decisions = [&](uint64_t seed) {
    EmcConfig cfg;
    cfg.seed = seed;
    Emc emc(&pool_, cfg);
    std::vector<bool> out;
    for (int i = 0; i < 5000; ++i) {
      const uint64_t before = emc.stats().inserts;
      emc.MaybeInsert(a, ia);
      out.push_back(emc.stats().inserts != before);
    }
    return out;
  };
  EXPECT_EQ(decisions(5), decisions(5));
  EXPECT_NE(decisions(5), decisions(6));
}

TEST_F(EmcTest, BurstsOfEverySizeWriteOnlyHits) {
  Emc emc(&pool_, Config(EmcPolicy::kCuckoo));
  std::vector<FlowKey> keys;
  std::vector<uint32_t> idx;
  for (int i = 0; i < kMaxBurst; ++i) {
    keys.push_back(NewKey());
    idx.push_back(Install(keys.back()));
    if (i % 3 != 1) emc.Insert(keys.back(), idx.back());  // 1 in 3 misses
  }
  CheckBurstsOfEverySize(
      idx,
      [&](uint32_t todo, uint32_t* out) {
        return emc.LookupBurst(keys.data(), todo, out);
      },
      [](int i) { return i % 3 != 1; });
}

TEST_F(EmcTest, OccupancySweepAndFlush) {
  Emc emc(&pool_, Config(EmcPolicy::kCuckoo, 1024));
  std::vector<FlowKey> keys;
  std::vector<uint32_t> idx;
  NewCachedKeys(emc, 100, &keys, &idx);
  EXPECT_EQ(emc.Occupancy(), 100u);
  for (int i = 0; i < 10; ++i) Free(idx[i]);
  EXPECT_EQ(emc.Occupancy(), 90u);

  // Half a lap clears some, a full lap clears all ten; live ones survive.
  emc.SweepSome(512);
  EXPECT_LE(emc.stats().swept, 10u);
  emc.SweepSome(512);
  EXPECT_EQ(emc.stats().swept, 10u);
  emc.SweepSome(2048);
  EXPECT_EQ(emc.stats().swept, 10u);
  EXPECT_EQ(emc.Occupancy(), 90u);
  for (int i = 10; i < 100; ++i) EXPECT_EQ(emc.Lookup(keys[i]), idx[i]);
  // The freed keys' entries are gone from the table, not just dead.
  EXPECT_THAT(emc.DebugString(1000), ::testing::Not(HasSubstr(" dead hash=")));

  // The sweep rests after a full lap with no free; a later free wakes it.
  for (int i = 10; i < 15; ++i) Free(idx[i]);
  emc.SweepSome(1024);
  EXPECT_EQ(emc.stats().swept, 15u);
  EXPECT_EQ(emc.Occupancy(), 85u);

  emc.Flush();
  EXPECT_EQ(emc.Occupancy(), 0u);
  for (int i = 15; i < 100; ++i) EXPECT_EQ(emc.Lookup(keys[i]), kInvalidIndex);
}

// Keys longer than the entry's inline words (IPv6: 8 words) keep the rest in
// the overflow array: a key that differs only there is a different key,
// whatever the hash, and cuckoo moves carry the overflow along.
TEST_F(EmcTest, LongKeysCompareAndMoveTheirOverflowWords) {
  for (EmcPolicy p : kAllPolicies) {
    SCOPED_TRACE(EmcPolicyName(p));
    Emc emc(&pool_, Config(p));
    const FlowKey a = NewKey();  // dense: all 9 words present
    ASSERT_GT(a.n_words, kEmcInlineWords);
    for (int w = kEmcInlineWords; w < a.n_words; ++w) {
      FlowKey b = a;
      b.words[w] ^= 1;  // same hash, same map, same inline words
      const uint32_t ia = Install(a);
      emc.Insert(a, ia);
      EXPECT_EQ(emc.Lookup(b), kInvalidIndex) << "word " << w;
      const uint32_t ib = Install(b);
      emc.Insert(b, ib);  // a second entry, not an update of a's
      EXPECT_EQ(emc.Lookup(b), ib) << "word " << w;
      EXPECT_EQ(emc.Lookup(a), ia) << "word " << w;
      Free(ia);
      Free(ib);
    }
  }
  // Cuckoo in a small table: keys move to their other slot to make room;
  // without evictions every key must still be found, overflow included.
  uint64_t moves = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Emc emc(&pool_, Config(EmcPolicy::kCuckoo, 64, seed));
    std::vector<FlowKey> keys;
    std::vector<uint32_t> idx;
    ASSERT_NO_FATAL_FAILURE(NewCachedKeys(emc, 40, &keys, &idx));
    if (emc.stats().evictions != 0) continue;
    moves += emc.stats().moves;
    for (size_t k = 0; k < keys.size(); ++k)
      ASSERT_EQ(emc.Lookup(keys[k]), idx[k]) << "seed " << seed << " key " << k;
    for (uint32_t i : idx) Free(i);
  }
  EXPECT_GT(moves, 0u);
}

// Random interleaving of inserts, frees, re-allocations and lookups against
// a reference map: a hit must always be the megaflow last inserted for that
// key, and it must be live.
TEST_F(EmcTest, RandomOpsAgreeWithReference) {
  for (EmcPolicy p : kAllPolicies) {
    SCOPED_TRACE(EmcPolicyName(p));
    Emc emc(&pool_, Config(p, 64, 11));
    std::vector<FlowKey> keys;
    for (int i = 0; i < 200; ++i) keys.push_back(NewKey());
    std::vector<uint32_t> expected;
    ASSERT_NO_FATAL_FAILURE(RandomOps(
        emc, keys, /*seed=*/17, /*steps=*/20000,
        [&](int step) {
          if (step % 64 == 0) emc.SweepSome(8);
        },
        &expected));
    uint32_t live_resident = 0;
    for (size_t k = 0; k < keys.size(); ++k)
      live_resident += emc.Lookup(keys[k]) != kInvalidIndex;
    EXPECT_EQ(emc.Occupancy(), live_resident);
    for (uint32_t i : expected)
      if (i != kInvalidIndex) Free(i);
  }
}

TEST_F(EmcTest, DebugStringShowsSizeOccupancyAndProbability) {
  Emc emc(&pool_);
  const FlowKey a = NewCachedKey(emc).first;
  const std::string s = emc.DebugString();
  EXPECT_THAT(s, HasSubstr("entries=8192"));
  EXPECT_THAT(s, HasSubstr("occupancy=1"));
  EXPECT_THAT(s, HasSubstr("insert_inv_prob=100"));
  EXPECT_THAT(s, HasSubstr("policy=cuckoo"));
  EXPECT_THAT(s, HasSubstr(absl::StrFormat("%016x", a.words[0])));
}

TEST(EmcConfigTest, ValidateNamesTheField) {
  EXPECT_TRUE(ValidateEmcConfig(EmcConfig{}).ok());
  EmcConfig c;
  c.entries = 1000;
  absl::Status s = ValidateEmcConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("entries"));
  EXPECT_THAT(s.message(), HasSubstr("1000"));
  c.entries = 1;
  EXPECT_FALSE(ValidateEmcConfig(c).ok());
  c = EmcConfig{};
  c.max_moves = 1000;
  s = ValidateEmcConfig(c);
  EXPECT_THAT(s.message(), HasSubstr("max_moves"));

  // The constructor never fails: it rounds up.
  MegaflowPool pool(1);
  c = EmcConfig{};
  c.entries = 1000;
  EXPECT_EQ(Emc(&pool, c).entries(), 1024u);
  c.entries = 0;
  EXPECT_EQ(Emc(&pool, c).entries(), 2u);
}

}  // namespace
}  // namespace flowclass
