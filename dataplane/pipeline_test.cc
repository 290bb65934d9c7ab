// Pipeline tests: every combination of EMC / SMC / CD against the reference
// classifier with rule changes between bursts, burst sizes 0..32 with
// overrun markers, counters that add up, failed upcalls, constant hashes.
#include "dataplane/pipeline.h"

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/random_rules.h"
#include "tests/common/reference_classifier.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int kScale = 4;  // sanitizers are ~10x slower
#else
constexpr int kScale = 1;
#endif

uint64_t ConstantHash(const uint64_t*, int, uint64_t) { return 0x1234; }

struct Combo {
  bool emc;
  bool smc;
  CdMode cd;
  bool revalidate;
  bool tiny;        // tiny caches and megaflow limit: collisions, failed upcalls
  bool const_hash;  // every table's hash is a constant
  bool targeted = true;  // pass the batch's RuleChangeSet to SetRuleTable
  // smc auto, its controller ending a window every 7 bursts and probing
  // every few windows: the SMC turns on and off (keeping its entries) while
  // the verdicts are checked.  `smc` is ignored.
  bool smc_auto = false;
  std::string Name() const {
    return absl::StrCat("emc", emc ? "On" : "Off", "_smc", smc_auto ? "Auto" : smc ? "On" : "Off",
                        "_cd", std::string(CdModeName(cd)), revalidate ? "_revalidate" : "_flush",
                        tiny ? "_tiny" : "", const_hash ? "_consthash" : "",
                        targeted ? "" : "_fullcheck");
  }
};

PipelineConfig ConfigFor(const Combo& c) {
  PipelineConfig cfg;
  cfg.emc = c.emc;
  cfg.emc_config.insert_inv_prob = 2;  // make the EMC matter in short runs
  cfg.smc = c.smc_auto ? CacheMode::kAuto : c.smc ? CacheMode::kOn : CacheMode::kOff;
  cfg.smc_window_ms = 0;  // RunSmcWindow only
  cfg.smc_controller = {.min_packets = 1,
                        .start_windows = 1,
                        .warmup_windows = 1,
                        .probe_pairs = 1,
                        .reprobe_windows = 2,
                        .max_backoff = 0};
  cfg.cd.mode = c.cd;
  cfg.cd.min_hits = 8;  // let the adaptive controller decide in short runs
  cfg.cd.hold = 1;
  cfg.ranking_interval_ms = 0;  // rank / decide every 16 bursts
  cfg.revalidate = c.revalidate;
  if (c.tiny) {
    cfg.emc_config.entries = 16;
    cfg.smc_config.entries = 16;
    cfg.cd_table.entries = CdConfig::kMinEntries;
    cfg.max_megaflows = 24;
    cfg.dpcls.max_subtables = 6;
  } else {
    cfg.smc_config.entries = 1 << 12;
    cfg.cd_table.entries = 1 << 12;
    cfg.max_megaflows = 4096;
  }
  if (c.const_hash) cfg.dpcls.hash_override = ConstantHash;
  return cfg;
}

void CheckCountersAddUp(const PmdStats& s) {
  EXPECT_EQ(s.packets, s.emc_hits + s.smc_hits + s.megaflow_hits + s.upcall_ok +
                           s.upcall_failed);
  EXPECT_LE(s.cd_hits, s.megaflow_hits);
  EXPECT_LE(s.no_match, s.packets);
}

class PipelineDifferential : public ::testing::TestWithParam<Combo> {};

TEST_P(PipelineDifferential, MatchesReferenceThroughRuleChanges) {
  const Combo combo = GetParam();
  uint64_t checked = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RandomRuleGen gen(seed * 7919 + (combo.tiny ? 1 : 0));
    std::vector<Rule> live = gen.NextRules(120);
    uint64_t next_id = live.size() + 1;

    auto table = std::make_unique<RuleTable>();
    {
      std::vector<RuleOp> ops;
      for (const Rule& r : live) ops.push_back(RuleOp::Insert(r));
      ASSERT_TRUE(table->ApplyBatch(ops).ok());
    }
    ReferenceClassifier ref(live);

    absl::StatusOr<std::unique_ptr<Pipeline>> p = Pipeline::Create(ConfigFor(combo));
    ASSERT_TRUE(p.ok()) << p.status();
    Pipeline& pipeline = **p;
    pipeline.SetRuleTable(table.get());

    // A working set of flows so that the caches see repeats.
    std::vector<FlowKey> flows;
    for (int i = 0; i < 600; ++i) {
      FlowKey k = FlowKey::FromFlow(gen.NextKeyNear(live));
      if (combo.const_hash) k.hash = 42;  // EMC, SMC and CD all collide
      flows.push_back(k);
    }

    const int bursts = 1500 / kScale;
    for (int b = 0; b < bursts; ++b) {
      if (b % 100 == 99) {
        // A rule change between bursts: copy, apply, swap, revalidate.
        std::vector<RuleOp> ops = gen.NextBatch(6, &live, &next_id);
        const RuleChangeSet changes = MakeRuleChangeSet(*table, ops);
        auto next = std::make_unique<RuleTable>(*table);
        ASSERT_TRUE(next->ApplyBatch(ops).ok());
        ASSERT_TRUE(ref.ApplyBatch(ops).ok());
        pipeline.SetRuleTable(next.get(), combo.targeted ? &changes : nullptr);
        table = std::move(next);
        // New rules bring new flows.
        for (int i = 0; i < 20; ++i) {
          FlowKey k = FlowKey::FromFlow(gen.NextKeyNear(live));
          if (combo.const_hash) k.hash = 42;
          flows[gen.Uniform(flows.size())] = k;
        }
      }
      const int n = 1 + static_cast<int>(gen.Uniform(kMaxBurst));
      FlowKey keys[kMaxBurst];
      for (int i = 0; i < n; ++i) keys[i] = flows[gen.Uniform(flows.size())];
      Verdict verdicts[kMaxBurst];
      pipeline.ProcessBurst(keys, n, verdicts);
      if (combo.smc_auto && b % 7 == 6) pipeline.RunSmcWindow();
      for (int i = 0; i < n; ++i) {
        const Rule* want = ref.Lookup(keys[i]);
        const uint64_t want_id = want ? want->id : 0;
        ASSERT_EQ(verdicts[i].rule_id, want_id)
            << "burst " << b << " packet " << i << " key " << keys[i].ToString();
        if (want) {
          ASSERT_EQ(verdicts[i].action, want->action);
        }
        ++checked;
      }
    }
    const PmdStats& s = pipeline.stats();
    CheckCountersAddUp(s);
    if (combo.emc && !combo.tiny) {
      EXPECT_GT(s.emc_hits, 0u);
    }
    if ((combo.smc || combo.smc_auto) && !combo.emc && !combo.tiny) {
      EXPECT_GT(s.smc_hits, 0u);
    }
    if (combo.smc_auto) {
      // Probes every few windows (a window every 7 bursts; about 5 windows
      // a probe with this config): at least one in 10 windows, whatever
      // kScale (the sanitizer build runs a quarter of the bursts).
      EXPECT_GE(pipeline.Snapshot().smc_probes, static_cast<uint64_t>(bursts / 7 / 10));
    }
    if (combo.cd == CdMode::kOn && !combo.emc && !combo.smc && !combo.tiny) {
      EXPECT_GT(s.cd_hits, 0u);
    }
    if (combo.tiny) {
      EXPECT_GT(s.upcall_failed, 0u);
    }
    pipeline.SetRuleTable(nullptr);  // `table` dies before the pipeline
  }
  EXPECT_GT(checked, 0u);
}

