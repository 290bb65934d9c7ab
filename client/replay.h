// replay.h — `flowclassctl replay`: classify a ClassBench trace, or the
// frames of a pcap capture, offline.
//
// Loads a rule file (ClassBench or native text) into a RuleTable, builds one
// FlowKey per trace line from its 5-tuple (ClassBench convention: ports as
// given whatever the protocol) or per captured frame with the PMD's parser,
// then classifies the keys in bursts of kMaxBurst through the same Pipeline
// the PMD threads run.  Only the classification loop is timed (keys are
// prepared first), on one thread.
//
// A pcap has no expected column: each frame's expected rule is what the
// rule table's own lookup (the slow path, no cache) returns for its key, so
// a mismatch is a cache or pipeline that disagrees with it.
//
// Expected results follow the trace convention: column 6 is the 1-based line
// of the first matching rule; 0 or a value past every rule id means no rule
// matches.  The ClassBench loader gives rule L the id L and the native one a
// rule's line (or its id=), so a packet agrees when its verdict's rule id
// equals the expected value (or 0 for "no match").
#ifndef FLOWCLASS_CLIENT_REPLAY_H_
#define FLOWCLASS_CLIENT_REPLAY_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/pipeline.h"
#include "dataplane/pipeline_kind.h"
#include "dataplane/rules/rule_format.h"

namespace flowclass {

struct ReplayOptions {
  std::string rules_path;
  std::string trace_path;
  // Instead of trace_path: a pcap capture (Ethernet link type), each frame
  // parsed by the PMD's parser as received on pcap_in_port.
  std::string pcap_path;
  uint32_t pcap_in_port = 0;
  // Print the rules with the most hits (all passes), at most this many, and
  // the packets no rule matched; 0: none.
  int top_rules = 0;
  RuleFormat format = RuleFormat::kAuto;
  // Passes over the trace (later passes run with warm caches).  Every pass
  // is checked against the expected column.
  int repeat = 1;
  // pipeline.dpcls.lookup picks the subtable lookup implementations
  // (`--lookup NAME` is LookupPriorities::Only(NAME); default: best).
  PipelineConfig pipeline;
  // kAcl: EMC -> rte_acl -> action (dataplane/acl) instead of `pipeline`'s
  // cache hierarchy; only pipeline.emc and emc_config.insert_inv_prob
  // apply.  Needs a flowclassctl built with DPDK (FLOWCLASS_WITH_SERVICE).
  PipelineKind kind = PipelineKind::kMegaflow;
  // kAcl: the rte_acl classify implementation (acl_classifier.h names).
  std::string acl_algorithm = "default";
  // An empty rule set is refused unless this is set: against no rules every
  // expected id is "no match", so any trace would pass.
  bool allow_empty_rules = false;
  // Print at most this many mismatching lines.
  int max_reported_mismatches = 10;
};

struct ReplayResult {
  uint64_t packets = 0;
  uint64_t mismatches = 0;
  double seconds = 0;  // classification loop only
  double mpps = 0;
  PmdStats stats;
  // Differences the lookup autovalidator found (0 unless it was selected;
  // with kAcl: the ACL autovalidator's).
  uint64_t lookup_mismatches = 0;
  // With options.top_rules > 0: (rule id, packets) over all passes, most
  // hits first (ties: lower id first); rule id 0 = no rule matched.
  std::vector<std::pair<uint64_t, uint64_t>> rule_hits;
};

// Runs the replay, writing counters and mismatches to `out` (not the summary
// line).  Errors: a rule or trace file that cannot be read or parsed, a rule
// set the table rejects.
absl::StatusOr<ReplayResult> RunReplay(const ReplayOptions& options,
                                       std::ostream& out);

// The rule file of a replay: LoadRuleFile, and an empty rule set refused
// unless options.allow_empty_rules (both pipelines).
absl::StatusOr<std::vector<Rule>> LoadReplayRules(const ReplayOptions& options);

// What both replays classify: the trace's keys and the rule id each must
// get (0 = no match: the trace's 0, or an id past every rule's).
struct ReplayInput {
  std::vector<FlowKey> keys;
  std::vector<uint64_t> expected;
  std::vector<uint32_t> trace_expected;  // the trace's own column
  // What one key is in a mismatch line, and what the input was in the
  // counts line ("trace lines: N", "pcap frames: N ...").
  const char* unit = "trace line";
  std::string described;
};
ReplayInput PrepareReplayInput(absl::Span<const Rule> rules,
                               const std::vector<TraceEntry>& trace);

// What a pcap replay read (replay_pcap.cc).
struct PcapReplayCounts {
  uint64_t frames = 0;
  uint64_t snapped = 0;        // captured shorter than on the wire
  uint64_t parse_flagged = 0;  // truncated or malformed (the PMD's parse errors)
};
absl::StatusOr<ReplayInput> LoadPcapReplayInput(const ReplayOptions& options,
                                                absl::Span<const Rule> rules,
                                                PcapReplayCounts* counts);

// The input of either replay: options.pcap_path's frames when set, else
// options.trace_path's lines.
absl::StatusOr<ReplayInput> LoadReplayInput(const ReplayOptions& options,
                                            absl::Span<const Rule> rules);

// "rule hits (all passes; top N of M):" and a line per rule; "" when
// result.rule_hits is empty.
std::string FormatRuleHits(const ReplayResult& result, int top);

// The passes both replays time: `process` classifies each burst of up to
// 32 keys inside the timer; verdicts are checked after it (mismatches
// listed up to options.max_reported_mismatches).  Fills packets,
// mismatches, seconds and mpps.
ReplayResult RunTimedPasses(
    const ReplayOptions& options, const ReplayInput& input,
    absl::FunctionRef<void(const FlowKey* keys, int n, Verdict* out)> process,
    std::ostream& out);

// RunReplay for options.kind == kAcl (replay_acl.cc; without DPDK an
// UNIMPLEMENTED error).
absl::StatusOr<ReplayResult> RunAclReplay(const ReplayOptions& options,
                                          std::ostream& out);

// "replay: packets=N mismatches=M mpps=X.XX"
std::string ReplaySummaryLine(const ReplayResult& r);

}  // namespace flowclass

#endif  // FLOWCLASS_CLIENT_REPLAY_H_
