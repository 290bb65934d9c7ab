// pipeline.h — one PMD's classification pipeline: keys in, verdicts out.
//
// Contract
// --------
//   ProcessBurst(keys, n, verdicts):
//     EMC  (exact key -> megaflow)                          if enabled
//     SMC  (16-bit signature -> megaflow, verified)         on / off / auto
//     CD   (signature -> subtable; probe only that one)     on / off / auto
//     dpcls (ranked subtables of the key's in_port)
//     upcall: RuleTable::Lookup -> (rule, megaflow mask) -> install megaflow
//   With PipelineConfig::megaflows off, every packet goes straight to the
//   upcall's RuleTable::Lookup and nothing is cached.
//   The megaflow mask always includes in_port exactly, so megaflows of
//   different ports never overlap.  A hit at any layer is inserted into the
//   layers above it (EMC with probability 1/emc_insert_inv_prob).
//
// ProcessBurst is the per-packet path: it allocates nothing, takes no lock,
// logs nothing and throws nothing.  Every structure is sized at construction.
// The same code serves the PMD threads and `flowclassctl replay`.
//
// Counters (PmdStats, one table of them in dataplane/pmd_counters.h) add up:
// packets = emc_hits + smc_hits + megaflow_hits + upcall_ok + upcall_failed.
// megaflow_hits includes the hits found through the Cuckoo Distributor
// (cd_hits is a subset of megaflow_hits).  A "failed upcall" is a miss whose
// megaflow could not be installed (megaflow, subtable or table capacity): the
// packet still gets the RuleTable's verdict, it is just not cached.  Those
// the caps (max_megaflows, max_subtables_per_port) stopped are also counted
// by cap (upcalls_megaflow_cap, upcalls_subtable_cap).  no_match counts
// packets whose verdict is "no rule" at whatever layer they were classified.
//
// Upcall rate limit (upcall_rate > 0): each in_port's misses take tokens
// from that port's bucket; a miss that finds none is not upcalled: it counts
// as upcall_failed and upcalls_rate_limited, and either gets
// UpcallLimitedVerdict() (drop: also upcall_limit_drops, not no_match) or
// the RuleTable's verdict without an install (classify).  Mask-explosion
// defence (rare_mask_subtables > 0): a megaflow that needs a new subtable on
// a port that has that many already is installed only once its mask is
// popular (MaskIsPopular); until then its packets are classified, not
// installed (upcall_failed, upcalls_rare_mask).  With megaflows off neither
// applies (every packet is a slow-path lookup).
//
// Idle expiry: megaflows unused for megaflow_max_idle_ms are removed a few
// per burst (and per Housekeep) by the owning thread, the way revalidation
// removes them (see Housekeep below); megaflows_expired counts them.
//
// Rule changes: SetRuleTable(new) either revalidates every megaflow against
// the new table (default: a megaflow survives only if the new table gives its
// value a megaflow mask inside the old one, which proves every key it covers
// gets the rule its value gets; if that rule's verdict differs, the
// megaflow's verdict is changed in place) or flushes everything
// (`revalidate = false`).  Given the batch's RuleChangeSet, only megaflows
// the batch may affect are looked up again.  Caches pointing at removed megaflows die with them
// (EMC by version, SMC by verification, CD by subtable probe).  After
// SetRuleTable returns, no result derived from the old table survives.
//
// Threads: a Pipeline belongs to one PMD thread.  Every method is called from
// that thread (the control plane asks the PMD to call SetRuleTable at a
// quiescent point).  Snapshot()/DebugString() allocate and walk the tables:
// control path only.
#ifndef FLOWCLASS_DATAPLANE_PIPELINE_H_
#define FLOWCLASS_DATAPLANE_PIPELINE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "dataplane/cache/cache_cost_controller.h"
#include "dataplane/cache/cuckoo_distributor.h"
#include "dataplane/cache/emc.h"
#include "dataplane/cache/emc_gate.h"
#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"
#include "dataplane/dpcls/megaflow_classifier.h"
#include "dataplane/pmd_counters.h"
#include "dataplane/rules/rule_table.h"
#include "dataplane/cache/smc.h"

