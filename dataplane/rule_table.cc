// rule_table.cc — the slow-path priority-aware tuple space (see rule_table.h
// and docs/classifier.md).
//
// Memory layout
// -------------
//   Impl
//   ├─ rules         id -> RuleNode* (the rule and the generations it lives
//   │                 in; Rule addresses are stable, entries point at them)
//   ├─ by_cookie     cookie -> {id}, cookies != 0 (DeleteByCookie; rules
//   │                 without a cookie, the bulk of a big load, are found
//   │                 by a scan instead of costing an index insert each)
//   ├─ deleted       deleted rules still linked for older readers
//   ├─ retired       memory readers may still read (FreeRetired)
//   ├─ shared        Partition of the rules with in_port wildcarded
//   ├─ ports         in_port -> Partition of the rules with it exact
//   │                 (by_mask: expanded mask -> unique_ptr<Subtable>;
//   │                 walk: its subtables and the shared ones, sorted)
//   └─ order         -> Order {shared walk, in_port -> walk}: the only
//                    thing Lookup reads besides the subtables; replaced as
//                    a whole when it changes.
//   Subtable
//   ├─ mask, word_index[0..n_words)   the words the mask touches
//   ├─ keys          KeySet: PackedKey -> the key's rules, best first (a
//   │                 pointer to the one rule most keys have, else to an
//   │                 immutable list).  Two sets, one used: keys of <= 3
//   │                 words (a 5-tuple with in_port) in 32-byte slots,
//   │                 longer ones in 80-byte slots.
//   └─ priority_counts  priority -> #linked entries   (max priority)
//
// A PackedKey holds the masked words of a key for the subtable's non-zero
// mask words only, packed to the front (the rest zero), with its hash
// computed once by the caller (a slot's hash is recomputed when the set
// grows).  So a lookup per subtable is: n_words ANDs into a stack array, one
// HashWords, one probe — nothing allocated.  A hit reads the rule node for
// its generations and priority.
//
// One table, read while written (concurrent_readers; see rule_table.h and
// docs/classifier.md): the dataplane's PMDs look up at the generation they
// installed while the control thread applies the next batches in place.
#include "dataplane/rule_table.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "dataplane/addr_text.h"
#include "dataplane/flow.h"
#include "dataplane/rule.h"
#include "dataplane/rule_error.h"

namespace flowclass {
namespace {

template <int N>
struct PackedKey {
  uint64_t hash = 0;
  std::array<uint64_t, N> w{};
};

// Keys of up to this many words go into the small map: a million-rule load
// is cache misses on new slots, and a smaller slot is fewer lines to miss.
inline constexpr int kSmallKeyWords = 3;

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

// Rule ids as the id map hashes them: aligned runs of 16 consecutive ids stay
// neighbours (one control-byte group, six lines of slots), the runs are
// scattered by HashFinish.  Controllers number the rules of a load
// consecutively, and a fully mixed hash made every insert miss twice (control
// bytes, slot).  The 7-bit tag absl
// compares before a key comes from bits of `run` the slot position never
// uses (the position is hash >> 7: run's bits 0..52), plus the id, so runs
// that share a group still differ in their tags, and so do the ids of one
// run: a probe compares about one key, for ids of any pattern (all multiples
// of 128 or of 2^32 included; BM_StreamedLoad/300000/32 loads such ids).
// absl probes 16-slot groups from the home slot: patterned ids fill every
// run at one offset only, and probing absorbs that.
struct RuleIdHash {
  size_t operator()(uint64_t id) const {
    const uint64_t run = HashFinish(id >> 4);
    return (run << 11) | ((id & 15) << 7) | (((run >> 57) + id) & 0x7f);
  }
};

// A rule as the table holds it: the rule and the generations it lives in,
// [add_gen, del_gen).  A delete only sets del_gen; the node stays linked
// (readers at older generations still see the rule) until RemoveDeleted.
struct RuleNode {
  static constexpr uint64_t kNever = ~uint64_t{0};
  RuleNode(const Rule& r, uint64_t gen) : rule(r), add_gen(gen) {}
  bool VisibleAt(uint64_t gen) const {
    return add_gen <= gen && gen < del_gen.load(std::memory_order_relaxed);
  }
  const Rule rule;
  const uint64_t add_gen;
  std::atomic<uint64_t> del_gen{kNever};
};
static_assert(alignof(RuleNode) >= 4, "buckets tag the low bits of node pointers");

// Memory a reader may still be reading, freed by FreeRetired.
struct Retired {
  void (*free)(void*);
  void* p;
};

// The rules of one packed key, as one word (a slot's `bits`): 0 for an empty
// slot, kTombstone for a key whose rules are all gone (the slot stays
// occupied so that probes go on past it), a RuleNode* for the one rule most
// keys have, or a RuleList* | 1 for several.  A reader takes the best rule
// (RuleBeats) visible at its generation.
inline constexpr uintptr_t kTombstone = 2;

// Several rules of one key, in no order: `n` published entries, each a node
// or null (a node unlinked in place).  The writer appends into spare
// capacity (the entry first, then n, with release) and unlinks by storing
// null, so a reader always sees whole entries, and a key that takes many
// rules in one batch does not copy its list per rule (every copy would be
// retired until the publication).  A full list is copied into one of twice
// the size; one with more holes than rules is compacted into a new one; the
// old one is retired either way.
struct alignas(8) RuleList {
  std::atomic<uint32_t> n;  // entries published
  uint32_t cap;
  uint32_t holes;           // writer only: null entries below n
  std::atomic<RuleNode*>* entries() { return reinterpret_cast<std::atomic<RuleNode*>*>(this + 1); }
  const std::atomic<RuleNode*>* entries() const {
    return reinterpret_cast<const std::atomic<RuleNode*>*>(this + 1);
  }
  // A list of capacity `cap` holding `nodes` (not null).
  static RuleList* Make(uint32_t cap, absl::Span<RuleNode* const> nodes) {
    void* mem = ::operator new(sizeof(RuleList) + cap * sizeof(std::atomic<RuleNode*>));
    auto* l = new (mem) RuleList{{static_cast<uint32_t>(nodes.size())}, cap, 0};
    for (uint32_t i = 0; i < cap; ++i)
      new (&l->entries()[i]) std::atomic<RuleNode*>(i < nodes.size() ? nodes[i] : nullptr);
    return l;
  }
  // The writer's view: the nodes, holes skipped.
  std::vector<RuleNode*> Nodes() const {
    std::vector<RuleNode*> out;
    const uint32_t count = n.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < count; ++i)
      if (RuleNode* node = entries()[i].load(std::memory_order_relaxed)) out.push_back(node);
    return out;
  }
  static void Free(void* p) { ::operator delete(p); }
};
static_assert(sizeof(RuleList) == 16, "entries follow the header, 8-aligned");

inline bool IsList(uintptr_t bits) { return (bits & 1) != 0; }
inline RuleList* AsList(uintptr_t bits) { return reinterpret_cast<RuleList*>(bits & ~uintptr_t{1}); }
inline uintptr_t ListBits(RuleList* l) { return reinterpret_cast<uintptr_t>(l) | 1; }

// Reader: the best rule of `bits` visible at `gen`, or null.
inline const RuleNode* BestVisible(uintptr_t bits, uint64_t gen) {
  if (!IsList(bits)) {
    const auto* n = reinterpret_cast<const RuleNode*>(bits);
    return n->VisibleAt(gen) ? n : nullptr;
  }
  const RuleList* l = AsList(bits);
  const RuleNode* best = nullptr;
  const uint32_t count = l->n.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < count; ++i) {
    const RuleNode* node = l->entries()[i].load(std::memory_order_acquire);
    if (node != nullptr && node->VisibleAt(gen) &&
        (best == nullptr || RuleBeats(node->rule, best->rule)))
      best = node;
  }
  return best;
}

