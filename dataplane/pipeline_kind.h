// pipeline_kind.h — which per-PMD pipeline classifies: `pipeline.kind`.
//
//   megaflow  EMC -> SMC -> CD -> dpcls -> RuleTable upcall (pipeline.h), the
//             default
//   acl       EMC -> DPDK rte_acl over the whole rule set (dataplane/acl,
//             docs/acl-pipeline.md)
#ifndef FLOWCLASS_DATAPLANE_PIPELINE_KIND_H_
#define FLOWCLASS_DATAPLANE_PIPELINE_KIND_H_

#include <optional>
#include <string_view>

namespace flowclass {

enum class PipelineKind : unsigned char { kMegaflow, kAcl };

inline const char* PipelineKindName(PipelineKind k) {
  return k == PipelineKind::kAcl ? "acl" : "megaflow";
}
// nullopt for anything but "megaflow" and "acl".
inline std::optional<PipelineKind> ParsePipelineKind(std::string_view s) {
  if (s == "megaflow") return PipelineKind::kMegaflow;
  if (s == "acl") return PipelineKind::kAcl;
  return std::nullopt;
}

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_PIPELINE_KIND_H_
