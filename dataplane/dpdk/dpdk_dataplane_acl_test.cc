// In-process tests of DpdkDataplane with pipeline.kind acl on net_ring ports
// (testing/ring_ports.h): the builder thread's contract (acl_builder.h).
//   * post-ack: after each ack every packet follows the new rule; packets
//     classified before the new classifier was published follow the old one;
//   * coalescing: batches applied while a (slowed) build runs go into one next
//     build, and every batch is acked once, in generation order;
//   * a batch with a bad rule is refused whole, naming the rule's index;
//   * Restore and DeleteAll build and publish too; Trace answers "acl".
#include "dataplane/dpdk/dpdk_dataplane.h"

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/dpdk/testing/ring_ports.h"
#include "dataplane/rules/rule_error.h"
#include "gtest/gtest.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

using dpdk_testing::DrainRing;
using dpdk_testing::EalEnvironment;
using dpdk_testing::MakePacket;
using dpdk_testing::Port;
using dpdk_testing::RingPort;
using dpdk_testing::UdpFlow;
using dpdk_testing::WaitFor;

const auto* const kEnv =
    ::testing::AddGlobalTestEnvironment(new EalEnvironment("dpdk_dataplane_acl_test"));

constexpr uint32_t kFlipDst = 0x0a03ff01;

// Ports 1 (polled, two rx queues: two PMDs) and 2, 3 (tx only).
struct AclRig {
  RingPort p1, p2, p3;
  std::unique_ptr<DpdkDataplane> dp;
  uint64_t next_tag = 0;

  explicit AclRig(const std::string& prefix) {
    p1 = RingPort::Make(prefix + "1", 2, 2);
    p2 = RingPort::Make(prefix + "2", 1, 2);
    p3 = RingPort::Make(prefix + "3", 1, 2);
    DpdkDataplaneOptions o;
    o.kind = PipelineKind::kAcl;
    o.ports = {Port(1, p1.name, true, 2), Port(2, p2.name, false), Port(3, p3.name, false)};
    o.pmd_lcores = {1, 2};
    o.idle_sleep_us = 10;
    auto r = DpdkDataplane::Create(o);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) dp = std::move(*r);
  }

  // Sends `n` packets of `f` over both rx queues and returns the ports they
  // left by (0: dropped), once every one is accounted for (sent or dropped).
  std::vector<uint32_t> Send(const Flow& f, int n) {
    const uint64_t rx0 = dp->Stats().Total().rx_packets;
    for (int i = 0; i < n; ++i) {
      rte_mbuf* m = MakePacket(f, next_tag++);
      EXPECT_NE(m, nullptr);
      EXPECT_EQ(rte_ring_enqueue(p1.rx[static_cast<size_t>(i % 2)], m), 0);
    }
    EXPECT_TRUE(WaitFor([&] { return dp->Stats().Total().rx_packets >= rx0 + n; }, 10));
    std::vector<std::pair<uint32_t, uint64_t>> out;
    // A received packet is on a tx ring or freed within the same iteration.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    DrainRing(p1.tx, 1, &out);
    DrainRing(p2.tx, 2, &out);
    DrainRing(p3.tx, 3, &out);
    std::vector<uint32_t> ports;
    for (const auto& [port, tag] : out) ports.push_back(port);
    while (ports.size() < static_cast<size_t>(n)) ports.push_back(0);
    return ports;
  }
};

Rule FlipRule(int k) { return Ipv4DstRule(1, 1000, kFlipDst, 32, Action::Output(k % 2 ? 3 : 2)); }

size_t CountOf(const std::vector<uint32_t>& v, uint32_t port) {
  return static_cast<size_t>(std::count(v.begin(), v.end(), port));
}

