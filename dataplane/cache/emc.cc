#include "dataplane/cache/emc.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flowclass {
namespace {

constexpr uint32_t kMaxEmcEntries = uint32_t{1} << 24;
constexpr uint32_t kMaxEmcMoves = 64;

// Insert threshold for "insert with probability 1/N": a uniform 32-bit
// number is <= threshold with probability (threshold+1)/2^32 ~= 1/N.
uint32_t ThresholdFor(uint32_t inv_prob) {
  return inv_prob == 0 ? 0 : UINT32_MAX / inv_prob;
}

}  // namespace

const char* EmcPolicyName(EmcPolicy p) {
  switch (p) {
    case EmcPolicy::kRandomVictim:
      return "random";
    case EmcPolicy::kOlderVictim:
      return "older";
    case EmcPolicy::kCuckoo:
      return "cuckoo";
  }
  return "unknown";
}

absl::Status ValidateEmcConfig(const EmcConfig& config) {
  if (config.entries < 2 || config.entries > kMaxEmcEntries ||
      !std::has_single_bit(config.entries)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "emc entries: must be a power of two in [2, %u], got %u",
        kMaxEmcEntries, config.entries));
  }
  if (config.max_moves > kMaxEmcMoves) {
    return absl::InvalidArgumentError(
        absl::StrFormat("emc max_moves: must be <= %u, got %u", kMaxEmcMoves,
                        config.max_moves));
  }
  switch (config.policy) {
    case EmcPolicy::kRandomVictim:
    case EmcPolicy::kOlderVictim:
    case EmcPolicy::kCuckoo:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "emc policy: unknown value %d", static_cast<int>(config.policy)));
  }
  return absl::OkStatus();
}

Emc::Emc(const MegaflowPool* pool, EmcConfig cfg)
    : pool_(pool),
      policy_(cfg.policy),
      max_moves_(std::min(cfg.max_moves, kMaxEmcMoves)),
      rng_state_(cfg.seed) {
  const uint32_t n =
      std::bit_ceil(std::clamp(cfg.entries, uint32_t{2}, kMaxEmcEntries));
  mask_ = n - 1;
  shift_ = std::countr_zero(n);
  table_ = std::make_unique<EmcEntry[]>(n);
  overflow_ = std::make_unique<EmcOverflow[]>(n);
  set_insert_inv_prob(cfg.insert_inv_prob);
}

