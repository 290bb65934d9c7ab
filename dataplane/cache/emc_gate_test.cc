// emc_gate_test.cc — EmcGate's bands: the hit-rate gate both pipelines use,
// and the cost gating (AccountCosted) of the acl pipeline.
#include "dataplane/cache/emc_gate.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace flowclass {
namespace {

constexpr uint64_t kBurst = 32;

// Runs `windows` windows of bursts of kBurst packets: a burst that looks the
// EMC up hits `hits_of_32` of its keys and costs `probe_cpp` cycles a packet,
// one that does not costs `skip_cpp`.  costed: AccountCosted, else Account.
// Returns how many bursts of the last window looked the EMC up.
int RunWindows(EmcGate* g, int windows, uint64_t hits_of_32, uint64_t probe_cpp, uint64_t skip_cpp,
        bool costed) {
  int probed = 0;
  for (int w = 0; w < windows; ++w) {
    probed = 0;
    for (uint32_t b = 0; b < EmcGate::kWindow; ++b) {
      const bool p = g->probe();
      probed += p;
      const uint64_t cycles = kBurst * (p ? probe_cpp : skip_cpp);
      if (costed) {
        g->AccountCosted(kBurst, p ? kBurst : 0, p ? hits_of_32 : 0, cycles);
      } else {
        g->Account(p ? kBurst : 0, p ? hits_of_32 : 0);
      }
    }
  }
  return probed;
}

constexpr int kAll = static_cast<int>(EmcGate::kWindow);
constexpr int kSampled = kAll / static_cast<int>(EmcGate::kSampleEvery);
constexpr int kControls = kAll / static_cast<int>(EmcGate::kControlEvery);

TEST(EmcGateTest, HitRateAloneDecidesWithoutCycles) {
  EmcGate g;
  // 16 hits of 32, costlier than no EMC: Account knows no cost, so it looks.
  EXPECT_EQ(RunWindows(&g, 4, 16, 200, 100, false), kAll);
  EXPECT_FALSE(g.skipping());
  EXPECT_FALSE(g.measuring());
  // 3 of 32 (below 1 in 8): sampled.
  EXPECT_EQ(RunWindows(&g, 2, 3, 200, 100, false), kSampled);
  EXPECT_TRUE(g.skipping());
  // 4 of 32: back.
  EXPECT_EQ(RunWindows(&g, 2, 4, 200, 100, false), kAll);
}

TEST(EmcGateTest, BetweenTheBandsTheCheaperBurstsDecide) {
  // Half the keys hit, but a burst that looks the EMC up costs more a packet
  // than one that does not (rte_acl behind it, a cold EMC): skipped, the
  // sampled bursts keep measuring.
  EmcGate g;
  RunWindows(&g, 1, 16, 120, 100, true);  // first window: no control bursts yet
  EXPECT_TRUE(g.measuring());
  EXPECT_FALSE(g.skipping());
  EXPECT_EQ(RunWindows(&g, 1, 16, 120, 100, true), kAll - kControls);  // 1 in 16 a control
  EXPECT_TRUE(g.skipping());
  EXPECT_EQ(RunWindows(&g, 3, 16, 120, 100, true), kSampled);
  EXPECT_TRUE(g.skipping());
  // The same hits, now cheaper than the lookup they save: looked up again,
  // one burst in kControlEvery a control.
  EXPECT_EQ(RunWindows(&g, 1, 16, 80, 100, true), kSampled);
  EXPECT_FALSE(g.skipping());
  EXPECT_EQ(RunWindows(&g, 3, 16, 80, 100, true), kAll - kControls);
  EXPECT_FALSE(g.skipping());
  EXPECT_TRUE(g.measuring());
}

TEST(EmcGateTest, IntoTheMiddleBandTheGateKeepsItsModeUntilItHasMeasured) {
  EmcGate g;
  RunWindows(&g, 1, 0, 100, 100, true);  // no hits: skipped
  EXPECT_TRUE(g.skipping());
  // 1 hit in 4: the window ends in the middle band without cycles (none were
  // read outside it): still skipped, now measuring.
  EXPECT_EQ(RunWindows(&g, 1, 8, 80, 100, true), kSampled);
  EXPECT_TRUE(g.skipping());
  EXPECT_TRUE(g.measuring());
  // The sampled bursts were cheaper: looked up.
  EXPECT_EQ(RunWindows(&g, 1, 8, 80, 100, true), kSampled);
  EXPECT_FALSE(g.skipping());
  EXPECT_EQ(RunWindows(&g, 1, 8, 80, 100, true), kAll - kControls);
}

TEST(EmcGateTest, CyclesDoNotOverruleTheOuterBands) {
  EmcGate g;
  // 28 of 32 (7 in 8) hits: every burst looks it up, no control bursts,
  // whatever the cycles say.
  EXPECT_EQ(RunWindows(&g, 3, 28, 500, 100, true), kAll);
  EXPECT_FALSE(g.measuring());
  EXPECT_FALSE(g.skipping());
  // Below 1 in 8: skipped even when the probing bursts look cheaper.
  RunWindows(&g, 1, 3, 50, 100, true);
  EXPECT_TRUE(g.skipping());
  EXPECT_EQ(RunWindows(&g, 3, 3, 50, 100, true), kSampled);
  EXPECT_FALSE(g.measuring());
  // Then many hits again: every burst.
  RunWindows(&g, 1, 32, 500, 100, true);
  EXPECT_EQ(RunWindows(&g, 1, 32, 500, 100, true), kAll);
}

}  // namespace
}  // namespace flowclass
