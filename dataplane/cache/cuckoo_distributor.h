// cuckoo_distributor.h — the Cuckoo Distributor (CD): flow signature ->
// megaflow subtable, plus the adaptive controller that turns it on and off.
//
// What it is for
// --------------
// The megaflow classifier (dpcls) keeps one subtable per megaflow mask and,
// without help, probes them in rank order until one holds the key: a hit in
// the k-th ranked subtable costs k probes.  The CD sits between the EMC/SMC
// and the dpcls and remembers, per flow signature, *which subtable* the
// flow's megaflow lives in, so the dpcls probes that one subtable first
// (design of the 2017-2018 OVS "dpif-netdev: Cuckoo Distributor" RFC; OVS
// later merged the reduced SMC, which maps to the megaflow instead).
//
// A CD hit is only a suggestion.  The pipeline verifies it by probing the
// suggested subtable; on a false hit (another flow with the same signature,
// a stale entry, a subtable that no longer holds the flow) it falls back to
// the ranked search and calls Insert() with the right subtable.  Correctness
// therefore never depends on the CD; only speed does.
//
// Threads and memory
// ------------------
// A CuckooDistributor belongs to one PMD thread: every method, including the
// control-path ones (InvalidateSubtable, Flush), is called by that thread
// (the control path runs at the PMD's quiescent point).  There is no
// internal locking and nothing is atomic.  All memory is allocated in the
// constructor (one array of cache-line buckets) and freed in the destructor;
// LookupBurst, Insert and Remove allocate nothing, lock nothing, log nothing
// and throw nothing.  LookupBurst is const and touches no counter.
//
// Layout
// ------
//   buckets_: Bucket[num_buckets]          num_buckets = capacity / 16, a power
//                                          of two >= 2, 64-byte aligned
//   struct alignas(64) Bucket {            one cache line
//     uint16_t sig[16];        // 0 = empty slot; a computed 0 becomes 1
//     uint16_t subtable[16];   // any value 0..65535 (no reserved id)
//   };
//
// Hashing (no new hash over the key; FlowKey::hash is already computed):
//   h   = key.hash
//   b1  = h & (num_buckets - 1)                       low bits
//   sig = high 16 bits of (h * kSigMul), 0 -> 1       mixes *all* bits of h,
//                                                     so a weak (e.g. small
//                                                     integer) hash still
//                                                     spreads signatures
//   alt = (sig * kAltMul >> 32) & (num_buckets - 1), 0 -> 1
//   b2  = b1 ^ alt                                    the partner bucket
// Because alt depends only on sig, the pair {b1, b2} is the same whichever
// of the two buckets one starts from, so two keys with the same signature
// whose pairs meet have the *same* pair.  Invariant kept by Insert: a
// signature appears at most once in a bucket pair.  Hence a lookup returns at
// most one candidate, and "same signature and same pair" is exactly the set
// of keys that share (alias) one entry.
//
// Insert(key, subtable), no cuckoo displacement (entries are hints, losing
// one only costs a ranked search):
//   1. the signature is already in b1 or b2        -> update its subtable
//   2. an empty slot in b1, else in b2             -> take it
//   3. both full                                   -> overwrite a victim
//      chosen by a xorshift generator (bucket and slot), so a hot pair does
//      not always lose the same entry.
//
// Why the tricks
// --------------
// * 16 signatures in one cache line: a probe of a bucket is one memory access
//   and a 16-lane u16 compare, which GCC vectorises from the plain loop in
//   MatchSlots() with the default flags (SSE2 baseline, -O2; no intrinsics,
//   so no ISA variant to keep tested).
// * LookupBurst is staged like VPP bihash / OVS cmap_find_batch: it first
//   computes (b1, b2, sig) for every key of the burst and prefetches both
//   buckets, then probes.  With 4 MiB of buckets (the default) most probes
//   miss L2; overlapping the misses of a whole burst is what makes the CD
//   cheaper than the subtable probes it saves.
#ifndef FLOWCLASS_DATAPLANE_CACHE_CUCKOO_DISTRIBUTOR_H_
#define FLOWCLASS_DATAPLANE_CACHE_CUCKOO_DISTRIBUTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dataplane/cache/cache_mode.h"
#include "dataplane/flow/flow.h"

