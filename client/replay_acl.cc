// replay_acl.cc — `flowclassctl replay --pipeline acl`: the trace through
// EMC -> rte_acl -> action (dataplane/acl), offline, on one thread.  The
// same rule and trace files, expected column and output shape as the
// megaflow replay (replay.cc), a trace or a pcap (replay_pcap.cc); EAL is initialised without hugepages first.
#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_format.h"
#include "client/replay.h"
#include "dataplane/acl/acl_classifier.h"
#include "dataplane/acl/acl_pipeline.h"

namespace flowclass {

absl::StatusOr<ReplayResult> RunAclReplay(const ReplayOptions& options, std::ostream& out) {
  absl::StatusOr<AclAlgorithm> alg = ParseAclAlgorithm(options.acl_algorithm);
  if (!alg.ok()) return alg.status();
  absl::StatusOr<std::vector<Rule>> rules = LoadReplayRules(options);
  if (!rules.ok()) return rules.status();
  absl::StatusOr<ReplayInput> loaded = LoadReplayInput(options, *rules);
  if (!loaded.ok()) return loaded.status();
  const ReplayInput& input = *loaded;
  if (absl::Status s = InitOfflineEal("flowclassctl", 2048); !s.ok()) return s;

  AclOptions ao;
  ao.algorithm = *alg;
  absl::StatusOr<std::unique_ptr<AclClassifier>> acl = AclClassifier::Build(*rules, ao);
  if (!acl.ok()) {
    return absl::Status(acl.status().code(), absl::StrFormat("%s: %s", options.rules_path,
                                                             acl.status().message()));
  }

  AclPipelineConfig pc;
  pc.emc = options.pipeline.emc;
  pc.emc_entries = options.pipeline.emc_config.entries;
  pc.emc_insert_inv_prob = options.pipeline.emc_config.insert_inv_prob;
  absl::StatusOr<std::unique_ptr<AclPipeline>> created = AclPipeline::Create(pc);
  if (!created.ok()) return created.status();
  AclPipeline& pipeline = **created;
  pipeline.SetClassifier(acl->get());

  ReplayResult result = RunTimedPasses(
      options, input,
      [&](const FlowKey* k, int burst, Verdict* v) { pipeline.ProcessBurst(k, burst, v); }, out);
  result.lookup_mismatches = (*acl)->autovalidator_mismatches();
  const AclBuildStats& bs = (*acl)->stats();
  out << absl::StrFormat("rules: %d  %s  passes: %d\n", rules->size(), input.described,
                         options.repeat);
  out << absl::StrFormat("acl: algorithm %s; build %.6f s; rte_acl rules ipv4 %d, ipv6 %d, "
                         "other %d; context memory %d bytes\n",
                         AclAlgorithmName((*acl)->algorithm()), bs.build_seconds,
                         bs.acl_rules[0], bs.acl_rules[1], bs.acl_rules[2], bs.context_bytes);
  out << absl::StrFormat("classified: %d packets in %.6f s (%.0f packets/s)\n",
                         result.packets, result.seconds,
                         result.seconds > 0 ? static_cast<double>(result.packets) / result.seconds
                                            : 0.0);
  out << "acl pipeline (replay):\n" << pipeline.FormatStats();
  out << absl::StrFormat("  acl autovalidator differences: %d\n", result.lookup_mismatches);
  out << FormatRuleHits(result, options.top_rules);
  return result;
}

}  // namespace flowclass
