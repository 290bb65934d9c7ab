// dpdk_dataplane.h — the DPDK implementation of `Dataplane`: EAL, ports, PMDs.
//
// Contract
// --------
// * EAL: InitEal() once per process, from the main thread, before anything
//   else here (DPDK cannot re-initialise EAL in a process).  The calling
//   thread becomes the main lcore: it runs the control work (ApplyBatch,
//   Stats, config) and never polls a queue.  Test binaries therefore start one
//   EAL each, with their own --file-prefix.
// * DpdkDataplane::Create(options) opens the configured ports (a device that
//   already exists as an ethdev is used as is; otherwise it is probed with
//   rte_dev_probe: a vdev such as "net_pcap0" with its devargs, or a PCI
//   address such as "0000:3b:02.1" for an SR-IOV VF), creates one mbuf pool,
//   configures every port with its rx queues (RSS when the device supports it
//   and more than one queue is configured) and one tx queue per PMD, and
//   assigns rx queues to PMD lcores round-robin in (port, queue) order.  It
//   does not start polling.  Start() starts the ports and launches one PMD per
//   configured lcore; Stop() (and the destructor) stop the PMDs, then the
//   ports (which flushes net_pcap output files), and freezes the counters.
//   The destructor closes and detaches the devices Create probed; devices
//   that already existed (EAL-probed PCI VFs, ethdevs a test made) are only
//   stopped: their owner closes them.
// * PMD loop (per iteration): install the published rule table if it changed
//   and report that generation (see rule_publisher.h); for each assigned rx
//   queue: rx burst of up to `burst` (<= kMaxBurst) packets, ParseBurst,
//   Pipeline::ProcessBurst, then per output port one tx burst with up to
//   `tx_retries` retries; what a tx queue still refuses is freed and counted
//   as tx_dropped.  Drops (rule drop, no match, unknown output port) are freed
//   in bulk.  Every iteration is timed with the TSC and counted busy (some
//   packet received) or idle.  The PMD allocates nothing, takes no lock and
//   logs nothing.
// * Counters: each PMD owns a 64-byte aligned block of std::atomic<uint64_t>
//   that only it writes (relaxed load + store, no RMW: the cost of a plain
//   add): its loop's counters, one per FLOWCLASS_PMD_LOOP_COUNTERS entry, and
//   a mirror of its pipeline's (FLOWCLASS_PMD_COUNTERS, stored after every
//   busy iteration); see dataplane/pmd_counters.h.  Stats() reads them
//   relaxed; see dataplane.h for the guarantee.
// * Multi-segment mbufs are not supported: the parser sees the first segment
//   (net_pcap and SR-IOV VFs with the default 2 KiB data room and standard
//   MTU deliver single segments).
// * Run-time settings: ApplySettings publishes every pipeline setting of a
//   request to the PMDs as one version (a PMD takes them all at the top of
//   one iteration) and returns once each running PMD has, or
//   DEADLINE_EXCEEDED after 2 s: then the request is applied, but a PMD has
//   not confirmed it yet.  When a PMD has not taken the previous request's
//   version yet, DEADLINE_EXCEEDED and nothing changes.
// * Publication deadline: a rule batch (ApplyBatch(es), DeleteAll) waits at
//   most publish_timeout_ms for every running PMD to install it.  Then it
//   fails with DEADLINE_EXCEEDED naming the PMD and its lcore: the batch is
//   applied and published (the other PMDs run it, the late one takes it when
//   it resumes, ListRules shows it) but not acknowledged.  Until that PMD has
//   installed it, every further batch fails at once with UNAVAILABLE naming
//   the PMD and is not applied, and nothing the late PMD may still read is
//   freed (retired rule memory, deleted rules, the old table of a DeleteAll
//   stay allocated; see internal/dpdk_dataplane_impl.h).  Heartbeat() tells
//   a watchdog whether each PMD still passes its loop (server/readiness.h).
// * pipeline.kind: acl (docs/acl-pipeline.md, "Daemon side").  Each PMD
//   runs an AclPipeline (EMC -> rte_acl_classify) instead of the megaflow
//   Pipeline.  A batch is checked (CheckAclExpressible: a rule the ACL
//   cannot express refuses the whole batch, INVALID_ARGUMENT naming the
//   operation's index; nothing changes) and applied to the rule table under
//   apply_mu as for megaflow (same validation, ids, duplicates,
//   replacements); then the caller waits, without apply_mu, for the builder
//   thread (acl_builder.h), which compiles the table's newest generation into
//   a fresh AclClassifier off the PMDs and publishes it through the same
//   RulePublisher (each PMD installs it at a quiescent point, which
//   invalidates its EMC).  Batches applied while a build runs are coalesced
//   into the next build.  Each batch's result is returned (its ack) once its
//   generation is live on every PMD; the builder acks in generation order.
//   The old classifier is freed after the grace period (with a publication
//   timeout: once the lagging PMD has caught up, as the megaflow path keeps
//   retired memory).  A build that fails (rte_acl out of memory) fails every
//   batch it covered (INTERNAL / RESOURCE_EXHAUSTED, "applied but not
//   live"): the table keeps them, the PMDs keep the last live classifier,
//   and the next batch's build covers them again.  generation() and Stats()
//   report the live generation.  pipeline.acl_algorithm switches the classify
//   implementation of the live classifier and of every later build (checked
//   against the CPU first: FAILED_PRECONDITION, nothing changes); the other
//   pipeline.* run-time settings are accepted but only pmd.* ones change an
//   acl PMD; Trace answers from the live classifier (layer "acl"); no
//   megaflows (DumpMegaflows is empty).
// * Threads: all public methods from non-PMD threads; ApplyBatch and
//   ApplySettings are serialised internally.
#ifndef FLOWCLASS_DATAPLANE_DPDK_DPDK_DATAPLANE_H_
#define FLOWCLASS_DATAPLANE_DPDK_DPDK_DATAPLANE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "dataplane/acl_algorithm.h"
#include "dataplane/dataplane.h"
#include "dataplane/pipeline.h"
#include "dataplane/pipeline_kind.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {

