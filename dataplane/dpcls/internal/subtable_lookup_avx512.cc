// subtable_lookup_avx512.cc — the AVX-512 subtable lookup kernel.
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mbmi2 -mpopcnt
// (dataplane/CMakeLists.txt, files named *_avx512.cc only).  Nothing may
// call into this file unless CpuHasAvx512Lookup() said yes; the registry in
// subtable_lookup.cc is the only caller, through SubtableLookupAvx512.
//
// Why this file touches only plain data: an inline function from a header
// (std::array::operator[], MegaflowPool::Get, std::popcount, Table::Alt, ...)
// that the compiler does not inline here is emitted as a weak COMDAT copy
// compiled with AVX-512 flags, and the linker may keep *that* copy for the
// whole program, which then dies with SIGILL on a CPU without AVX-512.  So
// this file calls no header inline function: it reads struct fields through
// raw pointers, uses compiler builtins, and re-states the two tiny scalar
// formulas it needs (bucket Alt and HashWords); the typed tests prove both
// bit-identical by comparing every lookup with generic.
//
// Algorithm (same contract and stages as SubtableLookupImpl):
//   stage 1a per key: vpexpandq the key's packed words under its map into a
//            dense 8-word vector (word 8, the last one, is scalar), AND with
//            the subtable's dense mask; keep it for verify.
//   stage 1b 8 keys per vector: for each of the subtable's words gather that
//            word of 8 keys and run HashAdd on 8 lanes (vpmullq, vprolq), then
//            HashFinish: exactly HashWords(masked words, n, basis), because
//            entries were inserted with the scalar hash.  Prefetch buckets.
//   stage 2a per key: compare the 8 signatures of a bucket at once (b1, then
//            b2), take the first live candidate and prefetch its megaflow's
//            two hot cache lines, so the burst's megaflow misses overlap.
//   stage 2b per key: verify the candidate by comparing the whole dense
//            masked key with the megaflow's value in one 512-bit compare
//            (both are zero outside the mask, so equal dense flows == equal
//            masked words); a key whose candidate fails (a shared
//            signature) scans both buckets in full, as before.
#include <immintrin.h>

// g++ 12 reports its own `__m512i __Y = __Y;` (_mm512_undefined_epi32, used
// by the unmasked shift intrinsics) as maybe-uninitialized once inlined.
// (clang has no such warning, and would warn about the unknown group.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstddef>
#include <cstdint>

#include "dataplane/dpcls/internal/subtable.h"

