// emc.h — the exact-match cache (EMC): full FlowKey -> megaflow, 2 probes.
//
// Contract
// --------
// The first cache a packet meets.  An entry remembers one exact key and the
// (index, version) of the megaflow that key was classified by.  A hit is
// valid only while `pool.IsLive(index, version)`: freeing a megaflow (which
// bumps its slot's version) invalidates every EMC entry naming it at once,
// with no walk over the EMC.  Dead entries are then reused by Insert and
// cleared slowly by SweepSome().
//
// Threads: an Emc belongs to one PMD thread, like the MegaflowPool it points
// into.  Every method is for that thread only; nothing is atomic or locked.
// The pool must outlive the Emc.
//
// Hot path: LookupBurst, Insert, MaybeInsert and SweepSome allocate nothing,
// lock nothing, log nothing and throw nothing.  Memory is allocated once, in
// the constructor.  Flush, Occupancy and DebugString are O(entries) and meant
// for the control plane / tests.
//
// Placement
// ---------
// A key may live in exactly two slots, both derived from `key.hash`:
//   slot0 = hash & (entries-1)
//   slot1 = (hash >> log2(entries)) & (entries-1), or slot0^1 if that equals
//           slot0 (so every key always has two distinct candidates).
// Insert: if the key is already in one of its slots the entry is updated in
// place; else an empty or dead slot is used (a live entry is never evicted
// while a dead candidate exists); else the EmcPolicy decides:
//   kRandomVictim  evict one of the two at random (the classic OVS scheme);
//   kOlderVictim   evict the entry that was inserted less recently;
//   kCuckoo        make room by moving the occupant of a candidate to *its*
//                  other slot, whose occupant moves to its other slot, ...
//                  (a cuckoo chain).  Each entry has one alternative, so from
//                  each candidate there is one chain; it is followed read-only
//                  for up to `max_moves` steps and applied only if it ends in
//                  a free or dead slot.  If neither chain does, a random
//                  candidate is evicted.  Lookups stay 2 probes; only the
//                  (rare, miss-path) insert does more work.  This is the
//                  default: with 4096 streams in 8192 slots it keeps all of
//                  them resident with zero churn, where random eviction
//                  keeps evicting (99.8-99.94% hits), and it never does
//                  worse than random on hit rate under overload (measured
//                  in emc_benchmark.cc, see docs/caches-emc-smc.md).
//
// Memory layout: `entries` EmcEntry of 64 bytes each, 64-byte aligned: one
// cache line holds the header (hash, map, index, version) and the first
// kEmcInlineWords = 5 packed key words, which is the whole key of every
// IPv4 packet (meta, eth_dst, eth_src, ipv4, l4; VLAN tags live in the
// Ethernet words).  Longer keys (IPv6: 8 words) keep words 5.. in a parallel
// array of 32-byte EmcOverflow records, read only for such keys.  So an IPv4
// probe touches one line, an IPv6 hit two.  LookupBurst prefetches the
// first candidate of every key (and its overflow record if the key is long)
// before comparing any, and the second candidate only for keys that missed
// the first.
//
//   struct EmcEntry {            // 64 bytes
//     uint64_t hash;             //  0  FlowKey::hash
//     uint16_t map;              //  8  FlowKey::map (0 for an empty slot)
//     uint8_t  n_words;          // 10
//     uint8_t  pad;              // 11
//     uint32_t stamp;            // 12  insert sequence (kOlderVictim)
//     uint64_t words[5];         // 16  packed key words 0..4, as in FlowKey
//     uint32_t mf_index;         // 56  kInvalidIndex when empty
//     uint32_t mf_version;       // 60
//   };
// The first 56 bytes sit where FlowKey has the same fields (hash, map,
// n_words, then words at 16), so a probe compares the entry with the key
// in 16-byte blocks, ignoring bytes 11..15 (pad/flags, stamp/reserved).
//   struct EmcOverflow { uint64_t words[4]; };  // packed key words 5..8
#ifndef FLOWCLASS_DATAPLANE_CACHE_EMC_H_
#define FLOWCLASS_DATAPLANE_CACHE_EMC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"

