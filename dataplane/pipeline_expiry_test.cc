// Pipeline tests of megaflow idle expiry (a fake clock) and of the caps
// (pipeline.max_megaflows, pipeline.max_subtables_per_port): megaflows go
// after the idle time and stay while used, at every layer that can hit them;
// the caches above never answer for an expired megaflow (differential
// against the brute-force reference classifier); a cap that bites leaves the
// verdict right, installs nothing and moves its counter.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/pipeline.h"
#include "gtest/gtest.h"
#include "tests/common/random_rules.h"
#include "tests/common/reference_classifier.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

void CheckCountersAddUp(const PmdStats& s) {
  EXPECT_EQ(s.packets,
            s.emc_hits + s.smc_hits + s.megaflow_hits + s.upcall_ok + s.upcall_failed);
  EXPECT_LE(s.upcalls_megaflow_cap + s.upcalls_subtable_cap, s.upcall_failed);
}

// Two disjoint rules (10/8 -> output:1, 11/8 -> output:2) and a key each.
struct TwoRules {
  TwoRules() { EXPECT_TRUE(table.ApplyBatch({RuleOp::Insert(a), RuleOp::Insert(b)}).ok()); }
  const Rule a = Ipv4SrcRule(1, 10, 0x0a000000, 8, Action::Output(1));
  const Rule b = Ipv4SrcRule(2, 10, 0x0b000000, 8, Action::Output(2));
  RuleTable table;
  FlowKey ka = MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6);
  FlowKey kb = MakeFiveTupleKey(0x0b000001, 1, 1, 1, 6);
};

enum class Layer { kEmc, kSmc, kCd, kDpcls };
const char* LayerName(Layer l) {
  switch (l) {
    case Layer::kEmc: return "emc";
    case Layer::kSmc: return "smc";
    case Layer::kCd: return "cd";
    case Layer::kDpcls: return "megaflow";
  }
  return "?";
}

// A pipeline whose repeated packets hit at `layer` (the layers above it off).
PipelineConfig ConfigHittingAt(Layer layer, uint32_t max_idle_ms) {
  PipelineConfig cfg;
  cfg.emc = layer == Layer::kEmc;
  cfg.emc_config.insert_inv_prob = 1;
  cfg.smc = layer == Layer::kSmc ? CacheMode::kOn : CacheMode::kOff;
  cfg.smc_config.entries = 1 << 10;
  cfg.cd.mode = layer == Layer::kCd ? CdMode::kOn : CdMode::kOff;
  cfg.cd_table.entries = CdConfig::kMinEntries;
  cfg.max_megaflows = 1024;
  cfg.megaflow_max_idle_ms = max_idle_ms;
  return cfg;
}

TEST(PipelineExpiry, IdleMegaflowsGoUsedOnesStayAtEveryLayer) {
  for (Layer layer : {Layer::kEmc, Layer::kSmc, Layer::kCd, Layer::kDpcls}) {
    SCOPED_TRACE(LayerName(layer));
    TwoRules two;
    ManualPipelineClock clock(5000);
    auto p = Pipeline::Create(ConfigHittingAt(layer, 1000));
    ASSERT_TRUE(p.ok()) << p.status();
    Pipeline& pl = **p;
    pl.SetClock(&clock);
    pl.SetRuleTable(&two.table);
    Verdict v[2];
    FlowKey both[2] = {two.ka, two.kb};
    pl.ProcessBurst(both, 2, v);  // two upcalls, two megaflows
    ASSERT_EQ(pl.Snapshot().megaflows, 2u);
    ASSERT_EQ(pl.Trace(two.ka).layer, LayerName(layer));

    // ka every 100 ms for 5 s: it stays (hits at `layer` keep it fresh);
    // kb goes once it has been idle for 1000 ms.
    for (int step = 1; step <= 50; ++step) {
      clock.now += 100;
      pl.ProcessBurst(&two.ka, 1, v);
      ASSERT_EQ(v[0].rule_id, 1u);
    }
    PipelineSnapshot s = pl.Snapshot();
    EXPECT_EQ(s.megaflows, 1u);
    EXPECT_EQ(s.stats.megaflows_expired, 1u);
    EXPECT_EQ(s.stats.upcall_ok, 2u) << "the used megaflow was expired";
    EXPECT_EQ(pl.Trace(two.ka).layer, LayerName(layer));
    EXPECT_EQ(pl.Trace(two.kb).layer, "upcall");

    // No packets: Housekeep (the PMD's idle iterations) expires ka too, and
    // its subtable goes with it (the ranking has nothing left).
    clock.now += 999;
    pl.Housekeep();
    EXPECT_EQ(pl.Snapshot().megaflows, 1u) << "expired before its idle time";
    clock.now += 1;
    EXPECT_EQ(pl.Housekeep(), 1u);
    s = pl.Snapshot();
    EXPECT_EQ(s.megaflows, 0u);
    EXPECT_EQ(s.subtables, 0u);
    EXPECT_TRUE(s.subtable.empty());
    EXPECT_EQ(s.stats.megaflows_expired, 2u);
    EXPECT_EQ(pl.Trace(two.ka).layer, "upcall");
    // Hits of expired megaflows stay attributed to their rules.
    ASSERT_EQ(s.rule_hits.size(), 2u);
    EXPECT_EQ(s.rule_hits[0], std::make_pair(uint64_t{1}, uint64_t{51}));
    EXPECT_EQ(s.rule_hits[1], std::make_pair(uint64_t{2}, uint64_t{1}));

    // Back again: an upcall with the right verdict.
    pl.ProcessBurst(both, 2, v);
    EXPECT_EQ(v[0].rule_id, 1u);
    EXPECT_EQ(v[1].rule_id, 2u);
    EXPECT_EQ(pl.stats().upcall_ok, 4u);
    CheckCountersAddUp(pl.stats());
    pl.SetRuleTable(nullptr);
  }
}

