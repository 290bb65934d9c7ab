// dataplane.h — the control interface of a running dataplane.
//
// Contract
// --------
// `Dataplane` is what the control plane (the gRPC service, flowclassd's own
// start-up code, tests) calls.  It has two implementations:
//   DpdkDataplane (dataplane/dpdk/dpdk_dataplane.h)  PMD threads on DPDK ports;
//   FakeDataplane (server/testing/fake_dataplane.h)  a RuleTable and counters,
//                                                    for control-plane tests.
// Both honour the same contract:
//
// * Threads: every method may be called from any non-PMD thread, concurrently;
//   implementations serialise what needs serialising.  PMD threads never call
//   in here and never wait for anything done here.
// * ApplyBatch(ops) validates the whole batch against the current rule set
//   and changes nothing unless every operation is valid (the RuleTable's
//   all-or-nothing rule).  When it returns OK with generation G, every packet
//   that a PMD receives from then on is classified by rule set G: the new
//   table has been published and every online PMD has installed it (its caches
//   revalidated) and passed a quiescent point.  The previous table has been
//   freed by then.  Batches are applied in call order; an empty batch is
//   acknowledged with the current generation and changes nothing.
// * Stats() is a snapshot taken without stopping the PMDs: every counter is
//   exact for some instant of its own PMD, but counters of different PMDs (and
//   different counters of one PMD) may be read at slightly different instants.
//   Counters only grow.  Once the dataplane has stopped, the snapshot is final
//   and its accounting identity holds exactly:
//     rx_packets == tx_packets + tx_dropped + rule_drops + no_match + bad_port
//   (summed per PMD, or over all PMDs).
// * GetConfig/ApplySettings expose the run-time tunables by dotted name (the
//   same names as the YAML config, e.g. "pmd.tx_retries"; runtime_settings.h
//   lists them).  ApplySettings is all or nothing: it checks every key and
//   value first (ParseRuntimeSettingsRequest: keys that can only be set at
//   start-up are readable but answer FAILED_PRECONDITION, unknown keys
//   NOT_FOUND, bad values INVALID_ARGUMENT naming the key) and changes
//   nothing unless all of them are good; then it applies all of them (the
//   DPDK dataplane hands a request's pipeline settings to each PMD at once).
#ifndef FLOWCLASS_DATAPLANE_DATAPLANE_H_
#define FLOWCLASS_DATAPLANE_DATAPLANE_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dataplane/pipeline.h"
#include "dataplane/pmd_counters.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"
#include "dataplane/runtime_settings.h"

namespace flowclass {

// Packets of one (port, queue) as seen by one PMD.  For rx the queue is the
// device's rx queue; for tx it is the PMD's own tx queue on that port (one tx
// queue per PMD), and `dropped` counts what the tx queue refused.
struct QueueCounters {
  uint32_t port = 0;     // rule port number
  uint32_t queue = 0;
  uint64_t packets = 0;
  uint64_t dropped = 0;  // tx only
};

// Counters of one PMD thread (one polling lcore).  The loop's own counters
// (iterations, rx_packets, tx_packets, tx_dropped, rule_drops, no_match,
// bad_port, parse_errors, busy_cycles, idle_cycles, generation) are the
// PmdLoopStats base: one line each of FLOWCLASS_PMD_LOOP_COUNTERS
// (dataplane/pmd_counters.h), which says what each counts.
struct PmdCounters : PmdLoopStats {
  uint32_t pmd = 0;            // index in [0, number of PMDs)
  uint32_t lcore = 0;          // EAL lcore id (0 for the fake)
  PmdStats pipeline;           // the pipeline's own counters (EMC, SMC, ...)
  std::vector<QueueCounters> rx_queues;  // every rx queue this PMD polls
  std::vector<QueueCounters> tx_queues;  // this PMD's tx queue of every port
  // Structural state of the PMD's pipeline (EMC/SMC/CD occupancy, CD on/off,
  // megaflows, subtables with hits and rank) as the PMD itself reported it at
  // a quiescent point during this Stats() call (or at exit, once stopped).
  // has_snapshot is false when the PMD could not answer (not started, or it
  // did not reach a quiescent point in time); `snapshot` is then empty.
  // snapshot.stats may be slightly newer than `pipeline`.
  bool has_snapshot = false;
  PipelineSnapshot snapshot;

