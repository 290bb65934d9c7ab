#include "dataplane/cache/cuckoo_distributor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/quote.h"
#include "dataplane/dpcls/megaflow.h"

namespace flowclass {
namespace {

// LookupBurst keeps per-key state in 32-entry stack arrays indexed by the
// bit position in the 32-bit todo_map.
static_assert(kMaxBurst <= 32, "todo_map must hold one bit per burst key");

// Odd 64-bit multipliers (golden ratio and a murmur-style constant).  The
// signature multiplier makes the high 16 bits depend on every bit of the hash.
constexpr uint64_t kSigMul = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kAltMul = 0xc6a4a7935bd1e995ULL;

uint32_t NormaliseEntries(uint32_t entries) {
  entries = std::clamp(entries, CdConfig::kMinEntries, CdConfig::kMaxEntries);
  return std::bit_ceil(entries);
}

inline void Prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }

}  // namespace

absl::Status ValidateCdConfig(const CdConfig& config) {
  if (config.entries < CdConfig::kMinEntries ||
      config.entries > CdConfig::kMaxEntries) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "entries: %u out of range [%u, %u]", config.entries,
        CdConfig::kMinEntries, CdConfig::kMaxEntries));
  }
  if (!std::has_single_bit(config.entries)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "entries: %u is not a power of two", config.entries));
  }
  return absl::OkStatus();
}

CuckooDistributor::CuckooDistributor(CdConfig config)
    : num_buckets_(NormaliseEntries(config.entries) / kCdBucketEntries),
      bucket_mask_(num_buckets_ - 1),
      // Value-initialised: every signature 0 (empty).  operator new[] honours
      // alignas(64) of CdBucket (C++17 aligned new).
      buckets_(new CdBucket[num_buckets_]()),
      rng_(config.seed ? config.seed : 0x2545f4914f6cdd1dULL) {}

absl::StatusOr<std::unique_ptr<CuckooDistributor>> CuckooDistributor::Create(
    const CdConfig& config) {
  if (absl::Status s = ValidateCdConfig(config); !s.ok()) return s;
  return std::make_unique<CuckooDistributor>(config);
}

CdPosition CuckooDistributor::PositionOfHash(uint64_t hash) const {
  CdPosition p;
  p.bucket1 = static_cast<uint32_t>(hash) & bucket_mask_;
  uint16_t sig = static_cast<uint16_t>((hash * kSigMul) >> 48);
  p.sig = sig ? sig : 1;
  uint32_t alt =
      static_cast<uint32_t>((uint64_t{p.sig} * kAltMul) >> 32) & bucket_mask_;
  if (alt == 0) alt = 1;  // bucket_mask_ >= 1: the partner always differs
  p.bucket2 = p.bucket1 ^ alt;
  return p;
}

uint32_t CuckooDistributor::LookupBurst(const FlowKey* keys, uint32_t todo_map,
                                        uint16_t* subtable_out) const {
  // Stage 1: positions of the whole burst, and prefetch both buckets of each.
  uint32_t b1[32];
  uint32_t b2[32];
  uint16_t sig[32];
  for (uint32_t m = todo_map; m; m &= m - 1) {
    const int i = std::countr_zero(m);
    const CdPosition p = PositionOfHash(keys[i].hash);
    b1[i] = p.bucket1;
    b2[i] = p.bucket2;
    sig[i] = p.sig;
    Prefetch(&buckets_[p.bucket1]);
    Prefetch(&buckets_[p.bucket2]);
  }
  // Stage 2: probe.  A signature is at most once in a pair, so the first
  // matching slot is the only one.
  uint32_t hits = 0;
  for (uint32_t m = todo_map; m; m &= m - 1) {
    const int i = std::countr_zero(m);
    const CdBucket* b = &buckets_[b1[i]];
    uint32_t slots = MatchSlots(*b, sig[i]);
    if (!slots) {
      b = &buckets_[b2[i]];
      slots = MatchSlots(*b, sig[i]);
      if (!slots) continue;
    }
    subtable_out[i] = b->subtable[std::countr_zero(slots)];
    hits |= 1u << i;
  }
  return hits;
}

bool CuckooDistributor::Lookup(const FlowKey& key, uint16_t* subtable) const {
  const CdPosition p = PositionOf(key);
  for (uint32_t bi : {p.bucket1, p.bucket2}) {
    const CdBucket& b = buckets_[bi];
    if (uint32_t slots = MatchSlots(b, p.sig)) {
      *subtable = b.subtable[std::countr_zero(slots)];
      return true;
    }
  }
  return false;
}

