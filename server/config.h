// config.h — flowclassd's configuration: YAML file + command-line overrides.
//
// Contract
// --------
// LoadConfig(path, overrides) reads a YAML file, applies `overrides`
// ("dotted.key=value", e.g. "pmd.lcores=[1,2]", "ports.0.args=rx_pcap=a.pcap")
// on the parsed tree, then converts and validates the whole tree.  Every error
// names the key path and the problem, e.g.
//   "pmd.burst: 64 is outside 1..32"
//   "ports[1].number: duplicate port number 2 (also ports[0])"
//   "eal.hugepaggs: unknown key"
// Unknown keys are errors so that a typo never silently falls back to a
// default.  Every key is documented in docs/flowclassd.md; the example is
// deploy/flowclassd.example.yaml.
//
// Pure control-plane code: no DPDK calls (it only fills the option structs
// that dataplane/dpdk consumes), so `flowclassd --check-config` and the unit
// tests run without EAL.  Not thread-safe; call from one thread.
#ifndef FLOWCLASS_SERVER_CONFIG_H_
#define FLOWCLASS_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/pipeline_kind.h"
#include "server/api/grpc_config.h"
#include "server/log_options.h"
#include "server/metrics/metrics_options.h"

namespace flowclass {

// store: the durable rule store (server/rule_restore.h, docs/store.md).
struct StoreConfig {
  // store.path: the store's directory (absolute; created if absent); empty =
  // no store, rules live in memory only and do not survive a restart.
  std::string path;
  // store.recover_to_last_consistent: a damaged store starts from its last
  // consistent state (what was dropped is logged) instead of refusing.
  bool recover_to_last_consistent = false;
  // store.checkpoint_idle_ms: the store thread checkpoints the -wal into
  // rules.db once it has had no group to commit for this long (at the
  // latest 5 s after the first group not checkpointed; docs/store.md).
  uint32_t checkpoint_idle_ms = 50;
};

struct DaemonConfig {
  EalOptions eal;
  // dataplane.kind is pipeline.kind: megaflow | acl (start-up only, not a
  // run-time setting; docs/acl-pipeline.md).
  DpdkDataplaneOptions dataplane;
  std::string rules_file;             // rules.file; empty = start with no rules
  std::string rules_format = "auto";  // rules.format: auto | native | classbench
  uint32_t stats_interval_ms = 1000;  // stats.interval_ms; 0 = no periodic line
  bool stats_final = true;            // stats.final: full dump at exit
  uint32_t run_duration_s = 0;        // run.duration_s; 0 = until a signal
  LogOptions log;                     // log.level, log.format (server/log.h)
  MetricsOptions metrics;             // metrics.*: the /metrics endpoint
  StoreConfig store;                  // store.*
  // ---- grpc: the flowclass.v1 API ----
  // Present section = server enabled (grpc.enabled: false turns it off).
  // Keys and security rules: server/api/grpc_config.h, docs/api.md.
  GrpcServerConfig grpc;
  // ---- readiness (server/readiness.h) ----
  // pmd.stall_timeout_ms: a PMD whose loop has not advanced for this long is
  // stalled (readiness and liveness fail).  pmd.publish_timeout_ms is
  // dataplane.publish_timeout_ms.
  uint32_t pmd_stall_timeout_ms = 2000;
};

// Parses YAML text (`origin` names it in errors) with overrides applied.
absl::StatusOr<DaemonConfig> ParseConfig(const std::string& yaml_text,
                                         const std::vector<std::string>& overrides,
                                         const std::string& origin = "config");
// Reads `path` and calls ParseConfig.  NOT_FOUND when the file cannot be read.
absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path,
                                        const std::vector<std::string>& overrides);

// True for a PCI address such as "0000:3b:02.1" or "3b:02.1".
bool LooksLikePciAddress(const std::string& device);

// A human-readable summary (what --check-config prints).
std::string DescribeConfig(const DaemonConfig& config);

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_CONFIG_H_
