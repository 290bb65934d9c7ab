// flowclassd — the DPDK dataplane process.
//
//   flowclassd -c FILE [--set KEY=VALUE]... [--rules FILE] [--lcores L,L]
//              [--file-prefix NAME] [--stats-interval-ms N] [--duration-s N]
//   flowclassd --check-config FILE [--set KEY=VALUE]...
//
// The main thread is the EAL main lcore: it loads the rules, starts the PMDs,
// prints per-PMD counters every stats.interval_ms and waits for SIGINT or
// SIGTERM (or run.duration_s), then stops PMDs and ports (flushing net_pcap
// output), prints the final counters and exits 0.  Exit codes are listed in
// kExit* below and in docs/flowclassd.md.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/version.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/pmd_counters.h"
#include "dataplane/rules/rule_format.h"
#include "server/api/auth_policy.h"
#include "server/api/grpc_server.h"
#include "server/cap_log.h"
#include "server/config.h"
#include "server/metrics/metrics_exporter.h"
#include "server/metrics/observed_dataplane.h"
#include "server/durable_dataplane.h"
#include "server/readiness.h"
#include "server/rule_restore.h"

namespace flowclass {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitUsage = 2;
constexpr int kExitConfig = 3;
constexpr int kExitEal = 4;
constexpr int kExitPort = 5;
constexpr int kExitMempool = 6;
constexpr int kExitRules = 7;
constexpr int kExitLcore = 8;
constexpr int kExitMetrics = 9;  // cannot serve /metrics
constexpr int kExitStore = 10;   // the rule store cannot be opened, read or restored

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal.store(sig); }
std::atomic<bool> g_reload{false};
void OnHangup(int) { g_reload.store(true); }

void Usage(FILE* out) {
  std::fputs(
      "usage: flowclassd -c FILE [options]\n"
      "       flowclassd --check-config FILE [--set KEY=VALUE]...\n"
      "options:\n"
      "  -c, --config FILE        YAML configuration (see docs/flowclassd.md)\n"
      "  --check-config FILE      validate FILE (and its rules file), print a\n"
      "                           summary and exit 0, or 3/7 on error\n"
      "  --set KEY=VALUE          override a config key, dotted path, value in\n"
      "                           YAML syntax (e.g. --set pmd.lcores=[1,2],\n"
      "                           --set ports.0.args=rx_pcap=in.pcap)\n"
      "  --rules FILE             same as --set rules.file=FILE\n"
      "  --lcores L,L             same as --set pmd.lcores=[L,L]\n"
      "  --file-prefix NAME       same as --set eal.file_prefix=NAME\n"
      "  --stats-interval-ms N    same as --set stats.interval_ms=N\n"
      "  --duration-s N           same as --set run.duration_s=N\n"
      "  --store DIR              same as --set store.path=DIR (the durable rule\n"
      "                           store; without one rules live in memory only)\n"
      "  --recover-to-last-consistent\n"
      "                           same as --set store.recover_to_last_consistent=true:\n"
      "                           a damaged store starts from its last consistent\n"
      "                           state instead of refusing to start\n"
      "  -h, --help               this text\n"
      "  --version                print flowclassd's version and exit\n"
      "exit codes: 0 ok, 1 internal, 2 usage, 3 config, 4 EAL, 5 port,\n"
      "            6 mempool, 7 rules, 8 lcore, 9 metrics, 10 store\n",
      out);
}

// "<tag> pmd=.. lcore=.. " then every counter of the two tables with a `log`
// key, as key=value: the loop's, the busy share and cycles per packet, then
// the pipeline's.
std::string PmdLine(const char* tag, const PmdCounters& p) {
  const uint64_t total = p.busy_cycles + p.idle_cycles;
  std::string out = absl::StrFormat("%s pmd=%d lcore=%d", tag, p.pmd, p.lcore);
  for (const PmdLoopCounterInfo& c : kPmdLoopCounters)
    if (c.log != nullptr) absl::StrAppend(&out, " ", c.log, "=", p.*c.field);
  absl::StrAppendFormat(&out, " busy=%.1f%% cycles_per_pkt=%.1f",
                        total ? 100.0 * static_cast<double>(p.busy_cycles) / total : 0.0,
                        p.CyclesPerPacket());
  for (const PmdCounterInfo& c : kPmdCounters)
    if (c.log != nullptr) absl::StrAppend(&out, " ", c.log, "=", p.pipeline.*c.field);
  out.push_back('\n');
  return out;
}