namespace flowclass {

// What becomes of a miss past its port's upcall budget.
enum class UpcallLimitAction : uint8_t {
  kDrop,      // dropped (UpcallLimitedVerdict), counted
  kClassify,  // the slow path's verdict, nothing installed
};
std::string_view UpcallLimitActionName(UpcallLimitAction a);  // "drop", "classify"
absl::StatusOr<UpcallLimitAction> ParseUpcallLimitAction(std::string_view s);

// Largest pipeline.upcall_rate (upcalls/s) and pipeline.upcall_burst.
inline constexpr uint32_t kMaxUpcallRate = 10000000;
inline constexpr uint32_t kMaxUpcallBurst = 10000000;
// The mask-explosion defence's default threshold (PipelineConfig::
// rare_mask_subtables): on by default since it classifies what it refuses
// (nothing is dropped) and keeps the Tuple Space Explosion attack's victim at
// >= 0.8x of its no-attack rate (docs/pipeline.md "Mask-explosion defence").
inline constexpr uint32_t kDefaultRareMaskSubtables = 32;

// The verdict of a miss the upcall rate limit dropped: no rule, action drop,
// and a port no rule's drop carries (a rule's verdict has rule_id != 0).
inline constexpr uint32_t kUpcallLimitedMark = 0xffffffffu;
inline constexpr Verdict UpcallLimitedVerdict() {
  return Verdict{0, Action{Action::Kind::kDrop, kUpcallLimitedMark}};
}
inline bool IsUpcallLimited(const Verdict& v) {
  return v.rule_id == 0 && v.action.port == kUpcallLimitedMark;
}

struct PipelineConfig {
  bool emc = true;
  EmcConfig emc_config;            // entries 8192, insert_inv_prob 100
  // Skip the EMC while it does not pay (EmcGate, cache/emc_gate.h): below
  // 1 hit in 8 keys over 64 bursts, only 1 burst in 8 looks it up and
  // inserts, until a window is above again.  false: every burst does.
  bool emc_adaptive = true;
  // on / off (OVS's default), or auto (the default): the SMC is used while
  // the pipeline spends fewer cycles per packet with it than without it,
  // measured every smc_window_ms by probing both (CacheCostController,
  // cache/cache_cost_controller.h).  Runtime: SetSmcMode.
  CacheMode smc = CacheMode::kAuto;
  // The auto rule's windows, margin and probe schedule (the mode is `smc`),
  // and the windows' length (0: only RunSmcWindow ends one; tests).
  CacheCostControllerConfig smc_controller;
  uint32_t smc_window_ms = 100;
  SmcConfig smc_config;            // 1M entries
  CdControllerConfig cd;           // mode auto; thresholds
  CdConfig cd_table;               // 1M entries
  // Megaflows in all: the pool is allocated with this many slots, and
  // SetMaxMegaflows may later lower the cap (or raise it back up to this).
  uint32_t max_megaflows = 200000; // OVS's default flow limit
  // Subtables one in_port may have (at most dpcls.max_subtables are there
  // in all).  A miss that needs one more is classified but not installed.
  uint32_t max_subtables_per_port = 1024;
  // A megaflow no packet used for this long is removed (OVS's max-idle);
  // 0: megaflows never expire.
  uint32_t megaflow_max_idle_ms = 10000;
  // Upcall rate limit: each in_port has a token bucket of upcall_burst
  // upcalls refilled at upcall_rate per second (on the pipeline clock); a
  // miss finding it empty gets upcall_limit_action.  0: unlimited.
  uint32_t upcall_rate = 0;
  uint32_t upcall_burst = 1000;
  UpcallLimitAction upcall_limit_action = UpcallLimitAction::kDrop;
  // Mask-explosion defence (0: off): on a port with at least this many
  // subtables, a megaflow that needs a new subtable is installed only once
  // its mask has missed kRareMaskMinMisses times within kRareMaskWindowMs;
  // until then the packet is classified without installing.
  uint32_t rare_mask_subtables = kDefaultRareMaskSubtables;
  MegaflowClassifierOptions dpcls;
  // Subtable ranking and the CD's adaptive decision run every interval.
  uint32_t ranking_interval_ms = 1000;
  // On a rule change: revalidate megaflows (true) or flush everything.
  bool revalidate = true;
  // false: no caching at all.  Every packet is a slow-path lookup
  // (RuleTable::Lookup, counted as upcall_ok); no EMC, SMC, CD or megaflow
  // is looked up or installed, so megaflows stay 0 and rule_hits empty.
  // What `flowclassctl replay --megaflows off` measures: the slow path's own
  // speed.  Checked once per burst.
  bool megaflows = true;
};

// INVALID_ARGUMENT naming the field.
absl::Status ValidatePipelineConfig(const PipelineConfig& config);

// The pipeline's notion of time for idle expiry, in milliseconds on any
// monotonic scale.  Read once per burst (and per Housekeep), so NowMs must
// be cheap and must not allocate, lock or block.  The default (no clock
// set) is the TSC, calibrated against steady_clock; tests and replays set
// their own.
class PipelineClock {
 public:
  virtual ~PipelineClock() = default;
  virtual uint64_t NowMs() const = 0;
};

// A clock that moves only when told (`now` is the time): the fake clock of
// the expiry / rate-limit tests and the simulated hour of soak_benchmark.
class ManualPipelineClock : public PipelineClock {
 public:
  explicit ManualPipelineClock(uint64_t start_ms = 1000) : now(start_ms) {}
  uint64_t NowMs() const override { return now; }
  uint64_t now;
};

// Where this pipeline would classify a key right now (Pipeline::Trace).
struct PipelineTrace {
  // "emc", "smc", "cd" (the Cuckoo Distributor's suggested subtable hit),
  // "megaflow" (the ranked subtable search), "upcall" (a miss: the slow
  // path decides and installs a megaflow) or "upcall_limited" (a miss that
  // its port's upcall budget would refuse now: upcall_limit_action decides,
  // dropped or classified, and nothing is installed).
  std::string layer;
  bool has_megaflow = false;  // false for "upcall" and "upcall_limited"
  Flow megaflow_value;
  Flow megaflow_mask;
  Verdict verdict;
  // Megaflow subtables probed, in order: the CD's suggestion first (if any),
  // then the ranked search up to the hit.
  std::vector<uint16_t> subtables_visited;
};

// What a PMD reports beyond its counters (control path).
struct PipelineSnapshot {
  PmdStats stats;
  bool cd_enabled = false;
  uint64_t cd_transitions = 0;
  // The SMC's state as decided (pipeline.smc; in auto a probe's windows do
  // not move it), whether a probe is running, and the auto rule's switches
  // and probes.
  bool smc_enabled = false;
  bool smc_probing = false;
  uint64_t smc_switches = 0;
  uint64_t smc_probes = 0;
  bool emc_skipping = false;  // the EMC gate samples 1 burst in 8
  uint32_t emc_occupancy = 0, emc_entries = 0;
  uint32_t smc_occupancy = 0, smc_entries = 0;
  uint32_t cd_occupancy = 0, cd_entries = 0;
  uint64_t megaflows = 0;
  uint64_t subtables = 0;
  std::vector<SubtableInfo> subtable;  // by port, then rank
  // Packets classified per rule id (rule 0, "no rule", left out), sorted by
  // id: hits of live megaflows plus those of megaflows already removed.
  // Packets of failed upcalls (not cached) are not attributed.
  std::vector<std::pair<uint64_t, uint64_t>> rule_hits;
};

// One live megaflow as Pipeline::DumpMegaflows copies it (control path).
struct MegaflowEntry {
  uint32_t pmd = 0;      // the owning PMD (the dataplane sets it)
  Flow value;            // its in_port is value's (megaflows match it exactly)
  Flow mask;
  Verdict verdict;       // rule_id 0: no rule matched
  uint64_t packets = 0;  // classified by it since it was installed
  uint64_t idle_ms = 0;  // since its last packet, on the pipeline's clock
  uint32_t index = 0;    // pool slot: (pmd, index, version) names it
  uint32_t version = 0;
  uint16_t subtable = 0;
};
// Which megaflows DumpMegaflows copies (unset: any).
struct MegaflowFilter {
  std::optional<uint32_t> in_port;
  std::optional<uint64_t> rule_id;
};

class Pipeline {
 public:
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(
      const PipelineConfig& config = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Installs the table to classify against (may be nullptr: everything
  // misses with verdict "no rule").  Revalidates or flushes the caches.
  // `changes`, when given, must describe exactly the step from the table
  // installed now to `table` (MakeRuleChangeSet of that batch): megaflows it
  // cannot affect are kept without a slow-path lookup; without one, every
  // megaflow is looked up again and the table must have no concurrent
  // writer (its Find is the writer's).  `generation`: the
  // rule set of `table` to classify by (the dataplane's PMDs share one table
  // that the control thread writes while they read it, and each looks up at
  // the generation it installed); by default the table's latest.
  void SetRuleTable(const RuleTable* table,
                    const RuleChangeSet* changes = nullptr,
                    uint64_t generation = RuleTable::kLatestGeneration);

  // keys[0..n) -> verdicts[0..n); 0 <= n <= kMaxBurst.  verdicts[n..] are
  // not written.  emc_prefetched: the keys were parsed with ParseBurst(...,
  // parse_prefetch()), which already prefetched their EMC slots.  Returns
  // true when n > 0 and all n packets are treated alike: the same action,
  // and either every one matched a rule or none did (the PMD then sends the
  // burst as it came, without sorting it by verdict).  Which rule matched
  // does not matter: the per-rule hits are counted here.
  bool ProcessBurst(const FlowKey* keys, int n, Verdict* verdicts,
                    bool emc_prefetched = false);
  // What ParseBurst should prefetch for ProcessBurst (nothing without EMC).
  HashPrefetch parse_prefetch() const {
    return EmcThisBurst() ? emc_.prefetch_hint() : HashPrefetch{};
  }

  // Runs the periodic work now (ranking, CD decision).  ProcessBurst calls it
  // by itself every ranking_interval_ms.
  void RunPeriodic();
  // Ends the SMC controller's window now: feeds it the cycles (upcalls left
  // out) and packets since the last window, and turns the SMC on or off as
  // it says.  ProcessBurst does it by itself every smc_window_ms (100).
  void RunSmcWindow();

  // Idle expiry.  Every ProcessBurst stamps the megaflows it uses with the
  // clock read at its start; then, if that clock moved on since the last
  // sweep (at most once per millisecond), it visits kExpiryPerTick
  // megaflows (a round-robin cursor over the live ones) and removes those
  // idle for megaflow_max_idle_ms, as revalidation removes them (EMC
  // entries die by version, SMC entries by verification, a stale CD
  // suggestion probes a subtable that misses; a subtable left empty goes,
  // and its rank with it).  Housekeep() reads the clock and does the same
  // without packets: the PMD calls it on idle iterations, so megaflows of a
  // port that went quiet still go.  Each call costs O(kExpiryPerTick) at
  // most, never O(megaflows).  Housekeep returns how many it removed.
  static constexpr uint32_t kExpiryPerTick = 64;
  uint32_t Housekeep();
  // Expiry never allocates: the hits of an expired megaflow whose rule has
  // no retired hits yet wait in a fixed table, one entry per rule (256
  // rules; the expired megaflows of one rule add up in its entry, so a scan
  // whose megaflows all name a few rules never fills it), and expiry skips
  // megaflows of further rules while it is full.  This moves them into the
  // retired hits (allocates: control path; SetRuleTable does it too, and
  // the DPDK PMD before answering a Stats() snapshot).
  void DrainRetiredHits();
  // nullptr: the TSC.  `clock` must outlive the pipeline (or the next call).
  void SetClock(const PipelineClock* clock);
  // The coarse "now" of the last burst or Housekeep, in the clock's ms.
  uint64_t now_ms() const { return now_ms_; }
  void SetMegaflowMaxIdleMs(uint32_t ms) { config_.megaflow_max_idle_ms = ms; }

  // Caps (see PipelineConfig).  When one bites, the miss still gets the
  // RuleTable's verdict and counts as upcall_failed plus
  // upcalls_megaflow_cap / upcalls_subtable_cap; nothing is installed.
  // Lowering a cap removes nothing (expiry and revalidation do).
  // SetMaxMegaflows above the pool size (config().max_megaflows at Create)
  // caps at the pool size.
  void SetMaxMegaflows(uint32_t n);
  void SetMaxSubtablesPerPort(uint32_t n);
  uint32_t max_megaflows() const { return dpcls_->megaflow_limit(); }

  // Upcall rate limit (see PipelineConfig).  Per in_port: the first
  // kUpcallBuckets ports a PMD sees get a bucket each, later ones share one.
  // A port's bucket starts full.  Changing the rate or burst keeps each
  // bucket's tokens (cut to the new burst).  Misses past the budget count as
  // upcall_failed and upcalls_rate_limited (drop: also upcall_limit_drops,
  // verdict UpcallLimitedVerdict(); classify: the RuleTable's verdict).
  static constexpr uint32_t kUpcallBuckets = 64;
  void SetUpcallLimit(uint32_t rate, uint32_t burst, UpcallLimitAction action);
  // Mask-explosion defence (see PipelineConfig); counted in upcalls_rare_mask.
  static constexpr uint32_t kRareMaskMinMisses = 4;
  static constexpr uint32_t kRareMaskWindowMs = 1000;
  // Past the threshold a port gets at most one new subtable per this long,
  // popular or not (an attacker repeating its masks gains 10 per second).
  static constexpr uint32_t kRareMaskInstallIntervalMs = 100;
  void SetRareMaskSubtables(uint32_t n) { config_.rare_mask_subtables = n; }
  uint32_t max_subtables_per_port() const { return dpcls_->max_subtables_per_port(); }

  // Runtime knobs (owner thread).
  void SetEmcInsertInvProb(uint32_t inv_prob);
  void SetEmcEnabled(bool on);
  // on / off force the SMC's state (off flushes it); auto hands it to the
  // cost controller, from the state it is in.
  void SetSmcMode(CacheMode mode);
  void SetCdMode(CdMode mode);
  void SetRankingIntervalMs(uint32_t ms) { config_.ranking_interval_ms = ms; }
  // Subtable lookup implementation priorities (subtable_lookup.h); setting
  // one re-probes every existing subtable.  INVALID_ARGUMENT naming the
  // implementation or the priority.
  absl::Status SetLookupPriority(std::string_view name, int priority);
  void SetLookupPriorities(const LookupPriorities& priorities);
  const LookupPriorities& lookup_priorities() const {
    return dpcls_->lookup_priorities();
  }
  // Differences found by the lookup autovalidator (0 unless it is selected).
  uint64_t lookup_mismatches() const { return dpcls_->lookup_mismatches(); }

  const PmdStats& stats() const { return stats_; }
  // Live megaflows (Snapshot().megaflows without the walk).
  uint64_t megaflow_count() const { return dpcls_->megaflow_count(); }
  const PipelineConfig& config() const { return config_; }
  const RuleTable* rule_table() const { return table_; }
  bool cd_enabled() const { return cd_ctl_.enabled(); }
  // Whether the SMC is looked up now (a probe's window included).
  bool smc_enabled() const { return smc_ctl_.enabled(); }
  PipelineSnapshot Snapshot() const;
  // The path ProcessBurst would take for `key` (same layers, same order,
  // same settings), without counting, inserting or ranking anything.
  // Control path: allocates; call it on the owning thread only.
  PipelineTrace Trace(const FlowKey& key) const;
  // One bounded step of a megaflow dump (control path, owner thread;
  // allocates nothing): visits at most `budget` live megaflows, from
  // position *cursor - 1 down (a *cursor past live() starts at the top),
  // copies those that pass `filter` into out[0, cap) and stops early once
  // `cap` are copied; *cursor is left at the next position (0: done).
  // Returns how many it copied.  A megaflow alive through all the steps of
  // a dump is copied at least once (a removal only moves an already visited
  // one down); it may be copied twice: (index, version) tells.
  uint32_t DumpMegaflows(const MegaflowFilter& filter, uint32_t* cursor, uint32_t budget,
                         MegaflowEntry* out, uint32_t cap) const;
  std::string DebugString() const;
  // pmd-stats-show style block.
  static std::string FormatStats(const PipelineSnapshot& s);

 private:
  explicit Pipeline(const PipelineConfig& config);
  // One burst whose keys all have the same in_port (bits of `todo`).
  void CacheAbove(const FlowKey& key, const Megaflow& mf, bool into_cd);
  void CacheMegaflowHits(const FlowKey* keys, uint32_t hits, Megaflow* const* mf,
                         bool into_cd);
  void ProcessPort(uint32_t in_port, const FlowKey* keys, uint32_t todo,
                   Megaflow** mf);
  // ProcessBurst with config_.megaflows off: the RuleTable for every key.
  bool SlowPathBurst(const FlowKey* keys, int n, Verdict* verdicts);
  void Revalidate(const RuleChangeSet* changes);
  // Adds a megaflow's hits to retired_rule_hits_ before it is removed.
  void RetireHits(const Megaflow& mf);
  // The same without allocating (expiry, on the per-packet path): a rule
  // the map has no entry for waits in pending_retired_.  False when that is
  // full: the megaflow must stay for now.
  bool RetireHitsNoAlloc(const Megaflow& mf);
  // Drops the retired hits of rules the new table_ no longer has.
  void ForgetDeletedRules(const RuleChangeSet* changes);
  void MaybePeriodic(uint64_t tsc);
  // The coarse clock at TSC reading `tsc` (SetClock's clock when set).
  uint64_t ReadNowMs(uint64_t tsc) const;
  // Re-anchors the TSC clock on steady_clock (every kBurstsPerClockCheck
  // bursts); returns steady_clock's now.
  std::chrono::steady_clock::time_point CalibrateClock(uint64_t tsc);
  // Visits up to `budget` live megaflows; removes the idle ones.
  uint32_t ExpireSome(uint32_t budget);
  // ExpireSome(kExpiryPerTick) when now_ms_ moved since the last sweep.
  uint32_t MaybeExpire();
  // Up to `want` upcalls from in_port's bucket: how many it grants.
  uint32_t TakeUpcallTokens(uint32_t in_port, uint32_t want);
  struct UpcallBucket;
  // in_port's entry of upcall_buckets_ (the shared last one when full).
  UpcallBucket& BucketOf(uint32_t in_port);
  // Whether a miss on in_port would find its bucket empty at `now_ms`
  // (Trace; takes nothing).
  bool UpcallWouldBeLimited(uint32_t in_port, uint64_t now_ms) const;
  // Whether a mask that needs a new subtable on a port past
  // rare_mask_subtables has missed often enough (counts this miss).
  bool MaskIsPopular(uint32_t in_port, const Flow& mask);

  PipelineConfig config_;
  const RuleTable* table_ = nullptr;
  uint64_t table_generation_ = RuleTable::kLatestGeneration;  // Lookup's
  MegaflowPool pool_;
  std::unique_ptr<MegaflowClassifier> dpcls_;
  Emc emc_;
  EmcGate emc_gate_;
  // Whether the burst being processed looks the EMC up and inserts into it.
  bool emc_burst_ = true;
  uint32_t emc_insert_boost_ = 1;  // this burst's EmcGate::InsertWeight
  bool EmcThisBurst() const {
    return config_.emc && config_.megaflows && (!config_.emc_adaptive || emc_gate_.probe());
  }
  // Allocated once even when disabled, so that the runtime knobs never
  // allocate on the PMD.
  std::unique_ptr<Smc> smc_;
  std::unique_ptr<CuckooDistributor> cd_;
  CdAdaptiveController cd_ctl_;
  // Whether the SMC is used (pipeline.smc), and its window's start: the
  // totals of stats_ then and the time.
  CacheCostController smc_ctl_;
  uint64_t smc_window_cycles_ = 0, smc_window_packets_ = 0;
  std::chrono::steady_clock::time_point last_smc_window_;
  // Subtable ids a CD suggestion can name (the classifier's max_subtables).
  uint32_t cd_group_size_;
  PmdStats stats_;
  // Hits of megaflows removed by revalidation or flushes, per rule id.
  // Updated only when megaflows are removed (a rule change, at a quiescent
  // point), never per packet.
  absl::flat_hash_map<uint64_t, uint64_t> retired_rule_hits_;
  // Hits of expired megaflows whose rule retired_rule_hits_ has no entry
  // for yet (adding one may allocate), by rule id: open addressing over
  // kPendingRetiredSlots slots (rule id 0: empty), at most kPendingRetired
  // rules.  DrainRetiredHits moves them there.
  static constexpr uint32_t kPendingRetired = 256;
  static constexpr uint32_t kPendingRetiredSlots = 2 * kPendingRetired;
  std::pair<uint64_t, uint64_t> pending_retired_[kPendingRetiredSlots] = {};
  uint32_t n_pending_retired_ = 0;
  // Verdict carriers for packets whose upcall could not install a megaflow.
  Megaflow uncached_[kMaxBurst];
  // Interval accounting for the CD controller.
  CdIntervalStats interval_;
  uint32_t bursts_since_clock_ = 0;
  std::chrono::steady_clock::time_point last_periodic_;
  // Idle expiry: the coarse clock, the TSC clock's calibration, the cursor.
  const PipelineClock* clock_ = nullptr;
  uint64_t now_ms_ = 0;
  uint64_t anchor_tsc_ = 0, anchor_ms_ = 0;  // last calibration point
  uint64_t rate_tsc_ = 0, rate_ms_ = 0;      // start of the rate's span
  uint64_t ms_per_tsc_q32_ = 0;  // ms per TSC cycle << 32; 0 until calibrated
  uint64_t last_sweep_ms_ = 0;
  uint32_t housekeeps_since_clock_ = 0;
  uint32_t expiry_cursor_ = 0;  // visits live megaflows from here down
  // Upcall token buckets (milli-upcalls), by in_port; the last is shared by
  // ports past kUpcallBuckets.
  struct UpcallBucket {
    uint32_t port = 0;
    bool used = false;
    bool full = false;  // milli_tokens / last_ms initialised
    uint64_t milli_tokens = 0;
    uint64_t last_ms = 0;
    // The mask-explosion defence's last install past the threshold (+1; 0:
    // none yet).
    uint64_t rare_install_ms = 0;
  };
  UpcallBucket upcall_buckets_[kUpcallBuckets + 1];
  // Verdict carrier of the misses the rate limit dropped.
  Megaflow upcall_limited_;
  // Misses of the current burst dropped by the rate limit (no_match's share).
  uint64_t burst_limit_drops_ = 0;
  // Recent misses of masks kept out by the mask-explosion defence.
  struct MaskCandidate {
    uint64_t hash = 0;
    uint64_t window_start_ms = 0;
    uint32_t misses = 0;
  };
  static constexpr uint32_t kMaskCandidates = 256;
  MaskCandidate mask_candidates_[kMaskCandidates];
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_PIPELINE_H_
