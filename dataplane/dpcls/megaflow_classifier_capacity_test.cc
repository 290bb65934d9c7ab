// The megaflow classifier at its limits and around them: pool, subtable and
// port exhaustion, full and near-full cuckoo tables, port isolation and churn,
// a hot path and Install/Remove/Rank that never allocate, Clear, and the
// debug dump.
#include "dataplane/dpcls/megaflow_classifier.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <new>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/dpcls/megaflow_classifier_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/megaflow_testing.h"

// Counts every plain operator new in this binary, so tests can assert that
// the hot path and Install/Remove never allocate.
namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// noinline: once inlined, g++ 12 sees malloc paired with a delete-expression
// and warns (-Wmismatched-new-delete) although the pair is consistent.
[[gnu::noinline]] void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace flowclass {
namespace {

using ::testing::HasSubstr;

// ----------------------------------------------------------- capacity ----

TEST(MegaflowClassifierTest, PoolExhaustionFailsCleanly) {
  MegaflowPool pool(8);
  auto c = MakeClassifier(&pool);
  const Flow mask = PortMask({{Field::kTpDst, 0xffff}});
  std::vector<Megaflow*> mfs;
  for (int i = 0; i < 8; ++i) {
    mfs.push_back(c->Install(PortFlow(1, {{Field::kTpDst, i}}), mask, Out(i)));
    ASSERT_NE(mfs.back(), nullptr);
  }
  Flow v = PortFlow(1, {{Field::kTpDst, 100}});
  EXPECT_EQ(c->Install(v, mask, Out(1)), nullptr);
  // A failed install of a new shape on a new port leaves nothing behind.
  v.Set(Field::kInPort, 2);
  EXPECT_EQ(c->Install(v, PortMask(), Out(1)), nullptr);
  EXPECT_EQ(c->megaflow_count(), 8u);
  EXPECT_EQ(c->subtable_count(), 1u);
  EXPECT_EQ(c->port_count(), 1u);
  // Everything installed still hits; freeing one makes room.
  for (int i = 0; i < 8; ++i) {
    FlowKey k = MakeFiveTupleKey(0, 0, 0, i, 6, 1);
    Megaflow* out = nullptr;
    ASSERT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 1u);
    EXPECT_EQ(out, mfs[i]);
  }
  c->Remove(mfs[3]);
  EXPECT_NE(c->Install(v, PortMask(), Out(1)), nullptr);
}

TEST(MegaflowClassifierTest, SubtableAndPortExhaustionFailCleanly) {
  MegaflowPool pool(64);
  MegaflowClassifierOptions options;
  options.max_subtables = 3;
  options.max_ports = 2;
  auto c = MakeClassifier(&pool, options);
  auto install = [&](uint32_t port, int shape) {
    return c->Install(PortFlow(port),
                      PortMask({{Field::kTpDst, 0xffffu << shape & 0xffff}}),
                      Out(port));
  };
  Megaflow* p1s0 = install(1, 0);
  Megaflow* p1s1 = install(1, 1);
  Megaflow* p2s0 = install(2, 0);
  ASSERT_NE(p1s0, nullptr);
  ASSERT_NE(p1s1, nullptr);
  ASSERT_NE(p2s0, nullptr);
  EXPECT_EQ(install(1, 2), nullptr);  // fourth subtable
  EXPECT_EQ(install(3, 0), nullptr);  // third port
  EXPECT_EQ(pool.live(), 3u);
  EXPECT_EQ(c->subtable_count(), 3u);
  EXPECT_EQ(c->port_count(), 2u);
  // Emptying port 2 frees its subtable and its port slot.
  c->Remove(p2s0);
  EXPECT_EQ(c->port_count(), 1u);
  Megaflow* p3 = install(3, 0);
  ASSERT_NE(p3, nullptr);
  FlowKey k = MakeFiveTupleKey(0, 0, 0, 0, 6, 3);
  Megaflow* out = nullptr;
  EXPECT_EQ(c->LookupBurst(3, &k, 1, &out, nullptr), 1u);
  EXPECT_EQ(out, p3);
  k = MakeFiveTupleKey(0, 0, 0, 0, 6, 2);
  EXPECT_EQ(c->LookupBurst(2, &k, 1, &out, nullptr), 0u);
}

TEST(MegaflowClassifierTest, ConstantHashFillsBothBucketsThenFails) {
  MegaflowPool pool(64);
  MegaflowClassifierOptions options;
  options.hash_override = &ConstantHash;
  auto c = MakeClassifier(&pool, options);
  const Flow mask = PortMask({{Field::kTpDst, 0xffff}});
  std::vector<Megaflow*> mfs;
  for (int i = 0; i < 17; ++i) {
    Megaflow* mf = c->Install(PortFlow(4, {{Field::kTpDst, i}}), mask, Out(i));
    if (i < 2 * internal::kBucketEntries) {
      ASSERT_NE(mf, nullptr) << i;
      mfs.push_back(mf);
    } else {
      EXPECT_EQ(mf, nullptr);
    }
  }
  EXPECT_EQ(pool.live(), 16u);
  EXPECT_EQ(c->megaflow_count(), 16u);
  FlowKey keys[17];
  for (int i = 0; i < 17; ++i) keys[i] = MakeFiveTupleKey(0, 0, 0, i, 6, 4);
  Megaflow* out[17] = {};
  EXPECT_EQ(c->LookupBurst(4, keys, BurstMap(17), out, nullptr), 0xffffu);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], mfs[i]);
  c->Remove(mfs[5]);
  Megaflow* again =
      c->Install(PortFlow(4, {{Field::kTpDst, 16}}), mask, Out(16));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(c->LookupBurst(4, keys, BurstMap(17), out, nullptr),
            0x1ffffu & ~(1u << 5));
  EXPECT_EQ(out[16], again);
}

