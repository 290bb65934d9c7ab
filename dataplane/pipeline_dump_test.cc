// Pipeline::DumpMegaflows, the step the DPDK PMD runs for `flowclassctl
// dump-megaflows`: each step visits at most `budget` megaflows and copies at
// most `cap`; a walk of steps lists every megaflow alive throughout exactly
// once by (index, version) even when megaflows are installed and removed
// between the steps; the filters keep what they name; the copies carry
// verdict, packets and idle time.
#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "dataplane/pipeline.h"
#include "gtest/gtest.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

constexpr int kRules = 3000;  // one /32 rule, so one megaflow, per key

FlowKey KeyOf(int i, uint32_t in_port) {
  return MakeFiveTupleKey(0x0a000000u + static_cast<uint32_t>(i), 1, 1, 1, 6, in_port);
}

struct Fixture {
  Fixture() {
    std::vector<RuleOp> ops;
    for (int i = 0; i < kRules; ++i)
      ops.push_back(RuleOp::Insert(Ipv4SrcRule(static_cast<uint64_t>(i) + 1, 10,
                                               0x0a000000u + static_cast<uint32_t>(i), 32,
                                               Action::Output(1 + i % 2))));
    EXPECT_TRUE(table.ApplyBatch(ops).ok());
    PipelineConfig cfg;
    cfg.emc = false;
    cfg.max_megaflows = 8192;
    cfg.megaflow_max_idle_ms = 0;
    auto p = Pipeline::Create(cfg);
    EXPECT_TRUE(p.ok()) << p.status();
    pipeline = *std::move(p);
    pipeline->SetClock(&clock);
    pipeline->SetRuleTable(&table);
  }
  // Key i on `in_port`, `times` packets.
  void Send(int i, uint32_t in_port, int times) {
    const FlowKey k = KeyOf(i, in_port);
    Verdict v;
    for (int t = 0; t < times; ++t) pipeline->ProcessBurst(&k, 1, &v);
  }
  RuleTable table;
  ManualPipelineClock clock;
  std::unique_ptr<Pipeline> pipeline;
};

// One whole walk, `budget` and `cap` a step; `between` runs after each step.
template <typename Between>
std::vector<MegaflowEntry> Walk(const Pipeline& p, const MegaflowFilter& f, uint32_t budget,
                                uint32_t cap, Between between, int* steps) {
  std::vector<MegaflowEntry> out, page(cap);
  uint32_t cursor = UINT32_MAX;
  *steps = 0;
  do {
    const uint32_t before = std::min<uint64_t>(cursor, p.Snapshot().megaflows);
    const uint32_t n = p.DumpMegaflows(f, &cursor, budget, page.data(), cap);
    ++*steps;
    EXPECT_LE(n, cap);
    EXPECT_LE(before - cursor, budget) << "a step visits at most `budget` megaflows";
    out.insert(out.end(), page.begin(), page.begin() + n);
    between(*steps);
  } while (cursor > 0);
  return out;
}

