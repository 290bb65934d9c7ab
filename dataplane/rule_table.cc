// rule_table.cc — the slow-path priority-aware tuple space (see rule_table.h
// and docs/classifier.md).
//
// Memory layout
// -------------
//   Impl
//   ├─ rules_        id -> SharedRule (Rule addresses are stable;
//   │                 entries point at them; the other table of a left-right
//   │                 pair holds the same objects, see AppliedBatch)
//   ├─ by_cookie_    cookie -> {id}, cookies != 0 (DeleteByCookie; rules
//   │                 without a cookie, the bulk of a big load, are found
//   │                 by a scan instead of costing an index insert each)
//   ├─ by_mask_      expanded mask -> unique_ptr<Subtable>
//   └─ order_        [{max_priority, Subtable*}] sorted by max_priority desc:
//                    the only thing Lookup walks besides the subtables.
//   Subtable
//   ├─ mask, word_index[0..n_words)   the words the mask touches
//   ├─ buckets       PackedKey -> Bucket (the key's rules, best first: a
//   │                 pointer to the one rule most keys have, else to an
//   │                 array).  Two maps, one used: keys of <= 3 words (a
//   │                 5-tuple with in_port) in 32-byte slots, longer ones in
//   │                 88-byte slots.
//   └─ priority_counts  priority -> #entries   (max priority under deletes)
//
// A PackedKey holds the masked words of a key for the subtable's non-zero
// mask words only, packed to the front (the rest zero), with its hash
// computed once by the caller (the map's hasher returns it; a slot's hash is
// recomputed, or kept for a big key, when the map grows).  So a
// lookup per subtable is: n_words ANDs into a stack array, one HashWords, one
// probe — nothing allocated.  A hit reads the rule itself for its priority.
#include "dataplane/rule_table.h"

#include <algorithm>
#include <array>
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
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "dataplane/flow.h"
#include "dataplane/rule.h"

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
// bytes, slot) in each table of the left-right pair.  The 7-bit tag absl
// compares before a key comes from bits of `run` the slot position never
// uses (the position is hash >> 7: run's bits 0..52), plus the id, so runs
// that share a group still differ in their tags, and so do the ids of one
// run: a probe compares about one key, for ids of any pattern (all multiples
// of 128 or of 2^32 included; BM_LeftRightStream/300000/32 loads such ids).
// absl probes 16-slot groups from the home slot: patterned ids fill every
// run at one offset only, and probing absorbs that.
struct RuleIdHash {
  size_t operator()(uint64_t id) const {
    const uint64_t run = HashFinish(id >> 4);
    return (run << 11) | ((id & 15) << 7) | (((run >> 57) + id) & 0x7f);
  }
};

// The rules of one packed key, in 8 bytes: most keys have one rule, and the
// slot points at it; a key with several (rules whose expansions share a
// masked value) points at a heap array of them.  Either way the front rule
// is the key's winner: (priority desc, id asc), RuleBeats.  The low bit of
// `bits_` tells which (a Rule is 8-aligned).  Move-only; frees its array.
class Bucket {
 public:
  Bucket() = default;
  Bucket(Bucket&& o) noexcept : bits_(std::exchange(o.bits_, 0)) {}
  Bucket& operator=(Bucket&& o) noexcept {
    std::swap(bits_, o.bits_);
    return *this;
  }
  ~Bucket() { delete many(); }

  bool empty() const { return bits_ == 0; }
  const Rule* front() const {
    return (bits_ & 1) ? many()->front() : reinterpret_cast<const Rule*>(bits_);
  }
  void Insert(const Rule* r) {
    if (bits_ == 0) {
      bits_ = reinterpret_cast<uintptr_t>(r);
      return;
    }
    if ((bits_ & 1) == 0) {
      auto* v = new std::vector<const Rule*>{reinterpret_cast<const Rule*>(bits_)};
      bits_ = reinterpret_cast<uintptr_t>(v) | 1;
    }
    std::vector<const Rule*>& v = *many();
    v.insert(std::lower_bound(v.begin(), v.end(), r,
                              [](const Rule* a, const Rule* b) { return RuleBeats(*a, *b); }),
             r);
  }
  // Removes rule `id`, which is present.
  void Erase(uint64_t id) {
    if ((bits_ & 1) == 0) {
      bits_ = 0;
      return;
    }
    std::vector<const Rule*>& v = *many();
    v.erase(std::find_if(v.begin(), v.end(), [&](const Rule* r) { return r->id == id; }));
    if (v.size() == 1) {
      const Rule* last = v.front();
      delete many();
      bits_ = reinterpret_cast<uintptr_t>(last);
    }
  }

