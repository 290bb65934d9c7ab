// What a rule change costs a PMD: revalidating its megaflows against the new
// table versus flushing every cache, measured in one process.
//
// R rules match one exact ipv4_dst each (so every flow gets its own megaflow);
// F flows (default 100k) with distinct destinations: R of them hit a rule, the
// rest miss into
// "no rule" megaflows.  After a warm-up the table changes by one rule
// (its action flips).  Reported per mode:
//   change_us   time of Pipeline::SetRuleTable (revalidation or flush)
//   removed     megaflows the change removed
//   first_pass  Mpps of the first full pass over the flows after the change
//               (a flush makes every flow upcall again)
//   steady      Mpps of a later pass (baseline)
//
//   build/bench/revalidation_benchmark [--flows N] [--rules R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dataplane/pipeline.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {
namespace {

Rule DstRule(uint32_t i, uint32_t port) {
  Rule r;
  r.id = i + 1;
  r.priority = 100;
  r.match.SetExact(Field::kEthType, kEthTypeIpv4);
  r.match.SetExact(Field::kIpv4Dst, 0x0a000000u + i);
  r.action = Action::Output(port);
  return r;
}

double PassMpps(Pipeline& p, const std::vector<FlowKey>& keys) {
  Verdict v[kMaxBurst];
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i + kMaxBurst <= keys.size(); i += kMaxBurst) {
    p.ProcessBurst(&keys[i], kMaxBurst, v);
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(keys.size() / kMaxBurst * kMaxBurst) / s / 1e6;
}

int Main(int argc, char** argv) {
  uint32_t flows = 100000, rules = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--flows") {
      flows = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    } else if (a == "--rules") {
      rules = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    } else {
      std::fprintf(stderr, "usage: %s [--flows N] [--rules R]\n", argv[0]);
      return 2;
    }
  }
  RuleTable before;
  {
    std::vector<RuleOp> ops;
    for (uint32_t i = 0; i < rules; ++i) ops.push_back(RuleOp::Insert(DstRule(i, 1)));
    if (!before.ApplyBatch(ops).ok()) return 1;
  }
  RuleTable after(before);
  if (!after.ApplyBatch({RuleOp::Replace(DstRule(0, 2))}).ok()) return 1;

  std::mt19937_64 rng(7);
  std::vector<FlowKey> keys(flows);
  for (uint32_t i = 0; i < flows; ++i) {
    // Distinct dst per flow; the first `rules` dsts match a rule.
    keys[i] = MakeFiveTupleKey(static_cast<uint32_t>(rng()), 0x0a000000u + i,
                               static_cast<uint16_t>(rng()),
                               static_cast<uint16_t>(rng()), kIpProtoTcp);
  }
  std::shuffle(keys.begin(), keys.end(), rng);

  std::printf("flows=%u rules=%u (one rule's action changes)\n", flows, rules);
  std::printf("%-11s %10s %9s %8s %12s %9s\n", "mode", "megaflows", "change_us",
              "removed", "first_pass", "steady");
  double change_us[2] = {0, 0};
  for (const bool revalidate : {true, false}) {
    PipelineConfig cfg;
    cfg.revalidate = revalidate;
    cfg.max_megaflows = flows + 1024;
    cfg.cd.mode = CdMode::kOff;
    auto p = Pipeline::Create(cfg);
    if (!p.ok()) return 1;
    Pipeline& pipeline = **p;
    pipeline.SetRuleTable(&before);
    PassMpps(pipeline, keys);
    const double steady = PassMpps(pipeline, keys);
    const uint64_t megaflows = pipeline.Snapshot().megaflows;
    const uint64_t out0 = pipeline.stats().megaflows_revalidated_out;
    const auto t0 = std::chrono::steady_clock::now();
    pipeline.SetRuleTable(&after);
    const double us = std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
    change_us[revalidate ? 0 : 1] = us;
    const uint64_t removed = pipeline.stats().megaflows_revalidated_out - out0;
    const double first = PassMpps(pipeline, keys);
    std::printf("%-11s %10lu %9.0f %8lu %12.2f %9.2f\n",
                revalidate ? "revalidate" : "flush",
                static_cast<unsigned long>(megaflows), us,
                static_cast<unsigned long>(removed), first, steady);
    pipeline.SetRuleTable(nullptr);
  }
  std::printf("revalidate/flush change time: %.2fx\n", change_us[0] / change_us[1]);
  return 0;
}

}  // namespace
}  // namespace flowclass

int main(int argc, char** argv) { return flowclass::Main(argc, argv); }
