// In-process tests of DpdkDataplane on net_ring ports (testing/ring_ports.h):
// forwarding and the accounting of every packet, setup errors, an idle PMD's
// counters.  One EAL per process.
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
#include "server/testing/fake_dataplane.h"
#include "tests/common/e2e_util.h"
#include "tests/common/packet_builder.h"
#include "tests/common/reference_classifier.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using dpdk_testing::DrainRing;
using dpdk_testing::EalEnvironment;
using dpdk_testing::Expected;
using dpdk_testing::MakePacket;
using dpdk_testing::Port;
using dpdk_testing::RingPort;
using dpdk_testing::TotalRx;
using dpdk_testing::UdpFlow;
using dpdk_testing::WaitFor;

const auto* const kEnv =
    ::testing::AddGlobalTestEnvironment(new EalEnvironment("dpdk_dataplane_test"));

TEST(DpdkDataplaneTest, ForwardsByRulesAndAccountsForEveryPacket) {
  RingPort p1 = RingPort::Make("fwd1", 1, 1);
  RingPort p2 = RingPort::Make("fwd2", 1, 1);
  RingPort p3 = RingPort::Make("fwd3", 1, 1);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p1.name),
             Port(2, p2.name, false),
             Port(3, p3.name, false)};
  o.pmd_lcores = {1};
  o.idle_sleep_us = 20;
  auto dp = DpdkDataplane::Create(o);
  ASSERT_TRUE(dp.ok()) << dp.status();

  std::vector<Rule> rules = {
      Ipv4DstRule(1, 100, 0x0a000000, 16, Action::Output(2)),
      Ipv4DstRule(2, 80, 0x0a010000, 16, Action::Drop()),
      Ipv4DstRule(3, 70, 0x0a020000, 16, Action::Output(9)),  // no port 9
      Ipv4DstRule(4, 60, 0x0a000000, 12, Action::Output(3)),
      Ipv4DstRule(5, 50, 0x0a000000, 8, Action::Output(1)),  // back out of port 1
  };
  // Higher priority rule on a sub-prefix of rule 1 (overlap).
  rules.push_back(Ipv4DstRule(6, 200, 0x0a000100, 24, Action::Output(3)));
  std::vector<RuleOp> ops;
  for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));
  auto applied = (*dp)->ApplyBatch(ops);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ((*dp)->generation(), 1u);
  ASSERT_TRUE((*dp)->Start().ok());
  const ReferenceClassifier reference(rules);

  std::mt19937 rng(7);
  std::vector<Flow> flows;
  for (int i = 0; i < 200; ++i) {
    const uint32_t dst = (rng() % 2 ? 0x0b000000 : 0x0a000000) | (rng() % 4) << 16 |
                         (rng() % 2) << 8 | (rng() % 256);
    flows.push_back(UdpFlow(0xc0a80000 | (rng() & 0xffff), dst,
                            static_cast<uint16_t>(rng()), 53));
  }
  constexpr int kPackets = 3000;
  std::map<int, uint64_t> want_per_port;
  uint64_t want_drop = 0, want_bad = 0, want_nomatch = 0;
  for (int i = 0; i < kPackets; ++i) {
    const Flow& f = flows[static_cast<size_t>(i) % flows.size()];
    const int port = Expected(reference, f, 1);
    if (port == 9) ++want_bad;
    else if (port > 0) ++want_per_port[port];
    std::vector<Rule> nm;
    if (port < 0) {
      // Rule drop or no match?
      Flow k = f;
      k.Set(Field::kInPort, 1);
      bool any = false;
      for (const Rule& r : rules) any |= r.match.Matches(k);
      (any ? want_drop : want_nomatch)++;
    }
    rte_mbuf* m = MakePacket(f, static_cast<uint64_t>(i));
    ASSERT_NE(m, nullptr);
    while (rte_ring_enqueue(p1.rx[0], m) != 0) std::this_thread::yield();
  }
  ASSERT_TRUE(WaitFor([&] { return TotalRx(**dp) == kPackets; }, 20))
      << (*dp)->Stats().ToString();
  // Per-rule hits: every packet counted once, under its winning rule.
  {
    std::map<uint64_t, uint64_t> want_hits;
    for (int i = 0; i < kPackets; ++i) {
      Flow k = flows[static_cast<size_t>(i) % flows.size()];
      k.Set(Field::kInPort, 1);
      if (const Rule* best = reference.Lookup(k)) ++want_hits[best->id];
    }
    absl::StatusOr<std::vector<RuleHit>> hits = (*dp)->RuleHits();
    ASSERT_TRUE(hits.ok()) << hits.status();
    std::map<uint64_t, uint64_t> got_hits;
    for (const RuleHit& h : *hits) got_hits[h.id] = h.hits;
    EXPECT_EQ(got_hits, want_hits);
  }
  (*dp)->Stop();

  std::vector<std::pair<uint32_t, uint64_t>> got;
  DrainRing(p1.tx, 1, &got);
  DrainRing(p2.tx, 2, &got);
  DrainRing(p3.tx, 3, &got);
  std::map<int, uint64_t> got_per_port;
  for (auto [port, tag] : got) {
    ASSERT_LT(tag, static_cast<uint64_t>(kPackets));
    const Flow& f = flows[tag % flows.size()];
    EXPECT_EQ(static_cast<int>(port), Expected(reference, f, 1)) << "packet " << tag;
    ++got_per_port[static_cast<int>(port)];
  }
  EXPECT_EQ(got_per_port, want_per_port);

  const DataplaneStats s = (*dp)->Stats();
  const PmdCounters t = s.Total();
  EXPECT_EQ(t.rx_packets, static_cast<uint64_t>(kPackets));
  EXPECT_EQ(t.tx_packets, got.size());
  EXPECT_EQ(t.tx_dropped, 0u);
  EXPECT_EQ(t.rule_drops, want_drop);
  EXPECT_EQ(t.no_match, want_nomatch);
  EXPECT_EQ(t.bad_port, want_bad);
  EXPECT_GT(want_drop * want_nomatch * want_bad, 0u) << "every path exercised";
  EXPECT_EQ(t.rx_packets, t.tx_packets + t.tx_dropped + t.rule_drops + t.no_match + t.bad_port);
  EXPECT_EQ(t.pipeline.packets, static_cast<uint64_t>(kPackets));
  EXPECT_GT(t.busy_cycles, 0u);
  EXPECT_EQ(t.generation, 1u);
  ASSERT_EQ(s.ports.size(), 3u);
  for (const PortCounters& pc : s.ports) {
    EXPECT_EQ(pc.tx_packets, want_per_port[static_cast<int>(pc.number)]) << pc.number;
    EXPECT_EQ(pc.dev_opackets, pc.tx_packets) << pc.number;
  }
  EXPECT_EQ(s.ports[0].dev_ipackets, static_cast<uint64_t>(kPackets));
  // Stopped: no more batches.
  EXPECT_EQ((*dp)->ApplyBatch(ops).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(DpdkDataplaneTest, SetupErrorsSayWhatFailed) {
  RingPort p = RingPort::Make("err1", 1, 1);
  SetupStage stage;
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p.name)};
  o.pmd_lcores = {1};

  DpdkDataplaneOptions bad = o;
  bad.ports.push_back(Port(2, "net_bogus0"));
  auto r = DpdkDataplane::Create(bad, &stage);
  EXPECT_EQ(stage, SetupStage::kPort);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("cannot probe device \"net_bogus0\""));

  bad = o;
  bad.pmd_lcores = {7};
  r = DpdkDataplane::Create(bad, &stage);
  EXPECT_EQ(stage, SetupStage::kLcore);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("lcore 7 is not enabled"));

  bad.pmd_lcores = {0};
  r = DpdkDataplane::Create(bad, &stage);
  EXPECT_EQ(stage, SetupStage::kLcore);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("main (control) lcore"));

  bad = o;
  bad.pmd_lcores = {1, 2};  // the ring port has a single tx queue
  r = DpdkDataplane::Create(bad, &stage);
  EXPECT_EQ(stage, SetupStage::kPort);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("one per PMD is needed (2)"));

  // A net_pcap device reads each rx_pcap= input as one rx queue: with fewer
  // rx_queues the rest would never be read.
  {
    const std::string pcap =
        std::filesystem::temp_directory_path() / absl::StrCat("fc_rxq_", getpid(), ".pcap");
    WritePcap(pcap, {});
    bad = o;
    PortOptions two = Port(2, absl::StrCat("net_pcap_rxq", getpid()));
    two.devargs = absl::StrCat("rx_pcap=", pcap, ",rx_pcap=", pcap, ",tx_pcap=/dev/null");
    bad.ports.push_back(two);
    r = DpdkDataplane::Create(bad, &stage);
    EXPECT_EQ(stage, SetupStage::kPort);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("the device has 2 rx inputs (rx_pcap=/rx_iface=/iface=) but rx_queues "
                          "is 1: the inputs past it would never be read; set rx_queues: 2"));

    // infinite_rx keeps the whole pcap in the pool: a pool too small for it
    // is a mempool error naming mempool.mbufs (not "rx queue setup: Invalid
    // argument").
    WritePcap(pcap, std::vector<std::vector<uint8_t>>(3000, PacketBuilder()
                                                               .Eth(0x020000000001, 0x020000000002)
                                                               .Ipv4(0x0a000001, 0x0a000002)
                                                               .Udp(1, 2)
                                                               .PadTo(60)
                                                               .Build()));
    bad = o;
    bad.mbufs = 2500;
    PortOptions inf = Port(2, absl::StrCat("net_pcap_inf", getpid()));
    inf.devargs = absl::StrCat("rx_pcap=", pcap, ",tx_pcap=/dev/null,infinite_rx=1");
    bad.ports.push_back(inf);
    r = DpdkDataplane::Create(bad, &stage);
    EXPECT_EQ(stage, SetupStage::kMempool);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("(net_pcap, infinite_rx=1) keeps the whole pcap in the pool"));
    EXPECT_THAT(std::string(r.status().message()), ::testing::StartsWith("mempool.mbufs: "));
    std::filesystem::remove(pcap);
  }

  bad = o;
  bad.mbufs = 1u << 26;  // far more than -m 256 holds
  r = DpdkDataplane::Create(bad, &stage);
  EXPECT_EQ(stage, SetupStage::kMempool);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("mempool.mbufs"));

  bad = o;
  bad.burst = 33;
  r = DpdkDataplane::Create(bad, &stage);
  EXPECT_EQ(stage, SetupStage::kOptions);

  // A running dataplane holds its lcore: a second one cannot take it.
  auto a = DpdkDataplane::Create(o, &stage);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE((*a)->Start().ok());
  RingPort q = RingPort::Make("err2", 1, 1);
  DpdkDataplaneOptions o2 = o;
  o2.ports = {Port(1, q.name)};
  r = DpdkDataplane::Create(o2, &stage);
  EXPECT_EQ(stage, SetupStage::kLcore);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("lcore 1 is already in use"));
  a->reset();  // stops; the lcore is free again
  r = DpdkDataplane::Create(o2, &stage);
  EXPECT_TRUE(r.ok()) << r.status();
}

