// The cost controller that decides pipeline.smc: auto (CacheCostController):
// it picks the state that costs fewer cycles per packet, settles within the
// first probe, does not oscillate on a steady (noisy) workload, probes ever
// more rarely, probes again when the workload changes, and ignores idle
// windows and forced modes.
#include "dataplane/cache/cache_cost_controller.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kPackets = 100000;  // per window, busy

// A workload: cycles per packet with the layer off and on, and a relative
// noise amplitude (deterministic: a fixed linear congruential sequence).
struct Workload {
  double off = 100;
  double on = 100;
  double noise = 0;
  // A window that follows one of the other state costs this much more (the
  // SMC's 8 MB evicted the other state's lines, or were evicted by them).
  double switch_penalty = 0;
  // Time stolen from the PMD (another thread on its core): a window costs
  // 1 + steal more with probability steal_p.
  double steal_p = 0;
  double steal = 0;
  // A load that comes and goes: windows [k * load_period, k * load_period +
  // load_len) cost 1 + load more.
  int load_period = 0;
  int load_len = 0;
  double load = 0;
};

class Driver {
 public:
  explicit Driver(CacheCostControllerConfig c = {}, CacheMode mode = CacheMode::kAuto)
      : ctl(mode, c) {}
  // Feeds one busy window of `w` with the state the controller asked for.
  bool Window(const Workload& w, bool defer = false) {
    double cost = ctl.enabled() ? w.on : w.off;
    if (w.noise > 0) cost *= 1 + w.noise * (2 * Uniform() - 1);
    if (windows > 0 && ctl.enabled() != prev_enabled) cost *= 1 + w.switch_penalty;
    if (w.steal_p > 0 && Uniform() < w.steal_p) cost *= 1 + w.steal;
    if (w.load_period > 0 && windows % w.load_period < w.load_len) cost *= 1 + w.load;
    prev_enabled = ctl.enabled();
    ++windows;
    const bool changed =
        ctl.Update(static_cast<uint64_t>(cost * kPackets), kPackets, defer);
    if (ctl.chosen() != last_chosen) {
      last_chosen = ctl.chosen();
      switch_windows.push_back(windows);
    }
    return changed;
  }
  // Windows until the controller has finished `n` probes and is settled
  // (a probe voting to switch is followed by its confirmation; at most `max`).
  int UntilProbes(const Workload& w, uint64_t n, int max = 100000) {
    int k = 0;
    while ((ctl.probes() < n || ctl.probing()) && k < max) {
      Window(w);
      ++k;
    }
    return k;
  }
  double Uniform() {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(seed >> 11) / 9007199254740992.0;
  }

  CacheCostController ctl;
  int windows = 0;
  bool last_chosen = false;
  bool prev_enabled = false;
  std::vector<int> switch_windows;  // the window after which chosen() changed
  uint64_t seed = 42;
};

TEST(CacheCostControllerTest, DefaultsAreDocumented) {
  CacheCostControllerConfig c;
  EXPECT_FALSE(c.start_on);
  EXPECT_EQ(c.min_packets, 10000u);
  EXPECT_EQ(c.start_windows, 3u);
  EXPECT_EQ(c.warmup_windows, 2u);
  EXPECT_EQ(c.probe_pairs, 3u);
  EXPECT_DOUBLE_EQ(c.margin, 0.03);
  EXPECT_EQ(c.reprobe_windows, 100u);
  EXPECT_EQ(c.max_backoff, 5u);
  EXPECT_TRUE(ValidateCacheCostControllerConfig(c).ok());
  CacheCostController ctl;
  EXPECT_EQ(ctl.mode(), CacheMode::kAuto);
  EXPECT_FALSE(ctl.enabled());
  EXPECT_FALSE(ctl.chosen());
  EXPECT_FALSE(ctl.probing());
  EXPECT_TRUE(CacheCostController(CacheMode::kAuto, {.start_on = true}).enabled());
}

