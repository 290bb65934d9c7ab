// dataplane_collector.h — Prometheus families built from Dataplane::Stats().
//
// Contract
// --------
// The PMDs never touch Prometheus objects: they keep writing their own
// single-writer counters (dataplane/dpdk/internal/dpdk_dataplane_impl.h) and the
// exporter reads a snapshot on each scrape.  prometheus-cpp's Counter is an
// incremented object, so instead of mirroring every counter into one, this
// is a custom `prometheus::Collectable`: Collect() calls Dataplane::Stats()
// once and builds the whole MetricFamily list from that snapshot.  Counters
// carry the snapshot values (monotonic because the dataplane's are).
//
// * Threads: Collect() may run on several HTTP threads at once; it only
//   calls Dataplane::Stats() (thread-safe by the Dataplane contract) and
//   builds local values.  The Dataplane must outlive the collector and every
//   scrape (MetricsExporter stops its HTTP server before it is destroyed).
// * Cost: one Stats() call (which asks each PMD for a pipeline snapshot,
//   see DataplaneStats::PmdCounters::snapshot) plus O(series) allocation, on
//   the scraping thread.  Nothing is cached between scrapes.
// * Cardinality is bounded: series per PMD, per (pmd, port), per (pmd, port,
//   queue), per port, and per subtable only for the `top_subtables` subtables
//   with most hits of each PMD; the others are summed per (pmd, port) under
//   subtable="other".  Every metric, its labels and meaning: docs/metrics.md.
//   BuildFamilies() is a pure function of (stats, options) so tests check
//   the exact output without a Dataplane.
#ifndef FLOWCLASS_SERVER_METRICS_DATAPLANE_COLLECTOR_H_
#define FLOWCLASS_SERVER_METRICS_DATAPLANE_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/dataplane.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace flowclass {

struct CollectorOptions {
  uint32_t top_subtables = 8;  // per PMD (metrics.top_subtables)
};

// Label value of the bucket that sums the subtables outside the top N.
inline constexpr char kOtherSubtables[] = "other";

class DataplaneCollector final : public prometheus::Collectable {
 public:
  // `dataplane` must outlive every Collect() call.
  DataplaneCollector(const Dataplane* dataplane, CollectorOptions options);

  std::vector<prometheus::MetricFamily> Collect() const override;

  // The families for one snapshot (what Collect() returns for it).
  static std::vector<prometheus::MetricFamily> BuildFamilies(
      const DataplaneStats& stats, const CollectorOptions& options);

 private:
  const Dataplane* dataplane_;
  CollectorOptions options_;
};

// Name of every family BuildFamilies can produce plus the exporter's own
// (apply-latency histogram, the readiness families): what dashboards and
// alert rules may reference.
std::vector<std::string> ExportedMetricNames();

// The project version and compiler, as in flowclass_build_info.
std::string BuildVersion();

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_METRICS_DATAPLANE_COLLECTOR_H_