TEST(PipelineExpiry, ZeroMaxIdleNeverExpiresAndTheSettingMovesAtRunTime) {
  TwoRules two;
  ManualPipelineClock clock(5000);
  auto p = Pipeline::Create(ConfigHittingAt(Layer::kEmc, 0));
  ASSERT_TRUE(p.ok());
  Pipeline& pl = **p;
  pl.SetClock(&clock);
  pl.SetRuleTable(&two.table);
  Verdict v[2];
  FlowKey both[2] = {two.ka, two.kb};
  pl.ProcessBurst(both, 2, v);
  clock.now += 86400000;
  for (int i = 0; i < 10; ++i) pl.Housekeep(), clock.now += 1;
  pl.ProcessBurst(&two.ka, 1, v);
  EXPECT_EQ(pl.Snapshot().megaflows, 2u);
  EXPECT_EQ(pl.stats().megaflows_expired, 0u);
  pl.SetMegaflowMaxIdleMs(500);
  clock.now += 500;
  pl.ProcessBurst(&two.ka, 1, v);  // ka just used; kb idle for a day
  EXPECT_EQ(pl.Snapshot().megaflows, 1u);
  EXPECT_EQ(pl.stats().megaflows_expired, 1u);
  pl.SetRuleTable(nullptr);
}

