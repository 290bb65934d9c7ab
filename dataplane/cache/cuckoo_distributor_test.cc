#include "dataplane/cache/cuckoo_distributor.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dataplane/dpcls/megaflow.h"
#include "tests/common/sanitizer.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

constexpr int kScale = kSanitized ? 4 : 1;  // fewer iterations under ASan

// A key that only the CD's view of it (the hash) distinguishes.
FlowKey KeyWithHash(uint64_t hash) {
  FlowKey k = MakeFiveTupleKey(static_cast<uint32_t>(hash),
                               static_cast<uint32_t>(hash >> 32), 1, 2,
                               kIpProtoTcp);
  k.hash = hash;
  return k;
}

std::vector<FlowKey> RandomKeys(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<FlowKey> keys;
  keys.reserve(n);
  for (int i = 0; i < n; ++i) {
    const uint64_t r = rng();
    keys.push_back(MakeFiveTupleKey(static_cast<uint32_t>(r),
                                    static_cast<uint32_t>(r >> 32),
                                    static_cast<uint16_t>(i),
                                    static_cast<uint16_t>(r >> 16),
                                    kIpProtoUdp));
  }
  return keys;
}

// Keys that share one CD entry: same signature and same bucket pair.
using AliasClass = std::pair<uint32_t, uint16_t>;  // (min bucket, sig)
AliasClass ClassOf(const CuckooDistributor& cd, const FlowKey& k) {
  const CdPosition p = cd.PositionOf(k);
  return {std::min(p.bucket1, p.bucket2), p.sig};
}

uint32_t ScanOccupancy(const CuckooDistributor& cd) {
  uint32_t n = 0;
  for (uint32_t b = 0; b < cd.num_buckets(); ++b)
    for (int s = 0; s < kCdBucketEntries; ++s) n += cd.bucket(b).sig[s] != 0;
  return n;
}

bool BucketHasSig(const CdBucket& b, uint16_t sig) {
  for (int s = 0; s < kCdBucketEntries; ++s)
    if (b.sig[s] == sig) return true;
  return false;
}

// ---------------------------------------------------------------------------
// Construction and hashing
// ---------------------------------------------------------------------------

TEST(CuckooDistributorTest, LayoutIsOneCacheLinePerBucket) {
  CuckooDistributor cd(CdConfig{.entries = 1024});
  EXPECT_EQ(cd.capacity(), 1024u);
  EXPECT_EQ(cd.num_buckets(), 64u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&cd.bucket(0)) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&cd.bucket(1)) -
                reinterpret_cast<uintptr_t>(&cd.bucket(0)),
            64u);
  EXPECT_EQ(cd.Occupancy(), 0u);
  EXPECT_EQ(ScanOccupancy(cd), 0u);
}

TEST(CuckooDistributorTest, DefaultCapacityIsOneMillionEntries) {
  CuckooDistributor cd;
  EXPECT_EQ(cd.capacity(), 1u << 20);
  EXPECT_EQ(cd.num_buckets(), 65536u);
}

TEST(CuckooDistributorTest, ConstructorNormalisesCreateRejects) {
  EXPECT_EQ(CuckooDistributor(CdConfig{.entries = 0}).capacity(), 32u);
  EXPECT_EQ(CuckooDistributor(CdConfig{.entries = 1000}).capacity(), 1024u);
  EXPECT_EQ(CuckooDistributor(CdConfig{.entries = 0xffffffffu}).capacity(),
            CdConfig::kMaxEntries);

  auto bad = CuckooDistributor::Create(CdConfig{.entries = 1000});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("entries: 1000"));
  EXPECT_THAT(bad.status().message(), HasSubstr("power of two"));
  auto small = CuckooDistributor::Create(CdConfig{.entries = 16});
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(small.status().message(), HasSubstr("out of range"));
  auto good = CuckooDistributor::Create(CdConfig{.entries = 4096});
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ((*good)->capacity(), 4096u);
}