void CuckooDistributor::Insert(const FlowKey& key, uint16_t subtable) {
  const CdPosition p = PositionOf(key);
  CdBucket* pair[2] = {&buckets_[p.bucket1], &buckets_[p.bucket2]};
  // 1. Update in place: keeps the one-signature-per-pair invariant.
  for (CdBucket* b : pair) {
    if (uint32_t slots = MatchSlots(*b, p.sig)) {
      b->subtable[std::countr_zero(slots)] = subtable;
      ++stats_.updates;
      return;
    }
  }
  // 2. First empty slot, bucket 1 before bucket 2.
  for (CdBucket* b : pair) {
    if (uint32_t empty = MatchSlots(*b, 0)) {
      const int s = std::countr_zero(empty);
      b->sig[s] = p.sig;
      b->subtable[s] = subtable;
      ++occupancy_;
      ++stats_.inserts;
      return;
    }
  }
  // 3. Both full: overwrite a pseudo-random victim (occupancy unchanged).
  const uint64_t r = NextRandom();
  CdBucket* b = pair[(r >> 32) & 1];
  const int s = static_cast<int>(r >> 40) & (kCdBucketEntries - 1);
  b->sig[s] = p.sig;
  b->subtable[s] = subtable;
  ++stats_.evictions;
}

bool CuckooDistributor::Remove(const FlowKey& key) {
  const CdPosition p = PositionOf(key);
  for (uint32_t bi : {p.bucket1, p.bucket2}) {
    CdBucket& b = buckets_[bi];
    if (uint32_t slots = MatchSlots(b, p.sig)) {
      b.sig[std::countr_zero(slots)] = 0;
      --occupancy_;
      ++stats_.removes;
      return true;
    }
  }
  return false;
}

uint32_t CuckooDistributor::InvalidateSubtable(uint16_t subtable) {
  uint32_t cleared = 0;
  for (uint32_t bi = 0; bi < num_buckets_; ++bi) {
    CdBucket& b = buckets_[bi];
    for (int s = 0; s < kCdBucketEntries; ++s) {
      const bool hit = b.sig[s] != 0 && b.subtable[s] == subtable;
      b.sig[s] = hit ? 0 : b.sig[s];
      cleared += hit;
    }
  }
  occupancy_ -= cleared;
  stats_.invalidated += cleared;
  return cleared;
}

void CuckooDistributor::Flush() {
  std::memset(static_cast<void*>(buckets_.get()), 0,
              sizeof(CdBucket) * num_buckets_);
  occupancy_ = 0;
  ++stats_.flushes;
}

std::string CuckooDistributor::DebugString() const {
  // fill[k]: buckets holding k live entries.
  uint64_t fill[kCdBucketEntries + 1] = {};
  for (uint32_t bi = 0; bi < num_buckets_; ++bi) {
    int n = 0;
    for (int s = 0; s < kCdBucketEntries; ++s) n += buckets_[bi].sig[s] != 0;
    ++fill[n];
  }
  std::string out = absl::StrFormat(
      "cuckoo distributor: capacity %u (%u buckets x %d), occupancy %u "
      "(%.1f%%)\n  inserts %u updates %u evictions %u removes %u "
      "invalidated %u flushes %u\n  bucket fill:",
      capacity(), num_buckets_, kCdBucketEntries, occupancy_,
      100.0 * occupancy_ / capacity(), stats_.inserts, stats_.updates,
      stats_.evictions, stats_.removes, stats_.invalidated, stats_.flushes);
  for (int k = 0; k <= kCdBucketEntries; ++k)
    if (fill[k]) absl::StrAppendFormat(&out, " %d:%u", k, fill[k]);
  out += "\n";
  return out;
}

// --------------------------------------------------------------------------
// CdAdaptiveController
// --------------------------------------------------------------------------

std::string_view CacheModeName(CacheMode mode) {
  switch (mode) {
    case CacheMode::kOff:
      return "off";
    case CacheMode::kOn:
      return "on";
    case CacheMode::kAuto:
      return "auto";
  }
  return "unknown";
}

absl::StatusOr<CacheMode> ParseCacheMode(std::string_view text, std::string_view field) {
  for (CacheMode m : {CacheMode::kOff, CacheMode::kOn, CacheMode::kAuto})
    if (text == CacheModeName(m)) return m;
  return absl::InvalidArgumentError(absl::StrCat(
      absl::string_view(field.data(), field.size()), ": unknown mode ",
      QuoteForMessage(absl::string_view(text.data(), text.size()), '"'),
      " (expected on, off or auto)"));
}

