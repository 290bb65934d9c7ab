// In-process tests of DpdkDataplane with pipeline.kind acl on net_ring ports
// (testing/ring_ports.h): the builder thread's contract (acl_builder.h).
//   * post-ack: after each ack every packet follows the new rule; packets
//     classified before the new classifier was published follow the old one;
//   * coalescing: batches applied while a (slowed) build runs go into one next
//     build, and every batch is acked once, in generation order;
//   * a batch with a bad rule is refused whole, naming the rule's index;
//   * Restore and DeleteAll build and publish too; Trace answers "acl";
//   * pipeline.acl_algorithm at run time (checked against the CPU, all or
//     nothing), the autovalidator's differences counted, the context memory;
//   * differential: random IPv4 and IPv6 rules (ranges, overlaps, equal
//     priorities) changed batch by batch, every packet through the PMDs and
//     every key through Trace agree with the reference classifier;
//   * lookups never wait for a build: while a build is held (not slowed: held
//     until the test lets it go), both PMDs keep looping and classifying with
//     the operating classifier.
#include "dataplane/dpdk/dpdk_dataplane.h"

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/acl/acl_classifier.h"
#include "dataplane/dpdk/testing/ring_ports.h"
#include "dataplane/flow/packet_parser.h"
#include "dataplane/rules/rule_error.h"
#include "gtest/gtest.h"
#include "tests/common/packet_builder.h"
#include "tests/common/random_rules.h"
#include "tests/common/reference_classifier.h"
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

  // emc_insert_inv_prob: pipeline.emc_insert_inv_prob (1: every ACL answer
  // enters the EMC).
  explicit AclRig(const std::string& prefix, uint32_t emc_insert_inv_prob = 100) {
    p1 = RingPort::Make(prefix + "1", 2, 2);
    p2 = RingPort::Make(prefix + "2", 1, 2);
    p3 = RingPort::Make(prefix + "3", 1, 2);
    DpdkDataplaneOptions o;
    o.kind = PipelineKind::kAcl;
    o.ports = {Port(1, p1.name, true, 2), Port(2, p2.name, false), Port(3, p3.name, false)};
    o.pmd_lcores = {1, 2};
    o.idle_sleep_us = 10;
    o.pipeline.emc_config.insert_inv_prob = emc_insert_inv_prob;
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

// The rig's dataplane with FlipRule(0) (-> port 2) installed, started.
void StartWithFlipRule(AclRig& rig) {
  ASSERT_NE(rig.dp, nullptr);
  ASSERT_TRUE(rig.dp->ApplyBatch({RuleOp::Insert(FlipRule(0))}).ok());
  ASSERT_TRUE(rig.dp->Start().ok());
}

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
  ASSERT_NO_FATAL_FAILURE(StartWithFlipRule(rig));
  DpdkDataplane& dp = *rig.dp;
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

// A flow with a distinct source per `i`: a new EMC entry, so the ACL runs.
Flow NewFlow(uint32_t i) { return UdpFlow(0xac100000 + i, kFlipDst, 4000, 53); }

TEST(DpdkDataplaneAclTest, AlgorithmIsARunTimeSettingCheckedAgainstTheCpu) {
  AclRig rig("al");
  ASSERT_NO_FATAL_FAILURE(StartWithFlipRule(rig));
  DpdkDataplane& dp = *rig.dp;
  const AclAlgorithm widest = ResolveAclAlgorithm(AclAlgorithm::kDefault);
  EXPECT_EQ(dp.GetConfig()[kConfigAclAlgorithm], "default");
  EXPECT_EQ(dp.Stats().acl.algorithm, widest);
  // The live classifier's contexts hold DPDK memory.
  const uint64_t one_rule_bytes = dp.Stats().acl.context_bytes;
  EXPECT_GT(one_rule_bytes, 0u);

  ASSERT_TRUE(dp.ApplySettings({{kConfigAclAlgorithm, "scalar"}}).ok());
  EXPECT_EQ(dp.GetConfig()[kConfigAclAlgorithm], "scalar");
  EXPECT_EQ(dp.Stats().acl.algorithm, AclAlgorithm::kScalar);
  EXPECT_EQ(CountOf(rig.Send(NewFlow(1), 8), 2), 8u);

  // A bad name, and an implementation this CPU (or EAL's 256-bit SIMD
  // default) does not run: refused, naming the key; nothing of the request
  // changes, not even its pmd.* part.
  auto bad = dp.ApplySettings({{kConfigIdleSleepUs, "33"}, {kConfigAclAlgorithm, "avx3"}});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("pipeline.acl_algorithm: \"avx3\" is not"), std::string::npos)
      << bad;
  int refused = 0;
  for (AclAlgorithm a : {AclAlgorithm::kSse, AclAlgorithm::kAvx2, AclAlgorithm::kAvx512x16,
                         AclAlgorithm::kAvx512x32}) {
    if (CheckAclAlgorithm(a).ok()) continue;
    ++refused;
    auto st = dp.ApplySettings({{kConfigIdleSleepUs, "33"}, {kConfigAclAlgorithm,
                                                             AclAlgorithmName(a)}});
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_NE(st.message().find(absl::StrCat("pipeline.acl_algorithm: ", AclAlgorithmName(a),
                                             " is not supported here")),
              std::string::npos)
        << st;
  }
  EXPECT_GT(refused, 0) << "EAL runs without --force-max-simd-bitwidth=512: no avx512x32";
  EXPECT_EQ(dp.GetConfig()[kConfigIdleSleepUs], "10");
  EXPECT_EQ(dp.GetConfig()[kConfigAclAlgorithm], "scalar");
  EXPECT_EQ(dp.Stats().acl.algorithm, AclAlgorithm::kScalar);

  // The autovalidator: no differences on a sound DPDK...
  ASSERT_TRUE(dp.ApplySettings({{kConfigAclAlgorithm, "autovalidator"}}).ok());
  EXPECT_EQ(dp.Stats().acl.algorithm, AclAlgorithm::kAutovalidator);
  for (uint32_t i = 0; i < 16; ++i) EXPECT_EQ(CountOf(rig.Send(NewFlow(100 + i), 1), 2), 1u);
  EXPECT_EQ(dp.Stats().acl.autovalidator_mismatches, 0u);
  // ... and every key an implementation gets wrong counted, while the PMDs
  // still answer right (scalar's answer).
  if (widest == AclAlgorithm::kScalar) GTEST_SKIP() << "scalar only here: nothing to compare";
  {
    struct Unbreak {
      ~Unbreak() { SetAclAutovalidatorFaultForTesting(AclAlgorithm::kDefault); }
    } unbreak;
    SetAclAutovalidatorFaultForTesting(widest);
    for (uint32_t i = 0; i < 16; ++i) EXPECT_EQ(CountOf(rig.Send(NewFlow(200 + i), 1), 2), 1u);
  }
  const uint64_t found = dp.Stats().acl.autovalidator_mismatches;
  EXPECT_GE(found, 16u) << "one corrupted key per ACL burst";

  // A new build keeps the setting and the differences found so far; a larger
  // rule set holds more memory.
  std::vector<RuleOp> more;
  for (uint32_t i = 0; i < 500; ++i)
    more.push_back(RuleOp::Insert(Ipv4DstRule(10 + i, 5, 0x0b000000 + (i << 8), 24,
                                              Action::Output(3))));
  ASSERT_TRUE(dp.ApplyBatch(more).ok());
  const AclBuilderStats after = dp.Stats().acl;
  EXPECT_EQ(after.algorithm, AclAlgorithm::kAutovalidator);
  EXPECT_EQ(after.autovalidator_mismatches, found);
  EXPECT_GT(after.context_bytes, one_rule_bytes);
  EXPECT_EQ(CountOf(rig.Send(NewFlow(300), 4), 2), 4u);
  EXPECT_EQ(dp.Stats().acl.autovalidator_mismatches, found);
}

