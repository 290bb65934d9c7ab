// Pipeline tests of the upcall rate limit (pipeline.upcall_rate /
// upcall_burst / upcall_limit_action) and the mask-explosion defence
// (pipeline.rare_mask_subtables), with a fake clock: the counters add up
// (every packet forwarded or dropped for exactly one reason, as the PMD
// counts them), nothing is classified wrongly when the limits bite (classify
// mode gives the reference verdict, drop mode that or the limit's drop), and
// one port's flood of new flows neither takes another port's upcall budget
// nor evicts more than the documented share of its EMC-resident flows.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/bench_common.h"
#include "dataplane/pipeline.h"
#include "gtest/gtest.h"
#include "tests/common/random_rules.h"
#include "tests/common/reference_classifier.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

// What the PMD makes of the verdicts (pmd.cc): forwarded, or dropped for
// exactly one reason.
struct Fates {
  uint64_t rx = 0, forwarded = 0, rule_drops = 0, no_match = 0, limit_drops = 0;
  void Add(const Verdict* v, int n) {
    for (int i = 0; i < n; ++i) {
      ++rx;
      if (v[i].rule_id == 0) {
        ++(IsUpcallLimited(v[i]) ? limit_drops : no_match);
      } else if (v[i].action.kind != Action::Kind::kOutput) {
        ++rule_drops;
      } else {
        ++forwarded;
      }
    }
  }
};

void CheckCountersAddUp(const PmdStats& s, const Fates& f) {
  EXPECT_EQ(s.packets,
            s.emc_hits + s.smc_hits + s.megaflow_hits + s.upcall_ok + s.upcall_failed);
  EXPECT_LE(s.upcalls_megaflow_cap + s.upcalls_subtable_cap + s.upcalls_rate_limited +
                s.upcalls_rare_mask,
            s.upcall_failed);
  EXPECT_LE(s.upcall_limit_drops, s.upcalls_rate_limited);
  EXPECT_EQ(f.rx, s.packets);
  EXPECT_EQ(f.rx, f.forwarded + f.rule_drops + f.no_match + f.limit_drops);
  EXPECT_EQ(f.no_match, s.no_match);
  EXPECT_EQ(f.limit_drops, s.upcall_limit_drops);
}

// Flow number f on `port`: source 10.0.0.0 + f (the tests' rules are a /32
// per flow, id f + 1, so every flow is its own megaflow).
struct OneRule {
  static FlowKey Key(uint32_t f, uint32_t port) {
    return MakeFiveTupleKey(0x0a000000u | f, 0xc0a80001u, static_cast<uint16_t>(1024 + f % 60000),
                            80, 6, port);
  }
};

PipelineConfig Limited(uint32_t rate, uint32_t burst, UpcallLimitAction action) {
  PipelineConfig cfg;
  cfg.max_megaflows = 1 << 16;
  cfg.upcall_rate = rate;
  cfg.upcall_burst = burst;
  cfg.upcall_limit_action = action;
  return cfg;
}