namespace flowclass {

enum class EmcPolicy : uint8_t {
  kRandomVictim,
  kOlderVictim,
  kCuckoo,
};
const char* EmcPolicyName(EmcPolicy p);

struct EmcConfig {
  uint32_t entries = 8192;          // power of two >= 2
  uint32_t insert_inv_prob = 100;   // MaybeInsert inserts with prob 1/N; 0=off
  uint64_t seed = 1;                // per-instance PRNG seed (deterministic)
  EmcPolicy policy = EmcPolicy::kCuckoo;
  uint32_t max_moves = 8;           // kCuckoo: longest displacement walk
};

// Checks a config for the control plane; the message names the field.
// The Emc constructor itself never fails: it rounds `entries` up to a power
// of two (minimum 2) and caps `max_moves` at 64.
absl::Status ValidateEmcConfig(const EmcConfig& config);

// Insert-side counters (lookup hits are counted by the pipeline).  Plain
// integers written by the owning thread only.
struct EmcStats {
  uint64_t inserts = 0;         // Insert calls (incl. those from MaybeInsert)
  uint64_t updates = 0;         // key already present: updated in place
  uint64_t evictions = 0;       // a live entry was dropped to make room
  uint64_t moves = 0;           // kCuckoo: entries moved to their other slot
  uint64_t skipped = 0;         // MaybeInsert calls that chose not to insert
  uint64_t swept = 0;           // dead entries cleared by SweepSome
};

inline constexpr int kEmcInlineWords = 5;

struct alignas(64) EmcEntry {
  uint64_t hash = 0;
  uint16_t map = 0;
  uint8_t n_words = 0;
  uint8_t pad = 0;
  uint32_t stamp = 0;
  uint64_t words[kEmcInlineWords] = {};
  uint32_t mf_index = kInvalidIndex;
  uint32_t mf_version = 0;
};
static_assert(sizeof(EmcEntry) == 64, "EmcEntry layout documented in emc.h");
// Emc::Matches compares the first 56 bytes of an entry with a FlowKey's.
static_assert(offsetof(EmcEntry, hash) == offsetof(FlowKey, hash) &&
                  offsetof(EmcEntry, map) == offsetof(FlowKey, map) &&
                  offsetof(EmcEntry, n_words) == offsetof(FlowKey, n_words) &&
                  offsetof(EmcEntry, words) == offsetof(FlowKey, words) &&
                  offsetof(EmcEntry, words) == 16,
              "EmcEntry's key fields sit where FlowKey has them");

struct EmcOverflow {
  uint64_t words[kFlowWords - kEmcInlineWords] = {};
};

class Emc {
 public:
  explicit Emc(const MegaflowPool* pool, EmcConfig cfg = {});
  Emc(const Emc&) = delete;
  Emc& operator=(const Emc&) = delete;

  // For each set bit i of todo_map (bits >= kMaxBurst must be clear), looks
  // keys[i] up.  A hit sets bit i of the result and writes mf_index[i]; for a
  // miss mf_index[i] is left untouched.  Staged: all candidate slots of the
  // burst are prefetched before any is compared.
  // first_slots_prefetched: the caller already prefetched every key's first
  // slot (ParseBurst with prefetch_hint()), so stage 1 is skipped.
  uint32_t LookupBurst(const FlowKey* keys, uint32_t todo_map,
                       uint32_t* mf_index, bool first_slots_prefetched = false) const;
  // The same, giving the megaflows themselves (the pipeline's form).
  uint32_t LookupBurst(const FlowKey* keys, uint32_t todo_map, const Megaflow** mf,
                       bool first_slots_prefetched = false) const;
  // Where ParseBurst should prefetch each key's first slot.
  HashPrefetch prefetch_hint() const {
    return {reinterpret_cast<const uint8_t*>(table_.get()), mask_, 6};
  }

