// internal/rule_walk.h — the walks Lookup follows (private to rule_table.cc
// and its tests): a partition's subtables, in descending max priority, held
// in blocks so that a batch that moves a few subtables copies the blocks
// they leave and enter, not the whole walk.
//
// A Walk is a vector of pointers to WalkBlocks; both are immutable once
// published (readers walk them without locks).  WalkEditor::Edit makes the
// next version of a walk: the blocks no change falls into are shared with
// the old version (pointers copied), the others are rebuilt and the old
// ones handed to `retire`.  The slots, read block after block, are in
// exactly the order a full sort (SortSlots) of the same slots gives, and
// every block holds 1..kWalkBlockSlots of them.
//
// Why: a one-rule batch into random 10K (≈ 2,000 subtables, and each of its
// four ports' walks holding the shared subtables too) moved one subtable and
// then copied and merged five walks of ≈ 2,000 slots, ≈ 22k of the ≈ 29k
// instructions of the batch (docs/classifier.md, "Fewer instructions per
// lookup").
#ifndef FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_WALK_H_
#define FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_WALK_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/internal/rule_subtable.h"

namespace flowclass {
namespace internal {

// At most this many slots a block (≈ 0.5 KB), and a rebuilt block that
// would hold fewer than kWalkBlockMin is merged with its neighbour; a block
// that overflows is split into blocks of about kWalkBlockFill.  (64-slot
// blocks cost random 10K's one-rule batches ≈ 7% more instructions, the
// copies of the blocks changed; 32 cost its lookups 0.3% more, the ClassBench
// sets' none but acl2 10k's, 37 subtables in two blocks, 0.5%.)
inline constexpr uint32_t kWalkBlockSlots = 32;
inline constexpr uint32_t kWalkBlockFill = 24;
inline constexpr uint32_t kWalkBlockMin = 8;

// Slots [0, n) are the walk's; the kWalkBlockEnd slots after them have no
// subtable (null): the first ends Lookup's loop over the block (which so
// keeps no end pointer), and Lookup prefetches slot[2]'s subtable without
// checking where the block ends (a prefetch of null is dropped, never a
// fault).  So the blocks' walk costs about the instructions per lookup the
// flat walk it replaced cost, which checked both per subtable visited.
inline constexpr uint32_t kWalkBlockEnd = 3;
struct WalkBlock {
  uint32_t n = 0;
  std::array<OrderSlot, kWalkBlockSlots + kWalkBlockEnd> slots;
};
// The blocks of a walk, in order, and after the last one a null pointer
// that ends Lookup's loop (which so keeps no end of its own).
struct Walk {
  Walk() : blocks_{nullptr} {}
  size_t size() const { return blocks_.size() - 1; }
  bool empty() const { return size() == 0; }
  const WalkBlock* operator[](size_t i) const { return blocks_[i]; }
  const WalkBlock* back() const { return blocks_[size() - 1]; }
  auto begin() const { return blocks_.begin(); }
  auto end() const { return blocks_.end() - 1; }
  // The blocks, then nullptr.
  const WalkBlock* const* data() const { return blocks_.data(); }
  void reserve(size_t n) { blocks_.reserve(n + 1); }
  void push_back(const WalkBlock* b) {
    blocks_.back() = b;
    blocks_.push_back(nullptr);
  }
  void pop_back() {
    blocks_.pop_back();
    blocks_.back() = nullptr;
  }
  template <typename It>
  void append(It from, It to) {
    blocks_.pop_back();
    blocks_.insert(blocks_.end(), from, to);
    blocks_.push_back(nullptr);
  }

 private:
  std::vector<const WalkBlock*> blocks_;
};

// The slot a walk holds for a subtable, to take out: its key as it was
// placed (the max priority then; the mask is copied because an emptied
// subtable may be freed before the walks are edited) and its address.
struct WalkRemoval {
  uint32_t priority;
  Flow mask;
  const Subtable* subtable;
};

inline bool RemovalBefore(const WalkRemoval& a, const WalkRemoval& b) {
  return KeyBefore(a.priority, a.mask, b.priority, b.mask);
}

// Calls fn(slot) for every slot of `walk`, in order.
template <typename Fn>
void ForEachSlot(const Walk& walk, Fn&& fn) {
  for (const WalkBlock* b : walk)
    for (uint32_t i = 0; i < b->n; ++i) fn(b->slots[i]);
}

inline void FreeWalkBlock(void* p) { delete static_cast<WalkBlock*>(p); }
inline void FreeWalk(void* p) { delete static_cast<Walk*>(p); }
// A walk no longer published: its blocks and the vector.
inline void FreeWalkAndBlocks(Walk* w) {
  if (w == nullptr) return;
  for (const WalkBlock* b : *w) delete b;
  delete w;
}

// Writer-only; keeps its scratch buffer between edits.
class WalkEditor {
 public:
  // A new walk of the sorted `slots`.
  Walk* Build(absl::Span<const OrderSlot> slots) {
    buf_.assign(slots.begin(), slots.end());
    auto* out = new Walk();
    Flush(out);
    return out;
  }