std::vector<Combo> AllCombos() {
  std::vector<Combo> v;
  for (bool emc : {false, true})
    for (bool smc : {false, true})
      for (CdMode cd : {CdMode::kOff, CdMode::kOn, CdMode::kAuto})
        v.push_back({emc, smc, cd, /*revalidate=*/true, false, false});
  // Flush instead of revalidation; tiny capacities; constant hashes.
  v.push_back({true, true, CdMode::kOn, /*revalidate=*/false, false, false});
  v.push_back({true, true, CdMode::kOn, true, /*tiny=*/true, false});
  v.push_back({false, false, CdMode::kOff, true, /*tiny=*/true, false});
  v.push_back({true, true, CdMode::kOn, true, false, /*const_hash=*/true});
  v.push_back({false, true, CdMode::kAuto, true, true, /*const_hash=*/true});
  // Full revalidation (no change set).
  v.push_back({true, false, CdMode::kOff, true, false, false, /*targeted=*/false});
  v.push_back({false, false, CdMode::kOff, true, false, false, /*targeted=*/false});
  // smc auto, switching as it probes.
  v.push_back({false, false, CdMode::kAuto, true, false, false, true, /*smc_auto=*/true});
  v.push_back({true, false, CdMode::kOn, true, /*tiny=*/true, false, true, /*smc_auto=*/true});
  v.push_back({false, false, CdMode::kOff, true, false, /*const_hash=*/true, true,
               /*smc_auto=*/true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Combos, PipelineDifferential,
                         ::testing::ValuesIn(AllCombos()),
                         [](const auto& info) { return info.param.Name(); });

TEST(Pipeline, BurstsOfEverySizeWriteOnlyTheirVerdicts) {
  RandomRuleGen gen(99);
  std::vector<Rule> rules = gen.NextRules(40);
  RuleTable table;
  std::vector<RuleOp> ops;
  for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));
  ASSERT_TRUE(table.ApplyBatch(ops).ok());
  ReferenceClassifier ref(rules);
  PipelineConfig cfg;
  cfg.smc = CacheMode::kOn;
  cfg.cd.mode = CdMode::kOn;
  auto p = Pipeline::Create(cfg);
  ASSERT_TRUE(p.ok());
  (*p)->SetRuleTable(&table);

  const Verdict marker{0xdeadbeefULL, Action::Output(0xbeef)};
  for (int round = 0; round < 3; ++round) {  // cold, then warm caches
    for (int n = 0; n <= kMaxBurst; ++n) {
      FlowKey keys[kMaxBurst + 1];
      for (int i = 0; i <= kMaxBurst; ++i) {
        keys[i] = FlowKey::FromFlow(gen.NextKeyNear(rules));
      }
      Verdict out[kMaxBurst + 1];
      for (Verdict& v : out) v = marker;
      const uint64_t before = (*p)->stats().packets;
      (*p)->ProcessBurst(keys, n, out);
      EXPECT_EQ((*p)->stats().packets - before, static_cast<uint64_t>(n));
      for (int i = 0; i < n; ++i) {
        const Rule* want = ref.Lookup(keys[i]);
        EXPECT_EQ(out[i].rule_id, want ? want->id : 0) << "n=" << n << " i=" << i;
      }
      for (int i = n; i <= kMaxBurst; ++i) {
        EXPECT_EQ(out[i], marker) << "overrun at " << i << " for n=" << n;
      }
    }
  }
  CheckCountersAddUp((*p)->stats());
}

// megaflows = false: every packet is a slow-path lookup (upcall_ok), nothing
// is cached at any layer, and the verdicts (rule and action) are those of the
// default pipeline, packet by packet, cold and warm, through rule changes.
TEST(Pipeline, MegaflowsOffClassifiesEveryPacketInTheSlowPath) {
  RandomRuleGen gen(4242);
  std::vector<Rule> rules = gen.NextRules(200);
  RuleTable table;
  std::vector<RuleOp> ops;
  for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));
  ASSERT_TRUE(table.ApplyBatch(ops).ok());
  PipelineConfig on_cfg;
  on_cfg.smc = CacheMode::kOn;
  on_cfg.emc_config.insert_inv_prob = 1;
  PipelineConfig off_cfg = on_cfg;  // EMC, SMC on: megaflows off must win
  off_cfg.megaflows = false;
  off_cfg.cd.mode = CdMode::kOn;
  auto on = Pipeline::Create(on_cfg);
  auto off = Pipeline::Create(off_cfg);
  ASSERT_TRUE(on.ok() && off.ok());
  (*on)->SetRuleTable(&table);
  (*off)->SetRuleTable(&table);
  EXPECT_EQ((*off)->parse_prefetch().base, nullptr);  // no EMC to prefetch
  // The highest-priority rule deleted.
  RuleTable changed(table);
  ASSERT_TRUE(changed.ApplyBatch({RuleOp::Delete(table.Rules().front()->id)}).ok());

  std::vector<FlowKey> keys;
  for (int i = 0; i < 512; ++i) keys.push_back(FlowKey::FromFlow(gen.NextKeyNear(rules)));
  uint64_t packets = 0;
  for (int pass = 0; pass < 3; ++pass) {  // cold, then what "on" cached
    for (size_t i = 0; i < keys.size(); i += kMaxBurst) {
      Verdict von[kMaxBurst], voff[kMaxBurst];
      const bool uon = (*on)->ProcessBurst(&keys[i], kMaxBurst, von);
      const bool uoff = (*off)->ProcessBurst(&keys[i], kMaxBurst, voff);
      EXPECT_EQ(uon, uoff);
      for (int k = 0; k < kMaxBurst; ++k) {
        EXPECT_EQ(voff[k], von[k]) << "pass " << pass << " key " << i + k;
      }
      packets += kMaxBurst;
    }
    // A rule change in between: the slow path sees the new table at once.
    if (pass == 0) {
      (*on)->SetRuleTable(&changed);
      (*off)->SetRuleTable(&changed);
    }
  }
  const PmdStats& s = (*off)->stats();
  EXPECT_EQ(s.packets, packets);
  EXPECT_EQ(s.upcall_ok, packets);
  EXPECT_EQ(s.emc_hits + s.smc_hits + s.megaflow_hits + s.cd_hits + s.upcall_failed, 0u);
  EXPECT_EQ(s.subtable_lookups, 0u);
  EXPECT_GT(s.upcall_cycles, 0u);
  CheckCountersAddUp(s);
  const PipelineSnapshot snap = (*off)->Snapshot();
  EXPECT_EQ(snap.megaflows, 0u);
  EXPECT_EQ(snap.subtables, 0u);
  EXPECT_EQ(snap.emc_occupancy, 0u);
  EXPECT_EQ(snap.smc_occupancy, 0u);
  EXPECT_EQ(snap.cd_occupancy, 0u);
  EXPECT_TRUE(snap.rule_hits.empty());
  EXPECT_EQ((*off)->Trace(keys[0]).layer, "upcall");
  // The default pipeline did cache (the comparison was not of two slow paths).
  EXPECT_GT((*on)->stats().emc_hits, 0u);
  EXPECT_GT((*on)->Snapshot().megaflows, 0u);
}

