// In-process tests of a stuck PMD (DpdkDataplane::StallPmdForTesting) on
// net_ring ports: a rule batch fails by its publication deadline naming the
// PMD, later batches fail fast and change nothing, readiness (the watchdog
// over Heartbeat(), server/readiness.h) goes NOT ready and not live, and all
// of it recovers when the PMD resumes.  One EAL per process.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/dpdk/testing/ring_ports.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/readiness.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using dpdk_testing::Clock;
using dpdk_testing::EalEnvironment;
using dpdk_testing::Port;
using dpdk_testing::RingPort;
using dpdk_testing::WaitFor;

const auto* const kEnv =
    ::testing::AddGlobalTestEnvironment(new EalEnvironment("dpdk_dataplane_stall_test"));

constexpr auto kPublishTimeout = std::chrono::milliseconds(300);

std::unique_ptr<DpdkDataplane> MakeDataplane(const std::string& tag) {
  RingPort p1 = RingPort::Make(tag + "a", 1, 2);
  RingPort p2 = RingPort::Make(tag + "b", 1, 2);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p1.name), Port(2, p2.name)};
  o.pmd_lcores = {1, 2};
  o.idle_sleep_us = 200;  // the test machine is shared
  o.publish_timeout_ms = static_cast<uint32_t>(kPublishTimeout.count());
  auto dp = DpdkDataplane::Create(o);
  EXPECT_TRUE(dp.ok()) << dp.status();
  return dp.ok() ? *std::move(dp) : nullptr;
}