// The sweep is bounded: one burst or Housekeep visits at most
// kExpiryPerTick megaflows, however many are idle, and none while the
// clock stands still; all of them go after enough calls.
TEST(PipelineExpiry, SweepsAreBoundedAndCoverEveryMegaflow) {
  constexpr int kFlows = 300;
  RuleTable table;
  std::vector<RuleOp> ops;
  for (int i = 0; i < kFlows; ++i)
    ops.push_back(RuleOp::Insert(
        Ipv4SrcRule(i + 1, 10, 0x0a000000 + (uint32_t(i) << 8), 24, Action::Output(1))));
  ASSERT_TRUE(table.ApplyBatch(ops).ok());
  ManualPipelineClock clock(5000);
  auto p = Pipeline::Create(ConfigHittingAt(Layer::kEmc, 1000));
  ASSERT_TRUE(p.ok());
  Pipeline& pl = **p;
  pl.SetClock(&clock);
  pl.SetRuleTable(&table);
  for (int i = 0; i < kFlows; i += kMaxBurst) {
    FlowKey keys[kMaxBurst];
    Verdict v[kMaxBurst];
    const int n = std::min(kMaxBurst, kFlows - i);
    for (int j = 0; j < n; ++j)
      keys[j] = MakeFiveTupleKey(0x0a000001 + (uint32_t(i + j) << 8), 1, 1, 1, 6);
    pl.ProcessBurst(keys, n, v);
  }
  ASSERT_EQ(pl.Snapshot().megaflows, uint64_t{kFlows});
  clock.now += 2000;
  const FlowKey other = MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6);
  Verdict v;
  pl.ProcessBurst(&other, 1, &v);  // uses (refreshes) flow 0's megaflow
  EXPECT_EQ(pl.stats().megaflows_expired, uint64_t{Pipeline::kExpiryPerTick});
  pl.ProcessBurst(&other, 1, &v);  // same millisecond: no sweep
  EXPECT_EQ(pl.Housekeep(), 0u);
  EXPECT_EQ(pl.stats().megaflows_expired, uint64_t{Pipeline::kExpiryPerTick});
  uint64_t last = pl.stats().megaflows_expired;
  int calls = 0;
  auto sweep = [&] {
    for (int i = 0; i < 100 && pl.Snapshot().megaflows > 1; ++i) {
      clock.now += 1;
      pl.Housekeep();
      ++calls;
      EXPECT_LE(pl.stats().megaflows_expired - last, uint64_t{Pipeline::kExpiryPerTick});
      last = pl.stats().megaflows_expired;
    }
  };
  sweep();
  // Expiry does not allocate: each megaflow has a rule of its own whose hits
  // have nowhere to go in the retired hits yet, so after 256 of them (the
  // pending buffer) the others wait for DrainRetiredHits.
  EXPECT_EQ(pl.stats().megaflows_expired, 256u);
  EXPECT_EQ(pl.Snapshot().megaflows, uint64_t{kFlows - 256});
  pl.DrainRetiredHits();
  sweep();
  EXPECT_EQ(pl.Snapshot().megaflows, 1u);  // flow 0's, used 0 ms ago
  EXPECT_EQ(pl.stats().megaflows_expired, uint64_t{kFlows - 1});
  EXPECT_GE(calls, (kFlows - 1) / int{Pipeline::kExpiryPerTick} - 1);
  // Every packet's hit is still counted to its rule: flow 0 three times.
  const PipelineSnapshot s = pl.Snapshot();
  ASSERT_EQ(s.rule_hits.size(), size_t{kFlows});
  for (int i = 0; i < kFlows; ++i)
    EXPECT_EQ(s.rule_hits[i], std::make_pair(uint64_t(i + 1), uint64_t(i == 0 ? 3 : 1)));
  pl.SetRuleTable(nullptr);
}

// Random rules, rule changes, flows that come and go, a clock that jumps:
// every verdict of every layer combination against the reference, with tiny
// caches and pool so that freed megaflow slots are reused (the case where a
// stale EMC / SMC / CD entry would give a wrong verdict).
struct ExpiryCombo {
  bool emc, smc;
  CdMode cd;
  bool tiny;
  std::string Name() const {
    return absl::StrCat("emc", emc ? "On" : "Off", "_smc", smc ? "On" : "Off", "_cd",
                        std::string(CdModeName(cd)), tiny ? "_tiny" : "");
  }
};

class PipelineExpiryDifferential : public ::testing::TestWithParam<ExpiryCombo> {};