TEST(Pipeline, NoTableMeansNoMatchAndNothingCachedWrongly) {
  auto p = Pipeline::Create();
  ASSERT_TRUE(p.ok());
  FlowKey k = MakeFiveTupleKey(0x0a000001, 0x0a000002, 1, 2, 6);
  Verdict v;
  (*p)->ProcessBurst(&k, 1, &v);
  EXPECT_EQ(v.rule_id, 0u);
  EXPECT_EQ((*p)->stats().no_match, 1u);

  // Now a table that matches: the "no rule" megaflow must not survive.
  const Rule r = Ipv4Rule(7, 1, Action::Output(3));
  RuleTable t;
  ASSERT_TRUE(t.ApplyBatch({RuleOp::Insert(r)}).ok());
  (*p)->SetRuleTable(&t);
  (*p)->ProcessBurst(&k, 1, &v);
  EXPECT_EQ(v.rule_id, 7u);
  EXPECT_EQ(v.action, Action::Output(3));
  (*p)->SetRuleTable(nullptr);
}

// Two disjoint rules in a table, 1 (10/8 -> output:1) and 2 (11/8 ->
// output:2), and a key under each.
struct TwoDisjointRules {
  TwoDisjointRules() {
    EXPECT_TRUE(table.ApplyBatch({RuleOp::Insert(a), RuleOp::Insert(b)}).ok());
  }
  const Rule a = Ipv4SrcRule(1, 10, 0x0a000000, 8, Action::Output(1));
  const Rule b = Ipv4SrcRule(2, 10, 0x0b000000, 8, Action::Output(2));
  RuleTable table;
  FlowKey keys[2] = {MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6),
                     MakeFiveTupleKey(0x0b000001, 1, 1, 1, 6)};
};

// The dataplane's step from `before`: a copy with `ops` applied, and the
// change set that describes it (what SetRuleTable(&table, &changes) takes).
struct NextTable {
  NextTable(const RuleTable& before, const std::vector<RuleOp>& ops)
      : table(before), changes(MakeRuleChangeSet(before, ops)) {
    EXPECT_TRUE(table.ApplyBatch(ops).ok());
  }
  RuleTable table;
  RuleChangeSet changes;
};

// A pipeline whose EMC takes every flow at its upcall (insert_inv_prob 1),
// CD off, classifying by `table`.
absl::StatusOr<std::unique_ptr<Pipeline>> EmcEveryFlow(const RuleTable* table) {
  PipelineConfig cfg;
  cfg.emc_config.insert_inv_prob = 1;
  cfg.cd.mode = CdMode::kOff;
  absl::StatusOr<std::unique_ptr<Pipeline>> p = Pipeline::Create(cfg);
  if (p.ok()) (*p)->SetRuleTable(table);
  return p;
}

TEST(Pipeline, EmcHitsCountPerRuleInRunsAndAlone) {
  // EMC hits add up per megaflow in runs (ProcessBurst): bursts whose hits
  // alternate between rules, end in a run, or hit one rule throughout must
  // all count every packet to its rule.
  TwoDisjointRules two;
  auto p = EmcEveryFlow(&two.table);
  ASSERT_TRUE(p.ok());
  Verdict v[kMaxBurst];
  (*p)->ProcessBurst(two.keys, 2, v);  // upcalls: one hit each
  // 0 = rule 1's key, 1 = rule 2's: an alternating burst, runs ending in
  // each rule, and a burst of one rule only.
  const std::vector<std::vector<int>> bursts = {
      {0, 1, 0, 1, 0}, {0, 0, 0, 1, 1}, {1, 1, 0, 0, 0, 0}, {1, 1, 1}};
  uint64_t want[2] = {1, 1};
  for (const std::vector<int>& b : bursts) {
    FlowKey keys[kMaxBurst];
    for (size_t i = 0; i < b.size(); ++i) {
      keys[i] = two.keys[b[i]];
      ++want[b[i]];
    }
    (*p)->ProcessBurst(keys, static_cast<int>(b.size()), v);
    for (size_t i = 0; i < b.size(); ++i)
      EXPECT_EQ(v[i].rule_id, b[i] == 0 ? 1u : 2u);
  }
  EXPECT_EQ((*p)->stats().emc_hits, want[0] + want[1] - 2);
  using Hits = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ((*p)->Snapshot().rule_hits, (Hits{{1, want[0]}, {2, want[1]}}));
  (*p)->SetRuleTable(nullptr);
}

TEST(Pipeline, AdaptiveEmcStopsLookingWhileItMissesAndResumesOnHits) {
  // Every key a new 5-tuple of rule 1's /8: the megaflow answers, the EMC
  // never hits.  With the gate (pipeline.emc_adaptive, the default) most
  // bursts neither look the EMC up nor insert into it, and the parser is
  // not asked to prefetch for them; without it every miss is inserted.
  TwoDisjointRules two;
  for (const bool adaptive : {true, false}) {
    SCOPED_TRACE(adaptive ? "adaptive" : "not adaptive");
    PipelineConfig cfg;
    cfg.emc_config.insert_inv_prob = 1;  // every looked-up miss is inserted
    cfg.emc_adaptive = adaptive;
    auto p = Pipeline::Create(cfg);
    ASSERT_TRUE(p.ok());
    (*p)->SetRuleTable(&two.table);
    FlowKey keys[kMaxBurst];
    Verdict v[kMaxBurst];
    uint32_t src = 0x0a000001;
    int prefetching = 0;
    for (int b = 0; b < 512; ++b) {
      for (FlowKey& k : keys) k = MakeFiveTupleKey(src++, 2, 3, 4, 6);
      prefetching += (*p)->parse_prefetch().base != nullptr;
      (*p)->ProcessBurst(keys, kMaxBurst, v);
      for (const Verdict& x : v) ASSERT_EQ(x.rule_id, 1u);
    }
    const PipelineSnapshot s = (*p)->Snapshot();
    EXPECT_EQ(s.stats.emc_hits, 0u);
    EXPECT_EQ(s.emc_skipping, adaptive);
    if (adaptive) {
      // The first window (64 bursts) and 1 burst in 8 after it.
      EXPECT_LT(prefetching, 64 + 512 / 8 + 8);
      EXPECT_LT(s.emc_occupancy, s.emc_entries / 2);
    } else {
      EXPECT_EQ(prefetching, 512);
      EXPECT_GT(s.emc_occupancy, s.emc_entries * 3 / 4);
    }
    // Now the same 32 flows over and over: the sampled bursts insert them,
    // hit, and the EMC is looked up on every burst again.
    for (FlowKey& k : keys) k = MakeFiveTupleKey(src++, 2, 3, 4, 6);
    for (int b = 0; b < 512; ++b) {
      (*p)->ProcessBurst(keys, kMaxBurst, v);
      for (const Verdict& x : v) ASSERT_EQ(x.rule_id, 1u);
    }
    EXPECT_GT((*p)->stats().emc_hits, 400u * kMaxBurst);
    EXPECT_FALSE((*p)->Snapshot().emc_skipping);
    (*p)->SetRuleTable(nullptr);
  }
}