// Writer: the rules of `bits` (a live key, or 0 / kTombstone for none) plus
// `node`: the same bits when the list had room, else new ones (a replaced
// list goes to `retire`).
template <typename RetireFn>
uintptr_t BucketWith(uintptr_t bits, RuleNode* node, RetireFn&& retire) {
  if (bits == 0 || bits == kTombstone) return reinterpret_cast<uintptr_t>(node);
  if (!IsList(bits)) {
    RuleNode* const two[] = {reinterpret_cast<RuleNode*>(bits), node};
    return ListBits(RuleList::Make(4, two));
  }
  RuleList* l = AsList(bits);
  const uint32_t count = l->n.load(std::memory_order_relaxed);
  if (count < l->cap) {
    l->entries()[count].store(node, std::memory_order_relaxed);
    l->n.store(count + 1, std::memory_order_release);  // the entry before n
    return bits;
  }
  std::vector<RuleNode*> nodes = l->Nodes();
  nodes.push_back(node);
  RuleList* bigger = RuleList::Make(std::max<uint32_t>(4, 2 * static_cast<uint32_t>(nodes.size())), nodes);
  retire(Retired{RuleList::Free, l});
  return ListBits(bigger);
}

// Writer: the rules of `bits` without `node` (which is there): kTombstone
// when none is left.
template <typename RetireFn>
uintptr_t BucketWithout(uintptr_t bits, const RuleNode* node, RetireFn&& retire) {
  if (!IsList(bits)) return kTombstone;
  RuleList* l = AsList(bits);
  const uint32_t count = l->n.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < count; ++i) {
    if (l->entries()[i].load(std::memory_order_relaxed) == node) {
      l->entries()[i].store(nullptr, std::memory_order_release);
      ++l->holes;
      break;
    }
  }
  const uint32_t live = count - l->holes;
  if (live >= 2 && l->holes <= live) return bits;
  // One rule left (back to a bare pointer), none, or more holes than rules.
  std::vector<RuleNode*> nodes = l->Nodes();
  uintptr_t after = kTombstone;
  if (nodes.size() == 1) {
    after = reinterpret_cast<uintptr_t>(nodes.front());
  } else if (nodes.size() > 1) {
    after = ListBits(RuleList::Make(std::max<uint32_t>(4, 2 * static_cast<uint32_t>(nodes.size())), nodes));
  }
  retire(Retired{RuleList::Free, l});
  return after;
}

// One slot of a subtable's key set: a packed key's words and its rules.  A
// small key's slot is 32 bytes, two to a cache line and never straddling
// two: an insert into a big set misses on one line (absl's sets missed on a
// control byte and on a slot), and a probe that finds nothing reads about
// one line.  `w` is written before `bits` publishes the slot and never
// changes while the array lives.
template <int N>
struct alignas(N <= kSmallKeyWords ? 32 : 16) KeySlot {
  std::array<uint64_t, N> w;
  std::atomic<uintptr_t> bits;
};
static_assert(sizeof(KeySlot<kSmallKeyWords>) == 32);

template <int N>
inline bool SameWords(const std::array<uint64_t, N>& a, const std::array<uint64_t, N>& b) {
  uint64_t diff = 0;  // no memcmp call, no branch per word
  for (int i = 0; i < N; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

template <int N>
uint64_t HashKeyWords(const std::array<uint64_t, N>& w, int n_words) {
  // Small keys hash all N words (the words past n_words are 0), so the set
  // needs no n_words; big keys only theirs (hashing 9 words per probe would
  // cost their lookups more).
  return N <= kSmallKeyWords ? HashWords(w.data(), N, /*basis=*/N)
                             : HashWords(w.data(), n_words, /*basis=*/n_words);
}

// A subtable's keys: open addressing with linear probing over a power-of-two
// array of KeySlots, at most half full (tombstones included), which a
// reader may probe while the writer adds to it.  Growing builds a new array
// and publishes it; the old one is retired.
template <int N>
class KeySet {
 public:
  KeySet() = default;
  KeySet(const KeySet&) = delete;
  KeySet& operator=(const KeySet&) = delete;
  ~KeySet() { std::free(array_.load(std::memory_order_relaxed)); }

  // Reader (and writer): the bits of `w`, or 0.
  uintptr_t Find(const std::array<uint64_t, N>& w, uint64_t hash) const {
    const Array* a = array_.load(std::memory_order_acquire);
    if (a == nullptr) return 0;
    for (size_t i = hash & a->mask;; i = (i + 1) & a->mask) {
      const KeySlot<N>& s = a->slot(i);
      const uintptr_t bits = s.bits.load(std::memory_order_acquire);
      if (bits == 0) return 0;
      if (bits != kTombstone && SameWords<N>(s.w, w)) return bits;
    }
  }

  // Writer: the slot of `w`, claimed if absent (its bits then 0: the caller
  // publishes it by storing non-zero bits).  May grow the array.
  template <typename RetireFn>
  std::atomic<uintptr_t>& Upsert(const std::array<uint64_t, N>& w, uint64_t hash,
                                 int n_words, RetireFn&& retire) {
    if (Array* a = array_.load(std::memory_order_relaxed); a != nullptr) {
      for (size_t i = hash & a->mask;; i = (i + 1) & a->mask) {
        KeySlot<N>& s = a->slot(i);
        const uintptr_t bits = s.bits.load(std::memory_order_relaxed);
        if (bits == 0) break;
        if (bits != kTombstone && SameWords<N>(s.w, w)) return s.bits;
      }
    }
    Array* a = array_.load(std::memory_order_relaxed);
    if (a == nullptr || 2 * (used_ + 1) > a->mask + 1) a = Grow(n_words, retire);
    size_t i = hash & a->mask;
    while (a->slot(i).bits.load(std::memory_order_relaxed) != 0) i = (i + 1) & a->mask;
    a->slot(i).w = w;
    ++used_;
    ++live_;
    return a->slot(i).bits;
  }

  // Writer: prefetches the home slot of `hash`, for an Upsert soon after
  // (a big set's insert is a miss on that line).
  void Prefetch(uint64_t hash) const {
    if (const Array* a = array_.load(std::memory_order_relaxed); a != nullptr)
      __builtin_prefetch(&a->slot(hash & a->mask), /*rw=*/1);
  }

  // Writer: publishes the rules of a slot Upsert returned (release: the
  // key words, the nodes and the list before a reader can see them);
  // kTombstone when its last rule left.
  void Set(std::atomic<uintptr_t>& slot_bits, uintptr_t bits) {
    if (bits == kTombstone) --live_;
    slot_bits.store(bits, std::memory_order_release);
  }

  size_t size() const { return live_; }

  // Writer: fn(bits) for every key with rules.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    const Array* a = array_.load(std::memory_order_relaxed);
    if (a == nullptr) return;
    for (size_t i = 0; i <= a->mask; ++i) {
      const uintptr_t bits = a->slot(i).bits.load(std::memory_order_relaxed);
      if (bits != 0 && bits != kTombstone) fn(bits);
    }
  }

 private:
  // A 64-byte header, then the slots.
  struct Array {
    size_t mask;
    KeySlot<N>& slot(size_t i) {
      return reinterpret_cast<KeySlot<N>*>(reinterpret_cast<char*>(this) + 64)[i];
    }
    const KeySlot<N>& slot(size_t i) const {
      return reinterpret_cast<const KeySlot<N>*>(reinterpret_cast<const char*>(this) + 64)[i];
    }
  };

  // A new array with room for twice the live keys (tombstones are dropped),
  // published; the old one retired.
  template <typename RetireFn>
  Array* Grow(int n_words, RetireFn&& retire) {
    size_t cap = 16;
    while (cap < 4 * (live_ + 1)) cap *= 2;
    void* mem = std::aligned_alloc(64, 64 + cap * sizeof(KeySlot<N>));
    if (mem == nullptr) throw std::bad_alloc();
    std::memset(mem, 0, 64 + cap * sizeof(KeySlot<N>));  // all slots empty
    Array* fresh = static_cast<Array*>(mem);
    fresh->mask = cap - 1;
    Array* old = array_.load(std::memory_order_relaxed);
    if (old != nullptr) {
      for (size_t i = 0; i <= old->mask; ++i) {
        const KeySlot<N>& s = old->slot(i);
        const uintptr_t bits = s.bits.load(std::memory_order_relaxed);
        if (bits == 0 || bits == kTombstone) continue;
        size_t j = HashKeyWords<N>(s.w, n_words) & fresh->mask;
        while (fresh->slot(j).bits.load(std::memory_order_relaxed) != 0) j = (j + 1) & fresh->mask;
        fresh->slot(j).w = s.w;
        fresh->slot(j).bits.store(bits, std::memory_order_relaxed);
      }
      retire(Retired{std::free, old});
    }
    used_ = live_;
    array_.store(fresh, std::memory_order_release);
    return fresh;
  }

  std::atomic<Array*> array_{nullptr};
  size_t used_ = 0;  // occupied slots, tombstones included
  size_t live_ = 0;  // keys with rules
};

struct Partition;

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
  Flow mask;
  // Linked entries (deleted ones until RemoveDeleted), by priority: the
  // max priority is an upper bound of what any reader's generation sees.
  absl::btree_map<uint32_t, uint32_t> priority_counts;
  size_t entries = 0;  // linked entries (deleted ones until RemoveDeleted)
  Partition* part = nullptr;  // the partition holding it
};

