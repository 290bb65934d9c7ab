// internal/rule_key_set.h — private parts of the rule table (rule_table.cc
// only includes this): the rule nodes, the rules of one key (a node or a
// list) and a subtable's key set, an open-addressing hash set a reader may
// probe while the writer adds to it.
//
// Threads and memory: the writer (RuleTable's) is the only one that changes
// these; a reader (RuleTable::Lookup) reads them concurrently when the table
// has concurrent readers.  What the writer replaces while a reader may read
// it (a list, a slot array) is handed to `retire` (a Retired), never freed
// here; see rule_table.h's contract.
#ifndef FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_KEY_SET_H_
#define FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_KEY_SET_H_

#include <algorithm>
#include <array>
#include <bit>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "absl/types/span.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"

namespace flowclass {
namespace internal {

template <int N>
struct PackedKey {
  uint64_t hash = 0;
  std::array<uint64_t, N> w{};
};

// Keys of up to this many words go into the small map: a million-rule load
// is cache misses on new slots, and a smaller slot is fewer lines to miss.
inline constexpr int kSmallKeyWords = 3;

// A rule as the table holds it: the rule and the generations it lives in,
// [add_gen, del_gen).  A delete only sets del_gen; the node stays linked
// (readers at older generations still see the rule) until RemoveDeleted.
// A list entry's copy of what most often rejects its rule without reading
// the node (a cache miss per rule on a cold table): the rule's priority and
// its mask and value on one word (its IPv4 addresses if it has any).  A
// rule whose filter word differs from the key on a bit the megaflow mask
// already has cannot match and needs no new proof bit (AddMismatchBits
// returns at such a bit too).
struct ListFilter {
  uint64_t mask = 0;
  uint64_t value = 0;
  uint32_t priority = 0;
  uint32_t word = 0;
  // The rule loses to `key` with a proof `wc` already has.
  bool Rejects(const Flow& key, const Flow& wc) const {
    return (((key.w[word] & mask) ^ value) & wc.w[word]) != 0;
  }
};

inline ListFilter FilterOf(const Rule& r) {
  ListFilter f;
  f.priority = r.priority;
  for (int w : {kWordIpv4, kWordIpv6SrcHi, kWordIpv6DstHi, kWordL4, kWordEthDst, kWordEthSrc,
                kWordMeta}) {
    if (r.match.mask.w[w] != 0) {
      f.word = static_cast<uint32_t>(w);
      f.mask = r.match.mask.w[w];
      f.value = r.match.value.w[w];
      break;
    }
  }
  return f;
}

struct RuleNode {
  static constexpr uint64_t kNever = ~uint64_t{0};
  RuleNode(const Rule& r, uint64_t gen)
      : rule(r), add_gen(gen), words(r.match.mask.NonZeroMap()),
        ranges(!r.match.tp_src.IsFull() || !r.match.tp_dst.IsFull()), filter(FilterOf(r)) {}
  bool VisibleAt(uint64_t gen) const {
    return add_gen <= gen && gen < del_gen.load(std::memory_order_relaxed);
  }
  // rule.match.Matches(key), reading only the words the rule's mask has
  // (three of nine for a 5-tuple).
  bool Matches(const Flow& key) const {
    const Match& m = rule.match;
    for (FlowMap left = words; left != 0; left &= left - 1) {
      const int i = std::countr_zero(left);
      if ((key.w[i] & m.mask.w[i]) != m.value.w[i]) return false;
    }
    if (!ranges) return true;
    return m.tp_src.Contains(static_cast<uint16_t>(key.Get(Field::kTpSrc))) &&
           m.tp_dst.Contains(static_cast<uint16_t>(key.Get(Field::kTpDst)));
  }
  const Rule rule;
  const uint64_t add_gen;
  std::atomic<uint64_t> del_gen{kNever};
  const FlowMap words;  // the words rule.match.mask has (NonZeroMap)
  const bool ranges;    // a port range is not full
  const ListFilter filter;  // copied next to the node in a list
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
  // Entries in RuleBeats order (best first), as Make leaves them; cleared
  // (before n publishes the entry) by an append that breaks the order.
  std::atomic<uint32_t> sorted;
  std::atomic<RuleNode*>* entries() { return reinterpret_cast<std::atomic<RuleNode*>*>(this + 1); }
  const std::atomic<RuleNode*>* entries() const {
    return reinterpret_cast<const std::atomic<RuleNode*>*>(this + 1);
  }
  // After the cap entries: entry i's node's filter, written before the
  // entry is published (n) and not changed after.
  ListFilter* filters() { return reinterpret_cast<ListFilter*>(entries() + cap); }
  const ListFilter* filters() const { return reinterpret_cast<const ListFilter*>(entries() + cap); }
  // A list of capacity `cap` holding `nodes` (not null), sorted.
  static RuleList* Make(uint32_t cap, std::vector<RuleNode*> nodes) {
    std::sort(nodes.begin(), nodes.end(),
              [](const RuleNode* a, const RuleNode* b) { return RuleBeats(a->rule, b->rule); });
    void* mem = ::operator new(sizeof(RuleList) +
                               cap * (sizeof(std::atomic<RuleNode*>) + sizeof(ListFilter)));
    auto* l = new (mem) RuleList{{static_cast<uint32_t>(nodes.size())}, cap, 0, {1}};
    for (uint32_t i = 0; i < cap; ++i) {
      new (&l->entries()[i]) std::atomic<RuleNode*>(i < nodes.size() ? nodes[i] : nullptr);
      new (&l->filters()[i]) ListFilter(i < nodes.size() ? nodes[i]->filter : ListFilter{});
    }
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

// Megaflow proofs
// ---------------
// A lookup ORs into its wildcard mask the bits its decisions read, so that
// every key agreeing with it there takes the same decisions: a subtable's
// mask (which bucket), and for each rule of a bucket it had to check, the
// bits that decided it: the whole mask of the rule that matched (plus the
// bits that keep the key inside its ranges), one differing bit for a rule
// that did not (or the bits that keep the key outside the range that
// failed).  The choice of that bit depends on the key and the rule only.

// Bits of a 16-bit field above bit i.
inline uint16_t BitsAbove(int i) { return static_cast<uint16_t>(0xffffu << (i + 1)); }
inline int TopBit(uint32_t d) { return 31 - std::countl_zero(d); }

// Bits of `k` (inside [lo, hi]) that keep every k' agreeing on them inside:
// k' >= lo when k' has lo's ones above the first bit where k exceeds lo and
// that bit (lo's ones when k == lo); k' <= hi symmetrically.
inline uint16_t InRangeBits(uint16_t k, uint16_t lo, uint16_t hi) {
  uint32_t bits = 0;
  if (lo != 0) {
    const uint32_t d = static_cast<uint32_t>(k ^ lo);
    if (d == 0) {
      bits |= lo;
    } else {
      const int i = TopBit(d);
      bits |= (lo & BitsAbove(i)) | (1u << i);
    }
  }
  if (hi != 0xffff) {
    const uint32_t d = static_cast<uint32_t>(k ^ hi);
    if (d == 0) {
      bits |= static_cast<uint16_t>(~hi);
    } else {
      const int i = TopBit(d);
      bits |= (static_cast<uint16_t>(~hi) & BitsAbove(i)) | (1u << i);
    }
  }
  return static_cast<uint16_t>(bits);
}

// Bits of `k` (outside [lo, hi]) that keep every k' agreeing on them outside.
inline uint16_t OutOfRangeBits(uint16_t k, uint16_t lo, uint16_t hi) {
  if (k < lo) {
    const int i = TopBit(static_cast<uint32_t>(k ^ lo));
    return static_cast<uint16_t>((static_cast<uint16_t>(~lo) & BitsAbove(i)) | (1u << i));
  }
  const int i = TopBit(static_cast<uint32_t>(k ^ hi));
  return static_cast<uint16_t>((hi & BitsAbove(i)) | (1u << i));
}

inline void OrField(Flow* wc, Field f, uint64_t bits) {
  const FieldInfo& i = InfoOf(f);
  wc->w[i.word] |= (bits << i.shift) & i.Mask();
}

// `n`'s rule matches `key`: the bits that keep it matching.
inline void AddMatchBits(const RuleNode& n, const Flow& key, Flow* wc) {
  const Match& m = n.rule.match;
  for (FlowMap left = n.words; left != 0; left &= left - 1) {
    const int i = std::countr_zero(left);
    wc->w[i] |= m.mask.w[i];
  }
  if (!n.ranges) return;
  if (!m.tp_src.IsFull())
    OrField(wc, Field::kTpSrc,
            InRangeBits(static_cast<uint16_t>(key.Get(Field::kTpSrc)), m.tp_src.lo, m.tp_src.hi));
  if (!m.tp_dst.IsFull())
    OrField(wc, Field::kTpDst,
            InRangeBits(static_cast<uint16_t>(key.Get(Field::kTpDst)), m.tp_dst.lo, m.tp_dst.hi));
}

// How the words of n's rule compare with `key`: one differs on a bit `wc`
// already has (proven), else the highest differing bit of the first word
// that differs (word >= 0), else they all agree (word < 0).  Only the words
// the rule's mask has can differ.
struct WordScan {
  bool proven = false;
  int word = -1;
  uint64_t bit = 0;
};
inline WordScan ScanWords(const RuleNode& n, const Flow& key, const Flow& wc) {
  const Match& m = n.rule.match;
  WordScan s;
  for (FlowMap left = n.words; left != 0; left &= left - 1) {
    const int i = std::countr_zero(left);
    const uint64_t d = (key.w[i] & m.mask.w[i]) ^ m.value.w[i];
    if (d == 0) continue;
    if ((d & wc.w[i]) != 0) {
      s.proven = true;
      return s;
    }
    if (s.word < 0) {
      s.word = i;
      s.bit = uint64_t{1} << (63 - std::countl_zero(d));
    }
  }
  return s;
}

// n's rule fails on a port range (its words agree with `key`): the bits
// that keep `key` outside the first range that fails.
inline void AddRangeMismatchBits(const Match& m, const Flow& key, Flow* wc) {
  const auto sp = static_cast<uint16_t>(key.Get(Field::kTpSrc));
  if (!m.tp_src.Contains(sp)) {
    OrField(wc, Field::kTpSrc, OutOfRangeBits(sp, m.tp_src.lo, m.tp_src.hi));
    return;
  }
  const auto dp = static_cast<uint16_t>(key.Get(Field::kTpDst));
  OrField(wc, Field::kTpDst, OutOfRangeBits(dp, m.tp_dst.lo, m.tp_dst.hi));
}

// `n`'s rule does not match `key`: bits that keep it from matching (none if
// a differing bit is in the mask already, else the highest differing bit of
// the first word that differs, else a failing range's).
inline void AddMismatchBits(const RuleNode& n, const Flow& key, Flow* wc) {
  const WordScan s = ScanWords(n, key, *wc);
  if (s.proven) return;
  if (s.word >= 0) {
    wc->w[s.word] |= s.bit;
    return;
  }
  AddRangeMismatchBits(n.rule.match, key, wc);
}

// n's rule matches `key` (true), or it does not and its mismatch bits are
// in *wc (AddMismatchBits): one pass over the words for a losing rule.
inline bool MatchesOrProve(const RuleNode& n, const Flow& key, Flow* wc) {
  const WordScan s = ScanWords(n, key, *wc);
  if (s.proven) return false;
  if (s.word >= 0) {
    wc->w[s.word] |= s.bit;
    return false;
  }
  const Match& m = n.rule.match;
  if (!n.ranges || (m.tp_src.Contains(static_cast<uint16_t>(key.Get(Field::kTpSrc))) &&
                    m.tp_dst.Contains(static_cast<uint16_t>(key.Get(Field::kTpDst)))))
    return true;
  AddRangeMismatchBits(m, key, wc);
  return false;
}

// Reader: the rule of bucket `bits` that `key` matches, visible at `gen`,
// best of those that beat `best` (null: any), or null; ORs the bits of the
// decisions into *wc: the winner's match bits, and a mismatch proof for every
// visible rule that beats the winner (or `best`, when none wins).  Rules that
// cannot beat it need no proof: their priority and id decide them.
inline const RuleNode* EvalBucket(uintptr_t bits, const Flow& key, uint64_t gen,
                                  const Rule* best, Flow* wc) {
  if (!IsList(bits)) {
    const auto* n = reinterpret_cast<const RuleNode*>(bits);
    if (!n->VisibleAt(gen) || (best != nullptr && !RuleBeats(n->rule, *best))) return nullptr;
    if (!MatchesOrProve(*n, key, wc)) return nullptr;
    AddMatchBits(*n, key, wc);
    return n;
  }
  const RuleList* l = AsList(bits);
  const uint32_t count = l->n.load(std::memory_order_acquire);
  const RuleNode* win = nullptr;
  if (l->sorted.load(std::memory_order_relaxed) != 0) {
    // Best first: the first visible match that beats `best` wins, and the
    // visible rules before it are the ones that had to lose (proven as they
    // are passed, in list order).
    // An entry's filter settles most rules without their node: one of a
    // lower priority than `best` ends the walk (what RuleBeats would, here
    // or at a later rule, all of them lower still), and one the filter
    // rejects changes nothing whether it is visible or not.
    const ListFilter* const filters = l->filters();
    for (uint32_t i = 0; i < count; ++i) {
      if (best != nullptr && filters[i].priority < best->priority) break;
      if (filters[i].Rejects(key, *wc)) continue;
      const RuleNode* n = l->entries()[i].load(std::memory_order_acquire);
      if (n == nullptr || !n->VisibleAt(gen)) continue;
      if (best != nullptr && !RuleBeats(n->rule, *best)) break;
      if (MatchesOrProve(*n, key, wc)) {
        win = n;
        break;
      }
    }
    if (win != nullptr) AddMatchBits(*win, key, wc);
    return win;
  }
  for (uint32_t i = 0; i < count; ++i) {
    const RuleNode* n = l->entries()[i].load(std::memory_order_acquire);
    if (n == nullptr || !n->VisibleAt(gen)) continue;
    const Rule* bar = win != nullptr ? &win->rule : best;
    if (bar != nullptr && !RuleBeats(n->rule, *bar)) continue;
    if (n->Matches(key)) win = n;
  }
  const Rule* bar = win != nullptr ? &win->rule : best;
  for (uint32_t i = 0; i < count; ++i) {
    const RuleNode* n = l->entries()[i].load(std::memory_order_acquire);
    if (n == nullptr || n == win || !n->VisibleAt(gen)) continue;
    if (bar == nullptr || RuleBeats(n->rule, *bar)) AddMismatchBits(*n, key, wc);
  }
  if (win != nullptr) AddMatchBits(*win, key, wc);
  return win;
}

// Writer: the rules of `bits` (a live key, or 0 / kTombstone for none) plus
// `node`: the same bits when the list had room, else new ones (a replaced
// list goes to `retire`).
template <typename RetireFn>
uintptr_t BucketWith(uintptr_t bits, RuleNode* node, RetireFn&& retire) {
  if (bits == 0 || bits == kTombstone) return reinterpret_cast<uintptr_t>(node);
  if (!IsList(bits)) {
    return ListBits(RuleList::Make(4, {reinterpret_cast<RuleNode*>(bits), node}));
  }
  RuleList* l = AsList(bits);
  const uint32_t count = l->n.load(std::memory_order_relaxed);
  if (count < l->cap) {
    if (l->sorted.load(std::memory_order_relaxed) != 0 && count > 0) {
      const RuleNode* last = l->entries()[count - 1].load(std::memory_order_relaxed);
      if (last != nullptr ? RuleBeats(node->rule, last->rule) : true)
        l->sorted.store(0, std::memory_order_relaxed);
    }
    l->filters()[count] = node->filter;
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

}  // namespace internal
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_KEY_SET_H_