void PrintStats(const char* tag, const DataplaneStats& s, bool ports) {
  std::string out;
  for (const PmdCounters& p : s.pmds) out += PmdLine(tag, p);
  if (ports) {
    for (const PortCounters& p : s.ports)
      absl::StrAppendFormat(
          &out,
          "%s port=%d device=%s tx=%d tx_dropped=%d dev_ipackets=%d "
          "dev_opackets=%d dev_imissed=%d dev_ierrors=%d dev_oerrors=%d "
          "dev_rx_nombuf=%d\n",
          tag, p.number, p.device, p.tx_packets, p.tx_dropped, p.dev_ipackets,
          p.dev_opackets, p.dev_imissed, p.dev_ierrors, p.dev_oerrors,
          p.dev_rx_nombuf);
    const PmdCounters t = s.Total();
    absl::StrAppendFormat(
        &out,
        "%s total gen=%d rx=%d tx=%d tx_dropped=%d rule_drops=%d no_match=%d "
        "bad_port=%d busy_cycles=%d idle_cycles=%d tsc_hz=%d\n",
        tag, s.generation, t.rx_packets, t.tx_packets, t.tx_dropped,
        t.rule_drops, t.no_match, t.bad_port, t.busy_cycles, t.idle_cycles,
        s.tsc_hz);
  }
  if (s.acl.enabled)  // pipeline.kind acl: the builder
    absl::StrAppendFormat(
        &out,
        "%s acl builds=%d build_failures=%d last_build_ms=%.3f last_build_rules=%d "
        "batches=%d coalesced_batches=%d queue_depth=%d live_gen=%d context_bytes=%d "
        "algorithm=%s autovalidator_mismatches=%d\n",
        tag, s.acl.builds, s.acl.build_failures, static_cast<double>(s.acl.last_build_ns) / 1e6,
        s.acl.last_build_rules, s.acl.batches, s.acl.coalesced_batches, s.acl.queue_depth,
        s.acl.live_generation, s.acl.context_bytes, AclAlgorithmName(s.acl.algorithm),
        s.acl.autovalidator_mismatches);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

// Test-only hook (docs/operations.md, "Test hooks"), off unless the
// environment variable FLOWCLASS_TESTING_STALL_PMD_FILE names a file: while
// that file exists, the PMD whose index it holds (empty: 0) is stalled with
// DpdkDataplane::StallPmdForTesting, as a wedged PMD would be; once it is
// removed the PMD goes on.  Polled by the main loop (every 10 ms).  Not a
// config key nor a flag, so no configuration reaches it.
class TestingStallHook {
 public:
  static constexpr const char* kEnv = "FLOWCLASS_TESTING_STALL_PMD_FILE";
  TestingStallHook() {
    const char* p = std::getenv(kEnv);
    if (p != nullptr && *p != '\0') path_ = p;
  }
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  void Poll(DpdkDataplane& dp) {
    struct stat sb;
    const bool want = enabled() && ::stat(path_.c_str(), &sb) == 0;
    if (want == (pmd_ >= 0)) return;
    if (want) {
      std::FILE* f = std::fopen(path_.c_str(), "r");
      int pmd = 0;
      if (f != nullptr) {
        if (std::fscanf(f, "%d", &pmd) != 1) pmd = 0;
        std::fclose(f);
      }
      pmd_ = pmd;
      dp.StallPmdForTesting(pmd_, true);
      std::printf("flowclassd: testing: pmd %d stalled (%s exists)\n", pmd_, path_.c_str());
    } else {
      dp.StallPmdForTesting(pmd_, false);
      std::printf("flowclassd: testing: pmd %d resumed\n", pmd_);
      pmd_ = -1;
    }
    std::fflush(stdout);
  }
  void Release(DpdkDataplane& dp) {
    if (pmd_ >= 0) dp.StallPmdForTesting(pmd_, false);
    pmd_ = -1;
  }

 private:
  std::string path_;
  int pmd_ = -1;  // the stalled PMD, -1: none
};

// Test-only hook (docs/operations.md, "Test hooks"), off unless the
// environment variable FLOWCLASS_TESTING_HOLD_RESTORE_FILE names a file:
// while that file exists the restore does not begin (the gRPC server is
// open, NOT_SERVING), so a test can see the restore window.  False when a
// signal came meanwhile.
bool HoldRestoreForTesting() {
  constexpr const char* kEnv = "FLOWCLASS_TESTING_HOLD_RESTORE_FILE";
  const char* p = std::getenv(kEnv);
  if (p == nullptr || *p == '\0') return g_signal.load() == 0;
  std::fprintf(stderr, "flowclassd: warning: %s is set: test hook, the restore waits while %s "
               "exists\n", kEnv, p);
  struct stat sb;
  if (::stat(p, &sb) == 0) {
    std::printf("flowclassd: testing: restore held (%s exists)\n", p);
    std::fflush(stdout);
    while (::stat(p, &sb) == 0 && g_signal.load() == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::printf("flowclassd: testing: restore released\n");
    std::fflush(stdout);
  }
  return g_signal.load() == 0;
}

RuleFormat ToRuleFormat(const std::string& f) {
  if (f == "native") return RuleFormat::kNative;
  if (f == "classbench") return RuleFormat::kClassBench;
  return RuleFormat::kAuto;
}

absl::StatusOr<std::vector<RuleOp>> LoadRules(const DaemonConfig& c) {
  std::vector<RuleOp> ops;
  if (c.rules_file.empty()) return ops;
  absl::StatusOr<std::vector<Rule>> rules =
      LoadRuleFile(c.rules_file, ToRuleFormat(c.rules_format));
  if (!rules.ok()) return rules.status();
  uint64_t next_id = 1;
  for (Rule& r : *rules) {
    if (r.id == 0) r.id = next_id;  // loaders may leave ids to us
    next_id = std::max(next_id, r.id + 1);
    ops.push_back(RuleOp::Insert(std::move(r)));
  }
  // Validate the whole set now (a scratch table), before EAL is touched.
  RuleTable scratch(c.dataplane.limits);
  absl::StatusOr<BatchResult> r = scratch.ApplyBatch(ops);
  if (!r.ok())
    return absl::Status(r.status().code(),
                        absl::StrCat(c.rules_file, ": ", r.status().message()));
  return ops;
}

int Main(int argc, char** argv) {
  std::string config_path;
  bool check_only = false;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "flowclassd: %s needs a value\n", a.c_str());
        return false;
      }
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      Usage(stdout);
      return kExitOk;
    } else if (a == "--version") {
      std::printf("flowclassd %s\n", kFlowclassVersion);
      return kExitOk;
    } else if (a == "-c" || a == "--config") {
      if (!value(&config_path)) return kExitUsage;
    } else if (a == "--check-config") {
      if (!value(&config_path)) return kExitUsage;
      check_only = true;
    } else if (a == "--set") {
      if (!value(&v)) return kExitUsage;
      if (v.find('=') == std::string::npos || v.front() == '=') {
        std::fprintf(stderr, "flowclassd: --set needs KEY=VALUE, got \"%s\"\n", v.c_str());
        Usage(stderr);
        return kExitUsage;
      }
      overrides.push_back(v);
    } else if (a == "--rules") {
      if (!value(&v)) return kExitUsage;
      overrides.push_back("rules.file=" + v);
    } else if (a == "--lcores") {
      if (!value(&v)) return kExitUsage;
      overrides.push_back("pmd.lcores=[" + v + "]");
    } else if (a == "--file-prefix") {
      if (!value(&v)) return kExitUsage;
      overrides.push_back("eal.file_prefix=" + v);
    } else if (a == "--stats-interval-ms") {
      if (!value(&v)) return kExitUsage;
      overrides.push_back("stats.interval_ms=" + v);
    } else if (a == "--store") {
      if (!value(&v)) return kExitUsage;
      overrides.push_back("store.path=" + v);
    } else if (a == "--recover-to-last-consistent") {
      overrides.push_back("store.recover_to_last_consistent=true");
    } else if (a == "--duration-s") {
      if (!value(&v)) return kExitUsage;
      overrides.push_back("run.duration_s=" + v);
    } else {
      std::fprintf(stderr, "flowclassd: unknown argument \"%s\"\n", a.c_str());
      Usage(stderr);
      return kExitUsage;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "flowclassd: no config file (-c FILE)\n");
    Usage(stderr);
    return kExitUsage;
  }

  // SIGINT/SIGTERM from here on stop the daemon cleanly (exit 0), also while
  // it starts: each start-up step below checks for a signal before the next
  // (loading a large rule set takes seconds; a pod can be deleted meanwhile).
  if (!check_only) {
    struct sigaction sa = {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    // SIGHUP re-reads the API's credentials (grpc.auth.token_file, the TLS
    // files); it never stops the daemon.
    struct sigaction hup = {};
    hup.sa_handler = OnHangup;
    sigemptyset(&hup.sa_mask);
    sigaction(SIGHUP, &hup, nullptr);
  }
  auto signal_name = [] {
    return g_signal.load() == SIGINT ? "SIGINT" : "SIGTERM";
  };

  absl::StatusOr<DaemonConfig> config = LoadConfig(config_path, overrides);
  if (!config.ok()) {
    std::fprintf(stderr, "flowclassd: config error: %s\n",
                 std::string(config.status().message()).c_str());
    return kExitConfig;
  }
  // The TLS files (PEM, the key is the certificate's) before anything starts:
  // gRPC would only say "cannot listen", after EAL and the ports.  Not with
  // --check-config, which leaves them alone (secrets are mounted only where
  // the daemon runs; the chart's tests check rendered configs without them).
  // The server is given what was read here (the files are read once).
  GrpcTlsPem tls;
  if (config->grpc.enabled && !check_only) {
    absl::StatusOr<GrpcTlsPem> pem = LoadGrpcTlsFiles(config->grpc);
    if (!pem.ok()) {
      std::fprintf(stderr, "flowclassd: config error: %s\n",
                   std::string(pem.status().message()).c_str());
      return kExitConfig;
    }
    tls = *std::move(pem);
    // The token file too (StartGrpcServer reads it again, after EAL).
    if (absl::StatusOr<std::shared_ptr<const AuthPolicy>> p = AuthPolicy::Load(config->grpc);
        !p.ok()) {
      std::fprintf(stderr, "flowclassd: config error: %s\n",
                   std::string(p.status().message()).c_str());
      return kExitConfig;
    }
  }
  absl::StatusOr<std::vector<RuleOp>> rules = LoadRules(*config);
  if (!rules.ok()) {
    std::fprintf(stderr, "flowclassd: rules error: %s\n",
                 std::string(rules.status().message()).c_str());
    return kExitRules;
  }
  if (check_only) {
    std::printf("%s%zu rules ok\nconfig ok\n", DescribeConfig(*config).c_str(),
                rules->size());
    return kExitOk;
  }

  // From here on, leave through `finish` so EAL is cleaned up (CleanupEal
  // does nothing before InitEal).
  auto finish = [](int code) {
    CleanupEal();
    return code;
  };
  // Start-up ends early: no thread of ours may use the dataplane after this,
  // so the /metrics exporter (whose HTTP threads call Stats()) goes first.
  // Declared so that, destroyed in reverse, the exporter goes before what it
  // reads: the dataplane and the apply-latency histogram.
  std::unique_ptr<DpdkDataplane> owned;      // set once created
  ApplyLatencyMetrics apply_latency;
  // ---- readiness: gRPC health, /readyz, /healthz (server/readiness.h) ----
  // Not ready until the start-up rule load is done and the watchdog sees
  // every PMD run; its watchdog stops before the dataplane goes.
  Readiness readiness(
      ReadinessOptions{std::chrono::milliseconds(config->pmd_stall_timeout_ms)});
  // ---- end readiness ----
  std::unique_ptr<MetricsExporter> metrics;
  // Started before the restore (its calls UNAVAILABLE until it is done),
  // shut down before anything it calls goes.
  std::unique_ptr<GrpcServer> grpc_server;
  auto abort_start = [&](int code) {
    if (grpc_server) grpc_server->Shutdown();  // no API call past here
    readiness.Stop();
    metrics.reset();
    owned.reset();
    return finish(code);
  };
  auto stop_before_start = [&] {
    std::printf("flowclassd: stopping (%s) before start\n", signal_name());
    const int code = abort_start(kExitOk);
    std::printf("flowclassd: stopped\n");
    std::fflush(stdout);
    return code;
  };
  if (g_signal.load() != 0) return stop_before_start();

  // The rule store, before EAL: a damaged or busy store refuses to start
  // before anything else is set up.
  absl::StatusOr<StartupStore> store = OpenRuleStore(config->store, stderr);
  if (!store.ok()) {
    std::fprintf(stderr, "flowclassd: store error: %s\n",
                 std::string(store.status().message()).c_str());
    return finish(kExitStore);
  }
  if (g_signal.load() != 0) return stop_before_start();

  absl::Status st = InitEal(config->eal);
  if (!st.ok()) {
    std::fprintf(stderr, "flowclassd: EAL error: %s\n",
                 std::string(st.message()).c_str());
    return kExitEal;
  }
  if (g_signal.load() != 0) return stop_before_start();

  SetupStage stage = SetupStage::kNone;
  absl::StatusOr<std::unique_ptr<DpdkDataplane>> dp =
      DpdkDataplane::Create(config->dataplane, &stage);
  if (!dp.ok()) {
    const char* what = "setup";
    int code = kExitInternal;
    switch (stage) {
      case SetupStage::kOptions: what = "config"; code = kExitConfig; break;
      case SetupStage::kLcore: what = "lcore"; code = kExitLcore; break;
      case SetupStage::kMempool: what = "mempool"; code = kExitMempool; break;
      case SetupStage::kPort: what = "port"; code = kExitPort; break;
      case SetupStage::kNone: break;
    }
    std::fprintf(stderr, "flowclassd: %s error: %s\n", what,
                 std::string(dp.status().message()).c_str());
    return finish(code);
  }
  owned = *std::move(dp);
  DpdkDataplane& dataplane = *owned;
  if (g_signal.load() != 0) return stop_before_start();

  // ---- metrics ----
  // Rule batches go through `observed` (it times ApplyBatch for the
  // apply-latency histogram); /metrics reads dataplane.Stats() per scrape.
  // Declared after `dp`'s pointee is alive and reset before it goes.
  ObservedDataplane observed(&dataplane, &apply_latency);
  if (config->metrics.enabled) {
    absl::StatusOr<std::unique_ptr<MetricsExporter>> m =
        MetricsExporter::Start(config->metrics, &dataplane, &apply_latency, &readiness);
    if (!m.ok()) {
      std::fprintf(stderr, "flowclassd: metrics error: %s\n",
                   std::string(m.status().message()).c_str());
      return abort_start(kExitMetrics);
    }
    metrics = std::move(*m);
    std::printf("flowclassd: metrics on %s\n", metrics->url().c_str());
  }
  // ---- end metrics ----

  // Every rule change from here on is durable before it is acknowledged.
  DurableDataplane durable(&observed, store->store.get());

  // ---- gRPC API: open during the restore (health NOT_SERVING, every
  // Classifier call UNAVAILABLE "restoring N rules"), served once the PMDs
  // run the restored rule set, stopped first. ----
  if (config->grpc.enabled) {
    config->grpc.restoring = absl::StrCat(
        "restoring ", store->state.generation > 0 ? store->state.rules.size() : rules->size(),
        " rules");
    absl::StatusOr<std::unique_ptr<GrpcServer>> gs =
        StartGrpcServer(&durable, config->grpc, tls, &readiness);  // durable, timed for /metrics
    if (!gs.ok()) {
      std::fprintf(stderr, "flowclassd: config error: %s\n",
                   std::string(gs.status().message()).c_str());
      return abort_start(kExitConfig);
    }
    grpc_server = *std::move(gs);
    std::printf("flowclassd: grpc open on %s (%s): %s, health NOT_SERVING\n",
                grpc_server->target().c_str(), config->grpc.plaintext ? "plaintext" : "tls",
                config->grpc.restoring.c_str());
    std::fflush(stdout);
  }
  // ---- end gRPC API ----
  if (!HoldRestoreForTesting()) return stop_before_start();

  st = RestoreRules(
      &*store, *rules,
      [&](absl::Span<const Rule> r, uint64_t gen) { return dataplane.Restore(r, gen); },
      &durable, stdout);
  if (!st.ok()) {
    // Restoring the store's generation, or (an empty store) seeding it.
    const bool restoring = store->state.generation > 0;
    std::fprintf(stderr, "flowclassd: %s error: %s\n", restoring ? "store" : "rules",
                 std::string(st.message()).c_str());
    return abort_start(restoring ? kExitStore : kExitRules);
  }
  const uint64_t start_rules =
      store->state.generation > 0 ? store->instance.restored_rules : rules->size();
  config->grpc.instance = store->instance;

  if (g_signal.load() != 0) return stop_before_start();

  st = dataplane.Start();
  if (!st.ok()) {
    std::fprintf(stderr, "flowclassd: port error: %s\n",
                 std::string(st.message()).c_str());
    return abort_start(kExitPort);
  }
  readiness.Start([&dataplane] { return dataplane.Heartbeat(); });
  std::printf("flowclassd: running, %zu PMD(s), %zu port(s), generation %llu "
              "(%zu rules); pid %d; version %s\n",
              config->dataplane.pmd_lcores.size(), config->dataplane.ports.size(),
              static_cast<unsigned long long>(dataplane.generation()),
              static_cast<size_t>(start_rules), static_cast<int>(getpid()), kFlowclassVersion);
  for (size_t i = 0; i < config->dataplane.pmd_lcores.size(); ++i) {
    std::string qs;
    for (auto [port, q] : dataplane.RxQueuesOf(static_cast<int>(i)))
      absl::StrAppend(&qs, " ", port, ":", q);
    std::printf("flowclassd: pmd %zu on lcore %d polls%s\n", i,
                config->dataplane.pmd_lcores[i], qs.empty() ? " nothing" : qs.c_str());
  }
  for (const DpdkPortInfo& p : dataplane.Ports()) {
    if (p.rx_queues == 0) {
      std::printf("flowclassd: port %u (%s): tx only\n", p.number, p.device.c_str());
    } else if (p.rss_hf != 0) {
      std::printf("flowclassd: port %u (%s): %u rx queues, RSS on (rss_hf 0x%llx)\n", p.number,
                  p.device.c_str(), p.rx_queues, static_cast<unsigned long long>(p.rss_hf));
    } else {
      std::printf("flowclassd: port %u (%s): %u rx queue(s), RSS off\n", p.number,
                  p.device.c_str(), p.rx_queues);
    }
  }
  // The restore window ends: the PMDs run the restored rule set.
  if (grpc_server) {
    grpc_server->Restored(store->instance);
    std::printf("flowclassd: grpc listening on %s (%s)\n", grpc_server->target().c_str(),
                config->grpc.plaintext ? "plaintext" : "tls");
    if (std::string w = GrpcAuthWarning(config->grpc); !w.empty())
      std::printf("flowclassd: warning: grpc authorization is off: %s\n", w.c_str());
  }
  readiness.SetRulesRestored(true);  // the store is restored (or the empty store seeded)
  std::fflush(stdout);

  TestingStallHook stall_hook;
  if (stall_hook.enabled())
    std::fprintf(stderr,
                 "flowclassd: warning: %s is set: test hook, a PMD is stalled while %s "
                 "exists\n",
                 TestingStallHook::kEnv, stall_hook.path().c_str());

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_stats = start + std::chrono::milliseconds(config->stats_interval_ms);
  CapLog cap_log;  // megaflow caps that bit, from counter deltas (rate-limited)
  while (g_signal.load() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (stall_hook.enabled()) stall_hook.Poll(dataplane);
    if (g_reload.exchange(false) && grpc_server) {
      for (const std::string& line : grpc_server->Reload(config->grpc))
        std::printf("flowclassd: SIGHUP: %s\n", line.c_str());
      std::fflush(stdout);
    }
    const auto now = Clock::now();
    if (cap_log.Due(now)) {
      for (const std::string& line : cap_log.Report(dataplane.Stats(), dataplane.GetConfig(), now))
        std::fputs(line.c_str(), stdout);
      std::fflush(stdout);
    }
    if (config->run_duration_s &&
        now - start >= std::chrono::seconds(config->run_duration_s))
      break;
    if (config->stats_interval_ms && now >= next_stats) {
      PrintStats("stats", dataplane.Stats(), /*ports=*/false);
      next_stats = now + std::chrono::milliseconds(config->stats_interval_ms);
    }
  }
  const int sig = g_signal.load();
  std::printf("flowclassd: stopping (%s)\n",
              sig ? (sig == SIGINT ? "SIGINT" : "SIGTERM") : "duration reached");
  stall_hook.Release(dataplane);
  if (grpc_server) grpc_server->Shutdown();  // no API calls past here
  readiness.Stop();
  metrics.reset();  // no scrape while the dataplane stops
  dataplane.Stop();
  const DataplaneStats final_stats = dataplane.Stats();
  PrintStats("final", final_stats, /*ports=*/true);
  if (config->stats_final) {
    std::fputs(final_stats.ToString().c_str(), stdout);
    std::fflush(stdout);
  }
  owned.reset();
  std::printf("flowclassd: stopped\n");
  std::fflush(stdout);
  return finish(kExitOk);
}

}  // namespace
}  // namespace flowclass

int main(int argc, char** argv) { return flowclass::Main(argc, argv); }