// What Lookup walks: contiguous, so the next subtables can be prefetched.
struct OrderSlot {
  uint32_t max_priority;
  const Subtable* subtable;
};

// Descending max priority; ties broken by the mask words, so that a walk
// (and DebugString) depends only on the rule set, not on the history that
// built it.
void SortSlots(std::vector<OrderSlot>* slots) {
  std::sort(slots->begin(), slots->end(), [](const OrderSlot& a, const OrderSlot& b) {
    if (a.max_priority != b.max_priority) return a.max_priority > b.max_priority;
    return a.subtable->mask.w > b.subtable->mask.w;
  });
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
  // A port's walk as published: its subtables and the shared ones, sorted
  // (SortSlots).  Owned; retired when replaced.
  std::vector<OrderSlot>* walk = nullptr;
};

// What Lookup walks, published as a whole (replaced, not edited; the old one
// retired): the walk of keys whose port has no partition, and each port's.
struct Order {
  std::vector<OrderSlot> shared;
  absl::flat_hash_map<uint32_t, const std::vector<OrderSlot>*> by_port;
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

Prefixes PrefixesOf(uint16_t lo, uint16_t hi) {
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

// None for a full range (the field stays wildcarded).
Prefixes SidePrefixes(const PortRange& r) {
  return r.IsFull() ? Prefixes{} : PrefixesOf(r.lo, r.hi);
}

size_t ExpansionCount(const Rule& r) {
  const size_t s = r.match.tp_src.IsFull() ? 1 : SidePrefixes(r.match.tp_src).size();
  const size_t d = r.match.tp_dst.IsFull() ? 1 : SidePrefixes(r.match.tp_dst).size();
  return s * d;
}

// Calls fn(value, mask) once per expanded entry of `r`.
template <typename Fn>
void ForEachEntry(const Rule& r, Fn fn) {
  const Prefixes src = SidePrefixes(r.match.tp_src);
  const Prefixes dst = SidePrefixes(r.match.tp_dst);
  const size_t ns = src.empty() ? 1 : src.size();
  const size_t nd = dst.empty() ? 1 : dst.size();
  for (size_t i = 0; i < ns; ++i) {
    for (size_t j = 0; j < nd; ++j) {
      Flow value = r.match.value;
      Flow mask = r.match.mask;
      if (!src.empty()) {
        value.Set(Field::kTpSrc, src[i].first);
        mask.Set(Field::kTpSrc, src[i].second);
      }
      if (!dst.empty()) {
        value.Set(Field::kTpDst, dst[j].first);
        mask.Set(Field::kTpDst, dst[j].second);
      }
      fn(value, mask);
    }
  }
}

std::string Hex(uint64_t v, int bits) {
  return absl::StrFormat("0x%0*x", (bits + 3) / 4, v);
}

// "eth_type=0x0800,ipv4_src=10.0.0.0/8": fields with a non-zero mask,
// addresses in their text form (addr_text.h, an IPv6 address whole), other
// fields in hex with "/mask" only when the mask is not the whole field.
std::string FormatMatch(const Flow& value, const Flow& mask) {
  std::string out;
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    const FieldInfo& info = InfoOf(f);
    if (f == Field::kIpv6SrcLo || f == Field::kIpv6DstLo) continue;  // with the high half
    if (f == Field::kIpv6SrcHi || f == Field::kIpv6DstHi) {
      const bool src = f == Field::kIpv6SrcHi;
      const absl::uint128 m = src ? mask.Ipv6Src() : mask.Ipv6Dst();
      if (m == 0) continue;
      absl::StrAppend(&out, out.empty() ? "" : ",", src ? "ipv6_src=" : "ipv6_dst=");
      AppendIpv6Masked(src ? value.Ipv6Src() : value.Ipv6Dst(), m, &out);
      continue;
    }
    const uint64_t m = mask.Get(f);
    if (m == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",", info.name, "=");
    if (f == Field::kEthSrc || f == Field::kEthDst) {
      AppendMacMasked(value.Get(f), m, &out);
    } else if (f == Field::kIpv4Src || f == Field::kIpv4Dst) {
      AppendIpv4Masked(static_cast<uint32_t>(value.Get(f)), static_cast<uint32_t>(m), &out);
    } else {
      absl::StrAppend(&out, Hex(value.Get(f), info.bits));
      if (m != (info.Mask() >> info.shift)) absl::StrAppend(&out, "/", Hex(m, info.bits));
    }
  }
  return out.empty() ? "*" : out;
}

// "eth_type/0xffff,tp_dst/0xff00": a subtable shape.
std::string FormatMask(const Flow& mask) {
  std::string out;
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    const FieldInfo& info = InfoOf(f);
    const uint64_t m = mask.Get(f);
    if (m == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",", info.name, "/",
                    Hex(m, info.bits));
  }
  return out.empty() ? "*" : out;
}