TEST(CuckooDistributorTest, PositionsAreInRangeDistinctAndNonZero) {
  std::mt19937_64 rng(7);
  for (uint32_t entries : {32u, 64u, 1024u, 1u << 20}) {
    CuckooDistributor cd(CdConfig{.entries = entries});
    std::set<uint16_t> sigs;
    for (int i = 0; i < 5000; ++i) {
      const uint64_t h = (i < 100) ? static_cast<uint64_t>(i) : rng();
      const CdPosition p = cd.PositionOfHash(h);
      ASSERT_LT(p.bucket1, cd.num_buckets());
      ASSERT_LT(p.bucket2, cd.num_buckets());
      ASSERT_NE(p.bucket1, p.bucket2) << "hash " << h;
      ASSERT_NE(p.sig, 0);
      sigs.insert(p.sig);
    }
    // Signatures use (nearly) the whole 16-bit space.
    EXPECT_GT(sigs.size(), 4500u);
  }
}

TEST(CuckooDistributorTest, PartnerBucketIsSymmetric) {
  // Two keys with the same signature whose pairs meet have the same pair:
  // find a key whose bucket1 is another key's bucket2 with an equal sig.
  CuckooDistributor cd(CdConfig{.entries = 64});  // 4 buckets
  std::map<uint16_t, std::set<std::pair<uint32_t, uint32_t>>> pairs_by_sig;
  for (uint64_t h = 0; h < 200000; ++h) {
    const CdPosition p = cd.PositionOfHash(h * 0x9e3779b97f4a7c15ULL);
    pairs_by_sig[p.sig].insert(
        {std::min(p.bucket1, p.bucket2), std::max(p.bucket1, p.bucket2)});
  }
  int checked = 0;
  for (const auto& [sig, pairs] : pairs_by_sig) {
    // With 4 buckets each signature splits them into 2 disjoint pairs.
    std::set<uint32_t> seen;
    for (const auto& [a, b] : pairs) {
      EXPECT_TRUE(seen.insert(a).second) << "sig " << sig;
      EXPECT_TRUE(seen.insert(b).second) << "sig " << sig;
    }
    checked += pairs.size() >= 2;
  }
  EXPECT_GT(checked, 100);
}

// ---------------------------------------------------------------------------
// Insert / lookup / update / remove
// ---------------------------------------------------------------------------

TEST(CuckooDistributorTest, InsertLookupUpdate) {
  CuckooDistributor cd(CdConfig{.entries = 1024});
  const FlowKey a = MakeFiveTupleKey(0x0a000001, 0x0a000002, 10, 20, 6);
  const FlowKey b = MakeFiveTupleKey(0x0a000001, 0x0a000003, 10, 20, 6);
  uint16_t st = 0xdead;
  EXPECT_FALSE(cd.Lookup(a, &st));
  EXPECT_EQ(st, 0xdead);

  cd.Insert(a, 7);
  ASSERT_TRUE(cd.Lookup(a, &st));
  EXPECT_EQ(st, 7);
  EXPECT_FALSE(cd.Lookup(b, &st));
  EXPECT_EQ(cd.Occupancy(), 1u);

  cd.Insert(a, 65535);  // every id is valid, including the max
  ASSERT_TRUE(cd.Lookup(a, &st));
  EXPECT_EQ(st, 65535);
  EXPECT_EQ(cd.Occupancy(), 1u);
  cd.Insert(a, 0);
  ASSERT_TRUE(cd.Lookup(a, &st));
  EXPECT_EQ(st, 0);
  EXPECT_EQ(cd.Occupancy(), 1u);
  EXPECT_EQ(cd.stats().inserts, 1u);
  EXPECT_EQ(cd.stats().updates, 2u);

  cd.Insert(b, 3);
  EXPECT_EQ(cd.Occupancy(), 2u);
  ASSERT_TRUE(cd.Lookup(b, &st));
  EXPECT_EQ(st, 3);
  ASSERT_TRUE(cd.Lookup(a, &st));
  EXPECT_EQ(st, 0);
  EXPECT_EQ(ScanOccupancy(cd), 2u);
}