TEST_P(PipelineExpiryDifferential, NoStaleVerdictAcrossExpiry) {
  const ExpiryCombo combo = GetParam();
  uint64_t expired = 0, checked = 0;
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RandomRuleGen gen(seed * 104729);
    std::vector<Rule> live = gen.NextRules(80);
    uint64_t next_id = live.size() + 1;
    auto table = std::make_unique<RuleTable>();
    {
      std::vector<RuleOp> ops;
      for (const Rule& r : live) ops.push_back(RuleOp::Insert(r));
      ASSERT_TRUE(table->ApplyBatch(ops).ok());
    }
    ReferenceClassifier ref(live);
    PipelineConfig cfg;
    cfg.emc = combo.emc;
    cfg.emc_config.insert_inv_prob = 1;
    cfg.smc = combo.smc ? CacheMode::kOn : CacheMode::kOff;
    cfg.cd.mode = combo.cd;
    cfg.cd.min_hits = 8;
    cfg.cd.hold = 1;
    cfg.ranking_interval_ms = 0;
    cfg.megaflow_max_idle_ms = 300;
    if (combo.tiny) {
      cfg.emc_config.entries = 16;
      cfg.smc_config.entries = 16;
      cfg.cd_table.entries = CdConfig::kMinEntries;
      cfg.max_megaflows = 32;
      cfg.dpcls.max_subtables = 8;
    } else {
      cfg.smc_config.entries = 1 << 12;
      cfg.cd_table.entries = 1 << 12;
      cfg.max_megaflows = 4096;
    }
    auto p = Pipeline::Create(cfg);
    ASSERT_TRUE(p.ok()) << p.status();
    Pipeline& pl = **p;
    ManualPipelineClock clock(5000);
    pl.SetClock(&clock);
    pl.SetRuleTable(table.get());

    // Two working sets; the active one changes now and then, so the other
    // one's megaflows expire while its EMC / SMC / CD entries linger.
    std::vector<FlowKey> sets[2];
    for (auto& set : sets)
      for (int i = 0; i < 150; ++i) set.push_back(FlowKey::FromFlow(gen.NextKeyNear(live)));
    int active = 0;
    for (int b = 0; b < 1500; ++b) {
      clock.now += gen.Uniform(40);
      if (b % 200 == 199) active ^= 1;
      if (b % 50 == 49) clock.now += 500;  // everything idle is now expired
      if (b % 20 == 0) pl.Housekeep();
      if (b % 300 == 299) {
        std::vector<RuleOp> ops = gen.NextBatch(5, &live, &next_id);
        const RuleChangeSet changes = MakeRuleChangeSet(*table, ops);
        auto next = std::make_unique<RuleTable>(*table);
        ASSERT_TRUE(next->ApplyBatch(ops).ok());
        ASSERT_TRUE(ref.ApplyBatch(ops).ok());
        pl.SetRuleTable(next.get(), &changes);
        table = std::move(next);
      }
      const int n = 1 + static_cast<int>(gen.Uniform(kMaxBurst));
      FlowKey keys[kMaxBurst];
      // Mostly the active set, sometimes the idle one (its stale entries).
      for (int i = 0; i < n; ++i) {
        const auto& set = sets[gen.Uniform(8) == 0 ? active ^ 1 : active];
        keys[i] = set[gen.Uniform(set.size())];
      }
      Verdict verdicts[kMaxBurst];
      pl.ProcessBurst(keys, n, verdicts);
      for (int i = 0; i < n; ++i) {
        const Rule* want = ref.Lookup(keys[i]);
        ASSERT_EQ(verdicts[i].rule_id, want ? want->id : 0)
            << "burst " << b << " packet " << i << " key " << keys[i].ToString();
        if (want) {
          ASSERT_EQ(verdicts[i].action, want->action);
        }
        ++checked;
      }
      // What any cache would answer now agrees with the reference too.
      if (b % 100 == 0) {
        for (const auto& set : sets) {
          for (const FlowKey& k : set) {
            const PipelineTrace t = pl.Trace(k);
            if (!t.has_megaflow) continue;
            const Rule* want = ref.Lookup(k);
            ASSERT_EQ(t.verdict.rule_id, want ? want->id : 0) << t.layer << " " << k.ToString();
          }
        }
      }
    }
    CheckCountersAddUp(pl.stats());
    expired += pl.stats().megaflows_expired;
    pl.SetRuleTable(nullptr);
  }
  EXPECT_GT(checked, 0u);
  EXPECT_GT(expired, 0u);
}

std::vector<ExpiryCombo> ExpiryCombos() {
  std::vector<ExpiryCombo> v;
  for (bool emc : {false, true})
    for (bool smc : {false, true})
      for (CdMode cd : {CdMode::kOff, CdMode::kOn})
        for (bool tiny : {false, true}) v.push_back({emc, smc, cd, tiny});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Combos, PipelineExpiryDifferential, ::testing::ValuesIn(ExpiryCombos()),
                         [](const auto& info) { return info.param.Name(); });

// /24 rules 10.0.i.0 -> output:i+1, and a key under each.
struct ManyFlows {
  explicit ManyFlows(int n) {
    std::vector<RuleOp> ops;
    for (int i = 0; i < n; ++i) {
      ops.push_back(RuleOp::Insert(Ipv4SrcRule(i + 1, 10, 0x0a000000 + (uint32_t(i) << 8), 24,
                                               Action::Output(uint32_t(i) + 1))));
      keys.push_back(MakeFiveTupleKey(0x0a000001 + (uint32_t(i) << 8), 1, 1, 1, 6));
    }
    EXPECT_TRUE(table.ApplyBatch(ops).ok());
  }
  RuleTable table;
  std::vector<FlowKey> keys;
};

// Classifies every key once and checks each verdict.
void ClassifyAll(Pipeline& pl, const std::vector<FlowKey>& keys, int first = 0) {
  for (size_t i = 0; i < keys.size(); ++i) {
    Verdict v;
    pl.ProcessBurst(&keys[i], 1, &v);
    ASSERT_EQ(v.rule_id, uint64_t(first) + i + 1) << "key " << i;
    ASSERT_EQ(v.action, Action::Output(uint32_t(first + i) + 1));
  }
}