std::string FormatRule(const Rule& r) {
  std::string out = absl::StrCat(
      "id=", r.id, " priority=", r.priority, " cookie=", Hex(r.cookie, 0),
      " match=", FormatMatch(r.match.value, r.match.mask));
  if (!r.match.tp_src.IsFull())
    absl::StrAppend(&out, ",tp_src=", r.match.tp_src.lo, "-",
                    r.match.tp_src.hi);
  if (!r.match.tp_dst.IsFull())
    absl::StrAppend(&out, ",tp_dst=", r.match.tp_dst.lo, "-",
                    r.match.tp_dst.hi);
  if (r.action.kind == Action::Kind::kOutput) {
    absl::StrAppend(&out, " actions=output:", r.action.port);
  } else if (r.action.kind == Action::Kind::kDrop) {
    absl::StrAppend(&out, " actions=drop");
  } else {
    absl::StrAppend(&out, " actions=unknown(", static_cast<int>(r.action.kind),
                    ")");
  }
  return out;
}

// The error of operation `index` (rule `id`): `kind` about `field`,
// "operation <index> (rule id <id>): <field>: <problem>".
absl::Status OpError(RuleErrorKind kind, RuleField field, size_t index, uint64_t id,
                     absl::string_view problem) {
  return AtOperation(RuleError(kind, field, problem), static_cast<uint32_t>(index), id);
}

}  // namespace

// ---------------------------------------------------------------------------

struct RuleTable::Impl {
  Impl(RuleTableLimits l, bool concurrent)
      : limits(l), concurrent_readers(concurrent), order(new Order()) {}
  ~Impl();

  // Links validated rules whose ids are absent: their entries are planned
  // first (subtable, packed key, hash) and their slots prefetched, then
  // linked, so the misses of up to kChunk rules overlap.
  static constexpr size_t kChunk = 16;
  void AddRules(absl::Span<RuleNode* const> nodes);
  void AddRule(RuleNode* node) { AddRules({&node, 1}); }
  // AddRules of a run of inserts, as rules of generation `gen`.
  void InsertRules(absl::Span<const RuleOp> inserts, uint64_t gen);
  // The rule in the id and cookie maps.
  void IndexRule(RuleNode* node);
  // One entry of `node` into `st`, keyed `key` (packed for `keys`).
  template <typename Keys, typename Key>
  void LinkEntry(RuleNode* node, Subtable* st, Keys& keys, const Key& key);
  // The subtable of an entry (`value` says its port if `mask` has in_port
  // exact), created if absent.  Consecutive entries (the expansions of one
  // rule, rules of one shape streamed together) mostly share one: the last
  // one is checked before the maps.
  Subtable& SubtableFor(const Flow& mask, const Flow& value);
  // The partition of an entry: its port's (made if absent) or the shared one.
  Partition& PartitionFor(const Flow& mask, const Flow& value);
  // `p`'s walk needs rebuilding (the shared partition's: every walk).
  void Touch(Partition* p) {
    if (p->dirty) return;
    p->dirty = true;
    if (p->exact) dirty_ports.push_back(p->port);
  }
  // Phase 2 of ApplyBatch: applies operations known to be valid.
  void ApplyValid(absl::Span<const RuleOp> ops, BatchResult* result);
  // Bumps the generation after a batch, re-sorts and republishes the order
  // if needed, and without concurrent readers unlinks and frees at once.
  void FinishBatch(BatchResult* result);
  // The result of a batch that changes nothing (empty, or nothing to delete).
  BatchResult Unchanged() const {
    BatchResult r;
    r.generation = generation.load(std::memory_order_relaxed);
    r.rules = rules.size();
    return r;
  }
  // Deletes a present rule as of generation `gen`: gone from the id and
  // cookie maps and the counts at once, still linked for older readers.
  void DeleteRule(uint64_t id, uint64_t gen);
  // Unlinks a deleted rule's entries and retires it (RemoveDeleted).
  void UnlinkRule(RuleNode* node);
  // Rebuilds the walks of the partitions Touch marked (a subtable came or
  // went, or a max priority changed) and publishes a new Order, dropping
  // emptied partitions.  A stream of rules into existing subtables below
  // their top priority leaves the order as it is.
  void RebuildOrder();
  // Memory a reader may be reading: freed now without concurrent readers,
  // else by FreeRetired.
  void Retire(Retired r) {
    if (concurrent_readers) {
      retired.push_back(r);
    } else {
      r.free(r.p);
    }
  }
  size_t FreeRetired() {
    const size_t n = retired.size();
    for (const Retired& r : retired) r.free(r.p);
    retired.clear();
    return n;
  }
  size_t RemoveDeleted() {
    const size_t n = deleted.size();
    for (RuleNode* node : deleted) UnlinkRule(node);
    deleted.clear();
    RebuildOrder();
    return n;
  }

  RuleTableLimits limits;
  const bool concurrent_readers;
  // Written by the writer only; readers read it for kLatestGeneration.
  std::atomic<uint64_t> generation{0};
  size_t entries = 0;  // of the rules not deleted
  size_t expanded_rules = 0;
  // The rules not deleted (owned: deleted ones move to `deleted`).
  absl::flat_hash_map<uint64_t, RuleNode*, RuleIdHash> rules;
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<uint64_t>> by_cookie;  // cookie != 0
  // The ids of the rules carrying `cookie` (control path; allocates).
  std::vector<uint64_t> IdsWithCookie(uint64_t cookie) const;
  // Deleted rules still linked (owned), for RemoveDeleted.
  std::vector<RuleNode*> deleted;
  std::vector<Retired> retired;
  // AddRules' plan of a chunk's small-key entries (kept for its capacity).
  struct PlannedEntry {
    RuleNode* node;
    Subtable* st;
    PackedKey<kSmallKeyWords> key;
  };
  std::vector<PlannedEntry> plan;
  Partition shared;  // subtables of rules with in_port wildcarded
  absl::flat_hash_map<uint32_t, std::unique_ptr<Partition>> ports;  // the others
  size_t n_subtables = 0;             // in all partitions
  std::vector<uint32_t> dirty_ports;  // ports Touch marked
  Subtable* last_subtable = nullptr;  // SubtableFor's cache (or null)
  // What Lookup walks (owned; replaced, not edited, and the old one retired).
  std::atomic<const Order*> order;
  template <typename Fn>
  void ForEachPartition(Fn&& fn) const {
    fn(shared);
    for (const auto& [port, p] : ports) fn(*p);
  }
};

RuleTable::Impl::~Impl() {
  FreeRetired();
  ForEachPartition([](const Partition& p) {
    for (const auto& [mask, st] : p.by_mask) {
      st->ForEachBucket([](uintptr_t bits) {
        if (IsList(bits)) RuleList::Free(AsList(bits));
      });
    }
    delete p.walk;
  });
  for (const auto& [id, node] : rules) delete node;
  for (RuleNode* node : deleted) delete node;
  delete order.load(std::memory_order_relaxed);
}