TEST(PipelineDump, EveryMegaflowOnceWithItsVerdictAndPackets) {
  Fixture fx;
  for (int i = 0; i < kRules; ++i) fx.Send(i, 1 + i % 3, 1 + i % 4);
  fx.clock.now += 250;
  fx.Send(7, 1 + 7 % 3, 1);  // used again just now
  ASSERT_EQ(fx.pipeline->Snapshot().megaflows, static_cast<uint64_t>(kRules));
  int steps = 0;
  std::vector<MegaflowEntry> all =
      Walk(*fx.pipeline, {}, 100, 64, [](int) {}, &steps);
  ASSERT_EQ(all.size(), static_cast<size_t>(kRules));
  EXPECT_GE(steps, kRules / 64);
  std::set<uint64_t> rules;
  for (const MegaflowEntry& e : all) {
    const uint64_t i = e.verdict.rule_id - 1;
    ASSERT_LT(i, static_cast<uint64_t>(kRules));
    EXPECT_TRUE(rules.insert(e.verdict.rule_id).second) << "listed twice: rule " << i + 1;
    EXPECT_EQ(e.value.Get(Field::kInPort), 1 + i % 3);
    EXPECT_EQ(e.verdict.action, Action::Output(1 + i % 2));
    EXPECT_EQ(e.packets, 1 + i % 4 + (i == 7 ? 1 : 0));
    EXPECT_EQ(e.idle_ms, i == 7 ? 0u : 250u);
  }

  // Filters: checked on every megaflow visited, before the copy.
  MegaflowFilter port2;
  port2.in_port = 2;
  std::vector<MegaflowEntry> p2 = Walk(*fx.pipeline, port2, 100, 64, [](int) {}, &steps);
  EXPECT_EQ(p2.size(), static_cast<size_t>(kRules / 3));
  for (const MegaflowEntry& e : p2) EXPECT_EQ(e.value.Get(Field::kInPort), 2u);
  MegaflowFilter rule9;
  rule9.rule_id = 9;
  std::vector<MegaflowEntry> r9 = Walk(*fx.pipeline, rule9, 4096, 1024, [](int) {}, &steps);
  ASSERT_EQ(r9.size(), 1u);
  EXPECT_EQ(r9[0].verdict.rule_id, 9u);
  EXPECT_EQ(steps, 1) << "3000 megaflows fit one step of 4096";
  rule9.in_port = 1;  // rule 9's key came in on port 1 + 8 % 3 = 3
  EXPECT_TRUE(Walk(*fx.pipeline, rule9, 4096, 1024, [](int) {}, &steps).empty());
}

TEST(PipelineDump, MegaflowsAliveThroughoutAreListedOnceWhileOthersComeAndGo) {
  Fixture fx;
  for (int i = 0; i < kRules / 2; ++i) fx.Send(i, 1, 1);
  // Between the steps: the rules of keys 0, 10, 20, ... go (their megaflows
  // with them) and keys kRules/2.. install new megaflows.
  std::set<uint64_t> deleted;
  int next_new = kRules / 2;
  auto churn = [&](int step) {
    if (step % 3 == 0) {
      std::vector<RuleOp> ops;
      for (int i = step * 20; i < step * 20 + 20 && i < kRules / 2; i += 10) {
        ops.push_back(RuleOp::Delete(static_cast<uint64_t>(i) + 1));
        deleted.insert(static_cast<uint64_t>(i) + 1);
      }
      if (!ops.empty()) {
        ASSERT_TRUE(fx.table.ApplyBatch(ops).ok());
        fx.pipeline->SetRuleTable(&fx.table);
      }
    }
    for (int k = 0; k < 7 && next_new < kRules; ++k) fx.Send(next_new++, 1, 1);
  };
  int steps = 0;
  std::vector<MegaflowEntry> got = Walk(*fx.pipeline, {}, 50, 16, churn, &steps);
  ASSERT_GT(steps, 20);
  ASSERT_FALSE(deleted.empty());
  // A megaflow copied twice is the same one: (index, version) names one
  // megaflow, with one rule (the control thread keeps one copy).
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> rule_of;
  std::set<uint64_t> rules;
  for (const MegaflowEntry& e : got) {
    auto [it, fresh] = rule_of.try_emplace({e.index, e.version}, e.verdict.rule_id);
    EXPECT_EQ(it->second, e.verdict.rule_id);
    rules.insert(e.verdict.rule_id);
  }
  // Alive throughout: the first half's keys whose rule stayed.
  for (int i = 0; i < kRules / 2; ++i) {
    const uint64_t id = static_cast<uint64_t>(i) + 1;
    if (deleted.count(id) == 0) {
      EXPECT_EQ(rules.count(id), 1u) << "missed rule " << id;
    }
  }
}

}  // namespace
}  // namespace flowclass