 private:
  std::vector<const Rule*>* many() const {
    return (bits_ & 1) ? reinterpret_cast<std::vector<const Rule*>*>(bits_ & ~uintptr_t{1})
                       : nullptr;
  }
  uintptr_t bits_ = 0;
};

// One slot of a subtable's bucket map: a packed key's words and its rules.
// A small key's slot is 32 bytes, aligned so that no slot straddles two
// cache lines (absl places a map's slots after its control bytes at the slot
// type's alignment).  A million-rule load is a cache miss on each new slot
// and page faults on the memory of the maps: smaller slots are fewer of both.
// So a small slot does not keep its hash (the set recomputes it, over all N
// words, when it grows); a big key's slot (IPv6, rare) keeps it, as hashing
// its N words would cost its lookups more than the n_words Pack hashes.
// The map is a set of slots looked up by PackedKey (transparent hash and
// equality).
template <int N, bool kSmall = (N <= kSmallKeyWords)>
struct BucketSlot;
template <int N>
struct alignas(32) BucketSlot<N, true> {
  explicit BucketSlot(const PackedKey<N>& k) : w(k.w) {}
  static uint64_t HashOf(const std::array<uint64_t, N>& w, int /*n_words*/) {
    return HashWords(w.data(), N, /*basis=*/N);  // the words past n_words are 0
  }
  uint64_t hash() const { return HashOf(w, N); }
  std::array<uint64_t, N> w;
  mutable Bucket bucket;  // not part of the set's key
};
template <int N>
struct BucketSlot<N, false> {
  explicit BucketSlot(const PackedKey<N>& k) : stored_hash(k.hash), w(k.w) {}
  static uint64_t HashOf(const std::array<uint64_t, N>& w, int n_words) {
    return HashWords(w.data(), n_words, /*basis=*/n_words);
  }
  uint64_t hash() const { return stored_hash; }
  uint64_t stored_hash;
  std::array<uint64_t, N> w;
  mutable Bucket bucket;  // not part of the set's key
};
static_assert(sizeof(BucketSlot<kSmallKeyWords>) == 32);
static_assert(alignof(Rule) >= 2, "Bucket tags its pointer's low bit");
static_assert(sizeof(BucketSlot<kFlowWords>) == 88);

struct PackedKeyHash {
  using is_transparent = void;
  template <int N>
  size_t operator()(const PackedKey<N>& k) const { return k.hash; }
  template <int N, bool kSmall>
  size_t operator()(const BucketSlot<N, kSmall>& s) const { return s.hash(); }
};
struct PackedKeyEq {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const { return a.w == b.w; }
};
template <int N>
using BucketMap = absl::flat_hash_set<BucketSlot<N>, PackedKeyHash, PackedKeyEq>;