TEST(CuckooDistributorTest, RemoveClearsOnlyThatEntry) {
  CuckooDistributor cd(CdConfig{.entries = 1024});
  const std::vector<FlowKey> keys = RandomKeys(50, 1);
  for (int i = 0; i < 50; ++i) cd.Insert(keys[i], static_cast<uint16_t>(i));
  ASSERT_EQ(cd.Occupancy(), 50u);
  EXPECT_TRUE(cd.Remove(keys[10]));
  EXPECT_FALSE(cd.Remove(keys[10]));
  EXPECT_EQ(cd.Occupancy(), 49u);
  EXPECT_EQ(ScanOccupancy(cd), 49u);
  uint16_t st;
  EXPECT_FALSE(cd.Lookup(keys[10], &st));
  for (int i = 0; i < 50; ++i) {
    if (i == 10) continue;
    ASSERT_TRUE(cd.Lookup(keys[i], &st)) << i;
    EXPECT_EQ(st, i);
  }
  // The slot is reusable.
  cd.Insert(keys[10], 99);
  ASSERT_TRUE(cd.Lookup(keys[10], &st));
  EXPECT_EQ(st, 99);
  EXPECT_EQ(cd.Occupancy(), 50u);
}

TEST(CuckooDistributorTest, SecondBucketUsedWhenFirstIsFull) {
  CuckooDistributor cd(CdConfig{.entries = 64});  // 4 buckets
  // 17 keys with bucket1 == 0 and distinct signatures.
  std::vector<FlowKey> keys;
  std::set<uint16_t> sigs;
  std::mt19937_64 rng(3);
  while (keys.size() < 17) {
    const FlowKey k = KeyWithHash(rng() & ~uint64_t{3});  // bucket1 = 0
    const CdPosition p = cd.PositionOf(k);
    ASSERT_EQ(p.bucket1, 0u);
    if (sigs.insert(p.sig).second) keys.push_back(k);
  }
  for (int i = 0; i < 16; ++i) cd.Insert(keys[i], static_cast<uint16_t>(i));
  for (int i = 0; i < 16; ++i)
    EXPECT_TRUE(BucketHasSig(cd.bucket(0), cd.PositionOf(keys[i]).sig));
  const CdPosition p16 = cd.PositionOf(keys[16]);
  EXPECT_FALSE(BucketHasSig(cd.bucket(p16.bucket2), p16.sig));
  cd.Insert(keys[16], 16);
  EXPECT_TRUE(BucketHasSig(cd.bucket(p16.bucket2), p16.sig));
  EXPECT_FALSE(BucketHasSig(cd.bucket(0), p16.sig));
  EXPECT_EQ(cd.Occupancy(), 17u);
  EXPECT_EQ(cd.stats().evictions, 0u);
  for (int i = 0; i < 17; ++i) {
    uint16_t st;
    ASSERT_TRUE(cd.Lookup(keys[i], &st)) << i;
    EXPECT_EQ(st, i);
  }
  // Updating the key that lives in bucket 2 updates it there (no duplicate in
  // bucket 1 even after bucket 1 gets a free slot).
  ASSERT_TRUE(cd.Remove(keys[0]));
  cd.Insert(keys[16], 116);
  EXPECT_FALSE(BucketHasSig(cd.bucket(0), p16.sig));
  EXPECT_EQ(cd.Occupancy(), 16u);
  uint16_t st;
  ASSERT_TRUE(cd.Lookup(keys[16], &st));
  EXPECT_EQ(st, 116);
}