Partition& RuleTable::Impl::PartitionFor(const Flow& mask, const Flow& value) {
  if (mask.Get(Field::kInPort) != 0xffffffffu) return shared;
  const uint32_t port = static_cast<uint32_t>(value.Get(Field::kInPort));
  std::unique_ptr<Partition>& p = ports[port];
  if (p == nullptr) {
    p = std::make_unique<Partition>();
    p->exact = true;
    p->port = port;
  }
  return *p;
}

Subtable& RuleTable::Impl::SubtableFor(const Flow& mask, const Flow& value) {
  if (last_subtable != nullptr && FlowEq()(last_subtable->mask, mask) &&
      (!last_subtable->part->exact ||
       last_subtable->part->port == static_cast<uint32_t>(value.Get(Field::kInPort))))
    return *last_subtable;
  Partition& part = PartitionFor(mask, value);
  std::unique_ptr<Subtable>& st = part.by_mask[mask];
  if (st == nullptr) {
    st = std::make_unique<Subtable>(mask);
    st->part = &part;
    ++n_subtables;
    Touch(&part);
  }
  last_subtable = st.get();
  return *st;
}

std::vector<uint64_t> RuleTable::Impl::IdsWithCookie(uint64_t cookie) const {
  std::vector<uint64_t> ids;
  if (cookie != 0) {
    if (auto c = by_cookie.find(cookie); c != by_cookie.end())
      ids.assign(c->second.begin(), c->second.end());
    return ids;
  }
  for (const auto& [id, node] : rules)
    if (node->rule.cookie == 0) ids.push_back(id);
  return ids;
}

void RuleTable::Impl::IndexRule(RuleNode* node) {
  const Rule& rule = node->rule;
  rules.emplace(rule.id, node);
  if (rule.cookie != 0) by_cookie[rule.cookie].insert(rule.id);
}

template <typename Keys, typename Key>
void RuleTable::Impl::LinkEntry(RuleNode* node, Subtable* st, Keys& keys, const Key& key) {
  auto retire = [this](Retired r) { Retire(r); };
  std::atomic<uintptr_t>& bits = keys.Upsert(key.w, key.hash, st->n_words, retire);
  keys.Set(bits, BucketWith(bits.load(std::memory_order_relaxed), node, retire));
  const uint32_t priority = node->rule.priority;
  if (priority > st->MaxPriority()) Touch(st->part);
  ++st->priority_counts[priority];
  ++st->entries;
}

void RuleTable::Impl::InsertRules(absl::Span<const RuleOp> inserts, uint64_t gen) {
  RuleNode* nodes[kChunk];
  for (size_t c = 0; c < inserts.size(); c += kChunk) {
    const absl::Span<const RuleOp> chunk = inserts.subspan(c, kChunk);
    for (size_t i = 0; i < chunk.size(); ++i) nodes[i] = new RuleNode(chunk[i].rule, gen);
    AddRules({nodes, chunk.size()});
  }
}

void RuleTable::Impl::AddRules(absl::Span<RuleNode* const> all) {
  for (size_t c = 0; c < all.size(); c += kChunk) {
    plan.clear();
    for (RuleNode* node : all.subspan(c, kChunk)) {
      IndexRule(node);
      size_t n = 0;
      ForEachEntry(node->rule, [&](const Flow& value, const Flow& mask) {
        Subtable* st = &SubtableFor(mask, value);
        if (st->n_words <= kSmallKeyWords) {
          const PackedKey<kSmallKeyWords> key = st->Pack<kSmallKeyWords>(value);
          st->small_keys.Prefetch(key.hash);
          plan.push_back(PlannedEntry{node, st, key});
        } else {  // rare (IPv6): linked at once
          LinkEntry(node, st, st->big_keys, st->Pack<kFlowWords>(value));
        }
        ++n;
      });
      entries += n;
      if (n > 1) ++expanded_rules;
    }
    for (const PlannedEntry& e : plan) LinkEntry(e.node, e.st, e.st->small_keys, e.key);
  }
}

void RuleTable::Impl::DeleteRule(uint64_t id, uint64_t gen) {
  auto it = rules.find(id);
  RuleNode* node = it->second;
  const Rule& rule = node->rule;
  node->del_gen.store(gen, std::memory_order_relaxed);
  const size_t n = ExpansionCount(rule);
  entries -= n;
  if (n > 1) --expanded_rules;
  if (rule.cookie != 0) {
    auto c = by_cookie.find(rule.cookie);
    c->second.erase(id);
    if (c->second.empty()) by_cookie.erase(c);
  }
  rules.erase(it);
  deleted.push_back(node);
}

void RuleTable::Impl::UnlinkRule(RuleNode* node) {
  const Rule& rule = node->rule;
  auto retire = [this](Retired r) { Retire(r); };
  ForEachEntry(rule, [&](const Flow& value, const Flow& mask) {
    Partition& part = PartitionFor(mask, value);
    auto st_it = part.by_mask.find(mask);
    Subtable& st = *st_it->second;
    st.WithKeys(value, [&](auto& keys, const auto& key) {
      std::atomic<uintptr_t>& bits = keys.Upsert(key.w, key.hash, st.n_words, retire);
      keys.Set(bits, BucketWithout(bits.load(std::memory_order_relaxed), node, retire));
    });
    auto pc = st.priority_counts.find(rule.priority);
    if (--pc->second == 0) {
      if (rule.priority == st.MaxPriority()) Touch(&part);
      st.priority_counts.erase(pc);
    }
    if (--st.entries == 0) {
      if (last_subtable == &st) last_subtable = nullptr;
      Retire(Retired{[](void* p) { delete static_cast<Subtable*>(p); },
                     st_it->second.release()});
      part.by_mask.erase(st_it);
      --n_subtables;
      Touch(&part);
    }
  });
  Retire(Retired{[](void* p) { delete static_cast<RuleNode*>(p); }, node});
}

void RuleTable::Impl::RebuildOrder() {
  if (!shared.dirty && dirty_ports.empty()) return;
  auto retire_walk = [this](std::vector<OrderSlot>* walk) {
    if (walk != nullptr)
      Retire(Retired{[](void* p) { delete static_cast<std::vector<OrderSlot>*>(p); }, walk});
  };
  auto* next = new Order();
  const Order* cur = order.load(std::memory_order_relaxed);
  if (shared.dirty) {
    next->shared.reserve(shared.by_mask.size());
    for (const auto& [mask, st] : shared.by_mask)
      next->shared.push_back(OrderSlot{st->MaxPriority(), st.get()});
    SortSlots(&next->shared);
  } else {
    next->shared = cur->shared;
  }
  auto rebuild = [&](Partition& p) {
    auto* walk = new std::vector<OrderSlot>();
    walk->reserve(p.by_mask.size() + next->shared.size());
    for (const auto& [mask, st] : p.by_mask)
      walk->push_back(OrderSlot{st->MaxPriority(), st.get()});
    walk->insert(walk->end(), next->shared.begin(), next->shared.end());
    SortSlots(walk);
    retire_walk(std::exchange(p.walk, walk));
    p.dirty = false;
  };
  // Touch lists a partition once (its dirty flag), and partitions are
  // erased only here: every listed port is present.
  for (uint32_t port : dirty_ports) {
    auto it = ports.find(port);
    if (it->second->by_mask.empty()) {
      retire_walk(it->second->walk);
      ports.erase(it);
    } else if (!shared.dirty) {
      rebuild(*it->second);
    }
  }
  dirty_ports.clear();
  if (shared.dirty) {
    for (auto& [port, p] : ports) rebuild(*p);
    shared.dirty = false;
  }
  next->by_port.reserve(ports.size());
  for (const auto& [port, p] : ports) next->by_port.emplace(port, p->walk);
  const Order* old = order.exchange(next, std::memory_order_release);
  Retire(Retired{[](void* p) { delete static_cast<Order*>(p); }, const_cast<Order*>(old)});
}

