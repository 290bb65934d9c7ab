// flowclassd — the DPDK dataplane process.
//
//   flowclassd -c FILE [--set KEY=VALUE]... [--rules FILE] [--lcores L,L]
//              [--file-prefix NAME] [--stats-interval-ms N] [--duration-s N]
//              [--log-level LEVEL] [--log-format FORMAT]
//   flowclassd --check-config FILE [--set KEY=VALUE]...
// (server/daemon_flags.h parses them.)
//
// The main thread is the EAL main lcore: it loads the rules, starts the PMDs,
// logs per-PMD counters every stats.interval_ms and waits for SIGINT or
// SIGTERM (or run.duration_s), then stops PMDs and ports (flushing net_pcap
// output), logs the final counters and exits 0.  Every line it prints goes
// through the log (server/log.h: timestamp, level, text or JSON), but for
// what --check-config, --help and --version print.  Exit codes are kExit*
// in server/daemon_flags.h and in docs/flowclassd.md.
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
#include "server/daemon_flags.h"
#include "server/log.h"
#include "server/metrics/metrics_exporter.h"
#include "server/metrics/observed_dataplane.h"
#include "server/durable_dataplane.h"
#include "server/readiness.h"
#include "server/rule_restore.h"
#include "spdlog/spdlog.h"

namespace flowclass {
namespace {

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal.store(sig); }
std::atomic<bool> g_reload{false};
void OnHangup(int) { g_reload.store(true); }

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
  return out;
}

void PrintStats(const char* tag, const DataplaneStats& s, bool ports) {
  std::string out;
  for (const PmdCounters& p : s.pmds) absl::StrAppend(&out, PmdLine(tag, p), "\n");
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
  LogLines(*spdlog::default_logger(), LogLevel::kInfo, out);
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
      spdlog::info("testing: pmd {} stalled ({} exists)", pmd_, path_);
    } else {
      dp.StallPmdForTesting(pmd_, false);
      spdlog::info("testing: pmd {} resumed", pmd_);
      pmd_ = -1;
    }
  }
  void Release(DpdkDataplane& dp) {
    if (pmd_ >= 0) dp.StallPmdForTesting(pmd_, false);
    pmd_ = -1;
  }

 private:
  std::string path_;
  int pmd_ = -1;  // the stalled PMD, -1: none
};