TEST(CuckooDistributorTest, VictimReplacementWhenBothBucketsAreFull) {
  // 32 entries = 2 buckets: every key has the pair {0, 1}.
  CuckooDistributor cd(CdConfig{.entries = 32});
  std::vector<FlowKey> keys;
  std::set<uint16_t> sigs;
  std::mt19937_64 rng(11);
  while (keys.size() < 300) {
    const FlowKey k = KeyWithHash(rng());
    if (sigs.insert(cd.PositionOf(k).sig).second) keys.push_back(k);
  }
  for (int i = 0; i < 32; ++i) cd.Insert(keys[i], static_cast<uint16_t>(i));
  EXPECT_EQ(cd.Occupancy(), 32u);
  EXPECT_EQ(cd.stats().evictions, 0u);
  uint16_t st;
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(cd.Lookup(keys[i], &st));

  cd.Insert(keys[32], 32);
  EXPECT_EQ(cd.Occupancy(), 32u);
  EXPECT_EQ(cd.stats().evictions, 1u);
  ASSERT_TRUE(cd.Lookup(keys[32], &st));
  EXPECT_EQ(st, 32);
  int old_hits = 0;
  for (int i = 0; i < 32; ++i) old_hits += cd.Lookup(keys[i], &st);
  EXPECT_EQ(old_hits, 31);

  // Many more: the newest always hits, occupancy stays at capacity, and the
  // victims are spread over both buckets and all slots.
  CdBucket before[2] = {cd.bucket(0), cd.bucket(1)};
  std::set<int> replaced_slots;
  for (int i = 33; i < 300; ++i) {
    cd.Insert(keys[i], static_cast<uint16_t>(i));
    ASSERT_TRUE(cd.Lookup(keys[i], &st));
    ASSERT_EQ(st, i);
    ASSERT_EQ(cd.Occupancy(), 32u);
  }
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < kCdBucketEntries; ++s)
      if (cd.bucket(b).sig[s] != before[b].sig[s])
        replaced_slots.insert(b * 16 + s);
  EXPECT_GE(replaced_slots.size(), 28u);
  EXPECT_EQ(cd.stats().evictions, 300u - 32u);
  EXPECT_EQ(ScanOccupancy(cd), 32u);
}

// ---------------------------------------------------------------------------
// Bad hashes
// ---------------------------------------------------------------------------

TEST(CuckooDistributorTest, ConstantHashAliasesToOneEntry) {
  CuckooDistributor cd(CdConfig{.entries = 1024});
  const std::vector<FlowKey> base = RandomKeys(2000 / kScale, 5);
  std::vector<FlowKey> keys;
  for (FlowKey k : base) {
    k.hash = 0x1234567812345678ULL;  // every key: same buckets, same sig
    keys.push_back(k);
  }
  std::mt19937 rng(1);
  for (size_t i = 0; i < keys.size(); ++i) {
    cd.Insert(keys[i], static_cast<uint16_t>(i * 7));
    // Any key (they are indistinguishable to the CD) sees the last insert.
    const FlowKey& probe = keys[rng() % (i + 1)];
    uint16_t st;
    ASSERT_TRUE(cd.Lookup(probe, &st));
    ASSERT_EQ(st, static_cast<uint16_t>(i * 7));
    ASSERT_LE(cd.Occupancy(), 2u * kCdBucketEntries);
  }
  EXPECT_EQ(cd.Occupancy(), 1u);
  EXPECT_EQ(ScanOccupancy(cd), 1u);
  uint16_t out[kMaxBurst];
  EXPECT_EQ(cd.LookupBurst(keys.data(), 0xffffffffu, out), 0xffffffffu);
  for (uint16_t v : out) EXPECT_EQ(v, static_cast<uint16_t>((keys.size() - 1) * 7));

  EXPECT_TRUE(cd.Remove(keys[0]));
  EXPECT_EQ(cd.LookupBurst(keys.data(), 0xffffffffu, out), 0u);
  EXPECT_EQ(cd.Occupancy(), 0u);
}

