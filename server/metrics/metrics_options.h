// metrics_options.h — the `metrics:` section of flowclassd's configuration.
//
// Contract
// --------
// Plain data, header-only, no dependency: server/config.h embeds it in
// DaemonConfig (and validates it while parsing the YAML), MetricsExporter
// (metrics_exporter.h) consumes it.  Every key is documented in
// docs/metrics.md and docs/flowclassd.md.
#ifndef FLOWCLASS_SERVER_METRICS_METRICS_OPTIONS_H_
#define FLOWCLASS_SERVER_METRICS_METRICS_OPTIONS_H_

#include <cstdint>
#include <string>

namespace flowclass {

struct MetricsOptions {
  // metrics.enabled: serve /metrics.  Off unless the config turns it on (the
  // example config does), so that test daemons never fight over a port.
  bool enabled = false;
  // metrics.address: "host:port" to listen on; "127.0.0.1:0" picks a free
  // port (flowclassd prints the URL).  The Helm chart sets the pod IP.
  std::string address = "127.0.0.1:9464";
  // metrics.top_subtables: per PMD, the N subtables with most hits get their
  // own series; the rest are summed per (pmd, port) into subtable="other".
  uint32_t top_subtables = 8;
  // metrics.threads: HTTP server threads (concurrent scrapes).
  uint32_t threads = 2;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_METRICS_METRICS_OPTIONS_H_