TEST(PipelineUpcallLimit, BurstThenRateAndTheCountersAddUp) {
  ManualPipelineClock clock(5000);
  auto p = Pipeline::Create(Limited(1000, 10, UpcallLimitAction::kDrop));
  ASSERT_TRUE(p.ok()) << p.status();
  Pipeline& pl = **p;
  pl.SetClock(&clock);
  // A /32 rule per flow: each flow its own megaflow (its own upcall).
  RuleTable exact;
  std::vector<RuleOp> ops;
  for (uint32_t f = 0; f < 4096; ++f)
    ops.push_back(RuleOp::Insert(Ipv4SrcRule(f + 1, 10, 0x0a000000u | f, 32, Action::Output(2))));
  ASSERT_TRUE(exact.ApplyBatch(ops).ok());
  pl.SetRuleTable(&exact);

  Fates fates;
  uint32_t next = 0;
  auto burst_of_new = [&](int n, uint32_t port) {
    FlowKey k[kMaxBurst];
    for (int i = 0; i < n; ++i) k[i] = OneRule::Key(next++, port);
    Verdict v[kMaxBurst];
    pl.ProcessBurst(k, n, v);
    fates.Add(v, n);
    int limited = 0;
    for (int i = 0; i < n; ++i) limited += IsUpcallLimited(v[i]);
    return limited;
  };
  // A full bucket: 10 upcalls, the other 22 dropped.
  EXPECT_EQ(burst_of_new(32, 1), 22);
  EXPECT_EQ(pl.stats().upcall_ok, 10u);
  EXPECT_EQ(pl.stats().upcalls_rate_limited, 22u);
  EXPECT_EQ(pl.stats().upcall_limit_drops, 22u);
  EXPECT_EQ(pl.stats().no_match, 0u) << "limited drops are not 'no rule'";
  // Same millisecond: nothing left.
  EXPECT_EQ(burst_of_new(5, 1), 5);
  // 3 ms at 1000/s: 3 tokens.
  clock.now += 3;
  EXPECT_EQ(burst_of_new(8, 1), 5);
  // A long pause refills to the burst, no more.
  clock.now += 60000;
  EXPECT_EQ(burst_of_new(32, 1), 22);
  // Known flows are not upcalls: they pass with an empty bucket.
  FlowKey again = OneRule::Key(next - 32, 1);
  Verdict v;
  pl.ProcessBurst(&again, 1, &v);
  fates.Add(&v, 1);
  EXPECT_EQ(v.rule_id, next - 32 + 1);
  // Port 2 has its own full bucket.
  EXPECT_EQ(burst_of_new(12, 2), 2);
  const PmdStats& s = pl.stats();
  EXPECT_EQ(s.upcall_ok, 10u + 3 + 10 + 10);
  EXPECT_EQ(s.upcalls_rate_limited, 22u + 5 + 5 + 22 + 2);
  CheckCountersAddUp(s, fates);
  EXPECT_EQ(pl.Snapshot().megaflows + s.megaflows_expired, s.upcall_ok);  // the pause expired some

  // At run time: classify instead of drop, a higher rate.
  pl.SetUpcallLimit(1000000, 32, UpcallLimitAction::kClassify);
  clock.now += 1;
  EXPECT_EQ(burst_of_new(32, 1), 0);
  // 0: unlimited.
  pl.SetUpcallLimit(0, 1, UpcallLimitAction::kDrop);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(burst_of_new(32, 1), 0);
  CheckCountersAddUp(pl.stats(), fates);
  pl.SetRuleTable(nullptr);
}

TEST(PipelineUpcallLimit, RatesBelowOnePerMillisecondAccumulate) {
  ManualPipelineClock clock(5000);
  auto p = Pipeline::Create(Limited(100, 1, UpcallLimitAction::kDrop));  // 1 per 10 ms
  ASSERT_TRUE(p.ok());
  Pipeline& pl = **p;
  pl.SetClock(&clock);
  RuleTable exact;
  std::vector<RuleOp> ops;
  for (uint32_t f = 0; f < 64; ++f)
    ops.push_back(RuleOp::Insert(Ipv4SrcRule(f + 1, 10, 0x0a000000u | f, 32, Action::Output(2))));
  ASSERT_TRUE(exact.ApplyBatch(ops).ok());
  pl.SetRuleTable(&exact);
  uint32_t next = 0;
  int upcalls = 0;
  for (int ms = 0; ms < 100; ++ms, ++clock.now) {
    FlowKey k = OneRule::Key(next, 1);
    Verdict v;
    pl.ProcessBurst(&k, 1, &v);
    if (!IsUpcallLimited(v)) ++upcalls, ++next;
  }
  // The full bucket's one, then one per 10 ms.
  EXPECT_EQ(upcalls, 1 + 9);
  pl.SetRuleTable(nullptr);
}

