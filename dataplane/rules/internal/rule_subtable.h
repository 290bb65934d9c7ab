// internal/rule_subtable.h — private parts of the rule table (rule_table.cc
// only includes this): a subtable (the buckets of one table mask), the
// partitions by in_port that hold them, the order Lookup walks, the prefix
// levels that let it skip subtables, and a rule's one entry (EntryOf).
//
// Threads: a Subtable's key sets and the published Order are read by
// concurrent readers (see rule_key_set.h); everything else is the writer's.
#ifndef FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_SUBTABLE_H_
#define FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_SUBTABLE_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/internal/rule_key_set.h"
#include "dataplane/rules/rule.h"

namespace flowclass {
namespace internal {

// The hash and equality of the partitions' mask maps (Partition::by_mask).
struct FlowHash {
  size_t operator()(const Flow& f) const {
    return HashWords(f.w.data(), kFlowWords, 0);
  }
};
// Word-wise and branch-free: Flow's operator== is a call to memcmp, which
// was ≈ 3% of a streamed load (one mask lookup per masked entry).
struct FlowEq {
  bool operator()(const Flow& a, const Flow& b) const {
    uint64_t diff = 0;
    for (int i = 0; i < kFlowWords; ++i) diff |= a.w[i] ^ b.w[i];
    return diff == 0;
  }
};

struct Partition;
// The walks (internal/rule_walk.h): a partition's subtables in blocks.
struct WalkBlock;
struct Walk;

// Prefix levels
// -------------
// The fields whose table masks are prefixes cut at levels (multiples of 8
// bits): IPv4 addresses and L4 ports.  For each, PrefixLevels holds, per
// level, the prefixes of that length of every entry whose table mask is at
// least that long (a count per prefix).  A lookup finds, per field, the
// deepest level the key's prefix is there (its depth); a subtable that needs
// a longer prefix of the field cannot hold the key's bucket, and is skipped
// with only the bits of the first level that is not there in the megaflow
// mask, instead of the subtable's whole mask (what OVS's prefix tries do,
// on 8-bit levels; see docs/classifier.md, "Slow-path lookup").
struct LevelField {
  Field field;
  int width;
  // Where the field is in a Flow (InfoOf(field)): Lookup reads and
  // un-wildcards it with constant shifts.
  int word;
  int shift;
  uint64_t Get(const Flow& f) const { return (f.w[word] >> shift) & ((uint64_t{1} << width) - 1); }
  void Or(Flow* f, uint64_t bits) const { f->w[word] |= bits << shift; }
};
constexpr LevelField LevelFieldOf(Field f) {
  return {f, InfoOf(f).bits, InfoOf(f).word, InfoOf(f).shift};
}
inline constexpr int kLevelStep = 8;
inline constexpr int kLevelFields = 4;
inline constexpr std::array<LevelField, kLevelFields> kLevelField = {
    {LevelFieldOf(Field::kIpv4Src), LevelFieldOf(Field::kIpv4Dst), LevelFieldOf(Field::kTpSrc),
     LevelFieldOf(Field::kTpDst)}};
inline constexpr int kMaxLevels = 32 / kLevelStep;
static_assert(kLevelFields <= 4 && kMaxLevels * kLevelStep < 0x60,
              "a level length per byte of a uint32_t, below LevelsShort's borrow");

// Per-field level lengths packed one per byte (field j in byte j): a
// subtable's table-mask prefix lengths, a key's depths.  Whether a subtable
// needs a longer prefix than the key has, of any field, is one subtraction:
// in each byte (0x80 | depth) - length keeps its top bit exactly when
// length <= depth, and never borrows from the next byte (lengths <= 32).
inline uint32_t LevelsShort(uint32_t depths, uint32_t lengths) {
  return ~((depths | 0x80808080u) - lengths) & 0x80808080u;  // top bit: field short
}

// Bits set in a field of at most 32 bits (no libgcc call without -mpopcnt).
inline int PopCount32(uint64_t x) {
  uint32_t v = static_cast<uint32_t>(x);
  v = v - ((v >> 1) & 0x55555555u);
  v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
  v = (v + (v >> 4)) & 0x0f0f0f0fu;
  return static_cast<int>((v * 0x01010101u) >> 24);
}

// The first `len` bits of a `width`-bit field.
inline uint64_t PrefixMaskOf(int len, int width) {
  if (len <= 0) return 0;
  const uint64_t all = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
  return (all << (width - len)) & all;
}

class PrefixLevels {
 public:
  // Writer: the prefixes of `value` of every level up to `len`, +1 / -1.
  template <typename RetireFn>
  void Add(uint64_t value, int len, int width, RetireFn&& retire) {
    for (int l = 1; l * kLevelStep <= len; ++l) {
      const PackedKey<1> k = Key(value, l, width);
      std::atomic<uintptr_t>& bits = sets_[l - 1].Upsert(k.w, k.hash, 1, retire);
      const uintptr_t b = bits.load(std::memory_order_relaxed);
      const bool first = b == 0 || b == kTombstone;
      if (first && l <= kBitmapLevels) SetBit(l, value >> (width - l * kLevelStep), true);
      sets_[l - 1].Set(bits, first ? kOne : b + kOne - 1);
    }
  }
  template <typename RetireFn>
  void Remove(uint64_t value, int len, int width, RetireFn&& retire) {
    for (int l = 1; l * kLevelStep <= len; ++l) {
      const PackedKey<1> k = Key(value, l, width);
      std::atomic<uintptr_t>& bits = sets_[l - 1].Upsert(k.w, k.hash, 1, retire);
      const uintptr_t b = bits.load(std::memory_order_relaxed);
      if (b == kOne && l <= kBitmapLevels) SetBit(l, value >> (width - l * kLevelStep), false);
      sets_[l - 1].Set(bits, b == kOne ? kTombstone : b - (kOne - 1));
    }
  }
  // Reader: the longest level length (0, 8, ...) whose prefix of `value` is
  // there, at most `width`.  The first two levels are bit tests (8 KB per
  // field, mostly cached), the others hash probes.
  int Depth(uint64_t value, int width) const {
    for (int l = 1; l <= kBitmapLevels; ++l)
      if (!TestBit(l, value >> (width - l * kLevelStep))) return (l - 1) * kLevelStep;
    int d = kBitmapLevels * kLevelStep;
    for (int l = kBitmapLevels + 1; l * kLevelStep <= width; ++l) {
      const PackedKey<1> k = Key(value, l, width);
      if (sets_[l - 1].Find(k.w, k.hash) == 0) break;
      d = l * kLevelStep;
    }
    return d;
  }

