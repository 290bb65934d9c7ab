#include "dataplane/dataplane.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/rules/rule_error.h"

namespace flowclass {

std::vector<absl::StatusOr<BatchResult>> ApplyBatchesOneByOne(
    Dataplane& dp, absl::Span<const absl::Span<const RuleOp>> batches) {
  std::vector<absl::StatusOr<BatchResult>> out;
  out.reserve(batches.size());
  for (absl::Span<const RuleOp> b : batches) out.push_back(dp.ApplyBatch(b));
  return out;
}

absl::StatusOr<BatchResult> DeleteAllByListing(Dataplane& dp) {
  absl::StatusOr<BatchResult> r;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<RuleOp> ops;
    for (const Rule& rule : dp.ListRules()) ops.push_back(RuleOp::Delete(rule.id));
    r = dp.ApplyBatch(ops);
    // A rule listed but deleted by another writer before this batch: list
    // again.  (Known by the error's payload: a status without one is not
    // retried, whatever its message says.)
    if (r.ok()) break;
    const std::optional<RuleOpError> e = GetRuleOpError(r.status());
    if (!e.has_value() || e->kind != RuleErrorKind::kNotFound) break;
  }
  return r;
}

absl::StatusOr<BatchResult> ReplaceAllByListing(Dataplane& dp, absl::Span<const Rule> rules) {
  absl::flat_hash_map<uint64_t, size_t> index;  // id -> position in `rules`
  index.reserve(rules.size());
  for (size_t i = 0; i < rules.size(); ++i) {
    auto [it, fresh] = index.emplace(rules[i].id, i);
    if (!fresh)
      return absl::InvalidArgumentError(absl::StrCat(
          "rule ", i, " (rule id ", rules[i].id, "): id: duplicate id (also rule ", it->second,
          "); nothing was replaced"));
  }
  absl::StatusOr<BatchResult> r;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<RuleOp> ops;
    ops.reserve(rules.size());
    absl::flat_hash_set<uint64_t> present;
    for (const Rule& old : dp.ListRules()) {
      if (index.contains(old.id)) {
        present.insert(old.id);
      } else {
        ops.push_back(RuleOp::Delete(old.id));
      }
    }
    for (const Rule& rule : rules)
      ops.push_back(present.contains(rule.id) ? RuleOp::Replace(rule) : RuleOp::Insert(rule));
    r = dp.ApplyBatch(ops);
    if (r.ok()) break;
    // Another writer changed the rule set between the listing and the batch.
    const std::optional<RuleOpError> e = GetRuleOpError(r.status());
    if (!e.has_value() ||
        (e->kind != RuleErrorKind::kNotFound && e->kind != RuleErrorKind::kAlreadyExists))
      break;
  }
  return r;
}

absl::Status RestoreRuleTable(absl::Span<const Rule> rules, uint64_t generation,
                              uint64_t current_generation, RuleTable* fresh) {
  if (generation < current_generation)
    return absl::FailedPreconditionError(
        absl::StrCat("restore: generation ", generation, " is older than the dataplane's ",
                     current_generation));
  if (!rules.empty() && generation == 0)
    return absl::InvalidArgumentError(
        absl::StrCat("restore: ", rules.size(), " rules at generation 0"));
  if (rules.empty()) {
    fresh->Clear(generation);
    return absl::OkStatus();
  }
  fresh->Clear(generation - 1);
  std::vector<RuleOp> ops;
  ops.reserve(rules.size());
  for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));
  absl::StatusOr<BatchResult> r = fresh->ApplyBatch(ops);
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("restore: ", r.status().message()));
  if (r->generation != generation)  // cannot happen: inserts always change the table
    return absl::InternalError(absl::StrCat("restore: reached generation ", r->generation,
                                            ", expected ", generation));
  return absl::OkStatus();
}

std::string MegaflowText(const MegaflowEntry& e) { return e.value.ToString(e.mask); }

