#include "dataplane/cache/smc.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_format.h"

namespace flowclass {
namespace {

constexpr uint32_t kMaxSmcEntries = uint32_t{1} << 28;

}  // namespace

absl::Status ValidateSmcConfig(const SmcConfig& config) {
  if (config.entries < kSmcWays || config.entries > kMaxSmcEntries ||
      !std::has_single_bit(config.entries)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "smc entries: must be a power of two in [%d, %u], got %u", kSmcWays,
        kMaxSmcEntries, config.entries));
  }
  return absl::OkStatus();
}

Smc::Smc(const MegaflowPool* pool, SmcConfig cfg)
    : pool_(pool), rng_state_(cfg.seed) {
  const uint32_t n = std::bit_ceil(
      std::clamp(cfg.entries, static_cast<uint32_t>(kSmcWays), kMaxSmcEntries));
  const uint32_t n_buckets = n / kSmcWays;
  bucket_mask_ = n_buckets - 1;
  buckets_ = std::make_unique<SmcBucket[]>(n_buckets);
}

uint64_t Smc::NextRandom() {
  // splitmix64, as in the EMC: cheap and deterministic given the seed.
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint32_t Smc::Find(const FlowKey& key, uint64_t* false_hits) const {
  const SmcBucket& b = buckets_[BucketOf(key.hash)];
  const uint16_t sig = SignatureOf(key.hash);
  for (int w = 0; w < kSmcWays; ++w) {
    if (b.sig[w] != sig) continue;
    const uint32_t idx = b.mf_index[w];
    if (idx == kInvalidIndex) continue;
    if (WayLive(idx) && pool_->Get(idx).Covers(key)) return idx;
    ++*false_hits;
  }
  return kInvalidIndex;
}

uint32_t Smc::LookupBurst(const FlowKey* keys, uint32_t todo_map,
                          uint32_t* mf_index) const {
  // Stage 1: prefetch every bucket of the burst (one line each).
  for (uint32_t m = todo_map; m; m &= m - 1)
    __builtin_prefetch(&buckets_[BucketOf(keys[std::countr_zero(m)].hash)]);
  // Stage 2: signature compare, then verification against the megaflow.
  uint32_t hits = 0;
  uint64_t false_hits = 0;
  for (uint32_t m = todo_map; m; m &= m - 1) {
    const int i = std::countr_zero(m);
    const uint32_t idx = Find(keys[i], &false_hits);
    if (idx != kInvalidIndex) {
      mf_index[i] = idx;
      hits |= uint32_t{1} << i;
    }
  }
  stats_.lookups += static_cast<uint64_t>(std::popcount(todo_map));
  stats_.hits += static_cast<uint64_t>(std::popcount(hits));
  stats_.false_hits += false_hits;
  return hits;
}

uint32_t Smc::Peek(const FlowKey& key) const {
  uint64_t ignored = 0;
  return Find(key, &ignored);
}

uint32_t Smc::Lookup(const FlowKey& key) const {
  uint32_t idx = kInvalidIndex;
  LookupBurst(&key, 1, &idx);
  return idx;
}

void Smc::Insert(const FlowKey& key, uint32_t mf_index) {
  ++stats_.inserts;
  SmcBucket& b = buckets_[BucketOf(key.hash)];
  const uint16_t sig = SignatureOf(key.hash);
  // Same signature: this way would answer this key's lookups anyway, so it
  // is the one to refresh (and a bucket never holds one signature twice).
  for (int w = 0; w < kSmcWays; ++w) {
    if (b.mf_index[w] != kInvalidIndex && b.sig[w] == sig) {
      ++stats_.updates;
      b.mf_index[w] = mf_index;
      return;
    }
  }
  for (int w = 0; w < kSmcWays; ++w) {
    if (!WayLive(b.mf_index[w])) {
      held_ += b.mf_index[w] == kInvalidIndex;
      b.sig[w] = sig;
      b.mf_index[w] = mf_index;
      return;
    }
  }
  ++stats_.evictions;
  const int w = static_cast<int>(NextRandom() >> 62);  // 0..3
  b.sig[w] = sig;
  b.mf_index[w] = mf_index;
}

void Smc::Flush() {
  for (uint32_t i = 0; i <= bucket_mask_; ++i) buckets_[i] = SmcBucket();
  held_ = 0;
}

uint32_t Smc::Occupancy() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i <= bucket_mask_; ++i)
    for (int w = 0; w < kSmcWays; ++w) n += WayLive(buckets_[i].mf_index[w]);
  return n;
}

uint32_t Smc::CountHeld() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i <= bucket_mask_; ++i)
    for (int w = 0; w < kSmcWays; ++w) n += buckets_[i].mf_index[w] != kInvalidIndex;
  return n;
}

std::string Smc::DebugString(int max_buckets) const {
  std::string out = absl::StrFormat(
      "smc: entries=%u buckets=%u occupancy=%u held=%u lookups=%u hits=%u "
      "false_hits=%u inserts=%u updates=%u evictions=%u\n",
      entries(), bucket_mask_ + 1, Occupancy(), held_, stats_.lookups, stats_.hits,
      stats_.false_hits, stats_.inserts, stats_.updates, stats_.evictions);
  int shown = 0;
  for (uint32_t i = 0; i <= bucket_mask_ && shown < max_buckets; ++i) {
    const SmcBucket& b = buckets_[i];
    bool any = false;
    for (int w = 0; w < kSmcWays; ++w) any |= b.mf_index[w] != kInvalidIndex;
    if (!any) continue;
    absl::StrAppendFormat(&out, "  bucket %u:", i);
    for (int w = 0; w < kSmcWays; ++w) {
      if (b.mf_index[w] == kInvalidIndex) {
        out += " -";
      } else {
        absl::StrAppendFormat(&out, " %04x->%u%s", b.sig[w], b.mf_index[w],
                              WayLive(b.mf_index[w]) ? "" : "(dead)");
      }
    }
    out += "\n";
    ++shown;
  }
  return out;
}

}  // namespace flowclass
