// In-process tests of DpdkDataplane on net_ring ports (testing/ring_ports.h):
// run-time settings (pmd.*, pipeline settings reaching the running PMDs,
// all-or-nothing requests, as the fake answers them) and rejected batches.
// One EAL per process.
#include "dataplane/dpdk/dpdk_dataplane.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "dataplane/dpdk/testing/ring_ports.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/e2e_util.h"
#include "server/testing/fake_dataplane.h"
#include "tests/common/packet_builder.h"
#include "tests/common/reference_classifier.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using dpdk_testing::DrainRing;
using dpdk_testing::EalEnvironment;
using dpdk_testing::MakePacket;
using dpdk_testing::Port;
using dpdk_testing::RingPort;
using dpdk_testing::TotalRx;
using dpdk_testing::UdpFlow;
using dpdk_testing::WaitFor;

const auto* const kEnv =
    ::testing::AddGlobalTestEnvironment(new EalEnvironment("dpdk_dataplane_settings_test"));

TEST(DpdkDataplaneTest, RuntimeConfigAndRejectedBatches) {
  RingPort p = RingPort::Make("cfg1", 1, 1);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p.name)};
  o.pmd_lcores = {3};
  auto dp = DpdkDataplane::Create(o);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE((*dp)->Start().ok());
  EXPECT_EQ(*(*dp)->GetConfig("pmd.tx_retries"), "4");
  EXPECT_TRUE((*dp)->SetConfig("pmd.tx_retries", "9").ok());
  EXPECT_EQ(*(*dp)->GetConfig("pmd.tx_retries"), "9");
  EXPECT_EQ((*dp)->SetConfig("pmd.tx_retries", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*dp)->SetConfig("pmd.burst", "8").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*dp)->SetConfig("nope", "8").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*dp)->GetConfig().at("pmd.lcores"), "3");

  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(Ipv4DstRule(1, 1, 0, 0, Action::Drop()))}).ok());
  auto bad = (*dp)->ApplyBatch({RuleOp::Insert(Ipv4DstRule(2, 1, 0, 0, Action::Drop())),
                                RuleOp::Delete(77)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*dp)->generation(), 1u);
  EXPECT_EQ((*dp)->ListRules().size(), 1u);
  auto empty = (*dp)->ApplyBatch({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->generation, 1u);
  EXPECT_TRUE(WaitFor([&] { return (*dp)->Stats().pmds[0].generation == 1; }, 5));
}

TEST(DpdkDataplaneTest, PipelineSettingsReachTheRunningPmds) {
  RingPort p1 = RingPort::Make("knob1", 1, 1);
  RingPort p2 = RingPort::Make("knob2", 1, 1);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p1.name), Port(2, p2.name, false)};
  o.pmd_lcores = {1};
  o.idle_sleep_us = 20;
  auto dp = DpdkDataplane::Create(o);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(
                   Ipv4DstRule(1, 1, 0x0a000000, 8, Action::Output(2)))})
                  .ok());
  ASSERT_TRUE((*dp)->Start().ok());

  // Defaults as configured, then changed while the PMD runs.
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.smc"), "auto");
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.emc_insert_inv_prob"), "100");
  ASSERT_TRUE((*dp)->SetConfig("pipeline.emc_insert_inv_prob", "0").ok());
  ASSERT_TRUE((*dp)->SetConfig("pipeline.smc", "on").ok());
  ASSERT_TRUE((*dp)->SetConfig("pipeline.cd", "off").ok());
  ASSERT_TRUE((*dp)->SetConfig("pipeline.ranking_interval_ms", "50").ok());
  ASSERT_TRUE((*dp)->SetConfig("dpcls.lookup_prio.avx512", "0").ok());
  ASSERT_TRUE((*dp)->SetConfig("dpcls.lookup_prio.specialised", "0").ok());
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.smc"), "on");
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.cd"), "off");
  EXPECT_EQ(*(*dp)->GetConfig("dpcls.lookup_prio.avx512"), "0");
  // Bad values name the key and change nothing.
  const absl::Status bad = (*dp)->SetConfig("pipeline.cd", "sometimes");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("pipeline.cd"), std::string::npos);
  // A priority past int says the range, not "not an integer".
  EXPECT_EQ((*dp)->SetConfig("dpcls.lookup_prio.avx512", "4000000000").message(),
            "dpcls.lookup_prio.avx512: \"4000000000\" is not a whole-number priority in 0..255");
  EXPECT_EQ((*dp)->SetConfig("dpcls.lookup_prio.nosuch", "1").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*dp)->SetConfig("dpcls.lookup_available.generic", "false").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.cd"), "off");

  // 20 flows, each sent 10 times: with EMC insertion off and the SMC on,
  // repeats are SMC hits, and the only subtable uses the generic lookup.
  constexpr int kFlows = 20, kRounds = 10;
  for (int r = 0; r < kRounds; ++r) {
    for (int f = 0; f < kFlows; ++f) {
      rte_mbuf* m = MakePacket(UdpFlow(0xc0a80001, 0x0a000000 + f, 1000, 53),
                               static_cast<uint64_t>(r * kFlows + f));
      ASSERT_NE(m, nullptr);
      while (rte_ring_enqueue(p1.rx[0], m) != 0) std::this_thread::yield();
    }
    // One round at a time, so that repeats find what the round before cached.
    ASSERT_TRUE(WaitFor([&] { return TotalRx(**dp) == uint64_t((r + 1) * kFlows); }, 10));
  }
  const DataplaneStats s = (*dp)->Stats();
  (*dp)->Stop();
  std::vector<std::pair<uint32_t, uint64_t>> got;
  DrainRing(p2.tx, 2, &got);
  EXPECT_EQ(got.size(), size_t{kFlows * kRounds});
  const PmdCounters& pmd = s.pmds.at(0);
  EXPECT_EQ(pmd.pipeline.emc_hits, 0u);
  EXPECT_EQ(pmd.pipeline.cd_hits, 0u);
  EXPECT_GE(pmd.pipeline.smc_hits, uint64_t{kFlows * (kRounds - 1)} - 5);
  ASSERT_TRUE(pmd.has_snapshot);
  EXPECT_FALSE(pmd.snapshot.cd_enabled);
  ASSERT_FALSE(pmd.snapshot.subtable.empty());
  EXPECT_EQ(pmd.snapshot.subtable[0].lookup_fn, "generic");
}

