#include "dataplane/cache/smc.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <string>
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

// Hash landing in `bucket` (low bits) with signature `sig` (top 16 bits).
constexpr uint64_t HashFor(uint32_t bucket, uint16_t sig) {
  return (uint64_t{sig} << 48) | bucket;
}

class SmcTest : public CacheTest {
 protected:
  SmcTest() : CacheTest(/*seed=*/99) {}

  static SmcConfig Config(uint32_t entries, uint64_t seed = 1) {
    SmcConfig c;
    c.entries = entries;
    c.seed = seed;
    return c;
  }
};

TEST_F(SmcTest, DefaultsMatchTheArchitecture) {
  Smc smc(&pool_);
  EXPECT_EQ(smc.entries(), uint32_t{1} << 20);
  EXPECT_EQ(smc.Occupancy(), 0u);
}

TEST_F(SmcTest, HitAfterInsertMissOtherwise) {
  Smc smc(&pool_, Config(1024));
  const FlowKey a = NewKey();
  const FlowKey b = NewKey();
  EXPECT_EQ(smc.Lookup(a), kInvalidIndex);
  const uint32_t ia = Install(a);
  smc.Insert(a, ia);
  EXPECT_EQ(smc.Lookup(a), ia);
  EXPECT_EQ(smc.Lookup(b), kInvalidIndex);
  EXPECT_EQ(smc.Occupancy(), 1u);
  EXPECT_EQ(smc.stats().lookups, 3u);
  EXPECT_EQ(smc.stats().hits, 1u);
}

TEST_F(SmcTest, VerificationUsesTheMegaflowNotTheExactKey) {
  // A megaflow that only looks at word 0 covers every key with that word:
  // another key with the same signature gets a correct hit.
  Smc smc(&pool_, Config(1024));
  const FlowKey a = NewKey();
  Flow other = a.ToFlow();
  other.w[kWordL4] ^= 0x1234;
  const FlowKey b = WithHash(FlowKey::FromFlow(other), a.hash);
  Megaflow* m = pool_.Alloc();
  m->mask.w[kWordMeta] = ~uint64_t{0};
  m->value.w[kWordMeta] = a.Word(kWordMeta);
  smc.Insert(a, m->index);
  EXPECT_EQ(smc.Lookup(b), m->index);
  EXPECT_EQ(smc.stats().false_hits, 0u);
}

TEST_F(SmcTest, SameSignatureUpdatesInPlace) {
  Smc smc(&pool_, Config(1024));
  ExpectInsertUpdatesInPlace(smc);
}

TEST_F(SmcTest, FreedMegaflowMissesAndCountsAFalseHit) {
  Smc smc(&pool_, Config(1024));
  const auto [a, ia] = NewCachedKey(smc);
  Free(ia);
  EXPECT_EQ(smc.Lookup(a), kInvalidIndex);
  EXPECT_EQ(smc.stats().false_hits, 1u);
  EXPECT_EQ(smc.Occupancy(), 0u);
}

TEST_F(SmcTest, ReusedSlotForAnotherFlowMisses) {
  Smc smc(&pool_, Config(1024));
  const auto [a, ia] = NewCachedKey(smc);
  const FlowKey b = NewKey();
  Free(ia);
  const uint32_t ib = Install(b);  // same index, now b's megaflow
  ASSERT_EQ(ib, ia);
  EXPECT_EQ(smc.Lookup(a), kInvalidIndex);
  EXPECT_EQ(smc.stats().false_hits, 1u);
  EXPECT_EQ(smc.stats().hits, 0u);
}

TEST_F(SmcTest, FalseHitsAreCountedAndNeverReturned) {
  Smc smc(&pool_, Config(1024));
  const auto [a, ia] = NewCachedKey(smc);
  // 100 other flows forced onto a's bucket and signature.
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(smc.Lookup(WithHash(NewKey(), a.hash)), kInvalidIndex);
  }
  EXPECT_EQ(smc.stats().false_hits, 100u);
  EXPECT_EQ(smc.stats().lookups, 100u);
  EXPECT_EQ(smc.stats().hits, 0u);
  EXPECT_EQ(smc.Lookup(a), ia);
  EXPECT_EQ(smc.stats().false_hits, 100u);
}

