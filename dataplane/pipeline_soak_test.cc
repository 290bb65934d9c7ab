// A short soak (soak_benchmark's setup, bench_common.h, on a fake clock):
// EMC-resident victim flows plus a scan of random new 5-tuples, one packet
// each, at a fixed rate.  Idle expiry keeps the megaflow count bounded by
// about rate x megaflow_max_idle_ms (the sweep's lag on top; the cap when
// that is lower; the upcall budget when that is lower), it falls back to the
// victim's once the scan stops, nobody needs to call DrainRetiredHits for
// that (every scan megaflow names one of a few rules), the counters add up
// (packets = each layer's hits + upcalls; every packet forwarded or dropped
// for exactly one reason) and every verdict is the rule table's.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/bench_common.h"
#include "dataplane/pipeline.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

struct SoakResult {
  uint64_t max_megaflows = 0;      // the most alive at once while scanning
  uint64_t scan_end_megaflows = 0;
  uint64_t final_megaflows = 0;    // after the quiet tail
  uint64_t victim_megaflows = 0;   // after the warm-up, before the scan
  uint64_t victim_packets = 0, victim_emc_hits = 0, victim_limited = 0;
  uint64_t wrong = 0;              // verdicts not the table's (or the limit's drop)
  uint64_t rx = 0, forwarded = 0, rule_drops = 0, limit_drops = 0;
  PmdStats stats;
};

// `scan_ms` ms of victim + scan at `rate` new flows/s, then `quiet_ms` of
// the victim alone; one victim burst per ms.
SoakResult Soak(const PipelineConfig& cfg, uint32_t rate, uint64_t scan_ms, uint64_t quiet_ms) {
  SoakResult r;
  RuleTable table;
  std::vector<RuleOp> ops;
  for (const Rule& rule : bench::SoakRules()) ops.push_back(RuleOp::Insert(rule));
  EXPECT_TRUE(table.ApplyBatch(ops).ok());
  auto expect = [&](const FlowKey& k) {
    Flow wc;
    const Rule* rule = table.Lookup(k, &wc);
    return rule ? Verdict{rule->id, rule->action} : Verdict{};
  };
  std::vector<FlowKey> victim;
  uint64_t vs = 7;
  for (int i = 0; i < 16; ++i) victim.push_back(bench::AclVictimKey(i, &vs));
  auto p = Pipeline::Create(cfg);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return r;
  Pipeline& pl = **p;
  ManualPipelineClock clock;
  pl.SetClock(&clock);
  pl.SetRuleTable(&table);
  auto account = [&](const FlowKey* keys, const Verdict* v, int n) {
    for (int i = 0; i < n; ++i) {
      ++r.rx;
      if (IsUpcallLimited(v[i])) {
        ++r.limit_drops;
        r.wrong += cfg.upcall_rate == 0 || cfg.upcall_limit_action != UpcallLimitAction::kDrop;
        continue;
      }
      r.wrong += v[i] != expect(keys[i]);
      ++(v[i].action.kind == Action::Kind::kOutput ? r.forwarded : r.rule_drops);
    }
  };
  // The victim warm (every flow in the EMC) before the scan starts.
  Verdict v[kMaxBurst];
  FlowKey burst[kMaxBurst];
  size_t vi = 0;
  auto victim_burst = [&] {
    for (int k = 0; k < kMaxBurst; ++k) burst[k] = victim[vi++ % victim.size()];
    const uint64_t emc_before = pl.stats().emc_hits;
    pl.ProcessBurst(burst, kMaxBurst, v);
    account(burst, v, kMaxBurst);
    for (int k = 0; k < kMaxBurst; ++k) r.victim_limited += IsUpcallLimited(v[k]);
    return pl.stats().emc_hits - emc_before;
  };
  for (int i = 0; i < 2000; ++i, ++clock.now) victim_burst();
  r.victim_megaflows = pl.megaflow_count();
  uint64_t seed = 99, milli = 0;
  for (uint64_t t = 0; t < scan_ms + quiet_ms; ++t, ++clock.now) {
    const uint64_t emc = victim_burst();
    r.victim_packets += kMaxBurst;
    r.victim_emc_hits += emc;
    if (t < scan_ms) {
      int n = 0;
      for (milli += rate; milli >= 1000; milli -= 1000) {
        burst[n++] = bench::ScanKey(&seed);
        if (n == kMaxBurst) pl.ProcessBurst(burst, n, v), account(burst, v, n), n = 0;
      }
      if (n) pl.ProcessBurst(burst, n, v), account(burst, v, n);
    }
    const uint64_t live = pl.megaflow_count();
    if (t < scan_ms) r.max_megaflows = std::max(r.max_megaflows, live);
    if (t + 1 == scan_ms) r.scan_end_megaflows = pl.Snapshot().megaflows;
  }
  r.final_megaflows = pl.Snapshot().megaflows;
  r.stats = pl.stats();
  pl.SetRuleTable(nullptr);
  return r;
}

