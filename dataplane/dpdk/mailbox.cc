// mailbox.cc — the control thread's side of the PMD mailboxes (see
// SnapshotMailbox and KnobsMailbox in internal/dpdk_dataplane_impl.h):
// Stats (the counter blocks, read relaxed, and one snapshot per PMD), RuleHits,
// Trace, and the run-time settings (GetConfig, ApplySettings, Apply).
// Control threads only; snapshot and trace requests hold snap_mu, settings
// and table reads apply_mu.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dataplane/dpdk/acl_builder.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/dpdk/internal/dpdk_dataplane_impl.h"
#include "dataplane/dpdk/rule_publisher.h"

namespace flowclass {

using dpdk_internal::kDumpPage;
using dpdk_internal::kKnobsWait;
using dpdk_internal::PmdCounterBlock;
using dpdk_internal::PortState;
using dpdk_internal::kSnapshotWait;
using dpdk_internal::Read;
using dpdk_internal::ReadLoopCounters;
using dpdk_internal::ReadPipelineCounters;
using dpdk_internal::SnapshotMailbox;

// One request to the PMD's mailbox (see SnapshotMailbox), under snap_mu:
// what `prepare` writes (a snapshot, a trace, a dump step).  True when the PMD
// answered; false when it is not running or did not answer in time.  The
// mailbox fields are written only once the PMD has answered every earlier
// request, so a request that timed out never races with a new one.
bool DpdkDataplane::Impl::AskPmd(const Pmd& pmd,
                                 absl::FunctionRef<void(SnapshotMailbox&)> prepare) const {
  SnapshotMailbox& box = *pmd.mailbox;
  if (!box.live.load(std::memory_order_acquire)) return false;
  const auto deadline = std::chrono::steady_clock::now() + kSnapshotWait;
  auto wait_done = [&](uint64_t req) {
    while (box.done.load(std::memory_order_acquire) != req) {
      // The PMD cannot write `final` while we hold snap_mu; if it stopped
      // without answering, give up at once.
      if (!box.live.load(std::memory_order_acquire) ||
          std::chrono::steady_clock::now() >= deadline)
        return false;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return true;
  };
  const uint64_t last = box.req.load(std::memory_order_relaxed);
  if (!wait_done(last)) return false;  // an earlier request is still open
  box.want_trace = false;
  box.want_dump = false;
  prepare(box);
  box.req.store(last + 1, std::memory_order_release);
  return wait_done(last + 1);
}

// Fills p->snapshot from the PMD's mailbox.
void DpdkDataplane::Impl::TakeSnapshot(const Pmd& pmd, PmdCounters* p) const {
  std::lock_guard<std::mutex> lock(snap_mu);
  const SnapshotMailbox& box = *pmd.mailbox;
  if (box.final.load(std::memory_order_acquire) || AskPmd(pmd, [](SnapshotMailbox&) {})) {
    p->snapshot = box.snap;
    p->has_snapshot = true;
  }
}

absl::StatusOr<std::vector<RuleHit>> DpdkDataplane::RuleHits() const {
  const DataplaneStats stats = Stats();
  std::map<uint64_t, uint64_t> sum;
  for (const PmdCounters& p : stats.pmds) {
    if (!p.has_snapshot) {
      return absl::UnavailableError(absl::StrCat(
          "rule hits: PMD ", p.pmd, " did not answer the snapshot request"));
    }
    for (const auto& [id, hits] : p.snapshot.rule_hits) sum[id] += hits;
  }
  std::vector<RuleHit> out;
  std::lock_guard<std::mutex> lock(impl_->apply_mu);
  const RuleTable& table = *impl_->table;
  for (const auto& [id, hits] : sum) {
    if (table.Find(id) != nullptr) out.push_back(RuleHit{id, hits});
  }
  return out;
}

absl::StatusOr<TraceResult> DpdkDataplane::Trace(const FlowKey& key) const {
  // apply_mu held throughout: every PMD has the published generation
  // installed (ack semantics) and no batch can change it under the trace.
  std::lock_guard<std::mutex> lock(impl_->apply_mu);
  const PublishedTable* cur = impl_->publisher->Current();
  TraceResult t;
  t.generation = cur->generation;
  if (impl_->acl()) {
    // The classifier the PMDs run (the builder's live one); no PMD caches
    // but the EMC, which holds only answers of that classifier.
    t.layer = "acl";
    Rule copy;
    if (impl_->acl_builder->ClassifyLive(key, &copy, &t.generation) != nullptr) {
      t.matched = true;
      t.rule = copy;
    }
    return t;
  }
  const Rule* r = impl_->table->Lookup(key, &t.megaflow_mask, &t.rule_subtables_visited,
                                      cur->generation);
  if (r) {
    t.matched = true;
    t.rule = *r;
  }
  // The PMD caches: the first PMD that has the key cached, else the first
  // that answered ("upcall").  A PMD that does not answer is skipped.
  std::lock_guard<std::mutex> snap_lock(impl_->snap_mu);
  for (const auto& pmd : impl_->pmds) {
    if (!impl_->AskPmd(pmd, [&key](SnapshotMailbox& box) {
          box.want_trace = true;
          box.trace_key = key;
        }))
      continue;
    const PipelineTrace& pt = pmd.mailbox->trace;
    if (t.pmd >= 0 && !pt.has_megaflow) continue;  // "upcall"
    t.pmd = pmd.index;
    t.layer = pt.layer;
    t.megaflow_subtables_visited.assign(pt.subtables_visited.begin(),
                                        pt.subtables_visited.end());
    if (pt.has_megaflow) {
      t.has_megaflow = true;
      t.megaflow_value = pt.megaflow_value;
      t.megaflow_mask = pt.megaflow_mask;
      break;
    }
  }
  return t;
}

absl::StatusOr<std::vector<MegaflowEntry>> DpdkDataplane::DumpMegaflows(
    const MegaflowDumpRequest& req) const {
  std::vector<MegaflowEntry> out;
  for (const auto& pmd : impl_->pmds) {
    if (req.pmd && *req.pmd != static_cast<uint32_t>(pmd.index)) continue;
    const SnapshotMailbox& box = *pmd.mailbox;
    // (index, version) of what this PMD listed: a step may see one again.
    absl::flat_hash_set<uint64_t> seen;
    uint32_t cursor = UINT32_MAX;
    do {
      // snap_mu per step: scrapes go on between the steps of a long dump.
      std::lock_guard<std::mutex> lock(impl_->snap_mu);
      if (!impl_->AskPmd(pmd, [&](SnapshotMailbox& b) {
            b.want_dump = true;
            b.dump_filter = req.filter;
            b.dump_cursor = cursor;
            if (b.dump.size() != kDumpPage) b.dump.resize(kDumpPage);
          })) {
        // A PMD that is not running has no megaflows (it flushes them as
        // it leaves).
        if (!box.live.load(std::memory_order_acquire)) break;
        return absl::UnavailableError(
            absl::StrCat("dump megaflows: ", impl_->PmdName(pmd.index), " did not answer within ",
                         std::chrono::duration_cast<std::chrono::milliseconds>(kSnapshotWait)
                             .count(),
                         " ms"));
      }
      for (uint32_t i = 0; i < box.dump_n; ++i) {
        const MegaflowEntry& e = box.dump[i];
        if (!seen.insert(uint64_t{e.index} << 32 | e.version).second) continue;
        if (!req.match.empty() && !absl::StrContains(MegaflowText(e), req.match)) continue;
        out.push_back(e);
        out.back().pmd = static_cast<uint32_t>(pmd.index);
        if (req.limit != 0 && out.size() >= req.limit) return out;
      }
      cursor = box.dump_cursor;
    } while (cursor > 0);
  }
  return out;
}

DataplaneStats DpdkDataplane::Stats() const {
  const Impl& d = *impl_;
  DataplaneStats s;
  {
    std::lock_guard<std::mutex> lock(impl_->apply_mu);
    const PublishedTable* cur = d.publisher->Current();
    s.generation = cur->generation;
    s.rules = d.table->Stats();
  }
  if (d.acl_builder) s.acl = d.acl_builder->Stats();
  s.tsc_hz = rte_get_tsc_hz();
  for (const auto& pmd : d.pmds) {
    const PmdCounterBlock& c = *pmd.counters;
    PmdCounters p;
    p.pmd = static_cast<uint32_t>(pmd.index);
    p.lcore = static_cast<uint32_t>(pmd.lcore);
    ReadLoopCounters(c, &p);
    ReadPipelineCounters(c, &p.pipeline);
    for (size_t qi = 0; qi < pmd.rxq.size(); ++qi) {
      QueueCounters q;
      q.port = pmd.rxq[qi].number;
      q.queue = pmd.rxq[qi].queue;
      q.packets = Read(pmd.rxq_counters[qi / 8].c[qi % 8]);
      p.rx_queues.push_back(q);
    }
    for (size_t i = 0; i < d.ports.size(); ++i) {
      QueueCounters q;
      q.port = d.ports[i].opts.number;
      q.queue = static_cast<uint32_t>(pmd.index);  // one tx queue per PMD
      q.packets = Read(c.port_tx[i]);
      q.dropped = Read(c.port_tx_dropped[i]);
      p.tx_queues.push_back(q);
    }
    d.TakeSnapshot(pmd, &p);
    s.pmds.push_back(p);
  }
  for (size_t i = 0; i < d.ports.size(); ++i) {
    const PortState& ps = d.ports[i];
    PortCounters pc;
    pc.number = ps.opts.number;
    pc.device = ps.opts.device;
    for (const PmdCounters& p : s.pmds)
      for (const QueueCounters& q : p.rx_queues)
        if (q.port == pc.number) pc.rx_packets += q.packets;
    for (const auto& pmd : d.pmds) {
      pc.tx_packets += Read(pmd.counters->port_tx[i]);
      pc.tx_dropped += Read(pmd.counters->port_tx_dropped[i]);
    }
    rte_eth_stats es;
    if (rte_eth_stats_get(ps.eth_port, &es) == 0) {
      pc.dev_ipackets = es.ipackets;
      pc.dev_opackets = es.opackets;
      pc.dev_imissed = es.imissed;
      pc.dev_ierrors = es.ierrors;
      pc.dev_oerrors = es.oerrors;
      pc.dev_rx_nombuf = es.rx_nombuf;
    }
    s.ports.push_back(pc);
  }
  return s;
}

std::map<std::string, std::string> DpdkDataplane::GetConfig() const {
  const Impl& d = *impl_;
  std::map<std::string, std::string> m;
  m["pmd.lcores"] = absl::StrJoin(d.opts.pmd_lcores, ",");
  m["pmd.burst"] = absl::StrCat(d.opts.burst);
  m["mempool.mbufs"] = absl::StrCat(d.pool ? d.pool->size : 0);
  m["ports"] = absl::StrJoin(d.ports, ",", [](std::string* out, const PortState& p) {
    absl::StrAppend(out, p.opts.number, "=", p.opts.device);
  });
  // Run-time settings (every PMD runs with these once ApplySettings
  // returned).  Apply writes them under apply_mu.
  RuntimeSettings rs;
  {
    std::lock_guard<std::mutex> lock(impl_->apply_mu);
    rs = d.settings;
  }
  for (auto& [k, v] : FormatRuntimeSettings(RuntimeSettingsUpdate::All(rs)))
    m[std::move(k)] = std::move(v);
  if (d.acl()) m[kConfigAclAlgorithm] = AclAlgorithmName(rs.acl_algorithm);
  return m;
}

absl::StatusOr<std::string> DpdkDataplane::GetConfig(absl::string_view key) const {
  auto m = GetConfig();
  auto it = m.find(std::string(key));
  if (it == m.end())
    return UnknownConfigKeyError(key);
  return it->second;
}

absl::Status DpdkDataplane::ApplySettings(absl::Span<const ConfigValue> values) {
  absl::StatusOr<RuntimeSettingsUpdate> update = ParseRuntimeSettingsRequest(values, GetConfig());
  if (!update.ok()) return update.status();
  // The PMDs' megaflow pools were sized at start-up; the cap moves below that.
  if (const uint32_t pool = impl_->opts.pipeline.max_megaflows;
      update->max_megaflows && *update->max_megaflows > pool)
    return absl::FailedPreconditionError(absl::StrCat(
        kConfigMaxMegaflows, ": ", *update->max_megaflows, " is more than the ", pool,
        " megaflows each PMD allocated at start-up (raise it in the config file)"));
  if (update->acl_algorithm) {
    if (absl::Status s = CheckAclAlgorithm(*update->acl_algorithm, kConfigAclAlgorithm);
        !s.ok())
      return s;
  }
  return impl_->Apply(*update);
}

absl::Status DpdkDataplane::Impl::Apply(const RuntimeSettingsUpdate& update) {
  std::lock_guard<std::mutex> lock(apply_mu);
  RuntimeSettings next = settings;
  update.ApplyTo(&next);
  // Every live PMD must have taken `version` before `knobs` may change: a
  // PMD still reading the settings of a request that timed out would race
  // with the write.
  auto all_took = [&](uint64_t version, absl::string_view what) -> absl::Status {
    const auto deadline = std::chrono::steady_clock::now() + kKnobsWait;
    for (const Pmd& pmd : pmds) {
      while (pmd.mailbox->live.load(std::memory_order_acquire) &&
             pmd.knobs_box->ack.load(std::memory_order_acquire) < version) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::vector<std::string> keys;
          for (const ConfigValue& kv : FormatRuntimeSettings(update)) keys.push_back(kv.first);
          return absl::DeadlineExceededError(absl::StrCat(
              absl::StrJoin(keys, ", "), ": PMD ", pmd.index, " did not take ", what, " within ",
              std::chrono::duration_cast<std::chrono::milliseconds>(kKnobsWait).count(), " ms"));
        }
        std::this_thread::yield();
      }
    }
    return absl::OkStatus();
  };
  const bool publish = update.ChangesPipeline();
  if (publish) {
    if (absl::Status s =
            all_took(knobs_version.load(std::memory_order_relaxed), "the previous setting");
        !s.ok())
      return s;
  }
  // From here on the request is applied, pmd.* and pipeline alike.
  settings = next;
  tx_retries.store(static_cast<int>(next.tx_retries), std::memory_order_relaxed);
  idle_sleep_us.store(next.idle_sleep_us, std::memory_order_relaxed);
  if (update.acl_algorithm && acl_builder) {
    if (absl::Status s = acl_builder->SetAlgorithm(*update.acl_algorithm); !s.ok()) return s;
  }
  if (!publish) return absl::OkStatus();
  knobs = next;
  return all_took(knobs_version.fetch_add(1, std::memory_order_acq_rel) + 1,
                  "the new setting");
}

}  // namespace flowclass
