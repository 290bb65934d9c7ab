// smc.h — the signature match cache (SMC): 16-bit key signature -> megaflow.
//
// Contract
// --------
// The second cache, after the EMC.  It stores no key, only a 16-bit signature
// of the key hash and the index of a megaflow in the PMD's MegaflowPool, so
// it holds 1M flows in 8 MB where the EMC holds 8K in 768 KB.  Because a
// signature may collide and a pool slot may be reused, every candidate is
// verified before it is returned: the slot must be live and the megaflow must
// cover the key ((key & mask) == value).  A returned hit is therefore always
// right; a signature match that fails verification is a "false hit" and is
// counted.  Stale entries need no invalidation: verification rejects them and
// Insert reuses ways whose megaflow is dead.
//
// Threads: an Smc belongs to one PMD thread, like the pool it points into.
// Every method is for that thread only; the counters are plain integers
// (mutable so the const lookup can count).  The pool must outlive the Smc.
//
// Hot path: LookupBurst and Insert allocate nothing, lock nothing, log nothing
// and throw nothing.  Memory is allocated once, in the constructor.  Flush,
// Occupancy and DebugString are O(entries), for the control plane and tests.
//
// Hashing: bucket = hash & (buckets-1)  (low bits)
//          sig    = hash >> 48          (top 16 bits, disjoint from the
//                                        bucket bits for any size <= 2^48)
//
// Memory layout: entries/4 buckets of 32 bytes, 32-byte aligned, so a bucket
// never straddles a cache line and one line holds two buckets:
//
//   struct SmcBucket {        // 32 bytes
//     uint16_t sig[4];        //  0  signatures, compared first
//     uint32_t mf_index[4];   //  8  kInvalidIndex = empty way
//     /* 8 bytes */           // 24  tail padding from alignas(32)
//   };
//
// The 8 pad bytes cost 25% over a packed 24-byte bucket but save the second
// cache miss a straddling bucket (1 in 4 at 24 bytes) would cost.
#ifndef FLOWCLASS_DATAPLANE_CACHE_SMC_H_
#define FLOWCLASS_DATAPLANE_CACHE_SMC_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"

namespace flowclass {

inline constexpr int kSmcWays = 4;

struct SmcConfig {
  uint32_t entries = uint32_t{1} << 20;  // power of two >= 4 (4 per bucket)
  uint64_t seed = 1;                     // victim PRNG seed (deterministic)
};

// Checks a config for the control plane; the message names the field.  The
// Smc constructor itself never fails: it rounds `entries` up to a power of
// two (minimum 4).
absl::Status ValidateSmcConfig(const SmcConfig& config);

struct SmcStats {
  uint64_t lookups = 0;     // keys looked up
  uint64_t hits = 0;        // verified hits returned
  uint64_t false_hits = 0;  // signature matched, verification failed
  uint64_t inserts = 0;
  uint64_t updates = 0;     // same signature in the bucket: index replaced
  uint64_t evictions = 0;   // a way with a live megaflow was overwritten
};

struct alignas(32) SmcBucket {
  uint16_t sig[kSmcWays] = {};
  uint32_t mf_index[kSmcWays] = {kInvalidIndex, kInvalidIndex, kInvalidIndex,
                                 kInvalidIndex};
};
static_assert(sizeof(SmcBucket) == 32, "SmcBucket layout documented in smc.h");

class Smc {
 public:
  explicit Smc(const MegaflowPool* pool, SmcConfig cfg = {});
  Smc(const Smc&) = delete;
  Smc& operator=(const Smc&) = delete;

  // For each set bit i of todo_map (bits >= kMaxBurst must be clear), looks
  // keys[i] up.  A verified hit sets bit i of the result and writes
  // mf_index[i]; for a miss mf_index[i] is left untouched.  Buckets of the
  // whole burst are prefetched before any is read.
  uint32_t LookupBurst(const FlowKey* keys, uint32_t todo_map,
                       uint32_t* mf_index) const;
  // Single-key convenience: the megaflow index, or kInvalidIndex on a miss.
  uint32_t Lookup(const FlowKey& key) const;
  // Lookup without counting anything (Pipeline::Trace: an operator's trace
  // must not move the counters that account for packets).
  uint32_t Peek(const FlowKey& key) const;

  // key -> pool megaflow `mf_index`.  Same signature in the bucket: update
  // that way; else an empty way or one whose megaflow is not live; else a
  // pseudo-random way is replaced.
  void Insert(const FlowKey& key, uint32_t mf_index);

  void Flush();
  // Ways naming a live megaflow (they may still fail verification for some
  // keys if the slot was reused).  O(entries): a walk of the whole table
  // (8 MiB at 1M entries, milliseconds), for tests and debugging.
  uint32_t Occupancy() const;
  // Ways holding an entry, live or naming a megaflow removed since (such a
  // way counts until an insert reuses it or a flush clears it).  O(1),
  // kept as entries come and go: what the PMD's snapshot reports, so that a
  // metrics scrape does not stall the PMD for the walk.  >= Occupancy().
  uint32_t Held() const { return held_; }
  // What Held() must equal, by walking the table.  O(entries); for tests.
  uint32_t CountHeld() const;
  uint32_t entries() const { return (bucket_mask_ + 1) * kSmcWays; }
  const SmcStats& stats() const { return stats_; }
  // Size, occupancy, counters, first few non-empty buckets.
  std::string DebugString(int max_buckets = 4) const;

  static uint16_t SignatureOf(uint64_t hash) {
    return static_cast<uint16_t>(hash >> 48);
  }
  uint32_t BucketOf(uint64_t hash) const {
    return static_cast<uint32_t>(hash) & bucket_mask_;
  }

 private:
  bool WayLive(uint32_t idx) const {
    return idx != kInvalidIndex && idx < pool_->capacity() &&
           pool_->Get(idx).live;
  }
  uint64_t NextRandom();

  const MegaflowPool* pool_;
  std::unique_ptr<SmcBucket[]> buckets_;
  uint32_t bucket_mask_;
  uint64_t rng_state_;
  uint32_t held_ = 0;
  mutable SmcStats stats_;
  // The verified megaflow for `key` in its bucket, or kInvalidIndex; adds
  // the signature matches that failed verification to *false_hits.
  uint32_t Find(const FlowKey& key, uint64_t* false_hits) const;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_CACHE_SMC_H_