namespace dpdk_internal {
class AclBuilder;
}  // namespace dpdk_internal

// Ports a dataplane can have (rule port numbers are free in [0, 65535]).
inline constexpr int kMaxDataplanePorts = 32;
// PMD threads a dataplane can have.
inline constexpr int kMaxPmds = 64;
// EAL lcore ids are below this: RTE_MAX_LCORE of the DPDK we build with
// (Debian's: 128; eal.cc checks).  CPUs from 128 up are used
// through eal.lcore_map ("0@150,1@151").
inline constexpr int kMaxEalLcores = 128;

struct EalOptions {
  std::string program = "flowclassd";  // argv[0] for EAL
  int main_lcore = 0;                  // control thread's lcore
  std::vector<int> pmd_lcores;         // worker lcores (PMDs)
  // Optional raw --lcores map, e.g. "0@0,1@1,2@1" to run more lcores than
  // CPUs (tests).  When set it replaces the -l list built from the above.
  std::string lcore_map;
  bool hugepages = true;      // false: --no-huge (needs memory_mb)
  int memory_mb = 0;          // -m; 0 = EAL default (required with no hugepages)
  std::string file_prefix;    // --file-prefix; unique per process on a host
  bool pci = true;            // false: --no-pci
  std::vector<std::string> pci_allow;  // -a <pci>[,devargs]
  std::vector<std::string> vdevs;      // --vdev <name>[,devargs]
  std::string log_level;               // --log-level (e.g. "warning")
  std::vector<std::string> extra_args; // appended verbatim
};

// The argv InitEal passes to rte_eal_init (argv[0] included).
std::vector<std::string> BuildEalArgs(const EalOptions& opts);