TEST(PipelineCaps, MegaflowCapClassifiesInstallsNothingAndCounts) {
  ManyFlows flows(10);
  PipelineConfig cfg = ConfigHittingAt(Layer::kEmc, 0);
  cfg.max_megaflows = 3;
  auto p = Pipeline::Create(cfg);
  ASSERT_TRUE(p.ok());
  Pipeline& pl = **p;
  pl.SetRuleTable(&flows.table);
  ClassifyAll(pl, flows.keys);
  ClassifyAll(pl, flows.keys);  // the uncached ones upcall again, still right
  PipelineSnapshot s = pl.Snapshot();
  EXPECT_EQ(s.megaflows, 3u);
  EXPECT_EQ(s.stats.upcall_ok, 3u);
  EXPECT_EQ(s.stats.upcall_failed, 14u);
  EXPECT_EQ(s.stats.upcalls_megaflow_cap, 14u);
  EXPECT_EQ(s.stats.upcalls_subtable_cap, 0u);
  CheckCountersAddUp(s.stats);

  // Raised (up to the pool size): two more fit.  Lowered: nothing goes, and
  // nothing more is installed.
  pl.SetMaxMegaflows(5);
  EXPECT_EQ(pl.max_megaflows(), 3u) << "above the pool size of 3";
  pl.SetMaxMegaflows(2);
  EXPECT_EQ(pl.max_megaflows(), 2u);
  ClassifyAll(pl, flows.keys);
  EXPECT_EQ(pl.Snapshot().megaflows, 3u);
  EXPECT_EQ(pl.stats().upcalls_megaflow_cap, 21u);
  pl.SetRuleTable(nullptr);

  ManyFlows more(10);
  cfg.max_megaflows = 10;
  auto q = Pipeline::Create(cfg);
  ASSERT_TRUE(q.ok());
  (*q)->SetMaxMegaflows(4);
  (*q)->SetRuleTable(&more.table);
  ClassifyAll(**q, more.keys);
  EXPECT_EQ((*q)->Snapshot().megaflows, 4u);
  (*q)->SetMaxMegaflows(6);
  ClassifyAll(**q, more.keys);
  EXPECT_EQ((*q)->Snapshot().megaflows, 6u);
  EXPECT_EQ((*q)->stats().upcalls_megaflow_cap, 6u + 4u);
  (*q)->SetRuleTable(nullptr);
}

// Rules on different fields give megaflows of different masks (subtables).
struct ThreeShapes {
  ThreeShapes() {
    EXPECT_TRUE(table
                    .ApplyBatch({RuleOp::Insert(Ipv4SrcRule(1, 10, 0x0a000000, 8, Action::Output(1))),
                                 RuleOp::Insert(Ipv4DstRule(2, 20, 0x0b0b0000, 16, Action::Output(2))),
                                 RuleOp::Insert(Ipv4Rule(3, 1, Action::Output(3)))})
                    .ok());
  }
  RuleTable table;
  // Rule 1, rule 2 and rule 3's keys, on ports 1 and 2.
  FlowKey Key(int rule, uint32_t port) const {
    switch (rule) {
      case 1: return MakeFiveTupleKey(0x0a000001, 0x01010101, 1, 1, 6, port);
      case 2: return MakeFiveTupleKey(0x01010101, 0x0b0b0001, 1, 1, 6, port);
      default: return MakeFiveTupleKey(0x01010101, 0x01010101, 1, 1, 6, port);
    }
  }
};

