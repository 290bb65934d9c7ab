// flow_gen.h — small random-flow helpers shared by the cache and classifier
// tests (header-only).
#ifndef FLOWCLASS_TESTS_COMMON_FLOW_GEN_H_
#define FLOWCLASS_TESTS_COMMON_FLOW_GEN_H_

#include <cstdint>
#include <random>

#include "dataplane/flow/flow.h"

namespace flowclass {

// A flow with every word non-zero: distinct with overwhelming probability.
inline Flow RandomDenseFlow(std::mt19937_64& rng) {
  Flow f;
  for (int i = 0; i < kFlowWords; ++i) f.w[i] = rng() | 1;
  return f;
}

// `k` with its hash forced to `hash` (collision tests).
inline FlowKey WithHash(FlowKey k, uint64_t hash) {
  k.hash = hash;
  return k;
}

// A key near the megaflow (value, mask): `base` where the mask is clear,
// `value` where it is set, and one time in four one masked bit of a word
// other than the metadata word (in_port stays) flipped: a near miss.
inline FlowKey KeyNearMegaflow(Flow base, const Flow& value, const Flow& mask,
                               std::mt19937_64& rng) {
  for (int i = 0; i < kFlowWords; ++i) {
    base.w[i] = (base.w[i] & ~mask.w[i]) | value.w[i];
  }
  if (rng() % 4 == 0) {
    const int w = 1 + static_cast<int>(rng() % (kFlowWords - 1));
    if (mask.w[w] != 0) {
      uint64_t bit;
      do bit = uint64_t{1} << (rng() % 64);
      while (!(mask.w[w] & bit));
      base.w[w] ^= bit;
    }
  }
  return FlowKey::FromFlow(base);
}

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_FLOW_GEN_H_