TEST(Pipeline, AdaptiveEmcWarmsAsFastAsWithoutTheGate) {
  // 2,000 flows over and over with the default 1-in-100 inserts: the EMC is
  // cold at first (the gate closes in its first windows) and warms over tens
  // of passes.  The gate's sampled bursts insert for the bursts they stand
  // for, so the EMC fills as fast per packet and the gate reopens: over the
  // run it must serve nearly as many packets as an ungated EMC.
  TwoDisjointRules two;
  std::vector<FlowKey> flows;
  for (uint32_t f = 0; f < 2000; ++f)
    flows.push_back(MakeFiveTupleKey(0x0a000001 + f, 2, 3, 4, 6));
  uint64_t hits[2] = {0, 0};
  for (const bool adaptive : {false, true}) {
    PipelineConfig cfg;
    cfg.emc_adaptive = adaptive;
    auto p = Pipeline::Create(cfg);
    ASSERT_TRUE(p.ok());
    (*p)->SetRuleTable(&two.table);
    Verdict v[kMaxBurst];
    for (int pass = 0; pass < 60; ++pass) {
      for (size_t i = 0; i < flows.size(); i += kMaxBurst) {
        const int n = static_cast<int>(std::min<size_t>(kMaxBurst, flows.size() - i));
        (*p)->ProcessBurst(&flows[i], n, v);
        for (int j = 0; j < n; ++j) ASSERT_EQ(v[j].rule_id, 1u);
      }
    }
    hits[adaptive] = (*p)->stats().emc_hits;
    if (adaptive) {
      EXPECT_FALSE((*p)->Snapshot().emc_skipping);
    }
    (*p)->SetRuleTable(nullptr);
  }
  EXPECT_GT(hits[0], 60u * 2000 / 5);  // the ungated EMC does warm up
  EXPECT_GT(hits[1], hits[0] * 3 / 4) << "gated " << hits[1] << ", ungated " << hits[0];
}

// pipeline.smc auto: the pipeline runs the cost controller's schedule (a
// window of the chosen state, a warm-up of the other, then the two
// alternating) and the SMC answers exactly in the windows it is on; the
// entries it made survive a window off (no flush: the next probe finds them
// warm).  Which state wins depends on the cycles measured, so the decision
// itself is the controller's test (cache_cost_controller_test.cc); here the
// snapshot must report it.  Forcing on or off stops the schedule.
TEST(Pipeline, SmcAutoFollowsTheCostControllersSchedule) {
  TwoDisjointRules two;
  std::vector<FlowKey> flows;
  for (uint32_t f = 0; f < 256; ++f) flows.push_back(MakeFiveTupleKey(0x0a000001 + f, 2, 3, 4, 6));
  PipelineConfig cfg;
  cfg.emc = false;  // every packet reaches the SMC
  cfg.cd.mode = CdMode::kOff;
  cfg.smc_window_ms = 0;  // windows end at RunSmcWindow only
  cfg.smc_controller = {.min_packets = 1, .start_windows = 1, .warmup_windows = 1,
                        .probe_pairs = 1};
  ASSERT_EQ(cfg.smc, CacheMode::kAuto);  // the default
  auto p = Pipeline::Create(cfg);
  ASSERT_TRUE(p.ok());
  (*p)->SetRuleTable(&two.table);
  // Two passes over the flows; the SMC hits they got.
  auto window = [&] {
    const uint64_t before = (*p)->stats().smc_hits;
    Verdict v[kMaxBurst];
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < flows.size(); i += kMaxBurst) {
        (*p)->ProcessBurst(&flows[i], kMaxBurst, v);
        for (const Verdict& x : v) EXPECT_EQ(x.rule_id, 1u);
      }
    const uint64_t hits = (*p)->stats().smc_hits - before;
    (*p)->RunSmcWindow();
    return hits;
  };
  EXPECT_FALSE((*p)->smc_enabled());
  EXPECT_EQ(window(), 0u);  // start_windows: off, as chosen
  EXPECT_TRUE((*p)->smc_enabled());
  PipelineSnapshot s = (*p)->Snapshot();
  EXPECT_TRUE(s.smc_probing);
  EXPECT_FALSE(s.smc_enabled);  // a probe does not move the chosen state
  EXPECT_GT(window(), 0u);      // warm-up: the second pass hits
  EXPECT_FALSE((*p)->smc_enabled());
  EXPECT_EQ(window(), 0u);  // the chosen state, off
  EXPECT_TRUE((*p)->smc_enabled());
  EXPECT_EQ(window(), 2 * flows.size());  // on again, and still warm
  // A vote to switch is confirmed by a second probe (one more pair).
  if ((*p)->Snapshot().smc_probing) {
    EXPECT_EQ(window(), 0u);
    EXPECT_EQ(window(), 2 * flows.size());
  }
  s = (*p)->Snapshot();
  EXPECT_FALSE(s.smc_probing);
  EXPECT_GE(s.smc_probes, 1u);
  EXPECT_LE(s.smc_probes, 2u);
  EXPECT_EQ(s.smc_enabled, (*p)->smc_enabled());
  EXPECT_EQ(s.smc_switches, s.smc_enabled ? 1u : 0u);
  const uint64_t probes = s.smc_probes;
  EXPECT_NE(Pipeline::FormatStats(s).find(
                absl::StrCat("smc state: ", s.smc_enabled ? "on" : "off", " (switches ")),
            std::string::npos);

  // Forced: the windows change nothing; off empties the SMC.
  (*p)->SetSmcMode(CacheMode::kOff);
  EXPECT_EQ((*p)->Snapshot().smc_occupancy, 0u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(window(), 0u);
  EXPECT_FALSE((*p)->smc_enabled());
  (*p)->SetSmcMode(CacheMode::kOn);
  for (int i = 0; i < 4; ++i) EXPECT_GE(window(), flows.size());
  EXPECT_TRUE((*p)->smc_enabled());
  EXPECT_EQ((*p)->Snapshot().smc_probes, probes);
  (*p)->SetRuleTable(nullptr);
}