std::vector<uint64_t> Ids(const DpdkDataplane& dp) {
  std::vector<uint64_t> ids;
  for (const Rule& r : dp.ListRules()) ids.push_back(r.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(DpdkStallTest, ReadinessFollowsStartUpAndPmds) {
  std::unique_ptr<DpdkDataplane> dp = MakeDataplane("rd");
  ASSERT_NE(dp, nullptr);
  Readiness r(ReadinessOptions{std::chrono::milliseconds(300), std::chrono::milliseconds(50)});
  r.Start([&] { return dp->Heartbeat(); });
  // Before the PMDs run, and while the start-up load is not done.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_FALSE(r.ready());
  EXPECT_THAT(r.Get().reason, HasSubstr("rules not restored yet"));
  EXPECT_THAT(r.Get().reason, HasSubstr("pmd 0 (lcore 1): not running"));
  ASSERT_TRUE(dp->ApplyBatch({RuleOp::Insert(Ipv4Rule(1, 1, Action::Output(2)))}).ok());
  ASSERT_TRUE(dp->Start().ok());
  // PMDs run the rules, but the load is not reported done: still not ready.
  ASSERT_TRUE(WaitFor([&] { return r.Get().reason == "rules not restored yet"; }, 5));
  EXPECT_FALSE(r.ready());
  EXPECT_TRUE(r.Get().live);
  r.SetRulesRestored(true);
  EXPECT_TRUE(r.ready()) << r.Get().reason;
  // Ready stays ready while nothing happens (the PMDs idle but iterate).
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_TRUE(r.ready()) << r.Get().reason;
  r.Stop();
  dp->Stop();
}

TEST(DpdkStallTest, StalledPmdFailsBatchByDeadlineAndRecovers) {
  std::unique_ptr<DpdkDataplane> dp = MakeDataplane("st");
  ASSERT_NE(dp, nullptr);
  ASSERT_TRUE(dp->ApplyBatch({RuleOp::Insert(Ipv4Rule(1, 1, Action::Output(2)))}).ok());
  ASSERT_TRUE(dp->Start().ok());
  Readiness r(ReadinessOptions{std::chrono::milliseconds(300), std::chrono::milliseconds(50)});
  r.SetRulesRestored(true);
  r.Start([&] { return dp->Heartbeat(); });
  ASSERT_TRUE(WaitFor([&] { return r.ready(); }, 5)) << r.Get().reason;
  auto ok = dp->ApplyBatch({RuleOp::Insert(Ipv4Rule(2, 2, Action::Output(1)))});
  ASSERT_TRUE(ok.ok()) << ok.status();
  const uint64_t gen = ok->generation;

  dp->StallPmdForTesting(1, true);
  // The watchdog sees its loop stop: not ready, not live, the PMD named.
  ASSERT_TRUE(WaitFor([&] { return !r.Get().live; }, 5)) << r.Get().reason;
  EXPECT_FALSE(r.ready());
  EXPECT_THAT(r.Get().reason, HasSubstr("pmd 1 (lcore 2): no loop iteration for"));
  EXPECT_EQ(r.Get().stalled_pmds, std::vector<uint32_t>{1});

  // A batch waits for its deadline, then fails naming the PMD: applied (the
  // other PMD runs it), not acknowledged.
  const auto t0 = Clock::now();
  auto late = dp->ApplyBatch({RuleOp::Insert(Ipv4Rule(3, 3, Action::Output(1))),
                              RuleOp::Delete(1)});
  const auto took = Clock::now() - t0;
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_THAT(late.status().message(), HasSubstr("pmd 1 (lcore 2)"));
  EXPECT_THAT(late.status().message(), HasSubstr("pmd.publish_timeout_ms=300"));
  EXPECT_GE(took, kPublishTimeout);
  EXPECT_LT(took, kPublishTimeout + std::chrono::seconds(3));
  EXPECT_EQ(dp->generation(), gen + 1);
  EXPECT_EQ(Ids(*dp), (std::vector<uint64_t>{2, 3}));
  DataplaneHeartbeat h = dp->Heartbeat();
  EXPECT_EQ(h.publish_timeouts, 1u);
  EXPECT_EQ(h.generation, gen + 1);
  EXPECT_TRUE(WaitFor([&] { return dp->Heartbeat().pmds[0].generation == gen + 1; }, 2));
  EXPECT_EQ(dp->Heartbeat().pmds[1].generation, gen);

  // While it is stuck, later batches fail at once and change nothing.
  const auto t1 = Clock::now();
  auto fast = dp->ApplyBatch({RuleOp::Insert(Ipv4Rule(4, 4, Action::Output(1)))});
  EXPECT_LT(Clock::now() - t1, std::chrono::milliseconds(100));
  ASSERT_FALSE(fast.ok());
  EXPECT_EQ(fast.status().code(), absl::StatusCode::kUnavailable) << fast.status();
  EXPECT_THAT(fast.status().message(), HasSubstr("pmd 1 (lcore 2)"));
  EXPECT_THAT(fast.status().message(), HasSubstr("not applied"));
  auto del = dp->DeleteAll();
  EXPECT_EQ(del.status().code(), absl::StatusCode::kUnavailable) << del.status();
  EXPECT_EQ(dp->generation(), gen + 1);
  EXPECT_EQ(Ids(*dp), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(dp->Heartbeat().publish_timeouts, 1u);

  // Resumed: it installs the published generation, readiness comes back,
  // batches are acknowledged again.
  dp->StallPmdForTesting(1, false);
  ASSERT_TRUE(WaitFor([&] { return r.ready(); }, 5)) << r.Get().reason;
  EXPECT_TRUE(r.Get().live);
  EXPECT_EQ(dp->Heartbeat().pmds[1].generation, gen + 1);
  auto again = dp->ApplyBatch({RuleOp::Insert(Ipv4Rule(4, 4, Action::Output(1)))});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->generation, gen + 2);
  for (const PmdHeartbeat& p : dp->Heartbeat().pmds) EXPECT_EQ(p.generation, gen + 2);
  auto all = dp->DeleteAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->deleted, 3u);

  // A stall with nothing to publish: the watchdog alone notices it.
  dp->StallPmdForTesting(0, true);
  ASSERT_TRUE(dp->ApplyBatch({}).ok());  // an empty batch publishes nothing
  ASSERT_TRUE(WaitFor([&] { return !r.Get().live; }, 5));
  EXPECT_THAT(r.Get().reason, HasSubstr("pmd 0 (lcore 1)"));
  dp->StallPmdForTesting(0, false);
  ASSERT_TRUE(WaitFor([&] { return r.ready(); }, 5)) << r.Get().reason;
  r.Stop();
  dp->Stop();
}

// DeleteAll whose publication times out: the old table stays (the stalled
// PMD may still read it) and is freed once the PMD is back; ASan would catch
// a table freed too early when the PMD resumes and reads it.
TEST(DpdkStallTest, DeleteAllDuringStallKeepsTheOldTable) {
  std::unique_ptr<DpdkDataplane> dp = MakeDataplane("da");
  ASSERT_NE(dp, nullptr);
  std::vector<RuleOp> ops;
  for (uint64_t i = 1; i <= 100; ++i)
    ops.push_back(RuleOp::Insert(Ipv4SrcRule(i, static_cast<uint32_t>(i),
                                             0x0a000000u + static_cast<uint32_t>(i) * 256u, 24,
                                             Action::Output(2))));
  ASSERT_TRUE(dp->ApplyBatch(ops).ok());
  ASSERT_TRUE(dp->Start().ok());
  ASSERT_TRUE(WaitFor([&] {
    for (const PmdHeartbeat& p : dp->Heartbeat().pmds)
      if (!p.running || p.generation != 1) return false;
    return true;
  }, 5));
  dp->StallPmdForTesting(0, true);
  auto del = dp->DeleteAll();
  EXPECT_EQ(del.status().code(), absl::StatusCode::kDeadlineExceeded) << del.status();
  EXPECT_THAT(del.status().message(), HasSubstr("pmd 0 (lcore 1)"));
  EXPECT_TRUE(dp->ListRules().empty());
  dp->StallPmdForTesting(0, false);
  ASSERT_TRUE(WaitFor([&] { return dp->Heartbeat().pmds[0].generation == 2; }, 5));
  auto next = dp->ApplyBatch({RuleOp::Insert(Ipv4Rule(7, 1, Action::Output(1)))});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->generation, 3u);
  dp->Stop();
}

}  // namespace
}  // namespace flowclass
