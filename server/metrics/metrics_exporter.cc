#include "server/metrics/metrics_exporter.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"

namespace flowclass {
std::string SerializeMetrics(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(
    const MetricsOptions& options, const Dataplane* dataplane,
    ApplyLatencyMetrics* latency) {
  absl::Status st = ValidateMetricsOptions(options);
  if (!st.ok()) return st;
  std::unique_ptr<MetricsExporter> e(new MetricsExporter());
  int port = 0;
  internal_metrics::SplitAddress(options.address, &e->host_, &port);
  e->collector_ = std::make_shared<DataplaneCollector>(
      dataplane, CollectorOptions{options.top_subtables});
  try {
    e->exposer_ = std::make_unique<prometheus::Exposer>(options.address,
                                                        options.threads);
  } catch (const std::exception& ex) {
    return absl::UnavailableError(absl::StrCat(
        "metrics.address: cannot listen on ", options.address, ": ", ex.what()));
  }
  const std::vector<int> ports = e->exposer_->GetListeningPorts();
  if (ports.empty())
    return absl::UnavailableError(absl::StrCat(
        "metrics.address: cannot listen on ", options.address, ": no port bound"));
  e->port_ = ports.front();
  e->exposer_->RegisterCollectable(e->collector_);
  if (latency) e->exposer_->RegisterCollectable(latency->registry());
  return e;
}

MetricsExporter::~MetricsExporter() {
  exposer_.reset();  // joins the HTTP threads before the collector goes
}

std::string MetricsExporter::url() const {
  return absl::StrCat("http://", host_, ":", port_, "/metrics");
}

}  // namespace flowclass
