#include "server/metrics/dataplane_collector.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/pmd_counters.h"
#include "server/metrics/metrics_exporter.h"
#include "server/metrics/observed_dataplane.h"

#ifndef FLOWCLASS_VERSION
#define FLOWCLASS_VERSION "unknown"
#endif

namespace flowclass {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<std::pair<std::string, std::string>>;

// Appends families in a fixed order; each family is created on first use so
// that a family with no series (e.g. no ports) is simply absent.
class Families {
 public:
  explicit Families(std::vector<MetricFamily>* out) : out_(out) {}

  void Counter(const char* name, const char* help, const Labels& labels,
               uint64_t value) {
    Get(name, help, MetricType::Counter).metric.push_back(
        Metric(labels, [&](ClientMetric& m) {
          m.counter.value = static_cast<double>(value);
        }));
  }
  void Gauge(const char* name, const char* help, const Labels& labels,
             double value) {
    Get(name, help, MetricType::Gauge).metric.push_back(
        Metric(labels, [&](ClientMetric& m) { m.gauge.value = value; }));
  }
  // `buckets`: (upper bound, cumulative count), ascending; +Inf is added
  // with `count`.
  void Histogram(const char* name, const char* help, const Labels& labels, uint64_t count,
                 double sum, const std::vector<std::pair<double, uint64_t>>& buckets) {
    Get(name, help, MetricType::Histogram).metric.push_back(
        Metric(labels, [&](ClientMetric& m) {
          m.histogram.sample_count = count;
          m.histogram.sample_sum = sum;
          for (const auto& [le, n] : buckets) m.histogram.bucket.push_back({n, le});
          m.histogram.bucket.push_back({count, std::numeric_limits<double>::infinity()});
        }));
  }