// The first probe: start_windows settled, warmup_windows of the other state,
// then the two alternating, the chosen one first; the decision follows the
// last window of the probe.
TEST(CacheCostControllerTest, PicksTheLayerWhenItIsCheaper) {
  Driver d;
  const Workload w{.off = 100, .on = 90};
  std::vector<bool> ran;
  for (int i = 0; i < 17; ++i) {
    ran.push_back(d.ctl.enabled());
    if (i == 11) {
      EXPECT_TRUE(d.ctl.probing());  // the vote is confirmed first
      EXPECT_FALSE(d.ctl.chosen());
    }
    d.Window(w);
  }
  EXPECT_EQ(ran, (std::vector<bool>{false, false, false,  // start_windows
                                    true, true,           // warm-up, not counted
                                    false, true, false, true, false, true,    // probe
                                    false, true, false, true, false, true}));  // confirmation
  EXPECT_TRUE(d.ctl.chosen());
  EXPECT_TRUE(d.ctl.enabled());
  EXPECT_FALSE(d.ctl.probing());
  EXPECT_EQ(d.ctl.switches(), 1u);
  EXPECT_EQ(d.ctl.probes(), 2u);
  EXPECT_DOUBLE_EQ(d.ctl.last_cost_off(), 100);
  EXPECT_DOUBLE_EQ(d.ctl.last_cost_on(), 90);
  EXPECT_DOUBLE_EQ(d.ctl.last_ratio(), 0.9);
}

TEST(CacheCostControllerTest, KeepsTheLayerOffWhenItIsNotCheaper) {
  // Dearer, and cheaper by less than the margin (3%).
  for (double on : {120.0, 100.0, 98.0}) {
    Driver d;
    d.UntilProbes({.off = 100, .on = on}, 1);
    EXPECT_FALSE(d.ctl.chosen()) << on;
    EXPECT_FALSE(d.ctl.enabled()) << on;
    EXPECT_EQ(d.ctl.switches(), 0u) << on;
    EXPECT_DOUBLE_EQ(d.ctl.last_cost_on(), on);
  }
  // And turns a layer that starts on off when it does not pay.
  Driver d(CacheCostControllerConfig{.start_on = true});
  d.last_chosen = true;
  d.UntilProbes({.off = 100, .on = 110}, 1);
  EXPECT_FALSE(d.ctl.chosen());
  EXPECT_EQ(d.ctl.switches(), 1u);
}

// Settles within ~3 s at the pipeline's 100 ms windows, and stays settled:
// no further switch over an hour of windows with 2% noise per window, while
// the probes get rarer (at most one per reprobe_windows << max_backoff).
TEST(CacheCostControllerTest, SettlesWithinThreeSecondsAndDoesNotOscillate) {
  for (const Workload& w : {Workload{.off = 100, .on = 92, .noise = 0.02},
                            Workload{.off = 100, .on = 108, .noise = 0.02},
                            Workload{.off = 100, .on = 100, .noise = 0.02}}) {
    Driver d;
    const int first = d.UntilProbes(w, 1);
    EXPECT_LE(first * 100, 3000) << "windows of 100 ms to the first decision: " << first;
    EXPECT_FALSE(d.ctl.probing());
    const bool want = w.on < w.off * 0.97;
    EXPECT_EQ(d.ctl.chosen(), want) << w.on;
    for (int i = 0; i < 36000; ++i) d.Window(w);  // an hour
    EXPECT_EQ(d.ctl.chosen(), want) << w.on;
    EXPECT_EQ(d.ctl.switches(), want ? 1u : 0u) << w.on;
    // 100, 200, 400, 800, 1600, then every 3200 windows.
    EXPECT_LE(d.ctl.probes(), 17u) << w.on;
    EXPECT_GE(d.ctl.probes(), 10u) << w.on;
  }
}

// In a probe every window follows one of the other state and pays for it;
// the steady windows after it do not.  That difference is no workload change:
// the probes must stay as rare as on a workload without it.
TEST(CacheCostControllerTest, AProbesOwnCostIsNoWorkloadChange) {
  for (double on : {80.0, 120.0}) {
    Driver d;
    const Workload w{.off = 100, .on = on, .noise = 0.02, .switch_penalty = 0.4};
    d.UntilProbes(w, 1);
    for (int i = 0; i < 36000; ++i) d.Window(w);
    EXPECT_EQ(d.ctl.chosen(), on < 100) << on;
    EXPECT_EQ(d.ctl.switches(), on < 100 ? 1u : 0u) << on;
    EXPECT_LE(d.ctl.probes(), 17u) << on;
  }
}

