// internal/subtable.h — private parts of the megaflow classifier (dpcls):
// the shared hash table, the subtable descriptor and the per-subtable lookup
// functions.  Only dataplane/megaflow_classifier.*, the lookup registry
// (subtable_lookup.cc) and the variants (internal/subtable.cc: generic and
// shape-specialised; internal/subtable_lookup_avx512.cc) include this.
// Which variant a subtable uses is decided by ChooseLookup (see
// subtable_lookup.h "Selection").
//
// Contract
// --------
// * A lookup function is pure with respect to the classifier: it reads the
//   descriptor, the table, the keys and the pool, and writes only `out[i]` for
//   the bits it returns.  It does not count hits (the caller does), so the
//   autovalidator can run two variants over the same burst and compare.
// * Every variant must return exactly what `SubtableLookupGeneric` returns for
//   the same inputs: the set of keys i in `todo_map` for which a megaflow of
//   subtable `st` covers keys[i], and that megaflow in out[i].
// * Per-packet code: no allocation, no locks, no logging, no exceptions.
//   Scratch space lives on the stack (at most ~2.5 KiB per call).
//
// Memory layout
// -------------
// One table serves every subtable of every in_port.  Each entry names one
// megaflow; the subtable it belongs to is recorded in the megaflow itself
// (Megaflow::subtable), which the verify step reads anyway (next to verdict
// and hits, which the caller touches on every hit).
//
//   Bucket (one 64-byte cache line, alignas(64))
//   +-------------------------------+-------------------------------+
//   | sig[0..7]   uint32 x 8        | index[0..7] uint32 x 8        |
//   +-------------------------------+-------------------------------+
//   index == kInvalidIndex: the slot is empty (sig is then meaningless).
//
//   h   = Hash(masked key words of the subtable, n_words, subtable basis)
//   sig = h >> 32                     (stored, filters before touching a megaflow)
//   b1  = h & bucket_mask             (primary bucket)
//   b2  = b1 ^ AltOffset(sig)         (alternative bucket; AltOffset is odd,
//                                      so b2 != b1 whenever there are >= 2
//                                      buckets, and Alt(Alt(b)) == b, which lets
//                                      a cuckoo move compute an entry's other
//                                      bucket from its stored signature alone)
//
// A key's megaflow is in b1 or b2, so a lookup reads exactly two cache lines
// of table (both prefetched in stage 1) plus the candidate megaflow.  With a
// constant hash every entry shares b1/b2, so the table holds 16 entries and
// the 17th insert fails cleanly: the bounded probe sequence is full.
#ifndef FLOWCLASS_DATAPLANE_DPCLS_INTERNAL_SUBTABLE_H_
#define FLOWCLASS_DATAPLANE_DPCLS_INTERNAL_SUBTABLE_H_

#include <bit>
#include <cstdint>

#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"
#include "dataplane/dpcls/subtable_lookup.h"

namespace flowclass {
namespace internal {

inline constexpr int kBucketEntries = 8;

struct alignas(64) Bucket {
  uint32_t sig[kBucketEntries];
  uint32_t index[kBucketEntries];
};
static_assert(sizeof(Bucket) == 64, "a bucket must be one cache line");

using HashFn = uint64_t (*)(const uint64_t* words, int n, uint64_t basis);

// Non-owning view of the shared table handed to lookup functions.
struct Table {
  Bucket* buckets = nullptr;
  uint32_t bucket_mask = 0;        // n_buckets - 1, n_buckets a power of two
  HashFn hash_override = nullptr;  // tests only; nullptr = HashWords