  // The next version of `old`: without the slots of `remove` (each in
  // `old`; sorted by RemovalBefore), with those of `add` (sorted by
  // SlotBefore; none in `old` after the removals).  The blocks of `old`
  // the new walk does not share go to retire(const WalkBlock*); `old`
  // itself is left to the caller.
  template <typename RetireFn>
  Walk* Edit(const Walk& old, absl::Span<const WalkRemoval> remove,
             absl::Span<const OrderSlot> add, RetireFn&& retire) {
    auto* out = new Walk();
    out->reserve(old.size() + add.size() / kWalkBlockFill + 2);
    buf_.clear();
    size_t r = 0, a = 0;
    for (size_t i = 0; i < old.size(); ++i) {
      if (buf_.empty()) {
        // The blocks before the first one a change falls in (whose last
        // slot is before the first change) stay as they are: found by a
        // binary search and shared in one copy.
        const bool more_adds = a < add.size();
        const bool more_removes = r < remove.size();
        if (!more_adds && !more_removes) {
          out->append(old.begin() + static_cast<std::ptrdiff_t>(i), old.end());
          break;
        }
        const bool add_first =
            more_adds && (!more_removes || KeyBefore(add[a].max_priority, add[a].subtable->mask,
                                                     remove[r].priority, remove[r].mask));
        const uint32_t priority = add_first ? add[a].max_priority : remove[r].priority;
        const Flow& mask = add_first ? add[a].subtable->mask : remove[r].mask;
        const auto first = old.begin() + static_cast<std::ptrdiff_t>(i);
        const auto touched = std::partition_point(
            first, old.end() - 1, [&](const WalkBlock* b) {
              const OrderSlot& last = b->slots[b->n - 1];
              return KeyBefore(last.max_priority, last.subtable->mask, priority, mask);
            });
        out->append(first, touched);
        i = static_cast<size_t>(touched - old.begin());
      }
      const WalkBlock* b = old[i];
      const OrderSlot& last = b->slots[b->n - 1];
      const bool is_last = i + 1 == old.size();
      // Slots to add before `last` (after the last block: all the rest),
      // slots to remove up to `last`.
      const bool adds = a < add.size() && (is_last || SlotBefore(add[a], last));
      const bool removes =
          r < remove.size() &&
          !KeyBefore(last.max_priority, last.subtable->mask, remove[r].priority, remove[r].mask);
      if (!adds && !removes && buf_.empty()) {
        out->push_back(b);  // untouched: shared with the old walk
        continue;
      }
      for (uint32_t j = 0; j < b->n; ++j) {
        const OrderSlot& s = b->slots[j];
        while (a < add.size() && SlotBefore(add[a], s)) buf_.push_back(add[a++]);
        if (r < remove.size() && remove[r].subtable == s.subtable) {
          ++r;
          continue;
        }
        buf_.push_back(s);
      }
      if (is_last) buf_.insert(buf_.end(), add.begin() + static_cast<std::ptrdiff_t>(a), add.end());
      retire(b);
      // A short run waits to be merged with the next block.
      if (buf_.size() >= kWalkBlockMin) Flush(out);
    }
    if (old.empty()) buf_.assign(add.begin(), add.end());
    if (!buf_.empty() && buf_.size() < kWalkBlockMin && !out->empty()) {
      // The walk's tail is short: merged with the block before it.
      const WalkBlock* prev = out->back();
      out->pop_back();
      buf_.insert(buf_.begin(), prev->slots.begin(), prev->slots.begin() + prev->n);
      retire(prev);
    }
    Flush(out);
    return out;
  }

 private:
  // buf_ as blocks of at most kWalkBlockSlots, appended to *out; buf_
  // emptied.
  void Flush(Walk* out) {
    const size_t n = buf_.size();
    if (n == 0) return;
    const size_t k = n <= kWalkBlockSlots ? 1 : (n + kWalkBlockFill - 1) / kWalkBlockFill;
    size_t from = 0;
    for (size_t i = 0; i < k; ++i) {
      const size_t to = n * (i + 1) / k;
      auto* b = new WalkBlock();
      b->n = static_cast<uint32_t>(to - from);
      std::copy(buf_.begin() + static_cast<std::ptrdiff_t>(from),
                buf_.begin() + static_cast<std::ptrdiff_t>(to), b->slots.begin());
      for (uint32_t e = 0; e < kWalkBlockEnd; ++e) b->slots[b->n + e] = OrderSlot{0, nullptr};
      out->push_back(b);
      from = to;
    }
    buf_.clear();
  }

  std::vector<OrderSlot> buf_;
};

}  // namespace internal
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_WALK_H_
