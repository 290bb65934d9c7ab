#include "client/replay.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {

ReplayInput PrepareReplayInput(absl::Span<const Rule> rules,
                               const std::vector<TraceEntry>& trace) {
  // "Past the end" is past every rule id: ClassBench ids are 1..N, but a
  // native file's ids are line numbers (comments and blank lines count) or
  // its own id= values, which may exceed the number of rules.
  uint64_t max_id = 0;
  for (const Rule& r : rules) max_id = std::max(max_id, r.id);
  ReplayInput in;
  in.keys.resize(trace.size());
  in.expected.resize(trace.size());
  in.trace_expected.resize(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    in.keys[i] = trace[i].key;
    const uint64_t e = trace[i].expected;
    in.trace_expected[i] = trace[i].expected;
    in.expected[i] = (e == 0 || e > max_id) ? 0 : e;
  }
  in.described = absl::StrFormat("trace lines: %d", trace.size());
  return in;
}

absl::StatusOr<ReplayInput> LoadReplayInput(const ReplayOptions& options,
                                            absl::Span<const Rule> rules) {
  if (!options.pcap_path.empty()) {
    PcapReplayCounts c;
    absl::StatusOr<ReplayInput> in = LoadPcapReplayInput(options, rules, &c);
    if (!in.ok()) return in.status();
    in->unit = "frame";
    in->described = absl::StrFormat(
        "pcap frames: %d (in_port %d; %d captured short, %d truncated or malformed)",
        c.frames, options.pcap_in_port, c.snapped, c.parse_flagged);
    return in;
  }
  absl::StatusOr<std::vector<TraceEntry>> trace = LoadTraceFile(options.trace_path);
  if (!trace.ok()) return trace.status();
  return PrepareReplayInput(rules, *trace);
}

std::string FormatRuleHits(const ReplayResult& result, int top) {
  if (result.rule_hits.empty() || top <= 0) return "";
  const size_t shown = std::min<size_t>(static_cast<size_t>(top), result.rule_hits.size());
  std::string s = absl::StrFormat("rule hits (all passes; top %d of %d):\n", shown,
                                  result.rule_hits.size());
  for (size_t i = 0; i < shown; ++i) {
    const auto& [id, n] = result.rule_hits[i];
    if (id == 0) {
      absl::StrAppendFormat(&s, "  no rule: %d\n", n);
    } else {
      absl::StrAppendFormat(&s, "  rule %d: %d\n", id, n);
    }
  }
  return s;
}

ReplayResult RunTimedPasses(
    const ReplayOptions& options, const ReplayInput& input,
    absl::FunctionRef<void(const FlowKey* keys, int n, Verdict* out)> process,
    std::ostream& out) {
  const size_t n = input.keys.size();
  std::vector<Verdict> verdicts(n);
  ReplayResult result;
  absl::flat_hash_map<uint64_t, uint64_t> hits;
  for (int pass = 0; pass < options.repeat; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; i += kMaxBurst) {
      const int burst = static_cast<int>(std::min<size_t>(kMaxBurst, n - i));
      process(&input.keys[i], burst, &verdicts[i]);
    }
    const auto t1 = std::chrono::steady_clock::now();
    result.seconds += std::chrono::duration<double>(t1 - t0).count();
    // Checking is outside the timed loop.
    for (size_t i = 0; i < n; ++i) {
      if (options.top_rules > 0) ++hits[verdicts[i].rule_id];
      if (verdicts[i].rule_id == input.expected[i]) continue;
      if (result.mismatches < static_cast<uint64_t>(options.max_reported_mismatches)) {
        out << absl::StrFormat(
            "mismatch: pass %d %s %d: %s expected rule %d%s got %d\n",
            pass + 1, input.unit, i + 1, input.keys[i].ToString(), input.expected[i],
            input.expected[i] == input.trace_expected[i]
                ? ""
                : absl::StrFormat(" (no match: the trace says %d, past every rule id)",
                                  input.trace_expected[i]),
            verdicts[i].rule_id);
      }
      ++result.mismatches;
    }
    result.packets += n;
  }
  if (result.mismatches > static_cast<uint64_t>(options.max_reported_mismatches))
    out << absl::StrFormat("(%d more mismatches not listed)\n",
                           result.mismatches - options.max_reported_mismatches);
  result.rule_hits.assign(hits.begin(), hits.end());
  std::sort(result.rule_hits.begin(), result.rule_hits.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  result.mpps = result.seconds > 0
                    ? static_cast<double>(result.packets) / result.seconds / 1e6
                    : 0;
  return result;
}

