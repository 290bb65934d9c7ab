// acl_algorithm.h — which rte_acl classify implementation the acl pipeline
// runs: `pipeline.acl_algorithm` (config file, SetConfig, `flowclassctl
// replay --acl-algorithm`; docs/acl-pipeline.md).
//
//   default        the widest this CPU and EAL's max SIMD bit width allow
//   scalar, sse, avx2, avx512x16, avx512x32
//                  rte_acl_classify_alg's implementations
//   autovalidator  every implementation the CPU runs on every burst, each
//                  checked against scalar (differences counted, scalar's
//                  answer used)
//
// Names only: whether this CPU runs one is AclClassifier's question
// (dataplane/acl/acl_classifier.h, CheckAclAlgorithm), which needs DPDK.
#ifndef FLOWCLASS_DATAPLANE_ACL_ALGORITHM_H_
#define FLOWCLASS_DATAPLANE_ACL_ALGORITHM_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace flowclass {

enum class AclAlgorithm : uint8_t {
  kDefault,
  kScalar,
  kSse,
  kAvx2,
  kAvx512x16,
  kAvx512x32,
  kAutovalidator,
};

inline constexpr AclAlgorithm kAclAlgorithms[] = {
    AclAlgorithm::kDefault,   AclAlgorithm::kScalar,    AclAlgorithm::kSse,
    AclAlgorithm::kAvx2,      AclAlgorithm::kAvx512x16, AclAlgorithm::kAvx512x32,
    AclAlgorithm::kAutovalidator};

// The accepted names, as errors list them.
inline constexpr char kAclAlgorithmNames[] =
    "default, scalar, sse, avx2, avx512x16, avx512x32 or autovalidator";

inline const char* AclAlgorithmName(AclAlgorithm a) {
  switch (a) {
    case AclAlgorithm::kDefault: return "default";
    case AclAlgorithm::kScalar: return "scalar";
    case AclAlgorithm::kSse: return "sse";
    case AclAlgorithm::kAvx2: return "avx2";
    case AclAlgorithm::kAvx512x16: return "avx512x16";
    case AclAlgorithm::kAvx512x32: return "avx512x32";
    case AclAlgorithm::kAutovalidator: return "autovalidator";
  }
  return "?";
}

// nullopt for a name that is none of the above.
inline std::optional<AclAlgorithm> ParseAclAlgorithmName(std::string_view name) {
  for (AclAlgorithm a : kAclAlgorithms)
    if (name == AclAlgorithmName(a)) return a;
  return std::nullopt;
}

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_ACL_ALGORITHM_H_