uint64_t Emc::NextRandom() {
  // splitmix64: one add and two multiplies; plenty for victim choice and
  // insertion sampling, and deterministic given the seed.
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool Emc::Matches(uint32_t slot,
                                                    const FlowKey& key) const {
  const EmcEntry& e = table_[slot];
  // Branch-free over the inline words: past n_words both the entry (Store)
  // and the key (FlowKey's invariant) hold zeros, and equal maps mean equal
  // n_words, so comparing all five is the same as comparing n_words of them.
#if defined(__SSE2__)
  // Bytes 0..10 (hash, map, n_words) and 16..55 (the words) of the entry
  // and the key, which share that layout (see EmcEntry), 16 at a time.
  const auto* ep = reinterpret_cast<const __m128i*>(&e);
  const auto* kp = reinterpret_cast<const __m128i*>(&key);
  const __m128i eq0 = _mm_cmpeq_epi8(_mm_load_si128(ep), _mm_loadu_si128(kp));
  const __m128i eq1 = _mm_cmpeq_epi8(_mm_load_si128(ep + 1), _mm_loadu_si128(kp + 1));
  const __m128i eq2 = _mm_cmpeq_epi8(_mm_load_si128(ep + 2), _mm_loadu_si128(kp + 2));
  const __m128i eq3 = _mm_cmpeq_epi8(_mm_loadl_epi64(ep + 3), _mm_loadl_epi64(kp + 3));
  const unsigned head = static_cast<unsigned>(_mm_movemask_epi8(eq0)) & 0x07ffu;
  const unsigned words = static_cast<unsigned>(
      _mm_movemask_epi8(_mm_and_si128(_mm_and_si128(eq1, eq2), eq3)));
  // eq3's upper 8 bytes compare zeros with zeros (loadl), so all 16 bits
  // are set when the words match.
  if (head != 0x07ffu || words != 0xffffu) return false;
#else
  uint64_t diff = (e.hash ^ key.hash) | (e.map ^ key.map);
#pragma GCC unroll 8
  for (int i = 0; i < kEmcInlineWords; ++i) diff |= e.words[i] ^ key.words[i];
  if (diff != 0) return false;
#endif
  for (int i = kEmcInlineWords; i < key.n_words; ++i)
    if (overflow_[slot].words[i - kEmcInlineWords] != key.words[i]) return false;
  return true;
}

template <typename Found>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t Emc::LookupBurstOf(const FlowKey* keys,
                                                              uint32_t todo_map,
                                                              bool first_slots_prefetched,
                                                              Found found) const {
  // Stage 1: prefetch the first candidate slot of every key (and the
  // overflow record of a long key), so the misses of the whole burst overlap
  // instead of being paid one by one.  Insert prefers a free first slot, so
  // most keys that are cached at all are there: fetching the second slot up
  // front would double the memory traffic (and stall on fill buffers) for
  // nothing.
  for (uint32_t m = first_slots_prefetched ? 0 : todo_map; m; m &= m - 1) {
    const FlowKey& key = keys[std::countr_zero(m)];
    const uint32_t s0 = SlotsOf(key.hash).s0;
    __builtin_prefetch(&table_[s0]);
    if (key.n_words > kEmcInlineWords) __builtin_prefetch(&overflow_[s0]);
  }
  // Stage 2: compare the first slots (hash first, then the key words) and
  // check liveness; prefetch the second slot of each key that missed.
  uint32_t hits = 0;
  uint32_t second = 0;
  for (uint32_t m = todo_map; m; m &= m - 1) {
    const int i = std::countr_zero(m);
    const uint32_t s0 = SlotsOf(keys[i].hash).s0;  // s1 only on a miss
    const Megaflow* mf;
    if (Matches(s0, keys[i]) && (mf = LiveMegaflow(table_[s0])) != nullptr) {
      found(i, table_[s0].mf_index, mf);
      hits |= uint32_t{1} << i;
    } else {
      const uint32_t s1 = SlotsOf(keys[i].hash).s1;
      second |= uint32_t{1} << i;
      __builtin_prefetch(&table_[s1]);
      if (keys[i].n_words > kEmcInlineWords) __builtin_prefetch(&overflow_[s1]);
    }
  }
  // Stage 3: the second slots.
  for (uint32_t m = second; m; m &= m - 1) {
    const int i = std::countr_zero(m);
    const uint32_t s1 = SlotsOf(keys[i].hash).s1;
    const Megaflow* mf;
    if (Matches(s1, keys[i]) && (mf = LiveMegaflow(table_[s1])) != nullptr) {
      found(i, table_[s1].mf_index, mf);
      hits |= uint32_t{1} << i;
    }
  }
  return hits;
}

uint32_t Emc::LookupBurst(const FlowKey* keys, uint32_t todo_map, uint32_t* mf_index,
                          bool first_slots_prefetched) const {
  return LookupBurstOf(keys, todo_map, first_slots_prefetched,
                       [mf_index](int i, uint32_t index, const Megaflow*) { mf_index[i] = index; });
}

uint32_t Emc::LookupBurst(const FlowKey* keys, uint32_t todo_map, const Megaflow** mf,
                          bool first_slots_prefetched) const {
  return LookupBurstOf(keys, todo_map, first_slots_prefetched,
                       [mf](int i, uint32_t, const Megaflow* m) { mf[i] = m; });
}

uint32_t Emc::Lookup(const FlowKey& key) const {
  uint32_t idx = kInvalidIndex;
  LookupBurst(&key, 1, &idx);
  return idx;
}

void Emc::Store(uint32_t slot, const FlowKey& key, uint32_t mf_index) {
  EmcEntry& e = table_[slot];
  e.hash = key.hash;
  e.map = key.map;
  e.n_words = key.n_words;
  e.stamp = ++stamp_;
  e.mf_index = mf_index;
  e.mf_version = pool_->Get(mf_index).version;
  for (int i = 0; i < kEmcInlineWords; ++i)
    e.words[i] = i < key.n_words ? key.words[i] : 0;
  for (int i = kEmcInlineWords; i < key.n_words; ++i)
    overflow_[slot].words[i - kEmcInlineWords] = key.words[i];
}

void Emc::Move(uint32_t to, uint32_t from) {
  table_[to] = table_[from];
  if (table_[from].n_words > kEmcInlineWords) overflow_[to] = overflow_[from];
}

void Emc::Insert(const FlowKey& key, uint32_t mf_index) {
  ++stats_.inserts;
  const Slots s = SlotsOf(key.hash);
  // Same key already cached (live or not): refresh it in place, so a key
  // never occupies both of its slots.
  for (uint32_t slot : {s.s0, s.s1}) {
    if (Matches(slot, key)) {
      ++stats_.updates;
      Store(slot, key, mf_index);
      return;
    }
  }
  // A free or dead candidate is always preferred over evicting a live entry.
  for (uint32_t slot : {s.s0, s.s1}) {
    if (IsDead(table_[slot])) {
      Store(slot, key, mf_index);
      return;
    }
  }
  switch (policy_) {
    case EmcPolicy::kRandomVictim: {
      ++stats_.evictions;
      Store((NextRandom() >> 63) ? s.s1 : s.s0, key, mf_index);
      return;
    }
    case EmcPolicy::kOlderVictim: {
      ++stats_.evictions;
      // Wrap-safe "s0 inserted before s1".
      const bool s0_older =
          static_cast<int32_t>(table_[s.s0].stamp - table_[s.s1].stamp) < 0;
      Store(s0_older ? s.s0 : s.s1, key, mf_index);
      return;
    }
    case EmcPolicy::kCuckoo: {
      // Try both chains (random order), then fall back to a random victim:
      // the new key always gets in, older entries move only if they land.
      const bool first = NextRandom() >> 63;
      const uint32_t a = first ? s.s1 : s.s0;
      const uint32_t b = first ? s.s0 : s.s1;
      if (CuckooPlace(key, mf_index, a) || CuckooPlace(key, mf_index, b))
        return;
      ++stats_.evictions;
      Store(a, key, mf_index);
      return;
    }
  }
}

bool Emc::CuckooPlace(const FlowKey& key, uint32_t mf_index, uint32_t start) {
  // Every entry has exactly one other home, so from `start` there is a
  // single chain: start -> other slot of the entry in start -> ...  Follow
  // it (read only) until a free/dead slot, a repeat, or max_moves_ steps.
  uint32_t path[kMaxEmcMoves + 1];
  int len = 0;
  path[len++] = start;
  for (uint32_t step = 0; step < max_moves_; ++step) {
    const uint32_t cur = path[len - 1];
    const Slots s = SlotsOf(table_[cur].hash);
    const uint32_t alt = cur == s.s0 ? s.s1 : s.s0;
    for (int j = 0; j < len; ++j)
      if (path[j] == alt) return false;  // a cycle: no room down this chain
    path[len++] = alt;
    if (IsDead(table_[alt])) {
      // Shift every entry one step along the chain (each lands in its other
      // slot), last first, then put the new key at the start.
      for (int j = len - 1; j > 0; --j) Move(path[j], path[j - 1]);
      stats_.moves += static_cast<uint64_t>(len - 1);
      Store(start, key, mf_index);
      return true;
    }
  }
  return false;
}

void Emc::MaybeInsert(const FlowKey& key, uint32_t mf_index, uint32_t boost) {
  if (insert_inv_prob_ == 0 ||
      (NextRandom() >> 32) > uint64_t{insert_threshold_} * boost + (boost - 1)) {
    ++stats_.skipped;
    return;
  }
  Insert(key, mf_index);
}

void Emc::SweepSome(int n) {
  if (pool_->frees() != sweep_frees_seen_) {  // something may have died
    sweep_frees_seen_ = pool_->frees();
    sweep_left_ = mask_ + 1;
  }
  if (n > static_cast<int>(sweep_left_)) n = static_cast<int>(sweep_left_);
  sweep_left_ -= static_cast<uint32_t>(n);
  for (int i = 0; i < n; ++i) {
    const EmcEntry& e = table_[sweep_pos_];
    if (e.mf_index != kInvalidIndex && IsDead(e)) {
      Clear(sweep_pos_);
      ++stats_.swept;
    }
    sweep_pos_ = (sweep_pos_ + 1) & mask_;
  }
}

void Emc::set_insert_inv_prob(uint32_t inv_prob) {
  insert_inv_prob_ = inv_prob;
  insert_threshold_ = ThresholdFor(inv_prob);
}

void Emc::Flush() {
  for (uint32_t i = 0; i <= mask_; ++i) Clear(i);
}

uint32_t Emc::Occupancy() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i <= mask_; ++i) n += !IsDead(table_[i]);
  return n;
}

