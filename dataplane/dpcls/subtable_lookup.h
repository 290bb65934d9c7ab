// subtable_lookup.h — the registry of megaflow-subtable lookup functions:
// which implementations exist, their priorities, the run-time ISA probe, and
// the autovalidator's difference counter.
//
// Contract
// --------
// * Implementations (see internal/subtable.h for the function interface):
//     generic        scalar reference, any shape; always available
//     specialised    scalar, one compile-time copy per word count 1..9
//                    (SubtableLookupImpl<N>); our 9-word flow layout has
//                    only 9 shapes by word count, so every subtable has one
//     avx512         AVX-512 F/BW/VL/DQ + BMI2 + POPCNT: expand-load of the
//                    key under its map, 8 keys hashed per vector (bit-exact
//                    HashWords), vector signature scan and verify
//     autovalidator  runs generic (whose answer it returns) and every other
//                    implementation eligible for the subtable on each burst;
//                    counts, logs (rate-limited, stderr) and reports any
//                    difference through the mismatch hook
// * Selection, done when a subtable is created and again for every existing
//   subtable when priorities change (MegaflowClassifier::SetLookupPriority):
//   among implementations with priority > 0 whose probe accepts the shape and
//   whose ISA the CPU has (cpuid at run time, never assumed from compile
//   flags), the highest priority wins; ties go to the one listed first
//   (generic, specialised, avx512, autovalidator).  generic is the fallback
//   whatever its priority.  `force_scalar` excludes every implementation that
//   needs an ISA extension, also from the autovalidator's set.
// * Threads: LookupPriorities is a plain value (per classifier).  The global
//   mismatch counter is an atomic, readable from any thread.  The mismatch
//   hook must be set before PMD threads run (tests: in SetUp).
// * Hot path: nothing here is per packet except the autovalidator, which
//   allocates nothing and does I/O only when it finds a difference (a bug).
#ifndef FLOWCLASS_DATAPLANE_DPCLS_SUBTABLE_LOOKUP_H_
#define FLOWCLASS_DATAPLANE_DPCLS_SUBTABLE_LOOKUP_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace flowclass {

enum class LookupImplId : uint8_t {
  kGeneric = 0,
  kSpecialised = 1,
  kAvx512 = 2,
  kAutovalidator = 3,
};
inline constexpr int kLookupImplCount = 4;
inline constexpr int kMaxLookupPriority = 255;

// "generic", "specialised", "avx512", "autovalidator".
const char* LookupImplName(LookupImplId id);
// INVALID_ARGUMENT naming the accepted names.
absl::StatusOr<LookupImplId> ParseLookupImpl(std::string_view name);

// Per-classifier selection policy (MegaflowClassifierOptions::lookup).
struct LookupPriorities {
  // Indexed by LookupImplId.  Defaults: avx512 > specialised > generic;
  // autovalidator off (0 = never chosen).
  std::array<int, kLookupImplCount> priority = {1, 2, 3, 0};
  // Config switch: scalar implementations only, everywhere.
  bool force_scalar = false;

  int Get(LookupImplId id) const { return priority[static_cast<int>(id)]; }
  // INVALID_ARGUMENT for an unknown name or a priority outside [0, 255].
  absl::Status Set(std::string_view name, int prio);
  absl::StatusOr<int> Get(std::string_view name) const;

  // What `flowclassctl replay --lookup NAME` means: NAME first, generic as
  // the fallback for shapes NAME's probe rejects, nothing else.
  static absl::StatusOr<LookupPriorities> Only(std::string_view name);

  // "generic=1 specialised=2 avx512=3 autovalidator=0[ force_scalar]".
  std::string ToString() const;
  friend bool operator==(const LookupPriorities&,
                         const LookupPriorities&) = default;
};

// The CPU (and OS) support every extension the avx512 implementation's file
// is compiled with: avx512f, avx512bw, avx512vl, avx512dq, bmi2, popcnt.
bool CpuHasAvx512Lookup();

// Whether implementation `id` can run on this CPU at all (ISA present).
bool LookupImplAvailable(LookupImplId id);

// Introspection of the registry under a priority set (control path).
struct LookupImplStatus {
  std::string name;
  int priority = 0;
  std::string isa;         // "" for scalar
  bool available = false;  // ISA present and not excluded by force_scalar
};
std::vector<LookupImplStatus> ListLookupImpls(const LookupPriorities& p);

// ---------------------------------------------------------- autovalidator --

// One difference found by the autovalidator (control-path reporting only).
struct LookupMismatch {
  const char* impl = "";    // the implementation that disagreed
  uint16_t subtable = 0;    // subtable id
  int n_words = 0;          // its shape
  uint32_t todo_map = 0;
  uint32_t generic_hits = 0;
  uint32_t impl_hits = 0;
  int key_index = -1;       // first key that differs
};

// Differences found by every autovalidator in the process since start.
uint64_t LookupMismatchesTotal();

// Called (on the PMD thread) for every difference, after counting it.
// Returns the previous hook.  nullptr: count and log only.
using LookupMismatchHook = void (*)(const LookupMismatch&);
LookupMismatchHook SetLookupMismatchHook(LookupMismatchHook hook);

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPCLS_SUBTABLE_LOOKUP_H_
