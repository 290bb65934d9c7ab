#include "server/metrics/metrics_exporter.h"

#include <CivetServer.h>
#include <civetweb.h>

#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"
#include "server/readiness.h"

namespace flowclass {
namespace {

// Listening port -> the Readiness its /readyz and /healthz report (one
// process may run several exporters, each on its own port).
std::mutex g_probe_mu;
std::map<int, const Readiness*>& ProbeTargets() {
  static auto* m = new std::map<int, const Readiness*>();
  return *m;
}

// civetweb's begin_request: answers /readyz and /healthz, leaves every other
// path (/metrics) to the Exposer's handlers (returns 0).
int BeginRequest(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  if (ri == nullptr || ri->local_uri == nullptr) return 0;
  const bool readyz = std::strcmp(ri->local_uri, "/readyz") == 0;
  const bool healthz = std::strcmp(ri->local_uri, "/healthz") == 0;
  if (!readyz && !healthz) return 0;
  ReadinessState s;
  {
    std::lock_guard<std::mutex> lock(g_probe_mu);
    const auto it = ProbeTargets().find(ri->server_port);
    if (it != ProbeTargets().end()) {
      s = it->second->Get();
    } else {
      // The listener is open but Start has not registered its Readiness yet
      // (the port is known only once bound), or it is being stopped: neither
      // ready nor live, and never a 404 that a probe would misread.
      s.ready = s.live = false;
      s.reason = "the exporter is starting or stopping";
    }
  }
  const bool ok = readyz ? s.ready : s.live;
  const std::string body =
      ok ? (readyz ? "ready\n" : "live\n")
         : absl::StrCat(readyz ? "not ready: " : "not live: ", s.reason, "\n");
  const int code = ok ? 200 : 503;
  mg_response_header_start(conn, code);
  mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  const std::string len = absl::StrCat(body.size());
  mg_response_header_add(conn, "Content-Length", len.c_str(), -1);
  mg_response_header_send(conn);
  if (std::strcmp(ri->request_method, "HEAD") != 0) mg_write(conn, body.data(), body.size());
  return code;
}

// flowclass_ready, flowclass_live, flowclass_pmd_stalled, and
// flowclass_publish_timeouts_total from one Readiness::Get() per scrape.
class ReadinessCollector final : public prometheus::Collectable {
 public:
  explicit ReadinessCollector(const Readiness* r) : r_(r) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    const ReadinessState s = r_->Get();
    auto gauge = [](const char* name, const char* help, double v) {
      prometheus::MetricFamily f{name, help, prometheus::MetricType::Gauge, {}};
      prometheus::ClientMetric m;
      m.gauge.value = v;
      f.metric.push_back(m);
      return f;
    };
    std::vector<prometheus::MetricFamily> out;
    out.push_back(gauge(kReadinessMetrics[0],
                        "1 when the daemon is ready (/readyz, gRPC health SERVING): rules "
                        "restored, every PMD running its loop and the published generation",
                        s.ready ? 1 : 0));
    out.push_back(gauge(kReadinessMetrics[1], "0 when a PMD is stalled (/healthz fails)",
                        s.live ? 1 : 0));
    prometheus::MetricFamily stalled{
        kReadinessMetrics[2],
        "1 while the PMD's loop has not advanced for pmd.stall_timeout_ms",
        prometheus::MetricType::Gauge,
        {}};
    for (const auto& [pmd, lcore] : s.pmds) {
      prometheus::ClientMetric m;
      m.label = {{"lcore", absl::StrCat(lcore)}, {"pmd", absl::StrCat(pmd)}};
      bool is_stalled = false;
      for (uint32_t p : s.stalled_pmds) is_stalled = is_stalled || p == pmd;
      m.gauge.value = is_stalled ? 1 : 0;
      stalled.metric.push_back(m);
    }
    out.push_back(std::move(stalled));
    prometheus::MetricFamily t{
        kReadinessMetrics[3],
        "Rule publications a PMD did not install within pmd.publish_timeout_ms",
        prometheus::MetricType::Counter,
        {}};
    prometheus::ClientMetric c;
    c.counter.value = static_cast<double>(s.publish_timeouts);
    t.metric.push_back(c);
    out.push_back(std::move(t));
    return out;
  }

 private:
  const Readiness* r_;
};

}  // namespace

std::string SerializeMetrics(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(
    const MetricsOptions& options, const Dataplane* dataplane,
    ApplyLatencyMetrics* latency, const Readiness* readiness) {
  absl::Status st = ValidateMetricsOptions(options);
  if (!st.ok()) return st;
  std::unique_ptr<MetricsExporter> e(new MetricsExporter());
  int port = 0;
  internal_metrics::SplitAddress(options.address, &e->host_, &port);
  e->collector_ = std::make_shared<DataplaneCollector>(
      dataplane, CollectorOptions{options.top_subtables});
  e->callbacks_ = std::make_unique<CivetCallbacks>();
  if (readiness) e->callbacks_->begin_request = BeginRequest;
  try {
    // civetweb's own options: its request timeout bounds a request's
    // arrival (and each read and write), keep-alive stays off (a scrape is
    // one request per connection).
    e->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", options.address, "num_threads",
                                 absl::StrCat(options.threads), "request_timeout_ms",
                                 absl::StrCat(options.request_timeout_ms),
                                 "enable_keep_alive", "no"},
        e->callbacks_.get());
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
  if (readiness) {
    e->readiness_collector_ = std::make_shared<ReadinessCollector>(readiness);
    e->exposer_->RegisterCollectable(e->readiness_collector_);
    std::lock_guard<std::mutex> lock(g_probe_mu);
    ProbeTargets()[e->port_] = readiness;
    e->probes_registered_ = true;
  }
  return e;
}

MetricsExporter::~MetricsExporter() {
  exposer_.reset();  // joins the HTTP threads before the collector goes
  if (probes_registered_) {
    std::lock_guard<std::mutex> lock(g_probe_mu);
    ProbeTargets().erase(port_);
  }
}

std::string MetricsExporter::url() const {
  return absl::StrCat("http://", host_, ":", port_, "/metrics");
}

}  // namespace flowclass