 private:
  // Levels 1 and 2 (8 and 16 bits: 256 and 65,536 prefixes) are also a
  // bitmap each, a bit per prefix present (count > 0), which the writer
  // sets before the entry's slot is published and clears after it is
  // unlinked, as it counts.
  static constexpr int kBitmapLevels = 2;
  static constexpr size_t BitmapWord(int l) { return l == 1 ? 0 : 256 / 64; }
  bool TestBit(int l, uint64_t prefix) const {
    return (bitmap_[BitmapWord(l) + prefix / 64].load(std::memory_order_relaxed) >>
            (prefix % 64)) & 1;
  }
  void SetBit(int l, uint64_t prefix, bool on) {
    std::atomic<uint64_t>& w = bitmap_[BitmapWord(l) + prefix / 64];
    const uint64_t bit = uint64_t{1} << (prefix % 64);
    const uint64_t old = w.load(std::memory_order_relaxed);
    w.store(on ? old | bit : old & ~bit, std::memory_order_release);
  }
  std::array<std::atomic<uint64_t>, (256 + 65536) / 64> bitmap_{};

  // A count c is stored as 4c + 1: odd, never 0 (empty) or kTombstone.
  static constexpr uintptr_t kOne = 5;
  static PackedKey<1> Key(uint64_t value, int l, int width) {
    PackedKey<1> k;
    k.w[0] = value & PrefixMaskOf(l * kLevelStep, width);
    k.hash = HashKeyWords<1>(k.w, 1);
    return k;
  }
  std::array<KeySet<1>, kMaxLevels> sets_;
};


// Hot fields first: both sets' array pointers, the word indexes and the
// packed mask words are in the first cache line, so probing a subtable
// touches that line, the set's array header and the slots.  The rest is
// writer-only.
struct alignas(64) Subtable {
  explicit Subtable(const Flow& m) : mask(m) {
    for (int i = 0; i < kFlowWords; ++i) {
      if (mask.w[i] != 0) {
        word_index[n_words] = static_cast<uint8_t>(i);
        packed_mask[n_words++] = mask.w[i];
      }
    }
    for (int j = 0; j < kLevelFields; ++j) {
      const LevelField& f = kLevelField[j];
      level_len[j] = static_cast<uint8_t>(
          std::countl_one(mask.Get(f.field) << (64 - f.width)));
      level_lens |= uint32_t{level_len[j]} << (8 * j);
    }
  }

