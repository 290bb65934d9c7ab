// pmd.cc — the PMD loop: the dataplane's only per-packet code.
//
// Runs on its EAL worker lcore from Start() until Stop() (see the PMD loop
// contract in dpdk_dataplane.h and the mailboxes in
// internal/dpdk_dataplane_impl.h).  Allocates nothing, takes no lock (but
// snap_mu once, at exit), logs nothing, throws nothing; the mailbox answers
// (a snapshot or a trace, on request) are control-path work done between
// bursts.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include <array>

#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/dpdk/internal/dpdk_dataplane_impl.h"
#include "dataplane/dpdk/rule_publisher.h"
#include "dataplane/flow/packet_parser.h"

namespace flowclass {

using dpdk_internal::At;
using dpdk_internal::Bump;
using dpdk_internal::kDumpVisitPerStep;
using dpdk_internal::PublishPipelineCounters;

int DpdkDataplane::Impl::PmdMain(void* arg) {
  Pmd* pmd = static_cast<Pmd*>(arg);
  pmd->dp->PmdLoop(*pmd);
  return 0;
}

void DpdkDataplane::Impl::PmdLoop(Pmd& pmd) {
  if (acl()) {
    PmdLoopOf<true>(pmd);
  } else {
    PmdLoopOf<false>(pmd);
  }
}

namespace {

// The acl pipeline's counters in the PmdStats the counter block mirrors:
// packets, emc_hits, acl_hits, acl_misses (= no_match), revalidations (the
// classifiers installed) and the cycles the PMD timed around ProcessBurst.
void AclToPmdStats(const AclPipelineStats& a, uint64_t cycles, PmdStats* s) {
  s->packets = a.packets;
  s->emc_hits = a.emc_hits;
  s->acl_hits = a.acl_hits;
  s->acl_misses = a.acl_misses;
  s->no_match = a.acl_misses;
  s->revalidations = a.generation;
  s->cycles = cycles;
}

}  // namespace

// kAcl: the PMD runs pmd.acl_pipeline (pmd.pipeline is null); otherwise the
// megaflow pmd.pipeline.  The loop around the pipeline is the same.
template <bool kAcl>
void DpdkDataplane::Impl::PmdLoopOf(Pmd& pmd) {
  const int burst = opts.burst;
  const uint16_t txq = static_cast<uint16_t>(pmd.index);
  PmdCounterBlock& c = *pmd.counters;
  Pipeline* const mf = pmd.pipeline.get();
  AclPipeline* const acl_pl = pmd.acl_pipeline.get();
  PmdStats acl_stats;        // kAcl: the mirror's source
  uint64_t acl_cycles = 0;   // kAcl: TSC cycles in AclPipeline::ProcessBurst
  const int8_t* port_index = port_index_by_number.data();
  const int n_ports = static_cast<int>(ports.size());
  std::array<uint16_t, kMaxDataplanePorts> eth_of{};
  for (int i = 0; i < n_ports; ++i) eth_of[i] = ports[i].eth_port;

  rte_mbuf* rx[kMaxBurst];
  rte_mbuf* drops[kMaxBurst];
  rte_mbuf* out[kMaxDataplanePorts][kMaxBurst];
  int out_n[kMaxDataplanePorts] = {};
  int used[kMaxDataplanePorts];
  const uint8_t* frames[kMaxBurst];
  uint16_t lens[kMaxBurst];
  FlowKey keys[kMaxBurst];
  Verdict verdicts[kMaxBurst];

  const PublishedTable* current = nullptr;
  uint64_t current_generation = 0;
  SnapshotMailbox& box = *pmd.mailbox;
  uint64_t snap_served = box.req.load(std::memory_order_relaxed);
  auto snapshot = [&]() -> PipelineSnapshot {
    if constexpr (kAcl) {
      PipelineSnapshot s;  // no caches but the EMC, no megaflows
      AclToPmdStats(acl_pl->stats(), acl_cycles, &s.stats);
      s.emc_entries = acl_pl->config().emc ? acl_pl->config().emc_entries : 0;
      return s;
    } else {
      return mf->Snapshot();
    }
  };
  auto answer = [&](uint64_t r) {  // control path: allocates
    if constexpr (kAcl) {
      if (box.want_dump) {  // no megaflows
        box.dump_n = 0;
        box.dump_cursor = 0;
      } else if (box.want_trace) {
        box.trace = PipelineTrace{};
        box.trace.layer = "acl";
      } else {
        box.snap = snapshot();
      }
    } else {
      mf->DrainRetiredHits();  // expired megaflows' hits (see Pipeline)
      if (box.want_dump) {  // bounded: kDumpVisitPerStep megaflows at most
        box.dump_n = mf->DumpMegaflows(box.dump_filter, &box.dump_cursor, kDumpVisitPerStep,
                                       box.dump.data(), static_cast<uint32_t>(box.dump.size()));
      } else if (box.want_trace) {
        box.trace = mf->Trace(box.trace_key);
      } else {
        box.snap = snapshot();
      }
    }
    snap_served = r;
    box.done.store(r, std::memory_order_release);
  };
  // The pipeline's counters as readers see them: after each busy iteration,
  // after a rule change (an idle PMD revalidates too) and at the end.
  auto publish_pipeline_counters = [&] {
    if constexpr (kAcl) {
      AclToPmdStats(acl_pl->stats(), acl_cycles, &acl_stats);
      PublishPipelineCounters(acl_stats, c);
    } else {
      PublishPipelineCounters(mf->stats(), c);
    }
  };
  box.live.store(true, std::memory_order_release);
  CounterLine* rxq_lines = pmd.rxq_counters.get();
  publisher->Online(pmd.index);
  uint64_t knobs_seen = 0;
  // One TSC read per iteration: its end is the next one's start.
  uint64_t t0 = rte_rdtsc();
  while (!stop.load(std::memory_order_relaxed)) {
    // Run-time pipeline settings (see KnobsMailbox).
    if (const uint64_t kv = knobs_version.load(std::memory_order_acquire);
        kv != knobs_seen) {
      if constexpr (!kAcl) {  // the acl pipeline has none of these
        mf->SetEmcInsertInvProb(knobs.emc_insert_inv_prob);
        mf->SetSmcMode(knobs.smc);
        mf->SetCdMode(knobs.cd);
        mf->SetRankingIntervalMs(knobs.ranking_interval_ms);
        mf->SetMegaflowMaxIdleMs(knobs.megaflow_max_idle_ms);
        mf->SetMaxMegaflows(knobs.max_megaflows);
        mf->SetMaxSubtablesPerPort(knobs.max_subtables_per_port);
        mf->SetUpcallLimit(knobs.upcall_rate, knobs.upcall_burst, knobs.upcall_limit_action);
        mf->SetRareMaskSubtables(knobs.rare_mask_subtables);
        mf->SetLookupPriorities(knobs.lookup);
      }
      knobs_seen = kv;
      pmd.knobs_box->ack.store(kv, std::memory_order_release);
    }
    // Metrics and Trace: answer a mailbox request (see SnapshotMailbox).
    if (const uint64_t r = box.req.load(std::memory_order_acquire);
        r != snap_served)
      answer(r);
    // Quiescent point: install the published table, then report it.
    const PublishedTable* v = publisher->Load();
    if (v != current || v->generation != current_generation) {
      // The change set describes the step from base_generation (one batch,
      // or a group commit of several): use it only when this PMD had exactly
      // that generation installed.
      if constexpr (kAcl) {
        acl_pl->SetClassifier(v->acl);  // invalidates the EMC
      } else {
        const bool one_step = current != nullptr && v->has_changes &&
                              v->base_generation == current_generation;
        mf->SetRuleTable(v->table, one_step ? &v->changes : nullptr, v->generation);
      }
      publish_pipeline_counters();  // the revalidation's counters
      current = v;
      current_generation = v->generation;
      // Counter first: Quiescent's release store publishes it, so a Stats()
      // after the ack already shows the new generation.
      At(c, PmdLoopCounter::kGeneration).store(v->generation, std::memory_order_relaxed);
      publisher->Quiescent(pmd.index, v->generation);
    }
    const int retries = tx_retries.load(std::memory_order_relaxed);
    uint64_t got = 0;
    for (size_t qi = 0; qi < pmd.rxq.size(); ++qi) {
      const RxQueue& q = pmd.rxq[qi];
      const uint16_t n = rte_eth_rx_burst(q.eth_port, q.queue, rx,
                                          static_cast<uint16_t>(burst));
      if (n == 0) continue;
      got += n;
      Bump(rxq_lines[qi / 8].c[qi % 8], n);
      for (int i = 0; i < n; ++i) {
        frames[i] = rte_pktmbuf_mtod(rx[i], const uint8_t*);
        lens[i] = rte_pktmbuf_data_len(rx[i]);
      }  // ParseBurst prefetches the frames it is about to parse
      bool uniform;
      int parse_errors;
      if constexpr (kAcl) {
        parse_errors = ParseBurst(frames, lens, n, q.number, keys, HashPrefetch{});
        const uint64_t pb0 = rte_rdtsc();
        uniform = acl_pl->ProcessBurst(keys, n, verdicts);
        acl_cycles += rte_rdtsc() - pb0;
      } else {
        parse_errors = ParseBurst(frames, lens, n, q.number, keys, mf->parse_prefetch());
        uniform = mf->ProcessBurst(keys, n, verdicts, /*emc_prefetched=*/true);
      }

      int n_drop = 0, n_used = 0;
      uint64_t rule_drops = 0, no_match = 0, bad_port = 0, limit_drops = 0;
      // Common case first: the whole burst goes out of one port (a burst
      // is usually a few flows with the same action), so the rx array is
      // the tx array and nothing is regrouped.
      const Verdict& v0 = verdicts[0];
      const int p0 = uniform && v0.rule_id != 0 &&
                             v0.action.kind == Action::Kind::kOutput &&
                             v0.action.port <= kMaxPortNumber
                         ? port_index[v0.action.port]
                         : -1;
      for (int i = 0; i < n && p0 < 0; ++i) {
        const Verdict& vd = verdicts[i];
        if (vd.rule_id == 0) {
          // No rule, or a miss past its port's upcall budget (dropped).
          ++(IsUpcallLimited(vd) ? limit_drops : no_match);
          drops[n_drop++] = rx[i];
        } else if (vd.action.kind != Action::Kind::kOutput) {
          ++rule_drops;
          drops[n_drop++] = rx[i];
        } else {
          const int p = vd.action.port <= kMaxPortNumber
                            ? port_index[vd.action.port]
                            : -1;
          if (p < 0) {
            ++bad_port;
            drops[n_drop++] = rx[i];
          } else {
            if (out_n[p] == 0) used[n_used++] = p;
            out[p][out_n[p]++] = rx[i];
          }
        }
      }
      if (n_drop) rte_pktmbuf_free_bulk(drops, static_cast<unsigned>(n_drop));
      uint64_t tx_total = 0, tx_drop_total = 0;
      auto send = [&](int p, rte_mbuf** pkts, uint16_t want) {
        uint16_t sent = rte_eth_tx_burst(eth_of[p], txq, pkts, want);
        for (int r = 0; r < retries && sent < want; ++r)
          sent += rte_eth_tx_burst(eth_of[p], txq, pkts + sent,
                                   static_cast<uint16_t>(want - sent));
        if (sent < want)
          rte_pktmbuf_free_bulk(pkts + sent, static_cast<unsigned>(want - sent));
        Bump(c.port_tx[p], sent);
        if (sent < want) Bump(c.port_tx_dropped[p], want - sent);
        tx_total += sent;
        tx_drop_total += want - sent;
      };
      if (p0 >= 0) send(p0, rx, n);
      for (int u = 0; u < n_used; ++u) {
        const int p = used[u];
        send(p, out[p], static_cast<uint16_t>(out_n[p]));
        out_n[p] = 0;
      }
      Bump(At(c, PmdLoopCounter::kRxPackets), n);
      Bump(At(c, PmdLoopCounter::kTxPackets), tx_total);
      if (tx_drop_total) Bump(At(c, PmdLoopCounter::kTxDropped), tx_drop_total);
      if (rule_drops) Bump(At(c, PmdLoopCounter::kRuleDrops), rule_drops);
      if (no_match) Bump(At(c, PmdLoopCounter::kNoMatch), no_match);
      if (bad_port) Bump(At(c, PmdLoopCounter::kBadPort), bad_port);
      if (limit_drops) Bump(At(c, PmdLoopCounter::kUpcallLimitDrops), limit_drops);
      if (parse_errors) Bump(At(c, PmdLoopCounter::kParseErrors), parse_errors);
    }
    // Test hook (StallPmdForTesting): a PMD stuck mid-iteration, its table
    // installed, passing no quiescent point.
    if (pmd.knobs_box->stall_for_testing.load(std::memory_order_relaxed)) [[unlikely]] {
      pmd.knobs_box->stalled_for_testing.store(true, std::memory_order_release);
      while (pmd.knobs_box->stall_for_testing.load(std::memory_order_relaxed) &&
             !stop.load(std::memory_order_relaxed))
        rte_delay_us_sleep(1000);
      pmd.knobs_box->stalled_for_testing.store(false, std::memory_order_release);
    }
    Bump(At(c, PmdLoopCounter::kIterations), 1);
    const uint64_t t1 = rte_rdtsc();
    const uint64_t dt = t1 - t0;
    t0 = t1;
    if (got) {
      Bump(At(c, PmdLoopCounter::kBusyCycles), dt);
      publish_pipeline_counters();
    } else {
      Bump(At(c, PmdLoopCounter::kIdleCycles), dt);
      // Idle expiry without packets (a bounded budget, once per clock tick).
      if constexpr (!kAcl) {
        if (mf->Housekeep() != 0) publish_pipeline_counters();
      }
      const uint32_t sleep = idle_sleep_us.load(std::memory_order_relaxed);
      if (sleep) {
        rte_delay_us_sleep(sleep);
        // Time asleep is idle time: busy / (busy + idle) stays the share of
        // the PMD's time spent on packets.
        const uint64_t woke = rte_rdtsc();
        Bump(At(c, PmdLoopCounter::kIdleCycles), woke - t0);
        t0 = woke;
      }
    }
  }
  publish_pipeline_counters();
  // Metrics: leave the last state for Stats() after Stop() (off the fast
  // path; the lock only orders us against a reader copying `snap`).
  // A reader may hold snap_mu while it waits for us: keep answering.
  while (!snap_mu.try_lock()) {
    if (const uint64_t r = box.req.load(std::memory_order_acquire);
        r != snap_served)
      answer(r);
    rte_pause();
  }
  box.snap = snapshot();
  box.final.store(true, std::memory_order_release);
  box.live.store(false, std::memory_order_release);
  snap_mu.unlock();
  // Going offline: hold no table pointer while not reporting quiescence.
  if constexpr (kAcl) {
    acl_pl->SetClassifier(nullptr);
  } else {
    mf->SetRuleTable(nullptr);
  }
  publisher->Offline(pmd.index);
}

}  // namespace flowclass
