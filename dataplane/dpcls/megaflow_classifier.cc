#include "dataplane/dpcls/megaflow_classifier.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flowclass {

using internal::Bucket;
using internal::kBucketEntries;
using internal::SubtableDesc;

namespace {

constexpr uint64_t kInPortMask = InfoOf(Field::kInPort).Mask();

// Cuckoo path search: breadth-first over at most this many buckets.  With a
// table at most half full a free slot is almost always within two moves;
// the bound keeps a failing insert (constant hash, full table) cheap.
constexpr int kMaxCuckooNodes = 128;

uint32_t PortHome(uint32_t in_port, uint32_t mask) {
  return static_cast<uint32_t>(HashFinish(in_port)) & mask;
}

// "in_port,ipv4_src/0xffff0000,...": the fields a mask looks at, and the
// bits when partial.  (Local so the dump does not depend on flow.cc.)
std::string MaskFields(const Flow& mask) {
  std::string out;
  for (int f = 0; f < kFieldCount; ++f) {
    const FieldInfo& info = kFieldInfo[f];
    const uint64_t m = mask.Get(static_cast<Field>(f));
    if (m == 0) continue;
    if (!out.empty()) out += ',';
    out += info.name;
    const uint64_t full = info.Mask() >> info.shift;
    if (m != full) absl::StrAppendFormat(&out, "/%#x", m);
  }
  return out.empty() ? "(empty)" : out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MegaflowClassifier>> MegaflowClassifier::Create(
    MegaflowPool* pool, const MegaflowClassifierOptions& options) {
  if (pool == nullptr)
    return absl::InvalidArgumentError("pool: must not be null");
  if (options.max_ports == 0 || options.max_ports > 0xffff)
    return absl::InvalidArgumentError(absl::StrCat(
        "max_ports: must be in [1, 65535], got ", options.max_ports));
  if (options.max_subtables == 0 || options.max_subtables > 0xffff)
    return absl::InvalidArgumentError(absl::StrCat(
        "max_subtables: must be in [1, 65535], got ", options.max_subtables));
  // Each port slot keeps a rank array able to hold every subtable.
  if (uint64_t{options.max_ports} * options.max_subtables > (1u << 24))
    return absl::InvalidArgumentError(absl::StrCat(
        "max_ports x max_subtables: ", options.max_ports, " x ",
        options.max_subtables, " exceeds 16777216 rank slots"));
  for (int i = 0; i < kLookupImplCount; ++i) {
    const int prio = options.lookup.priority[i];
    if (prio < 0 || prio > kMaxLookupPriority)
      return absl::InvalidArgumentError(absl::StrCat(
          "lookup: priority of ", LookupImplName(static_cast<LookupImplId>(i)),
          " must be in [0, ", kMaxLookupPriority, "], got ", prio));
  }
  const uint64_t entries = options.table_entries != 0
                               ? uint64_t{options.table_entries}
                               : 2 * uint64_t{pool->capacity()};
  const uint64_t want_buckets =
      std::max<uint64_t>(2, (entries + kBucketEntries - 1) / kBucketEntries);
  if (want_buckets > (uint64_t{1} << 31))
    return absl::InvalidArgumentError(absl::StrCat(
        "table_entries: ", entries, " entries exceed the table limit of ",
        (uint64_t{1} << 31) * kBucketEntries));
  const uint32_t n_buckets =
      static_cast<uint32_t>(std::bit_ceil(want_buckets));
  return std::unique_ptr<MegaflowClassifier>(
      new MegaflowClassifier(pool, options, n_buckets));
}

MegaflowClassifier::MegaflowClassifier(MegaflowPool* pool,
                                       const MegaflowClassifierOptions& o,
                                       uint32_t n_buckets)
    : pool_(pool), options_(o) {
  selection_.priorities = o.lookup;
  selection_.extra_validated = o.extra_validated_lookup;
  selection_.mismatches = &lookup_mismatches_;
  buckets_.reset(new Bucket[n_buckets]);
  table_.buckets = buckets_.get();
  table_.bucket_mask = n_buckets - 1;
  table_.hash_override = o.hash_override;
  for (uint32_t b = 0; b < n_buckets; ++b) {
    for (int s = 0; s < kBucketEntries; ++s) {
      buckets_[b].sig[s] = 0;
      buckets_[b].index[s] = kInvalidIndex;
    }
  }

  subtables_.reset(new SubtableDesc[o.max_subtables]);
  free_ids_.reset(new uint16_t[o.max_subtables]);
  ranked_.reset(new uint16_t[size_t{o.max_ports} * o.max_subtables]);
  port_n_subtables_.reset(new uint32_t[o.max_ports]);
  port_of_slot_.reset(new uint32_t[o.max_ports]);
  free_slots_.reset(new uint16_t[o.max_ports]);
  const uint32_t map_size = std::bit_ceil(2 * o.max_ports);
  port_map_port_.reset(new uint32_t[map_size]);
  port_map_slot_.reset(new int32_t[map_size]);
  port_map_mask_ = map_size - 1;
  Clear();
}

MegaflowClassifier::~MegaflowClassifier() = default;

// ---------------------------------------------------------------- ports ----

int MegaflowClassifier::FindPortSlot(uint32_t in_port) const {
  for (uint32_t b = PortHome(in_port, port_map_mask_);;
       b = (b + 1) & port_map_mask_) {
    if (port_map_slot_[b] < 0) return -1;
    if (port_map_port_[b] == in_port) return port_map_slot_[b];
  }
}

int MegaflowClassifier::AddPortSlot(uint32_t in_port) {
  if (n_free_slots_ == 0) return -1;
  const uint16_t slot = free_slots_[--n_free_slots_];
  uint32_t b = PortHome(in_port, port_map_mask_);
  while (port_map_slot_[b] >= 0) b = (b + 1) & port_map_mask_;
  port_map_port_[b] = in_port;
  port_map_slot_[b] = slot;
  port_of_slot_[slot] = in_port;
  port_n_subtables_[slot] = 0;
  ++port_count_;
  return slot;
}

void MegaflowClassifier::RemovePortSlot(uint32_t in_port) {
  uint32_t i = PortHome(in_port, port_map_mask_);
  while (port_map_slot_[i] >= 0 && port_map_port_[i] != in_port)
    i = (i + 1) & port_map_mask_;
  if (port_map_slot_[i] < 0) return;
  free_slots_[n_free_slots_++] = static_cast<uint16_t>(port_map_slot_[i]);
  --port_count_;
  // Backward-shift deletion: pull later members of the cluster into the
  // hole when their home position allows it, so lookups can stop at the
  // first empty cell (no tombstones).
  for (uint32_t j = (i + 1) & port_map_mask_; port_map_slot_[j] >= 0;
       j = (j + 1) & port_map_mask_) {
    const uint32_t home = PortHome(port_map_port_[j], port_map_mask_);
    // Distance from home to j and from home to the hole, cyclically.
    if (((j - home) & port_map_mask_) >= ((j - i) & port_map_mask_)) {
      port_map_port_[i] = port_map_port_[j];
      port_map_slot_[i] = port_map_slot_[j];
      i = j;
    }
  }
  port_map_slot_[i] = -1;
}

// ------------------------------------------------------------ subtables ----

SubtableDesc* MegaflowClassifier::FindSubtable(int port_slot,
                                               const Flow& mask) {
  const uint16_t* ids = &ranked_[size_t(port_slot) * options_.max_subtables];
  for (uint32_t r = 0; r < port_n_subtables_[port_slot]; ++r) {
    SubtableDesc& st = subtables_[ids[r]];
    if (st.mask == mask) return &st;
  }
  return nullptr;
}

SubtableDesc* MegaflowClassifier::CreateSubtable(int port_slot,
                                                 uint32_t in_port,
                                                 const Flow& mask) {
  if (n_free_ids_ == 0) return nullptr;
  const uint16_t id = free_ids_[--n_free_ids_];
  SubtableDesc& st = subtables_[id];
  st = SubtableDesc{};
  st.id = id;
  st.port_slot = static_cast<uint16_t>(port_slot);
  st.in_port = in_port;
  st.map = mask.NonZeroMap();
  st.n_words = 0;
  for (int i = 0; i < kFlowWords; ++i) {
    if (st.map & (1u << i)) {
      st.word_index[st.n_words] = static_cast<uint8_t>(i);
      st.mask_words[st.n_words] = mask.w[i];
      ++st.n_words;
    }
  }
  // Distinct per live subtable so equal masked words of two subtables land
  // in unrelated buckets.
  st.basis = HashFinish(0x6d656761666c6f77ULL + id);
  st.mask = mask;
  internal::ChooseLookup(st, selection_);
  st.live = true;
  uint32_t& n = port_n_subtables_[port_slot];
  st.rank = n;
  ranked_[size_t(port_slot) * options_.max_subtables + n] = id;
  ++n;
  ++subtable_count_;
  return &st;
}

void MegaflowClassifier::DestroySubtable(SubtableDesc* st) {
  const int slot = st->port_slot;
  uint16_t* ids = &ranked_[size_t(slot) * options_.max_subtables];
  uint32_t& n = port_n_subtables_[slot];
  for (uint32_t r = st->rank; r + 1 < n; ++r) {
    ids[r] = ids[r + 1];
    subtables_[ids[r]].rank = r;
  }
  --n;
  st->live = false;
  free_ids_[n_free_ids_++] = st->id;
  --subtable_count_;
  if (n == 0) RemovePortSlot(st->in_port);
}

// ---------------------------------------------------------------- table ----

uint64_t MegaflowClassifier::HashOf(const SubtableDesc& st,
                                    const Flow& value) const {
  uint64_t words[kFlowWords];
  const int n = internal::PackMasked(st, value, words);
  return table_.Hash(words, n, st.basis);
}

bool MegaflowClassifier::TableInsert(uint64_t hash, uint32_t index) {
  struct Node {
    uint32_t bucket;
    int16_t parent;  // node index, -1 for a root
    int8_t slot;     // slot in the parent's bucket whose entry moves here
  };
  Node q[kMaxCuckooNodes];
  int head = 0;
  int tail = 0;
  const uint32_t sig = internal::Table::Sig(hash);
  const uint32_t b1 = table_.Primary(hash);
  const uint32_t b2 = table_.Alt(b1, sig);
  q[tail++] = {b1, -1, -1};
  if (b2 != b1) q[tail++] = {b2, -1, -1};

  while (head < tail) {
    const int cur = head++;
    Bucket& bucket = buckets_[q[cur].bucket];
    int free_slot = -1;
    for (int s = 0; s < kBucketEntries; ++s) {
      if (bucket.index[s] == kInvalidIndex) {
        free_slot = s;
        break;
      }
    }
    if (free_slot >= 0) {
      // Shift entries along the path, deepest first, then fill the root.
      int node = cur;
      int dst_slot = free_slot;
      while (q[node].parent >= 0) {
        const Node& n = q[node];
        Bucket& src = buckets_[q[n.parent].bucket];
        Bucket& dst = buckets_[n.bucket];
        dst.sig[dst_slot] = src.sig[n.slot];
        dst.index[dst_slot] = src.index[n.slot];
        dst_slot = n.slot;
        node = n.parent;
      }
      Bucket& root = buckets_[q[node].bucket];
      root.sig[dst_slot] = sig;
      root.index[dst_slot] = index;
      return true;
    }
    for (int s = 0; s < kBucketEntries && tail < kMaxCuckooNodes; ++s) {
      const uint32_t alt = table_.Alt(q[cur].bucket, bucket.sig[s]);
      // A bucket may appear only once on a path, or a later move would
      // displace an entry the path already relocated.  (With 128 nodes and
      // 8-way buckets paths are at most three buckets long, so today this
      // mostly saves nodes; it keeps moves correct if the bound grows.)
      bool on_path = false;
      for (int a = cur; a >= 0; a = q[a].parent) on_path |= q[a].bucket == alt;
      if (on_path) continue;
      q[tail++] = {alt, static_cast<int16_t>(cur), static_cast<int8_t>(s)};
    }
  }
  return false;
}

bool MegaflowClassifier::TableErase(uint64_t hash, uint32_t index) {
  const uint32_t sig = internal::Table::Sig(hash);
  uint32_t b = table_.Primary(hash);
  for (int probe = 0; probe < 2; ++probe) {
    Bucket& bucket = buckets_[b];
    for (int s = 0; s < kBucketEntries; ++s) {
      if (bucket.index[s] == index && bucket.sig[s] == sig) {
        bucket.index[s] = kInvalidIndex;
        bucket.sig[s] = 0;
        return true;
      }
    }
    b = table_.Alt(b, sig);
  }
  return false;
}

// ------------------------------------------------------- control path ----

uint32_t MegaflowClassifier::PortSubtableCount(uint32_t in_port) const {
  const int slot = FindPortSlot(in_port);
  return slot < 0 ? 0 : port_n_subtables_[slot];
}

Megaflow* MegaflowClassifier::Install(const Flow& value, const Flow& mask,
                                      const Verdict& v, InstallError* why,
                                      uint32_t new_subtable_limit) {
  InstallError ignored;
  InstallError& err = why != nullptr ? *why : ignored;
  err = InstallError::kOther;
  if ((mask.w[kWordMeta] & kInPortMask) != kInPortMask) return nullptr;
  const Flow masked = value & mask;
  const uint32_t in_port = static_cast<uint32_t>(masked.Get(Field::kInPort));

  int slot = FindPortSlot(in_port);
  const bool new_slot = slot < 0;
  if (new_slot) {
    slot = AddPortSlot(in_port);
    if (slot < 0) return nullptr;
  }
  SubtableDesc* st = FindSubtable(slot, mask);
  const bool new_subtable = st == nullptr;
  if (new_subtable) {
    if (port_n_subtables_[slot] >= max_subtables_per_port_) {
      if (new_slot) RemovePortSlot(in_port);
      err = InstallError::kSubtablesPerPort;
      return nullptr;
    }
    if (port_n_subtables_[slot] >= new_subtable_limit) {
      if (new_slot) RemovePortSlot(in_port);
      err = InstallError::kNewSubtableLimit;
      return nullptr;
    }
    st = CreateSubtable(slot, in_port, mask);
    if (st == nullptr) {
      if (new_slot) RemovePortSlot(in_port);
      return nullptr;
    }
  }
  const uint64_t hash = HashOf(*st, masked);

  if (!new_subtable) {
    // Two packets of one burst that missed on the same flow: the second
    // upcall finds the first one's megaflow.
    const uint32_t sig = internal::Table::Sig(hash);
    uint32_t b = table_.Primary(hash);
    for (int probe = 0; probe < 2; ++probe) {
      const Bucket& bucket = buckets_[b];
      for (int s = 0; s < kBucketEntries; ++s) {
        if (bucket.sig[s] != sig || bucket.index[s] == kInvalidIndex) continue;
        Megaflow& other = pool_->Get(bucket.index[s]);
        if (other.subtable == st->id && other.value == masked) {
          err = InstallError::kNone;
          return &other;
        }
      }
      b = table_.Alt(b, sig);
    }
  }

  Megaflow* mf = megaflow_count_ < megaflow_limit_ ? pool_->Alloc() : nullptr;
  if (mf == nullptr) err = InstallError::kMegaflowLimit;
  if (mf == nullptr || !TableInsert(hash, mf->index)) {
    if (mf != nullptr) pool_->Free(mf);
    if (new_subtable) DestroySubtable(st);  // also drops a new port slot
    return nullptr;
  }
  mf->value = masked;
  mf->mask = mask;
  mf->verdict = v;
  mf->hits = 0;
  mf->subtable = st->id;
  ++st->n_megaflows;
  ++megaflow_count_;
  err = InstallError::kNone;
  return mf;
}

void MegaflowClassifier::Remove(Megaflow* mf) {
  if (mf == nullptr || !mf->live) return;
  if (mf->index >= pool_->capacity() || &pool_->Get(mf->index) != mf) return;
  if (mf->subtable >= options_.max_subtables) return;
  SubtableDesc& st = subtables_[mf->subtable];
  if (!st.live || st.mask != mf->mask) return;
  if (!TableErase(HashOf(st, mf->value), mf->index)) return;
  pool_->Free(mf);
  --megaflow_count_;
  if (--st.n_megaflows == 0) DestroySubtable(&st);
}

void MegaflowClassifier::Clear() {
  const uint32_t n_buckets = table_.bucket_mask + 1;
  for (uint32_t b = 0; b < n_buckets; ++b) {
    for (int s = 0; s < kBucketEntries; ++s) {
      if (buckets_[b].index[s] != kInvalidIndex)
        pool_->Free(&pool_->Get(buckets_[b].index[s]));
      buckets_[b].index[s] = kInvalidIndex;
      buckets_[b].sig[s] = 0;
    }
  }
  // Hand out low ids and slots first (stack: highest at the bottom).
  for (uint32_t i = 0; i < options_.max_subtables; ++i) {
    subtables_[i].live = false;
    free_ids_[i] = static_cast<uint16_t>(options_.max_subtables - 1 - i);
  }
  n_free_ids_ = options_.max_subtables;
  for (uint32_t i = 0; i < options_.max_ports; ++i) {
    port_n_subtables_[i] = 0;
    free_slots_[i] = static_cast<uint16_t>(options_.max_ports - 1 - i);
  }
  n_free_slots_ = options_.max_ports;
  for (uint32_t b = 0; b <= port_map_mask_; ++b) port_map_slot_[b] = -1;
  megaflow_count_ = 0;
  subtable_count_ = 0;
  port_count_ = 0;
}

void MegaflowClassifier::Rank() {
  for (uint32_t slot = 0; slot < options_.max_ports; ++slot) {
    const uint32_t n = port_n_subtables_[slot];
    if (n == 0) continue;
    uint16_t* ids = &ranked_[size_t(slot) * options_.max_subtables];
    // Insertion sort: stable, in place, O(n) when the order holds (the
    // common case once traffic settles).
    for (uint32_t r = 1; r < n; ++r) {
      const uint16_t id = ids[r];
      const uint64_t hits = subtables_[id].hits_since_rank;
      uint32_t k = r;
      while (k > 0 && subtables_[ids[k - 1]].hits_since_rank < hits) {
        ids[k] = ids[k - 1];
        --k;
      }
      ids[k] = id;
    }
    for (uint32_t r = 0; r < n; ++r) {
      subtables_[ids[r]].rank = r;
      subtables_[ids[r]].hits_since_rank = 0;
    }
  }
}

absl::Status MegaflowClassifier::SetLookupPriority(std::string_view name,
                                                  int priority) {
  LookupPriorities p = selection_.priorities;
  if (absl::Status s = p.Set(name, priority); !s.ok()) return s;
  SetLookupPriorities(p);
  return absl::OkStatus();
}

void MegaflowClassifier::SetLookupPriorities(const LookupPriorities& p) {
  selection_.priorities = p;
  options_.lookup = p;
  ReprobeSubtables();
}

void MegaflowClassifier::ReprobeSubtables() {
  for (uint32_t id = 0; id < options_.max_subtables; ++id)
    if (subtables_[id].live) internal::ChooseLookup(subtables_[id], selection_);
}

// ------------------------------------------------------------ hot path ----

inline void MegaflowClassifier::CountHits(SubtableDesc& st, uint32_t hits,
                                          Megaflow** out) {
  const int n = std::popcount(hits);
  st.hits_since_rank += n;
  st.hits_total += n;
  for (uint32_t m = hits; m != 0; m &= m - 1) ++out[std::countr_zero(m)]->hits;
}

uint32_t MegaflowClassifier::LookupBurst(uint32_t in_port,
                                         const FlowKey* keys,
                                         uint32_t todo_map, Megaflow** out,
                                         uint64_t* lookups_on_hits) {
  if (todo_map == 0) return 0;
  const int slot = FindPortSlot(in_port);
  if (slot < 0) return 0;
  const uint16_t* ids = &ranked_[size_t(slot) * options_.max_subtables];
  const uint32_t n = port_n_subtables_[slot];
  uint32_t remaining = todo_map;
  uint64_t lookups = 0;
  for (uint32_t r = 0; r < n && remaining != 0; ++r) {
    SubtableDesc& st = subtables_[ids[r]];
    const uint32_t hits =
        st.lookup(st, table_, keys, remaining, out, *pool_);
    if (hits == 0) continue;
    CountHits(st, hits, out);
    lookups += uint64_t{r + 1} * std::popcount(hits);
    remaining &= ~hits;
  }
  if (lookups_on_hits != nullptr) *lookups_on_hits += lookups;
  return todo_map & ~remaining;
}

uint32_t MegaflowClassifier::LookupInSubtable(uint16_t subtable_id,
                                              const FlowKey* keys,
                                              uint32_t todo_map,
                                              Megaflow** out) {
  if (todo_map == 0 || subtable_id >= options_.max_subtables) return 0;
  SubtableDesc& st = subtables_[subtable_id];
  if (!st.live) return 0;
  const uint32_t hits = st.lookup(st, table_, keys, todo_map, out, *pool_);
  if (hits != 0) CountHits(st, hits, out);
  return hits;
}

uint32_t MegaflowClassifier::LookupSuggested(const FlowKey* keys,
                                             uint32_t todo_map,
                                             const uint16_t* sub,
                                             Megaflow** out,
                                             uint64_t* rank_sum) {
  uint64_t masked[kMaxBurst][kFlowWords];
  uint32_t sigs[kMaxBurst];
  uint32_t primary[kMaxBurst];
  uint32_t cand[kMaxBurst];
  MegaflowPool& pool = *pool_;

  // Stage 1: hash each key under its subtable, prefetch both buckets.
  uint32_t todo = 0;
  uint32_t one_by_one = 0;
  for (uint32_t m = todo_map; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    if (sub[i] >= options_.max_subtables) continue;
    const SubtableDesc& st = subtables_[sub[i]];
    if (!st.live) continue;
    if (st.n_validated != 0) {  // the autovalidator checks every probe
      one_by_one |= 1u << i;
      continue;
    }
    const int n = st.n_words;
    for (int j = 0; j < n; ++j)
      masked[i][j] = keys[i].Word(st.word_index[j]) & st.mask_words[j];
    const uint64_t h = table_.Hash(masked[i], n, st.basis);
    sigs[i] = internal::Table::Sig(h);
    primary[i] = table_.Primary(h);
    __builtin_prefetch(&table_.buckets[primary[i]]);
    __builtin_prefetch(&table_.buckets[table_.Alt(primary[i], sigs[i])]);
    todo |= 1u << i;
  }

  // Stage 2: the first live entry under the key's signature, b1 then b2;
  // prefetch the megaflow's value (verify) and its tail (subtable, verdict,
  // hits: what verify and the caller touch).
  for (uint32_t m = todo; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    cand[i] = internal::FirstCandidate(table_, primary[i], sigs[i]);
    if (cand[i] == kInvalidIndex) {
      todo &= ~(1u << i);  // no entry under the signature: a miss
      continue;
    }
    internal::PrefetchMegaflow(pool.Get(cand[i]));
  }

  // Stage 3: verify.  A signature collision (another subtable's entry, or
  // other words) is rare: that key is probed again in full.
  uint32_t hits = 0;
  for (uint32_t m = todo; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    SubtableDesc& st = subtables_[sub[i]];
    Megaflow& mf = pool.Get(cand[i]);
    if (internal::HoldsMasked(st, mf, masked[i], st.n_words)) {
      out[i] = &mf;
      hits |= 1u << i;
    } else {
      one_by_one |= 1u << i;
    }
  }
  for (uint32_t m = one_by_one; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    SubtableDesc& st = subtables_[sub[i]];
    hits |= st.lookup(st, table_, keys, 1u << i, out, pool);
  }

  uint64_t ranks = 0;
  for (uint32_t m = hits; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    SubtableDesc& st = subtables_[sub[i]];
    ++st.hits_since_rank;
    ++st.hits_total;
    ++out[i]->hits;
    ranks += st.rank + 1;
  }
  if (rank_sum != nullptr) *rank_sum += ranks;
  return hits;
}

const Megaflow* MegaflowClassifier::TraceSubtable(uint16_t subtable_id,
                                                  const FlowKey& key) const {
  if (subtable_id >= options_.max_subtables) return nullptr;
  const SubtableDesc& st = subtables_[subtable_id];
  if (!st.live) return nullptr;
  Megaflow* out[kMaxBurst];
  return st.lookup(st, table_, &key, 1, out, *pool_) ? out[0] : nullptr;
}

const Megaflow* MegaflowClassifier::Trace(const FlowKey& key,
                                          std::vector<uint16_t>* visited) const {
  const int slot = FindPortSlot(static_cast<uint32_t>(key.Get(Field::kInPort)));
  if (slot < 0) return nullptr;
  const uint16_t* ids = &ranked_[size_t(slot) * options_.max_subtables];
  for (uint32_t r = 0; r < port_n_subtables_[slot]; ++r) {
    visited->push_back(ids[r]);
    if (const Megaflow* mf = TraceSubtable(ids[r], key)) return mf;
  }
  return nullptr;
}

int MegaflowClassifier::RankOf(uint16_t subtable_id) const {
  if (subtable_id >= options_.max_subtables || !subtables_[subtable_id].live)
    return -1;
  return static_cast<int>(subtables_[subtable_id].rank);
}

// ------------------------------------------------------- introspection ----

absl::Status MegaflowClassifier::CheckInvariants() const {
  std::vector<uint32_t> per_subtable(options_.max_subtables, 0);
  std::vector<bool> seen(pool_->capacity(), false);
  size_t entries = 0;
  const uint32_t n_buckets = table_.bucket_mask + 1;
  for (uint32_t b = 0; b < n_buckets; ++b) {
    for (int s = 0; s < kBucketEntries; ++s) {
      const uint32_t index = buckets_[b].index[s];
      if (index == kInvalidIndex) continue;
      const std::string where = absl::StrFormat("bucket %u slot %d", b, s);
      if (index >= pool_->capacity())
        return absl::InternalError(absl::StrCat(where, ": index out of pool"));
      if (seen[index])
        return absl::InternalError(absl::StrCat(where, ": duplicate index"));
      seen[index] = true;
      const Megaflow& mf = pool_->Get(index);
      if (!mf.live)
        return absl::InternalError(absl::StrCat(where, ": dead megaflow"));
      if (mf.subtable >= options_.max_subtables ||
          !subtables_[mf.subtable].live ||
          subtables_[mf.subtable].mask != mf.mask)
        return absl::InternalError(
            absl::StrCat(where, ": megaflow's subtable is wrong"));
      const uint64_t hash = HashOf(subtables_[mf.subtable], mf.value);
      const uint32_t b1 = table_.Primary(hash);
      const uint32_t sig = internal::Table::Sig(hash);
      if (buckets_[b].sig[s] != sig ||
          (b != b1 && b != table_.Alt(b1, sig)))
        return absl::InternalError(
            absl::StrCat(where, ": entry not under its hash"));
      ++per_subtable[mf.subtable];
      ++entries;
    }
  }
  if (entries != megaflow_count_)
    return absl::InternalError(absl::StrCat(
        "megaflow_count: ", megaflow_count_, " but table holds ", entries));
  size_t live_subtables = 0;
  for (uint32_t id = 0; id < options_.max_subtables; ++id) {
    const SubtableDesc& st = subtables_[id];
    if (!st.live) continue;
    ++live_subtables;
    if (st.n_megaflows == 0 || st.n_megaflows != per_subtable[id])
      return absl::InternalError(absl::StrCat(
          "subtable ", id, ": counts ", st.n_megaflows, " megaflows, table ",
          per_subtable[id]));
    if (FindPortSlot(st.in_port) != st.port_slot)
      return absl::InternalError(absl::StrCat(
          "subtable ", id, ": in_port ", st.in_port, " not mapped to slot ",
          st.port_slot));
    if (st.rank >= port_n_subtables_[st.port_slot] ||
        ranked_[size_t(st.port_slot) * options_.max_subtables + st.rank] != id)
      return absl::InternalError(
          absl::StrCat("subtable ", id, ": rank ", st.rank, " inconsistent"));
  }
  if (live_subtables != subtable_count_)
    return absl::InternalError(absl::StrCat("subtable_count: ",
                                            subtable_count_, " but ",
                                            live_subtables, " live"));
  size_t ranked = 0, ports = 0;
  for (uint32_t slot = 0; slot < options_.max_ports; ++slot) {
    ranked += port_n_subtables_[slot];
    ports += port_n_subtables_[slot] > 0;
  }
  if (ranked != subtable_count_ || ports != port_count_)
    return absl::InternalError(absl::StrCat(
        "ports: ", port_count_, " counted, ", ports, " with subtables; ",
        ranked, " ranked subtables"));
  return absl::OkStatus();
}

std::vector<SubtableInfo> MegaflowClassifier::Subtables() const {
  std::vector<SubtableInfo> result;
  result.reserve(subtable_count_);
  for (uint32_t slot = 0; slot < options_.max_ports; ++slot) {
    const uint16_t* ids = &ranked_[size_t(slot) * options_.max_subtables];
    for (uint32_t r = 0; r < port_n_subtables_[slot]; ++r) {
      const SubtableDesc& st = subtables_[ids[r]];
      SubtableInfo info;
      info.id = st.id;
      info.in_port = st.in_port;
      info.mask = st.mask;
      info.megaflows = st.n_megaflows;
      info.hits = st.hits_total;
      info.rank = static_cast<int>(st.rank);
      info.lookup_fn = st.lookup_name;
      result.push_back(std::move(info));
    }
  }
  return result;
}

std::string MegaflowClassifier::DebugString() const {
  size_t used = 0;
  const uint32_t n_buckets = table_.bucket_mask + 1;
  for (uint32_t b = 0; b < n_buckets; ++b)
    for (int s = 0; s < kBucketEntries; ++s)
      used += buckets_[b].index[s] != kInvalidIndex;
  std::string out = absl::StrFormat(
      "megaflow classifier: %d megaflows, %d subtables, %d ports, table "
      "%d/%d entries (%d buckets)\n",
      megaflow_count_, subtable_count_, port_count_, used, table_capacity(),
      n_buckets);
  absl::StrAppendFormat(&out, "  lookup priorities: %s; autovalidator "
                        "differences: %d\n",
                        selection_.priorities.ToString(), lookup_mismatches_);
  uint32_t last_port = 0;
  bool first = true;
  for (const SubtableInfo& info : Subtables()) {
    if (first || info.in_port != last_port)
      absl::StrAppendFormat(&out, "  in_port %u:\n", info.in_port);
    first = false;
    last_port = info.in_port;
    absl::StrAppendFormat(
        &out, "    rank %d: subtable %d, %d megaflows, %d hits, fn %s, %s\n",
        info.rank, info.id, info.megaflows, info.hits, info.lookup_fn,
        MaskFields(info.mask));
  }
  return out;
}

}  // namespace flowclass
