// replay_acl.cc — `flowclassctl replay --pipeline acl`: the trace through
// EMC -> rte_acl -> action (dataplane/acl), offline, on one thread.  The
// same rule and trace files, expected column and output shape as the
// megaflow replay (replay.cc); EAL is initialised without hugepages first.
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
  absl::StatusOr<std::vector<TraceEntry>> trace = LoadTraceFile(options.trace_path);
  if (!trace.ok()) return trace.status();
  if (absl::Status s = InitOfflineEal("flowclassctl", 2048); !s.ok()) return s;

  AclOptions ao;
  ao.algorithm = *alg;
  absl::StatusOr<std::unique_ptr<AclClassifier>> acl = AclClassifier::Build(*rules, ao);
  if (!acl.ok()) {
    return absl::Status(acl.status().code(), absl::StrFormat("%s: %s", options.rules_path,
                                                             acl.status().message()));
  }
  uint64_t max_id = 0;
  for (const Rule& r : *rules) max_id = std::max(max_id, r.id);
  const size_t n = trace->size();
  std::vector<FlowKey> keys(n);
  std::vector<uint64_t> expected(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = (*trace)[i].key;
    const uint64_t e = (*trace)[i].expected;
    expected[i] = (e == 0 || e > max_id) ? 0 : e;
  }
  std::vector<Verdict> verdicts(n);

  AclPipelineConfig pc;
  pc.emc = options.pipeline.emc;
  pc.emc_entries = options.pipeline.emc_config.entries;
  pc.emc_insert_inv_prob = options.pipeline.emc_config.insert_inv_prob;
  absl::StatusOr<std::unique_ptr<AclPipeline>> created = AclPipeline::Create(pc);
  if (!created.ok()) return created.status();
  AclPipeline& pipeline = **created;
  pipeline.SetClassifier(acl->get());

  ReplayResult result;
  for (int pass = 0; pass < options.repeat; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; i += kMaxBurst) {
      const int burst = static_cast<int>(std::min<size_t>(kMaxBurst, n - i));
      pipeline.ProcessBurst(&keys[i], burst, &verdicts[i]);
    }
    const auto t1 = std::chrono::steady_clock::now();
    result.seconds += std::chrono::duration<double>(t1 - t0).count();
    for (size_t i = 0; i < n; ++i) {
      if (verdicts[i].rule_id == expected[i]) continue;
      if (result.mismatches < static_cast<uint64_t>(options.max_reported_mismatches)) {
        out << absl::StrFormat("mismatch: pass %d trace line %d: %s expected rule %d got %d\n",
                               pass + 1, i + 1, keys[i].ToString(), expected[i],
                               verdicts[i].rule_id);
      }
      ++result.mismatches;
    }
    result.packets += n;
  }
  if (result.mismatches > static_cast<uint64_t>(options.max_reported_mismatches))
    out << absl::StrFormat("(%d more mismatches not listed)\n",
                           result.mismatches - options.max_reported_mismatches);
  result.lookup_mismatches = (*acl)->autovalidator_mismatches();
  result.mpps = result.seconds > 0
                    ? static_cast<double>(result.packets) / result.seconds / 1e6
                    : 0;
  const AclBuildStats& bs = (*acl)->stats();
  out << absl::StrFormat("rules: %d  trace lines: %d  passes: %d\n", rules->size(), n,
                         options.repeat);
  out << absl::StrFormat("acl: algorithm %s; build %.6f s; rte_acl rules ipv4 %d, ipv6 %d, "
                         "other %d\n",
                         AclAlgorithmName((*acl)->algorithm()), bs.build_seconds,
                         bs.acl_rules[0], bs.acl_rules[1], bs.acl_rules[2]);
  out << absl::StrFormat("classified: %d packets in %.6f s (%.0f packets/s)\n",
                         result.packets, result.seconds,
                         result.seconds > 0 ? static_cast<double>(result.packets) / result.seconds
                                            : 0.0);
  out << "acl pipeline (replay):\n" << pipeline.FormatStats();
  out << absl::StrFormat("  acl autovalidator differences: %d\n", result.lookup_mismatches);
  return result;
}

}  // namespace flowclass
