// cache_testing.h — the fixture base and checks shared by the tests of the
// flow caches in front of the classifier, EMC and SMC (header-only).  A
// cache type here has Lookup(key), Insert(key, index) and
// LookupBurst(keys, todo, out) over a MegaflowPool.
//
// The checks assert (ASSERT_*): call them as
// ASSERT_NO_FATAL_FAILURE(Check(...)) so that a failure ends the test.
#ifndef FLOWCLASS_TESTS_COMMON_CACHE_TESTING_H_
#define FLOWCLASS_TESTS_COMMON_CACHE_TESTING_H_

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <random>
#include <utility>
#include <vector>

#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"
#include "gtest/gtest.h"
#include "tests/common/flow_gen.h"
#include "tests/common/megaflow_testing.h"

namespace flowclass {

// A megaflow pool, random dense keys, and exact megaflows over them.
class CacheTest : public ::testing::Test {
 protected:
  explicit CacheTest(uint64_t seed) : pool_(4096), rng_(seed) {}

  FlowKey NewKey() { return FlowKey::FromFlow(RandomDenseFlow(rng_)); }

  // A live exact megaflow covering `key` only.
  uint32_t Install(const FlowKey& key) {
    Megaflow* m = pool_.Alloc();
    EXPECT_NE(m, nullptr);
    for (int i = 0; i < kFlowWords; ++i) m->mask.w[i] = ~uint64_t{0};
    m->value = key.ToFlow();
    return m->index;
  }
  void Free(uint32_t idx) { pool_.Free(&pool_.Get(idx)); }

  // A new key whose exact megaflow is installed and inserted into `cache`:
  // (key, megaflow index).
  template <typename Cache>
  std::pair<FlowKey, uint32_t> NewCachedKey(Cache& cache) {
    const FlowKey key = NewKey();
    const uint32_t idx = Install(key);
    cache.Insert(key, idx);
    return {key, idx};
  }
  // `n` NewCachedKey()s, appended to *keys and *idx.
  template <typename Cache>
  void NewCachedKeys(Cache& cache, int n, std::vector<FlowKey>* keys,
                     std::vector<uint32_t>* idx) {
    for (int i = 0; i < n; ++i) {
      const auto [key, index] = NewCachedKey(cache);
      keys->push_back(key);
      idx->push_back(index);
    }
  }

  // A second megaflow inserted for the same key replaces the first in
  // place: the key hits the second, one update, one entry used (although
  // the first megaflow is still live).
  template <typename Cache>
  void ExpectInsertUpdatesInPlace(Cache& cache) {
    const FlowKey a = NewKey();
    const uint32_t i1 = Install(a);
    const uint32_t i2 = Install(a);
    cache.Insert(a, i1);
    cache.Insert(a, i2);
    EXPECT_EQ(cache.Lookup(a), i2);
    EXPECT_EQ(cache.stats().updates, 1u);
    EXPECT_EQ(cache.Occupancy(), 1u);
  }

  // `steps` random operations on `keys`, drawn by std::mt19937(seed): a new
  // megaflow for a key, inserted into `cache` (the old one freed); a key's
  // megaflow freed (the revalidator); or a lookup, whose hit must be the
  // key's current megaflow, and live.  after_step(step) runs after each.
  // *expected: each key's megaflow at the end (kInvalidIndex: none).
  template <typename Cache, typename AfterStep>
  void RandomOps(Cache& cache, const std::vector<FlowKey>& keys, uint32_t seed,
                 int steps, AfterStep after_step,
                 std::vector<uint32_t>* expected) {
    expected->assign(keys.size(), kInvalidIndex);
    std::mt19937 r(seed);
    for (int step = 0; step < steps; ++step) {
      const size_t k = r() % keys.size();
      switch (r() % 4) {
        case 0:  // install a (new) megaflow and cache it
          if ((*expected)[k] != kInvalidIndex) Free((*expected)[k]);
          (*expected)[k] = Install(keys[k]);
          cache.Insert(keys[k], (*expected)[k]);
          break;
        case 1:  // revalidator drops a megaflow
          if ((*expected)[k] != kInvalidIndex) Free((*expected)[k]);
          (*expected)[k] = kInvalidIndex;
          break;
        default: {
          const uint32_t got = cache.Lookup(keys[k]);
          if (got != kInvalidIndex) {
            ASSERT_EQ(got, (*expected)[k]) << "step " << step;
            ASSERT_TRUE(pool_.Get(got).live);
          }
          break;
        }
      }
      after_step(step);
    }
  }

  MegaflowPool pool_;
  std::mt19937_64 rng_;
};

// `lookups` lookups of keys drawn by std::mt19937(seed): a hit must be the
// key's own megaflow idx[i]; a miss inserts it, and with `check_insert` the
// key must hit right after.
template <typename Cache>
void LookupOrInsert(Cache& cache, const std::vector<FlowKey>& keys,
                    const std::vector<uint32_t>& idx, uint32_t seed,
                    int lookups, bool check_insert) {
  std::mt19937 order(seed);
  for (int n = 0; n < lookups; ++n) {
    const int i = static_cast<int>(order() % keys.size());
    const uint32_t got = cache.Lookup(keys[i]);
    if (got != kInvalidIndex) {
      ASSERT_EQ(got, idx[i]);
    } else {
      cache.Insert(keys[i], idx[i]);
      if (check_insert) {
        ASSERT_EQ(cache.Lookup(keys[i]), idx[i]);
      }
    }
  }
}

// Looks every key up; each hit must be the key's own megaflow idx[i].
// *resident: the number of hits.
template <typename Cache>
void CountResident(Cache& cache, const std::vector<FlowKey>& keys,
                   const std::vector<uint32_t>& idx, int* resident) {
  *resident = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t got = cache.Lookup(keys[i]);
    if (got == kInvalidIndex) continue;
    ASSERT_EQ(got, idx[i]);
    ++*resident;
  }
}

// Bursts of every size 0..kMaxBurst, each under three todo maps (all, every
// other key, alternate nibbles): lookup_burst(todo, out) returns the hit map.
// Hits only within todo, exactly at the keys cached(i) says are cached;
// out[i] is idx[i] at a hit and untouched anywhere else, past the burst too.
template <typename LookupBurst, typename Cached>
void CheckBurstsOfEverySize(const std::vector<uint32_t>& idx,
                            LookupBurst lookup_burst, Cached cached) {
  constexpr uint32_t kMarker = 0xdeadbeefu;
  for (int n = 0; n <= kMaxBurst; ++n) {
    for (uint32_t pattern : {~uint32_t{0}, 0x55555555u, 0xf0f0f0f0u}) {
      const uint32_t todo = BurstMap(n) & pattern;
      uint32_t out[kMaxBurst + 4];
      std::fill(std::begin(out), std::end(out), kMarker);
      const uint32_t hits = lookup_burst(todo, out);
      EXPECT_EQ(hits & ~todo, 0u) << "n=" << n;
      for (int i = 0; i < kMaxBurst + 4; ++i) {
        const bool should_hit = i < n && ((todo >> i) & 1) && cached(i);
        if (i < kMaxBurst) {
          EXPECT_EQ(((hits >> i) & 1) != 0, should_hit)
              << "n=" << n << " i=" << i;
        }
        EXPECT_EQ(out[i], should_hit ? idx[i] : kMarker)
            << "n=" << n << " i=" << i;
      }
    }
  }
}

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_CACHE_TESTING_H_