// Random rules on three ports, tight limits, every defence on, small caps:
// classify mode answers every packet as the reference classifier does; drop
// mode does too, except for the packets it drops as limited.
TEST(PipelineUpcallLimit, NothingIsClassifiedWronglyWhenTheLimitsBite) {
  for (UpcallLimitAction action : {UpcallLimitAction::kClassify, UpcallLimitAction::kDrop}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(absl::StrCat(std::string(UpcallLimitActionName(action)), " seed ", seed));
      RandomRuleGen gen(seed * 3301);
      std::vector<Rule> rules = gen.NextRules(150);
      RuleTable table;
      std::vector<RuleOp> ops;
      for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));
      ASSERT_TRUE(table.ApplyBatch(ops).ok());
      ReferenceClassifier ref(rules);
      ManualPipelineClock clock(5000);
      PipelineConfig cfg = Limited(2000, 8, action);
      cfg.smc = CacheMode::kOn;
      cfg.cd.mode = CdMode::kOn;
      cfg.max_megaflows = 256;
      cfg.max_subtables_per_port = 6;
      cfg.rare_mask_subtables = 3;
      cfg.megaflow_max_idle_ms = 50;
      auto p = Pipeline::Create(cfg);
      ASSERT_TRUE(p.ok());
      Pipeline& pl = **p;
      pl.SetClock(&clock);
      pl.SetRuleTable(&table);
      std::vector<FlowKey> flows;
      for (int i = 0; i < 600; ++i) {
        Flow f = gen.NextKeyNear(rules);
        f.Set(Field::kInPort, 1 + gen.Uniform(3));
        flows.push_back(FlowKey::FromFlow(f));
      }
      Fates fates;
      for (int b = 0; b < 1500; ++b) {
        if (b % 4 == 0) ++clock.now;
        const int n = 1 + static_cast<int>(gen.Uniform(kMaxBurst));
        FlowKey keys[kMaxBurst];
        for (int i = 0; i < n; ++i) keys[i] = flows[gen.Uniform(flows.size())];
        Verdict v[kMaxBurst];
        pl.ProcessBurst(keys, n, v);
        fates.Add(v, n);
        for (int i = 0; i < n; ++i) {
          const Rule* want = ref.Lookup(keys[i]);
          if (action == UpcallLimitAction::kDrop && IsUpcallLimited(v[i])) continue;
          ASSERT_FALSE(IsUpcallLimited(v[i]));
          ASSERT_EQ(v[i].rule_id, want ? want->id : 0) << keys[i].ToString();
          ASSERT_EQ(v[i].action, want ? want->action : Action{}) << keys[i].ToString();
        }
      }
      const PipelineSnapshot s = pl.Snapshot();
      CheckCountersAddUp(s.stats, fates);
      EXPECT_GT(s.stats.upcalls_rate_limited, 0u) << "the limit never bit";
      EXPECT_GT(s.stats.upcalls_rare_mask, 0u) << "the defence never bit";
      if (action == UpcallLimitAction::kClassify) {
        EXPECT_EQ(s.stats.upcall_limit_drops, 0u);
      }
      std::map<uint32_t, int> per_port;
      for (const SubtableInfo& t : s.subtable) ++per_port[t.in_port];
      for (const auto& [port, n] : per_port) EXPECT_LE(n, 6) << "port " << port;
      pl.SetRuleTable(nullptr);
    }
  }
}