  // Cycles per received packet over the PMD's busy time (0 before any rx).
  double CyclesPerPacket() const {
    return rx_packets ? static_cast<double>(busy_cycles) / rx_packets : 0.0;
  }
};

// Whether a PMD still runs its loop, as a watchdog samples it
// (DpdkDataplane::Heartbeat; server/readiness.h): cheap, no PMD involved.
struct PmdHeartbeat {
  uint32_t pmd = 0;
  uint32_t lcore = 0;
  bool running = false;     // its loop has started and not ended
  uint64_t iterations = 0;  // loop iterations so far (advances while it runs)
  uint64_t generation = 0;  // rule generation it has installed
};
struct DataplaneHeartbeat {
  uint64_t generation = 0;        // last published rule generation
  uint64_t publish_timeouts = 0;  // publications a PMD did not take in time
  // The generation of the last publication that timed out while a PMD still
  // has not installed it; 0 when none is owed.
  uint64_t owed_generation = 0;
  std::vector<PmdHeartbeat> pmds;
};

// Counters of one configured port.
struct PortCounters {
  uint32_t number = 0;       // the port number rules use (in_port, output:N)
  std::string device;        // DPDK device name or PCI address
  uint64_t tx_packets = 0;   // summed over PMDs (our view)
  uint64_t tx_dropped = 0;   // summed over PMDs
  // The device's own view (rte_eth_stats); zero in the fake.
  uint64_t dev_ipackets = 0;
  uint64_t dev_opackets = 0;
  uint64_t dev_imissed = 0;
  uint64_t dev_ierrors = 0;
  uint64_t dev_oerrors = 0;
  uint64_t dev_rx_nombuf = 0;
  uint64_t rx_packets = 0;   // received from this port's queues, summed over PMDs
};

// The acl pipeline's builder (pipeline.kind acl; docs/acl-pipeline.md):
// what it compiled and published.  All zero (enabled false) for megaflow.
struct AclBuilderStats {
  bool enabled = false;
  uint64_t builds = 0;             // classifiers built and published
  uint64_t build_failures = 0;     // builds that failed (their batches too)
  uint64_t build_ns = 0;           // total time of the builds (rte_acl_add_rules + build)
  uint64_t last_build_ns = 0;
  uint64_t last_build_rules = 0;   // rules of the last build
  uint64_t rules_built = 0;        // rules over every build
  uint64_t batches = 0;            // rule-changing batches the builds covered
  uint64_t coalesced_batches = 0;  // of those, past the first of their build
  uint64_t queue_depth = 0;        // batches applied, waiting for a build now
  uint64_t live_generation = 0;    // generation every PMD classifies with
  // The classify implementation the PMDs run (pipeline.acl_algorithm, kDefault
  // resolved to what it stands for; kAutovalidator as is).
  AclAlgorithm algorithm = AclAlgorithm::kDefault;
  // Keys on which some implementation differed from scalar while the
  // autovalidator ran, over every classifier since start.
  uint64_t autovalidator_mismatches = 0;
  // DPDK heap bytes the live classifier's rte_acl contexts hold (rules and
  // tries; AclBuildStats::context_bytes).
  uint64_t context_bytes = 0;
  // Builds by duration: le_ms[i] counts builds of at most kBucketsMs[i]
  // ms (cumulative, Prometheus style); `builds` is the +Inf bucket.
  static constexpr double kBucketsMs[] = {1, 5, 20, 100, 500, 2000, 10000};
  static constexpr size_t kNumBuckets = std::size(kBucketsMs);
  uint64_t le_ms[kNumBuckets] = {};
};

struct DataplaneStats {
  uint64_t generation = 0;  // last acknowledged rule set
  RuleTableStats rules;
  AclBuilderStats acl;
  std::vector<PmdCounters> pmds;
  std::vector<PortCounters> ports;
  uint64_t tsc_hz = 0;      // to turn cycles into time (0 if unknown)

