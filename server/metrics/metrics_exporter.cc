#include "server/metrics/metrics_exporter.h"

#include <exception>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"

namespace flowclass {
namespace {

// Splits "host:port" / "[v6]:port".  False when malformed.
bool SplitAddress(const std::string& a, std::string* host, int* port) {
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) return false;
  *host = a.substr(0, colon);
  if (host->front() == '[' && host->back() != ']') return false;
  if (host->find(':') != std::string::npos && host->front() != '[') return false;
  int p = 0;
  if (!absl::SimpleAtoi(a.substr(colon + 1), &p) || p < 0 || p > 65535) return false;
  *port = p;
  return true;
}

}  // namespace

absl::Status ValidateMetricsOptions(const MetricsOptions& o) {
  std::string host;
  int port = 0;
  if (!SplitAddress(o.address, &host, &port))
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics.address: \"", o.address,
        "\" is not host:port (e.g. 127.0.0.1:9464, [::1]:9464)"));
  if (o.top_subtables > 1000)
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics.top_subtables: ", o.top_subtables, " is outside 0..1000"));
  if (o.threads < 1 || o.threads > 64)
    return absl::InvalidArgumentError(
        absl::StrCat("metrics.threads: ", o.threads, " is outside 1..64"));
  return absl::OkStatus();
}

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
  SplitAddress(options.address, &e->host_, &port);
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