TEST_F(SmcTest, FourWaysPerBucket) {
  Smc smc(&pool_, Config(64, 3));  // 16 buckets
  std::vector<FlowKey> keys;
  std::vector<uint32_t> idx;
  for (uint16_t s = 1; s <= 4; ++s) {
    keys.push_back(WithHash(NewKey(), HashFor(5, s)));
    idx.push_back(Install(keys.back()));
    smc.Insert(keys.back(), idx.back());
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(smc.Lookup(keys[i]), idx[i]);
  EXPECT_EQ(smc.stats().evictions, 0u);
  EXPECT_EQ(smc.Occupancy(), 4u);

  // A fifth signature: one of the four goes, the new one is in.
  const FlowKey e = WithHash(NewKey(), HashFor(5, 77));
  const uint32_t ie = Install(e);
  smc.Insert(e, ie);
  EXPECT_EQ(smc.Lookup(e), ie);
  int resident = 0;
  for (int i = 0; i < 4; ++i) resident += smc.Lookup(keys[i]) == idx[i];
  EXPECT_EQ(resident, 3);
  EXPECT_EQ(smc.stats().evictions, 1u);
  EXPECT_EQ(smc.Occupancy(), 4u);
}

TEST_F(SmcTest, DeadWayPreferredOverLive) {
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    Smc smc(&pool_, Config(64, seed));
    std::vector<FlowKey> keys;
    std::vector<uint32_t> idx;
    for (uint16_t s = 1; s <= 4; ++s) {
      keys.push_back(WithHash(NewKey(), HashFor(9, s)));
      idx.push_back(Install(keys.back()));
      smc.Insert(keys.back(), idx.back());
    }
    const int victim = static_cast<int>(seed % 4);
    // Install first: the pool hands freed indices straight back, and a way
    // naming a reused (live) index cannot be told from a live one.
    const FlowKey e = WithHash(NewKey(), HashFor(9, 500));
    const uint32_t ie = Install(e);
    Free(idx[victim]);
    smc.Insert(e, ie);
    EXPECT_EQ(smc.Lookup(e), ie);
    for (int i = 0; i < 4; ++i) {
      if (i == victim) continue;
      EXPECT_EQ(smc.Lookup(keys[i]), idx[i]) << "seed " << seed;
    }
    EXPECT_EQ(smc.stats().evictions, 0u);
    for (int i = 0; i < 4; ++i)
      if (i != victim) Free(idx[i]);
    Free(ie);
  }
}

TEST_F(SmcTest, EvictionVictimVaries) {
  // Which way goes is pseudo-random: over many inserts every way is hit.
  Smc smc(&pool_, Config(64, 5));
  std::vector<FlowKey> keys;
  std::vector<uint32_t> idx;
  for (uint16_t s = 1; s <= 4; ++s) {
    keys.push_back(WithHash(NewKey(), HashFor(2, s)));
    idx.push_back(Install(keys.back()));
  }
  int evicted[4] = {};
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 4; ++i) smc.Insert(keys[i], idx[i]);
    const FlowKey e = WithHash(NewKey(), HashFor(2, 1000));
    const uint32_t ie = Install(e);
    smc.Insert(e, ie);
    for (int i = 0; i < 4; ++i) evicted[i] += smc.Lookup(keys[i]) != idx[i];
    Free(ie);  // its way is dead now: the next round refills it
  }
  for (int i = 0; i < 4; ++i) EXPECT_GT(evicted[i], 20) << "way of key " << i;
}

// Every key has the same hash: same bucket, same signature.  Only one can be
// resident (a signature names one way), and every hit must be verified.
TEST_F(SmcTest, ConstantHashNeverReturnsAWrongMegaflow) {
  Smc smc(&pool_, Config(1024));
  constexpr int kKeys = 500;
  std::vector<FlowKey> keys;
  std::vector<uint32_t> idx;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(WithHash(NewKey(), 0x5555aaaa5555aaaaULL));
    idx.push_back(Install(keys.back()));
  }
  ASSERT_NO_FATAL_FAILURE(LookupOrInsert(smc, keys, idx, /*seed=*/3, 4 * kKeys,
                                         /*check_insert=*/true));
  int resident = 0;
  ASSERT_NO_FATAL_FAILURE(CountResident(smc, keys, idx, &resident));
  EXPECT_EQ(resident, 1);
  EXPECT_GT(smc.stats().false_hits, 0u);
}

// Same bucket, signatures drawn from 8 values: at most 4 resident, hits
// always right.
TEST_F(SmcTest, ConstantBucketFewSignaturesStaysCorrect) {
  Smc smc(&pool_, Config(1024, 8));
  std::vector<FlowKey> keys;
  std::vector<uint32_t> idx;
  for (int i = 0; i < 400; ++i) {
    keys.push_back(WithHash(NewKey(), HashFor(17, static_cast<uint16_t>(i % 8))));
    idx.push_back(Install(keys.back()));
  }
  ASSERT_NO_FATAL_FAILURE(LookupOrInsert(smc, keys, idx, /*seed=*/4, 4000,
                                         /*check_insert=*/false));
  int resident = 0;
  ASSERT_NO_FATAL_FAILURE(CountResident(smc, keys, idx, &resident));
  EXPECT_EQ(resident, 4);
  EXPECT_EQ(smc.Occupancy(), 4u);
}