// Test-only hooks (docs/operations.md, "Test hooks"), off unless the
// environment variable `env` names a file: while that file exists start-up
// waits at `what`, so a test can see the window before it.
// FLOWCLASS_TESTING_HOLD_RESTORE_FILE holds the restore (the gRPC server is
// open, NOT_SERVING); FLOWCLASS_TESTING_HOLD_GRPC_FILE holds the gRPC
// server's start (/metrics is served).  False when a signal came meanwhile.
bool HoldForTesting(const char* env, const char* what) {
  const char* p = std::getenv(env);
  if (p == nullptr || *p == '\0') return g_signal.load() == 0;
  spdlog::warn("warning: {} is set: test hook, the {} waits while {} exists", env, what, p);
  struct stat sb;
  if (::stat(p, &sb) == 0) {
    spdlog::info("testing: {} held ({} exists)", what, p);
    while (::stat(p, &sb) == 0 && g_signal.load() == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    spdlog::info("testing: {} released", what);
  }
  return g_signal.load() == 0;
}

// "<what> error: <message>" at level error (docs/flowclassd.md, "Exit codes").
void LogError(std::string_view what, const absl::Status& status) {
  const absl::string_view m = status.message();
  spdlog::error("{} error: {}", what, std::string_view(m.data(), m.size()));
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
  const ParsedFlags parsed = ParseDaemonFlags(argc, argv);
  if (!parsed.run) {
    std::fputs(parsed.out.c_str(), stdout);
    std::fputs(parsed.err.c_str(), stderr);
    return parsed.exit_code;
  }
  const std::string& config_path = parsed.flags.config_path;
  const bool check_only = parsed.flags.check_only;
  const std::vector<std::string>& overrides = parsed.flags.overrides;
  // The command line's log settings until the config file's are known (a
  // config error is logged as the flags ask).
  SetUpDaemonLog(LogOptionsFromOverrides(overrides));

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
    LogError("config", config.status());
    return kExitConfig;
  }
  // The config file's log settings (the flags are overrides in it), before
  // any other thread starts.
  if (!check_only) {
    SetUpDaemonLog(config->log);
    LogLines(*spdlog::default_logger(), LogLevel::kDebug, DescribeConfig(*config));
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
      LogError("config", pem.status());
      return kExitConfig;
    }
    tls = *std::move(pem);
    // The token file too (StartGrpcServer reads it again, after EAL).
    if (absl::StatusOr<std::shared_ptr<const AuthPolicy>> p = AuthPolicy::Load(config->grpc);
        !p.ok()) {
      LogError("config", p.status());
      return kExitConfig;
    }
  }
  absl::StatusOr<std::vector<RuleOp>> rules = LoadRules(*config);
  if (!rules.ok()) {
    LogError("rules", rules.status());
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
    spdlog::info("stopping ({}) before start", signal_name());
    const int code = abort_start(kExitOk);
    spdlog::info("stopped");
    return code;
  };
  if (g_signal.load() != 0) return stop_before_start();

  // The rule store, before EAL: a damaged or busy store refuses to start
  // before anything else is set up.
  absl::StatusOr<StartupStore> store = OpenRuleStore(config->store, *spdlog::default_logger());
  if (!store.ok()) {
    LogError("store", store.status());
    return finish(kExitStore);
  }
  if (g_signal.load() != 0) return stop_before_start();

  absl::Status st = InitEal(config->eal);
  if (!st.ok()) {
    LogError("EAL", st);
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
    LogError(what, dp.status());
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
      LogError("metrics", m.status());
      return abort_start(kExitMetrics);
    }
    metrics = std::move(*m);
    spdlog::info("metrics on {}", metrics->url());
  }
  // ---- end metrics ----

  // Every rule change from here on is durable before it is acknowledged.
  DurableDataplane durable(&observed, store->store.get(),
                           absl::Milliseconds(config->store.checkpoint_idle_ms));

  if (!HoldForTesting("FLOWCLASS_TESTING_HOLD_GRPC_FILE", "grpc start")) {
    return stop_before_start();
  }
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
      LogError("config", gs.status());
      return abort_start(kExitConfig);
    }
    grpc_server = *std::move(gs);
    spdlog::info("grpc open on {} ({}): {}, health NOT_SERVING", grpc_server->target(),
                 config->grpc.plaintext ? "plaintext" : "tls", config->grpc.restoring);
  }
  // ---- end gRPC API ----
  if (!HoldForTesting("FLOWCLASS_TESTING_HOLD_RESTORE_FILE", "restore")) {
    return stop_before_start();
  }

  st = RestoreRules(
      &*store, *rules,
      [&](absl::Span<const Rule> r, uint64_t gen) { return dataplane.Restore(r, gen); },
      &durable, *spdlog::default_logger());
  if (!st.ok()) {
    // Restoring the store's generation, or (an empty store) seeding it.
    const bool restoring = store->state.generation > 0;
    LogError(restoring ? "store" : "rules", st);
    return abort_start(restoring ? kExitStore : kExitRules);
  }
  const uint64_t start_rules =
      store->state.generation > 0 ? store->instance.restored_rules : rules->size();
  config->grpc.instance = store->instance;

  if (g_signal.load() != 0) return stop_before_start();

  st = dataplane.Start();
  if (!st.ok()) {
    LogError("port", st);
    return abort_start(kExitPort);
  }
  readiness.Start([&dataplane] { return dataplane.Heartbeat(); });
  spdlog::info("running, {} PMD(s), {} port(s), generation {} ({} rules); pid {}; version {}",
               config->dataplane.pmd_lcores.size(), config->dataplane.ports.size(),
               dataplane.generation(), start_rules, static_cast<int>(getpid()),
               kFlowclassVersion);
  for (size_t i = 0; i < config->dataplane.pmd_lcores.size(); ++i) {
    std::string qs;
    for (auto [port, q] : dataplane.RxQueuesOf(static_cast<int>(i)))
      absl::StrAppend(&qs, " ", port, ":", q);
    spdlog::info("pmd {} on lcore {} polls{}", i, config->dataplane.pmd_lcores[i],
                 qs.empty() ? " nothing" : qs);
  }
  for (const DpdkPortInfo& p : dataplane.Ports()) {
    if (p.rx_queues == 0) {
      spdlog::info("port {} ({}): tx only", p.number, p.device);
    } else if (p.rss_hf != 0) {
      spdlog::info("port {} ({}): {} rx queues, RSS on (rss_hf {:#x})", p.number, p.device,
                   p.rx_queues, p.rss_hf);
    } else {
      spdlog::info("port {} ({}): {} rx queue(s), RSS off", p.number, p.device, p.rx_queues);
    }
  }
  // The restore window ends: the PMDs run the restored rule set.
  if (grpc_server) {
    grpc_server->Restored(store->instance);
    spdlog::info("grpc listening on {} ({})", grpc_server->target(),
                 config->grpc.plaintext ? "plaintext" : "tls");
    if (std::string w = GrpcAuthWarning(config->grpc); !w.empty())
      spdlog::warn("warning: grpc authorization is off: {}", w);
  }
  readiness.SetRulesRestored(true);  // the store is restored (or the empty store seeded)

  TestingStallHook stall_hook;
  if (stall_hook.enabled())
    spdlog::warn("warning: {} is set: test hook, a PMD is stalled while {} exists",
                 TestingStallHook::kEnv, stall_hook.path());

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_stats = start + std::chrono::milliseconds(config->stats_interval_ms);
  CapLog cap_log;  // megaflow caps that bit, from counter deltas (rate-limited)
  while (g_signal.load() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (stall_hook.enabled()) stall_hook.Poll(dataplane);
    if (g_reload.exchange(false) && grpc_server) {
      for (const std::string& line : grpc_server->Reload(config->grpc))
        spdlog::info("SIGHUP: {}", line);
    }
    const auto now = Clock::now();
    if (cap_log.Due(now)) {
      for (const std::string& line : cap_log.Report(dataplane.Stats(), dataplane.GetConfig(), now))
        spdlog::warn("{}", line);
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
  spdlog::info("stopping ({})",
               sig ? (sig == SIGINT ? "SIGINT" : "SIGTERM") : "duration reached");
  stall_hook.Release(dataplane);
  if (grpc_server) grpc_server->Shutdown();  // no API calls past here
  readiness.Stop();
  metrics.reset();  // no scrape while the dataplane stops
  dataplane.Stop();
  const DataplaneStats final_stats = dataplane.Stats();
  PrintStats("final", final_stats, /*ports=*/true);
  if (config->stats_final)
    LogLines(*spdlog::default_logger(), LogLevel::kInfo, final_stats.ToString());
  owned.reset();
  spdlog::info("stopped");
  return finish(kExitOk);
}

}  // namespace
}  // namespace flowclass

int main(int argc, char** argv) { return flowclass::Main(argc, argv); }