// Hot fields first: both maps' headers (ctrl/slots pointers), the word
// indexes and the first packed mask words are in the first two cache lines,
// so probing a subtable touches those (and, past 5 words, the rest of the
// mask) plus the map's control bytes.  The rest is control-plane only.
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
    k.hash = BucketSlot<N>::HashOf(k.w, n_words);
    return k;
  }

  // fn(map, key) with the bucket map this subtable uses and `value` packed
  // for it; returns what fn returns.  (One body for const and not.)
  template <typename Fn>
  decltype(auto) WithBucket(const Flow& value, Fn&& fn) {
    return WithBucketOf(*this, value, fn);
  }
  template <typename Fn>
  decltype(auto) WithBucket(const Flow& value, Fn&& fn) const {
    return WithBucketOf(*this, value, fn);
  }
  template <typename Self, typename Fn>
  static decltype(auto) WithBucketOf(Self& st, const Flow& value, Fn& fn) {
    if (st.n_words <= kSmallKeyWords)
      return fn(st.small_buckets, st.template Pack<kSmallKeyWords>(value));
    return fn(st.big_buckets, st.template Pack<kFlowWords>(value));
  }
  size_t keys() const { return small_buckets.size() + big_buckets.size(); }

  uint32_t MaxPriority() const {
    return priority_counts.empty() ? 0 : priority_counts.rbegin()->first;
  }

  // First two cache lines: what Lookup reads (it prefetches both).  Bytes
  // 0-39 the small map's header, 40-49 the word indexes, 56-95 the big map's
  // header, then the packed mask (a <= 3-word shape's within line 2).
  BucketMap<kSmallKeyWords> small_buckets;
  std::array<uint8_t, kFlowWords> word_index{};
  uint8_t n_words = 0;
  BucketMap<kFlowWords> big_buckets;
  std::array<uint64_t, kFlowWords> packed_mask{};  // first n_words valid
  Flow mask;
  absl::btree_map<uint32_t, uint32_t> priority_counts;
  size_t entries = 0;
};

// What Lookup walks: contiguous, so the next subtables can be prefetched.
struct OrderSlot {
  uint32_t max_priority;
  const Subtable* subtable;
};

std::vector<std::pair<uint16_t, uint16_t>> SidePrefixes(const PortRange& r) {
  if (r.IsFull()) return {};
  return RangeToPrefixes(r.lo, r.hi);
}

size_t ExpansionCount(const Rule& r) {
  const size_t s =
      r.match.tp_src.IsFull()
          ? 1
          : RangeToPrefixes(r.match.tp_src.lo, r.match.tp_src.hi).size();
  const size_t d =
      r.match.tp_dst.IsFull()
          ? 1
          : RangeToPrefixes(r.match.tp_dst.lo, r.match.tp_dst.hi).size();
  return s * d;
}