// An mbuf holding `frame` followed by `tag` (after the frame, so that no
// header byte of an IPv6 frame is overwritten).
rte_mbuf* MakeTaggedFrame(const std::vector<uint8_t>& frame, uint64_t tag) {
  rte_mbuf* m = rte_pktmbuf_alloc(dpdk_testing::g_test_pool);
  if (m == nullptr) return nullptr;
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size() + 8));
  std::memcpy(p, frame.data(), frame.size());
  std::memcpy(p + frame.size(), &tag, 8);
  return m;
}

// Drains a tx ring of tagged frames: tag -> port.
void DrainTags(rte_ring* r, uint32_t port, std::map<uint64_t, uint32_t>* out) {
  void* objs[64];
  unsigned n;
  while ((n = rte_ring_dequeue_burst(r, objs, 64, nullptr)) > 0) {
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = static_cast<rte_mbuf*>(objs[i]);
      uint64_t tag;
      std::memcpy(&tag, rte_pktmbuf_mtod_offset(m, const uint8_t*, m->data_len - 8), 8);
      EXPECT_TRUE(out->emplace(tag, port).second) << "tag " << tag << " twice";
      rte_pktmbuf_free(m);
    }
  }
}

// The daemon's dataplane against the reference classifier on random rule
// sets of IPv4 and IPv6 rules (port ranges, arbitrary masks, overlaps,
// equal priorities), changed batch by batch through ApplyBatch: after each
// ack every packet leaves by the port of the reference's winner (dropped
// when it is a drop rule or there is none), and Trace names that winner.
TEST(DpdkDataplaneAclTest, RandomIpv4AndIpv6RulesThroughThePmdsMatchTheReference) {
  AclRig rig("df", /*emc_insert_inv_prob=*/1);
  ASSERT_NE(rig.dp, nullptr);
  DpdkDataplane& dp = *rig.dp;
  ASSERT_TRUE(dp.Start().ok());
  RandomRuleOptions opts;
  opts.ipv6_fraction = 0.5;
  opts.range_fraction = 0.35;
  opts.in_ports = 1;  // every packet arrives on port 1
  opts.l2_only_fraction = 0;  // no catch-all rules answering most keys
  opts.max_priority = 64;      // equal priorities still common
  RandomRuleGen gen(25, opts);
  // Actions the rig can observe: out of port 1, 2 or 3, or a drop.
  auto observable = [](Rule r) {
    r.action = r.id % 5 == 0 ? Action::Drop() : Action::Output(1 + r.id % 3);
    return r;
  };
  std::vector<Rule> live;
  for (const Rule& r : gen.NextRules(300)) live.push_back(observable(r));
  uint64_t next_id = live.size() + 1;
  ReferenceClassifier ref(live);
  {
    std::vector<RuleOp> ops;
    for (const Rule& r : live) ops.push_back(RuleOp::Insert(r));
    auto res = dp.ApplyBatch(ops);
    ASSERT_TRUE(res.ok()) << res.status();
  }
  uint64_t tag = 0;
  long packets = 0, ipv6 = 0, traced = 0;
  std::map<uint32_t, long> by_port;  // outcomes: 0 (dropped), 1, 2, 3
  std::map<uint64_t, long> winners;  // the reference's winning rules
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    if (round > 0) {
      std::vector<RuleOp> ops = gen.NextBatch(1 + static_cast<int>(gen.Uniform(40)), &live,
                                              &next_id);
      for (RuleOp& op : ops)
        if (op.kind == RuleOp::Kind::kInsert || op.kind == RuleOp::Kind::kReplace)
          op.rule = observable(op.rule);
      for (Rule& r : live) r = observable(r);
      ASSERT_TRUE(ref.ApplyBatch(ops).ok());
      auto res = dp.ApplyBatch(ops);
      ASSERT_TRUE(res.ok()) << res.status();
    }
    // Keys near the rules (and some unrelated), as the PMD will parse them,
    // each sent twice to the same PMD: the ACL answers the first, the EMC the
    // second (every answer is inserted).
    std::map<uint64_t, Flow> sent;  // tag -> the key the PMD sees
    std::vector<std::vector<uint8_t>> frames;
    for (int i = 0; frames.size() < 384 && i < 20000; ++i) {
      Flow f = i % 6 == 5 ? gen.NextKey() : gen.NextKeyNear(live);
      f.Set(Field::kInPort, 1);
      if (!CanBuildFrameFromFlow(f)) continue;
      frames.push_back(BuildFrameFromFlow(f, 64));
      ASSERT_EQ(ParsePacketToFlow(frames.back().data(), frames.back().size(), 1), f)
          << "the frame does not parse back to its key";
      sent.emplace(tag + 2 * frames.size() - 2, f);
      sent.emplace(tag + 2 * frames.size() - 1, f);
    }
    for (int copy = 0; copy < 2; ++copy) {
      for (size_t i = 0; i < frames.size(); ++i) {
        rte_mbuf* m = MakeTaggedFrame(frames[i], tag + 2 * i + static_cast<uint64_t>(copy));
        ASSERT_NE(m, nullptr);
        while (rte_ring_enqueue(rig.p1.rx[i % 2], m) != 0) std::this_thread::yield();
      }
      const uint64_t want = static_cast<uint64_t>(packets) + (copy + 1) * frames.size();
      ASSERT_TRUE(WaitFor(
          [&] {
            const PmdCounters t = dp.Stats().Total();
            return t.tx_packets + t.tx_dropped + t.rule_drops + t.no_match + t.bad_port >= want;
          },
          20))
          << dp.Stats().ToString();
    }
    tag += 2 * frames.size();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::map<uint64_t, uint32_t> got;
    DrainTags(rig.p1.tx, 1, &got);
    DrainTags(rig.p2.tx, 2, &got);
    DrainTags(rig.p3.tx, 3, &got);
    for (const auto& [t, key] : sent) {
      const Rule* want = ref.Lookup(key);
      const uint32_t want_port =
          want && want->action.kind == Action::Kind::kOutput ? want->action.port : 0;
      const auto it = got.find(t);
      EXPECT_EQ(it == got.end() ? 0u : it->second, want_port)
          << "packet " << t << " key " << key.ToString() << " reference rule "
          << (want ? want->id : 0);
      ++by_port[want_port];
      ++winners[want ? want->id : 0];
      ipv6 += key.Get(Field::kEthType) == kEthTypeIpv6;
      if (t % 2 == 0) {  // once per key: the live classifier's answer
        auto tr = dp.Trace(FlowKey::FromFlow(key));
        ASSERT_TRUE(tr.ok()) << tr.status();
        EXPECT_EQ(tr->matched, want != nullptr) << key.ToString();
        EXPECT_EQ(tr->matched ? tr->rule.id : 0, want ? want->id : 0) << key.ToString();
        ++traced;
      }
    }
    packets += static_cast<long>(sent.size());
  }
  // Both families, every outcome, many winning rules, and the EMC in front
  // was exercised.
  EXPECT_GT(ipv6, packets / 5);
  for (uint32_t port = 0; port <= 3; ++port) EXPECT_GT(by_port[port], packets / 20) << port;
  EXPECT_GT(winners.size(), 100u);
  EXPECT_GT(dp.Stats().Total().pipeline.emc_hits, 0u);
  EXPECT_EQ(dp.Stats().acl.build_failures, 0u);
  EXPECT_GT(traced, 1000);
}

