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
//   │                 (by_mask: table mask -> unique_ptr<Subtable>;
//   │                 walk: its subtables and the shared ones, sorted, in
//   │                 blocks, internal/rule_walk.h)
//   └─ order         -> Order {shared walk, in_port -> walk}: the only
//                    thing Lookup reads besides the subtables; replaced as
//                    a whole when it changes.
//   Subtable (internal/rule_subtable.h)
//   ├─ mask, word_index[0..n_words)   the table mask: the words it touches
//   ├─ keys          KeySet (internal/rule_key_set.h): PackedKey -> the
//   │                 key's rules (a bucket: a pointer to the one rule most
//   │                 keys have, else to a list, best first, each entry
//   │                 with its rule's ListFilter).  Two sets, one
//   │                 used: keys of <= 3 words (a 5-tuple with in_port) in
//   │                 32-byte slots, longer ones in 80-byte slots.
//   └─ priority_counts  priority -> #linked entries   (max priority)
//
// Every rule is one entry, in the subtable of its table mask (EntryOf in
// internal/rule_subtable.h: its mask relaxed to coarse prefixes, a port range
// standing for its bounds' common prefix), so rules of different masks and
// ranges share a subtable and a bucket.  A PackedKey holds the masked words
// of a key for the subtable's non-zero mask words only, packed to the front
// (the rest zero), with its hash computed once by the caller (a slot's hash
// is recomputed when the set grows).  So a lookup per subtable is: n_words
// ANDs into a stack array, one HashWords, one probe — nothing allocated —
// and on a hit, the bucket's rules checked against the key (EvalBucket in
// internal/rule_key_set.h, which also adds the bits that decided them to the
// megaflow mask).
//
// One table, read while written (concurrent_readers; see rule_table.h and
// docs/classifier.md): the dataplane's PMDs look up at the generation they
// installed while the control thread applies the next batches in place.
#include "dataplane/rules/rule_table.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/internal/rule_key_set.h"
#include "dataplane/rules/internal/rule_subtable.h"
#include "dataplane/rules/internal/rule_table_text.h"
#include "dataplane/rules/internal/rule_walk.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_error.h"