// Cuckoo moves under load: a small table filled to its pool capacity with
// the good hash keeps every megaflow reachable.
TEST(MegaflowClassifierTest, FullLoadWithCuckooMovesKeepsEverythingReachable) {
  MegaflowPool pool(1024);
  MegaflowClassifierOptions options;
  options.table_entries = 1024;  // load factor 1.0 at pool capacity
  auto c = MakeClassifier(&pool, options);
  const Flow mask = PortMask({{Field::kIpv4Dst, 0xffffffff}});
  std::vector<Megaflow*> mfs;
  for (uint32_t i = 0; i < 1024; ++i) {
    Megaflow* mf = c->Install(PortFlow(1, {{Field::kIpv4Dst, i * 2654435761u}}),
                              mask, Out(i));
    if (mf == nullptr) break;
    mfs.push_back(mf);
  }
  // Bucketised cuckoo with 8-way buckets holds > 90% before the first failure.
  EXPECT_GT(mfs.size(), 920u);
  ASSERT_TRUE(c->CheckInvariants().ok()) << c->CheckInvariants();
  for (size_t i = 0; i < mfs.size(); ++i) {
    FlowKey k = MakeFiveTupleKey(0, static_cast<uint32_t>(i) * 2654435761u, 0,
                                 0, 0, 1);
    Megaflow* out = nullptr;
    ASSERT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 1u) << i;
    ASSERT_EQ(out, mfs[i]);
  }
}

// Churn near full load (pool 480 of 512 table entries) with the good and the
// identity-like hash: cuckoo moves must leave every entry in one of its two
// buckets, and every live megaflow reachable.
class HighLoadTest : public ::testing::TestWithParam<HashCase> {};