 private:
  template <typename F>
  static ClientMetric Metric(const Labels& labels, F set) {
    ClientMetric m;
    for (const auto& [k, v] : labels) m.label.push_back({k, v});
    set(m);
    return m;
  }
  MetricFamily& Get(const char* name, const char* help, MetricType type) {
    auto it = index_.find(name);
    if (it != index_.end()) return (*out_)[it->second];
    index_[name] = out_->size();
    MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = type;
    out_->push_back(std::move(f));
    return out_->back();
  }
  std::vector<MetricFamily>* out_;
  std::map<std::string, size_t> index_;
};

std::string Str(uint64_t v) { return absl::StrCat(v); }

void AddPmd(const PmdCounters& p, const CollectorOptions& o, Families& f) {
  const std::string pmd = Str(p.pmd);
  const PmdStats& s = p.pipeline;
  f.Gauge("flowclass_pmd_info",
          "PMD thread and its EAL lcore (value 1).",
          {{"pmd", pmd}, {"lcore", Str(p.lcore)}}, 1);
  // Layers partition the packets: megaflow excludes the CD's hits, so the
  // sum over `layer` is every packet the pipeline classified.
  const char* kLayerHelp =
      "Packets classified, by the layer that found the answer (emc, smc, cd, "
      "megaflow = dpcls search without the CD, upcall_ok, upcall_failed; "
      "pipeline.kind acl: emc, acl); the layers add up to all packets.";
  const uint64_t dpcls = s.megaflow_hits >= s.cd_hits ? s.megaflow_hits - s.cd_hits : 0;
  const std::pair<const char*, uint64_t> layers[] = {
      {"emc", s.emc_hits},       {"smc", s.smc_hits},
      {"cd", s.cd_hits},         {"megaflow", dpcls},
      {"upcall_ok", s.upcall_ok}, {"upcall_failed", s.upcall_failed},
      {"acl", s.acl_hits + s.acl_misses}};
  for (const auto& [layer, v] : layers)
    f.Counter("flowclass_pmd_packets_total", kLayerHelp,
              {{"pmd", pmd}, {"layer", layer}}, v);
  // The PMD loop's counters (its table), counters first: one series per
  // PMD, or per PMD and label value where entries share a family.
  auto loop_family = [&](const PmdLoopCounterInfo& c) {
    Labels l = {{"pmd", pmd}};
    if (c.label != nullptr) l.emplace_back(c.label, c.label_value);
    const uint64_t v = p.*c.field;
    if (c.kind == PmdCounterKind::kCounter) {
      f.Counter(c.metric, c.help, l, v);
    } else {
      f.Gauge(c.metric, c.help, l, static_cast<double>(v));
    }
  };
  for (const PmdLoopCounterInfo& c : kPmdLoopCounters)
    if (c.kind == PmdCounterKind::kCounter) loop_family(c);
  // The pipeline counters that have a family of their own (the counter table).
  for (const PmdCounterInfo& c : kPmdCounters) {
    if (c.metric == nullptr) continue;
    const uint64_t v = s.*c.field;
    if (c.kind == PmdCounterKind::kCounter) {
      f.Counter(c.metric, c.help, {{"pmd", pmd}}, v);
    } else {
      f.Gauge(c.metric, c.help, {{"pmd", pmd}}, static_cast<double>(v));
    }
  }
  // Then the loop's gauges (the generation).
  for (const PmdLoopCounterInfo& c : kPmdLoopCounters)
    if (c.kind != PmdCounterKind::kCounter) loop_family(c);

  for (const QueueCounters& q : p.rx_queues)
    f.Counter("flowclass_queue_packets_total",
              "Packets per (port, queue) and direction; a tx queue belongs to "
              "one PMD (queue = pmd index).",
              {{"pmd", pmd}, {"port", Str(q.port)}, {"queue", Str(q.queue)},
               {"direction", "rx"}},
              q.packets);
  for (const QueueCounters& q : p.tx_queues) {
    f.Counter("flowclass_queue_packets_total",
              "Packets per (port, queue) and direction; a tx queue belongs to "
              "one PMD (queue = pmd index).",
              {{"pmd", pmd}, {"port", Str(q.port)}, {"queue", Str(q.queue)},
               {"direction", "tx"}},
              q.packets);
    f.Counter("flowclass_queue_tx_dropped_packets_total",
              "Packets a tx queue refused after retries (freed).",
              {{"pmd", pmd}, {"port", Str(q.port)}, {"queue", Str(q.queue)}},
              q.dropped);
  }

  if (!p.has_snapshot) return;
  const PipelineSnapshot& snap = p.snapshot;
  f.Gauge("flowclass_pmd_cd_enabled",
          "1 when the Cuckoo Distributor is on for this PMD, 0 when off.",
          {{"pmd", pmd}}, snap.cd_enabled ? 1 : 0);
  f.Gauge("flowclass_pmd_emc_skipping",
          "1 while the EMC does not pay and only 1 burst in 8 looks it up (pipeline.emc_adaptive).",
          {{"pmd", pmd}}, snap.emc_skipping ? 1 : 0);
  f.Gauge("flowclass_pmd_smc_enabled",
          "1 while the SMC is in use for this PMD (pipeline.smc on, or auto and cheaper with it).",
          {{"pmd", pmd}}, snap.smc_enabled ? 1 : 0);
  f.Counter("flowclass_pmd_smc_switches_total",
            "Times pipeline.smc auto's cost controller switched the SMC on or off.",
            {{"pmd", pmd}}, snap.smc_switches);
  f.Counter("flowclass_pmd_cd_transitions_total",
            "Times the adaptive controller switched the CD on or off.",
            {{"pmd", pmd}}, snap.cd_transitions);
  const struct {
    const char* cache;
    uint32_t used, capacity;
  } caches[] = {{"emc", snap.emc_occupancy, snap.emc_entries},
                {"smc", snap.smc_occupancy, snap.smc_entries},
                {"cd", snap.cd_occupancy, snap.cd_entries}};
  for (const auto& c : caches) {
    f.Gauge("flowclass_pmd_cache_used_entries",
            "Entries in use in a PMD cache (emc: live; smc: ways holding an entry; cd: slots holding a signature).",
            {{"pmd", pmd}, {"cache", c.cache}}, c.used);
    f.Gauge("flowclass_pmd_cache_capacity_entries",
            "Entries a PMD cache (emc, smc, cd) can hold.",
            {{"pmd", pmd}, {"cache", c.cache}}, c.capacity);
  }
  f.Gauge("flowclass_pmd_megaflows", "Megaflows installed in the PMD's dpcls.",
          {{"pmd", pmd}}, static_cast<double>(snap.megaflows));
  f.Gauge("flowclass_pmd_subtables", "Subtables of the PMD's dpcls (all ports).",
          {{"pmd", pmd}}, static_cast<double>(snap.subtables));

  // Per in_port: subtables and megaflows.
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> per_port;  // subtables, megaflows
  for (const SubtableInfo& t : snap.subtable) {
    auto& pp = per_port[t.in_port];
    ++pp.first;
    pp.second += t.megaflows;
  }
  for (const auto& [port, pp] : per_port) {
    f.Gauge("flowclass_subtables", "dpcls subtables of one in_port on one PMD.",
            {{"pmd", pmd}, {"port", Str(port)}}, static_cast<double>(pp.first));
    f.Gauge("flowclass_megaflows", "Megaflows of one in_port on one PMD.",
            {{"pmd", pmd}, {"port", Str(port)}}, static_cast<double>(pp.second));
  }

  // Top N subtables by hits (ties: lower id first, so the choice is stable),
  // the others summed per port.
  std::vector<const SubtableInfo*> order;
  for (const SubtableInfo& t : snap.subtable) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const SubtableInfo* a, const SubtableInfo* b) {
              if (a->hits != b->hits) return a->hits > b->hits;
              return a->id < b->id;
            });
  const size_t top = std::min<size_t>(order.size(), o.top_subtables);
  const char* kHitsHelp =
      "Megaflow hits of a dpcls subtable since it was created; one series per "
      "subtable for the top metrics.top_subtables by hits, the rest summed "
      "per port as subtable=\"other\" (which may drop when a subtable moves "
      "into the top N).";
  const char* kSubMfHelp =
      "Megaflows in a dpcls subtable (top N by hits, the rest summed per port "
      "as subtable=\"other\").";
  for (size_t i = 0; i < top; ++i) {
    const SubtableInfo& t = *order[i];
    const Labels l = {{"pmd", pmd}, {"port", Str(t.in_port)}, {"subtable", Str(t.id)}};
    f.Counter("flowclass_subtable_hits_total", kHitsHelp, l, t.hits);
    f.Gauge("flowclass_subtable_megaflows", kSubMfHelp, l, t.megaflows);
    f.Gauge("flowclass_subtable_rank",
            "0-based probe position of a top-N subtable in its port's ranking.",
            l, t.rank);
  }
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> other;  // hits, megaflows
  for (size_t i = top; i < order.size(); ++i) {
    auto& oo = other[order[i]->in_port];
    oo.first += order[i]->hits;
    oo.second += order[i]->megaflows;
  }
  for (const auto& [port, oo] : other) {
    const Labels l = {{"pmd", pmd}, {"port", Str(port)}, {"subtable", kOtherSubtables}};
    f.Counter("flowclass_subtable_hits_total", kHitsHelp, l, oo.first);
    f.Gauge("flowclass_subtable_megaflows", kSubMfHelp, l, static_cast<double>(oo.second));
  }
}