// Port 2 floods new flows (a scan); port 1 has EMC-resident flows and a few
// new flows of its own.  Port 1's new flows still get their whole budget
// (each port has its own bucket), its resident flows are all forwarded by
// the right rule, and at most kEmcShare of their packets leave the EMC: the
// flood inserts at most its budget into the EMC (upcall_burst plus
// upcall_rate per second), the documented share.
TEST(PipelineUpcallLimit, AFloodOnOnePortLeavesAnotherPortsTrafficAlone) {
  constexpr double kEmcShare = 0.05;  // docs/pipeline.md
  RuleTable table;
  std::vector<RuleOp> ops;
  constexpr uint32_t kFlows = 1u << 17;
  for (uint32_t f = 0; f < kFlows; ++f)
    ops.push_back(RuleOp::Insert(Ipv4SrcRule(f + 1, 10, 0x0a000000u | f, 32, Action::Output(2))));
  ASSERT_TRUE(table.ApplyBatch(ops).ok());
  for (const bool limited : {true, false}) {
    SCOPED_TRACE(limited ? "limited" : "unlimited");
    ManualPipelineClock clock(5000);
    PipelineConfig cfg = Limited(0, 50, UpcallLimitAction::kDrop);
    cfg.emc_config.entries = 1024;
    cfg.emc_config.insert_inv_prob = 1;
    cfg.max_megaflows = 1 << 18;
    auto p = Pipeline::Create(cfg);
    ASSERT_TRUE(p.ok());
    Pipeline& pl = **p;
    pl.SetClock(&clock);
    pl.SetRuleTable(&table);
    // 256 resident flows on port 1, warm in the EMC.
    constexpr uint32_t kResident = 256;
    auto resident = [](uint32_t i) { return OneRule::Key(i, 1); };
    for (int warm = 0; warm < 3; ++warm)
      for (uint32_t i = 0; i < kResident; i += kMaxBurst) {
        FlowKey k[kMaxBurst];
        for (int j = 0; j < kMaxBurst; ++j) k[j] = resident(i + j);
        Verdict v[kMaxBurst];
        pl.ProcessBurst(k, kMaxBurst, v);
        clock.now += 1;
      }
    pl.SetUpcallLimit(limited ? 1000 : 0, 50, UpcallLimitAction::kDrop);
    const PmdStats before = pl.stats();
    // 1 s: each ms, 8 bursts of port 1's resident flows, one of its new
    // flows, and 4 bursts of 32 new flows on port 2 (128k new flows/s).
    uint32_t scan = 1000, victim_new = kResident;
    uint64_t resident_pkts = 0, resident_ok = 0, victim_new_limited = 0;
    for (int ms = 0; ms < 1000; ++ms, ++clock.now) {
      for (int b = 0; b < 8; ++b) {
        FlowKey k[kMaxBurst];
        for (int j = 0; j < kMaxBurst; ++j) k[j] = resident((ms * 8 + b) * kMaxBurst % kResident + j);
        Verdict v[kMaxBurst];
        pl.ProcessBurst(k, kMaxBurst, v);
        for (int j = 0; j < kMaxBurst; ++j) {
          ++resident_pkts;
          resident_ok += v[j].rule_id == k[j].Get(Field::kIpv4Src) - 0x0a000000u + 1;
        }
      }
      for (int b = 0; b < 4; ++b) {
        FlowKey k[kMaxBurst];
        for (int j = 0; j < kMaxBurst; ++j) k[j] = OneRule::Key(scan++, 2);
        Verdict v[kMaxBurst];
        pl.ProcessBurst(k, kMaxBurst, v);
      }
      if (ms % 2 == 0) {  // port 1: 500 new flows/s, under its 1000/s, after the flood's
        FlowKey k = OneRule::Key(victim_new++, 1);
        Verdict v;
        pl.ProcessBurst(&k, 1, &v);
        victim_new_limited += IsUpcallLimited(v);
      }
    }
    ASSERT_LT(scan, kFlows) << "the scan repeats flows";
    PmdStats d = pl.stats();
    d -= before;
    EXPECT_EQ(resident_ok, resident_pkts) << "a resident flow got another verdict";
    EXPECT_EQ(victim_new_limited, 0u) << "port 2's flood took port 1's budget";
    // Every EMC hit is a resident packet's (the new flows come once each).
    const uint64_t emc_hits = d.emc_hits;
    const double resident_emc_share = static_cast<double>(emc_hits) / resident_pkts;
    if (limited) {
      EXPECT_GE(resident_emc_share, 1 - kEmcShare);
      EXPECT_LE(d.upcall_ok, 50u + 1000 + 500 + 1) << "port 2 went past its budget";
    } else {
      // The same flood without a limit: it is the flood's EMC inserts that
      // push the resident flows out (so the test above can fail).
      EXPECT_LT(resident_emc_share, 1 - kEmcShare);
    }
    pl.SetRuleTable(nullptr);
  }
}