// Calls fn(value, mask) once per expanded entry of `r`.
template <typename Fn>
void ForEachEntry(const Rule& r, Fn fn) {
  const auto src = SidePrefixes(r.match.tp_src);
  const auto dst = SidePrefixes(r.match.tp_dst);
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

// "eth_type=0x0800,ipv4_src=0x0a000000/0xff000000": fields with a non-zero
// mask; "/mask" only when the mask is not the whole field.
std::string FormatMatch(const Flow& value, const Flow& mask) {
  std::string out;
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    const FieldInfo& info = InfoOf(f);
    const uint64_t m = mask.Get(f);
    if (m == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",", info.name, "=",
                    Hex(value.Get(f), info.bits));
    if (m != (info.Mask() >> info.shift))
      absl::StrAppend(&out, "/", Hex(m, info.bits));
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

absl::Status OpError(absl::StatusCode code, size_t index, uint64_t id,
                     absl::string_view what) {
  return absl::Status(
      code, absl::StrCat("operation ", index, " (rule id ", id, "): ", what));
}

}  // namespace

// ---------------------------------------------------------------------------

struct RuleTable::Impl {
  explicit Impl(RuleTableLimits l) : limits(l) {}

  // Adds a validated rule whose id is absent.
  void AddRule(SharedRule owned);
  // The subtable of `mask`, created if absent.  Consecutive entries (the
  // expansions of one rule, rules of one shape streamed together) mostly
  // share a mask: the last one is checked before the map.
  Subtable& SubtableFor(const Flow& mask);
  // Phase 2 of ApplyBatch: applies operations known to be valid, and
  // records them in *applied (if not null).
  void ApplyValid(absl::Span<const RuleOp> ops, BatchResult* result,
                  AppliedBatch* applied);
  // Applies one valid operation (ApplyValid, ReplayBatch) and counts it.
  void Apply(const AppliedOp& op, BatchResult* result);
  // Bumps the generation after a batch and re-sorts the order if needed.
  void FinishBatch(BatchResult* result);
  // The result of a batch that changes nothing (empty, or nothing to delete).
  BatchResult Unchanged() const {
    BatchResult r;
    r.generation = generation;
    r.rules = rules.size();
    return r;
  }
  // Removes a present rule.
  void RemoveRule(uint64_t id);
  // Re-sorts order_ after a batch (drops nothing: empty subtables are erased
  // by RemoveRule), when order_dirty says a subtable came or went or a
  // subtable's max priority changed.  A stream of rules into existing
  // subtables below their top priority leaves the order as it is.
  void RebuildOrder();

  RuleTableLimits limits;
  uint64_t generation = 0;
  size_t entries = 0;
  size_t expanded_rules = 0;
  // Shared with the other table of a left-right pair (see AppliedBatch).
  absl::flat_hash_map<uint64_t, SharedRule, RuleIdHash> rules;
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<uint64_t>> by_cookie;  // cookie != 0
  // The ids of the rules carrying `cookie` (control path; allocates).
  std::vector<uint64_t> IdsWithCookie(uint64_t cookie) const;
  absl::flat_hash_map<Flow, std::unique_ptr<Subtable>, FlowHash, FlowEq> by_mask;
  Subtable* last_subtable = nullptr;  // SubtableFor's cache (or null)
  bool order_dirty = false;           // order_ needs RebuildOrder
  std::vector<OrderSlot> order;
};

Subtable& RuleTable::Impl::SubtableFor(const Flow& mask) {
  if (last_subtable != nullptr && FlowEq()(last_subtable->mask, mask))
    return *last_subtable;
  std::unique_ptr<Subtable>& st = by_mask[mask];
  if (st == nullptr) {
    st = std::make_unique<Subtable>(mask);
    order_dirty = true;
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
  for (const auto& [id, rule] : rules)
    if (rule->cookie == 0) ids.push_back(id);
  return ids;
}

void RuleTable::Impl::AddRule(SharedRule owned) {
  const Rule* rule = owned.get();
  rules.emplace(rule->id, std::move(owned));
  if (rule->cookie != 0) by_cookie[rule->cookie].insert(rule->id);
  size_t n = 0;
  ForEachEntry(*rule, [&](const Flow& value, const Flow& mask) {
    Subtable* st = &SubtableFor(mask);
    st->WithBucket(value, [&](auto& buckets, const auto& key) {
      buckets.lazy_emplace(key, [&](const auto& ctor) { ctor(key); })->bucket.Insert(rule);
    });
    if (rule->priority > st->MaxPriority()) order_dirty = true;
    ++st->priority_counts[rule->priority];
    ++st->entries;
    ++n;
  });
  entries += n;
  if (n > 1) ++expanded_rules;
}

void RuleTable::Impl::RemoveRule(uint64_t id) {
  auto it = rules.find(id);
  const Rule& rule = *it->second;
  size_t n = 0;
  ForEachEntry(rule, [&](const Flow& value, const Flow& mask) {
    auto st_it = by_mask.find(mask);
    Subtable& st = *st_it->second;
    st.WithBucket(value, [&](auto& buckets, const auto& key) {
      auto b = buckets.find(key);
      b->bucket.Erase(id);
      if (b->bucket.empty()) buckets.erase(b);
    });
    auto pc = st.priority_counts.find(rule.priority);
    if (--pc->second == 0) {
      if (rule.priority == st.MaxPriority()) order_dirty = true;
      st.priority_counts.erase(pc);
    }
    --st.entries;
    if (st.entries == 0) {
      if (last_subtable == &st) last_subtable = nullptr;
      by_mask.erase(st_it);
      order_dirty = true;
    }
    ++n;
  });
  entries -= n;
  if (n > 1) --expanded_rules;
  if (rule.cookie != 0) {
    auto c = by_cookie.find(rule.cookie);
    c->second.erase(id);
    if (c->second.empty()) by_cookie.erase(c);
  }
  rules.erase(it);
}

void RuleTable::Impl::RebuildOrder() {
  if (!order_dirty) return;
  order_dirty = false;
  order.clear();
  order.reserve(by_mask.size());
  for (const auto& [mask, st] : by_mask)
    order.push_back(OrderSlot{st->MaxPriority(), st.get()});
  // Ties broken by the mask words so the order (and DebugString) depends
  // only on the rule set, not on the history that built it.
  std::sort(order.begin(), order.end(),
            [](const OrderSlot& a, const OrderSlot& b) {
              if (a.max_priority != b.max_priority)
                return a.max_priority > b.max_priority;
              return a.subtable->mask.w > b.subtable->mask.w;
            });
}

// ---------------------------------------------------------------------------

RuleTable::RuleTable(RuleTableLimits limits)
    : impl_(std::make_unique<Impl>(limits)) {}

RuleTable::~RuleTable() = default;

RuleTable::RuleTable(const RuleTable& other)
    : impl_(std::make_unique<Impl>(other.impl_->limits)) {
  impl_->rules.reserve(other.impl_->rules.size());
  for (const auto& [id, rule] : other.impl_->rules) impl_->AddRule(rule);
  impl_->generation = other.impl_->generation;
  impl_->RebuildOrder();
}

absl::StatusOr<BatchResult> RuleTable::ApplyBatch(
    absl::Span<const RuleOp> ops, AppliedBatch* applied) {
  Impl& t = *impl_;
  if (ops.empty()) {
    if (applied != nullptr) applied->clear();  // nothing to replay
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
    return Sim{true, r->second->cookie, ExpansionCount(*r->second), 0};
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
      return OpError(
          absl::StatusCode::kResourceExhausted, i, id,
          absl::StrCat("max_rules: the table would hold ", rules_after,
                       " rules, limit ", t.limits.max_rules));
    }
    if (entries_after > t.limits.max_entries) {
      return OpError(
          absl::StatusCode::kResourceExhausted, i, id,
          absl::StrCat("max_entries: the table would hold ", entries_after,
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
          return OpError(s.code(), i, id, s.message());
        const std::optional<Sim> cur = current(id);
        const bool insert = op.kind == RuleOp::Kind::kInsert;
        if (insert && cur.has_value()) {
          return OpError(absl::StatusCode::kInvalidArgument, i, id,
                         absl::StrCat("id: insert of rule id ", id,
                                      " which already exists", earlier(id)));
        }
        if (!insert && !cur.has_value()) {
          return OpError(absl::StatusCode::kInvalidArgument, i, id,
                         absl::StrCat("id: replace of unknown rule id ", id, earlier(id)));
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
          return OpError(absl::StatusCode::kInvalidArgument, i, op.id,
                         absl::StrCat("id: delete of unknown rule id ", op.id,
                                      earlier(op.id)));
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
        return OpError(absl::StatusCode::kInvalidArgument, i,
                       op.kind == RuleOp::Kind::kDelete ? op.id : op.rule.id,
                       absl::StrCat("kind: unknown operation kind ",
                                    static_cast<int>(op.kind)));
    }
  }

  // A batch that changes nothing (delete_cookie ops that match no rule) is
  // acknowledged like an empty one: same generation, nothing to publish.
  if (changed.empty()) {
    if (applied != nullptr) applied->clear();
    return t.Unchanged();
  }

  // Phase 2: everything is known valid; apply in order.
  t.ApplyValid(ops, &result, applied);
  return result;
}

BatchResult RuleTable::ReplayBatch(const AppliedBatch& batch) {
  Impl& t = *impl_;
  if (batch.empty()) return t.Unchanged();
  BatchResult result;
  for (const AppliedOp& op : batch) t.Apply(op, &result);
  t.FinishBatch(&result);
  return result;
}

BatchResult RuleTable::DeleteAll() {
  BatchResult result = impl_->Unchanged();
  if (result.rules == 0) return result;
  result.deleted = std::exchange(result.rules, 0);
  Clear(++result.generation);
  return result;
}

void RuleTable::Clear(uint64_t generation) {
  auto empty = std::make_unique<Impl>(impl_->limits);
  empty->generation = generation;
  impl_ = std::move(empty);  // frees the rules this table held
}

bool IsUnknownRuleIdError(const absl::Status& s) {
  // The messages of ApplyBatch's phase 1: "operation i (rule id n): id:
  // delete of unknown rule id n" and "... replace of unknown rule id n".
  return s.code() == absl::StatusCode::kInvalidArgument &&
         absl::StrContains(s.message(), "): id: ") &&
         absl::StrContains(s.message(), " of unknown rule id ");
}

void RuleTable::Impl::ApplyValid(absl::Span<const RuleOp> ops,
                                 BatchResult* result, AppliedBatch* applied) {
  if (applied != nullptr) {
    applied->clear();
    applied->reserve(ops.size());
  }
  for (const RuleOp& op : ops) {
    AppliedOp a{op.kind, 0, {}};
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
      case RuleOp::Kind::kReplace:
        a.rule = SharedRule::Make(op.rule);  // the one copy
        break;
      case RuleOp::Kind::kDelete:
        a.key = op.id;
        break;
      case RuleOp::Kind::kDeleteByCookie:
        a.key = op.cookie;
        break;
    }
    Apply(a, result);
    if (applied != nullptr) applied->push_back(std::move(a));
  }
  FinishBatch(result);
}

void RuleTable::Impl::Apply(const AppliedOp& op, BatchResult* result) {
  switch (op.kind) {
    case RuleOp::Kind::kInsert:
      AddRule(op.rule);
      ++result->inserted;
      break;
    case RuleOp::Kind::kReplace:
      RemoveRule(op.rule->id);
      AddRule(op.rule);
      ++result->replaced;
      break;
    case RuleOp::Kind::kDelete:
      RemoveRule(op.key);
      ++result->deleted;
      break;
    case RuleOp::Kind::kDeleteByCookie: {
      const std::vector<uint64_t> victims = IdsWithCookie(op.key);
      for (uint64_t id : victims) RemoveRule(id);
      result->deleted += victims.size();
      break;
    }
  }
}

void RuleTable::Impl::FinishBatch(BatchResult* result) {
  RebuildOrder();
  result->generation = ++generation;
  result->rules = rules.size();
}

const Rule* RuleTable::Lookup(const Flow& key, Flow* wc,
                              int* subtables_visited) const {
  const Rule* best = nullptr;
  int visited = 0;
  const OrderSlot* const begin = impl_->order.data();
  const OrderSlot* const end = begin + impl_->order.size();
  for (const OrderSlot* slot = begin; slot != end; ++slot) {
    // Sorted by max priority: nothing from here on can beat or tie `best`.
    if (best != nullptr && slot->max_priority < best->priority) break;
    if (slot + 2 < end) {
      __builtin_prefetch(slot[2].subtable);
      __builtin_prefetch(reinterpret_cast<const char*>(slot[2].subtable) + 64);
    }
    const Subtable& st = *slot->subtable;
    ++visited;
    for (int j = 0; j < st.n_words; ++j)
      wc->w[st.word_index[j]] |= st.packed_mask[j];
    const Rule* r = st.WithBucket(key, [](const auto& buckets, const auto& k) -> const Rule* {
      const auto it = buckets.find(k);
      return it == buckets.end() ? nullptr : it->bucket.front();
    });
    if (r != nullptr && (best == nullptr || RuleBeats(*r, *best))) best = r;
  }
  // Megaflows are per in_port (megaflow.h): in_port is always exact.
  wc->Set(Field::kInPort, 0xffffffffu);
  if (subtables_visited != nullptr) *subtables_visited = visited;
  return best;
}

const Rule* RuleTable::Lookup(const FlowKey& key, Flow* wc,
                              int* subtables_visited) const {
  return Lookup(key.ToFlow(), wc, subtables_visited);
}

const Rule* RuleTable::Find(uint64_t id) const {
  auto it = impl_->rules.find(id);
  return it == impl_->rules.end() ? nullptr : it->second.get();
}

size_t RuleTable::size() const { return impl_->rules.size(); }

RuleTableStats RuleTable::Stats() const {
  RuleTableStats s;
  s.rules = impl_->rules.size();
  s.entries = impl_->entries;
  s.expanded_rules = impl_->expanded_rules;
  s.subtables = impl_->by_mask.size();
  s.generation = impl_->generation;
  return s;
}

uint64_t RuleTable::generation() const { return impl_->generation; }

std::vector<const Rule*> RuleTable::Rules() const {
  std::vector<const Rule*> out;
  out.reserve(impl_->rules.size());
  for (const auto& [id, rule] : impl_->rules) out.push_back(rule.get());
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
  for (size_t i = 0; i < impl_->order.size(); ++i) {
    const Subtable& st = *impl_->order[i].subtable;
    absl::StrAppend(&out, "  subtable ", i,
                    ": max_priority=", impl_->order[i].max_priority,
                    " entries=", st.entries, " keys=", st.keys(),
                    " mask=", FormatMask(st.mask), "\n");
  }
  for (const Rule* r : Rules()) {
    absl::StrAppend(&out, "  rule ", FormatRule(*r),
                    " entries=", ExpansionCount(*r), "\n");
  }
  return out;
}

std::vector<std::pair<uint16_t, uint16_t>> RangeToPrefixes(uint16_t lo,
                                                           uint16_t hi) {
  std::vector<std::pair<uint16_t, uint16_t>> out;
  if (lo > hi) return out;
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
    out.emplace_back(static_cast<uint16_t>(cur),
                     static_cast<uint16_t>((0xffffu << k) & 0xffffu));
    cur += 1u << k;
  }
  return out;
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
  if (auto it = by_in_port.find(static_cast<uint32_t>(value.Get(Field::kInPort)));
      it != by_in_port.end()) {
    for (const Match& m : it->second) {
      if (Overlaps(m, value, mask)) return true;
    }
  }
  for (const Match& m : any_in_port) {
    if (Overlaps(m, value, mask)) return true;
  }
  return false;
}

void RuleChangeSet::Merge(RuleChangeSet&& later) {
  // The first step of a group (and any port or list this set lacks so far)
  // is taken over, not copied: a batch of a thousand inserts is a thousand
  // 144-byte matches.
  if (removed_ids.empty()) {
    removed_ids = std::move(later.removed_ids);
  } else {
    removed_ids.insert(later.removed_ids.begin(), later.removed_ids.end());
  }
  deleted_ids.insert(later.deleted_ids.begin(), later.deleted_ids.end());
  for (auto& [port, v] : later.by_in_port) {
    std::vector<Match>& dst = by_in_port[port];
    if (dst.empty()) {
      dst = std::move(v);
    } else {
      dst.insert(dst.end(), v.begin(), v.end());
    }
  }
  if (any_in_port.empty()) {
    any_in_port = std::move(later.any_in_port);
  } else {
    any_in_port.insert(any_in_port.end(), later.any_in_port.begin(),
                       later.any_in_port.end());
  }
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
  for (const RuleOp& op : ops) {
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
        AddChangedMatch(&cs, op.rule.match);
        break;
      case RuleOp::Kind::kReplace:
        remove_old(op.rule.id);
        AddChangedMatch(&cs, op.rule.match);
        break;
      case RuleOp::Kind::kDelete:
        remove_old(op.id);
        cs.deleted_ids.insert(op.id);
        break;
      case RuleOp::Kind::kDeleteByCookie:
        for (const Rule* r : before.RulesWithCookie(op.cookie)) {
          remove_old(r->id);
          cs.deleted_ids.insert(r->id);
        }
        // Rules inserted earlier in this batch with this cookie: their
        // matches are already in the set; their ids must count as removed.
        for (const RuleOp& o : ops) {
          if ((o.kind == RuleOp::Kind::kInsert || o.kind == RuleOp::Kind::kReplace) &&
              o.rule.cookie == op.cookie) {
            cs.removed_ids.insert(o.rule.id);
            cs.deleted_ids.insert(o.rule.id);
          }
        }
        break;
    }
  }
  return cs;
}

}  // namespace flowclass