TEST(PipelineCaps, SubtableCapPerPortClassifiesInstallsNothingAndCounts) {
  ThreeShapes shapes;
  // Without the cap: how many subtables one port needs for the three keys.
  auto free_pl = Pipeline::Create(ConfigHittingAt(Layer::kEmc, 0));
  ASSERT_TRUE(free_pl.ok());
  (*free_pl)->SetRuleTable(&shapes.table);
  for (int r = 1; r <= 3; ++r) {
    const FlowKey k = shapes.Key(r, 1);
    Verdict v;
    (*free_pl)->ProcessBurst(&k, 1, &v);
  }
  const uint64_t needed = (*free_pl)->Snapshot().subtables;
  ASSERT_GE(needed, 2u) << "the shapes share a mask: no cap to test";
  (*free_pl)->SetRuleTable(nullptr);

  PipelineConfig cfg = ConfigHittingAt(Layer::kEmc, 0);
  cfg.max_subtables_per_port = 1;
  auto p = Pipeline::Create(cfg);
  ASSERT_TRUE(p.ok());
  Pipeline& pl = **p;
  pl.SetRuleTable(&shapes.table);
  for (int round = 0; round < 2; ++round) {
    for (uint32_t port : {1u, 2u}) {
      for (int r = 1; r <= 3; ++r) {
        const FlowKey k = shapes.Key(r, port);
        Verdict v;
        pl.ProcessBurst(&k, 1, &v);
        ASSERT_EQ(v.rule_id, uint64_t(r)) << "port " << port;
        ASSERT_EQ(v.action, Action::Output(uint32_t(r)));
      }
    }
  }
  PipelineSnapshot s = pl.Snapshot();
  EXPECT_EQ(s.subtables, 2u);  // one per port
  std::set<uint32_t> ports;
  for (const SubtableInfo& t : s.subtable) ports.insert(t.in_port);
  EXPECT_EQ(ports, (std::set<uint32_t>{1, 2}));
  EXPECT_GT(s.stats.upcalls_subtable_cap, 0u);
  EXPECT_EQ(s.stats.upcalls_subtable_cap, s.stats.upcall_failed);
  EXPECT_EQ(s.stats.upcalls_megaflow_cap, 0u);
  CheckCountersAddUp(s.stats);

  // Raised at run time: the port takes what it needs, nothing more fails.
  pl.SetMaxSubtablesPerPort(1024);
  const uint64_t failed = pl.stats().upcall_failed;
  for (int round = 0; round < 2; ++round)
    for (int r = 1; r <= 3; ++r) {
      const FlowKey k = shapes.Key(r, 1);
      Verdict v;
      pl.ProcessBurst(&k, 1, &v);
      ASSERT_EQ(v.rule_id, uint64_t(r));
    }
  EXPECT_EQ(pl.stats().upcall_failed, failed);
  EXPECT_EQ(pl.Snapshot().subtables, needed + 1);
  pl.SetRuleTable(nullptr);
}

// Random rules with both caps small: every verdict right, the counters add
// up, the caps hold.
TEST(PipelineCaps, RandomTrafficUnderTightCapsMatchesTheReference) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RandomRuleGen gen(seed * 7717);
    std::vector<Rule> rules = gen.NextRules(100);
    RuleTable table;
    std::vector<RuleOp> ops;
    for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));
    ASSERT_TRUE(table.ApplyBatch(ops).ok());
    ReferenceClassifier ref(rules);
    PipelineConfig cfg;
    cfg.smc = CacheMode::kOn;
    cfg.cd.mode = CdMode::kOn;
    cfg.max_megaflows = 64;
    auto p = Pipeline::Create(cfg);
    ASSERT_TRUE(p.ok());
    Pipeline& pl = **p;
    pl.SetMaxMegaflows(20);
    pl.SetMaxSubtablesPerPort(3);
    pl.SetRuleTable(&table);
    std::vector<FlowKey> flows;
    for (int i = 0; i < 300; ++i) flows.push_back(FlowKey::FromFlow(gen.NextKeyNear(rules)));
    for (int b = 0; b < 400; ++b) {
      const int n = 1 + static_cast<int>(gen.Uniform(kMaxBurst));
      FlowKey keys[kMaxBurst];
      for (int i = 0; i < n; ++i) keys[i] = flows[gen.Uniform(flows.size())];
      Verdict v[kMaxBurst];
      pl.ProcessBurst(keys, n, v);
      for (int i = 0; i < n; ++i) {
        const Rule* want = ref.Lookup(keys[i]);
        ASSERT_EQ(v[i].rule_id, want ? want->id : 0) << keys[i].ToString();
      }
    }
    const PipelineSnapshot s = pl.Snapshot();
    CheckCountersAddUp(s.stats);
    EXPECT_LE(s.megaflows, 20u);
    EXPECT_GT(s.stats.upcalls_megaflow_cap + s.stats.upcalls_subtable_cap, 0u);
    std::map<uint32_t, int> per_port;
    for (const SubtableInfo& t : s.subtable) ++per_port[t.in_port];
    for (const auto& [port, n] : per_port) EXPECT_LE(n, 3) << "port " << port;
    pl.SetRuleTable(nullptr);
  }
}

TEST(PipelineCaps, ZeroSubtablesPerPortIsRejectedNamingTheField) {
  PipelineConfig cfg;
  cfg.max_subtables_per_port = 0;
  auto p = Pipeline::Create(cfg);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("max_subtables_per_port"), std::string::npos);
}

}  // namespace
}  // namespace flowclass