void AddPort(const PortCounters& p, Families& f) {
  const std::string port = Str(p.number);
  f.Gauge("flowclass_port_info", "Configured port and its device (value 1).",
          {{"port", port}, {"device", p.device}}, 1);
  f.Counter("flowclass_port_rx_packets_total",
            "Packets received from the port, summed over PMDs and queues.",
            {{"port", port}}, p.rx_packets);
  f.Counter("flowclass_port_tx_packets_total",
            "Packets sent to the port (accepted by a tx queue), summed over PMDs.",
            {{"port", port}}, p.tx_packets);
  f.Counter("flowclass_port_tx_dropped_packets_total",
            "Packets for the port that its tx queues refused, summed over PMDs.",
            {{"port", port}}, p.tx_dropped);
  const char* kDevHelp = "Packets the device itself counted (rte_eth_stats), by direction.";
  f.Counter("flowclass_port_device_packets_total", kDevHelp,
            {{"port", port}, {"direction", "rx"}}, p.dev_ipackets);
  f.Counter("flowclass_port_device_packets_total", kDevHelp,
            {{"port", port}, {"direction", "tx"}}, p.dev_opackets);
  const char* kErrHelp = "Device error counters (rte_eth_stats ierrors/oerrors), by direction.";
  f.Counter("flowclass_port_device_errors_total", kErrHelp,
            {{"port", port}, {"direction", "rx"}}, p.dev_ierrors);
  f.Counter("flowclass_port_device_errors_total", kErrHelp,
            {{"port", port}, {"direction", "tx"}}, p.dev_oerrors);
  f.Counter("flowclass_port_device_missed_packets_total",
            "Packets the device dropped because no rx descriptor was free (imissed).",
            {{"port", port}}, p.dev_imissed);
  f.Counter("flowclass_port_device_rx_no_mbuf_total",
            "Receive attempts that found the mbuf pool empty (rx_nombuf).",
            {{"port", port}}, p.dev_rx_nombuf);
}