TEST_P(HighLoadTest, CuckooChurnKeepsInvariants) {
  MegaflowPool pool(480);
  MegaflowClassifierOptions options;
  options.table_entries = 512;
  options.hash_override = GetParam().fn;
  auto c = MakeClassifier(&pool, options);
  const Flow mask =
      PortMask({{Field::kIpv4Src, 0xffffffff}, {Field::kIpv4Dst, 0xffffffff}});
  std::mt19937_64 rng(5);
  std::map<uint64_t, Megaflow*> live;
  size_t max_live = 0;
  int failed = 0;
  for (int step = 0; step < 1500 * kScale; ++step) {
    const uint64_t addrs = rng() % 1000;  // src and dst from one draw
    auto it = live.find(addrs);
    if (it != live.end()) {
      if (rng() % 4 == 0) {
        c->Remove(it->second);
        live.erase(it);
      }
      continue;
    }
    const Flow v = PortFlow(1, {{Field::kIpv4Src, addrs * 0x9e3779b1u},
                                {Field::kIpv4Dst, addrs * 0x01000193u}});
    if (Megaflow* mf = c->Install(v, mask, Out(1))) {
      live[addrs] = mf;
    } else {
      ++failed;
    }
    max_live = std::max(max_live, live.size());
    if (step % 8 == 0) {
      ASSERT_TRUE(c->CheckInvariants().ok()) << c->CheckInvariants();
    }
  }
  ASSERT_TRUE(c->CheckInvariants().ok()) << c->CheckInvariants();
  EXPECT_GE(max_live, 440u) << "failed inserts: " << failed;
  for (auto [addrs, mf] : live) {
    FlowKey k = MakeFiveTupleKey(static_cast<uint32_t>(addrs * 0x9e3779b1u),
                                 static_cast<uint32_t>(addrs * 0x01000193u), 0,
                                 0, 0, 1);
    Megaflow* out = nullptr;
    ASSERT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 1u);
    ASSERT_EQ(out, mf);
  }
}

// The constant hash holds only 16 entries: covered by the tests above.
INSTANTIATE_TEST_SUITE_P(Hashes, HighLoadTest,
                         ::testing::Values(kTestHashes[0], kTestHashes[1]),
                         HashCaseName);

// --------------------------------------------------------------- ports ----

TEST(MegaflowClassifierTest, PortsAreIsolated) {
  MegaflowPool pool(64);
  auto c = MakeClassifier(&pool);
  const Flow mask = PortMask({{Field::kTpDst, 0xffff}});
  Flow v = PortFlow(1, {{Field::kTpDst, 22}});
  Megaflow* m1 = c->Install(v, mask, Out(10));
  v.Set(Field::kInPort, 2);
  Megaflow* m2 = c->Install(v, mask, Out(20));
  ASSERT_NE(m1, nullptr);
  ASSERT_NE(m2, nullptr);
  EXPECT_NE(m1, m2);
  EXPECT_NE(m1->subtable, m2->subtable);  // one subtable list per port
  EXPECT_EQ(c->RankOf(m1->subtable), 0);
  EXPECT_EQ(c->RankOf(m2->subtable), 0);
  FlowKey k1 = MakeFiveTupleKey(0, 0, 0, 22, 6, 1);
  FlowKey k2 = MakeFiveTupleKey(0, 0, 0, 22, 6, 2);
  Megaflow* out = nullptr;
  EXPECT_EQ(c->LookupBurst(1, &k1, 1, &out, nullptr), 1u);
  EXPECT_EQ(out, m1);
  EXPECT_EQ(c->LookupBurst(2, &k2, 1, &out, nullptr), 1u);
  EXPECT_EQ(out, m2);
  // Removing port 1's megaflow does not disturb port 2.
  c->Remove(m1);
  EXPECT_EQ(c->LookupBurst(1, &k1, 1, &out, nullptr), 0u);
  EXPECT_EQ(c->LookupBurst(2, &k2, 1, &out, nullptr), 1u);
  EXPECT_EQ(c->port_count(), 1u);
}

