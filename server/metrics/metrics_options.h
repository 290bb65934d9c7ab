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

#include <netdb.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"

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
  // metrics.threads: HTTP server threads (concurrent scrapes; a connection
  // holds one while its request is read and answered).
  uint32_t threads = 4;
  // metrics.request_timeout_ms: a connection whose request has not fully
  // arrived (or whose answer cannot be sent) within this is closed, so that
  // half-open connections cannot hold every thread (civetweb's
  // request_timeout_ms, which also bounds each read and write).
  uint32_t request_timeout_ms = 5000;
};

namespace internal_metrics {
// Splits "host:port" / "[v6]:port".  False when malformed.
inline bool SplitAddress(const std::string& a, std::string* host, int* port) {
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
}  // namespace internal_metrics

// INVALID_ARGUMENT naming the key: metrics.address must be "host:port" (IPv4,
// a name, or "[v6]:port") with port 0..65535; metrics.top_subtables 0..1000;
// metrics.threads 1..64; metrics.request_timeout_ms 100..600000.  Inline so
// that the config parser (which does not link prometheus-cpp) can use it.
inline absl::Status ValidateMetricsOptions(const MetricsOptions& o) {
  std::string host;
  int port = 0;
  if (!internal_metrics::SplitAddress(o.address, &host, &port))
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics.address: ", QuoteForMessage(o.address, '"'),
        " is not host:port (e.g. 127.0.0.1:9464, 0.0.0.0:9464)"));
  // The HTTP server under prometheus-cpp is Debian's civetweb, built without
  // IPv6 (mg_check_feature(8) is 0): a [v6]:port could never be bound.
  if (host.front() == '[')
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics.address: ", QuoteForMessage(o.address, '"'),
        ": IPv6 is not supported by the /metrics HTTP server (civetweb built without "
        "IPv6); use an IPv4 address such as 0.0.0.0:", port));
  // A host name that does not resolve would only fail when the exporter
  // starts (exit 9); say so when the config is read.  The fuzz build
  // (tests/fuzz) sends no DNS query for whatever host a fuzzed config names:
  // only numeric addresses resolve there.
  {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    hints.ai_flags = AI_NUMERICHOST;
#endif
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (res != nullptr) freeaddrinfo(res);
    if (rc != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "metrics.address: ", QuoteForMessage(o.address, '"'), ": host ",
          QuoteForMessage(host, '"'), " does not resolve to an IPv4 address (",
          gai_strerror(rc), ")"));
  }
  if (o.top_subtables > 1000)
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics.top_subtables: ", o.top_subtables, " is outside 0..1000"));
  if (o.threads < 1 || o.threads > 64)
    return absl::InvalidArgumentError(
        absl::StrCat("metrics.threads: ", o.threads, " is outside 1..64"));
  if (o.request_timeout_ms < 100 || o.request_timeout_ms > 600000)
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics.request_timeout_ms: ", o.request_timeout_ms, " is outside 100..600000"));
  return absl::OkStatus();
}

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_METRICS_METRICS_OPTIONS_H_