  // `key` need not be masked.  Hot path: no allocation.  N >= n_words.
  template <int N>
  PackedKey<N> Pack(const Flow& key) const {
    PackedKey<N> k;
    for (int j = 0; j < n_words; ++j)
      k.w[j] = key.w[word_index[j]] & packed_mask[j];
    k.hash = HashKeyWords<N>(k.w, n_words);
    return k;
  }

  // fn(set, key) with the key set this subtable uses and `value` packed
  // for it; returns what fn returns.  (One body for const and not.)
  template <typename Fn>
  decltype(auto) WithKeys(const Flow& value, Fn&& fn) {
    return WithKeysOf(*this, value, fn);
  }
  template <typename Fn>
  decltype(auto) WithKeys(const Flow& value, Fn&& fn) const {
    return WithKeysOf(*this, value, fn);
  }
  template <typename Self, typename Fn>
  static decltype(auto) WithKeysOf(Self& st, const Flow& value, Fn& fn) {
    if (st.n_words <= kSmallKeyWords)
      return fn(st.small_keys, st.template Pack<kSmallKeyWords>(value));
    return fn(st.big_keys, st.template Pack<kFlowWords>(value));
  }
  size_t keys() const { return small_keys.size() + big_keys.size(); }
  template <typename Fn>
  void ForEachBucket(Fn&& fn) const {
    small_keys.ForEach(fn);
    big_keys.ForEach(fn);
  }

  uint32_t MaxPriority() const {
    return priority_counts.empty() ? 0 : priority_counts.rbegin()->first;
  }