  // Sum over every PMD (pmd and lcore fields are zero).
  PmdCounters Total() const;
  // Multi-line human-readable dump (as `ovs-appctl dpif-netdev/pmd-stats-show`).
  std::string ToString() const;
};

// What Dataplane::Trace found for one key (control path, see Trace below).
struct TraceResult {
  uint64_t generation = 0;     // rule set traced against
  bool matched = false;        // false: no rule matched (the packet is dropped)
  Rule rule;                   // the winning rule when matched
  Flow megaflow_mask;          // wildcard mask RuleTable::Lookup reported
  int rule_subtables_visited = 0;  // RuleTable subtables probed
  // Where a PMD would find the answer ("emc", "smc", "cd", "megaflow",
  // "upcall"), or "slow_path" when only the rule table was consulted.
  std::string layer = "slow_path";
  // The PMD whose caches were traced (the first one that has the key cached,
  // else the first that answered); -1 when no PMD was traced.
  int pmd = -1;
  // A PMD has the key's megaflow cached: its value and mask (megaflow_mask
  // is then the cached mask, not the slow path's).
  bool has_megaflow = false;
  Flow megaflow_value;
  // Megaflow subtables a PMD would probe, in order; empty when unknown.
  std::vector<uint32_t> megaflow_subtables_visited;
};

// Packets classified by one rule.
struct RuleHit {
  uint64_t id = 0;
  uint64_t hits = 0;
};

// Which megaflows Dataplane::DumpMegaflows lists (everything unset: all).
struct MegaflowDumpRequest {
  MegaflowFilter filter;        // in_port, rule_id: checked by the PMD
  std::optional<uint32_t> pmd;  // only this PMD's megaflows
  std::string match;            // a substring of MegaflowText(entry)
  uint64_t limit = 0;           // at most this many (0: no limit)
};
// "in_port=1,udp,nw_src=10.0.0.0/24,..." (Flow::ToString of value and mask).
std::string MegaflowText(const MegaflowEntry& e);

// stats-clear (a baseline): `s` minus `baseline` in every counter (PMD loop
// and pipeline counters, rx/tx queues, ports; matched by PMD index, queue
// and port number); gauges (generation, occupancy, snapshot structure) are
// left as they are.  A counter below its baseline is left as it is (it
// restarted).  The dataplane's own counters stay monotonic.
void SubtractStatsBaseline(const DataplaneStats& baseline, DataplaneStats* s);

class Dataplane {
 public:
  virtual ~Dataplane() = default;

  // See the contract above.  INVALID_ARGUMENT / RESOURCE_EXHAUSTED from the
  // RuleTable; FAILED_PRECONDITION once the dataplane is stopped.
  virtual absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) = 0;

  // Group commit: applies batches[0], batches[1], ... in order, each one
  // atomically, with exactly the results of that many ApplyBatch calls
  // (results[i] is batch i's; a rejected batch changes nothing and does not
  // stop the ones after it; each accepted batch that changes the rules gets
  // its own generation).
  // The difference is when they become visible: an implementation may
  // publish the whole group once, so a stream of small batches pays one
  // grace period (and one PMD revalidation) per group instead of per batch.
  // On return every accepted batch of the group is acknowledged in the sense
  // above.  ApplyBatchesOneByOne (below) is the plain way.
  virtual std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) = 0;

  // ApplyBatches that also tells `decided` the group's results as soon as
  // they are decided (each batch accepted with its generation, or rejected),
  // before the group is published: a caller overlaps work of its own with
  // the publication (flowclassd writes the group to its rule store).
  // `decided` is called once, on the calling thread, with the results
  // ApplyBatches returns if the publication succeeds; a publication that
  // fails still turns the accepted ones into its error in what is returned
  // (their changes are in the rule table all the same).  The default calls
  // ApplyBatches, then `decided` with its results: no overlap.
  using DecidedFn = absl::FunctionRef<void(absl::Span<const absl::StatusOr<BatchResult>>)>;
  virtual std::vector<absl::StatusOr<BatchResult>> ApplyBatchesNotifying(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) {
    std::vector<absl::StatusOr<BatchResult>> results = ApplyBatches(batches);
    decided(results);
    return results;
  }

  // A group applied by ApplyBatchesDeferred.  `results` are ApplyBatches's,
  // final only once Finish() has returned: until then an accepted batch is
  // applied and published but not yet acknowledgeable (flowclassd: not yet
  // durable), and Finish() may still turn it into an error.  Used by one
  // thread at a time; it must be finished (or destroyed) before the
  // dataplane that returned it is.
  class Deferred {
   public:
    using FinishFn =
        absl::AnyInvocable<void(std::vector<absl::StatusOr<BatchResult>>* results) &&>;
    Deferred() = default;
    Deferred(std::vector<absl::StatusOr<BatchResult>> results, FinishFn finish = nullptr)
        : results_(std::move(results)), finish_(std::move(finish)) {}
    Deferred(Deferred&& o) noexcept
        : results_(std::move(o.results_)), finish_(std::exchange(o.finish_, nullptr)) {}
    Deferred& operator=(Deferred&& o) noexcept {
      if (this != &o) {
        Finish();  // the group it held is finished, not dropped
        results_ = std::move(o.results_);
        finish_ = std::exchange(o.finish_, nullptr);
      }
      return *this;
    }
    ~Deferred() { Finish(); }  // never leaves the group unfinished
    // Waits for what the results still wait on, once; returns them final.
    std::vector<absl::StatusOr<BatchResult>>& Finish() {
      if (finish_ != nullptr) std::move(std::exchange(finish_, nullptr))(&results_);
      return results_;
    }
    bool finished() const { return finish_ == nullptr; }

   private:
    std::vector<absl::StatusOr<BatchResult>> results_;
    FinishFn finish_;
  };
  // ApplyBatches in two steps, so that a caller can apply the next group
  // while this one finishes: returns once the group is applied and published
  // (the batches' operations must stay alive until Finish()), with the rest
  // (flowclassd: the group's commit to its rule store) left to Finish().
  // Groups are applied, and finished, in call order: a later group's
  // Finish() implies every earlier one's is done.  The default is
  // ApplyBatches, finished at once.
  virtual Deferred ApplyBatchesDeferred(absl::Span<const absl::Span<const RuleOp>> batches) {
    return Deferred(ApplyBatches(batches));
  }

  // Deletes every rule as one batch, acknowledged like ApplyBatch: one
  // generation, `deleted` = the rules there were; with no rules nothing
  // changes (the generation stays).  DeleteAllByListing (below) is the way
  // for an implementation without a direct one.
  virtual absl::StatusOr<BatchResult> DeleteAll() = 0;

  // Last acknowledged generation (0 before any batch).
  virtual uint64_t generation() const = 0;

  // A copy of every rule of the acknowledged rule set, in (priority desc, id
  // asc) order.
  virtual std::vector<Rule> ListRules() const = 0;

  virtual DataplaneStats Stats() const = 0;

  // Every key and its current value, as text.
  virtual std::map<std::string, std::string> GetConfig() const = 0;
  virtual absl::StatusOr<std::string> GetConfig(absl::string_view key) const = 0;
  // Sets every key of `values` to its value, or none (see the contract).
  virtual absl::Status ApplySettings(absl::Span<const ConfigValue> values) = 0;
  // ApplySettings of one key.
  absl::Status SetConfig(absl::string_view key, absl::string_view value) {
    const ConfigValue one{std::string(key), std::string(value)};
    return ApplySettings({&one, 1});
  }

  // A copy of rule `id` of the acknowledged rule set; NOT_FOUND otherwise.
  virtual absl::StatusOr<Rule> GetRule(uint64_t id) const = 0;
  // Classifies `key` on the calling (control) thread against the
  // acknowledged rule set, without touching any PMD or its caches.
  virtual absl::StatusOr<TraceResult> Trace(const FlowKey& key) const = 0;
  // Packets classified per rule (rules without hits may be left out);
  // UNIMPLEMENTED where the dataplane keeps no per-rule counts.
  virtual absl::StatusOr<std::vector<RuleHit>> RuleHits() const = 0;
  // The PMDs' megaflows that pass `req`, PMD by PMD, each PMD's in no
  // particular order; each PMD copies them in bounded steps between its
  // bursts, so a megaflow installed or removed during the dump may or may
  // not be listed, one alive throughout is listed once.  UNAVAILABLE when a
  // running PMD does not answer; UNIMPLEMENTED (this default) where the
  // dataplane keeps no megaflows.
  virtual absl::StatusOr<std::vector<MegaflowEntry>> DumpMegaflows(
      const MegaflowDumpRequest& req) const {
    (void)req;
    return absl::UnimplementedError("this dataplane keeps no megaflows");
  }
};