TEST(Pipeline, ProcessBurstSaysWhenEveryVerdictIsTheSame) {
  // The PMD sends a burst as it came when ProcessBurst says all packets are
  // treated alike (here: the same rule, as the two rules' actions differ):
  // that must hold for EMC hits, upcalls and their mix, and fail for one odd
  // packet anywhere in the burst.
  TwoDisjointRules two;
  auto p = EmcEveryFlow(&two.table);
  ASSERT_TRUE(p.ok());
  Verdict v[kMaxBurst];
  EXPECT_FALSE((*p)->ProcessBurst(two.keys, 0, v));
  FlowKey same[3] = {two.keys[0], two.keys[0], two.keys[0]};
  EXPECT_TRUE((*p)->ProcessBurst(same, 3, v));   // upcall, then its megaflow
  EXPECT_TRUE((*p)->ProcessBurst(same, 3, v));   // EMC hits
  EXPECT_FALSE((*p)->ProcessBurst(two.keys, 2, v));  // upcall of rule 2
  for (int odd = 0; odd < 4; ++odd) {
    FlowKey keys[4] = {two.keys[0], two.keys[0], two.keys[0], two.keys[0]};
    keys[odd] = two.keys[1];
    EXPECT_FALSE((*p)->ProcessBurst(keys, 4, v)) << "odd packet at " << odd;
  }
  // Below the EMC too: a fresh key of rule 1 (upcall) among EMC hits.
  FlowKey mixed[3] = {two.keys[0], MakeFiveTupleKey(0x0a000002, 1, 1, 1, 6), two.keys[0]};
  EXPECT_TRUE((*p)->ProcessBurst(mixed, 3, v));
  FlowKey mixed_odd[3] = {two.keys[0], two.keys[0], MakeFiveTupleKey(0x0b000002, 1, 1, 1, 6)};
  EXPECT_FALSE((*p)->ProcessBurst(mixed_odd, 3, v));
  (*p)->SetRuleTable(nullptr);
}

TEST(Pipeline, ProcessBurstComparesTreatmentNotRules) {
  // What the PMD does with a packet is its action, and whether a rule
  // matched (no-match is counted apart): two rules with one action make a
  // uniform burst, a drop rule and no match do not, though both drop.
  RuleTable table;
  ASSERT_TRUE(table
                  .ApplyBatch({RuleOp::Insert(Ipv4SrcRule(1, 10, 0x0a000000, 8, Action::Output(1))),
                               RuleOp::Insert(Ipv4SrcRule(2, 10, 0x0b000000, 8, Action::Output(1))),
                               RuleOp::Insert(Ipv4SrcRule(3, 10, 0x0c000000, 8, Action::Drop()))})
                  .ok());
  const FlowKey a = MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6);
  const FlowKey b = MakeFiveTupleKey(0x0b000001, 1, 1, 1, 6);
  const FlowKey dropped = MakeFiveTupleKey(0x0c000001, 1, 1, 1, 6);
  const FlowKey unmatched = MakeFiveTupleKey(0x0d000001, 1, 1, 1, 6);
  auto p = EmcEveryFlow(&table);
  ASSERT_TRUE(p.ok());
  Verdict v[kMaxBurst];
  for (int pass = 0; pass < 2; ++pass) {  // upcalls, then EMC hits
    SCOPED_TRACE(pass);
    const FlowKey one_action[4] = {a, b, b, a};
    EXPECT_TRUE((*p)->ProcessBurst(one_action, 4, v));
    EXPECT_EQ(v[0].rule_id, 1u);
    EXPECT_EQ(v[1].rule_id, 2u);
    const FlowKey drops[2] = {dropped, unmatched};
    EXPECT_FALSE((*p)->ProcessBurst(drops, 2, v));
    EXPECT_EQ(v[0].rule_id, 3u);
    EXPECT_EQ(v[1].rule_id, 0u);
    const FlowKey no_rule[2] = {unmatched, unmatched};
    EXPECT_TRUE((*p)->ProcessBurst(no_rule, 2, v));
    const FlowKey by_rule[2] = {dropped, dropped};
    EXPECT_TRUE((*p)->ProcessBurst(by_rule, 2, v));
  }
  (*p)->SetRuleTable(nullptr);
}

TEST(Pipeline, RevalidationChecksOnlyMegaflowsTheChangeCanReach) {
  // Rules on in_port 1 and 2, and on 1 split by protocol.  A change to the
  // port-1 TCP rule must recheck (and re-verdict) the port-1 TCP megaflow
  // only: not the port-2 megaflow (another port: skipped without MayAffect)
  // nor the port-1 UDP one (same addresses, another protocol).
  auto rule = [](uint64_t id, uint32_t in_port, uint8_t proto, uint32_t out) {
    Rule r = Ipv4Rule(id, 10, Action::Output(out));
    r.match.SetExact(Field::kInPort, in_port);
    r.match.SetExact(Field::kNwProto, proto);
    return r;
  };
  const Rule tcp1 = rule(1, 1, 6, 11), udp1 = rule(2, 1, 17, 12), tcp2 = rule(3, 2, 6, 13);
  RuleTable t1;
  ASSERT_TRUE(t1.ApplyBatch({RuleOp::Insert(tcp1), RuleOp::Insert(udp1),
                             RuleOp::Insert(tcp2)}).ok());
  PipelineConfig cfg;
  cfg.cd.mode = CdMode::kOff;
  auto p = Pipeline::Create(cfg);
  ASSERT_TRUE(p.ok());
  (*p)->SetRuleTable(&t1);
  FlowKey keys[3] = {MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6, /*in_port=*/1),
                     MakeFiveTupleKey(0x0a000001, 1, 1, 1, 17, /*in_port=*/1),
                     MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6, /*in_port=*/2)};
  Verdict v[3];
  (*p)->ProcessBurst(keys, 3, v);
  ASSERT_EQ((*p)->stats().upcall_ok, 3u);
  // The cost of rule changes: upcalls (part of the burst's cycles)...
  const PmdStats s1 = (*p)->stats();
  EXPECT_GT(s1.upcall_cycles, 0u);
  EXPECT_LE(s1.upcall_cycles, s1.cycles);

  Rule tcp1b = tcp1;
  tcp1b.action = Action::Output(21);
  const std::vector<RuleOp> ops = {RuleOp::Replace(tcp1b)};
  const RuleChangeSet changes = MakeRuleChangeSet(t1, ops);
  RuleTable t2(t1);
  ASSERT_TRUE(t2.ApplyBatch(ops).ok());
  (*p)->SetRuleTable(&t2, &changes);
  EXPECT_EQ((*p)->stats().megaflows_rechecked, 1u);
  // ... and installing the change (not part of any burst).
  EXPECT_GT((*p)->stats().revalidation_cycles, s1.revalidation_cycles);
  EXPECT_EQ((*p)->stats().cycles, s1.cycles);
  (*p)->ProcessBurst(keys, 3, v);
  EXPECT_EQ(v[0].action, Action::Output(21));
  EXPECT_EQ(v[1].action, Action::Output(12));
  EXPECT_EQ(v[2].action, Action::Output(13));
  // Cached flows cost no upcall cycles.
  const uint64_t upcall_cycles = (*p)->stats().upcall_cycles;
  (*p)->ProcessBurst(keys, 3, v);
  EXPECT_EQ((*p)->stats().upcall_cycles, upcall_cycles);
  (*p)->SetRuleTable(nullptr);
}

