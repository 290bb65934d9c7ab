// MegaflowPool: slots, versions and the live list under random alloc/free.
#include "dataplane/dpcls/megaflow.h"

#include <random>
#include <set>

#include "gtest/gtest.h"

namespace flowclass {
namespace {

TEST(MegaflowPool, LiveListTracksExactlyTheLiveSlots) {
  MegaflowPool pool(64);
  std::set<uint32_t> live;
  std::mt19937 rng(5);
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 2 && live.size() < pool.capacity()) {
      Megaflow* m = pool.Alloc();
      ASSERT_NE(m, nullptr);
      EXPECT_TRUE(live.insert(m->index).second);
    } else if (!live.empty()) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      const uint32_t version = pool.Get(*it).version;
      pool.Free(&pool.Get(*it));
      EXPECT_FALSE(pool.IsLive(*it, version));
      EXPECT_EQ(pool.Get(*it).version, version + 1);
      live.erase(it);
    }
    ASSERT_EQ(pool.live(), live.size());
    std::set<uint32_t> listed;
    for (uint32_t k = 0; k < pool.live(); ++k) listed.insert(pool.LiveIndex(k));
    ASSERT_EQ(listed, live) << "step " << step;
  }
}

TEST(MegaflowPool, FullPoolFailsCleanlyAndBackwardWalkMayFree) {
  MegaflowPool pool(8);
  for (int i = 0; i < 8; ++i) ASSERT_NE(pool.Alloc(), nullptr);
  EXPECT_EQ(pool.Alloc(), nullptr);
  // Freeing every other slot while walking backwards visits each live
  // megaflow exactly once (the contract Pipeline::Revalidate relies on).
  int visited = 0;
  for (uint32_t k = pool.live(); k-- > 0;) {
    Megaflow& m = pool.Get(pool.LiveIndex(k));
    ++visited;
    if (m.index % 2) pool.Free(&m);
  }
  EXPECT_EQ(visited, 8);
  EXPECT_EQ(pool.live(), 4u);
  for (uint32_t k = 0; k < pool.live(); ++k) EXPECT_EQ(pool.LiveIndex(k) % 2, 0u);
  // Freeing twice is a no-op.
  Megaflow& m = pool.Get(pool.LiveIndex(0));
  pool.Free(&m);
  pool.Free(&m);
  EXPECT_EQ(pool.live(), 3u);
}

}  // namespace
}  // namespace flowclass