// Windows that lose time to another thread on the PMD's core cost more, in
// either state.  Taken at face value, one such window in a probe decides it;
// the cheapest window of each state does not move, so the decision holds.
TEST(CacheCostControllerTest, StolenTimeDoesNotFlipTheDecision) {
  for (double on : {94.0, 100.0, 106.0}) {
    Driver d;
    const Workload w{.off = 100, .on = on, .noise = 0.01, .steal_p = 0.1, .steal = 0.3};
    d.UntilProbes(w, 1);
    for (int i = 0; i < 36000; ++i) d.Window(w);
    EXPECT_EQ(d.ctl.chosen(), on < 97) << on;
    EXPECT_EQ(d.ctl.switches(), on < 97 ? 1u : 0u) << on;
  }
}

// A load that comes and goes every few seconds moves the cost by far more
// than `drift`: a drift probe at most every reprobe_windows, no flip.
TEST(CacheCostControllerTest, ALoadThatComesAndGoesNeitherFlipsNorProbesAllTheTime) {
  for (double on : {90.0, 110.0}) {
    Driver d;
    const Workload w{.off = 100, .on = on, .load_period = 40, .load_len = 12, .load = 0.8};
    d.UntilProbes(w, 1);
    for (int i = 0; i < 36000; ++i) d.Window(w);
    EXPECT_EQ(d.ctl.chosen(), on < 100) << on;
    EXPECT_EQ(d.ctl.switches(), on < 100 ? 1u : 0u) << on;
    EXPECT_LE(d.ctl.probes(), 36000u / 100 + 1) << on;
    EXPECT_GT(d.ctl.probes(), 17u) << on;  // it did see the moves
  }
}

TEST(CacheCostControllerTest, ProbesGetRarerUntilTheCap) {
  Driver d(CacheCostControllerConfig{.reprobe_windows = 10, .max_backoff = 3});
  const Workload w{.off = 100, .on = 100};
  std::vector<int> starts;
  for (int i = 0; i < 400; ++i) {
    const bool was = d.ctl.probing();
    d.Window(w);
    if (!was && d.ctl.probing()) starts.push_back(d.windows);
  }
  ASSERT_GE(starts.size(), 6u);
  // A probe takes 2 + 6 windows; then 10, 20, 40, 80, 80, ... settled ones.
  std::vector<int> gaps;
  for (size_t i = 1; i < starts.size(); ++i) gaps.push_back(starts[i] - starts[i - 1]);
  EXPECT_EQ(gaps[0], 8 + 10);
  EXPECT_EQ(gaps[1], 8 + 20);
  EXPECT_EQ(gaps[2], 8 + 40);
  EXPECT_EQ(gaps[3], 8 + 80);
  EXPECT_EQ(gaps[4], 8 + 80);
  EXPECT_EQ(d.ctl.switches(), 0u);
}

// After settling on a workload where the layer pays, the workload changes
// (the chosen state's cost moves by more than `drift`): a probe comes within
// drift_hold windows, not after the backed-off interval, and switches back.
TEST(CacheCostControllerTest, AWorkloadChangeProbesAgain) {
  Driver d;
  d.UntilProbes({.off = 100, .on = 80}, 1);
  ASSERT_TRUE(d.ctl.chosen());
  for (int i = 0; i < 2000; ++i) d.Window({.off = 100, .on = 80});  // backed off
  ASSERT_GT(d.ctl.windows_to_probe(), 20u);
  const uint64_t probes = d.ctl.probes();
  // Now the layer costs more (its cost went from 80 to 130: past 25%).
  const int k = d.UntilProbes({.off = 100, .on = 130}, probes + 1);
  EXPECT_LE(k, 5 + 2 + 6 + 6);
  EXPECT_FALSE(d.ctl.chosen());
  EXPECT_EQ(d.ctl.switches(), 2u);
  // A move within the band re-arms nothing.
  Driver e;
  e.UntilProbes({.off = 100, .on = 80}, 1);
  for (int i = 0; i < 2000; ++i) e.Window({.off = 100, .on = 80});
  const uint32_t left = e.ctl.windows_to_probe();
  for (int i = 0; i < 10; ++i) e.Window({.off = 100, .on = 95});
  EXPECT_EQ(e.ctl.windows_to_probe(), left - 10);
}

