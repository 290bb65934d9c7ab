#include "server/cap_log.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

DataplaneStats TwoPmds(uint64_t mf0, uint64_t st0, uint64_t mf1, uint64_t st1) {
  DataplaneStats s;
  s.pmds.resize(2);
  s.pmds[0].pmd = 0;
  s.pmds[0].pipeline.upcalls_megaflow_cap = mf0;
  s.pmds[0].pipeline.upcalls_subtable_cap = st0;
  s.pmds[1].pmd = 1;
  s.pmds[1].pipeline.upcalls_megaflow_cap = mf1;
  s.pmds[1].pipeline.upcalls_subtable_cap = st1;
  return s;
}

TEST(CapLogTest, ReportsEachCapsGrowthOncePerInterval) {
  const std::map<std::string, std::string> config = {{"pipeline.max_megaflows", "5000"},
                                                     {"pipeline.max_subtables_per_port", "8"}};
  CapLog log(std::chrono::seconds(10));
  const auto t0 = CapLog::Clock::time_point{} + std::chrono::hours(1);
  EXPECT_TRUE(log.Due(t0));
  // The first report takes the start values: counts from before are old.
  EXPECT_THAT(log.Report(TwoPmds(7, 7, 7, 7), config, t0), IsEmpty());
  EXPECT_FALSE(log.Due(t0 + std::chrono::seconds(9)));
  EXPECT_TRUE(log.Due(t0 + std::chrono::seconds(10)));
  EXPECT_THAT(log.Report(TwoPmds(7, 7, 7, 7), config, t0 + std::chrono::seconds(10)), IsEmpty());
  EXPECT_THAT(
      log.Report(TwoPmds(1007, 7, 7, 9), config, t0 + std::chrono::seconds(20)),
      ElementsAre("pmd 0: cap pipeline.max_megaflows=5000 reached: 1000 misses "
                  "not cached in the last 10 s (classified by the slow path)",
                  "pmd 1: cap pipeline.max_subtables_per_port=8 reached: 2 misses "
                  "not cached in the last 10 s (classified by the slow path)"));
  // Both caps of one PMD; a PMD whose counters went back (restarted) starts over.
  EXPECT_THAT(
      log.Report(TwoPmds(1010, 8, 0, 0), config, t0 + std::chrono::seconds(50)),
      ElementsAre("pmd 0: cap pipeline.max_megaflows=5000 reached: 3 misses "
                  "not cached in the last 30 s (classified by the slow path)",
                  "pmd 0: cap pipeline.max_subtables_per_port=8 reached: 1 misses "
                  "not cached in the last 30 s (classified by the slow path)"));
  EXPECT_THAT(log.Report(TwoPmds(1010, 8, 4, 0), {}, t0 + std::chrono::seconds(60)),
              ElementsAre("pmd 1: cap pipeline.max_megaflows=? reached: 4 misses "
                          "not cached in the last 10 s (classified by the slow path)"));
}

TEST(CapLogTest, ReportsTheRareMaskDefenceAndTheUpcallRateLimit) {
  const std::map<std::string, std::string> config = {{"pipeline.rare_mask_subtables", "32"},
                                                     {"pipeline.upcall_rate", "1000"}};
  CapLog log(std::chrono::seconds(10));
  const auto t0 = CapLog::Clock::time_point{} + std::chrono::hours(1);
  DataplaneStats s;
  s.pmds.resize(1);
  EXPECT_THAT(log.Report(s, config, t0), IsEmpty());
  s.pmds[0].pipeline.upcalls_rare_mask = 5;
  s.pmds[0].pipeline.upcalls_rate_limited = 70;
  s.pmds[0].pipeline.upcall_limit_drops = 60;
  EXPECT_THAT(
      log.Report(s, config, t0 + std::chrono::seconds(10)),
      ElementsAre("pmd 0: cap pipeline.rare_mask_subtables=32 reached: 5 misses "
                  "not cached in the last 10 s (classified by the slow path)",
                  "pmd 0: limit pipeline.upcall_rate=1000 reached: 70 misses past "
                  "the upcall budget in the last 10 s (dropped: 60)"));
  EXPECT_THAT(log.Report(s, config, t0 + std::chrono::seconds(20)), IsEmpty());
}

}  // namespace
}  // namespace flowclass
