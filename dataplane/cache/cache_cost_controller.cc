#include "dataplane/cache/cache_cost_controller.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace flowclass {

absl::Status ValidateCacheCostControllerConfig(const CacheCostControllerConfig& c) {
  if (c.min_packets == 0)
    return absl::InvalidArgumentError("min_packets: must be at least 1");
  if (c.probe_pairs == 0 || c.probe_pairs > CacheCostController::kMaxProbePairs)
    return absl::InvalidArgumentError(absl::StrFormat(
        "probe_pairs: %u is not in 1..%u", c.probe_pairs, CacheCostController::kMaxProbePairs));
  if (!std::isfinite(c.margin) || c.margin < 0 || c.margin >= 1)
    return absl::InvalidArgumentError(
        absl::StrFormat("margin: %g must be in [0, 1)", c.margin));
  if (c.reprobe_windows == 0)
    return absl::InvalidArgumentError("reprobe_windows: must be at least 1");
  if (c.max_backoff > 16)
    return absl::InvalidArgumentError(
        absl::StrFormat("max_backoff: %u is above 16", c.max_backoff));
  if (!std::isfinite(c.drift) || c.drift <= 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("drift: %g must be a finite number > 0", c.drift));
  if (c.drift_hold == 0)
    return absl::InvalidArgumentError("drift_hold: must be at least 1 window");
  return absl::OkStatus();
}

CacheCostController::CacheCostController(CacheMode mode, CacheCostControllerConfig config)
    : mode_(mode),
      config_(config),
      chosen_(mode == CacheMode::kAuto ? config.start_on : mode == CacheMode::kOn),
      active_(chosen_),
      windows_to_probe_(config.start_windows) {}

void CacheCostController::Settle() {
  phase_ = Phase::kSettled;
  confirming_ = false;
  active_ = chosen_;
  windows_to_probe_ = config_.reprobe_windows << backoff_;
  backoff_ = std::min(backoff_ + 1, config_.max_backoff);
  drift_streak_ = 0;
  settled_windows_ = 0;
  // The reference for the drift rule is the second settled window, not the
  // probe's figure: in a probe each window follows one of the other state
  // (the SMC's lines evicted or evicting), so it costs more than a steady
  // window, and a reference taken there read as a workload change.
  ref_cost_ = 0;
  ref_skip_ = 1;
}

bool CacheCostController::Update(uint64_t cycles, uint64_t packets, bool defer) {
  if (mode_ != CacheMode::kAuto) return false;
  const bool before = active_;
  if (packets < config_.min_packets || packets == 0) {
    // Idle: decides nothing.  A probe in progress ends without a decision
    // and starts again with the next busy window (windows_to_probe_ is 0).
    drift_streak_ = 0;
    phase_ = Phase::kSettled;
    confirming_ = false;
    active_ = chosen_;
    return active_ != before;
  }
  const double cost = static_cast<double>(cycles) / static_cast<double>(packets);
  switch (phase_) {
    case Phase::kSettled: {
      if (ref_cost_ == 0) {
        if (ref_skip_ > 0)
          --ref_skip_;
        else
          ref_cost_ = cost;
      } else {
        const double r = cost / ref_cost_;
        const bool moved = r > 1 + config_.drift || r * (1 + config_.drift) < 1;
        drift_streak_ = moved ? drift_streak_ + 1 : 0;
        // Another workload: probe now, though not within reprobe_windows of
        // the last probe (a load that comes and goes would probe all the
        // time; the streak waits, and fires then if the move lasts).
        if (drift_streak_ >= config_.drift_hold && settled_windows_ >= config_.reprobe_windows) {
          drift_streak_ = 0;
          windows_to_probe_ = 0;
        }
      }
      ++settled_windows_;
      // The window that brings the count to 0 starts the probe.
      if (windows_to_probe_ > 0 && --windows_to_probe_ > 0) return false;
      if (defer) return false;
      best_[0] = best_[1] = std::numeric_limits<double>::infinity();
      if (config_.warmup_windows > 0) {
        phase_ = Phase::kWarmup;
        left_ = config_.warmup_windows;
        active_ = !chosen_;
      } else {
        phase_ = Phase::kProbe;
        left_ = 2 * config_.probe_pairs;
        active_ = chosen_;
      }
      return active_ != before;
    }
    case Phase::kWarmup:
      if (--left_ == 0) {
        phase_ = Phase::kProbe;
        left_ = 2 * config_.probe_pairs;
        active_ = chosen_;
      }
      return active_ != before;
    case Phase::kProbe:
      break;
  }
  best_[active_] = std::min(best_[active_], cost);
  if (active_ == chosen_) {
    pair_chosen_cost_ = cost;  // the pair's first window
  } else {
    ratio_[config_.probe_pairs - left_ / 2 - 1] = cost / pair_chosen_cost_;
  }
  if (--left_ > 0) {
    active_ = !active_;
    return true;
  }
  ++probes_;
  last_cost_[0] = best_[0];
  last_cost_[1] = best_[1];
  // The median of the pairs' ratios: a load that starts or stops during the
  // probe splits one pair (its two windows see different loads), not the
  // others, and a window that lost time spoils its own pair only.
  const uint32_t n = config_.probe_pairs;
  std::sort(ratio_, ratio_ + n);
  last_ratio_ = n % 2 ? ratio_[n / 2] : (ratio_[n / 2 - 1] + ratio_[n / 2]) / 2;
  const bool vote = last_ratio_ < 1 - config_.margin;
  if (vote && !confirming_) {
    // Once more before switching, at once (the other state is warm): two
    // probes in a row must agree.
    confirming_ = true;
    best_[0] = best_[1] = std::numeric_limits<double>::infinity();
    left_ = 2 * config_.probe_pairs;
    active_ = chosen_;
    return active_ != before;
  }
  if (vote) {
    chosen_ = !chosen_;
    ++switches_;
  }
  Settle();
  return active_ != before;
}

bool CacheCostController::SetMode(CacheMode mode) {
  mode_ = mode;
  const bool before = active_;
  phase_ = Phase::kSettled;
  confirming_ = false;
  drift_streak_ = 0;
  if (mode == CacheMode::kAuto) {
    // From the chosen state, probing soon again (the workload the last
    // decision was made on may be gone).
    backoff_ = 0;
    ref_cost_ = 0;
    ref_skip_ = 1;
    windows_to_probe_ = config_.start_windows;
  } else {
    const bool on = mode == CacheMode::kOn;
    if (on != chosen_) ++switches_;
    chosen_ = on;
  }
  active_ = chosen_;
  return active_ != before;
}

std::string CacheCostController::DebugString() const {
  return absl::StrFormat(
      "mode %s state %s%s switches %u probes %u cost off %.1f on %.1f (other/chosen %.3f) "
      "next probe in %u windows",
      CacheModeName(mode_), chosen_ ? "on" : "off", probing() ? " (probing)" : "",
      switches_, probes_, last_cost_[0], last_cost_[1], last_ratio_, windows_to_probe_);
}

}  // namespace flowclass
