// cache_cost_controller.h — whether a cache layer pays, decided from the
// cycles the pipeline spends per packet with it and without it.
//
// The EMC gate (emc_gate.h) decides from the EMC's hit rate and the CD
// controller (cuckoo_distributor.h) from subtable probes per hit: each
// counts what its layer saves.  Whether the SMC pays depends on what it
// replaces (a dpcls walk of one subtable at K = 1 megaflow mask, of several,
// or a CD probe) and on where its 8 MB of buckets sit in the caches, so
// nothing short of the cost itself says it.  This controller measures it:
// the pipeline feeds it, once per window (pipeline.smc_window_ms, 100 ms),
// the cycles it spent classifying (upcalls left out: they are the slow
// path's, whatever the caches) and the packets it classified.
//
// The rule, in mode auto (on / off force the state and feed nothing):
//
//   settled   the layer is in its chosen state.  A probe starts after
//             `start_windows` busy windows, then `reprobe_windows` after
//             each probe, doubling after every probe up to
//             `reprobe_windows << max_backoff` (so on a steady workload
//             probes get rarer and rarer); a workload change (the chosen
//             state's cost outside [1 / (1 + drift), 1 + drift] times its
//             cost in the second settled window after the last decision, for
//             `drift_hold` busy windows in a row) probes at once, though not
//             within reprobe_windows of the last probe.  (Not the probe's
//             figure: a probe's windows each follow one of the other state,
//             whose cache lines they pay for.)  The caller may defer a
//             probe (the pipeline does while the CD controller is about to
//             switch: the cost is about to move).
//   warm-up   the other state for `warmup_windows` windows, not counted
//             (a cache turned on starts cold).
//   probe     the two states alternate window by window, chosen state first,
//             `probe_pairs` pairs.  Each pair gives a ratio, the other
//             state's cycles per packet over the chosen state's; the other
//             state wins when the median ratio is below 1 - margin: it
//             becomes the chosen state (a switch); otherwise nothing changes.
//             (The median: a load that starts or stops during the probe, or a
//             window that lost time to another thread, spoils one pair, and
//             a sum or mean of the windows took it at face value.)  A switch
//             needs two probes in a row that say so: a probe voting for one
//             is followed at once by another (no warm-up: the other state is
//             warm), and only if that one agrees does the state change.
//
// An idle window (fewer than `min_packets` packets) decides nothing: it
// ends a probe or warm-up without a decision (the next busy window starts
// the probe again) and breaks a drift streak.  Between probes the state
// moves only at a decision, and decisions come at most once per probe, so a
// steady workload settles after the first probe (start_windows +
// warmup_windows + 2 * probe_pairs windows, twice that less the warm-up when
// it votes to switch: 1.1 s or 1.7 s at 100 ms windows) and a switch back
// needs the old state to win two later probes by the margin too.
//
// Threads: owned by the PMD thread; plain value, allocates nothing.
#ifndef FLOWCLASS_DATAPLANE_CACHE_CACHE_COST_CONTROLLER_H_
#define FLOWCLASS_DATAPLANE_CACHE_CACHE_COST_CONTROLLER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "dataplane/cache/cache_mode.h"

namespace flowclass {

// The auto rule's tuning; the mode (on / off / auto) is the controller's
// own (its constructor, SetMode): one place holds it (PipelineConfig::smc).
struct CacheCostControllerConfig {
  bool start_on = false;           // initial state in kAuto
  uint64_t min_packets = 10000;    // fewer in a window: idle
  uint32_t start_windows = 3;      // busy windows before the first probe
  uint32_t warmup_windows = 2;     // the other state, not counted
  uint32_t probe_pairs = 3;        // alternating windows compared
  double margin = 0.03;            // the other state must be this much cheaper
  uint32_t reprobe_windows = 100;  // after a probe, busy windows to the next ...
  uint32_t max_backoff = 5;        // ... doubling up to reprobe_windows << this
  double drift = 0.25;             // a workload change: cost moved by this ...
  uint32_t drift_hold = 5;         // ... for this many busy windows in a row
};

// OK, or INVALID_ARGUMENT naming the field.
absl::Status ValidateCacheCostControllerConfig(const CacheCostControllerConfig& config);

class CacheCostController {
 public:
  enum class Phase : uint8_t { kSettled, kWarmup, kProbe };
  static constexpr uint32_t kMaxProbePairs = 8;

  // `mode` must be one of the three; `config` is trusted
  // (ValidateCacheCostControllerConfig for user input).
  explicit CacheCostController(CacheMode mode = CacheMode::kAuto,
                               CacheCostControllerConfig config = {});

  // Feeds one window: `cycles` spent on `packets` packets, all with
  // enabled() as it was during the window.  `defer`: do not start a probe
  // now.  Returns whether enabled() changed (what the next window runs).
  bool Update(uint64_t cycles, uint64_t packets, bool defer = false);
  // Forces (on / off) or releases (auto: back to the chosen state, settled,
  // probing after start_windows) the state; returns whether enabled() changed.
  bool SetMode(CacheMode mode);

  // The state the coming window runs: the chosen one, or the other during a
  // warm-up and every other window of a probe.
  bool enabled() const { return active_; }
  // The state decided on (what a gauge shows: a probe does not move it).
  bool chosen() const { return chosen_; }
  bool probing() const { return phase_ != Phase::kSettled; }
  Phase phase() const { return phase_; }
  CacheMode mode() const { return mode_; }
  const CacheCostControllerConfig& config() const { return config_; }
  // Decisions that changed the chosen state (forced changes included).
  uint64_t switches() const { return switches_; }
  // Probes completed (with a decision, to switch or to stay).
  uint64_t probes() const { return probes_; }
  // The last completed probe's cycles per packet, off and on: each state's
  // cheapest window (0 before one); and the median of its pairs' ratios,
  // other state over chosen state, which decided.
  double last_cost_off() const { return last_cost_[0]; }
  double last_cost_on() const { return last_cost_[1]; }
  double last_ratio() const { return last_ratio_; }
  // Busy windows until the next probe may start.
  uint32_t windows_to_probe() const { return windows_to_probe_; }

  // One line: "mode auto state on (probing) switches 1 probes 3 cost off
  // 123.4 on 110.2 next probe in 200 windows".
  std::string DebugString() const;

 private:
  // The schedule after a probe ends with a decision.
  void Settle();

  CacheMode mode_;
  CacheCostControllerConfig config_;
  bool chosen_;
  bool active_;
  Phase phase_ = Phase::kSettled;
  uint32_t windows_to_probe_;
  uint32_t backoff_ = 0;
  uint32_t left_ = 0;  // windows left in the warm-up or probe
  // Each state's cheapest probe window (what last_cost_* report), the cost
  // of the current pair's chosen-state window, and the pairs' ratios.
  double best_[2] = {0, 0};
  double pair_chosen_cost_ = 0;
  double ratio_[kMaxProbePairs] = {};
  double last_ratio_ = 0;
  bool confirming_ = false;  // the probe running confirms a vote to switch
  uint32_t settled_windows_ = 0;  // busy windows since the last probe
  // The chosen state's cost in its second settled window after the last
  // decision (0: not yet; ref_skip_ windows to skip first).
  double ref_cost_ = 0;
  uint32_t ref_skip_ = 1;
  uint32_t drift_streak_ = 0;
  uint64_t switches_ = 0;
  uint64_t probes_ = 0;
  double last_cost_[2] = {0, 0};
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_CACHE_CACHE_COST_CONTROLLER_H_