namespace flowclass {

inline constexpr int kCdBucketEntries = 16;

// One cache line: 16 (signature, subtable) slots, struct-of-arrays so the 16
// signatures are contiguous for the vector compare.
struct alignas(64) CdBucket {
  uint16_t sig[kCdBucketEntries];       // 0 = empty
  uint16_t subtable[kCdBucketEntries];  // meaningful only when sig != 0
};
static_assert(sizeof(CdBucket) == 64, "a CD bucket must be one cache line");
static_assert(alignof(CdBucket) == 64, "a CD bucket must be line-aligned");

struct CdConfig {
  // Number of entries (slots).  Must be a power of two in
  // [kMinEntries, kMaxEntries]; the constructor rounds up / clamps,
  // CuckooDistributor::Create() and ValidateCdConfig() reject instead.
  uint32_t entries = 1u << 20;  // 65536 buckets x 16 = 4 MiB
  // Seed of the victim generator (any value; 0 is remapped).
  uint64_t seed = 0x9e3779b97f4a7c15ULL;

  static constexpr uint32_t kMinEntries = 2 * kCdBucketEntries;
  static constexpr uint32_t kMaxEntries = 1u << 26;  // 256 MiB
};

// OK, or INVALID_ARGUMENT naming the field: "entries: ...".
absl::Status ValidateCdConfig(const CdConfig& config);

// Where a key lives; exposed for tests, dumps and flowclassctl.
struct CdPosition {
  uint32_t bucket1 = 0;
  uint32_t bucket2 = 0;  // != bucket1 (the table always has >= 2 buckets)
  uint16_t sig = 0;      // never 0
};

// Counters of the write side (LookupBurst counts nothing: the pipeline counts
// CD hits and false hits, see CdIntervalStats).
struct CdStats {
  uint64_t inserts = 0;    // Insert() that took an empty slot
  uint64_t updates = 0;    // Insert() that found the signature already there
  uint64_t evictions = 0;  // Insert() that overwrote another signature
  uint64_t removes = 0;    // entries cleared by Remove()
  uint64_t invalidated = 0;  // entries cleared by InvalidateSubtable()
  uint64_t flushes = 0;
};

class CuckooDistributor {
 public:
  // Normalises `config.entries` (round up to a power of two, clamp to
  // [kMinEntries, kMaxEntries]) and allocates the table, all slots empty.
  explicit CuckooDistributor(CdConfig config = {});
  // Same, but rejects a config that would need normalising.
  static absl::StatusOr<std::unique_ptr<CuckooDistributor>> Create(
      const CdConfig& config);

  CuckooDistributor(const CuckooDistributor&) = delete;
  CuckooDistributor& operator=(const CuckooDistributor&) = delete;

  // Hot path.  For every bit i set in `todo_map`, looks up keys[i]; when its
  // signature is found in one of its two buckets sets bit i of the returned
  // hit map and writes subtable_out[i].  subtable_out[i] is not written for
  // misses nor for bits not in todo_map.  keys and subtable_out are indexed
  // by bit position, so they must hold at least 32 - countl_zero(todo_map)
  // elements.  Prefetches every bucket of the burst before probing.
  uint32_t LookupBurst(const FlowKey* keys, uint32_t todo_map,
                       uint16_t* subtable_out) const;

  // Single-key lookup (the same probe without the staging): true and
  // *subtable on hit.
  bool Lookup(const FlowKey& key, uint16_t* subtable) const;

  // Records that `key`'s megaflow lives in `subtable` (see the header comment
  // for the placement rule).  Per packet on a dpcls miss or CD false hit:
  // allocates nothing.
  void Insert(const FlowKey& key, uint16_t subtable);

  // Clears the entry of `key`'s signature in its bucket pair, if any (which
  // also forgets every key aliasing it).  Returns true if one was cleared.
  bool Remove(const FlowKey& key);

  // Control path, O(capacity): clears every entry pointing at `subtable`
  // (call when the dpcls destroys or renumbers that subtable).  Returns the
  // number of entries cleared.
  uint32_t InvalidateSubtable(uint16_t subtable);

  // Control path, O(capacity): empties the table (e.g. on a new RuleTable or
  // when the adaptive controller turns the CD back on after its entries went
  // stale).
  void Flush();

  // Live entries, O(1).
  uint32_t Occupancy() const { return occupancy_; }
  uint32_t capacity() const { return num_buckets_ * kCdBucketEntries; }
  uint32_t num_buckets() const { return num_buckets_; }
  const CdStats& stats() const { return stats_; }

