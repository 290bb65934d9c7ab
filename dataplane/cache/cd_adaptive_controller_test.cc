// The Cuckoo Distributor's adaptive controller: when it turns the CD on and
// off from interval statistics (thresholds, hold intervals, hysteresis, idle
// and forced modes), its ranking estimate, and its configuration.
#include "dataplane/cache/cuckoo_distributor.h"

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

// An interval with the CD off: `hits` megaflow hits costing `lph` probes each.
CdIntervalStats OffInterval(uint64_t hits, double lph) {
  CdIntervalStats s;
  s.dpcls_packets = hits + 10;
  s.megaflow_hits = hits;
  s.subtable_lookups = static_cast<uint64_t>(lph * static_cast<double>(hits));
  s.first_rank_hits = hits / 2;
  return s;
}

// An interval with the CD on: every hit served by the CD in one probe; ranking
// alone would have needed `ranking_lph` probes per hit.
CdIntervalStats OnInterval(uint64_t hits, double ranking_lph) {
  CdIntervalStats s;
  s.dpcls_packets = hits;
  s.megaflow_hits = hits;
  s.subtable_lookups = hits;
  s.cd_hits = hits;
  s.cd_hit_rank_sum =
      static_cast<uint64_t>(ranking_lph * static_cast<double>(hits));
  s.first_rank_hits = ranking_lph <= 1.0 ? hits : hits / 4;
  return s;
}

TEST(CdAdaptiveControllerTest, DefaultsAreDocumented) {
  CdControllerConfig c;
  EXPECT_EQ(c.mode, CdMode::kAuto);
  EXPECT_DOUBLE_EQ(c.off_threshold, 1.2);
  EXPECT_DOUBLE_EQ(c.on_threshold, 1.5);
  EXPECT_EQ(c.hold, 3u);
  EXPECT_EQ(c.min_hits, 1000u);
  EXPECT_TRUE(ValidateCdControllerConfig(c).ok());
  CdAdaptiveController ctl;
  EXPECT_FALSE(ctl.enabled());
  EXPECT_EQ(ctl.transitions(), 0u);
  EXPECT_TRUE(CdAdaptiveController(CdControllerConfig{.start_on = true}).enabled());
}

TEST(CdAdaptiveControllerTest, TurnsOnAfterHoldIntervalsAboveOnThreshold) {
  CdAdaptiveController ctl;
  EXPECT_EQ(ctl.Update(OffInterval(5000, 2.0)), CdTransition::kNone);
  EXPECT_EQ(ctl.streak(), 1u);
  EXPECT_EQ(ctl.Update(OffInterval(5000, 2.0)), CdTransition::kNone);
  EXPECT_FALSE(ctl.enabled());
  EXPECT_EQ(ctl.Update(OffInterval(5000, 2.0)), CdTransition::kTurnedOn);
  EXPECT_TRUE(ctl.enabled());
  EXPECT_EQ(ctl.transitions(), 1u);
  EXPECT_EQ(ctl.streak(), 0u);
  EXPECT_DOUBLE_EQ(ctl.last_ranking_lookups_per_hit(), 2.0);
}

TEST(CdAdaptiveControllerTest, TurnsOffWhenRankingAloneWouldFindFirstSubtable) {
  CdAdaptiveController ctl(CdControllerConfig{.start_on = true});
  ASSERT_TRUE(ctl.enabled());
  EXPECT_EQ(ctl.Update(OnInterval(5000, 1.05)), CdTransition::kNone);
  EXPECT_EQ(ctl.Update(OnInterval(5000, 1.05)), CdTransition::kNone);
  EXPECT_EQ(ctl.Update(OnInterval(5000, 1.05)), CdTransition::kTurnedOff);
  EXPECT_FALSE(ctl.enabled());
  EXPECT_EQ(ctl.transitions(), 1u);
}

TEST(CdAdaptiveControllerTest, StaysOnWhenCdSavesProbes) {
  // Measured probes per hit is 1.0 (the CD works); a controller that looked
  // at the measured figure would wrongly turn it off.  The rank reconstruction
  // says ranking alone would need 3 probes per hit.
  CdAdaptiveController ctl(CdControllerConfig{.start_on = true});
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(ctl.Update(OnInterval(5000, 3.0)), CdTransition::kNone);
  EXPECT_TRUE(ctl.enabled());
  EXPECT_DOUBLE_EQ(ctl.last_lookups_per_hit(), 1.0);
  EXPECT_DOUBLE_EQ(ctl.last_ranking_lookups_per_hit(), 3.0);
}