// The megaflow settings reach the running PMD: a lowered cap keeps new
// flows out of the megaflows (still forwarded, counted by cap), a short idle
// time lets an idle PMD expire them (Housekeep on idle iterations), and the
// cap cannot go past the pool the PMD allocated at start-up.
TEST(DpdkDataplaneTest, MegaflowCapsAndExpiryReachTheRunningPmds) {
  RingPort p1 = RingPort::Make("mfage1", 1, 1);
  RingPort p2 = RingPort::Make("mfage2", 1, 1);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p1.name), Port(2, p2.name, false)};
  o.pmd_lcores = {1};
  o.idle_sleep_us = 20;
  o.pipeline.max_megaflows = 1000;
  auto dp = DpdkDataplane::Create(o);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(
                   Ipv4DstRule(1, 1, 0x0a000000, 8, Action::Output(2)))})
                  .ok());
  ASSERT_TRUE((*dp)->Start().ok());
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.max_megaflows"), "1000");
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.max_subtables_per_port"), "1024");
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.megaflow_max_idle_ms"), "10000");
  EXPECT_EQ((*dp)->SetConfig("pipeline.max_megaflows", "1001"),
            absl::FailedPreconditionError(
                "pipeline.max_megaflows: 1001 is more than the 1000 megaflows each PMD "
                "allocated at start-up (raise it in the config file)"));
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.max_megaflows"), "1000");
  ASSERT_TRUE((*dp)->SetConfig("pipeline.max_megaflows", "5").ok());

  // 20 flows under 20 /8 rules: one megaflow each.
  constexpr int kFlows = 20;
  std::vector<Rule> more;
  for (int f = 0; f < kFlows; ++f)
    more.push_back(Ipv4DstRule(10 + f, 2, uint32_t(0x0b + f) << 24, 8, Action::Output(2)));
  std::vector<RuleOp> ops;
  for (const Rule& r : more) ops.push_back(RuleOp::Insert(r));
  ASSERT_TRUE((*dp)->ApplyBatch(ops).ok());
  ASSERT_TRUE(WaitFor([&] { return (*dp)->Stats().pmds[0].generation == 2; }, 5));
  for (int f = 0; f < kFlows; ++f) {
    rte_mbuf* m = MakePacket(UdpFlow(0xc0a80001, (uint32_t(0x0b + f) << 24) | 1, 1000, 53),
                             static_cast<uint64_t>(f));
    ASSERT_NE(m, nullptr);
    while (rte_ring_enqueue(p1.rx[0], m) != 0) std::this_thread::yield();
  }
  ASSERT_TRUE(WaitFor([&] { return TotalRx(**dp) == uint64_t{kFlows}; }, 10));
  DataplaneStats s = (*dp)->Stats();
  const PmdStats& st = s.pmds.at(0).pipeline;
  EXPECT_EQ(st.upcall_ok, 5u);
  EXPECT_EQ(st.upcall_failed, uint64_t{kFlows - 5});
  EXPECT_EQ(st.upcalls_megaflow_cap, uint64_t{kFlows - 5});
  ASSERT_TRUE(s.pmds.at(0).has_snapshot);
  EXPECT_EQ(s.pmds.at(0).snapshot.megaflows, 5u);

  // Idle for 50 ms: the idle PMD removes the five.
  ASSERT_TRUE((*dp)->SetConfig("pipeline.megaflow_max_idle_ms", "50").ok());
  EXPECT_TRUE(WaitFor(
      [&] { return (*dp)->Stats().pmds[0].pipeline.megaflows_expired == 5; }, 10));
  s = (*dp)->Stats();
  ASSERT_TRUE(s.pmds.at(0).has_snapshot);
  EXPECT_EQ(s.pmds.at(0).snapshot.megaflows, 0u);
  EXPECT_EQ(s.pmds.at(0).snapshot.subtables, 0u);
  (*dp)->Stop();
  // Every packet was forwarded, capped or not.
  std::vector<std::pair<uint32_t, uint64_t>> got;
  DrainRing(p2.tx, 2, &got);
  EXPECT_EQ(got.size(), size_t{kFlows});
}