  KeySet<kSmallKeyWords> small_keys;
  KeySet<kFlowWords> big_keys;
  std::array<uint8_t, kFlowWords> word_index{};
  uint8_t n_words = 0;
  std::array<uint64_t, kFlowWords> packed_mask{};  // first n_words valid
  // The table mask's prefix length of each kLevelField (a multiple of
  // kLevelStep).
  std::array<uint8_t, kLevelFields> level_len{};
  uint32_t level_lens = 0;  // level_len packed, field j in byte j (LevelsShort)
  Flow mask;
  // Linked entries (deleted ones until RemoveDeleted), by priority: the
  // max priority is an upper bound of what any reader's generation sees.
  absl::btree_map<uint32_t, uint32_t> priority_counts;
  size_t entries = 0;  // linked entries (deleted ones until RemoveDeleted)
  Partition* part = nullptr;  // the partition holding it
  bool moved = false;  // listed in the table's `moved` (RebuildOrder)
  // In the walks (of its partition, and every port's if shared), at
  // walk_priority: the max priority its slots were placed with
  // (RebuildOrder, which moves them when MaxPriority() is no longer that).
  bool in_walks = false;
  uint32_t walk_priority = 0;
};

// What Lookup walks: contiguous, so the next subtables can be prefetched.
struct OrderSlot {
  uint32_t max_priority;
  const Subtable* subtable;
};

// Descending max priority; ties broken by the mask words, so that a walk
// (and DebugString) depends only on the rule set, not on the history that
// built it.
// The order on (max priority, mask) keys: descending priority, then
// descending mask words.  The walk's editor (rule_walk.h) compares removed
// slots, which keep only their key, by it.
inline bool KeyBefore(uint32_t pa, const Flow& ma, uint32_t pb, const Flow& mb) {
  if (pa != pb) return pa > pb;
  return ma.w > mb.w;
}
inline bool SlotBefore(const OrderSlot& a, const OrderSlot& b) {
  return KeyBefore(a.max_priority, a.subtable->mask, b.max_priority, b.subtable->mask);
}
inline void SortSlots(std::vector<OrderSlot>* slots) {
  std::sort(slots->begin(), slots->end(), SlotBefore);
}

// The subtables of the rules of one in_port (the rules whose in_port is
// exact), or the shared ones (in_port wildcarded).  A key's lookup walks its
// port's subtables merged with the shared ones: the other ports' rules cost
// it nothing (with 100 ports of one ClassBench set each, a lookup was 4.8
// times dearer than with one port before partitions; see
// rule_table_benchmark's BM_LookupAmongPorts).  Writer-only.
struct Partition {
  bool exact = false;  // a port's (else the shared one)
  uint32_t port = 0;   // if exact
  absl::flat_hash_map<Flow, std::unique_ptr<Subtable>, FlowHash, FlowEq> by_mask;
  // A subtable came or went, or a max priority changed: its walk (the shared
  // partition: every walk) needs rebuilding.
  bool dirty = false;
  // The walk as published: the shared partition's subtables, or a port's
  // and the shared ones, sorted (SortSlots), in blocks
  // (internal/rule_walk.h).  Owned, with its blocks; retired when replaced
  // (a replaced block alone when the new walk no longer holds it).
  Walk* walk = nullptr;
};

// What Lookup walks, published as a whole (replaced, not edited; the old one
// retired): the walk of keys whose port has no partition, and each port's.
struct Order {
  const Walk* shared = nullptr;  // the shared partition's walk
  absl::flat_hash_map<uint32_t, const Walk*> by_port;
};

// The (value, mask) prefixes of a 16-bit range, on the stack: at most 30
// (1..65534).  Every insert and delete expands its rule's ranges.
struct Prefixes {
  std::array<std::pair<uint16_t, uint16_t>, 32> p;
  size_t n = 0;
  bool empty() const { return n == 0; }
  size_t size() const { return n; }
  const std::pair<uint16_t, uint16_t>& operator[](size_t i) const { return p[i]; }
};

inline Prefixes PrefixesOf(uint16_t lo, uint16_t hi) {
  Prefixes out;
  uint32_t cur = lo;
  const uint32_t end = hi;
  while (cur <= end) {
    // Largest aligned block starting at `cur` that stays inside [cur, end].
    int k = 0;
    while (k < 16) {
      const uint32_t size = 1u << (k + 1);
      if ((cur & (size - 1)) != 0 || cur + size - 1 > end) break;
      ++k;
    }
    out.p[out.n++] = {static_cast<uint16_t>(cur), static_cast<uint16_t>((0xffffu << k) & 0xffffu)};
    cur += 1u << k;
  }
  return out;
}

// A rule's one entry
// ------------------
// A rule is one entry, whatever its port ranges (they are not expanded into
// prefixes: two ranges of 1-65534 would be 900 entries).  The entry goes to
// the subtable of the rule's *table mask*: its match mask with each field
// relaxed (shortened) by RelaxField, a range field standing for the common
// prefix of its bounds.  Every rule whose mask covers a subtable's mask can
// live there; the rules of one packed key (a bucket) are checked one by one
// against the looked-up key (Match::Matches), so the table mask only has to
// be a subset of the rule's.  Fewer, coarser masks: fewer probes and wider
// megaflows.  The table mask is a function of the rule alone, so a table's
// layout depends on its rule set only, not on the history that built it.

// The mask of the common prefix of lo and hi (a range lies inside it).
inline uint16_t CommonPrefixMask(const PortRange& r) {
  const uint32_t diff = static_cast<uint32_t>(r.lo ^ r.hi);
  if (diff == 0) return 0xffff;
  const int keep = std::countl_zero(diff) - 16;  // equal leading bits
  return static_cast<uint16_t>((0xffffu << (16 - keep)) & 0xffffu);
}

// The bits of `field_mask` (a field `width` bits wide, right-aligned) a table
// mask keeps: its leading run of ones (a prefix, the shape of addresses and
// of a range's common prefix), shortened to a multiple of `step`, or the
// whole field when it is exact and at most 16 bits (protocols, ports,
// eth_type: few values, exact in most rules).  Masks with holes keep only
// the prefix before the first hole.
inline uint64_t RelaxField(uint64_t field_mask, int width, int step) {
  const uint64_t all = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
  if (field_mask == all && width <= 16) return all;
  const int lead = std::countl_one(field_mask << (64 - width));
  const int keep = std::min(lead, width) / step * step;
  if (keep == 0) return 0;
  return (all << (width - keep)) & all;
}

// Prefix lengths kept for wide fields (in bits): multiples of these.
inline constexpr int kRelaxStepIpv4 = 16;
inline constexpr int kRelaxStepWide = 16;  // 48- and 64-bit fields
static_assert(kRelaxStepIpv4 % kLevelStep == 0, "IPv4 table masks end on prefix levels");

// The key and mask of a rule's one entry: (value, table mask).
struct EntryShape {
  Flow value;  // the rule's value, ranges as their low bound, & mask
  Flow mask;   // the table mask
};

inline EntryShape EntryOf(const Rule& r) {
  EntryShape e;
  Flow full = r.match.mask;  // the rule's mask, ranges as common prefixes
  Flow value = r.match.value;
  if (!r.match.tp_src.IsFull()) {
    full.Set(Field::kTpSrc, CommonPrefixMask(r.match.tp_src));
    value.Set(Field::kTpSrc, r.match.tp_src.lo);
  }
  if (!r.match.tp_dst.IsFull()) {
    full.Set(Field::kTpDst, CommonPrefixMask(r.match.tp_dst));
    value.Set(Field::kTpDst, r.match.tp_dst.lo);
  }
  // Ports stay out of the table mask (a losing rule then costs one bit of a
  // port, not 16) when an IPv4 address of the rule keeps a prefix there;
  // otherwise (wildcard IPv4 addresses, IPv6, L2 rules) its ports keep the
  // buckets short.
  const bool has_address =
      std::countl_one(full.Get(Field::kIpv4Src) << 32) >= kRelaxStepIpv4 ||
      std::countl_one(full.Get(Field::kIpv4Dst) << 32) >= kRelaxStepIpv4;
  for (int f = 0; f < kFieldCount; ++f) {
    const Field field = static_cast<Field>(f);
    const int width = InfoOf(field).bits;
    const uint64_t m = full.Get(field);
    if (m == 0) continue;
    const bool port = field == Field::kTpSrc || field == Field::kTpDst;
    const int step = width == 32 ? kRelaxStepIpv4 : width > 32 ? kRelaxStepWide
                     : port ? kLevelStep : 1;
    e.mask.Set(field, field == Field::kInPort  ? m
                      : port && has_address    ? 0
                                               : RelaxField(m, width, step));
  }
  for (int i = 0; i < kFlowWords; ++i) e.value.w[i] = value.w[i] & e.mask.w[i];
  return e;
}

// One entry per rule (see above).
inline size_t ExpansionCount(const Rule&) { return 1; }

// Calls fn(value, table mask) for the rule's entry.
template <typename Fn>
void ForEachEntry(const Rule& r, Fn fn) {
  const EntryShape e = EntryOf(r);
  fn(e.value, e.mask);
}

}  // namespace internal
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_SUBTABLE_H_