// pipeline.kind acl: the builder thread (docs/acl-pipeline.md).
void AddAclBuilder(const AclBuilderStats& a, Families& f) {
  f.Counter("flowclass_acl_builds_total",
            "pipeline.kind acl: rule generations compiled into rte_acl contexts and published.",
            {}, a.builds);
  f.Counter("flowclass_acl_build_failures_total",
            "pipeline.kind acl: builds that failed (their batches failed, not live).", {},
            a.build_failures);
  std::vector<std::pair<double, uint64_t>> buckets;
  for (size_t i = 0; i < AclBuilderStats::kNumBuckets; ++i)
    buckets.emplace_back(AclBuilderStats::kBucketsMs[i] / 1e3, a.le_ms[i]);
  f.Histogram("flowclass_acl_build_duration_seconds",
              "pipeline.kind acl: time of one build (rte_acl_add_rules + rte_acl_build).", {},
              a.builds, static_cast<double>(a.build_ns) / 1e9, buckets);
  f.Gauge("flowclass_acl_last_build_rules", "pipeline.kind acl: rules of the last build.", {},
          static_cast<double>(a.last_build_rules));
  f.Counter("flowclass_acl_built_rules_total",
            "pipeline.kind acl: rules over every build (divide by builds for rules per build).",
            {}, a.rules_built);
  f.Counter("flowclass_acl_batches_total",
            "pipeline.kind acl: rule-changing batches the builds covered.", {}, a.batches);
  f.Counter("flowclass_acl_coalesced_batches_total",
            "pipeline.kind acl: batches that arrived during a build and went into a later "
            "build with others (past the first batch of their build).",
            {}, a.coalesced_batches);
  f.Gauge("flowclass_acl_build_queue_depth",
          "pipeline.kind acl: batches applied to the rule table that wait for a build.", {},
          static_cast<double>(a.queue_depth));
  f.Gauge("flowclass_acl_live_generation",
          "pipeline.kind acl: rule generation of the classifier published last.", {},
          static_cast<double>(a.live_generation));
  f.Gauge("flowclass_acl_context_bytes",
          "pipeline.kind acl: DPDK heap bytes the live rte_acl contexts hold (rules and "
          "tries).",
          {}, static_cast<double>(a.context_bytes));
  f.Counter("flowclass_acl_autovalidator_mismatches_total",
            "pipeline.kind acl: keys on which an rte_acl classify implementation differed from "
            "scalar while pipeline.acl_algorithm was autovalidator (scalar's answer was used).",
            {}, a.autovalidator_mismatches);
  f.Gauge("flowclass_acl_algorithm_info",
          "pipeline.kind acl: the rte_acl classify implementation the PMDs run (value 1).",
          {{"algorithm", AclAlgorithmName(a.algorithm)}}, 1);
}

}  // namespace

std::string BuildVersion() { return FLOWCLASS_VERSION; }

DataplaneCollector::DataplaneCollector(const Dataplane* dataplane,
                                       CollectorOptions options)
    : dataplane_(dataplane), options_(options) {}

std::vector<MetricFamily> DataplaneCollector::Collect() const {
  return BuildFamilies(dataplane_->Stats(), options_);
}

std::vector<MetricFamily> DataplaneCollector::BuildFamilies(
    const DataplaneStats& s, const CollectorOptions& o) {
  std::vector<MetricFamily> out;
  Families f(&out);
  f.Gauge("flowclass_build_info",
          "flowclassd build (value 1): version and compiler.",
          {{"version", FLOWCLASS_VERSION}, {"compiler", __VERSION__}}, 1);
  f.Gauge("flowclass_rule_generation",
          "Last acknowledged rule set generation (+1 per applied batch).", {},
          static_cast<double>(s.generation));
  f.Gauge("flowclass_rules", "Rules in the acknowledged rule set.", {},
          static_cast<double>(s.rules.rules));
  f.Gauge("flowclass_rule_entries",
          "Slow-path rule entries (one per rule: port ranges are checked per rule, not expanded).", {},
          static_cast<double>(s.rules.entries));
  f.Gauge("flowclass_rule_subtables",
          "Subtables of the slow-path RuleTable (one per mask in each in_port partition).", {},
          static_cast<double>(s.rules.subtables));
  f.Gauge("flowclass_tsc_hertz", "TSC frequency: cycles per second (0 if unknown).",
          {}, static_cast<double>(s.tsc_hz));
  f.Gauge("flowclass_pmds", "PMD threads.", {}, static_cast<double>(s.pmds.size()));
  if (s.acl.enabled) AddAclBuilder(s.acl, f);
  for (const PmdCounters& p : s.pmds) AddPmd(p, o, f);
  for (const PortCounters& p : s.ports) AddPort(p, f);
  return out;
}

std::vector<std::string> ExportedMetricNames() {
  // One fully populated snapshot produces every family.
  DataplaneStats s;
  s.acl.enabled = true;
  PmdCounters p;
  p.rx_queues.push_back({});
  p.tx_queues.push_back({});
  p.has_snapshot = true;
  p.snapshot.subtable.resize(2);
  s.pmds.push_back(p);
  s.ports.push_back({});
  std::vector<std::string> names;
  for (const MetricFamily& fam : DataplaneCollector::BuildFamilies(s, {/*top_subtables=*/1}))
    names.push_back(fam.name);
  names.push_back(kApplyDurationMetric);
  for (const char* n : kReadinessMetrics) names.push_back(n);
  return names;
}

}  // namespace flowclass