// Dataplane::ApplyBatches as one ApplyBatch call per batch, in order.
std::vector<absl::StatusOr<BatchResult>> ApplyBatchesOneByOne(
    Dataplane& dp, absl::Span<const absl::Span<const RuleOp>> batches);

// Dataplane::DeleteAll by listing the rules and deleting them by id in one
// batch, listing again (up to 5 times) when a concurrent writer deleted one
// of them first (a typed not-found, rule_error.h).
absl::StatusOr<BatchResult> DeleteAllByListing(Dataplane& dp);

// Replaces the whole rule set with `rules` as ONE batch (one generation, all
// or nothing): a replace of every id that stays, an insert of every new id,
// a delete of every id that goes.  Listing again (up to 5 times) when a
// concurrent writer changed the rule set between the listing and the batch
// (a typed not-found or already-exists).  A duplicate id in `rules` is
// INVALID_ARGUMENT naming its index, nothing changed.  BatchResult counts
// the batch's operations (inserted, replaced, deleted).
absl::StatusOr<BatchResult> ReplaceAllByListing(Dataplane& dp, absl::Span<const Rule> rules);

// The rule table of a restore (DpdkDataplane::Restore, FakeDataplane::Restore):
// `fresh` (empty) cleared and filled with `rules` so that it ends at exactly
// `generation`.  Errors: FAILED_PRECONDITION when `generation` is older than
// `current_generation`; INVALID_ARGUMENT for rules at generation 0; the
// table's own errors for a bad rule or a limit.
absl::Status RestoreRuleTable(absl::Span<const Rule> rules, uint64_t generation,
                              uint64_t current_generation, RuleTable* fresh);

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DATAPLANE_H_
