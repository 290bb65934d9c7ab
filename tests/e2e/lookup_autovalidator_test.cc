// The lookup autovalidator in CI: >= 10M subtable lookups, each checked by
// running generic beside every other eligible implementation (specialised,
// and avx512 when the CPU has it), over the six ClassBench hypersplit
// replays and over random rule sets, with 0 differences.  The EMC, SMC and
// Cuckoo Distributor are off so every packet reaches the subtables.
// Any difference fails the running test (mismatch hook) and is counted.
#include <cstdio>
#include <algorithm>
#include <bit>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "client/replay.h"
#include "dataplane/pipeline.h"
#include "dataplane/rules/rule_table.h"
#include "dataplane/dpcls/subtable_lookup.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/classbench_data.h"
#include "tests/common/e2e_util.h"
#include "tests/common/megaflow_testing.h"
#include "tests/common/random_rules.h"

namespace flowclass {
namespace {

const std::string kDir = ClassBenchDir() + "/hypersplit/";
const std::string kCtl =
    std::string(FLOWCLASS_BINARY_DIR) + "/client/flowclassctl";

#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kPerReplay = 100'000;   // subtable lookups per set
constexpr uint64_t kRandomLookups = 500'000;
#else
constexpr uint64_t kPerReplay = 900'000;   // x 6 sets = 5.4M
constexpr uint64_t kRandomLookups = 5'000'000;
#endif

// Any difference fails the running test.
const auto* const kEnv =
    ::testing::AddGlobalTestEnvironment(new FailOnLookupMismatchEnv);

PipelineConfig ValidatingConfig() {
  PipelineConfig c;
  c.emc = false;
  c.smc = CacheMode::kOff;
  c.cd.mode = CdMode::kOff;
  c.dpcls.lookup = *LookupPriorities::Only("autovalidator");
  return c;
}

class AutovalidatedReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(AutovalidatedReplay, ZeroDifferences) {
  ReplayOptions opts;
  opts.rules_path = kDir + GetParam();
  opts.trace_path = kDir + GetParam() + "_trace";
  opts.pipeline = ValidatingConfig();
  // One pass tells how many subtable lookups a pass makes; then enough
  // passes for kPerReplay.
  std::ostringstream out;
  absl::StatusOr<ReplayResult> probe = RunReplay(opts, out);
  ASSERT_TRUE(probe.ok()) << probe.status();
  const uint64_t per_pass =
      std::max<uint64_t>(1, probe->stats.subtable_lookups);
  opts.repeat = static_cast<int>((kPerReplay + per_pass - 1) / per_pass);
  const uint64_t total_before = LookupMismatchesTotal();
  absl::StatusOr<ReplayResult> r = RunReplay(opts, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mismatches, 0u) << out.str();
  EXPECT_EQ(r->lookup_mismatches, 0u) << out.str();
  EXPECT_EQ(LookupMismatchesTotal(), total_before);
  EXPECT_GE(r->stats.subtable_lookups, kPerReplay);
  EXPECT_EQ(r->stats.emc_hits + r->stats.smc_hits, 0u);
  // Every subtable really ran the autovalidator.
  EXPECT_THAT(out.str(), ::testing::HasSubstr("lookup autovalidator"));
  EXPECT_THAT(out.str(), ::testing::Not(::testing::HasSubstr(
                             "lookup avx512")));
}

INSTANTIATE_TEST_SUITE_P(Hypersplit, AutovalidatedReplay,
                         ::testing::Values("acl1_100", "acl1_1K", "fw1_100",
                                           "fw1_1K", "ipc1_100", "ipc1_1K"));

// Random rule sets (IPv4, IPv6 and L2 matches, prefixes and arbitrary masks,
// port ranges, 4 in_ports) give megaflows of many shapes; keys near the
// rules go through the pipeline, whose verdicts must equal the RuleTable's.
TEST(AutovalidatedRandomTraffic, ZeroDifferencesOverManyShapes) {
  const uint64_t total_before = LookupMismatchesTotal();
  uint64_t lookups = 0;
  std::set<int> shapes;
  // At least 4 rule sets, for variety of shapes, and enough lookups.
  for (uint64_t seed = 1; lookups < kRandomLookups || seed <= 4; ++seed) {
    ASSERT_LT(seed, 100u) << "too few lookups per rule set";
    RandomRuleGen gen(seed);
    RuleTable table;
    std::vector<RuleOp> ops;
    for (const Rule& r : gen.NextRules(400)) ops.push_back(RuleOp::Insert(r));
    ASSERT_TRUE(table.ApplyBatch(ops).ok());
    std::vector<Rule> rules;
    for (const RuleOp& op : ops) rules.push_back(op.rule);

    absl::StatusOr<std::unique_ptr<Pipeline>> created =
        Pipeline::Create(ValidatingConfig());
    ASSERT_TRUE(created.ok()) << created.status();
    Pipeline& p = **created;
    p.SetRuleTable(&table);

    constexpr int kKeys = 4096;
    std::vector<FlowKey> keys(kKeys);
    for (FlowKey& k : keys) k = FlowKey::FromFlow(gen.NextKeyNear(rules));
    std::vector<Verdict> verdicts(kKeys);
    for (int pass = 0; pass < 40; ++pass) {
      for (int i = 0; i < kKeys; i += kMaxBurst)
        p.ProcessBurst(&keys[i], kMaxBurst, &verdicts[i]);
      if (pass == 0 || pass == 39) {
        for (int i = 0; i < kKeys; ++i) {
          Flow wc;
          const Rule* want = table.Lookup(keys[i], &wc);
          ASSERT_EQ(verdicts[i].rule_id, want ? want->id : 0)
              << "seed " << seed << " key " << keys[i].ToString();
        }
      }
    }
    const PipelineSnapshot snap = p.Snapshot();
    // Subtable lookups: ranked probes for hits plus at least one per miss
    // that found subtables (a lower bound of what the autovalidator ran).
    lookups += snap.stats.subtable_lookups;
    for (const SubtableInfo& st : snap.subtable) {
      EXPECT_EQ(st.lookup_fn, "autovalidator");
      shapes.insert(std::popcount(st.mask.NonZeroMap()));
    }
    EXPECT_EQ(p.lookup_mismatches(), 0u) << "seed " << seed;
  }
  EXPECT_EQ(LookupMismatchesTotal(), total_before);
  EXPECT_GE(shapes.size(), 3u) << "random rules should give several shapes";
  std::printf("random traffic: %llu validated subtable lookups, %zu shapes\n",
              static_cast<unsigned long long>(lookups), shapes.size());
}

// Runs a shell command; out has its stdout and stderr.
CmdResult RunCmd(const std::string& cmd) { return RunCommand(cmd + " 2>&1"); }

TEST(FlowclassctlLookup, EveryChoiceReplaysWithTheSameSummary) {
  for (const char* impl : {"generic", "specialised", "avx512", "autovalidator"}) {
    if (std::string(impl) == "avx512" && !CpuHasAvx512Lookup()) continue;
    auto [code, out] = RunCmd(kCtl + " replay --lookup " + impl + " " + kDir +
                              "fw1_100 " + kDir + "fw1_100_trace");
    EXPECT_EQ(code, 0) << impl << "\n" << out;
    EXPECT_THAT(out, ::testing::ContainsRegex(
                         "\nreplay: packets=920 mismatches=0 "
                         "mpps=[0-9]+\\.[0-9][0-9]\n$"));
    EXPECT_THAT(out, ::testing::HasSubstr(std::string(impl) + "=255"));
  }
  CmdResult r = RunCmd(kCtl + " replay --lookup sse2 a b");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("--lookup takes generic"));
  r = RunCmd(kCtl + " replay --lookup");
  EXPECT_EQ(r.code, 2) << r.out;
  if (!CpuHasAvx512Lookup()) {
    r = RunCmd(kCtl + " replay --lookup avx512 a b");
    EXPECT_EQ(r.code, 2) << r.out;
    GTEST_SKIP() << "avx512 replay not run: this CPU lacks AVX-512";
  }
}

}  // namespace
}  // namespace flowclass