// rte_eal_init with BuildEalArgs(opts).  FAILED_PRECONDITION if EAL is
// already initialised in this process; INTERNAL with rte_strerror's text if
// rte_eal_init fails (no hugepages, lcore not available, unknown option...).
absl::Status InitEal(const EalOptions& opts);
bool EalInitialized();
// rte_eal_cleanup(); after it no DPDK call may be made.
void CleanupEal();

struct PortOptions {
  uint32_t number = 0;      // rule-visible number: in_port and output:<number>
  std::string device;       // ethdev name, vdev name ("net_pcap0") or PCI address
  std::string devargs;      // for probing ("rx_pcap=in.pcap,tx_pcap=out.pcap")
  bool poll = true;         // false: tx-only, no rx queue is polled
  int rx_queues = 1;
  int rx_descriptors = 1024;
  int tx_descriptors = 1024;
  bool rss = true;          // RSS over IP/TCP/UDP when rx_queues > 1
  bool promiscuous = true;
  // The rx queues the port is opened with (none when it is not polled).
  uint16_t OpenedRxQueues() const { return poll ? static_cast<uint16_t>(rx_queues) : 0; }
};

struct DpdkDataplaneOptions {
  std::vector<PortOptions> ports;
  std::vector<int> pmd_lcores;    // one PMD per lcore; each an EAL worker lcore
  int burst = kMaxBurst;          // rx burst size, 1..kMaxBurst
  int tx_retries = 4;             // extra tx attempts before counting a drop
  uint32_t idle_sleep_us = 0;     // sleep after an idle iteration (0: pure poll)
  uint32_t mbufs = 0;             // pool size; 0 = computed from the ports
  uint32_t mbuf_cache = 256;
  uint16_t mbuf_data_room = 2048 + 128;  // RTE_MBUF_DEFAULT_BUF_SIZE
  // pipeline.kind: which pipeline each PMD runs (see "pipeline.kind: acl"
  // above).  `pipeline` configures the megaflow one; the acl one takes its
  // EMC settings (emc on/off, emc_config.entries, insert_inv_prob).
  PipelineKind kind = PipelineKind::kMegaflow;
  // pipeline.acl_algorithm (kind acl): the rte_acl classify implementation
  // the PMDs start with; Create refuses one this CPU lacks.  A run-time
  // setting too (ApplySettings; GetConfig lists it for kind acl only).
  AclAlgorithm acl_algorithm = AclAlgorithm::kDefault;
  PipelineConfig pipeline;
  RuleTableLimits limits;
  // pmd.publish_timeout_ms: how long a rule batch waits for every PMD to
  // install it (see the publication deadline above); 1..kMaxPublishTimeoutMs.
  uint32_t publish_timeout_ms = 5000;
};
inline constexpr uint32_t kMaxPublishTimeoutMs = 600000;

// Which part of Create() failed, for exit codes.
enum class SetupStage { kNone, kOptions, kLcore, kMempool, kPort };

// What Create made of one configured port.
struct DpdkPortInfo {
  uint32_t number = 0;
  std::string device;
  uint16_t rx_queues = 0;  // 0 for a tx-only port (poll: false)
  uint64_t rss_hf = 0;     // RTE_ETH_RSS_* configured; 0 = no RSS
};

class DpdkDataplane final : public Dataplane {
 public:
  // EAL must be initialised.  On error `*failed`, if not null, says where.
  static absl::StatusOr<std::unique_ptr<DpdkDataplane>> Create(
      const DpdkDataplaneOptions& options, SetupStage* failed = nullptr);
  ~DpdkDataplane() override;

  // Starts ports and PMDs.  FAILED_PRECONDITION when already started or
  // stopped; an error from rte_eth_dev_start / rte_eal_remote_launch.
  absl::Status Start();
  // Stops PMDs (waits for them), then the ports.  Idempotent.  Counters read
  // afterwards are final.
  void Stop();
  bool running() const { return running_.load(std::memory_order_acquire); }