// ---------------------------------------------------------------------------

RuleTable::RuleTable(RuleTableLimits limits, bool concurrent_readers)
    : impl_(std::make_unique<Impl>(limits, concurrent_readers)) {}

RuleTable::~RuleTable() = default;

RuleTable::RuleTable(const RuleTable& other)
    : impl_(std::make_unique<Impl>(other.impl_->limits, /*concurrent=*/false)) {
  impl_->rules.reserve(other.impl_->rules.size());
  for (const auto& [id, node] : other.impl_->rules)
    impl_->AddRule(new RuleNode(node->rule, 0));
  impl_->generation.store(other.generation(), std::memory_order_relaxed);
  impl_->RebuildOrder();
}

absl::StatusOr<BatchResult> RuleTable::ApplyBatch(
    absl::Span<const RuleOp> ops) {
  Impl& t = *impl_;
  if (ops.empty()) {
    return t.Unchanged();
  }
  BatchResult result;

  // Phase 1: simulate the batch on an overlay of the ids it touches and
  // check every operation against the state the earlier ones produce.
  struct Sim {
    bool present;
    uint64_t cookie;
    size_t entries;
    size_t op;  // the operation of this batch that left the id so
  };
  absl::flat_hash_map<uint64_t, Sim> changed;
  changed.reserve(ops.size());
  size_t n_rules = t.rules.size();
  size_t n_entries = t.entries;
  auto current = [&](uint64_t id) -> std::optional<Sim> {
    if (auto c = changed.find(id); c != changed.end()) {
      if (!c->second.present) return std::nullopt;
      return c->second;
    }
    auto r = t.rules.find(id);
    if (r == t.rules.end()) return std::nullopt;
    return Sim{true, r->second->rule.cookie, ExpansionCount(r->second->rule), 0};
  };
  // " (operation 2 of this batch deleted it)" when an earlier operation of
  // the batch is why an id is taken or unknown: the table alone is not.
  auto earlier = [&](uint64_t id) -> std::string {
    auto c = changed.find(id);
    if (c == changed.end()) return "";
    const RuleOp& o = ops[c->second.op];
    const char* what = o.kind == RuleOp::Kind::kInsert    ? "inserted it"
                       : o.kind == RuleOp::Kind::kReplace ? "replaced it"
                       : o.kind == RuleOp::Kind::kDelete  ? "deleted it"
                                                          : "deleted it by its cookie";
    return absl::StrCat(" (operation ", c->second.op, " of this batch ", what, ")");
  };
  auto check_limits = [&](size_t i, uint64_t id, size_t rules_after,
                          size_t entries_after) -> absl::Status {
    if (rules_after > t.limits.max_rules) {
      return OpError(RuleErrorKind::kLimit, RuleField::kMaxRules, i, id,
                     absl::StrCat("the table would hold ", rules_after, " rules, limit ",
                                  t.limits.max_rules));
    }
    if (entries_after > t.limits.max_entries) {
      return OpError(RuleErrorKind::kLimit, RuleField::kMaxEntries, i, id,
                     absl::StrCat("the table would hold ", entries_after,
                                  " entries after port-range expansion, limit ",
                                  t.limits.max_entries));
    }
    return absl::OkStatus();
  };

  for (size_t i = 0; i < ops.size(); ++i) {
    const RuleOp& op = ops[i];
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
      case RuleOp::Kind::kReplace: {
        const uint64_t id = op.rule.id;
        if (absl::Status s = ValidateRule(op.rule); !s.ok())
          return AtOperation(s, static_cast<uint32_t>(i), id);
        const std::optional<Sim> cur = current(id);
        const bool insert = op.kind == RuleOp::Kind::kInsert;
        if (insert && cur.has_value()) {
          return OpError(RuleErrorKind::kAlreadyExists, RuleField::kId, i, id,
                         absl::StrCat("insert of rule id ", id, " which already exists",
                                      earlier(id)));
        }
        if (!insert && !cur.has_value()) {
          return OpError(RuleErrorKind::kNotFound, RuleField::kId, i, id,
                         absl::StrCat("replace of unknown rule id ", id, earlier(id)));
        }
        const size_t n = ExpansionCount(op.rule);
        const size_t rules_after = n_rules + (insert ? 1 : 0);
        const size_t entries_after =
            n_entries - (insert ? 0 : cur->entries) + n;
        if (absl::Status s = check_limits(i, id, rules_after, entries_after);
            !s.ok())
          return s;
        n_rules = rules_after;
        n_entries = entries_after;
        changed[id] = Sim{true, op.rule.cookie, n, i};
        break;
      }
      case RuleOp::Kind::kDelete: {
        const std::optional<Sim> cur = current(op.id);
        if (!cur.has_value()) {
          return OpError(RuleErrorKind::kNotFound, RuleField::kId, i, op.id,
                         absl::StrCat("delete of unknown rule id ", op.id, earlier(op.id)));
        }
        --n_rules;
        n_entries -= cur->entries;
        changed[op.id] = Sim{false, 0, 0, i};
        break;
      }
      case RuleOp::Kind::kDeleteByCookie: {
        // Rules that carry the cookie now: untouched table rules with it,
        // plus overlay rules with it.  Collect first, then mark.
        std::vector<uint64_t> victims;
        for (uint64_t id : t.IdsWithCookie(op.cookie))
          if (!changed.contains(id)) victims.push_back(id);
        for (const auto& [id, sim] : changed)
          if (sim.present && sim.cookie == op.cookie) victims.push_back(id);
        for (uint64_t id : victims) {
          const std::optional<Sim> cur = current(id);
          --n_rules;
          n_entries -= cur->entries;
          changed[id] = Sim{false, 0, 0, i};
        }
        break;
      }
      default:
        return OpError(RuleErrorKind::kInvalid, RuleField::kKind, i,
                       op.kind == RuleOp::Kind::kDelete ? op.id : op.rule.id,
                       absl::StrCat("unknown operation kind ", static_cast<int>(op.kind)));
    }
  }

  // A batch that changes nothing (delete_cookie ops that match no rule) is
  // acknowledged like an empty one: same generation, nothing to publish.
  if (changed.empty()) {
    return t.Unchanged();
  }

  // Phase 2: everything is known valid; apply in order.
  t.ApplyValid(ops, &result);
  return result;
}