TEST(CacheCostControllerTest, IdleWindowsDecideNothing) {
  Driver d;
  const Workload w{.off = 100, .on = 50};
  for (int i = 0; i < 6; ++i) d.Window(w);  // 3 settled, 2 warm-up, 1 probe
  ASSERT_TRUE(d.ctl.probing());
  // An idle window (below min_packets) ends the probe without a decision.
  d.ctl.Update(50 * 100, 100);
  EXPECT_FALSE(d.ctl.probing());
  EXPECT_FALSE(d.ctl.enabled());
  EXPECT_EQ(d.ctl.probes(), 0u);
  EXPECT_EQ(d.ctl.switches(), 0u);
  // The next busy window starts it again, from the warm-up.
  d.Window(w);
  EXPECT_TRUE(d.ctl.probing());
  EXPECT_EQ(d.ctl.phase(), CacheCostController::Phase::kWarmup);
  EXPECT_EQ(d.UntilProbes(w, 1), 2 + 6 + 6);
  EXPECT_TRUE(d.ctl.chosen());
  // Idle windows do not count toward the next probe either.
  const uint32_t left = d.ctl.windows_to_probe();
  for (int i = 0; i < 50; ++i) d.ctl.Update(0, 0);
  EXPECT_EQ(d.ctl.windows_to_probe(), left);
}

TEST(CacheCostControllerTest, DeferPostponesTheProbe) {
  Driver d;
  const Workload w{.off = 100, .on = 50};
  for (int i = 0; i < 20; ++i) d.Window(w, /*defer=*/true);
  EXPECT_FALSE(d.ctl.probing());
  EXPECT_EQ(d.ctl.probes(), 0u);
  d.Window(w);
  EXPECT_TRUE(d.ctl.probing());
}

TEST(CacheCostControllerTest, ForcedModesIgnoreTheCost) {
  for (CacheMode m : {CacheMode::kOn, CacheMode::kOff}) {
    Driver d({}, m);
    d.last_chosen = m == CacheMode::kOn;
    for (int i = 0; i < 1000; ++i) d.Window({.off = 100, .on = m == CacheMode::kOn ? 200.0 : 10.0});
    EXPECT_EQ(d.ctl.enabled(), m == CacheMode::kOn);
    EXPECT_EQ(d.ctl.probes(), 0u);
    EXPECT_EQ(d.ctl.switches(), 0u);
  }
  // SetMode: forcing counts a switch when it changes the state; auto keeps
  // the state and probes again after start_windows.
  CacheCostController ctl;
  EXPECT_TRUE(ctl.SetMode(CacheMode::kOn));
  EXPECT_TRUE(ctl.enabled());
  EXPECT_EQ(ctl.switches(), 1u);
  EXPECT_FALSE(ctl.SetMode(CacheMode::kAuto));
  EXPECT_TRUE(ctl.enabled());
  EXPECT_EQ(ctl.windows_to_probe(), 3u);
  EXPECT_TRUE(ctl.SetMode(CacheMode::kOff));
  EXPECT_FALSE(ctl.enabled());
  EXPECT_EQ(ctl.switches(), 2u);
}

TEST(CacheCostControllerTest, ConfigValidationNamesTheField) {
  auto msg = [](CacheCostControllerConfig c) {
    return std::string(ValidateCacheCostControllerConfig(c).message());
  };
  EXPECT_THAT(msg({.min_packets = 0}), HasSubstr("min_packets"));
  EXPECT_THAT(msg({.probe_pairs = 0}), HasSubstr("probe_pairs"));
  EXPECT_THAT(msg({.probe_pairs = 9}), HasSubstr("probe_pairs: 9 is not in 1..8"));
  EXPECT_THAT(msg({.margin = 1}), HasSubstr("margin"));
  EXPECT_THAT(msg({.margin = -0.1}), HasSubstr("margin"));
  EXPECT_THAT(msg({.reprobe_windows = 0}), HasSubstr("reprobe_windows"));
  EXPECT_THAT(msg({.max_backoff = 17}), HasSubstr("max_backoff"));
  EXPECT_THAT(msg({.drift = 0}), HasSubstr("drift"));
  EXPECT_THAT(msg({.drift_hold = 0}), HasSubstr("drift_hold"));
}

TEST(CacheCostControllerTest, DebugStringSaysTheState) {
  Driver d;
  d.UntilProbes({.off = 100, .on = 90}, 1);
  EXPECT_THAT(d.ctl.DebugString(),
              HasSubstr("mode auto state on switches 1 probes 2 cost off 100.0 on 90.0 "
                        "(other/chosen 0.900)"));
}

}  // namespace
}  // namespace flowclass