namespace flowclass {
namespace internal {
namespace {

static_assert(sizeof(Flow) == kFlowWords * sizeof(uint64_t));
static_assert(offsetof(Megaflow, value) == 0);
static_assert(kFlowWords == 9, "word 8 is handled as the one scalar word");

const uint64_t* WordsOf(const Flow& f) {
  return reinterpret_cast<const uint64_t*>(&f);
}
const uint64_t* WordsOf(const FlowKey& k) {
  return reinterpret_cast<const uint64_t*>(&k.words);
}

// Table::Alt, restated (see the note above).
inline uint32_t AltBucket(uint32_t bucket, uint32_t sig, uint32_t mask) {
  uint32_t x = sig * 0x9e3779b1u;
  x ^= x >> 15;
  return bucket ^ ((x | 1u) & mask);
}

// HashAdd / HashFinish of flow.h on 8 lanes.  All operations are exact
// 64-bit wrap-around arithmetic, so every lane equals the scalar result.
inline __m512i VHashAdd(__m512i h, __m512i w) {
  h = _mm512_xor_si512(
      h, _mm512_mullo_epi64(w, _mm512_set1_epi64(0x9e3779b97f4a7c15LL)));
  h = _mm512_rol_epi64(h, 27);
  // h * 5 + c as (h << 2) + h + c: cheaper than a second vpmullq.
  return _mm512_add_epi64(_mm512_add_epi64(_mm512_slli_epi64(h, 2), h),
                          _mm512_set1_epi64(0x52dce729));
}
inline __m512i VHashFinish(__m512i h) {
  h = _mm512_xor_si512(h, _mm512_srli_epi64(h, 33));
  h = _mm512_mullo_epi64(
      h, _mm512_set1_epi64(static_cast<long long>(0xff51afd7ed558ccdULL)));
  h = _mm512_xor_si512(h, _mm512_srli_epi64(h, 33));
  h = _mm512_mullo_epi64(
      h, _mm512_set1_epi64(static_cast<long long>(0xc4ceb9fe1a85ec53ULL)));
  return _mm512_xor_si512(h, _mm512_srli_epi64(h, 33));
}

}  // namespace

uint32_t SubtableLookupAvx512Kernel(const SubtableDesc& st, const Table& table,
                                    const FlowKey* keys, uint32_t todo_map,
                                    Megaflow** out, Megaflow* slots) {
  if (todo_map == 0) return 0;
  alignas(64) uint64_t dense[kMaxBurst][8];
  alignas(64) uint64_t word8[kMaxBurst];
  alignas(64) uint64_t hashes[kMaxBurst];

  const uint64_t* mask = WordsOf(st.mask);
  const __m512i mask_lo = _mm512_loadu_si512(mask);
  const uint64_t mask8 = mask[8];
  const int n = st.n_words;

  // Stage 1a: dense masked keys.
  for (uint32_t m = todo_map; m != 0; m &= m - 1) {
    const int i = __builtin_ctz(m);
    const FlowKey& key = keys[i];
    const uint64_t* kw = WordsOf(key);
    const unsigned map = key.map;
    const __m512i d = _mm512_and_si512(
        _mm512_maskz_expandloadu_epi64(static_cast<__mmask8>(map), kw),
        mask_lo);
    _mm512_store_si512(dense[i], d);
    // Word 8 is the last packed word when present.
    word8[i] = (map & 0x100u) ? kw[__builtin_popcount(map & 0xffu)] & mask8
                              : 0;
  }

  // Stage 1b: hashes.
  if (table.hash_override == nullptr) [[likely]] {
    const __m512i lane_index = _mm512_setr_epi64(0, 8, 16, 24, 32, 40, 48, 56);
    const __m512i n_vec = _mm512_set1_epi64(n);
    for (int g = 0; g < kMaxBurst / 8; ++g) {
      const __mmask8 lanes = static_cast<__mmask8>(todo_map >> (8 * g));
      if (lanes == 0) continue;
      __m512i h = _mm512_set1_epi64(static_cast<long long>(st.basis));
      for (int j = 0; j < n; ++j) {
        const int w = st.word_index[j];
        const __m512i v =
            w < 8 ? _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), lanes,
                                                lane_index, &dense[8 * g][w], 8)
                  : _mm512_maskz_load_epi64(lanes, &word8[8 * g]);
        h = VHashAdd(h, v);
      }
      h = VHashFinish(_mm512_xor_si512(h, n_vec));
      _mm512_store_si512(&hashes[8 * g], h);
    }
  } else {
    // Tests' injected hashes: pack the masked words and call it per key.
    for (uint32_t m = todo_map; m != 0; m &= m - 1) {
      const int i = __builtin_ctz(m);
      alignas(64) uint64_t packed[16];
      _mm512_mask_compressstoreu_epi64(
          packed, static_cast<__mmask8>(st.map),
          _mm512_load_si512(dense[i]));
      if (st.map & 0x100u) packed[n - 1] = word8[i];
      hashes[i] = table.hash_override(packed, n, st.basis);
    }
  }
  const Bucket* buckets = table.buckets;
  const uint32_t bucket_mask = table.bucket_mask;
  for (uint32_t m = todo_map; m != 0; m &= m - 1) {
    const int i = __builtin_ctz(m);
    const uint64_t h = hashes[i];
    const uint32_t sig = static_cast<uint32_t>(h >> 32);
    const uint32_t b1 = static_cast<uint32_t>(h) & bucket_mask;
    __builtin_prefetch(&buckets[b1]);
    __builtin_prefetch(&buckets[AltBucket(b1, sig, bucket_mask)]);
  }