BatchResult RuleTable::DeleteAll() {
  BatchResult result = impl_->Unchanged();
  if (result.rules == 0) return result;
  if (impl_->concurrent_readers) {
    // Readers may be looking up: every rule is deleted as a batch deletes
    // one (still linked for older generations until RemoveDeleted).
    std::vector<uint64_t> ids;
    ids.reserve(impl_->rules.size());
    for (const auto& [id, node] : impl_->rules) ids.push_back(id);
    const uint64_t gen = result.generation + 1;
    for (uint64_t id : ids) impl_->DeleteRule(id, gen);
    BatchResult r;
    r.deleted = ids.size();
    impl_->FinishBatch(&r);
    return r;
  }
  result.deleted = std::exchange(result.rules, 0);
  Clear(++result.generation);
  return result;
}

void RuleTable::Clear(uint64_t generation) {
  auto empty = std::make_unique<Impl>(impl_->limits, impl_->concurrent_readers);
  empty->generation.store(generation, std::memory_order_relaxed);
  impl_ = std::move(empty);  // frees the rules this table held
}

size_t RuleTable::RemoveDeleted() {
  return impl_->concurrent_readers ? impl_->RemoveDeleted() : 0;
}

size_t RuleTable::FreeRetired() {
  return impl_->concurrent_readers ? impl_->FreeRetired() : 0;
}

void RuleTable::Impl::ApplyValid(absl::Span<const RuleOp> ops,
                                 BatchResult* result) {
  const uint64_t gen = generation.load(std::memory_order_relaxed) + 1;
  for (size_t i = 0; i < ops.size(); ++i) {
    const RuleOp& op = ops[i];
    switch (op.kind) {
      case RuleOp::Kind::kInsert: {
        size_t end = i + 1;  // the run of inserts from here
        while (end < ops.size() && ops[end].kind == RuleOp::Kind::kInsert) ++end;
        InsertRules(ops.subspan(i, end - i), gen);
        result->inserted += end - i;
        i = end - 1;
        break;
      }
      case RuleOp::Kind::kReplace:
        DeleteRule(op.rule.id, gen);
        AddRule(new RuleNode(op.rule, gen));
        ++result->replaced;
        break;
      case RuleOp::Kind::kDelete:
        DeleteRule(op.id, gen);
        ++result->deleted;
        break;
      case RuleOp::Kind::kDeleteByCookie: {
        const std::vector<uint64_t> victims = IdsWithCookie(op.cookie);
        for (uint64_t id : victims) DeleteRule(id, gen);
        result->deleted += victims.size();
        break;
      }
    }
  }
  FinishBatch(result);
}

void RuleTable::Impl::FinishBatch(BatchResult* result) {
  RebuildOrder();
  result->generation = generation.load(std::memory_order_relaxed) + 1;
  generation.store(result->generation, std::memory_order_release);
  result->rules = rules.size();
  if (!concurrent_readers) RemoveDeleted();  // frees as it goes
}

const Rule* RuleTable::Lookup(const Flow& key, Flow* wc,
                              int* subtables_visited, uint64_t gen) const {
  if (gen == kLatestGeneration) gen = impl_->generation.load(std::memory_order_acquire);
  const Rule* best = nullptr;
  int visited = 0;
  // The walk of the key's port (its partition merged with the shared one),
  // or the shared one's when its port has no rules of its own.
  const Order& order = *impl_->order.load(std::memory_order_acquire);
  const std::vector<OrderSlot>* walk = &order.shared;
  if (!order.by_port.empty()) {
    auto it = order.by_port.find(static_cast<uint32_t>(key.Get(Field::kInPort)));
    if (it != order.by_port.end()) walk = it->second;
  }
  const OrderSlot* const begin = walk->data();
  const OrderSlot* const end = begin + walk->size();
  for (const OrderSlot* slot = begin; slot != end; ++slot) {
    // Sorted by max priority (an upper bound for every generation a reader
    // may use): nothing from here on can beat or tie `best`.
    if (best != nullptr && slot->max_priority < best->priority) break;
    if (slot + 2 < end) {
      __builtin_prefetch(slot[2].subtable);
      __builtin_prefetch(reinterpret_cast<const char*>(slot[2].subtable) + 64);
    }
    const Subtable& st = *slot->subtable;
    ++visited;
    for (int j = 0; j < st.n_words; ++j)
      wc->w[st.word_index[j]] |= st.packed_mask[j];
    const RuleNode* n = st.WithKeys(key, [gen](const auto& keys, const auto& k) -> const RuleNode* {
      const uintptr_t bits = keys.Find(k.w, k.hash);
      return bits == 0 ? nullptr : BestVisible(bits, gen);
    });
    if (n != nullptr && (best == nullptr || RuleBeats(n->rule, *best))) best = &n->rule;
  }
  // Megaflows are per in_port (megaflow.h): in_port is always exact.
  wc->Set(Field::kInPort, 0xffffffffu);
  if (subtables_visited != nullptr) *subtables_visited = visited;
  return best;
}

const Rule* RuleTable::Lookup(const FlowKey& key, Flow* wc,
                              int* subtables_visited, uint64_t gen) const {
  return Lookup(key.ToFlow(), wc, subtables_visited, gen);
}

const Rule* RuleTable::Find(uint64_t id) const {
  auto it = impl_->rules.find(id);
  return it == impl_->rules.end() ? nullptr : &it->second->rule;
}

size_t RuleTable::size() const { return impl_->rules.size(); }

RuleTableStats RuleTable::Stats() const {
  RuleTableStats s;
  s.rules = impl_->rules.size();
  s.entries = impl_->entries;
  s.expanded_rules = impl_->expanded_rules;
  // With concurrent readers, a subtable holding only deleted entries counts
  // until RemoveDeleted.
  s.subtables = impl_->n_subtables;
  s.generation = generation();
  return s;
}

uint64_t RuleTable::generation() const {
  return impl_->generation.load(std::memory_order_relaxed);
}

std::vector<const Rule*> RuleTable::Rules() const {
  std::vector<const Rule*> out;
  out.reserve(impl_->rules.size());
  for (const auto& [id, node] : impl_->rules) out.push_back(&node->rule);
  std::sort(out.begin(), out.end(),
            [](const Rule* a, const Rule* b) { return RuleBeats(*a, *b); });
  return out;
}

std::string RuleTable::DebugString() const {
  const RuleTableStats s = Stats();
  std::string out =
      absl::StrCat("RuleTable generation=", s.generation, " rules=", s.rules,
                   " entries=", s.entries, " expanded_rules=", s.expanded_rules,
                   " subtables=", s.subtables, "\n");
  // The shared partition's walk, then each port's own subtables (ports
  // ascending, each in walk order).
  auto print = [&out](absl::string_view prefix, const std::vector<OrderSlot>& walk) {
    for (size_t i = 0; i < walk.size(); ++i) {
      const Subtable& st = *walk[i].subtable;
      absl::StrAppend(&out, "  ", prefix, "subtable ", i,
                      ": max_priority=", walk[i].max_priority,
                      " entries=", st.entries, " keys=", st.keys(),
                      " mask=", FormatMask(st.mask), "\n");
    }
  };
  const Order& order = *impl_->order.load(std::memory_order_relaxed);
  print("", order.shared);
  std::vector<uint32_t> ports;
  for (const auto& [port, p] : impl_->ports) ports.push_back(port);
  std::sort(ports.begin(), ports.end());
  for (uint32_t port : ports) {
    std::vector<OrderSlot> own;
    for (const OrderSlot& slot : *impl_->ports.at(port)->walk)
      if (slot.subtable->part->exact) own.push_back(slot);
    print(absl::StrCat("in_port ", port, " "), own);
  }
  for (const Rule* r : Rules()) {
    absl::StrAppend(&out, "  rule ", FormatRule(*r),
                    " entries=", ExpansionCount(*r), "\n");
  }
  return out;
}