// The upcall rate limit reaches the running PMD: past the port's budget new
// flows are dropped and counted as drops of their own kind (rx = tx + every
// drop kind), or, with classify, forwarded without a megaflow.
TEST(DpdkDataplaneTest, UpcallRateLimitReachesTheRunningPmdAndItsDropsAddUp) {
  RingPort p1 = RingPort::Make("uplim1", 1, 1);
  RingPort p2 = RingPort::Make("uplim2", 1, 1);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p1.name), Port(2, p2.name, false)};
  o.pmd_lcores = {1};
  o.idle_sleep_us = 20;
  auto dp = DpdkDataplane::Create(o);
  ASSERT_TRUE(dp.ok()) << dp.status();
  constexpr int kFlows = 20;
  std::vector<RuleOp> ops;
  for (int f = 0; f < 2 * kFlows; ++f)
    ops.push_back(RuleOp::Insert(
        Ipv4DstRule(10 + f, 2, uint32_t(0x0b + f) << 24, 8, Action::Output(2))));
  ASSERT_TRUE((*dp)->ApplyBatch(ops).ok());
  ASSERT_TRUE((*dp)->Start().ok());
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.upcall_rate"), "0");
  EXPECT_EQ(*(*dp)->GetConfig("pipeline.upcall_limit_action"), "drop");
  // One upcall per second, five at once: five of the 20 new flows get in.
  ASSERT_TRUE((*dp)->ApplySettings({{"pipeline.upcall_rate", "1"},
                                    {"pipeline.upcall_burst", "5"}})
                  .ok());
  auto send = [&](int first) {
    for (int f = first; f < first + kFlows; ++f) {
      rte_mbuf* m = MakePacket(UdpFlow(0xc0a80001, (uint32_t(0x0b + f) << 24) | 1, 1000, 53),
                               static_cast<uint64_t>(f));
      ASSERT_NE(m, nullptr);
      while (rte_ring_enqueue(p1.rx[0], m) != 0) std::this_thread::yield();
    }
  };
  const auto sent = std::chrono::steady_clock::now();
  send(0);
  ASSERT_TRUE(WaitFor([&] { return TotalRx(**dp) == uint64_t{kFlows}; }, 10));
  // Trace of a flow not seen yet: the PMD's bucket is empty, so not
  // "upcall" but "upcall_limited" (until a token is back, 1 s after the
  // burst: on a machine that slow either answer is right).
  Flow next = UdpFlow(0xc0a80001, (uint32_t(0x0b + kFlows) << 24) | 1, 1000, 53);
  next.Set(Field::kInPort, 1);
  auto tr = (*dp)->Trace(FlowKey::FromFlow(next));
  ASSERT_TRUE(tr.ok()) << tr.status();
  EXPECT_FALSE(tr->has_megaflow);
  if (std::chrono::steady_clock::now() - sent < std::chrono::milliseconds(900)) {
    EXPECT_EQ(tr->layer, "upcall_limited");
  } else {
    EXPECT_TRUE(tr->layer == "upcall_limited" || tr->layer == "upcall") << tr->layer;
  }
  DataplaneStats s = (*dp)->Stats();
  const PmdCounters& pmd = s.pmds.at(0);
  EXPECT_EQ(pmd.upcall_limit_drops, uint64_t{kFlows - 5});
  EXPECT_EQ(pmd.pipeline.upcalls_rate_limited, uint64_t{kFlows - 5});
  EXPECT_EQ(pmd.pipeline.upcall_ok, 5u);
  EXPECT_EQ(pmd.no_match, 0u);
  EXPECT_EQ(pmd.rx_packets, pmd.tx_packets + pmd.tx_dropped + pmd.rule_drops + pmd.no_match +
                                pmd.bad_port + pmd.upcall_limit_drops);
  // classify: the other 20 flows are all forwarded, cached or not.
  ASSERT_TRUE((*dp)->SetConfig("pipeline.upcall_limit_action", "classify").ok());
  send(kFlows);
  ASSERT_TRUE(WaitFor([&] { return TotalRx(**dp) == uint64_t{2 * kFlows}; }, 10));
  (*dp)->Stop();
  s = (*dp)->Stats();
  const PmdCounters& end = s.pmds.at(0);
  EXPECT_EQ(end.upcall_limit_drops, uint64_t{kFlows - 5});
  // Each new flow was upcalled or limited (how many tokens came back in the
  // meantime depends on the time taken).
  EXPECT_EQ(end.pipeline.upcalls_rate_limited + end.pipeline.upcall_ok, uint64_t{2 * kFlows});
  EXPECT_EQ(end.rx_packets, end.tx_packets + end.tx_dropped + end.rule_drops + end.no_match +
                                end.bad_port + end.upcall_limit_drops);
  std::vector<std::pair<uint32_t, uint64_t>> got;
  DrainRing(p2.tx, 2, &got);
  EXPECT_EQ(got.size(), size_t{5 + kFlows});
}