  // Stage 2a: per key, the first live entry under its signature (b1, then
  // b2); prefetch that megaflow's two hot cache lines.
  const __m256i invalid = _mm256_set1_epi32(-1);
  uint32_t cand[kMaxBurst];
  uint32_t with_cand = 0;
  for (uint32_t m = todo_map; m != 0; m &= m - 1) {
    const int i = __builtin_ctz(m);
    const uint64_t h = hashes[i];
    const uint32_t sig = static_cast<uint32_t>(h >> 32);
    const __m256i vsig = _mm256_set1_epi32(static_cast<int>(sig));
    uint32_t b = static_cast<uint32_t>(h) & bucket_mask;
    for (int probe = 0; probe < 2; ++probe) {
      const Bucket& bucket = buckets[b];
      const unsigned c =
          _mm256_cmpeq_epi32_mask(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(bucket.sig)),
              vsig) &
          _mm256_cmpneq_epi32_mask(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(bucket.index)),
              invalid);
      if (c != 0) {
        cand[i] = bucket.index[__builtin_ctz(c)];
        with_cand |= 1u << i;
        const char* p = reinterpret_cast<const char*>(&slots[cand[i]]);
        __builtin_prefetch(p);
        __builtin_prefetch(p + 64);
        break;
      }
      b = AltBucket(b, sig, bucket_mask);
    }
  }

  // Stage 2b: verify the candidate by comparing the whole dense masked key
  // with the megaflow's value; a key whose first candidate is not its
  // megaflow (a signature shared with another entry) scans both buckets.
  uint32_t hits = 0;
  uint32_t rescan = 0;
  for (uint32_t m = with_cand; m != 0; m &= m - 1) {
    const int i = __builtin_ctz(m);
    const Megaflow& mf = slots[cand[i]];
    const uint64_t* v = WordsOf(mf.value);
    if (mf.subtable == st.id &&
        _mm512_cmpneq_epi64_mask(_mm512_loadu_si512(v),
                                 _mm512_load_si512(dense[i])) == 0 &&
        v[8] == word8[i]) {
      out[i] = &slots[cand[i]];
      hits |= 1u << i;
    } else {
      rescan |= 1u << i;
    }
  }
  for (uint32_t m = rescan; m != 0; m &= m - 1) {
    const int i = __builtin_ctz(m);
    const uint64_t h = hashes[i];
    const uint32_t sig = static_cast<uint32_t>(h >> 32);
    const __m256i vsig = _mm256_set1_epi32(static_cast<int>(sig));
    const __m512i key_lo = _mm512_load_si512(dense[i]);
    uint32_t b = static_cast<uint32_t>(h) & bucket_mask;
    for (int probe = 0; probe < 2; ++probe) {
      const Bucket& bucket = buckets[b];
      const __m256i bsig =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(bucket.sig));
      const __m256i bidx =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(bucket.index));
      unsigned c = _mm256_cmpeq_epi32_mask(bsig, vsig) &
                   _mm256_cmpneq_epi32_mask(bidx, invalid);
      for (; c != 0; c &= c - 1) {
        const int s = __builtin_ctz(c);
        Megaflow& mf = slots[bucket.index[s]];
        if (mf.subtable != st.id) continue;
        const uint64_t* v = WordsOf(mf.value);
        if (_mm512_cmpneq_epi64_mask(_mm512_loadu_si512(v), key_lo) == 0 &&
            v[8] == word8[i]) {
          out[i] = &mf;
          hits |= 1u << i;
          goto next_key;
        }
      }
      b = AltBucket(b, sig, bucket_mask);
    }
  next_key:;
  }
  return hits;
}

}  // namespace internal
}  // namespace flowclass