std::vector<std::pair<uint16_t, uint16_t>> RangeToPrefixes(uint16_t lo,
                                                           uint16_t hi) {
  if (lo > hi) return {};
  const Prefixes p = PrefixesOf(lo, hi);
  return {p.p.begin(), p.p.begin() + static_cast<std::ptrdiff_t>(p.n)};
}

std::vector<const Rule*> RuleTable::RulesWithCookie(uint64_t cookie) const {
  std::vector<const Rule*> out;
  for (uint64_t id : impl_->IdsWithCookie(cookie)) out.push_back(Find(id));
  return out;
}

namespace {

void AddChangedMatch(RuleChangeSet* cs, const Match& m) {
  if (m.mask.Get(Field::kInPort) == 0xffffffffu) {
    cs->by_in_port[static_cast<uint32_t>(m.value.Get(Field::kInPort))]
        .push_back(m);
  } else {
    cs->any_in_port.push_back(m);
  }
}

bool Overlaps(const Match& m, const Flow& value, const Flow& mask) {
  // The addresses first: they tell most pairs apart (the meta and Ethernet
  // words of IP rules rarely do), then the rest without branches.
  constexpr int kFirst = kWordIpv4;
  if ((m.value.w[kFirst] ^ value.w[kFirst]) & m.mask.w[kFirst] & mask.w[kFirst]) return false;
  uint64_t diff = 0;
  for (int i = 0; i < kFlowWords; ++i)
    diff |= (m.value.w[i] ^ value.w[i]) & m.mask.w[i] & mask.w[i];
  return diff == 0;  // port ranges: assume they overlap (conservative)
}

}  // namespace

size_t RuleChangeSet::size() const {
  size_t n = any_in_port.size();
  for (const auto& [port, v] : by_in_port) n += v.size();
  return n;
}

bool RuleChangeSet::MayAffect(const Flow& value, const Flow& mask,
                              uint64_t rule_id) const {
  if (rule_id != 0 && removed_ids.contains(rule_id)) return true;
  auto overlaps = [&](const Match& m) { return Overlaps(m, value, mask); };
  if (auto it = by_in_port.find(static_cast<uint32_t>(value.Get(Field::kInPort)));
      it != by_in_port.end() && it->second.AnyOverlapping(value, mask, overlaps)) {
    return true;
  }
  return any_in_port.AnyOverlapping(value, mask, overlaps);
}

void ChangedMatches::Seal() {
  sealed_.clear();
  start_.fill(0);
  if (chunks_.empty()) return;
  auto bucket = [](const Match& m) {
    return (m.mask.Get(Field::kIpv4Src) >> 24) == 0xff
               ? static_cast<size_t>(m.value.Get(Field::kIpv4Src) >> 24)
               : kNotExact;
  };
  // Counting sort: counts, then starts, then the pointers.
  for (const std::vector<Match>& c : chunks_)
    for (const Match& m : c) ++start_[bucket(m) + 1];
  for (size_t b = 1; b < start_.size(); ++b) start_[b] += start_[b - 1];
  sealed_.resize(start_.back());
  std::array<uint32_t, kNotExact + 1> next;
  std::copy(start_.begin(), start_.end() - 1, next.begin());
  for (const std::vector<Match>& c : chunks_)
    for (const Match& m : c) sealed_[next[bucket(m)]++] = &m;
}

void RuleChangeSet::Seal() {
  for (auto& [port, v] : by_in_port) v.Seal();
  any_in_port.Seal();
}

void ChangedMatches::Splice(ChangedMatches&& later) {
  for (std::vector<Match>& c : later.chunks_) chunks_.push_back(std::move(c));
  later.clear();
  sealed_.clear();
}

size_t ChangedMatches::size() const {
  size_t n = 0;
  for (const std::vector<Match>& c : chunks_) n += c.size();
  return n;
}

void RuleChangeSet::Merge(RuleChangeSet&& later) {
  if (removed_ids.empty()) {
    removed_ids = std::move(later.removed_ids);
  } else {
    removed_ids.insert(later.removed_ids.begin(), later.removed_ids.end());
  }
  deleted_ids.insert(later.deleted_ids.begin(), later.deleted_ids.end());
  for (auto& [port, v] : later.by_in_port) by_in_port[port].Splice(std::move(v));
  any_in_port.Splice(std::move(later.any_in_port));
  later.Clear();
}

void RuleChangeSet::Clear() {
  removed_ids.clear();
  deleted_ids.clear();
  by_in_port.clear();
  any_in_port.clear();
}

RuleChangeSet MakeRuleChangeSet(const RuleTable& before,
                                absl::Span<const RuleOp> ops) {
  RuleChangeSet cs;
  auto remove_old = [&](uint64_t id) {
    cs.removed_ids.insert(id);
    if (const Rule* old = before.Find(id)) AddChangedMatch(&cs, old->match);
  };
  // With a delete by cookie in the batch: the cookie each id inserted or
  // replaced so far carries now (a delete by cookie takes the rules that
  // carry it at that point of the batch, not later, not before).
  const bool by_cookie = std::any_of(ops.begin(), ops.end(), [](const RuleOp& op) {
    return op.kind == RuleOp::Kind::kDeleteByCookie;
  });
  absl::flat_hash_map<uint64_t, uint64_t> cookie_now;
  for (const RuleOp& op : ops) {
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
        AddChangedMatch(&cs, op.rule.match);
        if (by_cookie) cookie_now[op.rule.id] = op.rule.cookie;
        break;
      case RuleOp::Kind::kReplace:
        remove_old(op.rule.id);
        AddChangedMatch(&cs, op.rule.match);
        if (by_cookie) cookie_now[op.rule.id] = op.rule.cookie;
        break;
      case RuleOp::Kind::kDelete:
        remove_old(op.id);
        cs.deleted_ids.insert(op.id);
        break;
      case RuleOp::Kind::kDeleteByCookie:
        // The table's rules with the cookie, unless the batch gave them
        // another one before this op.
        for (const Rule* r : before.RulesWithCookie(op.cookie)) {
          if (auto it = cookie_now.find(r->id); it != cookie_now.end() && it->second != op.cookie)
            continue;
          remove_old(r->id);
          cs.deleted_ids.insert(r->id);
        }
        // Rules inserted or replaced earlier in this batch with the cookie:
        // their matches are already in the set; their ids count as removed.
        for (const auto& [id, cookie] : cookie_now) {
          if (cookie == op.cookie) {
            cs.removed_ids.insert(id);
            cs.deleted_ids.insert(id);
          }
        }
        break;
    }
  }
  return cs;
}

}  // namespace flowclass