// An idle PMD's counters: its sleeps are idle time (busy + idle covers the
// run), and a rule change it installs without traffic is counted.
TEST(DpdkDataplaneTest, IdlePmdCountsItsSleepAndItsRevalidations) {
  RingPort p = RingPort::Make("idle1", 1, 1);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p.name)};
  o.pmd_lcores = {1};
  o.idle_sleep_us = 2000;  // most of the PMD's time is asleep
  auto dp = DpdkDataplane::Create(o);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE((*dp)->Start().ok());
  // The PMD's first iteration installs the (empty) table: one revalidation.
  WaitFor([&] { return (*dp)->Stats().pmds[0].pipeline.revalidations >= 1; }, 2);
  const DataplaneStats s0 = (*dp)->Stats();
  const uint64_t tsc0 = rte_rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(Ipv4DstRule(1, 1, 0, 0, Action::Drop()))}).ok());
  const DataplaneStats s1 = (*dp)->Stats();
  const uint64_t tsc1 = rte_rdtsc();
  const PmdCounters& a = s0.pmds[0];
  const PmdCounters& b = s1.pmds[0];
  EXPECT_EQ(b.rx_packets, 0u);
  const double counted =
      static_cast<double>((b.busy_cycles + b.idle_cycles) - (a.busy_cycles + a.idle_cycles));
  // Within one sleep of the wall time (sleeping was once counted as neither).
  EXPECT_GT(counted, 0.8 * static_cast<double>(tsc1 - tsc0)) << counted << " of " << tsc1 - tsc0;
  EXPECT_LT(counted, 1.2 * static_cast<double>(tsc1 - tsc0)) << counted << " of " << tsc1 - tsc0;
  // The batch's revalidation shows without a packet received after it.
  EXPECT_EQ(b.generation, 1u);
  EXPECT_EQ(b.pipeline.revalidations, a.pipeline.revalidations + 1);
}

}  // namespace
}  // namespace flowclass