void CheckCountersAddUp(const SoakResult& r) {
  const PmdStats& s = r.stats;
  EXPECT_EQ(s.packets, s.emc_hits + s.smc_hits + s.megaflow_hits + s.upcall_ok + s.upcall_failed);
  EXPECT_EQ(s.packets, r.rx);
  EXPECT_EQ(r.rx, r.forwarded + r.rule_drops + r.limit_drops);
  EXPECT_EQ(r.limit_drops, s.upcall_limit_drops);
  EXPECT_LE(s.upcalls_megaflow_cap + s.upcalls_subtable_cap + s.upcalls_rate_limited +
                s.upcalls_rare_mask,
            s.upcall_failed);
  EXPECT_EQ(r.wrong, 0u);
  EXPECT_EQ(r.victim_limited, 0u);
}

// The most megaflows expiry lets live at `rate` new ones per second: each
// lives its idle time plus up to one sweep of the table (kExpiryPerTick
// visits per ms), N <= rate * (idle + N / kExpiryPerTick) / 1000.
double ExpiryBound(uint32_t rate, uint32_t idle_ms) {
  const double per_ms = rate / 1000.0;
  return per_ms * idle_ms / (1 - per_ms / Pipeline::kExpiryPerTick);
}

TEST(PipelineSoak, ExpiryKeepsTheScanBoundedWithoutAnyDrain) {
  PipelineConfig cfg;
  cfg.megaflow_max_idle_ms = 2000;
  constexpr uint32_t kRate = 4000;
  const SoakResult r = Soak(cfg, kRate, 20000, 3000);
  SCOPED_TRACE(absl::StrCat("max ", r.max_megaflows, " at scan end ", r.scan_end_megaflows,
                            " final ", r.final_megaflows, " expired ", r.stats.megaflows_expired));
  const double bound = ExpiryBound(kRate, 2000) + r.victim_megaflows + kMaxBurst;
  EXPECT_LE(r.max_megaflows, bound);
  // The scan is real: nearly every packet was a megaflow of its own, and
  // the count stood near rate x idle (not bounded by accident).
  EXPECT_GE(r.stats.upcall_ok, kRate * 20 * 95 / 100);
  EXPECT_GE(r.max_megaflows, kRate * 2 * 95 / 100);
  // Once the scan stops, its megaflows go within idle + one sweep; the
  // victim's (used every ms) stay.
  EXPECT_EQ(r.final_megaflows, r.victim_megaflows);
  EXPECT_GE(r.stats.megaflows_expired, kRate * 20 * 95 / 100);
  EXPECT_EQ(r.stats.upcall_failed, 0u);
  // The victim stayed EMC-resident (its flows enter the EMC again with
  // probability 1/100 after a scan packet evicts them).
  EXPECT_GE(r.victim_emc_hits, r.victim_packets * 95 / 100);
  CheckCountersAddUp(r);
}

TEST(PipelineSoak, TheCapBoundsWhatExpiryCannotAndVerdictsStayRight) {
  PipelineConfig cfg;
  cfg.megaflow_max_idle_ms = 2000;
  cfg.max_megaflows = 3000;  // below rate x idle
  const SoakResult r = Soak(cfg, 4000, 10000, 3000);
  EXPECT_LE(r.max_megaflows, 3000u);
  EXPECT_GE(r.max_megaflows, 2990u);
  EXPECT_GT(r.stats.upcalls_megaflow_cap, 0u);
  EXPECT_EQ(r.final_megaflows, r.victim_megaflows);
  EXPECT_GE(r.victim_emc_hits, r.victim_packets * 95 / 100);
  CheckCountersAddUp(r);
}

TEST(PipelineSoak, TheUpcallBudgetBoundsTheScanBelowRateTimesIdle) {
  for (UpcallLimitAction action : {UpcallLimitAction::kDrop, UpcallLimitAction::kClassify}) {
    SCOPED_TRACE(std::string(UpcallLimitActionName(action)));
    PipelineConfig cfg;
    cfg.megaflow_max_idle_ms = 2000;
    cfg.upcall_rate = 1000;
    cfg.upcall_burst = 100;
    cfg.upcall_limit_action = action;
    const SoakResult r = Soak(cfg, 4000, 10000, 3000);
    // Installs at most burst + rate x t: within an idle time, burst + 2000.
    EXPECT_LE(r.max_megaflows, 100 + ExpiryBound(1000, 2000) + r.victim_megaflows + kMaxBurst);
    EXPECT_GT(r.stats.upcalls_rate_limited, 4000u * 10 / 2);
    EXPECT_EQ(r.stats.upcall_limit_drops,
              action == UpcallLimitAction::kDrop ? r.stats.upcalls_rate_limited : 0);
    EXPECT_EQ(r.final_megaflows, r.victim_megaflows);
    // The victim never needed an upcall: none of its packets was limited.
    EXPECT_GE(r.victim_emc_hits, r.victim_packets * 95 / 100);
    CheckCountersAddUp(r);
  }
}

}  // namespace
}  // namespace flowclass
