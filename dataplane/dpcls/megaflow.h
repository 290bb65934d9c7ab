// megaflow.h — megaflows, their verdicts, and the per-PMD pool that owns them.
//
// Contract
// --------
// A megaflow is (value, mask, verdict): every key K with (K & mask) == value
// gets `verdict`.  Megaflows are produced by RuleTable upcalls, whose masks
// always include in_port exactly, so megaflows of different ports never
// overlap (see ARCHITECTURE.md "Two tiers"); two of one port may, when
// revalidation kept one whose mask is wider than a new lookup's, and then
// both are valid for the current table and give their shared keys the same
// verdict.  That is why every cache above the megaflow classifier may point
// at a megaflow and only needs to verify it on hit:
//   EMC  stores (full key, index, version): a hit is valid while the pool
//        slot still has that version (the slot is alive and was not reused).
//   SMC  stores (16-bit signature, index): on hit the pipeline checks the slot
//        is live and (K & mask) == value.
//   CD   stores (signature, subtable id): on hit only that subtable is probed.
//
// Memory: the pool is a fixed array allocated once; Alloc/Free never touch the
// heap.  It also keeps a dense list of the live slots, so walks over live
// megaflows (revalidation) cost O(live), not O(capacity).  Indices are stable for a megaflow's life.  `version` is bumped on
// Free, so an old (index, version) pair can never name a new megaflow.
//
// Threads: a pool belongs to one PMD thread (single writer, single reader).
#ifndef FLOWCLASS_DATAPLANE_DPCLS_MEGAFLOW_H_
#define FLOWCLASS_DATAPLANE_DPCLS_MEGAFLOW_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"

namespace flowclass {

inline constexpr uint32_t kInvalidIndex = 0xffffffffu;

// What the pipeline decided for one packet.  rule_id 0: no rule matched
// (the packet is dropped and counted as such).
struct Verdict {
  uint64_t rule_id = 0;
  Action action;
  friend bool operator==(const Verdict&, const Verdict&) = default;
};

// Laid out for the per-packet path: a lookup's verify reads `value` and
// `subtable`, a hit then writes `hits` and `last_used_ms` and reads
// `verdict` -- all in the first 120 bytes, two cache lines (the pool's slots
// are 64-byte aligned), which the staged lookups prefetch.  `mask` is read
// only on the control path and by caches that re-check a whole key.
struct alignas(64) Megaflow {
  Flow value;  // key & mask at install time
  uint16_t subtable = 0;           // owner subtable id in its classifier
  bool live = false;
  uint32_t index = kInvalidIndex;  // slot in the pool (stable)
  uint32_t version = 0;            // bumped when the slot is freed
  Verdict verdict;
  uint64_t hits = 0;
  // The pipeline's coarse clock (ms) at the last packet it classified (set
  // on install and on every hit, next to `hits`); idle expiry reads it.
  uint64_t last_used_ms = 0;
  Flow mask;

  // Full check that `key` is covered by this megaflow.
  bool Covers(const FlowKey& key) const {
    for (int i = 0; i < kFlowWords; ++i)
      if ((key.Word(i) & mask.w[i]) != value.w[i]) return false;
    return true;
  }
};
static_assert(sizeof(Megaflow) == 192, "three cache lines");
static_assert(offsetof(Megaflow, last_used_ms) + sizeof(uint64_t) <= 128,
              "the hot fields share the first two cache lines");

class MegaflowPool {
 public:
  explicit MegaflowPool(uint32_t capacity)
      : slots_(capacity), capacity_(capacity), free_(capacity), live_pos_(capacity) {
    for (uint32_t i = 0; i < capacity; ++i) {
      slots_[i].index = i;
      free_[i] = capacity - 1 - i;  // hand out low indices first
    }
    live_list_.reserve(capacity);
  }
  MegaflowPool(const MegaflowPool&) = delete;
  MegaflowPool& operator=(const MegaflowPool&) = delete;

  // A fresh live slot, or nullptr when full (a "failed upcall").
  Megaflow* Alloc() {
    if (free_.empty()) return nullptr;
    Megaflow* m = &slots_[free_.back()];
    free_.pop_back();  // never reallocates: capacity reserved in the ctor
    m->live = true;
    m->hits = 0;
    live_pos_[m->index] = static_cast<uint32_t>(live_list_.size());
    live_list_.push_back(m->index);  // never reallocates: reserved
    return m;
  }
  void Free(Megaflow* m) {
    if (!m->live) return;
    m->live = false;
    ++m->version;
    ++frees_;
    free_.push_back(m->index);
    // Swap-remove from the live list.
    const uint32_t pos = live_pos_[m->index];
    const uint32_t last = live_list_.back();
    live_list_[pos] = last;
    live_pos_[last] = pos;
    live_list_.pop_back();
  }
  Megaflow& Get(uint32_t index) { return slots_[index]; }
  const Megaflow& Get(uint32_t index) const { return slots_[index]; }
  // The megaflow at `index` if it is live at `version`, else nullptr.
  const Megaflow* LiveOrNull(uint32_t index, uint32_t version) const {
    if (index >= capacity_) return nullptr;
    const Megaflow* m = &slots_[index];
    return m->live && m->version == version ? m : nullptr;
  }
  // A pointer this pool handed out as const (LiveOrNull), for its owner.
  Megaflow* Mutable(const Megaflow* m) { return const_cast<Megaflow*>(m); }
  bool IsLive(uint32_t index, uint32_t version) const {
    return LiveOrNull(index, version) != nullptr;
  }
  uint32_t capacity() const { return capacity_; }
  uint32_t live() const { return static_cast<uint32_t>(live_list_.size()); }
  // Free() calls so far: a cache of (index, version) pairs can only have
  // gained dead entries when this has moved.
  uint64_t frees() const { return frees_; }
  // Index of the k-th live megaflow, k < live(), in no particular order.
  // Free() moves the last entry into the freed position, so a walk that may
  // free the megaflow it visits must go from live()-1 down to 0.
  uint32_t LiveIndex(uint32_t k) const { return live_list_[k]; }

 private:
  std::vector<Megaflow> slots_;
  uint32_t capacity_;  // slots_.size(), without dividing by sizeof(Megaflow)
  std::vector<uint32_t> free_;
  uint64_t frees_ = 0;
  std::vector<uint32_t> live_list_;  // indices of live slots
  std::vector<uint32_t> live_pos_;   // slot index -> position in live_list_
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPCLS_MEGAFLOW_H_
