// In-process tests of DpdkDataplane on net_ring ports (testing/ring_ports.h):
// rule batches under traffic (update storm, group commit, DeleteAll) and
// what the PMDs forward at each acknowledged generation.  One EAL per process.
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

using dpdk_testing::DrainRing;
using dpdk_testing::EalEnvironment;
using dpdk_testing::Expected;
using dpdk_testing::MakePacket;
using dpdk_testing::Port;
using dpdk_testing::RingPort;
using dpdk_testing::TagOf;
using dpdk_testing::TotalRx;
using dpdk_testing::UdpFlow;
using dpdk_testing::WaitFor;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kStormBatches = 100;
constexpr int kMaxStormPackets = 30000;
#else
constexpr int kStormBatches = 150;
constexpr int kMaxStormPackets = 200000;
#endif

const auto* const kEnv =
    ::testing::AddGlobalTestEnvironment(new EalEnvironment("dpdk_dataplane_rules_test"));

// While traffic runs on two PMDs, >= 100 batches of inserts, deletes and
// replaces of overlapping rules; one flow's output port flips with every
// batch.  Checks: a probe of that flow sent after each ack leaves by the port
// of the acked generation; every other packet follows the rule set of a
// generation between the last ack before it was sent and the one after it was
// received; nothing is unaccounted for; the PMDs' counters add up.
TEST(DpdkDataplaneTest, UpdateStormAcksMeanNewRulesEverywhere) {
  RingPort p1 = RingPort::Make("st1", 2, 2);
  RingPort p2 = RingPort::Make("st2", 1, 2);
  RingPort p3 = RingPort::Make("st3", 1, 2);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, p1.name, true, 2),
             Port(2, p2.name, false),
             Port(3, p3.name, false)};
  o.pmd_lcores = {1, 2};
  o.idle_sleep_us = 10;
  auto dpr = DpdkDataplane::Create(o);
  ASSERT_TRUE(dpr.ok()) << dpr.status();
  DpdkDataplane& dp = **dpr;
  EXPECT_EQ(dp.RxQueuesOf(0), (std::vector<std::pair<uint32_t, int>>{{1, 0}}));
  EXPECT_EQ(dp.RxQueuesOf(1), (std::vector<std::pair<uint32_t, int>>{{1, 1}}));

  // The flipping flow and its rule (id 1, highest priority).
  const Flow flip_flow = UdpFlow(0xc0a80001, 0x0a03ff01, 4000, 53);
  auto flip_rule = [](int k) {
    return Ipv4DstRule(1, 1000, 0x0a03ff01, 32, Action::Output(k % 2 ? 3 : 2));
  };
  std::map<uint64_t, Rule> mirror;  // the test's own copy of the rule set
  mirror[1] = flip_rule(0);
  // generation -> rule set
  std::vector<std::vector<Rule>> by_gen(1);  // generation 0: empty
  auto snapshot = [&] {
    std::vector<Rule> v;
    for (auto& [id, r] : mirror) v.push_back(r);
    return v;
  };
  // A catch-all that is never touched, so most traffic is forwarded.
  mirror[2] = Ipv4DstRule(2, 0, 0x0a000000, 8, Action::Output(1));
  auto r0 = dp.ApplyBatch({RuleOp::Insert(mirror[1]), RuleOp::Insert(mirror[2])});
  ASSERT_TRUE(r0.ok());
  by_gen.push_back(snapshot());
  ASSERT_TRUE(dp.Start().ok());

  std::mt19937 rng(42);
  std::vector<Flow> flows = {flip_flow};
  for (int i = 0; i < 63; ++i)
    flows.push_back(UdpFlow(0xc0a80000 | (rng() & 0xffff), 0x0a000000 | (rng() & 0x3ffff),
                            static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng() % 4096)));

  struct Sent {
    uint32_t flow;
    uint64_t gen_lo;
  };
  std::vector<Sent> sent(kMaxStormPackets);
  std::vector<int> got_port(kMaxStormPackets, 0);     // 0: not received
  std::vector<uint64_t> got_gen(kMaxStormPackets, 0);  // acked gen at reception
  std::atomic<uint64_t> n_sent{0}, n_got{0};
  std::atomic<uint64_t> acked{1};
  std::atomic<bool> stop_inject{false}, stop_drain{false};

  auto send = [&](uint32_t flow_idx, int rxq) -> bool {
    const uint64_t tag = n_sent.load();
    if (tag >= static_cast<uint64_t>(kMaxStormPackets)) return false;
    sent[tag] = {flow_idx, acked.load(std::memory_order_acquire)};
    rte_mbuf* m = MakePacket(flows[flow_idx], tag);
    if (!m) return false;
    if (rte_ring_enqueue(p1.rx[static_cast<size_t>(rxq)], m) != 0) {
      rte_pktmbuf_free(m);
      return false;
    }
    n_sent.store(tag + 1);
    return true;
  };
  std::mutex send_mu;  // injector and probes share the tag sequence
  std::thread injector([&] {
    std::mt19937 r(1);
    while (!stop_inject.load()) {
      {
        std::lock_guard<std::mutex> l(send_mu);
        // Leave room in the registry for the probes.
        if (n_sent.load() + 16 + 4 * kStormBatches > static_cast<uint64_t>(kMaxStormPackets))
          break;
        for (int i = 0; i < 16; ++i)
          send(static_cast<uint32_t>(r() % flows.size()), static_cast<int>(r() % 2));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  std::thread drainer([&] {
    rte_ring* rings[3] = {p1.tx, p2.tx, p3.tx};
    void* objs[64];
    while (true) {
      const bool last = stop_drain.load();
      unsigned total = 0;
      for (int p = 0; p < 3; ++p) {
        const unsigned n = rte_ring_dequeue_burst(rings[p], objs, 64, nullptr);
        total += n;
        const uint64_t gen_now = acked.load(std::memory_order_acquire);
        for (unsigned i = 0; i < n; ++i) {
          rte_mbuf* m = static_cast<rte_mbuf*>(objs[i]);
          const uint64_t tag = TagOf(m);
          if (tag < static_cast<uint64_t>(kMaxStormPackets)) {
            got_gen[tag] = gen_now;
            got_port[tag] = p + 1;
          }
          rte_pktmbuf_free(m);
        }
        n_got.fetch_add(n, std::memory_order_release);
      }
      if (last && total == 0) break;
      if (total == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });

  uint64_t next_id = 3;
  int probe_failures = 0;
  for (int k = 1; k <= kStormBatches; ++k) {
    std::vector<RuleOp> ops = {RuleOp::Replace(flip_rule(k))};
    mirror[1] = flip_rule(k);
    const int extra = static_cast<int>(rng() % 4);
    for (int e = 0; e < extra; ++e) {
      const int what = static_cast<int>(rng() % 3);
      const Action a = rng() % 4 == 0 ? Action::Drop()
                                      : Action::Output(static_cast<uint32_t>(1 + rng() % 3));
      const uint32_t dst = 0x0a000000 | (rng() & 0x3ffff);
      const int len = 14 + static_cast<int>(rng() % 11);
      const uint32_t prio = 1 + rng() % 500;
      if (what == 0 || mirror.size() < 4) {
        Rule r = Ipv4DstRule(next_id++, prio, dst, len, a);
        if (rng() % 3 == 0) r.match.tp_dst = {100, static_cast<uint16_t>(100 + rng() % 3000)};
        mirror[r.id] = r;
        ops.push_back(RuleOp::Insert(r));
      } else {
        // A random existing rule other than the flip rule and the catch-all.
        auto it = std::next(mirror.begin(), 2 + static_cast<long>(rng() % (mirror.size() - 2)));
        const uint64_t id = it->first;
        bool touched = false;
        for (const RuleOp& op : ops)
          touched |= (op.kind == RuleOp::Kind::kDelete ? op.id : op.rule.id) == id;
        if (touched) continue;
        if (what == 1) {
          mirror.erase(it);
          ops.push_back(RuleOp::Delete(id));
        } else {
          Rule r = Ipv4DstRule(id, prio, dst, len, a);
          mirror[id] = r;
          ops.push_back(RuleOp::Replace(r));
        }
      }
    }
    auto res = dp.ApplyBatch(ops);
    ASSERT_TRUE(res.ok()) << "batch " << k << ": " << res.status();
    ASSERT_EQ(res->generation, static_cast<uint64_t>(k + 1));
    by_gen.push_back(snapshot());
    acked.store(res->generation, std::memory_order_release);
    // The ack means every PMD already installed this generation.
    for (const PmdCounters& p : dp.Stats().pmds)
      EXPECT_GE(p.generation, res->generation) << "pmd " << p.pmd << " after ack " << k;

    // Probes of the flipping flow, one per rx queue, sent after the ack.
    uint64_t probe_tags[2];
    {
      std::lock_guard<std::mutex> l(send_mu);
      for (int q = 0; q < 2; ++q) {
        probe_tags[q] = n_sent.load();
        while (!send(0, q)) std::this_thread::yield();
      }
    }
    const int want = k % 2 ? 3 : 2;
    for (uint64_t tag : probe_tags) {
      const bool arrived = WaitFor([&] {
        return n_got.load(std::memory_order_acquire) > 0 && got_port[tag] != 0;
      }, 10);
      if (!arrived || got_port[tag] != want) {
        ++probe_failures;
        ADD_FAILURE() << "batch " << k << ": probe " << tag << " went to port "
                      << got_port[tag] << ", want " << want;
      }
    }
    if (probe_failures > 5) break;
    // Let background traffic run under this generation for a while.
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  stop_inject = true;
  injector.join();
  const uint64_t total_sent = n_sent.load();
  ASSERT_TRUE(WaitFor([&] { return TotalRx(dp) == total_sent; }, 20))
      << "sent " << total_sent << "\n" << dp.Stats().ToString();
  dp.Stop();
  const DataplaneStats s = dp.Stats();
  const PmdCounters t = s.Total();
  ASSERT_TRUE(WaitFor([&] { return n_got.load() == t.tx_packets; }, 10));
  stop_drain = true;
  drainer.join();

  // Accounting: every packet sent was received by a PMD and either sent,
  // dropped by a rule, unmatched, or refused by a tx ring.
  EXPECT_GT(total_sent, static_cast<uint64_t>(kStormBatches) * 2);
  EXPECT_EQ(t.rx_packets, total_sent);
  EXPECT_EQ(t.rx_packets, t.tx_packets + t.tx_dropped + t.rule_drops + t.no_match + t.bad_port);
  EXPECT_EQ(t.bad_port, 0u);
  EXPECT_EQ(n_got.load(), t.tx_packets);
  ASSERT_EQ(s.pmds.size(), 2u);
  EXPECT_GT(s.pmds[0].rx_packets, 0u);
  EXPECT_GT(s.pmds[1].rx_packets, 0u);
  EXPECT_EQ(s.pmds[0].rx_packets + s.pmds[1].rx_packets, total_sent);
  uint64_t port_tx = 0;
  for (const PortCounters& pc : s.ports) port_tx += pc.tx_packets;
  EXPECT_EQ(port_tx, t.tx_packets);
  for (const PmdCounters& p : s.pmds) EXPECT_EQ(p.generation, by_gen.size() - 1);

  // Every packet followed some generation between its send and receive.
  const uint64_t last_gen = by_gen.size() - 1;
  const std::vector<ReferenceClassifier> reference(by_gen.begin(), by_gen.end());
  uint64_t dropped_seen = 0, wrong = 0;
  for (uint64_t tag = 0; tag < total_sent; ++tag) {
    const Sent& sd = sent[tag];
    const uint64_t hi = got_port[tag] ? std::min(got_gen[tag] + 1, last_gen) : last_gen;
    bool ok = false;
    for (uint64_t g = sd.gen_lo; g <= hi && !ok; ++g) {
      const int e = Expected(reference[g], flows[sd.flow], 1);
      ok = got_port[tag] ? e == got_port[tag] : e < 0;
    }
    if (!got_port[tag]) ++dropped_seen;
    if (!ok && ++wrong <= 5)
      ADD_FAILURE() << "packet " << tag << " (flow " << sd.flow << ", sent after gen "
                    << sd.gen_lo << ") went to port " << got_port[tag];
  }
  EXPECT_EQ(wrong, 0u);
  std::printf("storm: %d batches, %llu packets (pmd0 %llu, pmd1 %llu), %llu not forwarded\n",
              static_cast<int>(last_gen - 1), static_cast<unsigned long long>(total_sent),
              static_cast<unsigned long long>(s.pmds[0].rx_packets),
              static_cast<unsigned long long>(s.pmds[1].rx_packets),
              static_cast<unsigned long long>(dropped_seen));
  EXPECT_EQ(dropped_seen, t.rule_drops + t.no_match + t.tx_dropped);
}

// Group commit: batches applied in order, each atomically, published once;
// the one table, read by the PMD while the next groups are written, stays
// exact over further groups (their deletes unlinked after each grace period).  Packets follow the last accepted batch
// as soon as ApplyBatches returns.
TEST(DpdkDataplaneTest, GroupCommitAppliesEachBatchAndPublishesOnce) {
  RingPort in = RingPort::Make("grp1", 1, 1);
  RingPort out2 = RingPort::Make("grp2", 1, 1);
  RingPort out3 = RingPort::Make("grp3", 1, 1);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, in.name), Port(2, out2.name, false), Port(3, out3.name, false)};
  o.pmd_lcores = {3};
  auto dp = DpdkDataplane::Create(o);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE((*dp)->Start().ok());
  const uint32_t dst = 0x0a000001;
  const Rule to2 = Ipv4DstRule(1, 10, dst, 32, Action::Output(2));
  Rule to3 = to2;
  to3.action = Action::Output(3);
  // Ports the next 50 packets of the flow leave by.
  auto send = [&] {
    const int kPackets = 50;
    for (int i = 0; i < kPackets; ++i) {
      rte_mbuf* m = MakePacket(UdpFlow(0x0b000001, dst, 1000, 53), static_cast<uint64_t>(i));
      EXPECT_NE(m, nullptr);
      EXPECT_EQ(rte_ring_enqueue(in.rx[0], m), 0);
    }
    std::vector<std::pair<uint32_t, uint64_t>> got;
    EXPECT_TRUE(WaitFor([&] {
      DrainRing(out2.tx, 2, &got);
      DrainRing(out3.tx, 3, &got);
      return got.size() == static_cast<size_t>(kPackets);
    }, 5));
    std::set<uint32_t> ports;
    for (const auto& pt : got) ports.insert(pt.first);
    return ports;
  };
  // The flow is cached (megaflow, EMC) under rule 1 -> port 2 first.
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(to2)}).ok());
  EXPECT_EQ(send(), std::set<uint32_t>({2}));
  // The group: a rejected batch, an unrelated insert, the replace that
  // sends the flow to port 3 (its change set is the group's second: the
  // PMD must revalidate against all of them merged), an empty batch.
  const std::vector<RuleOp> b1 = {RuleOp::Insert(Ipv4DstRule(5, 1, 0, 0, Action::Drop())),
                                  RuleOp::Delete(77)};  // rejected: unknown id
  const std::vector<RuleOp> b2 = {RuleOp::Insert(Ipv4DstRule(6, 2, 0, 8, Action::Drop()))};
  const std::vector<RuleOp> b3 = {RuleOp::Replace(to3)};
  const std::vector<RuleOp> b4 = {};
  const absl::Span<const RuleOp> group[] = {b1, b2, b3, b4};
  const auto results = (*dp)->ApplyBatches(group);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  EXPECT_EQ(results[1]->generation, 2u);
  ASSERT_TRUE(results[2].ok()) << results[2].status();
  EXPECT_EQ(results[2]->generation, 3u);
  EXPECT_EQ(results[2]->replaced, 1u);
  ASSERT_TRUE(results[3].ok());
  EXPECT_EQ(results[3]->generation, 3u);  // empty: the generation so far
  EXPECT_EQ((*dp)->generation(), 3u);
  // Already installed on the PMD: the cached flow now goes out of port 3.
  EXPECT_EQ((*dp)->Stats().pmds[0].generation, 3u);
  EXPECT_EQ(send(), std::set<uint32_t>({3}));
  // Trace asks the PMD: the flow is cached there (under its new megaflow);
  // a flow it never saw would be an upcall.  Tracing counts nothing.
  Flow seen = UdpFlow(0x0b000001, dst, 1000, 53);
  seen.Set(Field::kInPort, 1);
  const uint64_t rx_before = TotalRx(**dp);
  auto tr = (*dp)->Trace(FlowKey::FromFlow(seen));
  ASSERT_TRUE(tr.ok()) << tr.status();
  EXPECT_NE(tr->layer, "upcall");
  EXPECT_NE(tr->layer, "slow_path");
  EXPECT_EQ(tr->pmd, 0);
  ASSERT_TRUE(tr->has_megaflow);
  EXPECT_EQ(tr->megaflow_mask.Get(Field::kIpv4Dst), 0xffffffffu);
  EXPECT_EQ(tr->megaflow_value.Get(Field::kIpv4Dst), dst);
  EXPECT_EQ(tr->rule.action, Action::Output(3));
  Flow unseen = UdpFlow(0x0b000001, dst + 1, 1000, 53);
  unseen.Set(Field::kInPort, 1);
  tr = (*dp)->Trace(FlowKey::FromFlow(unseen));
  ASSERT_TRUE(tr.ok()) << tr.status();
  EXPECT_EQ(tr->layer, "upcall");
  EXPECT_EQ(tr->pmd, 0);
  EXPECT_FALSE(tr->has_megaflow);
  EXPECT_EQ((*dp)->Stats().pmds[0].pipeline.packets, (*dp)->Stats().pmds[0].rx_packets);
  EXPECT_EQ(TotalRx(**dp), rx_before);

  // Two more groups: each deletes a rule the group before inserted (unlinked
  // only after the publication, then freed after the next).
  const std::vector<RuleOp> c0 = {RuleOp::Delete(6)};
  const std::vector<RuleOp> c1 = {RuleOp::Insert(Ipv4DstRule(7, 3, 0, 16, Action::Drop()))};
  const absl::Span<const RuleOp> group2[] = {c0, c1};
  for (const auto& r : (*dp)->ApplyBatches(group2)) ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<RuleOp> d0 = {RuleOp::Delete(7)};
  const absl::Span<const RuleOp> group3[] = {d0};
  for (const auto& r : (*dp)->ApplyBatches(group3)) ASSERT_TRUE(r.ok()) << r.status();
  // A group whose middle batch changes nothing (a cookie no rule carries):
  // it keeps the generation and publishes nothing.
  const std::vector<RuleOp> e0 = {RuleOp::DeleteByCookie(0xdead)};
  const absl::Span<const RuleOp> group4[] = {e0};
  const auto noop = (*dp)->ApplyBatches(group4);
  ASSERT_TRUE(noop[0].ok()) << noop[0].status();
  EXPECT_EQ(noop[0]->generation, 6u);
  EXPECT_EQ((*dp)->generation(), 6u);
  // Two more single batches: an insert, then its delete (unlinked after the
  // publication) with a delete by cookie.
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(Ipv4DstRule(8, 4, 0, 24, Action::Drop()))}).ok());
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::DeleteByCookie(0xbeef), RuleOp::Delete(8)}).ok());
  std::vector<uint64_t> ids;
  for (const Rule& r : (*dp)->ListRules()) ids.push_back(r.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, std::vector<uint64_t>({1}));
  EXPECT_EQ((*dp)->generation(), 8u);
  auto one = (*dp)->GetRule(1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->action, Action::Output(3));
  // What the rule changes cost the PMD reaches Stats() (through the PMD's
  // counter mirrors): it installed each group and upcalled its flows.
  const PmdStats cost = (*dp)->Stats().pmds[0].pipeline;
  EXPECT_GT(cost.revalidation_cycles, 0u);
  EXPECT_GT(cost.upcall_cycles, 0u);
  EXPECT_LE(cost.upcall_cycles, cost.cycles);
  // Every counter of the table goes through the mirror: once stopped, the
  // PMD's last publication is its last snapshot's counters.
  (*dp)->Stop();
  const PmdCounters last = (*dp)->Stats().pmds[0];
  ASSERT_TRUE(last.has_snapshot);
  for (const PmdCounterInfo& c : kPmdCounters)
    EXPECT_EQ(last.pipeline.*c.field, last.snapshot.stats.*c.field) << c.name;
  EXPECT_GT(last.pipeline.megaflows_rechecked, 0u);
}