TEST(CuckooDistributorTest, ConstantBucketBitsBoundedByTwoBuckets) {
  // Same bucket1 and same signature-independent bits would pile into one
  // pair; with a constant hash the pair is fixed, so occupancy is bounded by
  // two buckets however many (distinct-signature) keys compete.  Emulate
  // "many signatures, one pair" with a 2-bucket table.
  CuckooDistributor cd(CdConfig{.entries = 32});
  for (uint64_t i = 0; i < 5000u / kScale; ++i) {
    cd.Insert(KeyWithHash(i * 0x9e3779b97f4a7c15ULL), static_cast<uint16_t>(i));
    ASSERT_LE(cd.Occupancy(), 2u * kCdBucketEntries);
  }
  EXPECT_EQ(cd.Occupancy(), 32u);
}

// Reference model: one entry per alias class, last write wins, valid as long
// as no eviction happened.
void CheckAgainstModel(const CuckooDistributor& cd,
                       const std::vector<FlowKey>& keys,
                       const std::map<AliasClass, uint16_t>& model) {
  ASSERT_EQ(cd.stats().evictions, 0u) << "model assumes no eviction";
  EXPECT_EQ(cd.Occupancy(), model.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    uint16_t st = 0;
    ASSERT_TRUE(cd.Lookup(keys[i], &st)) << "key " << i;
    ASSERT_EQ(st, model.at(ClassOf(cd, keys[i]))) << "key " << i;
  }
}

TEST(CuckooDistributorTest, IdentityHashSmallIntegers) {
  CuckooDistributor cd(CdConfig{.entries = 1u << 16});  // 4096 buckets
  std::vector<FlowKey> keys;
  for (uint64_t i = 0; i < 20000u / kScale; ++i) keys.push_back(KeyWithHash(i));
  std::map<AliasClass, uint16_t> model;
  std::set<uint16_t> sigs;
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint16_t st = static_cast<uint16_t>(i % 1000);
    cd.Insert(keys[i], st);
    model[ClassOf(cd, keys[i])] = st;
    sigs.insert(cd.PositionOf(keys[i]).sig);
  }
  // Small-integer hashes still spread over signatures and buckets.
  EXPECT_GT(sigs.size(), keys.size() * 3 / 4);
  EXPECT_GT(model.size(), keys.size() * 99 / 100);
  CheckAgainstModel(cd, keys, model);
  // Keys alone in their class return exactly their own subtable.
  std::map<AliasClass, int> class_size;
  for (const FlowKey& k : keys) ++class_size[ClassOf(cd, k)];
  for (size_t i = 0; i < keys.size(); ++i) {
    if (class_size[ClassOf(cd, keys[i])] != 1) continue;
    uint16_t st;
    ASSERT_TRUE(cd.Lookup(keys[i], &st));
    ASSERT_EQ(st, i % 1000);
  }
}

TEST(CuckooDistributorTest, RealKeysMatchModelAcrossRewrites) {
  CuckooDistributor cd;  // default 1M entries
  const std::vector<FlowKey> keys = RandomKeys(100000 / kScale, 99);
  std::map<AliasClass, uint16_t> model;
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint16_t st = static_cast<uint16_t>(i % 5000);
    cd.Insert(keys[i], st);
    model[ClassOf(cd, keys[i])] = st;
  }
  CheckAgainstModel(cd, keys, model);
  // Signature aliasing is rare at this load.
  EXPECT_GT(model.size(), keys.size() * 999 / 1000);
  // Rewrite every third key (a false hit re-inserted with the right subtable).
  for (size_t i = 0; i < keys.size(); i += 3) {
    const uint16_t st = static_cast<uint16_t>(60000 + i % 10);
    cd.Insert(keys[i], st);
    model[ClassOf(cd, keys[i])] = st;
  }
  CheckAgainstModel(cd, keys, model);
  // Bursts agree with single lookups.
  for (size_t i = 0; i + kMaxBurst <= keys.size(); i += kMaxBurst * 37) {
    uint16_t out[kMaxBurst];
    ASSERT_EQ(cd.LookupBurst(&keys[i], 0xffffffffu, out), 0xffffffffu);
    for (int j = 0; j < kMaxBurst; ++j)
      ASSERT_EQ(out[j], model.at(ClassOf(cd, keys[i + j])));
  }
}