TEST(CdAdaptiveControllerTest, HysteresisBandHoldsEitherState) {
  for (bool start_on : {false, true}) {
    CdAdaptiveController ctl(CdControllerConfig{.start_on = start_on});
    for (int i = 0; i < 20; ++i) {
      const CdIntervalStats in =
          start_on ? OnInterval(5000, 1.35) : OffInterval(5000, 1.35);
      ASSERT_EQ(ctl.Update(in), CdTransition::kNone);
    }
    EXPECT_EQ(ctl.enabled(), start_on);
    EXPECT_EQ(ctl.transitions(), 0u);
  }
  // Exactly at a threshold is inside the band (strict comparisons).
  CdAdaptiveController off;
  for (int i = 0; i < 5; ++i) off.Update(OffInterval(4000, 1.5));
  EXPECT_FALSE(off.enabled());
  CdAdaptiveController on(CdControllerConfig{.start_on = true});
  for (int i = 0; i < 5; ++i) on.Update(OnInterval(5000, 1.2));
  EXPECT_TRUE(on.enabled());
}

TEST(CdAdaptiveControllerTest, DisagreeingIntervalResetsStreak) {
  CdAdaptiveController ctl;
  ctl.Update(OffInterval(5000, 2.0));
  ctl.Update(OffInterval(5000, 2.0));
  EXPECT_EQ(ctl.streak(), 2u);
  EXPECT_EQ(ctl.Update(OffInterval(5000, 1.1)), CdTransition::kNone);
  EXPECT_EQ(ctl.streak(), 0u);
  ctl.Update(OffInterval(5000, 2.0));
  EXPECT_EQ(ctl.Update(OffInterval(5000, 2.0)), CdTransition::kNone);
  EXPECT_FALSE(ctl.enabled());
  EXPECT_EQ(ctl.Update(OffInterval(5000, 2.0)), CdTransition::kTurnedOn);
}

TEST(CdAdaptiveControllerTest, IdleIntervalsDecideNothingAndBreakStreak) {
  CdAdaptiveController ctl;
  // Many idle intervals with terrible ranking: nothing happens.
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(ctl.Update(OffInterval(999, 5.0)), CdTransition::kNone);
  EXPECT_FALSE(ctl.enabled());
  EXPECT_EQ(ctl.Update(CdIntervalStats{}), CdTransition::kNone);  // no traffic
  ctl.Update(OffInterval(1000, 5.0));  // min_hits itself counts
  ctl.Update(OffInterval(1000, 5.0));
  EXPECT_EQ(ctl.streak(), 2u);
  ctl.Update(OffInterval(10, 5.0));  // idle: breaks the streak
  EXPECT_EQ(ctl.streak(), 0u);
  ctl.Update(OffInterval(1000, 5.0));
  ctl.Update(OffInterval(1000, 5.0));
  EXPECT_FALSE(ctl.enabled());
  EXPECT_EQ(ctl.Update(OffInterval(1000, 5.0)), CdTransition::kTurnedOn);
  EXPECT_EQ(ctl.intervals(), 17u);
}

TEST(CdAdaptiveControllerTest, ForcedModesIgnoreInputs) {
  CdAdaptiveController on(CdControllerConfig{.mode = CdMode::kOn});
  EXPECT_TRUE(on.enabled());
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(on.Update(OnInterval(100000, 1.0)), CdTransition::kNone);
  EXPECT_TRUE(on.enabled());

  CdAdaptiveController off(CdControllerConfig{.mode = CdMode::kOff, .start_on = true});
  EXPECT_FALSE(off.enabled());  // start_on applies to auto only
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(off.Update(OffInterval(100000, 9.0)), CdTransition::kNone);
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.transitions(), 0u);

  // Forcing counts as a transition only when the state changes.
  EXPECT_EQ(off.SetMode(CdMode::kOn), CdTransition::kTurnedOn);
  EXPECT_EQ(off.SetMode(CdMode::kOn), CdTransition::kNone);
  EXPECT_EQ(off.transitions(), 1u);
  // Releasing to auto keeps the state; auto then applies the rule.
  EXPECT_EQ(off.SetMode(CdMode::kAuto), CdTransition::kNone);
  EXPECT_TRUE(off.enabled());
  off.Update(OnInterval(5000, 1.0));
  off.Update(OnInterval(5000, 1.0));
  EXPECT_EQ(off.Update(OnInterval(5000, 1.0)), CdTransition::kTurnedOff);
  EXPECT_EQ(off.SetMode(CdMode::kOff), CdTransition::kNone);
  EXPECT_EQ(off.transitions(), 2u);
  EXPECT_EQ(off.mode(), CdMode::kOff);
}