  // The two buckets and the signature `key` maps to.
  CdPosition PositionOf(const FlowKey& key) const {
    return PositionOfHash(key.hash);
  }
  CdPosition PositionOfHash(uint64_t hash) const;

  // Read-only view of one bucket (tests, dumps).  i < num_buckets().
  const CdBucket& bucket(uint32_t i) const { return buckets_[i]; }

  // Multi-line summary: capacity, occupancy, load, bucket fill histogram
  // (O(capacity), control path), write counters.
  std::string DebugString() const;

 private:
  // Bit i set: slot i of `b` holds `sig`.  Written as a select of a constant
  // per-lane bit and an OR reduction, all in 16-bit lanes: GCC 12 at -O2
  // (very-cheap vectoriser cost model) turns it into 2 x pcmpeqw + pand + an
  // OR reduction.  The obvious `m |= (sig[i] == s) << i` stays a scalar
  // 16-iteration loop (variable shifts), so do not "simplify" it.
  static uint32_t MatchSlots(const CdBucket& b, uint16_t sig) {
    static constexpr uint16_t kLaneBit[kCdBucketEntries] = {
        1 << 0,  1 << 1,  1 << 2,  1 << 3,  1 << 4,  1 << 5,
        1 << 6,  1 << 7,  1 << 8,  1 << 9,  1 << 10, 1 << 11,
        1 << 12, 1 << 13, 1 << 14, 1 << 15};
    uint16_t m = 0;
    for (int i = 0; i < kCdBucketEntries; ++i)
      m |= b.sig[i] == sig ? kLaneBit[i] : uint16_t{0};
    return m;
  }
  uint64_t NextRandom() {
    // xorshift64: cheap, allocation-free, good enough to spread victims.
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  }

  uint32_t num_buckets_;
  uint32_t bucket_mask_;
  std::unique_ptr<CdBucket[]> buckets_;
  uint32_t occupancy_ = 0;
  uint64_t rng_;
  CdStats stats_;
};

// ---------------------------------------------------------------------------
// Adaptive on/off controller
// ---------------------------------------------------------------------------
//
// The CD pays one extra (usually L2/L3-missing) memory access per packet that
// reaches the dpcls.  It wins only when ranking alone would need clearly more
// than one subtable probe per hit.  The controller decides, once per
// interval (e.g. every ranking interval, 1 s in OVS), from counters the
// pipeline accumulates over that interval.
//
// Threads: owned by the PMD thread that owns the CD; Update() is called by
// that thread at the interval boundary.  SetMode()/SetConfig() are called by
// the same thread (the control plane hands the change over at a quiescent
// point).  Plain value, no allocation after construction.
//
// The rule (defaults in CdControllerConfig):
//
//   Every interval the controller computes R, the number of subtable probes
//   per megaflow hit that *ranking alone* would need:
//     CD off:  R = subtable_lookups / megaflow_hits           (measured)
//     CD on:   the dpcls mostly probes one subtable, so R cannot be measured;
//              it is reconstructed exactly from the rank of the subtable each
//              CD hit pointed to (a hit in rank r costs r+1 probes when
//              ranking alone searches):
//                R = (cd_hit_rank_sum + fallback) / megaflow_hits
//                fallback = subtable_lookups - cd_hits - cd_false_hits
//                           (probes of the ranked search for hits the CD did
//                           not serve; each CD hit and each false hit cost one
//                           probe of the suggested subtable), clamped >= 0.
//              If the pipeline does not report ranks (cd_hit_rank_sum <
//              cd_hits), a lower bound is used instead:
//                R = 2 - first_rank_hits / megaflow_hits
//              (a first-rank hit costs 1 probe, any other at least 2).
//   An interval with megaflow_hits < min_hits is idle: it decides nothing and
//   resets the streak, so switching needs `hold` *consecutive busy*
//   intervals that all agree.
//   ON  -> OFF  when R < off_threshold (1.2) for `hold` (3) intervals:
//               ranking already finds nearly every hit in its first subtable,
//               the CD only adds a memory access.
//   OFF -> ON   when R > on_threshold (1.5) for `hold` intervals.
//   Between the thresholds nothing changes (hysteresis band); off_threshold
//   must be <= on_threshold.
//
//   mode kOn / kOff force the state and ignore the inputs; kAuto applies the
//   rule.  Switching to kAuto keeps the current state.
//
// What the pipeline must do on a transition (Update() returns it):
//   kTurnedOff  stop calling LookupBurst/Insert;
//   kTurnedOn   Flush() the CD first: while off, megaflows and subtables
//               changed without the CD being told (unless the pipeline kept
//               calling InvalidateSubtable while off, which is also fine).

// The CD's mode is a CacheMode (cache_mode.h), as the SMC's is.
using CdMode = CacheMode;

// "on" | "off" | "auto".
inline std::string_view CdModeName(CdMode mode) { return CacheModeName(mode); }
// Case-sensitive inverse of CdModeName; INVALID_ARGUMENT naming "cd_mode".
inline absl::StatusOr<CdMode> ParseCdMode(std::string_view text) {
  return ParseCacheMode(text, "cd_mode");
}

struct CdControllerConfig {
  CdMode mode = CdMode::kAuto;
  double off_threshold = 1.2;  // ON->OFF when R below this ...
  double on_threshold = 1.5;   // OFF->ON when R above this ...
  uint32_t hold = 3;           // ... for this many consecutive intervals
  uint64_t min_hits = 1000;    // megaflow hits for an interval to count
  bool start_on = false;       // initial state in kAuto
};

// OK, or INVALID_ARGUMENT naming the field ("off_threshold: ...").
absl::Status ValidateCdControllerConfig(const CdControllerConfig& config);

// Counters for one interval, filled by the pipeline (deltas, not totals).
struct CdIntervalStats {
  uint64_t dpcls_packets = 0;     // packets that reached the dpcls stage
                                  // (informational: not used by the rule)
  uint64_t megaflow_hits = 0;     // of those, found a megaflow
  uint64_t subtable_lookups = 0;  // subtable probes made for those hits,
                                  // CD-suggested and wasted probes included
  uint64_t first_rank_hits = 0;   // hits whose megaflow is in the rank-0
                                  // subtable (however it was found)
  uint64_t cd_hits = 0;           // CD suggestions that verified
  uint64_t cd_false_hits = 0;     // CD suggestions that did not
  uint64_t cd_hit_rank_sum = 0;   // sum over cd_hits of (rank + 1) of the
                                  // suggested subtable; 0 if not tracked
};

enum class CdTransition : uint8_t { kNone = 0, kTurnedOn = 1, kTurnedOff = 2 };

class CdAdaptiveController {
 public:
  // `config` is trusted (use Create() or ValidateCdControllerConfig() for
  // input from users).
  explicit CdAdaptiveController(CdControllerConfig config = {});
  static absl::StatusOr<CdAdaptiveController> Create(
      const CdControllerConfig& config);