std::string Emc::DebugString(int max_entries) const {
  std::string out = absl::StrFormat(
      "emc: entries=%u occupancy=%u insert_inv_prob=%u policy=%s "
      "inserts=%u updates=%u evictions=%u moves=%u skipped=%u swept=%u\n",
      entries(), Occupancy(), insert_inv_prob_, EmcPolicyName(policy_),
      stats_.inserts, stats_.updates, stats_.evictions, stats_.moves,
      stats_.skipped, stats_.swept);
  int shown = 0;
  for (uint32_t i = 0; i <= mask_ && shown < max_entries; ++i) {
    const EmcEntry& e = table_[i];
    if (e.mf_index == kInvalidIndex) continue;
    // Raw words, not Flow::ToString(): this dump must work on any key and
    // depends on nothing but the layout in flow.h.
    absl::StrAppendFormat(&out, "  [%u] mf=%u v%u %s hash=%016x map=%03x", i,
                          e.mf_index, e.mf_version,
                          IsDead(e) ? "dead" : "live", e.hash, e.map);
    for (int w = 0; w < e.n_words; ++w)
      absl::StrAppendFormat(&out, " %016x",
                            w < kEmcInlineWords
                                ? e.words[w]
                                : overflow_[i].words[w - kEmcInlineWords]);
    out += "\n";
    ++shown;
  }
  return out;
}

}  // namespace flowclass
