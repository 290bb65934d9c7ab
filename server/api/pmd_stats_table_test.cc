// GetStats and flowclassctl's stats text over the PMD counter table
// (dataplane/pmd_counters.h): each carries exactly one value per table entry
// GetStats carries, under the entry's name, so a new counter needs no code
// in the service or the client.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/rpc/flowclass_client.h"
#include "dataplane/pmd_counters.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/pmd_stats_convert.h"
#include "server/api/classifier_service.h"
#include "server/testing/fake_dataplane.h"

namespace flowclass {
namespace {

// Counter i of PMD `pmd`: a value no other counter of any PMD has.
uint64_t ValueOf(uint32_t pmd, size_t i) { return 100000 * (pmd + 1) + 100 * (i + 1); }

// Two PMDs whose loop counters are all zero, so every value GetStats reports
// for a table counter comes from the pipeline's PmdStats.
v1::GetStatsResponse GetStatsOf(FakeDataplane* fake) {
  DataplaneStats s;
  for (uint32_t pmd = 0; pmd < 2; ++pmd) {
    PmdCounters p;
    p.pmd = pmd;
    for (size_t i = 0; i < kNumPmdCounters; ++i)
      p.pipeline.*kPmdCounters[i].field = ValueOf(pmd, i);
    s.pmds.push_back(p);
  }
  fake->SetStats(s);
  ClassifierService service(fake, GrpcServerConfig{});
  v1::GetStatsRequest req;
  v1::GetStatsResponse resp;
  EXPECT_TRUE(service.GetStats(nullptr, &req, &resp).ok());
  return resp;
}

TEST(PmdStatsTableTest, GetStatsCarriesEveryRpcCounterOfEachPmdAndTheirSum) {
  FakeDataplane fake;
  const v1::GetStatsResponse st = GetStatsOf(&fake);
  ASSERT_EQ(st.pmds_size(), 2);
  for (size_t i = 0; i < kNumPmdCounters; ++i) {
    const PmdCounterInfo& c = kPmdCounters[i];
    if (!c.rpc) continue;
    EXPECT_EQ(PmdCounterFromProto(st.pmds(0), c.id), ValueOf(0, i)) << c.name;
    EXPECT_EQ(PmdCounterFromProto(st.pmds(1), c.id), ValueOf(1, i)) << c.name;
    EXPECT_EQ(PmdCounterFromProto(st.total(), c.id), ValueOf(0, i) + ValueOf(1, i)) << c.name;
  }
}

// No pipeline counter is left out of GetStats (each PMD and the total).
TEST(PmdStatsTableTest, GetStatsCarriesEveryPipelineCounter) {
  FakeDataplane fake;
  const v1::GetStatsResponse st = GetStatsOf(&fake);
  ASSERT_EQ(st.pmds_size(), 2);
  for (size_t i = 0; i < kNumPmdCounters; ++i) {
    const PmdCounterInfo& c = kPmdCounters[i];
    EXPECT_EQ(PmdCounterFromProto(st.pmds(0), c.id), ValueOf(0, i)) << c.name;
    EXPECT_EQ(PmdCounterFromProto(st.pmds(1), c.id), ValueOf(1, i)) << c.name;
    EXPECT_EQ(PmdCounterFromProto(st.total(), c.id), ValueOf(0, i) + ValueOf(1, i)) << c.name;
  }
}

// The PMD loop's counters, each under its entry's field: per PMD, and in the
// total summed (counters) or the largest (the generation, a gauge).
TEST(PmdStatsTableTest, GetStatsCarriesEveryLoopCounterOfEachPmdAndTheTotal) {
  DataplaneStats s;
  for (uint32_t pmd = 0; pmd < 2; ++pmd) {
    PmdCounters p;
    p.pmd = pmd;
    for (size_t i = 0; i < kNumPmdLoopCounters; ++i)
      p.*kPmdLoopCounters[i].field = ValueOf(pmd, kNumPmdCounters + i);
    s.pmds.push_back(p);
  }
  FakeDataplane fake;
  fake.SetStats(s);
  ClassifierService service(&fake, GrpcServerConfig{});
  v1::GetStatsRequest req;
  v1::GetStatsResponse st;
  ASSERT_TRUE(service.GetStats(nullptr, &req, &st).ok());
  ASSERT_EQ(st.pmds_size(), 2);
  for (size_t i = 0; i < kNumPmdLoopCounters; ++i) {
    const PmdLoopCounterInfo& c = kPmdLoopCounters[i];
    const uint64_t v0 = ValueOf(0, kNumPmdCounters + i), v1 = ValueOf(1, kNumPmdCounters + i);
    EXPECT_EQ(PmdLoopCounterFromProto(st.pmds(0), c.id), v0) << c.name;
    EXPECT_EQ(PmdLoopCounterFromProto(st.pmds(1), c.id), v1) << c.name;
    EXPECT_EQ(PmdLoopCounterFromProto(st.total(), c.id),
              c.kind == PmdCounterKind::kCounter ? v0 + v1 : std::max(v0, v1))
        << c.name;
  }
}

TEST(PmdStatsTableTest, StatsTextHasOneLinePerRpcCounterWithItsTextAndValue) {
  FakeDataplane fake;
  const v1::GetStatsResponse st = GetStatsOf(&fake);
  const std::string text = FormatStats(st);
  for (size_t i = 0; i < kNumPmdCounters; ++i) {
    const PmdCounterInfo& c = kPmdCounters[i];
    const std::string label = absl::StrCat("\n  ", c.text, ": ");
    size_t n = 0;
    for (size_t at = text.find(label); at != std::string::npos; at = text.find(label, at + 1)) ++n;
    if (!c.rpc) {
      EXPECT_EQ(n, 0u) << c.text;
      continue;
    }
    EXPECT_EQ(n, 3u) << c.text;  // two PMDs and the total
    for (uint64_t v : {ValueOf(0, i), ValueOf(1, i), ValueOf(0, i) + ValueOf(1, i)})
      EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat(label, v, "\n"))) << c.text;
  }
}

}  // namespace
}  // namespace flowclass