// Port slots come and go (the in_port map deletes by backward shift); every
// present port must stay findable.
TEST(MegaflowClassifierTest, PortChurnKeepsEveryPortFindable) {
  MegaflowPool pool(64);
  MegaflowClassifierOptions options;
  options.max_ports = 8;
  auto c = MakeClassifier(&pool, options);
  std::mt19937 rng(7);
  std::map<uint32_t, Megaflow*> present;
  for (int step = 0; step < 300 * kScale; ++step) {
    // Few distinct values so the 16-cell map sees clusters and wrap-around.
    const uint32_t port = (rng() % 24) * 0x10001u;
    auto it = present.find(port);
    if (it != present.end()) {
      c->Remove(it->second);
      present.erase(it);
    } else {
      Megaflow* mf = c->Install(PortFlow(port), PortMask(), Out(port));
      if (present.size() < 8) {
        ASSERT_NE(mf, nullptr);
        present[port] = mf;
      } else {
        ASSERT_EQ(mf, nullptr);
      }
    }
    ASSERT_EQ(c->port_count(), present.size());
    for (auto [p, mf] : present) {
      FlowKey k = MakeFiveTupleKey(0, 0, 0, 0, 0, p);
      Megaflow* out = nullptr;
      ASSERT_EQ(c->LookupBurst(p, &k, 1, &out, nullptr), 1u) << p;
      ASSERT_EQ(out, mf);
    }
  }
}

// ------------------------------------------------ no allocation, clear ----

TEST(MegaflowClassifierTest, HotPathAndInstallRemoveRankNeverAllocate) {
  MegaflowPool pool(256);
  auto c = MakeClassifier(&pool);
  Generator gen(99);
  FlowKey keys[kMaxBurst];
  for (int i = 0; i < kMaxBurst; ++i)
    keys[i] = FlowKey::FromFlow(gen.RandomFlow(7));
  Megaflow* out[kMaxBurst];
  std::vector<Megaflow*> mfs;
  mfs.reserve(1000);
  const long before = g_allocations.load();
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 20; ++i) {
      auto [value, mask] = gen.RandomMegaflow();
      value.Set(Field::kInPort, 7);
      if (Megaflow* mf = c->Install(value, mask, Out(1))) mfs.push_back(mf);
    }
    uint64_t lookups = 0;
    c->LookupBurst(7, keys, ~0u, out, &lookups);
    if (!mfs.empty()) c->LookupInSubtable(mfs[0]->subtable, keys, ~0u, out);
    c->Rank();
    while (mfs.size() > 10) {
      c->Remove(mfs.back());
      mfs.pop_back();
    }
  }
  c->Clear();
  EXPECT_EQ(g_allocations.load(), before);
}

TEST(MegaflowClassifierTest, ClearEmptiesEverythingAndAllowsReuse) {
  MegaflowPool pool(32);
  auto c = MakeClassifier(&pool);
  for (uint32_t p = 0; p < 4; ++p)
    ASSERT_NE(c->Install(PortFlow(p), PortMask(), Out(p)), nullptr);
  Megaflow* stale = &pool.Get(0);
  const uint32_t version = stale->version;
  c->Clear();
  EXPECT_EQ(c->megaflow_count(), 0u);
  EXPECT_EQ(c->subtable_count(), 0u);
  EXPECT_EQ(c->port_count(), 0u);
  EXPECT_EQ(pool.live(), 0u);
  EXPECT_NE(pool.Get(0).version, version);
  FlowKey k = MakeFiveTupleKey(0, 0, 0, 0, 0, 1);
  Megaflow* out = nullptr;
  EXPECT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 0u);
  Megaflow* mf = c->Install(PortFlow(1), PortMask(), Out(1));
  ASSERT_NE(mf, nullptr);
  EXPECT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 1u);
  EXPECT_EQ(out, mf);
}

TEST(MegaflowClassifierTest, DebugStringShowsPortsRanksAndMasks) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  ASSERT_NE(c->Install(PortFlow(12), PortMask({{Field::kIpv4Src, 0xffff0000}}),
                       Out(1)),
            nullptr);
  const std::string s = c->DebugString();
  EXPECT_THAT(s, HasSubstr("1 megaflows, 1 subtables, 1 ports"));
  EXPECT_THAT(s, HasSubstr("in_port 12:"));
  EXPECT_THAT(s, HasSubstr("rank 0: subtable 0"));
  EXPECT_THAT(s, HasSubstr("in_port,ipv4_src/0xffff0000"));
  EXPECT_THAT(s, HasSubstr(CpuHasAvx512Lookup() ? "fn avx512" : "fn specialised"));
}

}  // namespace
}  // namespace flowclass