  uint64_t Hash(const uint64_t* words, int n, uint64_t basis) const {
    // A predictable branch rather than always calling through a pointer, so
    // the production hash inlines into the lookup loop.
    if (hash_override != nullptr) [[unlikely]]
      return hash_override(words, n, basis);
    return HashWords(words, n, basis);
  }
  static uint32_t Sig(uint64_t h) { return static_cast<uint32_t>(h >> 32); }
  uint32_t Primary(uint64_t h) const {
    return static_cast<uint32_t>(h) & bucket_mask;
  }
  uint32_t Alt(uint32_t bucket, uint32_t sig) const {
    uint32_t x = sig * 0x9e3779b1u;
    x ^= x >> 15;
    return bucket ^ ((x | 1u) & bucket_mask);
  }
};

struct SubtableDesc;

// At most this many implementations beside generic are run by the
// autovalidator on one subtable (specialised, avx512, one injected by tests).
inline constexpr int kMaxValidated = 4;

// Probe one subtable for every key in `todo_map` (bit i = keys[i]); returns
// the hit mask and sets out[i] for each hit.  See the contract above.
using SubtableLookupFn = uint32_t (*)(const SubtableDesc& st,
                                      const Table& table, const FlowKey* keys,
                                      uint32_t todo_map, Megaflow** out,
                                      MegaflowPool& pool);

// One subtable: all megaflows of one in_port with one mask.  Lives in a fixed
// array indexed by id; `live` says whether the slot is in use.
struct SubtableDesc {
  uint16_t id = 0;
  uint16_t port_slot = 0;
  uint32_t in_port = 0;
  FlowMap map = 0;      // words where the mask is non-zero
  uint8_t n_words = 0;  // popcount(map)
  bool live = false;
  uint8_t word_index[kFlowWords] = {};    // j-th packed word is flow word ...
  uint64_t mask_words[kFlowWords] = {};   // packed mask words (first n_words)
  uint64_t basis = 0;                     // hash basis, distinct per id
  SubtableLookupFn lookup = nullptr;
  const char* lookup_name = "";
  // Autovalidator only: the implementations it checks against generic, and
  // the owner's difference counter (written only when a difference is found).
  uint8_t n_validated = 0;
  SubtableLookupFn validated[kMaxValidated] = {};
  const char* validated_name[kMaxValidated] = {};
  uint64_t* mismatches = nullptr;
  uint32_t n_megaflows = 0;
  uint32_t rank = 0;            // position in its port's ranked list
  uint64_t hits_since_rank = 0;
  uint64_t hits_total = 0;
  Flow mask;                    // dense mask (control path: find, introspect)
};

// Packs the words of a dense flow that the subtable's map selects, masked.
inline int PackMasked(const SubtableDesc& st, const Flow& f, uint64_t* out) {
  for (int j = 0; j < st.n_words; ++j)
    out[j] = f.w[st.word_index[j]] & st.mask_words[j];
  return st.n_words;
}

// The first live entry under `sig` in the key's two buckets (primary, then
// its alternative), or kInvalidIndex.  Stage 2a of the staged lookups.
[[gnu::always_inline]] inline uint32_t FirstCandidate(const Table& table,
                                                      uint32_t primary,
                                                      uint32_t sig) {
  uint32_t b = primary;
  for (int probe = 0; probe < 2; ++probe) {
    const Bucket& bucket = table.buckets[b];
    for (int s = 0; s < kBucketEntries; ++s)
      if (bucket.sig[s] == sig && bucket.index[s] != kInvalidIndex)
        return bucket.index[s];
    b = table.Alt(b, sig);
  }
  return kInvalidIndex;
}

// Prefetches the two cache lines of a megaflow a lookup and a hit touch
// (Megaflow's layout, megaflow.h).
inline void PrefetchMegaflow(const Megaflow& mf) {
  const char* p = reinterpret_cast<const char*>(&mf);
  __builtin_prefetch(p);
  __builtin_prefetch(p + 64);
}

// Whether `mf` is subtable `st`'s megaflow for a key whose masked packed
// words are masked[0..n).
[[gnu::always_inline]] inline bool HoldsMasked(const SubtableDesc& st,
                                               const Megaflow& mf,
                                               const uint64_t* masked, int n) {
  bool equal = mf.subtable == st.id;
  for (int j = 0; j < n; ++j)
    equal &= mf.value.w[st.word_index[j]] == masked[j];
  return equal;
}

// The scalar reference lookup, staged like OVS dpcls / VPP bihash:
//   stage 1  for every key: extract + mask the subtable's words, hash,
//            prefetch both candidate buckets;
//   stage 2a for every key: the first live entry under its signature (b1,
//            then b2); prefetch that megaflow's two hot cache lines;
//   stage 2b for every key with a candidate: verify it (owner subtable +
//            masked words); on a mismatch (a shared signature) scan b1 and
//            b2 in full for that key.
// kWords == 0 means "n_words from the descriptor at run time".  A positive
// kWords lets the compiler unroll extraction, hashing and compare for one
// subtable shape; ALWAYS_INLINE so each instantiation is its own copy (the
// way OVS specialises lookup_impl per miniflow shape).
template <int kWords>
[[gnu::always_inline]] inline uint32_t SubtableLookupImpl(
    const SubtableDesc& st, const Table& table, const FlowKey* keys,
    uint32_t todo_map, Megaflow** out, MegaflowPool& pool) {
  static_assert(kWords >= 0 && kWords <= kFlowWords, "bad word count");
  constexpr int kStride = kWords > 0 ? kWords : kFlowWords;
  const int n = kWords > 0 ? kWords : st.n_words;

  uint64_t masked[kMaxBurst][kStride];
  uint32_t sigs[kMaxBurst];
  uint32_t primary[kMaxBurst];

  // Stage 1: hash and prefetch.
  for (uint32_t m = todo_map; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    const FlowKey& key = keys[i];
    for (int j = 0; j < n; ++j)
      masked[i][j] = key.Word(st.word_index[j]) & st.mask_words[j];
    const uint64_t h = table.Hash(masked[i], n, st.basis);
    sigs[i] = Table::Sig(h);
    primary[i] = table.Primary(h);
    __builtin_prefetch(&table.buckets[primary[i]]);
    __builtin_prefetch(&table.buckets[table.Alt(primary[i], sigs[i])]);
  }

  // Stage 2a: the first live entry under the key's signature (b1, then
  // b2); prefetch that megaflow's two hot cache lines.
  uint32_t cand[kMaxBurst];
  uint32_t with_cand = 0;
  for (uint32_t m = todo_map; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    cand[i] = FirstCandidate(table, primary[i], sigs[i]);
    if (cand[i] == kInvalidIndex) continue;
    with_cand |= 1u << i;
    PrefetchMegaflow(pool.Get(cand[i]));
  }

  // Stage 2b: verify the candidate (owner subtable + masked words); a key
  // whose first candidate is not its megaflow (a shared signature) scans
  // both buckets in full.
  uint32_t hits = 0;
  uint32_t rescan = 0;
  for (uint32_t m = with_cand; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    Megaflow& mf = pool.Get(cand[i]);
    if (HoldsMasked(st, mf, masked[i], n)) {
      out[i] = &mf;
      hits |= 1u << i;
    } else {
      rescan |= 1u << i;
    }
  }
  for (uint32_t m = rescan; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    uint32_t b = primary[i];
    for (int probe = 0; probe < 2; ++probe) {
      const Bucket& bucket = table.buckets[b];
      for (int s = 0; s < kBucketEntries; ++s) {
        if (bucket.sig[s] != sigs[i] || bucket.index[s] == kInvalidIndex)
          continue;
        Megaflow& mf = pool.Get(bucket.index[s]);
        if (HoldsMasked(st, mf, masked[i], n)) {
          out[i] = &mf;
          hits |= 1u << i;
          goto next_key;
        }
      }
      b = table.Alt(b, sigs[i]);
    }
  next_key:;
  }
  return hits;
}

// The generic (any shape) scalar lookup: the reference every variant is
// validated against.
uint32_t SubtableLookupGeneric(const SubtableDesc& st, const Table& table,
                               const FlowKey* keys, uint32_t todo_map,
                               Megaflow** out, MegaflowPool& pool);

// The shape-specialised scalar lookup for `n_words` (1..kFlowWords), or
// nullptr when there is none.
SubtableLookupFn SpecialisedLookupFor(int n_words);

// AVX-512 lookup (internal/subtable_lookup_avx512.cc).  Call only when
// CpuHasAvx512Lookup(): the file is compiled with AVX-512 flags.  This entry
// point lives in the scalar library so the AVX-512 file sees only plain data
// (see the note at the top of that file).
uint32_t SubtableLookupAvx512(const SubtableDesc& st, const Table& table,
                              const FlowKey* keys, uint32_t todo_map,
                              Megaflow** out, MegaflowPool& pool);
// The kernel behind it: slots is &pool.Get(0) (nullptr for an empty pool).
uint32_t SubtableLookupAvx512Kernel(const SubtableDesc& st, const Table& table,
                                    const FlowKey* keys, uint32_t todo_map,
                                    Megaflow** out, Megaflow* slots);

// Runs generic (its result is returned and written to out) and every
// function in st.validated on the same burst; counts a difference in
// *st.mismatches and LookupMismatchesTotal() and reports it (rate-limited
// stderr log, mismatch hook).
uint32_t SubtableLookupAutovalidator(const SubtableDesc& st, const Table& table,
                                     const FlowKey* keys, uint32_t todo_map,
                                     Megaflow** out, MegaflowPool& pool);

// What a classifier passes to ChooseLookup.
struct LookupSelection {
  LookupPriorities priorities;
  // Tests only: one more implementation the autovalidator checks (a
  // deliberately wrong one proves differences are caught).
  SubtableLookupFn extra_validated = nullptr;
  const char* extra_validated_name = "test";
  // The classifier's difference counter, stored in each descriptor.
  uint64_t* mismatches = nullptr;
};

struct LookupImplInfo {
  const char* name;
  SubtableLookupFn fn;
};

// Picks the lookup function for st's shape under `sel` (see
// subtable_lookup.h "Selection") and sets st.lookup, st.lookup_name and,
// for the autovalidator, st.validated*/st.mismatches.  Control path
// (subtable creation, priority change); allocation-free.
LookupImplInfo ChooseLookup(SubtableDesc& st, const LookupSelection& sel);

}  // namespace internal
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPCLS_INTERNAL_SUBTABLE_H_