// A settings request is applied all or nothing; the fake dataplane, listing
// the same keys, answers every request as this one does.
TEST(DpdkDataplaneTest, SettingsRequestsAreAllOrNothingAndTheFakeAgrees) {
  RingPort p1 = RingPort::Make("atom1", 1, 1);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p1.name)};
  o.pmd_lcores = {1};
  o.idle_sleep_us = 20;
  auto dp = DpdkDataplane::Create(o);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE((*dp)->Start().ok());
  FakeDataplane fake;
  for (const auto& [k, v] : (*dp)->GetConfig()) {
    RuntimeSettingsUpdate setting;
    fake.DefineConfig(k, v, ParseRuntimeSetting(k, v, &setting).ok());
  }
  ASSERT_EQ(fake.GetConfig(), (*dp)->GetConfig());

  const std::vector<std::vector<ConfigValue>> requests = {
      {{"pipeline.smc", "on"}, {"pipeline.cd", "sometimes"}},
      {{"pmd.tx_retries", "9"}, {"pipeline.emc_insert_inv_prob", "0"}, {"pmd.burst", "8"}},
      {{"dpcls.lookup_prio.avx512", "0"}, {"no.such", "1"}},
      {{"pipeline.cd", "off"}, {"dpcls.lookup_available.generic", "false"}},
      {{"pmd.idle_sleep_us", "5"}, {"dpcls.lookup_prio.nosuch", "1"}},
      {{"pipeline.ranking_interval_ms", "50"}, {"dpcls.force_scalar", "maybe"}},
      {{"pipeline.emc_insert_inv_prob", "4294967295"}},
      {{"pipeline.smc", "on"},
       {"pipeline.cd", "on"},
       {"pmd.tx_retries", "9"},
       {"dpcls.lookup_prio.avx512", "0"},
       {"dpcls.force_scalar", "true"},
       {"pipeline.smc", "off"}},
      {{"pmd.idle_sleep_us", "30"}},
  };
  int applied = 0;
  for (const std::vector<ConfigValue>& req : requests) {
    const std::string what = ::testing::PrintToString(req);
    const std::map<std::string, std::string> before = (*dp)->GetConfig();
    const absl::Status real = (*dp)->ApplySettings(req);
    EXPECT_EQ(fake.ApplySettings(req), real) << what;
    EXPECT_EQ(fake.GetConfig(), (*dp)->GetConfig()) << what;
    if (!real.ok()) {
      EXPECT_EQ((*dp)->GetConfig(), before) << what << ": " << real;
      // The key the error names is the bad one of the request.
      EXPECT_THAT(std::string(real.message()), HasSubstr(req.back().first)) << what;
    } else {
      ++applied;
    }
  }
  EXPECT_EQ(applied, 2);
  const std::map<std::string, std::string> now = (*dp)->GetConfig();
  EXPECT_EQ(now.at("pipeline.smc"), "off");  // the last value of a key wins
  EXPECT_EQ(now.at("pipeline.cd"), "on");
  EXPECT_EQ(now.at("pmd.tx_retries"), "9");
  EXPECT_EQ(now.at("pmd.idle_sleep_us"), "30");
  EXPECT_EQ(now.at("dpcls.lookup_prio.avx512"), "0");
  EXPECT_EQ(now.at("dpcls.force_scalar"), "true");
  EXPECT_EQ(now.at("pipeline.emc_insert_inv_prob"), "100");
  // The running PMD took the request: the CD is on in its own snapshot.
  const DataplaneStats s = (*dp)->Stats();
  ASSERT_TRUE(s.pmds.at(0).has_snapshot);
  EXPECT_TRUE(s.pmds.at(0).snapshot.cd_enabled);
  (*dp)->Stop();
}

}  // namespace
}  // namespace flowclass
