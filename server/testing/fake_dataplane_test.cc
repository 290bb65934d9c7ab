// The fake must behave like the real dataplane where control-plane code can
// tell: all-or-nothing batches, generations, config key errors.
#include "server/testing/fake_dataplane.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

Rule UdpToPort(uint64_t id, uint32_t prio, uint16_t dport, uint32_t out) {
  Rule r;
  r.id = id;
  r.priority = prio;
  r.match.SetExact(Field::kEthType, kEthTypeIpv4);
  r.match.SetExact(Field::kNwProto, kIpProtoUdp);
  r.match.SetExact(Field::kTpDst, dport);
  r.action = Action::Output(out);
  return r;
}

TEST(FakeDataplaneTest, AppliesBatchesAtomicallyWithGenerations) {
  FakeDataplane dp;
  EXPECT_EQ(dp.generation(), 0u);
  auto r = dp.ApplyBatch({RuleOp::Insert(UdpToPort(1, 10, 53, 2)),
                          RuleOp::Insert(UdpToPort(2, 20, 53, 3))});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->inserted, 2u);
  EXPECT_EQ(r->generation, 1u);
  const FlowKey k = MakeFiveTupleKey(1, 2, 1000, 53, kIpProtoUdp);
  ASSERT_TRUE(dp.Classify(k).has_value());
  EXPECT_EQ(dp.Classify(k)->id, 2u);

  // A batch with one bad op changes nothing.
  auto bad = dp.ApplyBatch({RuleOp::Delete(2), RuleOp::Delete(99)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dp.generation(), 1u);
  EXPECT_EQ(dp.ListRules().size(), 2u);
  EXPECT_EQ(dp.applied_batches().size(), 1u);

  // Empty batch: acked with the current generation, not recorded.
  auto empty = dp.ApplyBatch({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->generation, 1u);
  EXPECT_EQ(dp.applied_batches().size(), 1u);

  ASSERT_TRUE(dp.ApplyBatch({RuleOp::Delete(2)}).ok());
  EXPECT_EQ(dp.Classify(k)->id, 1u);
  EXPECT_EQ(dp.Stats().generation, 2u);
  EXPECT_EQ(dp.Stats().rules.rules, 1u);
}

TEST(FakeDataplaneTest, InjectedFailureHitsOnlyTheNextBatch) {
  FakeDataplane dp;
  dp.FailNextApply(absl::UnavailableError("pmd stuck"));
  auto r = dp.ApplyBatch({RuleOp::Insert(UdpToPort(1, 10, 53, 2))});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(dp.ListRules().size(), 0u);
  EXPECT_TRUE(dp.ApplyBatch({RuleOp::Insert(UdpToPort(1, 10, 53, 2))}).ok());
  EXPECT_EQ(dp.ListRules().size(), 1u);
}

TEST(FakeDataplaneTest, ConfigKeysBehaveLikeTheRealDataplane) {
  FakeDataplane dp;
  EXPECT_EQ(*dp.GetConfig("pmd.tx_retries"), "4");
  EXPECT_TRUE(dp.SetConfig("pmd.tx_retries", "8").ok());
  EXPECT_EQ(dp.GetConfig().at("pmd.tx_retries"), "8");
  EXPECT_EQ(dp.SetConfig("pmd.tx_retries", "-1").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dp.SetConfig("pmd.tx_retries", "x").message()),
              HasSubstr("pmd.tx_retries"));
  EXPECT_EQ(dp.SetConfig("pmd.burst", "16").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(dp.SetConfig("no.such", "1").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(dp.GetConfig("no.such").status().code(), absl::StatusCode::kNotFound);
  dp.DefineConfig("pipeline.emc_insert_inv_prob", "100", true);
  EXPECT_TRUE(dp.SetConfig("pipeline.emc_insert_inv_prob", "0").ok());
}

TEST(FakeDataplaneTest, StatsAreWhatTheTestSetPlusTotals) {
  FakeDataplane dp;
  DataplaneStats s;
  PmdCounters a, b;
  a.rx_packets = 10;
  a.tx_packets = 7;
  a.rule_drops = 3;
  b.rx_packets = 5;
  b.no_match = 5;
  s.pmds = {a, b};
  dp.SetStats(s);
  const DataplaneStats got = dp.Stats();
  ASSERT_EQ(got.pmds.size(), 2u);
  const PmdCounters t = got.Total();
  EXPECT_EQ(t.rx_packets, 15u);
  EXPECT_EQ(t.tx_packets + t.rule_drops + t.no_match, 15u);
  EXPECT_THAT(got.ToString(), HasSubstr("rx packets: 10"));
}

}  // namespace
}  // namespace flowclass