TEST(CdAdaptiveControllerTest, FullCycleOnOffOn) {
  CdControllerConfig c;
  c.hold = 2;
  c.min_hits = 100;
  CdAdaptiveController ctl(c);
  int t = 0;
  auto run = [&](const CdIntervalStats& s, int n) {
    CdTransition last = CdTransition::kNone;
    for (int i = 0; i < n; ++i) {
      last = ctl.Update(s);
      t += last != CdTransition::kNone;
    }
    return last;
  };
  EXPECT_EQ(run(OffInterval(500, 4.0), 2), CdTransition::kTurnedOn);
  EXPECT_EQ(run(OnInterval(500, 4.0), 5), CdTransition::kNone);
  EXPECT_TRUE(ctl.enabled());
  EXPECT_EQ(run(OnInterval(500, 1.0), 2), CdTransition::kTurnedOff);
  EXPECT_EQ(run(OffInterval(500, 1.0), 5), CdTransition::kNone);
  EXPECT_EQ(run(OffInterval(500, 1.6), 2), CdTransition::kTurnedOn);
  EXPECT_EQ(ctl.transitions(), 3u);
  EXPECT_EQ(t, 3);
  EXPECT_THAT(ctl.DebugString(), HasSubstr("mode auto state on transitions 3"));
}

TEST(CdAdaptiveControllerTest, RankingEstimateFormula) {
  CdIntervalStats s;
  EXPECT_DOUBLE_EQ(CdAdaptiveController::RankingLookupsPerHit(s, true), 0.0);
  // Off: measured.
  s.megaflow_hits = 1000;
  s.subtable_lookups = 2500;
  EXPECT_DOUBLE_EQ(CdAdaptiveController::RankingLookupsPerHit(s, false), 2.5);
  // On: 600 CD hits at average rank+1 = 3, 50 false hits (one wasted probe
  // each), 400 hits via the ranked search costing 2 probes each on average.
  s.cd_hits = 600;
  s.cd_hit_rank_sum = 1800;
  s.cd_false_hits = 50;
  s.subtable_lookups = 600 + 50 + 800;
  EXPECT_DOUBLE_EQ(CdAdaptiveController::RankingLookupsPerHit(s, true),
                   (1800.0 + 800.0) / 1000.0);
  // On, CD served nothing: the ranked search minus the wasted probes.
  s.cd_hits = 0;
  s.cd_hit_rank_sum = 0;
  s.subtable_lookups = 50 + 1500;
  EXPECT_DOUBLE_EQ(CdAdaptiveController::RankingLookupsPerHit(s, true), 1.5);
  // On, ranks not reported: lower bound from first-rank hits.
  s.cd_hits = 900;
  s.cd_false_hits = 0;
  s.subtable_lookups = 1000;
  s.first_rank_hits = 900;
  EXPECT_DOUBLE_EQ(CdAdaptiveController::RankingLookupsPerHit(s, true), 1.1);
  // Inconsistent counters never go negative.
  s.cd_hit_rank_sum = 900;
  s.cd_false_hits = 5000;
  EXPECT_DOUBLE_EQ(CdAdaptiveController::RankingLookupsPerHit(s, true), 0.9);
}

TEST(CdAdaptiveControllerTest, ConfigValidationNamesTheField) {
  auto expect_error = [](CdControllerConfig c, const char* field) {
    const absl::Status s = ValidateCdControllerConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(s.message(), HasSubstr(field));
    EXPECT_FALSE(CdAdaptiveController::Create(c).ok());
  };
  expect_error({.off_threshold = 1.6, .on_threshold = 1.5}, "off_threshold: 1.6");
  expect_error({.off_threshold = 0.5}, "off_threshold");
  expect_error({.on_threshold = std::numeric_limits<double>::quiet_NaN()},
               "on_threshold");
  expect_error({.hold = 0}, "hold");
  expect_error({.mode = static_cast<CdMode>(7)}, "mode");
  EXPECT_TRUE(CdAdaptiveController::Create({.off_threshold = 1.5}).ok());

  CdAdaptiveController ctl;
  auto bad = ctl.SetConfig({.hold = 0});
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(ctl.config().hold, 3u);  // unchanged
  auto forced = ctl.SetConfig({.mode = CdMode::kOn, .hold = 5});
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(*forced, CdTransition::kTurnedOn);
  EXPECT_EQ(ctl.config().hold, 5u);
}

TEST(CdAdaptiveControllerTest, ParseModeRoundTrips) {
  for (CdMode m : {CdMode::kOff, CdMode::kOn, CdMode::kAuto}) {
    auto parsed = ParseCdMode(CdModeName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  auto bad = ParseCdMode("adaptive");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("cd_mode: unknown mode \"adaptive\""));
}

}  // namespace
}  // namespace flowclass