namespace flowclass {
namespace {

using internal::AsList;
using internal::BucketWith;
using internal::BucketWithout;
using internal::EvalBucket;
using internal::ExpansionCount;
using internal::FlowEq;
using internal::ForEachEntry;
using internal::FormatMask;
using internal::FormatRule;
using internal::IsList;
using internal::kLevelField;
using internal::kLevelFields;
using internal::kLevelStep;
using internal::kSmallKeyWords;
using internal::Order;
using internal::OrderSlot;
using internal::PackedKey;
using internal::Partition;
using internal::PrefixLevels;
using internal::PrefixMaskOf;
using internal::Prefixes;
using internal::PrefixesOf;
using internal::Retired;
using internal::RuleList;
using internal::RuleNode;
using internal::SlotBefore;
using internal::SortSlots;
using internal::Subtable;
using internal::Walk;
using internal::WalkBlock;
using internal::WalkEditor;
using internal::WalkRemoval;

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
      : limits(l), concurrent_readers(concurrent) {
    shared.walk = new Walk();
    auto* o = new Order();
    o->shared = shared.walk;
    order.store(o, std::memory_order_relaxed);
  }
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
  void LinkEntry(RuleNode* node, Subtable* st, Keys& keys, const Key& key,
                 const Flow& node_value);
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
  // `st` is new or its max priority changed: its slot moves in the walks.
  void Touch(Subtable* st) {
    if (!st->moved) {
      st->moved = true;
      moved.push_back(st);
    }
    Touch(st->part);
  }
  // `st` was emptied and left its partition (owned here now): its slots
  // leave the walks, and RebuildOrder retires it.
  void Gone(Subtable* st) {
    if (st->moved) std::erase(moved, st);
    if (st->in_walks) gone.push_back({st->part, {st->walk_priority, st->mask, st}});
    emptied.push_back(st);
    Touch(st->part);
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
  // Replaces every list an append left out of order (`unsorted`) with a
  // sorted copy, once per batch: a sorted list stops at its first match
  // (EvalBucket), an unsorted one is read whole, twice.  Rules loaded out
  // of priority order (random_10k) left most lists unsorted.
  void SortLists();
  std::vector<std::pair<Subtable*, Flow>> unsorted;  // (subtable, entry value)
  // Edits the walks of the partitions Touch marked (a subtable came or
  // went, or a max priority changed) and publishes a new Order, dropping
  // emptied partitions.  A stream of rules into existing subtables below
  // their top priority leaves the order as it is.  A walk is edited, not
  // rebuilt (WalkEditor, internal/rule_walk.h): the slots of `moved` and
  // `gone` subtables leave the blocks they are in, the moved ones' new
  // slots enter the blocks their place falls in, and only those blocks are
  // copied (the order a full sort gives, for O(blocks + changed blocks)
  // instead of O(walk) per one-rule batch; a port's first walk is sorted
  // whole).  A moved subtable whose max priority is back where its slots
  // are moves nowhere.
  void RebuildOrder();
  std::vector<Subtable*> moved;  // Touch(Subtable*) since RebuildOrder
  // Gone since RebuildOrder (the subtable may be freed: its slots' keys).
  std::vector<std::pair<const Partition*, WalkRemoval>> gone;
  std::vector<Subtable*> emptied;  // Gone since RebuildOrder (owned)
  WalkEditor walk_editor;  // RebuildOrder's, kept for its buffer
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
    Flow value;
  };
  std::vector<PlannedEntry> plan;
  // Every entry's table-mask prefixes of the kLevelFields (all partitions):
  // read by Lookup to skip subtables.  An entry is counted before its slot
  // is published and uncounted after it is unlinked.
  std::array<PrefixLevels, kLevelFields> levels;
  template <typename Fn>
  void ForEachLevel(const Subtable& st, const Flow& value, Fn&& fn) {
    for (int j = 0; j < kLevelFields; ++j)
      if (st.level_len[j] != 0)
        fn(levels[j], value.Get(kLevelField[j].field), st.level_len[j], kLevelField[j].width);
  }
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
    internal::FreeWalkAndBlocks(p.walk);
  });
  for (const auto& [id, node] : rules) delete node;
  for (RuleNode* node : deleted) delete node;
  for (Subtable* st : emptied) delete st;
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
    Touch(st.get());
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
void RuleTable::Impl::LinkEntry(RuleNode* node, Subtable* st, Keys& keys, const Key& key,
                                const Flow& node_value) {
  auto retire = [this](Retired r) { Retire(r); };
  ForEachLevel(*st, node_value, [&](PrefixLevels& l, uint64_t v, int len, int width) {
    l.Add(v, len, width, retire);
  });
  std::atomic<uintptr_t>& bits = keys.Upsert(key.w, key.hash, st->n_words, retire);
  const uintptr_t before = bits.load(std::memory_order_relaxed);
  const bool was_sorted =
      IsList(before) && AsList(before)->sorted.load(std::memory_order_relaxed) != 0;
  const uintptr_t after = BucketWith(before, node, retire);
  keys.Set(bits, after);
  // An append into a sorted list that broke its order (a new list is sorted).
  if (was_sorted && after == before && AsList(after)->sorted.load(std::memory_order_relaxed) == 0)
    unsorted.push_back({st, node_value});
  const uint32_t priority = node->rule.priority;
  if (priority > st->MaxPriority()) Touch(st);
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
          plan.push_back(PlannedEntry{node, st, key, value});
        } else {  // rare (IPv6): linked at once
          LinkEntry(node, st, st->big_keys, st->Pack<kFlowWords>(value), value);
        }
        ++n;
      });
      entries += n;
      if (n > 1) ++expanded_rules;
    }
    for (const PlannedEntry& e : plan) LinkEntry(e.node, e.st, e.st->small_keys, e.key, e.value);
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
    ForEachLevel(st, value, [&](PrefixLevels& l, uint64_t v, int len, int width) {
      l.Remove(v, len, width, retire);
    });
    auto pc = st.priority_counts.find(rule.priority);
    if (--pc->second == 0) {
      if (rule.priority == st.MaxPriority()) Touch(&st);
      st.priority_counts.erase(pc);
    }
    if (--st.entries == 0) {
      if (last_subtable == &st) last_subtable = nullptr;
      // Retired by RebuildOrder once it has taken its slots out of the
      // walks (the edit compares slots, so reads their masks).
      Gone(st_it->second.release());
      part.by_mask.erase(st_it);
      --n_subtables;
    }
  });
  Retire(Retired{[](void* p) { delete static_cast<RuleNode*>(p); }, node});
}

