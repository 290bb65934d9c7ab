// megaflow_testing.h — helpers shared by the megaflow classifier and subtable
// lookup tests (header-only): test hashes, a brute-force reference over the
// installed megaflows, a base for random megaflow generators, and a lookup
// mismatch hook that fails the running test.
#ifndef FLOWCLASS_TESTS_COMMON_MEGAFLOW_TESTING_H_
#define FLOWCLASS_TESTS_COMMON_MEGAFLOW_TESTING_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"
#include "dataplane/dpcls/subtable_lookup.h"
#include "gtest/gtest.h"
#include "tests/common/flow_gen.h"

namespace flowclass {

// ---- hashes (MegaflowClassifierOptions::hash_override) ----

// Every key in the same two buckets.
inline uint64_t ConstantHash(const uint64_t*, int, uint64_t) { return 42; }

// Identity-like: no mixing and no basis, so equal masked words of two
// subtables collide and only the owner check tells them apart.
inline uint64_t IdentityHash(const uint64_t* words, int n, uint64_t) {
  uint64_t h = 0;
  for (int i = 0; i < n; ++i) h += words[i];
  return h;
}

struct HashCase {
  const char* name;
  uint64_t (*fn)(const uint64_t*, int, uint64_t);  // nullptr: the real hash
};
inline constexpr HashCase kTestHashes[] = {{"good", nullptr},
                                           {"identity", &IdentityHash},
                                           {"constant", &ConstantHash}};
// Test name suffix of a test parameterized by HashCase.
inline std::string HashCaseName(const ::testing::TestParamInfo<HashCase>& info) {
  return info.param.name;
}

// ---- brute-force reference ----

// True when some key matches both megaflows.
inline bool MegaflowsOverlap(const Flow& v1, const Flow& m1, const Flow& v2,
                             const Flow& m2) {
  for (int i = 0; i < kFlowWords; ++i)
    if ((v1.w[i] ^ v2.w[i]) & m1.w[i] & m2.w[i]) return false;
  return true;
}

struct InstalledMegaflow {
  Flow value;
  Flow mask;
  Megaflow* mf;
};

// The megaflow of `installed` that covers `key`, nullptr if none (a linear
// scan); two covering megaflows fail the running test.
inline const Megaflow* CoveringMegaflow(
    const std::vector<InstalledMegaflow>& installed, const FlowKey& key) {
  const Megaflow* found = nullptr;
  for (const InstalledMegaflow& e : installed) {
    if (e.mf->Covers(key)) {
      EXPECT_EQ(found, nullptr) << "reference megaflows overlap";
      found = e.mf;
    }
  }
  return found;
}

// ---- random generators ----

// Base of the random megaflow generators: a seeded std::mt19937_64 and keys
// near a megaflow, built on Derived's `Flow RandomFlow(uint32_t port)`.
template <typename Derived>
class RandomMegaflowGen {
 public:
  explicit RandomMegaflowGen(uint64_t seed) : rng_(seed) {}

  // A key near `value`: a random flow of its in_port with the masked bits of
  // `value`, sometimes one of them flipped (a near miss).
  FlowKey KeyNear(const Flow& value, const Flow& mask) {
    return KeyNearMegaflow(
        static_cast<Derived*>(this)->RandomFlow(
            static_cast<uint32_t>(value.Get(Field::kInPort))),
        value, mask, rng_);
  }

  bool Bit() { return rng_() & 1; }
  std::mt19937_64& rng() { return rng_; }

 protected:
  std::mt19937_64 rng_;
};

// ---- lookup autovalidator ----

// Any difference the autovalidator finds while this hook is installed fails
// the running test.
inline void FailOnLookupMismatch(const LookupMismatch& m) {
  ADD_FAILURE() << "lookup autovalidator: " << m.impl
                << " differs from generic on subtable " << m.subtable << " ("
                << m.n_words << " words), key " << m.key_index;
}
// Installs FailOnLookupMismatch for every test of the binary:
//   const auto* const kEnv =
//       ::testing::AddGlobalTestEnvironment(new FailOnLookupMismatchEnv);
class FailOnLookupMismatchEnv : public ::testing::Environment {
 public:
  void SetUp() override { SetLookupMismatchHook(&FailOnLookupMismatch); }
};

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_MEGAFLOW_TESTING_H_