// A change set whose matches all name ports without megaflows is installed
// without visiting any megaflow; one that names a port with megaflows (among
// more ports than the filter holds) still rechecks what it overlaps.
TEST(Pipeline, RevalidationSkipsPortsWithoutMegaflows) {
  auto rule = [](uint64_t id, uint32_t in_port, uint32_t out) {
    Rule r = Ipv4Rule(id, 10, Action::Output(out));
    r.match.SetExact(Field::kInPort, in_port);
    return r;
  };
  RuleTable t1;
  ASSERT_TRUE(t1.ApplyBatch({RuleOp::Insert(rule(1, 1, 11))}).ok());
  PipelineConfig cfg;
  cfg.emc = false;
  cfg.cd.mode = CdMode::kOff;
  auto p = Pipeline::Create(cfg);
  ASSERT_TRUE(p.ok());
  (*p)->SetRuleTable(&t1);
  FlowKey keys[2] = {MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6, /*in_port=*/1),
                     MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6, /*in_port=*/2)};
  Verdict v[2];
  (*p)->ProcessBurst(keys, 2, v);  // a megaflow on port 1; port 2 misses every rule
  ASSERT_EQ(v[0].action, Action::Output(11));
  ASSERT_EQ(v[1].rule_id, 0u);
  // Rules for ports 2..9: port 2's no-match megaflow is on port 2, so insert
  // on ports 3..9 first (no megaflow there): nothing is rechecked.
  std::vector<RuleOp> ops;
  for (uint32_t port = 3; port <= 9; ++port) ops.push_back(RuleOp::Insert(rule(port, port, port)));
  RuleTable t2(t1);
  RuleChangeSet changes = MakeRuleChangeSet(t1, ops);
  ASSERT_TRUE(t2.ApplyBatch(ops).ok());
  (*p)->SetRuleTable(&t2, &changes);
  EXPECT_EQ((*p)->stats().megaflows_rechecked, 0u);
  EXPECT_EQ((*p)->stats().megaflows_revalidated_out, 0u);
  // Nine ports, among them 1 and 2 (more than the port filter holds): the
  // megaflows they overlap are rechecked, and the new verdicts apply.
  ops.clear();
  ops.push_back(RuleOp::Replace(rule(1, 1, 21)));
  ops.push_back(RuleOp::Insert(rule(2, 2, 22)));
  for (uint32_t port = 10; port <= 16; ++port) ops.push_back(RuleOp::Insert(rule(port, port, port)));
  RuleTable t3(t2);
  changes = MakeRuleChangeSet(t2, ops);
  ASSERT_EQ(changes.by_in_port.size(), 9u);
  ASSERT_TRUE(t3.ApplyBatch(ops).ok());
  (*p)->SetRuleTable(&t3, &changes);
  EXPECT_EQ((*p)->stats().megaflows_rechecked, 2u);
  (*p)->ProcessBurst(keys, 2, v);
  EXPECT_EQ(v[0].action, Action::Output(21));
  EXPECT_EQ(v[1].action, Action::Output(22));
  (*p)->SetRuleTable(nullptr);
}

TEST(Pipeline, RevalidationKeepsUnaffectedMegaflows) {
  // Changing one rule must not evict the other's megaflow.
  TwoDisjointRules two;
  const Rule& a = two.a;
  const Rule& b = two.b;
  const RuleTable& t1 = two.table;
  FlowKey* keys = two.keys;
  PipelineConfig cfg;
  cfg.emc = false;  // count megaflow hits, not EMC hits
  cfg.cd.mode = CdMode::kOff;
  auto p = Pipeline::Create(cfg);
  ASSERT_TRUE(p.ok());
  (*p)->SetRuleTable(&t1);
  Verdict v[2];
  (*p)->ProcessBurst(keys, 2, v);
  EXPECT_EQ((*p)->stats().upcall_ok, 2u);

  Rule b2 = b;
  b2.action = Action::Output(5);
  const NextTable next2(t1, {RuleOp::Replace(b2)});
  const RuleTable& t2 = next2.table;
  ASSERT_EQ(t2.Find(2)->action, Action::Output(5));
  (*p)->SetRuleTable(&t2, &next2.changes);
  // Only b's megaflow names a changed rule or overlaps a changed match.
  EXPECT_EQ((*p)->stats().megaflows_rechecked, 1u);
  (*p)->ProcessBurst(keys, 2, v);
  EXPECT_EQ(v[0].action, Action::Output(1));
  EXPECT_EQ(v[1].action, Action::Output(5));  // stale megaflow would say 2
  // b's megaflow still covers exactly b's keys: kept, with the new verdict.
  EXPECT_EQ((*p)->stats().megaflow_hits, 2u);
  EXPECT_EQ((*p)->stats().upcall_ok, 2u);
  EXPECT_EQ((*p)->stats().megaflows_revalidated_out, 0u);
  EXPECT_EQ((*p)->stats().megaflows_reverdicted, 1u);
  // Per-rule hits survive the new verdict.
  using Hits = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ((*p)->Snapshot().rule_hits, (Hits{{1, 2}, {2, 2}}));

  // A narrower rule above b inside b's megaflow: the megaflow would now be
  // too wide for the new answer (its key 11.0.0.1 matches c, 11.0.0.2 does
  // not), so it goes, and its keys upcall again.
  const Rule c = Ipv4SrcRule(3, 20, 0x0b000001, 32, Action::Output(7));
  const NextTable with_c(t2, {RuleOp::Insert(c)});
  ASSERT_NE(with_c.table.Find(3), nullptr);
  (*p)->SetRuleTable(&with_c.table, &with_c.changes);
  EXPECT_EQ((*p)->stats().megaflows_revalidated_out, 1u);
  EXPECT_EQ((*p)->stats().megaflows_reverdicted, 1u);
  (*p)->ProcessBurst(keys, 2, v);
  EXPECT_EQ(v[1].rule_id, 3u);
  EXPECT_EQ((*p)->stats().upcall_ok, 3u);
  const FlowKey other_b = MakeFiveTupleKey(0x0b000002, 1, 1, 1, 6);
  (*p)->ProcessBurst(&other_b, 1, v);
  EXPECT_EQ(v[0].rule_id, 2u);
  EXPECT_EQ((*p)->Snapshot().rule_hits, (Hits{{1, 3}, {2, 3}, {3, 1}}));
  (*p)->SetRuleTable(&t2);  // c goes again (no change set: every megaflow)
  EXPECT_EQ((*p)->Snapshot().rule_hits, (Hits{{1, 3}, {2, 3}}));
  (*p)->SetRuleTable(nullptr);  // flush: everything retired, nothing lost
  EXPECT_EQ((*p)->Snapshot().rule_hits, (Hits{{1, 3}, {2, 3}}));

  // A deleted rule's hits go with it, so an id reused later starts at 0:
  // with a change set (targeted revalidation) and without one (full).
  RuleTable t3(t2);
  const std::vector<RuleOp> del = {RuleOp::Delete(1)};
  const RuleChangeSet del_changes = MakeRuleChangeSet(t2, del);
  ASSERT_TRUE(t3.ApplyBatch(del).ok());
  (*p)->SetRuleTable(&t3, &del_changes);
  EXPECT_EQ((*p)->Snapshot().rule_hits, (Hits{{2, 3}}));
  RuleTable t4(t3);
  ASSERT_TRUE(t4.ApplyBatch({RuleOp::Insert(a)}).ok());
  (*p)->SetRuleTable(&t4);  // no change set
  EXPECT_EQ((*p)->Snapshot().rule_hits, (Hits{{2, 3}}));
  RuleTable t5(t4);
  ASSERT_TRUE(t5.ApplyBatch({RuleOp::Delete(2)}).ok());
  (*p)->SetRuleTable(&t5);  // full revalidation forgets 2
  EXPECT_EQ((*p)->Snapshot().rule_hits, Hits{});
}