// DeleteAll publishes an empty table in one step (no per-rule batch, no
// change set): the flows the PMD has cached must stop matching at the ack,
// and the new table must serve the next batches.
TEST(DpdkDataplaneTest, DeleteAllPublishesAnEmptyTable) {
  RingPort in = RingPort::Make("dall1", 1, 1);
  RingPort out2 = RingPort::Make("dall2", 1, 1);
  DpdkDataplaneOptions o;
  o.ports = {Port(1, in.name), Port(2, out2.name, false)};
  o.pmd_lcores = {3};
  auto dp = DpdkDataplane::Create(o);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE((*dp)->Start().ok());
  const uint32_t dst = 0x0a000001;
  constexpr int kPackets = 40;
  // Sends kPackets of the flow; returns how many left by port 2 once the
  // PMD has received them all (waiting up to 5 s for `expect` of them, as
  // the PMD counts a packet received before it transmits it).
  auto send = [&](size_t expect) {
    const uint64_t rx0 = TotalRx(**dp);
    for (int i = 0; i < kPackets; ++i) {
      rte_mbuf* m = MakePacket(UdpFlow(0x0b000001, dst, 1000, 53), static_cast<uint64_t>(i));
      EXPECT_NE(m, nullptr);
      EXPECT_EQ(rte_ring_enqueue(in.rx[0], m), 0);
    }
    EXPECT_TRUE(WaitFor([&] { return TotalRx(**dp) == rx0 + kPackets; }, 5));
    std::vector<std::pair<uint32_t, uint64_t>> got;
    WaitFor([&] {
      DrainRing(out2.tx, 2, &got);
      return got.size() >= expect;
    }, expect > 0 ? 5 : 0.2);
    DrainRing(out2.tx, 2, &got);
    return got.size();
  };
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(Ipv4DstRule(1, 10, dst, 32, Action::Output(2))),
                                 RuleOp::Insert(Ipv4DstRule(2, 5, 0, 0, Action::Output(2)))})
                  .ok());
  EXPECT_EQ(send(kPackets), static_cast<size_t>(kPackets));  // cached under rule 1
  // A batch that does not concern the flow (published with a change set,
  // which the empty table's publication must not carry).
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(Ipv4DstRule(4, 20, dst + 1, 32, Action::Drop()))})
                  .ok());
  EXPECT_EQ(send(kPackets), static_cast<size_t>(kPackets));

  auto all = (*dp)->DeleteAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->deleted, 3u);
  EXPECT_EQ(all->rules, 0u);
  EXPECT_EQ(all->generation, 3u);
  EXPECT_EQ((*dp)->generation(), 3u);
  EXPECT_EQ((*dp)->Stats().pmds[0].generation, 3u);  // installed at the ack
  EXPECT_TRUE((*dp)->ListRules().empty());
  EXPECT_EQ((*dp)->GetRule(1).status().code(), absl::StatusCode::kNotFound);
  const uint64_t no_match0 = (*dp)->Stats().Total().no_match;
  EXPECT_EQ(send(0), 0u);
  // (The PMD counts no-match drops just after the packets received.)
  EXPECT_TRUE(WaitFor([&] { return (*dp)->Stats().Total().no_match == no_match0 + kPackets; }, 5))
      << (*dp)->Stats().Total().no_match << " no-match drops, want " << no_match0 + kPackets;

  // Nothing left to delete: nothing changes, as for an empty batch.
  all = (*dp)->DeleteAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->deleted, 0u);
  EXPECT_EQ(all->generation, 3u);

  // The ids are free again, and the new table takes the batches that follow.
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(Ipv4DstRule(1, 10, dst, 32, Action::Output(2)))}).ok());
  EXPECT_EQ(send(kPackets), static_cast<size_t>(kPackets));
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Insert(Ipv4DstRule(3, 1, 0, 8, Action::Drop()))}).ok());
  ASSERT_TRUE((*dp)->ApplyBatch({RuleOp::Delete(3)}).ok());
  EXPECT_EQ((*dp)->generation(), 6u);
  EXPECT_EQ((*dp)->Stats().rules.rules, 1u);
  ASSERT_EQ((*dp)->ListRules().size(), 1u);
  EXPECT_EQ((*dp)->ListRules()[0].id, 1u);
  EXPECT_EQ(send(kPackets), static_cast<size_t>(kPackets));
  const PmdCounters t = (*dp)->Stats().Total();
  EXPECT_EQ(t.rx_packets, t.tx_packets + t.tx_dropped + t.rule_drops + t.no_match + t.bad_port);
  (*dp)->Stop();
  EXPECT_EQ((*dp)->DeleteAll().status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace flowclass