  // Single-key convenience: the megaflow index, or kInvalidIndex on a miss.
  uint32_t Lookup(const FlowKey& key) const;

  // Unconditional insert of key -> pool megaflow `mf_index` (which must be
  // live; its current version is recorded).  See "Placement" above.
  void Insert(const FlowKey& key, uint32_t mf_index);
  // Insert with probability 1/insert_inv_prob (never when it is 0); with
  // `boost` > 1, boost/insert_inv_prob (at most 1): the EmcGate's sampled
  // bursts stand for kSampleEvery bursts, so that the EMC fills as fast
  // per packet as it would without the gate.
  void MaybeInsert(const FlowKey& key, uint32_t mf_index, uint32_t boost = 1);

  // Checks the next n slots (round robin) and clears the dead ones.  Entries
  // die only when the pool frees a megaflow, so after one full round with
  // no free since, it returns at once (the PMD calls it every burst).
  void SweepSome(int n);

  void set_insert_inv_prob(uint32_t inv_prob);
  uint32_t insert_inv_prob() const { return insert_inv_prob_; }

  // Empties every slot.  O(entries).
  void Flush();
  // Number of slots holding a live entry.  O(entries).
  uint32_t Occupancy() const;
  uint32_t entries() const { return mask_ + 1; }
  EmcPolicy policy() const { return policy_; }
  const EmcStats& stats() const { return stats_; }
  // Size, occupancy, insert probability, policy, counters, first few entries.
  std::string DebugString(int max_entries = 8) const;

 private:
  struct Slots {
    uint32_t s0, s1;
  };
  Slots SlotsOf(uint64_t hash) const {
    const uint32_t s0 = static_cast<uint32_t>(hash) & mask_;
    uint32_t s1 = static_cast<uint32_t>(hash >> shift_) & mask_;
    if (s1 == s0) s1 = s0 ^ 1u;
    return {s0, s1};
  }
  bool Matches(uint32_t slot, const FlowKey& key) const;
  template <typename Found>
  uint32_t LookupBurstOf(const FlowKey* keys, uint32_t todo_map, bool first_slots_prefetched,
                         Found found) const;
  const Megaflow* LiveMegaflow(const EmcEntry& e) const {
    return pool_->LiveOrNull(e.mf_index, e.mf_version);
  }
  bool IsDead(const EmcEntry& e) const { return LiveMegaflow(e) == nullptr; }
  void Store(uint32_t slot, const FlowKey& key, uint32_t mf_index);
  void Move(uint32_t to, uint32_t from);
  void Clear(uint32_t slot) { table_[slot] = EmcEntry(); }
  uint64_t NextRandom();
  // kCuckoo: looks for a chain of at most max_moves_ moves starting at
  // `start` that ends in a free or dead slot; if found, shifts the chain and
  // stores key in `start`.  Reads only, and returns false, otherwise.
  bool CuckooPlace(const FlowKey& key, uint32_t mf_index, uint32_t start);

  const MegaflowPool* pool_;
  std::unique_ptr<EmcEntry[]> table_;
  std::unique_ptr<EmcOverflow[]> overflow_;  // words 5.. of long keys
  uint32_t mask_;
  int shift_;
  EmcPolicy policy_;
  uint32_t max_moves_;
  uint32_t insert_inv_prob_ = 0;
  uint32_t insert_threshold_ = 0;  // insert when random32 <= threshold
  uint64_t rng_state_;
  uint32_t stamp_ = 0;
  uint32_t sweep_pos_ = 0;
  uint32_t sweep_left_ = 0;         // slots to check before the sweep rests
  uint64_t sweep_frees_seen_ = 0;   // pool_->frees() when the round began
  EmcStats stats_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_CACHE_EMC_H_