TEST(PipelineUpcallLimit, BadSettingsAreRejectedNamingTheField) {
  PipelineConfig cfg;
  cfg.upcall_burst = 0;
  auto p = Pipeline::Create(cfg);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("upcall_burst"), std::string::npos);
  cfg.upcall_burst = 1;
  cfg.upcall_rate = kMaxUpcallRate + 1;
  p = Pipeline::Create(cfg);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("upcall_rate"), std::string::npos);
  EXPECT_EQ(*ParseUpcallLimitAction("classify"), UpcallLimitAction::kClassify);
  EXPECT_FALSE(ParseUpcallLimitAction("Drop").ok());
}

// The mask-explosion defence: past rare_mask_subtables, a mask that misses
// once never gets a subtable; one that misses kRareMaskMinMisses times in
// its window does.
TEST(PipelineRareMask, RareMasksStayOutPopularOnesGetIn) {
  // One rule with an exact tp_dst: a key that fails it only in tp_dst has
  // the highest bit where its tp_dst differs from 80 in its megaflow mask
  // (docs/classifier.md), so 16 keys make 16 masks.
  Rule rule = Ipv4SrcRule(1, 10, 0x0a000000u, 16, Action::Output(2));
  rule.match.SetExact(Field::kTpDst, 80);
  RuleTable table;
  ASSERT_TRUE(table.ApplyBatch({RuleOp::Insert(rule)}).ok());
  ManualPipelineClock clock(5000);
  PipelineConfig cfg;
  cfg.emc = false;
  cfg.cd.mode = CdMode::kOff;
  cfg.rare_mask_subtables = 4;
  auto p = Pipeline::Create(cfg);
  ASSERT_TRUE(p.ok());
  Pipeline& pl = **p;
  pl.SetClock(&clock);
  pl.SetRuleTable(&table);
  auto key = [](int bit) {
    return MakeFiveTupleKey(0x0a000001u, 1, 1, static_cast<uint16_t>(80 ^ (1u << bit)), 6, 1);
  };
  for (int bit = 0; bit < 16; ++bit) {
    const FlowKey k = key(bit);
    Verdict v;
    pl.ProcessBurst(&k, 1, &v);
    EXPECT_EQ(v.rule_id, 0u);
  }
  PipelineSnapshot s = pl.Snapshot();
  ASSERT_EQ(s.subtables, 4u) << "the first four masks got in, then the defence held";
  ASSERT_GT(s.stats.upcalls_rare_mask, 0u);
  EXPECT_EQ(s.stats.upcalls_rare_mask, s.stats.upcall_failed);
  // Two keys whose masks were kept out (one miss each so far).
  std::vector<FlowKey> out;
  for (int bit = 0; bit < 16 && out.size() < 3; ++bit)
    if (pl.Trace(key(bit)).layer == "upcall") out.push_back(key(bit));
  ASSERT_EQ(out.size(), 3u);
  // The first misses kRareMaskMinMisses times within the window: it gets in
  // on the last one, not before.
  for (uint32_t i = 1; i < Pipeline::kRareMaskMinMisses; ++i) {
    EXPECT_EQ(pl.Snapshot().subtables, 4u) << "in after " << i << " misses";
    Verdict v;
    pl.ProcessBurst(&out[0], 1, &v);
    EXPECT_EQ(v.rule_id, 0u);
  }
  EXPECT_EQ(pl.Snapshot().subtables, 5u);
  EXPECT_EQ(pl.Trace(out[0]).layer, "megaflow");
  // A third, popular at once: it waits out kRareMaskInstallIntervalMs.
  for (uint32_t i = 0; i < Pipeline::kRareMaskMinMisses; ++i) {
    Verdict v;
    pl.ProcessBurst(&out[2], 1, &v);
  }
  EXPECT_EQ(pl.Snapshot().subtables, 5u) << "two new subtables within the interval";
  clock.now += Pipeline::kRareMaskInstallIntervalMs;
  {
    Verdict v;
    pl.ProcessBurst(&out[2], 1, &v);
  }
  EXPECT_EQ(pl.Snapshot().subtables, 6u);
  // The second misses as often, but spread over more than the window.
  clock.now += Pipeline::kRareMaskWindowMs;
  for (uint32_t i = 0; i < 3 * Pipeline::kRareMaskMinMisses; ++i) {
    Verdict v;
    pl.ProcessBurst(&out[1], 1, &v);
    EXPECT_EQ(v.rule_id, 0u);
    clock.now += Pipeline::kRareMaskWindowMs / (Pipeline::kRareMaskMinMisses - 1) + 1;
  }
  EXPECT_EQ(pl.Snapshot().subtables, 6u);
  EXPECT_EQ(pl.Trace(out[1]).layer, "upcall");
  pl.SetRuleTable(nullptr);
}