// Lookups never wait for a build: with a build held (it has taken the new
// rules and does not finish until the test releases it), both PMDs keep
// passing their loop and their quiescent points, and classify every packet
// with the operating classifier; the batch is acked only after the release,
// and then every packet follows it.  No clock is involved in the assertions.
TEST(DpdkDataplaneAclTest, PmdsKeepClassifyingWhileABuildIsHeld) {
  AclRig rig("hd");
  ASSERT_NO_FATAL_FAILURE(StartWithFlipRule(rig));
  DpdkDataplane& dp = *rig.dp;
  EXPECT_EQ(CountOf(rig.Send(NewFlow(0), 8), 2), 8u);

  dp.HoldAclBuildForTesting(true);
  std::atomic<bool> acked{false};
  absl::StatusOr<BatchResult> res = absl::UnknownError("not run");
  std::thread applier([&] {
    res = dp.ApplyBatch({RuleOp::Replace(FlipRule(1))});  // -> port 3
    acked.store(true);
  });
  ASSERT_TRUE(WaitFor([&] { return dp.AclBuildHeldForTesting(); }, 30));
  const DataplaneHeartbeat h0 = dp.Heartbeat();
  // Many bursts of new flows (each an ACL lookup) while the build is held.
  uint64_t acl0 = dp.Stats().Total().pipeline.acl_hits;
  for (uint32_t round = 0; round < 20; ++round) {
    const std::vector<uint32_t> ports = rig.Send(NewFlow(1000 + round), 16);
    EXPECT_EQ(CountOf(ports, 2), 16u) << "round " << round << ": the operating rule";
  }
  EXPECT_TRUE(dp.AclBuildHeldForTesting());
  EXPECT_FALSE(acked.load());
  EXPECT_GE(dp.Stats().Total().pipeline.acl_hits, acl0 + 20);
  const DataplaneHeartbeat h1 = dp.Heartbeat();
  ASSERT_EQ(h1.pmds.size(), 2u);
  for (size_t i = 0; i < h1.pmds.size(); ++i) {
    // Each PMD went on looping (polling its queue, passing the point where it
    // would install a new classifier) and still runs the operating one.
    EXPECT_GT(h1.pmds[i].iterations, h0.pmds[i].iterations) << "pmd " << i;
    EXPECT_EQ(h1.pmds[i].generation, 1u) << "pmd " << i;
  }
  EXPECT_EQ(dp.generation(), 1u);
  EXPECT_EQ(dp.Stats().acl.queue_depth, 0u);  // taken by the held build

  dp.HoldAclBuildForTesting(false);
  applier.join();
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->generation, 2u);
  EXPECT_EQ(CountOf(rig.Send(NewFlow(5000), 16), 3), 16u);
}