absl::Status ValidateCdControllerConfig(const CdControllerConfig& config) {
  if (config.mode != CdMode::kOff && config.mode != CdMode::kOn &&
      config.mode != CdMode::kAuto) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mode: unknown value %d", static_cast<int>(config.mode)));
  }
  if (!std::isfinite(config.off_threshold) || config.off_threshold < 1.0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "off_threshold: %g must be a finite number >= 1 (probes per hit)",
        config.off_threshold));
  }
  if (!std::isfinite(config.on_threshold) || config.on_threshold < 1.0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "on_threshold: %g must be a finite number >= 1 (probes per hit)",
        config.on_threshold));
  }
  if (config.off_threshold > config.on_threshold) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "off_threshold: %g is above on_threshold %g (no hysteresis band; the "
        "CD would oscillate)",
        config.off_threshold, config.on_threshold));
  }
  if (config.hold == 0) {
    return absl::InvalidArgumentError("hold: must be at least 1 interval");
  }
  return absl::OkStatus();
}

CdAdaptiveController::CdAdaptiveController(CdControllerConfig config)
    : config_(config),
      enabled_(config.mode == CdMode::kAuto ? config.start_on
                                            : config.mode == CdMode::kOn) {}

absl::StatusOr<CdAdaptiveController> CdAdaptiveController::Create(
    const CdControllerConfig& config) {
  if (absl::Status s = ValidateCdControllerConfig(config); !s.ok()) return s;
  return CdAdaptiveController(config);
}

double CdAdaptiveController::RankingLookupsPerHit(
    const CdIntervalStats& in, bool cd_was_on) {
  if (in.megaflow_hits == 0) return 0;
  const double hits = static_cast<double>(in.megaflow_hits);
  if (!cd_was_on || in.cd_hits == 0) {
    // Every hit went through the ranked search (possibly after a false hit's
    // wasted probe, which ranking alone would not have made).
    const uint64_t wasted = cd_was_on ? in.cd_false_hits : 0;
    const uint64_t ranked =
        in.subtable_lookups > wasted ? in.subtable_lookups - wasted : 0;
    return static_cast<double>(ranked) / hits;
  }
  if (in.cd_hit_rank_sum >= in.cd_hits) {
    const uint64_t cd_probes = in.cd_hits + in.cd_false_hits;
    const uint64_t fallback =
        in.subtable_lookups > cd_probes ? in.subtable_lookups - cd_probes : 0;
    return static_cast<double>(in.cd_hit_rank_sum + fallback) / hits;
  }
  // Ranks not reported: first-rank hits cost 1 probe, the others at least 2.
  const uint64_t first = std::min(in.first_rank_hits, in.megaflow_hits);
  return 2.0 - static_cast<double>(first) / hits;
}

CdTransition CdAdaptiveController::SetEnabled(bool on) {
  streak_ = 0;
  if (on == enabled_) return CdTransition::kNone;
  enabled_ = on;
  ++transitions_;
  return on ? CdTransition::kTurnedOn : CdTransition::kTurnedOff;
}

CdTransition CdAdaptiveController::Update(const CdIntervalStats& in) {
  ++intervals_;
  if (config_.mode != CdMode::kAuto) return SetEnabled(config_.mode == CdMode::kOn);
  if (in.megaflow_hits < config_.min_hits || in.megaflow_hits == 0) {
    streak_ = 0;  // idle: decides nothing, breaks any streak
    return CdTransition::kNone;
  }
  last_r_ = RankingLookupsPerHit(in, enabled_);
  last_measured_ = static_cast<double>(in.subtable_lookups) /
                   static_cast<double>(in.megaflow_hits);
  const bool vote = enabled_ ? last_r_ < config_.off_threshold
                             : last_r_ > config_.on_threshold;
  if (!vote) {
    streak_ = 0;
    return CdTransition::kNone;
  }
  if (++streak_ < config_.hold) return CdTransition::kNone;
  return SetEnabled(!enabled_);
}

CdTransition CdAdaptiveController::SetMode(CdMode mode) {
  config_.mode = mode;
  if (mode == CdMode::kAuto) {
    streak_ = 0;
    return CdTransition::kNone;
  }
  return SetEnabled(mode == CdMode::kOn);
}

absl::StatusOr<CdTransition> CdAdaptiveController::SetConfig(
    const CdControllerConfig& config) {
  if (absl::Status s = ValidateCdControllerConfig(config); !s.ok()) return s;
  config_ = config;
  return SetMode(config.mode);  // applies a forced state, resets the streak
}

std::string CdAdaptiveController::DebugString() const {
  return absl::StrFormat(
      "cd: mode %s state %s transitions %u intervals %u streak %u/%u "
      "ranking_lookups_per_hit %.3f lookups_per_hit %.3f "
      "(off below %.2f, on above %.2f, min_hits %u)",
      CdModeName(config_.mode), enabled_ ? "on" : "off", transitions_,
      intervals_, streak_, config_.hold, last_r_, last_measured_,
      config_.off_threshold, config_.on_threshold, config_.min_hits);
}

}  // namespace flowclass