  // Feeds one interval; returns whether the state changed.
  CdTransition Update(const CdIntervalStats& interval);

  // Forces or releases the state; a change of state counts as a transition.
  CdTransition SetMode(CdMode mode);
  // Validates and installs thresholds/hold/min_hits/mode; resets the streak.
  // Returns the transition the new mode caused (start_on is ignored: it only
  // sets the initial state).
  absl::StatusOr<CdTransition> SetConfig(const CdControllerConfig& config);

  bool enabled() const { return enabled_; }
  CdMode mode() const { return config_.mode; }
  const CdControllerConfig& config() const { return config_; }
  uint64_t transitions() const { return transitions_; }
  uint64_t intervals() const { return intervals_; }
  // Consecutive busy intervals voting for a change so far.
  uint32_t streak() const { return streak_; }
  // R of the last busy interval (0 before any), and whether it was measured
  // (CD off) or reconstructed (CD on).
  double last_ranking_lookups_per_hit() const { return last_r_; }
  // Probes per hit actually made in the last busy interval (CD on: this is
  // what the CD achieved; compare with last_ranking_lookups_per_hit()).
  double last_lookups_per_hit() const { return last_measured_; }

  // Ranking-only probes per hit for `interval` given the CD state during it
  // (the formula above); 0 when there were no hits.
  static double RankingLookupsPerHit(const CdIntervalStats& interval,
                                     bool cd_was_on);

  // One line: "cd: mode auto state on transitions 3 intervals 40 streak 1/3
  // ranking_lookups_per_hit 1.730 lookups_per_hit 1.020 (...)".
  std::string DebugString() const;

 private:
  CdTransition SetEnabled(bool on);

  CdControllerConfig config_;
  bool enabled_;
  uint32_t streak_ = 0;
  uint64_t transitions_ = 0;
  uint64_t intervals_ = 0;
  double last_r_ = 0;
  double last_measured_ = 0;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_CACHE_CUCKOO_DISTRIBUTOR_H_