void RuleTable::Impl::RebuildOrder() {
  if (!shared.dirty && dirty_ports.empty()) return;
  auto retire_block = [this](const WalkBlock* b) {
    Retire(Retired{internal::FreeWalkBlock, const_cast<WalkBlock*>(b)});
  };
  auto retire_walk = [this](Walk* w) { Retire(Retired{internal::FreeWalk, w}); };
  // Per partition: the slots to take out (sorted by their old keys) and the
  // moved subtables' new slots (sorted).
  struct Changes {
    std::vector<WalkRemoval> remove;
    std::vector<OrderSlot> add;
  };
  absl::flat_hash_map<const Partition*, Changes> changes;
  for (Subtable* st : moved) {
    st->moved = false;
    const uint32_t max = st->MaxPriority();
    if (st->in_walks && st->walk_priority == max) continue;  // its slots stay
    Changes& c = changes[st->part];
    if (st->in_walks) c.remove.push_back({st->walk_priority, st->mask, st});
    c.add.push_back(OrderSlot{max, st});
  }
  for (const auto& [part, removal] : gone) changes[part].remove.push_back(removal);
  gone.clear();
  for (auto& [part, c] : changes) {
    std::sort(c.remove.begin(), c.remove.end(), internal::RemovalBefore);
    SortSlots(&c.add);
  }
  static const Changes kNone;
  auto changes_of = [&changes](const Partition& p) -> const Changes& {
    auto it = changes.find(&p);
    return it == changes.end() ? kNone : it->second;
  };
  const Changes& common = changes_of(shared);
  const bool shared_changed = !common.remove.empty() || !common.add.empty();
  bool changed = false;  // a walk or the set of ports: a new Order
  if (shared_changed) {
    retire_walk(std::exchange(
        shared.walk, walk_editor.Edit(*shared.walk, common.remove, common.add, retire_block)));
    changed = true;
  }
  shared.dirty = false;
  auto rebuild = [&](Partition& p) {
    Walk* walk = nullptr;
    if (p.walk == nullptr) {  // a new port: its subtables and the shared ones
      std::vector<OrderSlot> slots;
      for (const auto& [mask, st] : p.by_mask)
        slots.push_back(OrderSlot{st->MaxPriority(), st.get()});
      internal::ForEachSlot(*shared.walk, [&](const OrderSlot& s) { slots.push_back(s); });
      SortSlots(&slots);
      walk = walk_editor.Build(slots);
    } else {
      const Changes& own = changes_of(p);
      if (own.remove.empty() && own.add.empty() && !shared_changed) return;
      const Changes* c = &own;
      Changes both;
      if (shared_changed && (!own.remove.empty() || !own.add.empty())) {
        std::merge(own.remove.begin(), own.remove.end(), common.remove.begin(),
                   common.remove.end(), std::back_inserter(both.remove), internal::RemovalBefore);
        std::merge(own.add.begin(), own.add.end(), common.add.begin(), common.add.end(),
                   std::back_inserter(both.add), SlotBefore);
        c = &both;
      } else if (shared_changed) {
        c = &common;
      }
      walk = walk_editor.Edit(*p.walk, c->remove, c->add, retire_block);
      retire_walk(p.walk);
    }
    p.walk = walk;
    changed = true;
  };
  // Touch lists a partition once (its dirty flag), and partitions are
  // erased only here: every listed port is present.
  for (uint32_t port : dirty_ports) {
    auto it = ports.find(port);
    it->second->dirty = false;
    if (it->second->by_mask.empty()) {
      Walk* w = it->second->walk;
      if (w != nullptr) {
        for (const WalkBlock* b : *w) retire_block(b);
        retire_walk(w);
      }
      ports.erase(it);
      changed = true;
    } else if (!shared_changed) {
      rebuild(*it->second);
    }
  }
  dirty_ports.clear();
  if (shared_changed) {
    for (auto& [port, p] : ports) rebuild(*p);
  }
  for (Subtable* st : moved) {  // where their slots are now
    st->in_walks = true;
    st->walk_priority = st->MaxPriority();
  }
  moved.clear();
  for (Subtable* st : emptied)
    Retire(Retired{[](void* p) { delete static_cast<Subtable*>(p); }, st});
  emptied.clear();
  if (!changed) return;
  auto* next = new Order();
  next->shared = shared.walk;
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
  impl_->SortLists();
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
                                  " entries, limit ",
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

void RuleTable::Impl::SortLists() {
  auto retire = [this](Retired r) { Retire(r); };
  for (const std::pair<Subtable*, Flow>& u : unsorted) {
    Subtable* st = u.first;  // (clang 14 lambdas cannot capture a binding)
    st->WithKeys(u.second, [&](auto& keys, const auto& key) {
      std::atomic<uintptr_t>& bits = keys.Upsert(key.w, key.hash, st->n_words, retire);
      const uintptr_t b = bits.load(std::memory_order_relaxed);
      if (!IsList(b) || AsList(b)->sorted.load(std::memory_order_relaxed) != 0) return;
      RuleList* l = AsList(b);
      keys.Set(bits, internal::ListBits(RuleList::Make(l->cap, l->Nodes())));
      Retire(Retired{RuleList::Free, l});
    });
  }
  unsorted.clear();
}

void RuleTable::Impl::FinishBatch(BatchResult* result) {
  SortLists();
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
  const Walk* walk = order.shared;
  if (!order.by_port.empty()) {
    auto it = order.by_port.find(static_cast<uint32_t>(key.Get(Field::kInPort)));
    if (it != order.by_port.end()) walk = it->second;
  }
  // Per level field, how deep the key's prefix is among the entries (packed
  // one per byte, like Subtable::level_lens) and the bits of its first
  // missing level, what a skip un-wildcards.
  uint32_t depths = 0;
  std::array<uint64_t, kLevelFields> miss_bits;
  for (int j = 0; j < kLevelFields; ++j) {
    const internal::LevelField& f = kLevelField[j];
    const int d = impl_->levels[j].Depth(f.Get(key), f.width);
    depths |= static_cast<uint32_t>(d) << (8 * j);
    miss_bits[j] = d < f.width ? PrefixMaskOf(d + kLevelStep, f.width) : 0;  // 0: never short
  }
  uint32_t covered = 0;
  // The walk's blocks, one after the other (internal/rule_walk.h): a null
  // block pointer ends the walk, a slot without a subtable a block.
  for (const WalkBlock* const* block = walk->data(); *block != nullptr; ++block) {
    for (const OrderSlot* slot = (*block)->slots.data(); slot->subtable != nullptr;
         ++slot) {
      // Sorted by max priority (an upper bound for every generation a
      // reader may use): nothing from here on can beat or tie `best`.
      if (best != nullptr && slot->max_priority < best->priority) goto done;
      // (Past a block's last subtable: null, which is not prefetched.)
      __builtin_prefetch(slot[2].subtable);
      __builtin_prefetch(reinterpret_cast<const char*>(slot[2].subtable) + 64);
      const Subtable& st = *slot->subtable;
      ++visited;
      // A subtable whose mask needs a longer prefix of a level field than the
      // key has among the entries holds no bucket of the key: skipped, with
      // the bits of that field's first missing level in the mask (the fewest
      // new bits of the fields that can tell; the first such field on a tie).
      // `covered` (fields whose missing level `wc` already has, a top bit per
      // byte) makes most skips free: such a skip adds nothing.
      if (const uint32_t short_fields = internal::LevelsShort(depths, st.level_lens);
          short_fields != 0) {
        if ((short_fields & covered) != 0) continue;
        int skip = -1;
        int skip_cost = 0;
        for (uint32_t left = short_fields; left != 0; left &= left - 1) {
          const int j = std::countr_zero(left) / 8;
          const int cost =
              internal::PopCount32(miss_bits[j] & ~kLevelField[j].Get(*wc));
          if (skip < 0 || cost < skip_cost) {
            skip = j;
            skip_cost = cost;
          }
          if (cost == 0) break;  // nothing beats free (and adds nothing)
        }
        kLevelField[skip].Or(wc, miss_bits[skip]);
        covered |= 0x80u << (8 * skip);
        continue;
      }
      for (int j = 0; j < st.n_words; ++j)
        wc->w[st.word_index[j]] |= st.packed_mask[j];
      const RuleNode* n = st.WithKeys(
          key, [&](const auto& keys, const auto& k) -> const RuleNode* {
            const uintptr_t bits = keys.Find(k.w, k.hash);
            return bits == 0 ? nullptr : EvalBucket(bits, key, gen, best, wc);
          });
      if (n != nullptr) best = &n->rule;  // it beats `best`
    }
  }
done:
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
  auto slots = [](const Walk& walk) {
    std::vector<OrderSlot> out;
    internal::ForEachSlot(walk, [&out](const OrderSlot& s) { out.push_back(s); });
    return out;
  };
  const Order& order = *impl_->order.load(std::memory_order_relaxed);
  print("", slots(*order.shared));
  std::vector<uint32_t> ports;
  for (const auto& [port, p] : impl_->ports) ports.push_back(port);
  std::sort(ports.begin(), ports.end());
  for (uint32_t port : ports) {
    std::vector<OrderSlot> own;
    for (const OrderSlot& slot : slots(*impl_->ports.at(port)->walk))
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


}  // namespace flowclass