  // The rx queues PMD i polls, as (port number, queue) pairs.
  std::vector<std::pair<uint32_t, int>> RxQueuesOf(int pmd) const;
  // The configured ports, in configuration order.
  std::vector<DpdkPortInfo> Ports() const;
  // DPDK port id of the port with rule number `number` (-1 if none).
  int EthPortOf(uint32_t number) const;

  // Replaces the rule set with `rules` at exactly `generation` (what a
  // durable rule store kept; server/rule_restore.h), as one publication of a
  // new table, before or after Start().  All or nothing: the table's
  // validation and limits apply (INVALID_ARGUMENT / RESOURCE_EXHAUSTED, nothing
  // changed); FAILED_PRECONDITION for a generation older than the current one
  // or once stopped.  Not part of the Dataplane interface: restoring is a
  // start-up step of the concrete dataplane (like Start), done before the
  // control plane serves anything.
  absl::Status Restore(absl::Span<const Rule> rules, uint64_t generation);

  // Dataplane:
  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override;
  // One publication (one grace period, one revalidation per PMD) per group.
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override;
  // `decided` runs after the rule table has taken the group, before its
  // publication.
  std::vector<absl::StatusOr<BatchResult>> ApplyBatchesNotifying(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) override;
  // One publication of an empty table; no list of the rules.
  absl::StatusOr<BatchResult> DeleteAll() override;
  uint64_t generation() const override;
  std::vector<Rule> ListRules() const override;
  DataplaneStats Stats() const override;
  std::map<std::string, std::string> GetConfig() const override;
  absl::StatusOr<std::string> GetConfig(absl::string_view key) const override;
  absl::Status ApplySettings(absl::Span<const ConfigValue> values) override;
  // Added with the gRPC API: both read the published table on the calling
  // (control) thread under the apply mutex; Trace reports layer "slow_path".
  absl::StatusOr<Rule> GetRule(uint64_t id) const override;
  // Summed over the PMD snapshots of one Stats() call; only rules of the
  // current rule set with at least one hit are listed.
  absl::StatusOr<std::vector<RuleHit>> RuleHits() const override;
  absl::StatusOr<TraceResult> Trace(const FlowKey& key) const override;
  // Each running PMD copies its megaflows in steps between bursts, through
  // its mailbox (at most 4096 visited and 1024 copied per step); snap_mu is
  // taken per step.
  absl::StatusOr<std::vector<MegaflowEntry>> DumpMegaflows(
      const MegaflowDumpRequest& req) const override;

  // Each PMD's loop iterations and installed generation, the published
  // generation and the publication timeouts so far: relaxed loads, no lock,
  // no PMD involved (any non-PMD thread, any time after Create).
  DataplaneHeartbeat Heartbeat() const;
  // Test hook: while `stalled`, PMD `pmd` stops at the end of its loop
  // iteration (holding its rule table, passing no quiescent point, answering
  // no mailbox) as a stuck PMD would; false lets it go on.  A stalled PMD
  // still leaves when the dataplane stops.  Returns once the running PMD is
  // in (or out of) the stall (at most 5 s).  Tests only.
  void StallPmdForTesting(int pmd, bool stalled);
  // Test hooks of pipeline.kind acl: the builder sleeps `delay` in each
  // build, after it took the table's rules (a slow build), and `observer`
  // is called on the builder thread with each batch's generation as the
  // batch is acknowledged, in ack order.
  void SetAclBuildDelayForTesting(std::chrono::milliseconds delay);
  void SetAclAckObserverForTesting(std::function<void(uint64_t generation)> observer);
  // While `hold`, each acl build stops after it took the table's rules, before
  // rte_acl_build, until released (a build that never ends, as far as the
  // PMDs can tell); AclBuildHeldForTesting() says one is stopped there.
  void HoldAclBuildForTesting(bool hold);
  bool AclBuildHeldForTesting() const;

 private:
  struct Impl;
  friend class dpdk_internal::AclBuilder;
  explicit DpdkDataplane(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> running_{false};
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPDK_DPDK_DATAPLANE_H_