namespace {
void SubCounter(uint64_t base, uint64_t* v) {
  if (*v >= base) *v -= base;
}
void SubPipeline(const PmdStats& base, PmdStats* s) {
  for (const PmdCounterInfo& c : kPmdCounters)
    if (c.kind == PmdCounterKind::kCounter) SubCounter(base.*c.field, &(s->*c.field));
}
void SubQueues(const std::vector<QueueCounters>& base, std::vector<QueueCounters>* qs) {
  for (QueueCounters& q : *qs)
    for (const QueueCounters& b : base)
      if (b.port == q.port && b.queue == q.queue) {
        SubCounter(b.packets, &q.packets);
        SubCounter(b.dropped, &q.dropped);
      }
}
}  // namespace

void SubtractStatsBaseline(const DataplaneStats& baseline, DataplaneStats* s) {
  for (PmdCounters& p : s->pmds) {
    for (const PmdCounters& b : baseline.pmds) {
      if (b.pmd != p.pmd) continue;
      for (const PmdLoopCounterInfo& c : kPmdLoopCounters)
        if (c.kind == PmdCounterKind::kCounter) SubCounter(b.*c.field, &(p.*c.field));
      SubPipeline(b.pipeline, &p.pipeline);
      SubPipeline(b.has_snapshot ? b.snapshot.stats : b.pipeline, &p.snapshot.stats);
      SubQueues(b.rx_queues, &p.rx_queues);
      SubQueues(b.tx_queues, &p.tx_queues);
    }
  }
  for (PortCounters& p : s->ports) {
    for (const PortCounters& b : baseline.ports) {
      if (b.number != p.number) continue;
      for (auto f : {&PortCounters::tx_packets, &PortCounters::tx_dropped,
                     &PortCounters::dev_ipackets, &PortCounters::dev_opackets,
                     &PortCounters::dev_imissed, &PortCounters::dev_ierrors,
                     &PortCounters::dev_oerrors, &PortCounters::dev_rx_nombuf,
                     &PortCounters::rx_packets})
        SubCounter(b.*f, &(p.*f));
    }
  }
}

PmdCounters DataplaneStats::Total() const {
  PmdCounters t;
  for (const PmdCounters& p : pmds) {
    t.Add(p);  // the loop's counters (the generation: the largest)
    t.pipeline += p.pipeline;
  }
  return t;
}

namespace {
// The pipeline block of one PMD: the full snapshot when the PMD reported one,
// its counters otherwise.
std::string FormatPipeline(const PmdCounters& p) {
  if (p.has_snapshot) return Pipeline::FormatStats(p.snapshot);
  PipelineSnapshot s;
  s.stats = p.pipeline;
  return Pipeline::FormatStats(s);
}
}  // namespace

std::string DataplaneStats::ToString() const {
  std::string s = absl::StrFormat("generation %d, %d rules, %d subtables\n",
                                  generation, rules.rules, rules.subtables);
  for (const PmdCounters& p : pmds) {
    const uint64_t total = p.busy_cycles + p.idle_cycles;
    absl::StrAppendFormat(&s, "pmd %d lcore %d (generation %d):\n", p.pmd, p.lcore,
                          p.generation);
    for (const PmdLoopCounterInfo& c : kPmdLoopCounters) {
      if (c.text == nullptr) continue;
      absl::StrAppend(&s, "  ", c.text, ": ", p.*c.field);
      if (c.id == PmdLoopCounter::kBusyCycles)
        absl::StrAppendFormat(
            &s, " (%.1f%%)", total ? 100.0 * static_cast<double>(p.busy_cycles) / total : 0.0);
      s.push_back('\n');
    }
    absl::StrAppendFormat(&s, "  avg cycles per packet: %.1f\n%s", p.CyclesPerPacket(),
                          FormatPipeline(p));
  }
  for (const PortCounters& p : ports) {
    absl::StrAppendFormat(
        &s,
        "port %d (%s): tx %d tx_dropped %d | device: ipackets %d opackets %d "
        "imissed %d ierrors %d oerrors %d rx_nombuf %d\n",
        p.number, p.device, p.tx_packets, p.tx_dropped, p.dev_ipackets,
        p.dev_opackets, p.dev_imissed, p.dev_ierrors, p.dev_oerrors,
        p.dev_rx_nombuf);
  }
  return s;
}

}  // namespace flowclass