// The counters GetStats sums never fall: per PMD and in total, packets,
// emc_hits and acl_hits + acl_misses read by Stats() only grow, read after
// read, on two reader threads, while traffic of new and repeated flows runs
// through both PMDs and rebuilds (each a new classifier installed by every
// PMD, its EMC invalidated) go on.  (flowclassd_acl_test once reported
// "acl_lookups() >= lookups0 + 1000, actual: 105422 vs 106326": a rise of
// 96, not a fall of 904; this pins the plumbing down anyway.)
TEST(DpdkDataplaneAclTest, CountersNeverFallAcrossReadsAndRebuilds) {
  AclRig rig("mo");
  ASSERT_NE(rig.dp, nullptr);
  DpdkDataplane& dp = *rig.dp;
  ASSERT_TRUE(dp.ApplyBatch({RuleOp::Insert(FlipRule(0)),
                             RuleOp::Insert(Ipv4DstRule(2, 0, 0x0a000000, 8, Action::Drop()))})
                  .ok());
  ASSERT_TRUE(dp.Start().ok());
  std::atomic<bool> done{false};
  // Traffic: 64 repeated flows (EMC hits once inserted) and new ones (ACL
  // lookups), over both rx queues; the tx rings are drained and freed.
  std::thread sender([&] {
    uint64_t tag = 0;
    uint32_t fresh = 1u << 20;
    while (!done.load()) {
      for (int i = 0; i < 64; ++i) {
        const Flow f = i % 4 == 0 ? NewFlow(fresh++) : NewFlow(static_cast<uint32_t>(i));
        rte_mbuf* m = MakePacket(f, tag++);
        if (m == nullptr) break;
        if (rte_ring_enqueue(rig.p1.rx[static_cast<size_t>(i % 2)], m) != 0) rte_pktmbuf_free(m);
      }
      for (rte_ring* r : {rig.p1.tx, rig.p2.tx, rig.p3.tx}) {
        void* out[64];
        unsigned got;
        while ((got = rte_ring_dequeue_burst(r, out, 64, nullptr)) > 0)
          for (unsigned j = 0; j < got; ++j) rte_pktmbuf_free(static_cast<rte_mbuf*>(out[j]));
      }
    }
  });
  std::thread rebuilder([&] {
    for (int k = 1; !done.load(); ++k) {
      EXPECT_TRUE(dp.ApplyBatch({RuleOp::Replace(FlipRule(k))}).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  struct Seen {
    uint64_t packets = 0, emc_hits = 0, acl_lookups = 0;
  };
  // Reads until the deadline; returns the reads made.  Every figure of a
  // read is at least the previous read's.
  auto reader = [&](const char* who) {
    std::vector<Seen> pmd(2);
    Seen total;
    int reads = 0;
    auto check = [&](const PmdStats& p, Seen* seen, const std::string& what) {
      const uint64_t lookups = p.acl_hits + p.acl_misses;
      EXPECT_GE(p.packets, seen->packets) << who << " " << what << " read " << reads;
      EXPECT_GE(p.emc_hits, seen->emc_hits) << who << " " << what << " read " << reads;
      EXPECT_GE(lookups, seen->acl_lookups)
          << who << " " << what << " read " << reads << ": acl_hits + acl_misses fell by "
          << seen->acl_lookups - lookups;
      *seen = Seen{p.packets, p.emc_hits, lookups};
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (std::chrono::steady_clock::now() < deadline) {
      const DataplaneStats s = dp.Stats();
      EXPECT_EQ(s.pmds.size(), 2u);
      for (const PmdCounters& p : s.pmds)
        if (p.pmd < 2) check(p.pipeline, &pmd[p.pmd], absl::StrCat("pmd ", p.pmd));
      check(s.Total().pipeline, &total, "total");
      ++reads;
    }
    return std::make_pair(reads, total);
  };
  std::pair<int, Seen> other;
  std::thread second([&] { other = reader("second reader"); });
  const std::pair<int, Seen> mine = reader("first reader");
  second.join();
  done.store(true);
  sender.join();
  rebuilder.join();
  // It did run: many reads, ACL lookups and EMC hits, several rebuilds.
  EXPECT_GT(mine.first, 20);
  EXPECT_GT(other.first, 20);
  EXPECT_GT(mine.second.acl_lookups, 1000u);
  EXPECT_GT(mine.second.emc_hits, 0u);
  EXPECT_GT(dp.Stats().Total().pipeline.revalidations, 10u);
}

}  // namespace
}  // namespace flowclass