TEST(Pipeline, ReverdictedMegaflowKeepsItsEmcEntries) {
  // A rule change that leaves a megaflow's reach alone (a replaced action, a
  // rule with the same match above the old one) changes its verdict in
  // place: the flow's next packets hit the EMC with the new verdict.
  TwoDisjointRules two;
  auto p = EmcEveryFlow(&two.table);
  ASSERT_TRUE(p.ok());
  Verdict v[2];
  (*p)->ProcessBurst(two.keys, 2, v);  // upcalls, into the EMC
  (*p)->ProcessBurst(two.keys, 2, v);
  ASSERT_EQ((*p)->stats().emc_hits, 2u);
  Rule above = two.b;  // b's match, higher priority, another id and action
  above.id = 9;
  above.priority = 50;
  above.action = Action::Output(9);
  const NextTable next(two.table, {RuleOp::Insert(above)});
  ASSERT_NE(next.table.Find(9), nullptr);
  (*p)->SetRuleTable(&next.table, &next.changes);
  EXPECT_EQ((*p)->stats().megaflows_reverdicted, 1u);
  (*p)->ProcessBurst(two.keys, 2, v);
  EXPECT_EQ(v[0].rule_id, 1u);
  EXPECT_EQ(v[1].rule_id, 9u);
  EXPECT_EQ(v[1].action, Action::Output(9));
  EXPECT_EQ((*p)->stats().emc_hits, 4u);
  EXPECT_EQ((*p)->stats().megaflow_hits, 0u);
  EXPECT_EQ((*p)->stats().upcall_ok, 2u);
  using Hits = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ((*p)->Snapshot().rule_hits, (Hits{{1, 3}, {2, 2}, {9, 1}}));
  (*p)->SetRuleTable(nullptr);
}

// An id deleted and inserted again in one step (one batch, or a group of
// batches published together) is a new rule: it starts at 0 hits, even with
// the same match and action (the old megaflow would still give its verdict).
// A replace keeps the hits.
TEST(Pipeline, ReinsertedIdStartsAtZeroHitsReplacedKeepsThem) {
  using Hits = std::vector<std::pair<uint64_t, uint64_t>>;
  for (int mode = 0; mode < 3; ++mode) {  // one batch, a group of two, a replace
    SCOPED_TRACE(mode);
    TwoDisjointRules two;
    PipelineConfig cfg;
    cfg.emc = false;
    cfg.cd.mode = CdMode::kOff;
    auto p = Pipeline::Create(cfg);
    ASSERT_TRUE(p.ok());
    (*p)->SetRuleTable(&two.table);
    Verdict v[2];
    (*p)->ProcessBurst(two.keys, 2, v);
    (*p)->ProcessBurst(two.keys, 2, v);
    ASSERT_EQ((*p)->Snapshot().rule_hits, (Hits{{1, 2}, {2, 2}}));
    RuleTable next(two.table);
    RuleChangeSet changes;
    if (mode == 0) {
      const std::vector<RuleOp> ops = {RuleOp::Delete(1), RuleOp::Insert(two.a)};
      changes = MakeRuleChangeSet(two.table, ops);
      ASSERT_TRUE(next.ApplyBatch(ops).ok());
    } else if (mode == 1) {
      const std::vector<RuleOp> del = {RuleOp::Delete(1)}, ins = {RuleOp::Insert(two.a)};
      changes = MakeRuleChangeSet(next, del);
      ASSERT_TRUE(next.ApplyBatch(del).ok());
      changes.Merge(MakeRuleChangeSet(next, ins));
      ASSERT_TRUE(next.ApplyBatch(ins).ok());
    } else {
      const std::vector<RuleOp> ops = {RuleOp::Replace(two.a)};
      changes = MakeRuleChangeSet(two.table, ops);
      ASSERT_TRUE(next.ApplyBatch(ops).ok());
    }
    (*p)->SetRuleTable(&next, &changes);
    EXPECT_EQ((*p)->Snapshot().rule_hits,
              mode == 2 ? (Hits{{1, 2}, {2, 2}}) : (Hits{{2, 2}}));
    (*p)->ProcessBurst(two.keys, 2, v);
    EXPECT_EQ(v[0].rule_id, 1u);
    EXPECT_EQ((*p)->Snapshot().rule_hits,
              mode == 2 ? (Hits{{1, 3}, {2, 3}}) : (Hits{{1, 1}, {2, 3}}));
    (*p)->SetRuleTable(nullptr);
  }
}

// Without revalidation a new table flushes every megaflow (their hits are
// retired); a deleted rule's retired hits still go with it.
TEST(Pipeline, FlushForgetsDeletedRulesHits) {
  TwoDisjointRules two;
  PipelineConfig cfg;
  cfg.revalidate = false;
  auto p = Pipeline::Create(cfg);
  ASSERT_TRUE(p.ok());
  (*p)->SetRuleTable(&two.table);
  Verdict v[2];
  (*p)->ProcessBurst(two.keys, 2, v);
  RuleTable t2(two.table);
  ASSERT_TRUE(t2.ApplyBatch({RuleOp::Delete(1)}).ok());
  (*p)->SetRuleTable(&t2);
  using Hits = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ((*p)->Snapshot().rule_hits, (Hits{{2, 1}}));
  (*p)->SetRuleTable(nullptr);
}