// The defaults hold against the Tuple Space Explosion attack (tse_benchmark's
// keys: 16384 keys of as many megaflow masks on the victim's port): the
// port keeps about kDefaultRareMaskSubtables subtables, every attack packet
// still gets the RuleTable's verdict, nothing is dropped; with the defence
// off the same keys fill the port up to max_subtables_per_port.
TEST(PipelineRareMask, TheDefaultsKeepTheTupleSpaceExplosionOut) {
  RuleTable table;
  std::vector<RuleOp> ops;
  for (const Rule& r : bench::AclRules()) ops.push_back(RuleOp::Insert(r));
  ASSERT_TRUE(table.ApplyBatch(ops).ok());
  const std::vector<FlowKey> attack = bench::TseAttackKeys();
  for (const bool defaults : {true, false}) {
    SCOPED_TRACE(defaults ? "defaults" : "rare_mask_subtables 0");
    PipelineConfig cfg;
    if (!defaults) cfg.rare_mask_subtables = 0;
    auto p = Pipeline::Create(cfg);
    ASSERT_TRUE(p.ok()) << p.status();
    Pipeline& pl = **p;
    ManualPipelineClock clock(5000);
    pl.SetClock(&clock);
    pl.SetRuleTable(&table);
    Verdict v[kMaxBurst];
    uint64_t wrong = 0;
    for (size_t i = 0; i + kMaxBurst <= attack.size(); i += kMaxBurst) {
      pl.ProcessBurst(&attack[i], kMaxBurst, v);
      for (int k = 0; k < kMaxBurst; ++k) {
        Flow wc;
        const Rule* want = table.Lookup(attack[i + k], &wc);
        wrong += want == nullptr || v[k].rule_id != want->id;
      }
      clock.now += 1;  // 32 new masks a millisecond: 1 s for the whole set
    }
    EXPECT_EQ(wrong, 0u);
    const PipelineSnapshot s = pl.Snapshot();
    EXPECT_EQ(s.stats.packets, attack.size());
    EXPECT_EQ(s.stats.upcall_limit_drops, 0u);
    if (defaults) {
      // The threshold, plus the masks that became popular: none here (each
      // key missed once), but the window may let a colliding few through.
      EXPECT_GE(s.subtables, kDefaultRareMaskSubtables);
      EXPECT_LE(s.subtables, kDefaultRareMaskSubtables + 4);
      EXPECT_GE(s.stats.upcalls_rare_mask, attack.size() - kDefaultRareMaskSubtables - 4);
    } else {
      EXPECT_EQ(s.subtables, cfg.max_subtables_per_port);
      EXPECT_EQ(s.stats.upcalls_rare_mask, 0u);
    }
    pl.SetRuleTable(nullptr);
  }
}

}  // namespace
}  // namespace flowclass