TEST(DpdkDataplaneAclTest, AfterEachAckEveryPacketFollowsTheNewRule) {
  AclRig rig("ap");
  ASSERT_NE(rig.dp, nullptr);
  DpdkDataplane& dp = *rig.dp;
  // A catch-all below the flipping rule: other traffic leaves by port 1.
  auto r0 = dp.ApplyBatch({RuleOp::Insert(FlipRule(0)),
                           RuleOp::Insert(Ipv4DstRule(2, 0, 0x0a000000, 8, Action::Output(1)))});
  ASSERT_TRUE(r0.ok()) << r0.status();
  ASSERT_TRUE(dp.Start().ok());
  const Flow flip = UdpFlow(0xc0a80001, kFlipDst, 4000, 53);
  const Flow other = UdpFlow(0xc0a80002, 0x0a010101, 4001, 80);
  EXPECT_EQ(CountOf(rig.Send(flip, 16), 2), 16u);

  for (int k = 1; k <= 12; ++k) {
    auto res = dp.ApplyBatch({RuleOp::Replace(FlipRule(k))});
    ASSERT_TRUE(res.ok()) << "batch " << k << ": " << res.status();
    ASSERT_EQ(res->generation, static_cast<uint64_t>(k + 1));
    for (const PmdCounters& p : dp.Stats().pmds)
      EXPECT_GE(p.generation, res->generation) << "pmd " << p.pmd << " after ack " << k;
    const uint32_t want = k % 2 ? 3 : 2;
    // The EMC holds the previous generation's answer for this flow: it
    // must not answer any more.
    const std::vector<uint32_t> got = rig.Send(flip, 32);
    EXPECT_EQ(CountOf(got, want), 32u) << "batch " << k;
    EXPECT_EQ(CountOf(rig.Send(other, 4), 1), 4u) << "batch " << k;
  }

  // Before the ack: with a slow build, packets sent (and classified) while
  // the new generation is not yet published follow the old rule.
  dp.SetAclBuildDelayForTesting(std::chrono::milliseconds(1500));
  std::atomic<bool> acked{false};
  absl::StatusOr<BatchResult> late = absl::UnknownError("not run");
  std::thread applier([&] {
    late = dp.ApplyBatch({RuleOp::Replace(FlipRule(13))});  // -> port 3
    acked.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::vector<uint32_t> before = rig.Send(flip, 32);
  const bool still_old = dp.generation() == 13;  // 12 batches after generation 1
  EXPECT_FALSE(acked.load());
  applier.join();
  ASSERT_TRUE(late.ok()) << late.status();
  if (still_old) {
    EXPECT_EQ(CountOf(before, 2), 32u);  // generation 13: port 2
  }
  EXPECT_TRUE(still_old) << "the build did not wait";
  EXPECT_EQ(CountOf(rig.Send(flip, 32), 3), 32u);
  dp.SetAclBuildDelayForTesting(std::chrono::milliseconds(0));

  // Every packet was classified by the EMC or the ACL; the flip flow hit
  // the ACL at least once per generation (its EMC entry invalidated).
  dp.Stop();
  const DataplaneStats s = dp.Stats();
  const PmdStats t = s.Total().pipeline;
  EXPECT_EQ(t.packets, t.emc_hits + t.acl_hits + t.acl_misses);
  EXPECT_GE(t.acl_hits, 13u);
  EXPECT_EQ(t.acl_misses, 0u);
  EXPECT_TRUE(s.acl.enabled);
  EXPECT_EQ(s.acl.builds, 14u);
  EXPECT_EQ(s.acl.live_generation, 14u);
  EXPECT_EQ(s.acl.last_build_rules, 2u);
  EXPECT_EQ(s.acl.build_failures, 0u);
}

TEST(DpdkDataplaneAclTest, BatchesDuringASlowBuildAreCoalescedAndAckedInOrder) {
  AclRig rig("co");
  ASSERT_NE(rig.dp, nullptr);
  DpdkDataplane& dp = *rig.dp;
  ASSERT_TRUE(dp.Start().ok());
  std::mutex mu;
  std::vector<uint64_t> acks;  // in the order the builder acked them
  dp.SetAclAckObserverForTesting([&](uint64_t g) {
    std::lock_guard<std::mutex> l(mu);
    acks.push_back(g);
  });
  dp.SetAclBuildDelayForTesting(std::chrono::milliseconds(1000));
  const uint64_t builds0 = dp.Stats().acl.builds;

  // The first batch starts a build; 15 more, one per caller, arrive while it
  // runs (each waits for its own ack).
  constexpr int kCallers = 16;
  std::vector<absl::StatusOr<BatchResult>> results(kCallers, absl::UnknownError("not run"));
  std::vector<uint64_t> live_at_return(kCallers, 0);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      results[i] = dp.ApplyBatch({RuleOp::Insert(
          Ipv4DstRule(100 + i, 10, 0x0a640000 | (i << 8), 24, Action::Output(2)))});
      live_at_return[i] = dp.generation();
    });
    if (i == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      EXPECT_EQ(dp.Stats().acl.queue_depth, 0u);  // batch 1 is being built
    }
  }
  EXPECT_TRUE(WaitFor([&] { return dp.Stats().acl.queue_depth == kCallers - 1; }, 5))
      << "queue depth " << dp.Stats().acl.queue_depth;
  for (std::thread& t : callers) t.join();

  std::vector<uint64_t> gens;
  for (int i = 0; i < kCallers; ++i) {
    ASSERT_TRUE(results[i].ok()) << "caller " << i << ": " << results[i].status();
    gens.push_back(results[i]->generation);
    // A caller returns only once its generation is live on every PMD.
    EXPECT_GE(live_at_return[i], results[i]->generation) << "caller " << i;
  }
  std::sort(gens.begin(), gens.end());
  std::vector<uint64_t> want;
  for (int i = 1; i <= kCallers; ++i) want.push_back(static_cast<uint64_t>(i));
  EXPECT_EQ(gens, want);
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(acks, want) << "every batch acked once, in generation order";
  }
  const AclBuilderStats s = dp.Stats().acl;
  EXPECT_EQ(s.builds - builds0, 2u) << "one build for the first batch, one for the rest";
  EXPECT_EQ(s.batches, static_cast<uint64_t>(kCallers));
  EXPECT_EQ(s.coalesced_batches, static_cast<uint64_t>(kCallers - 2));
  EXPECT_EQ(s.last_build_rules, static_cast<uint64_t>(kCallers));
  EXPECT_EQ(s.queue_depth, 0u);
  // Both slowed builds took >= 1 s: in the 2 s and 10 s buckets, not below.
  EXPECT_EQ(s.le_ms[AclBuilderStats::kNumBuckets - 1], s.builds);
  EXPECT_LE(s.le_ms[AclBuilderStats::kNumBuckets - 3], s.builds - 2);
  EXPECT_GE(s.build_ns, 2 * 1'000'000'000ull);

  // A group of batches in one call is one build, each batch its own ack.
  dp.SetAclBuildDelayForTesting(std::chrono::milliseconds(0));
  std::vector<std::vector<RuleOp>> group;
  for (int i = 0; i < 5; ++i)
    group.push_back({RuleOp::Delete(100 + i)});
  std::vector<absl::Span<const RuleOp>> spans(group.begin(), group.end());
  const auto gr = dp.ApplyBatches(spans);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(gr[i].ok()) << gr[i].status();
    EXPECT_EQ(gr[i]->generation, static_cast<uint64_t>(kCallers + 1 + i));
  }
  EXPECT_EQ(dp.Stats().acl.builds - builds0, 3u);
  // The rules of the last generation classify: a deleted rule no longer.
  const Flow kept = UdpFlow(0xc0a80001, 0x0a640000 | (7 << 8) | 1, 1, 2);
  const Flow gone = UdpFlow(0xc0a80001, 0x0a640000 | (2 << 8) | 1, 1, 2);
  EXPECT_EQ(CountOf(rig.Send(kept, 8), 2), 8u);
  EXPECT_EQ(CountOf(rig.Send(gone, 8), 0), 8u);
}