TEST_F(SmcTest, BurstsOfEverySizeWriteOnlyHits) {
  Smc smc(&pool_, Config(4096));
  std::vector<FlowKey> keys;
  std::vector<uint32_t> idx;
  for (int i = 0; i < kMaxBurst; ++i) {
    keys.push_back(NewKey());
    idx.push_back(Install(keys.back()));
    if (i % 3 != 1) smc.Insert(keys.back(), idx.back());
  }
  // Key 4's signature points at key 5's megaflow: a false hit in the burst.
  keys[4] = WithHash(keys[4], keys[5].hash);
  CheckBurstsOfEverySize(
      idx,
      [&](uint32_t todo, uint32_t* out) {
        const uint64_t lookups_before = smc.stats().lookups;
        const uint32_t hits = smc.LookupBurst(keys.data(), todo, out);
        // One lookup per key of the todo map.
        EXPECT_EQ(smc.stats().lookups - lookups_before,
                  static_cast<uint64_t>(std::popcount(todo)));
        return hits;
      },
      [](int i) { return i % 3 != 1 && i != 4; });
}

TEST_F(SmcTest, OccupancyAndFlush) {
  Smc smc(&pool_, Config(1 << 14));
  std::vector<FlowKey> keys;
  std::vector<uint32_t> idx;
  NewCachedKeys(smc, 100, &keys, &idx);
  EXPECT_EQ(smc.Occupancy(), 100u);
  EXPECT_EQ(smc.Held(), 100u);
  for (int i = 0; i < 10; ++i) Free(idx[i]);
  EXPECT_EQ(smc.Occupancy(), 90u);
  EXPECT_EQ(smc.Held(), 100u);  // the removed megaflows' ways still hold entries
  smc.Flush();
  EXPECT_EQ(smc.Occupancy(), 0u);
  EXPECT_EQ(smc.Held(), 0u);
  for (int i = 10; i < 100; ++i) EXPECT_EQ(smc.Lookup(keys[i]), kInvalidIndex);
}

// Random inserts, frees, slot reuse and lookups against a reference: a hit
// must be the megaflow last installed for that key, and live.
TEST_F(SmcTest, RandomOpsAgreeWithReference) {
  Smc smc(&pool_, Config(64, 13));  // 16 buckets: lots of collisions
  std::vector<FlowKey> keys;
  for (int i = 0; i < 200; ++i) {
    // Only 64 distinct signatures so that false hits really happen.
    const FlowKey k = NewKey();
    keys.push_back(WithHash(k, (k.hash & 0x0000ffffffffffffULL) |
                                   (uint64_t{k.hash >> 58} << 48)));
  }
  std::vector<uint32_t> expected;
  // Held() is kept as ways fill, are reused and are flushed: it must equal
  // a walk's count after every step, and never be below the live count.
  int flushes = 0;
  ASSERT_NO_FATAL_FAILURE(RandomOps(
      smc, keys, /*seed=*/21, /*steps=*/20000,
      [&](int step) {
        ASSERT_EQ(smc.Held(), smc.CountHeld()) << "step " << step;
        ASSERT_GE(smc.Held(), smc.Occupancy()) << "step " << step;
        if (step % 5000 == 4999) {
          smc.Flush();
          ++flushes;
          ASSERT_EQ(smc.Held(), 0u);
        }
      },
      &expected));
  EXPECT_EQ(flushes, 4);
  EXPECT_GT(smc.stats().false_hits, 0u);
  EXPECT_GT(smc.stats().hits, 0u);
}

TEST_F(SmcTest, DebugStringShowsSizeAndCounters) {
  Smc smc(&pool_, Config(1024));
  const auto [a, ia] = NewCachedKey(smc);
  smc.Lookup(a);
  const std::string s = smc.DebugString();
  EXPECT_THAT(s, HasSubstr("entries=1024"));
  EXPECT_THAT(s, HasSubstr("buckets=256"));
  EXPECT_THAT(s, HasSubstr("occupancy=1"));
  EXPECT_THAT(s, HasSubstr("hits=1"));
  EXPECT_THAT(s, HasSubstr(absl::StrFormat("bucket %u:", smc.BucketOf(a.hash))));
  EXPECT_THAT(s, HasSubstr(absl::StrFormat("%04x->%u", Smc::SignatureOf(a.hash), ia)));
}

TEST(SmcConfigTest, ValidateNamesTheField) {
  EXPECT_TRUE(ValidateSmcConfig(SmcConfig{}).ok());
  SmcConfig c;
  c.entries = 3;
  absl::Status s = ValidateSmcConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("entries"));
  c.entries = 1000;
  EXPECT_FALSE(ValidateSmcConfig(c).ok());
  c.entries = 4;
  EXPECT_TRUE(ValidateSmcConfig(c).ok());

  MegaflowPool pool(1);
  c.entries = 1000;
  EXPECT_EQ(Smc(&pool, c).entries(), 1024u);
  c.entries = 0;
  EXPECT_EQ(Smc(&pool, c).entries(), 4u);
}

}  // namespace
}  // namespace flowclass
