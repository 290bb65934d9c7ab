// metrics_exporter.h — flowclassd's /metrics endpoint (prometheus-cpp pull).
//
// Contract
// --------
// MetricsExporter::Start(options, dataplane, latency) validates the options,
// listens on options.address (an HTTP server with options.threads threads,
// civetweb inside prometheus-cpp) and serves GET /metrics in the Prometheus
// text format: the DataplaneCollector's families (built from one
// Dataplane::Stats() per scrape) followed by the apply-latency histogram when
// `latency` is given.  Errors: INVALID_ARGUMENT naming the metrics.* key;
// UNAVAILABLE when the address cannot be bound.
//
// With a Readiness (server/readiness.h) the same listener also answers
//   GET /readyz   200 "ready" or 503 "not ready: <reason>"
//   GET /healthz  200 "live" or 503 "not live: <reason>" (a stalled PMD)
// (text/plain; Kubernetes' httpGet probes) and /metrics gets flowclass_ready,
// flowclass_live, flowclass_pmd_stalled{pmd,lcore} and
// flowclass_publish_timeouts_total.  prometheus-cpp's Exposer hides its
// civetweb server, so the two paths are answered from civetweb's
// begin_request callback (which the Exposer passes through), looked up by
// the listening port.
//
// Threads: Start and the destructor from one control thread; scrapes run on
// the HTTP threads.  The destructor stops the HTTP server (waiting for
// scrapes in flight) before anything it reads goes away, so destroy the
// exporter before the Dataplane and the ApplyLatencyMetrics.  The PMDs are
// never involved beyond answering Stats()'s snapshot request (see
// dataplane.h); nothing here runs on a PMD.
#ifndef FLOWCLASS_SERVER_METRICS_METRICS_EXPORTER_H_
#define FLOWCLASS_SERVER_METRICS_METRICS_EXPORTER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dataplane/dataplane.h"
#include "server/metrics/dataplane_collector.h"
#include "server/metrics/metrics_options.h"
#include "server/metrics/observed_dataplane.h"

namespace prometheus {
class Exposer;
}
struct CivetCallbacks;

namespace flowclass {

class Readiness;

// The families /metrics carries when the exporter has a Readiness.
inline constexpr const char* kReadinessMetrics[] = {
    "flowclass_ready", "flowclass_live", "flowclass_pmd_stalled",
    "flowclass_publish_timeouts_total"};

// The Prometheus text exposition of `families` (what /metrics returns).
std::string SerializeMetrics(const std::vector<prometheus::MetricFamily>& families);

class MetricsExporter {
 public:
  // `dataplane` (and `latency` if not null) must outlive the exporter.
  static absl::StatusOr<std::unique_ptr<MetricsExporter>> Start(
      const MetricsOptions& options, const Dataplane* dataplane,
      ApplyLatencyMetrics* latency, const Readiness* readiness = nullptr);
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // The port actually bound (differs from the address's when it was 0).
  int port() const { return port_; }
  // "http://<host>:<port>/metrics".
  std::string url() const;

 private:
  MetricsExporter() = default;
  std::string host_;
  int port_ = 0;
  std::shared_ptr<DataplaneCollector> collector_;
  std::shared_ptr<prometheus::Collectable> readiness_collector_;
  std::unique_ptr<CivetCallbacks> callbacks_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  bool probes_registered_ = false;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_METRICS_METRICS_EXPORTER_H_