TEST(DpdkDataplaneAclTest, ABadRuleRefusesTheWholeBatchNamingItsIndex) {
  AclRig rig("bd");
  ASSERT_NE(rig.dp, nullptr);
  DpdkDataplane& dp = *rig.dp;
  ASSERT_TRUE(dp.ApplyBatch({RuleOp::Insert(FlipRule(0))}).ok());
  ASSERT_TRUE(dp.Start().ok());
  const Flow flip = UdpFlow(0xc0a80001, kFlipDst, 4000, 53);
  EXPECT_EQ(CountOf(rig.Send(flip, 8), 2), 8u);
  const uint64_t builds0 = dp.Stats().acl.builds;

  Rule bad = Ipv4DstRule(9, 5, 0x0a000000, 8, Action::Output(3));
  bad.match.value.Set(Field::kIpv4Dst, 0x0a000001);  // a value bit outside the /8 mask
  auto r = dp.ApplyBatch({RuleOp::Insert(Ipv4DstRule(5, 2000, kFlipDst, 32, Action::Output(3))),
                          RuleOp::Replace(FlipRule(1)), RuleOp::Insert(bad)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  const std::optional<RuleOpError> e = GetRuleOpError(r.status());
  ASSERT_TRUE(e.has_value()) << r.status();
  EXPECT_EQ(e->index, 2u);
  EXPECT_EQ(e->rule_id, 9u);
  EXPECT_NE(r.status().message().find("operation 2 (rule id 9)"), std::string::npos)
      << r.status();
  // Nothing changed: generation, rules, builds, traffic.
  EXPECT_EQ(dp.generation(), 1u);
  ASSERT_EQ(dp.ListRules().size(), 1u);
  EXPECT_EQ(dp.ListRules()[0].action.port, 2u);
  EXPECT_EQ(dp.Stats().acl.builds, builds0);
  EXPECT_EQ(CountOf(rig.Send(flip, 8), 2), 8u);

  // In a group, only the bad batch is refused.
  const std::vector<RuleOp> good = {RuleOp::Replace(FlipRule(1))};
  const std::vector<RuleOp> worse = {RuleOp::Insert(bad)};
  const absl::Span<const RuleOp> two[] = {worse, good};
  const auto gr = dp.ApplyBatches(two);
  EXPECT_FALSE(gr[0].ok());
  ASSERT_TRUE(gr[1].ok()) << gr[1].status();
  EXPECT_EQ(gr[1]->generation, 2u);
  EXPECT_EQ(CountOf(rig.Send(flip, 8), 3), 8u);
}

TEST(DpdkDataplaneAclTest, RestoreDeleteAllAndTraceUseTheLiveClassifier) {
  AclRig rig("rs");
  ASSERT_NE(rig.dp, nullptr);
  DpdkDataplane& dp = *rig.dp;
  const std::vector<Rule> stored = {FlipRule(1),
                                    Ipv4DstRule(2, 0, 0x0a000000, 8, Action::Output(1))};
  ASSERT_TRUE(dp.Restore(stored, 7).ok());
  EXPECT_EQ(dp.generation(), 7u);
  ASSERT_TRUE(dp.Start().ok());
  const Flow flip = UdpFlow(0xc0a80001, kFlipDst, 4000, 53);
  EXPECT_EQ(CountOf(rig.Send(flip, 8), 3), 8u);

  Flow key = flip;
  key.Set(Field::kInPort, 1);
  auto t = dp.Trace(FlowKey::FromFlow(key));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->layer, "acl");
  EXPECT_TRUE(t->matched);
  EXPECT_EQ(t->rule.id, 1u);
  EXPECT_EQ(t->generation, 7u);

  auto d = dp.DeleteAll();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->generation, 8u);
  EXPECT_EQ(dp.generation(), 8u);
  EXPECT_EQ(CountOf(rig.Send(flip, 8), 0), 8u);  // no rule: dropped
  const PmdStats s = dp.Stats().Total().pipeline;
  EXPECT_GE(s.acl_misses, 8u);
}

}  // namespace
}  // namespace flowclass