absl::StatusOr<std::vector<Rule>> LoadReplayRules(const ReplayOptions& options) {
  absl::StatusOr<std::vector<Rule>> rules = LoadRuleFile(options.rules_path, options.format);
  if (rules.ok() && rules->empty() && !options.allow_empty_rules) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: no rules (every trace line would count as a match of \"no rule\"; "
        "--allow-empty-rules replays it anyway)",
        options.rules_path));
  }
  return rules;
}

absl::StatusOr<ReplayResult> RunReplay(const ReplayOptions& options,
                                       std::ostream& out) {
  if (options.repeat < 1) {
    return absl::InvalidArgumentError("--repeat: must be at least 1");
  }
  if (options.kind == PipelineKind::kAcl) return RunAclReplay(options, out);
  absl::StatusOr<std::vector<Rule>> rules = LoadReplayRules(options);
  if (!rules.ok()) return rules.status();
  absl::StatusOr<ReplayInput> loaded = LoadReplayInput(options, *rules);
  if (!loaded.ok()) return loaded.status();
  const ReplayInput& input = *loaded;

  RuleTable table;
  {
    std::vector<RuleOp> ops;
    ops.reserve(rules->size());
    for (const Rule& r : *rules) ops.push_back(RuleOp::Insert(r));
    absl::StatusOr<BatchResult> applied = table.ApplyBatch(ops);
    if (!applied.ok()) {
      return absl::Status(applied.status().code(),
                          absl::StrFormat("%s: %s", options.rules_path,
                                          applied.status().message()));
    }
  }
  const uint64_t n_rules = rules->size();

  absl::StatusOr<std::unique_ptr<Pipeline>> created =
      Pipeline::Create(options.pipeline);
  if (!created.ok()) return created.status();
  Pipeline& pipeline = **created;
  pipeline.SetRuleTable(&table);

  ReplayResult result = RunTimedPasses(
      options, input,
      [&](const FlowKey* k, int burst, Verdict* v) { pipeline.ProcessBurst(k, burst, v); }, out);
  const PipelineSnapshot snap = pipeline.Snapshot();
  result.stats = snap.stats;
  result.lookup_mismatches = pipeline.lookup_mismatches();
  out << absl::StrFormat("rules: %d  %s  passes: %d\n", n_rules, input.described,
                         options.repeat);
  // mpps in the summary line has two decimals; a slow path needs more.
  out << absl::StrFormat("classified: %d packets in %.6f s (%.0f packets/s)\n",
                         result.packets, result.seconds,
                         result.seconds > 0 ? static_cast<double>(result.packets) / result.seconds
                                            : 0.0);
  out << "pmd thread (replay):\n" << Pipeline::FormatStats(snap);
  out << absl::StrFormat("  lookup: %s; autovalidator differences: %d\n",
                         pipeline.lookup_priorities().ToString(),
                         result.lookup_mismatches);
  out << FormatRuleHits(result, options.top_rules);
  return result;
}

#ifndef FLOWCLASS_WITH_ACL
absl::StatusOr<ReplayResult> RunAclReplay(const ReplayOptions&, std::ostream&) {
  return absl::UnimplementedError(
      "--pipeline acl: this flowclassctl was built without DPDK (FLOWCLASS_WITH_SERVICE=OFF)");
}
#endif

std::string ReplaySummaryLine(const ReplayResult& r) {
  return absl::StrFormat("replay: packets=%d mismatches=%d mpps=%.2f",
                         r.packets, r.mismatches, r.mpps);
}

}  // namespace flowclass
