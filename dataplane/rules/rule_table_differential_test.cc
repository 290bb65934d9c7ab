// Differential tests of RuleTable against ReferenceClassifier over random
// rule sets, and hand-built ClassBench-shaped rules.
#include "dataplane/rules/rule_table.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "gtest/gtest.h"
#include "tests/common/random_rules.h"
#include "tests/common/reference_classifier.h"
#include "tests/common/rule_table_testing.h"

namespace flowclass {
namespace {

// ---------------------------------------------------------------------------
// Differential test against the linear-scan reference.

struct DiffConfig {
  std::string name;
  int seeds;
  size_t min_rules;
  size_t max_rules;
  int rounds;
  int keys_per_round;
  int max_batch;
  RandomRuleOptions options;
};

struct DiffTotals {
  long keys = 0;
  long matched = 0;
  long megaflow_checks = 0;
  long rejected_batches = 0;
};

void RunDifferential(uint64_t seed, const DiffConfig& cfg, DiffTotals* totals) {
  SCOPED_TRACE(absl::StrCat(cfg.name, " seed ", seed));
  RandomRuleGen gen(seed, cfg.options);
  RuleTable table;
  ReferenceClassifier ref;
  std::vector<Rule> live;
  uint64_t next_id = 1;
  const size_t target =
      cfg.min_rules + gen.Uniform(cfg.max_rules - cfg.min_rules + 1);
  while (live.size() < target) {
    std::vector<RuleOp> ops;
    for (size_t i = 0; i < 256 && live.size() < target; ++i) {
      live.push_back(gen.NextRule(next_id++));
      ops.push_back(RuleOp::Insert(live.back()));
    }
    ApplyOk(&table, ops);
    ASSERT_TRUE(ref.ApplyBatch(ops).ok());
  }
  for (int round = 0; round < cfg.rounds; ++round) {
    if (round > 0) {
      if (round % 3 == 0) {
        // A batch both must reject (an unknown id at the end): neither changes.
        std::vector<Rule> scratch = live;
        uint64_t scratch_id = next_id;
        std::vector<RuleOp> ops = gen.NextBatch(1 + gen.Uniform(cfg.max_batch),
                                                &scratch, &scratch_id);
        ops.push_back(RuleOp::Delete(next_id + 1000000));
        ASSERT_FALSE(table.ApplyBatch(ops).ok());
        ASSERT_FALSE(ref.ApplyBatch(ops).ok());
        ++totals->rejected_batches;
      }
      const std::vector<RuleOp> ops =
          gen.NextBatch(1 + gen.Uniform(cfg.max_batch), &live, &next_id);
      const auto res = table.ApplyBatch(ops);
      ASSERT_TRUE(res.ok()) << res.status();
      ASSERT_TRUE(ref.ApplyBatch(ops).ok());
    }
    ASSERT_EQ(table.size(), ref.size());
    ASSERT_EQ(table.size(), live.size());
    const std::vector<const Rule*> ordered = table.Rules();
    for (size_t i = 0; i < ordered.size(); ++i)
      ASSERT_EQ(*ordered[i], ref.rules()[i]);

    for (int k = 0; k < cfg.keys_per_round; ++k) {
      const Flow key = gen.NextKeyNear(live);
      Flow wc;
      int visited = 0;
      const Rule* got = table.Lookup(key, &wc, &visited);
      const Rule* want = ref.Lookup(key);
      ASSERT_EQ(IdOf(got), IdOf(want)) << "key " << Dump(key);
      ASSERT_EQ(wc.Get(Field::kInPort), 0xffffffffu);
      ++totals->keys;
      totals->matched += want != nullptr;
      // The megaflow property: a key that agrees on wc gets the same rule.
      const Flow other = gen.NextKeyAgreeing(key, wc);
      ASSERT_EQ(IdOf(ref.Lookup(other)), IdOf(want))
          << "key " << Dump(key) << "\nwc  " << Dump(wc) << "\nkey'"
          << Dump(other);
      Flow wc2;
      ASSERT_EQ(IdOf(table.Lookup(other, &wc2)), IdOf(want));
      ++totals->megaflow_checks;
    }
  }
}

TEST(RuleTableDifferentialTest, MatchesReferenceOnRandomRuleSets) {
  RandomRuleOptions ties;  // few priorities: ties everywhere
  ties.max_priority = 2;
  RandomRuleOptions wide;
  wide.max_priority = 100000;
  wide.range_fraction = 0.35;
  RandomRuleOptions big;
  big.cookies = 64;  // delete-by-cookie removes ~2% of a large set
  const std::vector<DiffConfig> configs = {
      {"small", Scaled(150), 1, 50, 8, 400, 8, {}},
      {"small_ties", Scaled(100), 1, 50, 8, 400, 8, ties},
      {"small_wide", Scaled(100), 1, 50, 8, 400, 8, wide},
      {"large", kSanitized ? 1 : 4, 500, 2000, 4, 6000, 40, big},
  };
  DiffTotals totals;
  uint64_t seed = 1000;
  for (const DiffConfig& cfg : configs) {
    for (int s = 0; s < cfg.seeds; ++s) {
      RunDifferential(seed++, cfg, &totals);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  std::printf(
      "differential: %ld keys (%ld matched), %ld megaflow checks, "
      "%ld rejected batches\n",
      totals.keys, totals.matched, totals.megaflow_checks,
      totals.rejected_batches);
  EXPECT_GE(totals.keys, kSanitized ? 100000 : 1000000);
  // The key generator must make most keys hit something, or the comparison
  // says little.
  EXPECT_GT(totals.matched, totals.keys * 6 / 10);
}

// ---------------------------------------------------------------------------
// ClassBench-shaped rules built by hand (the full replay test is elsewhere).

struct CbRule {
  uint32_t src;
  int src_len;
  uint32_t dst;
  int dst_len;
  uint16_t sp_lo, sp_hi, dp_lo, dp_hi;
  uint8_t proto, proto_mask;
};

Rule FromClassBench(const CbRule& c, uint64_t id, uint32_t priority) {
  Rule r;
  r.id = id;
  r.priority = priority;
  r.match.SetExact(Field::kEthType, kEthTypeIpv4);
  if (c.src_len) r.match.SetMasked(Field::kIpv4Src, c.src, Prefix32(c.src_len));
  if (c.dst_len) r.match.SetMasked(Field::kIpv4Dst, c.dst, Prefix32(c.dst_len));
  r.match.tp_src = {c.sp_lo, c.sp_hi};
  r.match.tp_dst = {c.dp_lo, c.dp_hi};
  if (c.proto_mask) r.match.SetMasked(Field::kNwProto, c.proto, c.proto_mask);
  r.action = Action::Output(static_cast<uint32_t>(id));
  return r;
}

TEST(RuleTableClassBenchTest, HandBuiltFiveTupleRules) {
  // In ClassBench order: the first rule has the highest priority.
  const std::vector<CbRule> cb = {
      {0xc0a80100, 24, 0x0a000000, 8, 0, 65535, 80, 80, 6, 0xff},
      {0xc0a80000, 16, 0, 0, 1024, 65535, 0, 1023, 17, 0xff},
      {0, 0, 0x0a010000, 16, 0, 65535, 0, 65535, 0, 0},
      {0xc0a8010a, 32, 0x0a000005, 32, 53, 53, 1, 65534, 17, 0xff},
      {0, 0, 0, 0, 0, 65535, 0, 65535, 0, 0},
  };
  std::vector<RuleOp> ops;
  for (size_t i = 0; i < cb.size(); ++i)
    ops.push_back(RuleOp::Insert(FromClassBench(cb[i], i + 1, cb.size() - i)));
  RuleTable t;
  ReferenceClassifier ref;
  ApplyOk(&t, ops);
  ASSERT_TRUE(ref.ApplyBatch(ops).ok());
  const RuleTableStats s = t.Stats();
  EXPECT_EQ(s.rules, 5u);
  EXPECT_EQ(s.entries, 5u);  // one per rule: ranges are not expanded
  EXPECT_EQ(s.expanded_rules, 0u);

  struct Probe {
    FlowKey key;
    uint64_t want;
  };
  const std::vector<Probe> probes = {
      {MakeFiveTupleKey(0xc0a80105, 0x0a020304, 1234, 80, 6), 1},
      {MakeFiveTupleKey(0xc0a80105, 0x0a010304, 1234, 80, 17), 2},
      {MakeFiveTupleKey(0xc0a80105, 0x0a010304, 80, 80, 17), 3},
      {MakeFiveTupleKey(0xc0a8010a, 0x0a000005, 53, 0, 17), 5},
      {MakeFiveTupleKey(0xc0a8010a, 0x0a000005, 53, 65534, 17), 4},
      {MakeFiveTupleKey(0xc0a8010a, 0x0a000005, 53, 65535, 17), 5},
      {MakeFiveTupleKey(0xac100001, 0x08080808, 1, 2, 6), 5},
  };
  for (const Probe& p : probes) {
    Flow wc;
    EXPECT_EQ(IdOf(t.Lookup(p.key, &wc)), p.want) << p.key.ToFlow().w[3];
    EXPECT_EQ(IdOf(ref.Lookup(p.key)), p.want);
  }
}

}  // namespace
}  // namespace flowclass