// Trace reports the layer ProcessBurst would use, the megaflow and the
// subtables it would probe, and moves no counter and no cache.
TEST(Pipeline, TraceFollowsTheLayersAndCountsNothing) {
  const Rule a = Ipv4SrcRule(1, 10, 0x0a000000, 8, Action::Output(1));
  RuleTable table;
  ASSERT_TRUE(table.ApplyBatch({RuleOp::Insert(a)}).ok());
  const FlowKey k1 = MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6);
  const FlowKey k2 = MakeFiveTupleKey(0x0a000002, 1, 1, 1, 6);  // same megaflow
  struct Case {
    bool emc, smc;
    CdMode cd;
    const char* k1_layer;  // after one packet of k1
  };
  const Case cases[] = {
      {true, true, CdMode::kOn, "emc"},
      {false, true, CdMode::kOn, "smc"},
      {false, false, CdMode::kOn, "cd"},
      {false, false, CdMode::kOff, "megaflow"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("emc=", c.emc, " smc=", c.smc, " cd=", std::string(CdModeName(c.cd))));
    PipelineConfig cfg;
    cfg.emc = c.emc;
    cfg.emc_config.insert_inv_prob = 1;
    cfg.smc = c.smc ? CacheMode::kOn : CacheMode::kOff;
    cfg.smc_config.entries = 1 << 10;
    cfg.cd.mode = c.cd;
    cfg.cd_table.entries = 1 << 12;
    auto p = Pipeline::Create(cfg);
    ASSERT_TRUE(p.ok()) << p.status();
    (*p)->SetRuleTable(&table);
    // Nothing cached yet: an upcall.
    PipelineTrace t = (*p)->Trace(k1);
    EXPECT_EQ(t.layer, "upcall");
    EXPECT_FALSE(t.has_megaflow);
    Verdict v;
    (*p)->ProcessBurst(&k1, 1, &v);
    const std::string before = (*p)->DebugString();
    const auto hits_before = (*p)->Snapshot().rule_hits;
    t = (*p)->Trace(k1);
    EXPECT_EQ(t.layer, c.k1_layer);
    ASSERT_TRUE(t.has_megaflow);
    EXPECT_EQ(t.verdict.rule_id, 1u);
    EXPECT_EQ(t.verdict.action, Action::Output(1));
    EXPECT_EQ(t.megaflow_mask.Get(Field::kIpv4Src), 0xff000000u);
    EXPECT_EQ(t.megaflow_value.Get(Field::kIpv4Src), 0x0a000000u);
    // The megaflow layers probe the port's one subtable; EMC/SMC probe none.
    const bool probes = std::string(c.k1_layer) == "cd" || std::string(c.k1_layer) == "megaflow";
    EXPECT_EQ(t.subtables_visited.size(), probes ? 1u : 0u);
    // k2 was never seen (no EMC/SMC/CD entry), but its megaflow is there:
    // the ranked search finds it in the port's only subtable.
    const PipelineTrace t2 = (*p)->Trace(k2);
    EXPECT_EQ(t2.layer, "megaflow");
    EXPECT_EQ(t2.megaflow_mask, t.megaflow_mask);
    EXPECT_EQ(t2.subtables_visited.size(), 1u);
    // No counter, cache or hit count moved: the trace is not a packet.
    EXPECT_EQ((*p)->DebugString(), before);
    EXPECT_EQ((*p)->Snapshot().rule_hits, hits_before);
    (*p)->ProcessBurst(&k2, 1, &v);
    EXPECT_EQ(v.action, Action::Output(1));
  }
}

// With the upcall rate limit on, Trace of a miss says "upcall_limited" while
// the port's bucket is empty (what ProcessBurst would then do: drop, or
// classify without installing), "upcall" once it has refilled or on another
// port; tracing takes no token.
TEST(Pipeline, TraceSaysUpcallLimitedWhenThePortsBudgetIsSpent) {
  const Rule a = Ipv4SrcRule(1, 10, 0x0a000000, 8, Action::Output(1));
  RuleTable table;
  ASSERT_TRUE(table.ApplyBatch({RuleOp::Insert(a)}).ok());
  for (UpcallLimitAction action : {UpcallLimitAction::kDrop, UpcallLimitAction::kClassify}) {
    SCOPED_TRACE(std::string(UpcallLimitActionName(action)));
    PipelineConfig cfg;
    cfg.emc_config.insert_inv_prob = 1;
    cfg.upcall_rate = 1000;  // one per ms
    cfg.upcall_burst = 2;
    cfg.upcall_limit_action = action;
    auto p = Pipeline::Create(cfg);
    ASSERT_TRUE(p.ok()) << p.status();
    ManualPipelineClock clock(5000);
    (*p)->SetClock(&clock);
    (*p)->SetRuleTable(&table);
    // Three keys of three megaflows (10/8 matches; 11/8 and 12/8 do not).
    const FlowKey k1 = MakeFiveTupleKey(0x0a000001, 1, 1, 1, 6);
    const FlowKey k2 = MakeFiveTupleKey(0x0b000001, 1, 1, 1, 6);
    const FlowKey k3 = MakeFiveTupleKey(0x0c000001, 1, 1, 1, 6);
    const FlowKey k3_port2 = MakeFiveTupleKey(0x0c000001, 1, 1, 1, 6, 2);
    EXPECT_EQ((*p)->Trace(k3).layer, "upcall");  // a new port's bucket is full
    const FlowKey two[2] = {k1, k2};
    Verdict v[2];
    (*p)->ProcessBurst(two, 2, v);  // the burst of 2 is spent
    ASSERT_EQ((*p)->stats().upcall_ok, 2u);
    const std::string before = (*p)->DebugString();
    PipelineTrace t = (*p)->Trace(k3);
    EXPECT_EQ(t.layer, "upcall_limited");
    EXPECT_FALSE(t.has_megaflow);
    EXPECT_EQ((*p)->Trace(k3).layer, "upcall_limited");  // the trace took nothing
    EXPECT_EQ((*p)->Trace(k1).layer, "emc");             // cached: no upcall needed
    EXPECT_EQ((*p)->Trace(k3_port2).layer, "upcall");    // its own bucket
    EXPECT_EQ((*p)->DebugString(), before);
    // What the trace said: limited, nothing installed.
    (*p)->ProcessBurst(&k3, 1, v);
    EXPECT_EQ((*p)->stats().upcalls_rate_limited, 1u);
    EXPECT_EQ(IsUpcallLimited(v[0]), action == UpcallLimitAction::kDrop);
    EXPECT_EQ((*p)->Snapshot().megaflows, 2u);
    // One ms later one token is back: an upcall again, and it installs.
    clock.now += 1;
    EXPECT_EQ((*p)->Trace(k3).layer, "upcall");
    (*p)->ProcessBurst(&k3, 1, v);
    EXPECT_EQ((*p)->stats().upcall_ok, 3u);
    EXPECT_EQ((*p)->Trace(k3).layer, "emc");
    (*p)->SetRuleTable(nullptr);
  }
}

TEST(Pipeline, BadConfigIsRejectedNamingTheField) {
  PipelineConfig cfg;
  cfg.max_megaflows = 0;
  auto p = Pipeline::Create(cfg);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("max_megaflows"), std::string::npos);
  // The SMC's mode and its controller's tuning, each named under smc.
  cfg = PipelineConfig();
  cfg.smc = static_cast<CacheMode>(7);
  p = Pipeline::Create(cfg);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "smc: unknown value 7");
  cfg = PipelineConfig();
  cfg.smc_controller.probe_pairs = 0;
  p = Pipeline::Create(cfg);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("smc: probe_pairs"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace flowclass