// ---------------------------------------------------------------------------
// Bursts
// ---------------------------------------------------------------------------

TEST(CuckooDistributorTest, BurstsOfEverySizeWriteOnlyHits) {
  CuckooDistributor cd(CdConfig{.entries = 4096});
  const std::vector<FlowKey> keys = RandomKeys(kMaxBurst + 8, 21);
  // Even positions are resident, odd ones are not.
  for (int i = 0; i < kMaxBurst + 8; i += 2)
    cd.Insert(keys[i], static_cast<uint16_t>(100 + i));
  constexpr uint16_t kMarker = 0xbeef;
  for (int n = 0; n <= kMaxBurst; ++n) {
    for (uint32_t pattern : {0xffffffffu, 0x55555555u, 0xaaaaaaaau, 0x80000001u}) {
      const uint32_t todo = (n == 32 ? 0xffffffffu : (1u << n) - 1) & pattern;
      uint16_t out[kMaxBurst + 8];
      std::fill(std::begin(out), std::end(out), kMarker);
      const uint32_t hits = cd.LookupBurst(keys.data(), todo, out);
      // Hits exactly the resident keys asked for.
      EXPECT_EQ(hits, todo & 0x55555555u) << "n=" << n << " todo=" << todo;
      for (int i = 0; i < kMaxBurst + 8; ++i) {
        if (i < 32 && (hits >> i) & 1) {
          EXPECT_EQ(out[i], 100 + i) << "n=" << n << " i=" << i;
        } else {
          EXPECT_EQ(out[i], kMarker) << "overrun n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(CuckooDistributorTest, BurstEqualsSingleLookupsUnderEvictionPressure) {
  CuckooDistributor cd(CdConfig{.entries = 256});
  const std::vector<FlowKey> keys = RandomKeys(4096 / kScale, 8);
  std::mt19937 rng(4);
  for (size_t i = 0; i < keys.size(); ++i) {
    cd.Insert(keys[i], static_cast<uint16_t>(rng()));
    ASSERT_LE(cd.Occupancy(), 256u);
  }
  EXPECT_GT(cd.stats().evictions, 0u);
  EXPECT_EQ(ScanOccupancy(cd), cd.Occupancy());
  int total_hits = 0;
  for (size_t i = 0; i + kMaxBurst <= keys.size(); i += kMaxBurst) {
    const uint32_t todo = static_cast<uint32_t>(rng());
    uint16_t out[kMaxBurst];
    const uint32_t hits = cd.LookupBurst(&keys[i], todo, out);
    for (int j = 0; j < kMaxBurst; ++j) {
      uint16_t st = 0;
      const bool hit = cd.Lookup(keys[i + j], &st);
      ASSERT_EQ((hits >> j) & 1, ((todo >> j) & 1) && hit) << i + j;
      if ((hits >> j) & 1) {
        ASSERT_EQ(out[j], st);
      }
    }
    total_hits += std::popcount(hits);
  }
  EXPECT_GT(total_hits, 0);
}

// ---------------------------------------------------------------------------
// Control path
// ---------------------------------------------------------------------------

TEST(CuckooDistributorTest, InvalidateSubtableClearsOnlyThatSubtable) {
  CuckooDistributor cd(CdConfig{.entries = 1u << 14});
  const std::vector<FlowKey> keys = RandomKeys(2000, 31);
  for (int i = 0; i < 2000; ++i) cd.Insert(keys[i], static_cast<uint16_t>(i % 10));
  const uint32_t before = cd.Occupancy();
  ASSERT_EQ(before, 2000u);  // no aliasing with this seed and load
  EXPECT_EQ(cd.InvalidateSubtable(3), 200u);
  EXPECT_EQ(cd.Occupancy(), 1800u);
  EXPECT_EQ(ScanOccupancy(cd), 1800u);
  EXPECT_EQ(cd.InvalidateSubtable(3), 0u);
  EXPECT_EQ(cd.InvalidateSubtable(42), 0u);
  for (int i = 0; i < 2000; ++i) {
    uint16_t st;
    const bool hit = cd.Lookup(keys[i], &st);
    if (i % 10 == 3) {
      EXPECT_FALSE(hit) << i;
    } else {
      ASSERT_TRUE(hit) << i;
      EXPECT_EQ(st, i % 10);
    }
  }
  EXPECT_EQ(cd.stats().invalidated, 200u);
  // Subtable 0 is an ordinary id, not "empty".
  EXPECT_EQ(cd.InvalidateSubtable(0), 200u);
  EXPECT_EQ(cd.Occupancy(), 1600u);
}

TEST(CuckooDistributorTest, FlushEmptiesAndTableStaysUsable) {
  CuckooDistributor cd(CdConfig{.entries = 1024});
  const std::vector<FlowKey> keys = RandomKeys(300, 2);
  for (int i = 0; i < 300; ++i) cd.Insert(keys[i], 1);
  EXPECT_GT(cd.Occupancy(), 250u);
  cd.Flush();
  EXPECT_EQ(cd.Occupancy(), 0u);
  EXPECT_EQ(ScanOccupancy(cd), 0u);
  uint16_t out[kMaxBurst];
  EXPECT_EQ(cd.LookupBurst(keys.data(), 0xffffffffu, out), 0u);
  cd.Insert(keys[5], 9);
  uint16_t st;
  ASSERT_TRUE(cd.Lookup(keys[5], &st));
  EXPECT_EQ(st, 9);
  EXPECT_EQ(cd.Occupancy(), 1u);
  EXPECT_EQ(cd.stats().flushes, 1u);
}

TEST(CuckooDistributorTest, OccupancyTracksRandomOperations) {
  CuckooDistributor cd(CdConfig{.entries = 512});
  const std::vector<FlowKey> keys = RandomKeys(2000, 77);
  std::mt19937 rng(12);
  for (int op = 0; op < 20000 / kScale; ++op) {
    const FlowKey& k = keys[rng() % keys.size()];
    switch (rng() % 10) {
      case 0:
        cd.Remove(k);
        break;
      case 1:
        if (rng() % 50 == 0) cd.InvalidateSubtable(static_cast<uint16_t>(rng() % 8));
        break;
      default:
        cd.Insert(k, static_cast<uint16_t>(rng() % 8));
    }
    if (op % 97 == 0) {
      ASSERT_EQ(ScanOccupancy(cd), cd.Occupancy()) << op;
    }
  }
  EXPECT_EQ(ScanOccupancy(cd), cd.Occupancy());
  // A signature appears at most once per bucket pair.
  for (const FlowKey& k : keys) {
    const CdPosition p = cd.PositionOf(k);
    int copies = 0;
    for (uint32_t b : {p.bucket1, p.bucket2})
      for (int s = 0; s < kCdBucketEntries; ++s) copies += cd.bucket(b).sig[s] == p.sig;
    ASSERT_LE(copies, 1);
  }
}

TEST(CuckooDistributorTest, DebugStringShowsShapeAndCounters) {
  CuckooDistributor cd(CdConfig{.entries = 1024});
  const std::vector<FlowKey> keys = RandomKeys(10, 3);
  for (const FlowKey& k : keys) cd.Insert(k, 1);
  const std::string s = cd.DebugString();
  EXPECT_THAT(s, HasSubstr("capacity 1024 (64 buckets x 16)"));
  EXPECT_THAT(s, HasSubstr("occupancy 10 "));
  EXPECT_THAT(s, HasSubstr("inserts 10 "));
  EXPECT_THAT(s, HasSubstr("bucket fill:"));
}

}  // namespace
}  // namespace flowclass
