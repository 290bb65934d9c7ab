// soak_benchmark — the "1-hour-equivalent soak": one pipeline on a
// fake clock, EMC-resident victim flows plus a scan of random new 5-tuples,
// for --sim_seconds simulated seconds (default 3600).  Shows whether idle
// expiry keeps the megaflow count bounded (about scan rate x
// megaflow_max_idle_ms, never past max_megaflows) and whether the victim's
// cycles per packet move while the scan runs.
//
//   ninja -C build soak_benchmark && build/bench/soak_benchmark
//   [--sim_seconds=S] [--scan_rate=N] [--victim_flows=N] [--victim_bursts_per_ms=N]
//   [--max_idle_ms=MS] [--max_megaflows=N] [--upcall_rate=N] [--upcall_burst=N]
//   [--upcall_limit_action=drop|classify] [--sample_seconds=S] [--drain_seconds=S]
//   [--seed=N]
//
// Rules (bench::SoakRules): the ACL of tse_benchmark (four allow rules
// under 10.0.0.0/16 -> 192.168.0.0/16, output:2, and a default deny) plus a
// blocklist of 1000 source and 1000 destination /32s: their prefix levels
// keep a /16 or /24 of both addresses in the megaflow of a random key, so
// (checked offline, printed) nearly every scan packet is a megaflow of its
// own, as spoofed sources make them.  Victim: --victim_flows flows the allow
// rules forward, in_port 1, EMC on; --victim_bursts_per_ms bursts of 32 of
// them per simulated millisecond.  Scan: --scan_rate new random 5-tuples per
// simulated second on the same port (src and dst anywhere, random ports,
// TCP/UDP), each one packet, sent as they accumulate (a burst of up to 32
// per millisecond).  The clock moves 1 ms per step; expiry runs in the
// bursts, as on a busy PMD.  A 60 s warm-up of the victim alone comes first
// (minute 0, the no-scan baseline).
//
// --drain_seconds: call DrainRetiredHits every S simulated seconds, as the
// DPDK PMD does before answering a stats snapshot (0: never; the pipeline
// must expire without it).
//
// Per simulated minute (--sample_seconds): megaflows at the end and the most
// seen, megaflows expired, scan upcalls installed / not, rate limited, upcall
// drops, the victim's cycles per packet (its bursts only: EMC hits plus the
// expiry sweep, at most kExpiryPerTick visits, that runs in the first burst
// of each ms), the same for the bursts after the first of each ms (no
// sweep: rest_cpp), and its EMC hit share.  Every victim
// verdict is checked against the rule table; the counters are checked to add
// up.  Last line, exactly:
//   soak: sim_seconds=S max_megaflows=M final_megaflows=F victim_cpp_first=A victim_cpp_last=B
// (first / last: the first and last minute of the scan).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/bench_common.h"
#include "dataplane/pipeline.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {
namespace {

using bench::Flag;
using bench::LoadAverage;
using bench::Rng;

struct Options {
  uint64_t sim_seconds = 3600;
  uint32_t scan_rate = 2000;
  int victim_flows = 64;
  int victim_bursts_per_ms = 4;
  uint32_t max_idle_ms = 10000;
  uint32_t max_megaflows = 200000;
  uint32_t upcall_rate = 0;
  uint32_t upcall_burst = 1000;
  UpcallLimitAction upcall_limit_action = UpcallLimitAction::kDrop;
  uint64_t sample_seconds = 60;
  uint64_t drain_seconds = 0;
  uint64_t seed = 1;
};

// One simulated minute's figures (deltas over it, but megaflows: a level).
struct Sample {
  uint64_t end_s = 0;
  uint64_t megaflows = 0, max_megaflows = 0, subtables = 0;
  uint64_t expired = 0, scan_packets = 0, upcall_ok = 0, upcall_failed = 0;
  uint64_t rate_limited = 0, limit_drops = 0, megaflow_cap = 0;
  uint64_t victim_packets = 0, victim_cycles = 0, emc_hits = 0;
  // The victim bursts after the first of each ms (no expiry sweep in them).
  uint64_t rest_packets = 0, rest_cycles = 0;
  double VictimCpp() const {
    return victim_packets ? static_cast<double>(victim_cycles) / victim_packets : 0;
  }
  double RestCpp() const {
    return rest_packets ? static_cast<double>(rest_cycles) / rest_packets : 0;
  }
};

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (Flag(argv[i], "--sim_seconds", &v)) {
      o.sim_seconds = std::strtoull(v.c_str(), nullptr, 10);
    } else if (Flag(argv[i], "--scan_rate", &v)) {
      o.scan_rate = static_cast<uint32_t>(std::atoi(v.c_str()));
    } else if (Flag(argv[i], "--victim_flows", &v)) {
      o.victim_flows = std::atoi(v.c_str());
    } else if (Flag(argv[i], "--victim_bursts_per_ms", &v)) {
      o.victim_bursts_per_ms = std::atoi(v.c_str());
    } else if (Flag(argv[i], "--max_idle_ms", &v)) {
      o.max_idle_ms = static_cast<uint32_t>(std::atoi(v.c_str()));
    } else if (Flag(argv[i], "--max_megaflows", &v)) {
      o.max_megaflows = static_cast<uint32_t>(std::atoi(v.c_str()));
    } else if (Flag(argv[i], "--upcall_rate", &v)) {
      o.upcall_rate = static_cast<uint32_t>(std::atoi(v.c_str()));
    } else if (Flag(argv[i], "--upcall_burst", &v)) {
      o.upcall_burst = static_cast<uint32_t>(std::atoi(v.c_str()));
    } else if (Flag(argv[i], "--upcall_limit_action", &v)) {
      auto a = ParseUpcallLimitAction(v);
      if (!a.ok()) {
        std::fprintf(stderr, "soak_benchmark: %s\n", std::string(a.status().message()).c_str());
        return 2;
      }
      o.upcall_limit_action = *a;
    } else if (Flag(argv[i], "--sample_seconds", &v)) {
      o.sample_seconds = std::strtoull(v.c_str(), nullptr, 10);
    } else if (Flag(argv[i], "--drain_seconds", &v)) {
      o.drain_seconds = std::strtoull(v.c_str(), nullptr, 10);
    } else if (Flag(argv[i], "--seed", &v)) {
      o.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: soak_benchmark [--sim_seconds=S] [--scan_rate=N] [--victim_flows=N] "
                   "[--victim_bursts_per_ms=N] [--max_idle_ms=MS] [--max_megaflows=N] "
                   "[--upcall_rate=N] [--upcall_burst=N] [--upcall_limit_action=drop|classify] "
                   "[--sample_seconds=S] [--drain_seconds=S] [--seed=N]\n"
                   "unknown argument: %s\n",
                   argv[i]);
      return 2;
    }
  }
  if (o.sim_seconds < 1 || o.sample_seconds < 1 || o.victim_flows < 1 ||
      o.victim_bursts_per_ms < 1) {
    std::fprintf(stderr, "soak_benchmark: sim_seconds, sample_seconds, victim_flows and "
                         "victim_bursts_per_ms must be at least 1\n");
    return 2;
  }

  RuleTable table;
  std::vector<RuleOp> ops;
  for (const Rule& r : bench::SoakRules()) ops.push_back(RuleOp::Insert(r));
  if (auto s = table.ApplyBatch(ops); !s.ok()) {
    std::fprintf(stderr, "rules: %s\n", std::string(s.status().message()).c_str());
    return 1;
  }
  std::vector<FlowKey> victim;
  std::vector<Verdict> expected;
  uint64_t vs = 7;
  for (int i = 0; i < o.victim_flows; ++i) {
    victim.push_back(bench::AclVictimKey(i, &vs));
    Flow wc;
    const Rule* r = table.Lookup(victim.back(), &wc);
    if (r == nullptr || r->action.kind != Action::Kind::kOutput) {
      std::fprintf(stderr, "victim key %s not forwarded\n", victim.back().ToString().c_str());
      return 1;
    }
    expected.push_back(Verdict{r->id, r->action});
  }
  // What the scan claims, checked offline: distinct megaflows of a sample.
  {
    uint64_t s = o.seed;
    std::set<std::vector<uint64_t>> megaflows;
    constexpr int kSampleKeys = 20000;
    for (int i = 0; i < kSampleKeys; ++i) {
      const FlowKey k = bench::ScanKey(&s);
      Flow wc;
      table.Lookup(k, &wc);
      const Flow value = k.ToFlow() & wc;
      std::vector<uint64_t> id(value.w.begin(), value.w.end());
      id.insert(id.end(), wc.w.begin(), wc.w.end());
      megaflows.insert(std::move(id));
    }
    std::printf("rules: %zu (ACL + 2000 /32 blocklist on in_port 1); victim: %d EMC-resident "
                "flows, %d burst(s) of %d per simulated ms; scan: %u new 5-tuples per simulated "
                "s (%zu distinct megaflows in %d sampled scan keys)\n",
                ops.size(), o.victim_flows, o.victim_bursts_per_ms, kMaxBurst, o.scan_rate,
                megaflows.size(), kSampleKeys);
  }
  PipelineConfig cfg;
  cfg.megaflow_max_idle_ms = o.max_idle_ms;
  cfg.max_megaflows = o.max_megaflows;
  cfg.upcall_rate = o.upcall_rate;
  cfg.upcall_burst = o.upcall_burst;
  cfg.upcall_limit_action = o.upcall_limit_action;
  auto p = Pipeline::Create(cfg);
  if (!p.ok()) {
    std::fprintf(stderr, "pipeline: %s\n", std::string(p.status().message()).c_str());
    return 1;
  }
  Pipeline& pl = **p;
  ManualPipelineClock clock;
  pl.SetClock(&clock);
  pl.SetRuleTable(&table);
  std::printf("pipeline: megaflow_max_idle_ms %u max_megaflows %u upcall_rate %u upcall_burst %u "
              "upcall_limit_action %s rare_mask_subtables %u; expiry budget %u per ms; drain "
              "every %llu s; load %s\n",
              o.max_idle_ms, o.max_megaflows, o.upcall_rate, o.upcall_burst,
              std::string(UpcallLimitActionName(o.upcall_limit_action)).c_str(),
              pl.config().rare_mask_subtables,
              Pipeline::kExpiryPerTick, static_cast<unsigned long long>(o.drain_seconds),
              LoadAverage().c_str());
  std::printf("%5s %9s %9s %7s %8s %9s %8s %8s %8s %8s %10s %9s %7s\n", "min", "megaflows",
              "max", "subtabs", "expired", "scan_pkts", "upc_ok", "upc_fail", "limited", "drops",
              "victim_cpp", "rest_cpp", "emc%");

  Verdict v[kMaxBurst];
  FlowKey burst[kMaxBurst];
  size_t vi = 0;
  uint64_t scan_seed = o.seed, wrong = 0, max_megaflows = 0;
  uint64_t scan_milli = 0;  // thousandths of a scan packet owed
  int scan_n = 0;
  std::vector<Sample> samples;
  Sample cur;
  PmdStats at_sample = pl.stats();
  const uint64_t warm_ms = 60000;
  const uint64_t total_ms = warm_ms + o.sim_seconds * 1000;
  const uint64_t sample_ms = o.sample_seconds * 1000;
  for (uint64_t t = 1; t <= total_ms; ++t) {
    ++clock.now;
    for (int b = 0; b < o.victim_bursts_per_ms; ++b) {
      for (int k = 0; k < kMaxBurst; ++k) {
        burst[k] = victim[vi];
        if (++vi == victim.size()) vi = 0;
      }
      const size_t first = (vi + victim.size() * kMaxBurst - kMaxBurst) % victim.size();
      const uint64_t c0 = bench::Cycles();
      pl.ProcessBurst(burst, kMaxBurst, v);
      const uint64_t dc = bench::Cycles() - c0;
      cur.victim_cycles += dc;
      cur.victim_packets += kMaxBurst;
      if (b > 0) cur.rest_cycles += dc, cur.rest_packets += kMaxBurst;
      for (int k = 0; k < kMaxBurst; ++k) wrong += v[k] != expected[(first + k) % victim.size()];
    }
    if (t > warm_ms) {
      scan_milli += o.scan_rate;
      while (scan_milli >= 1000) {
        scan_milli -= 1000;
        burst[scan_n++] = bench::ScanKey(&scan_seed);
        if (scan_n == kMaxBurst) {
          pl.ProcessBurst(burst, scan_n, v);
          cur.scan_packets += static_cast<uint64_t>(scan_n);
          scan_n = 0;
        }
      }
      if (scan_n) {
        pl.ProcessBurst(burst, scan_n, v);
        cur.scan_packets += static_cast<uint64_t>(scan_n);
        scan_n = 0;
      }
    }
    if (o.drain_seconds && t % (o.drain_seconds * 1000) == 0) pl.DrainRetiredHits();
    max_megaflows = std::max(max_megaflows, pl.megaflow_count());
    cur.max_megaflows = std::max(cur.max_megaflows, pl.megaflow_count());
    if (t == warm_ms || (t > warm_ms && ((t - warm_ms) % sample_ms == 0 || t == total_ms))) {
      const PipelineSnapshot snap = pl.Snapshot();
      PmdStats d = snap.stats;
      d -= at_sample;
      at_sample = snap.stats;
      cur.end_s = t <= warm_ms ? 0 : (t - warm_ms) / 1000;
      cur.megaflows = snap.megaflows;
      cur.subtables = snap.subtables;
      cur.expired = d.megaflows_expired;
      cur.upcall_ok = d.upcall_ok;
      cur.upcall_failed = d.upcall_failed;
      cur.rate_limited = d.upcalls_rate_limited;
      cur.limit_drops = d.upcall_limit_drops;
      cur.megaflow_cap = d.upcalls_megaflow_cap;
      cur.emc_hits = d.emc_hits;
      const PmdStats& s = snap.stats;
      if (s.packets != s.emc_hits + s.smc_hits + s.megaflow_hits + s.upcall_ok +
                           s.upcall_failed ||
          snap.megaflows != pl.megaflow_count()) {
        std::fprintf(stderr, "counters do not add up at %llu s:\n%s",
                     static_cast<unsigned long long>(cur.end_s),
                     Pipeline::FormatStats(snap).c_str());
        return 1;
      }
      std::printf("%5.1f %9llu %9llu %7llu %8llu %9llu %8llu %8llu %8llu %8llu %10.1f %9.1f "
                  "%7.2f\n",
                  static_cast<double>(cur.end_s) / 60.0,
                  static_cast<unsigned long long>(cur.megaflows),
                  static_cast<unsigned long long>(cur.max_megaflows),
                  static_cast<unsigned long long>(cur.subtables),
                  static_cast<unsigned long long>(cur.expired),
                  static_cast<unsigned long long>(cur.scan_packets),
                  static_cast<unsigned long long>(cur.upcall_ok),
                  static_cast<unsigned long long>(cur.upcall_failed),
                  static_cast<unsigned long long>(cur.rate_limited),
                  static_cast<unsigned long long>(cur.limit_drops), cur.VictimCpp(),
                  cur.RestCpp(),
                  cur.victim_packets
                      ? 100.0 * static_cast<double>(cur.emc_hits) /
                            static_cast<double>(cur.victim_packets)
                      : 0.0);
      std::fflush(stdout);
      samples.push_back(cur);
      cur = Sample{};
    }
  }
  const PipelineSnapshot end = pl.Snapshot();
  pl.SetRuleTable(nullptr);
  if (wrong) {
    std::fprintf(stderr, "soak: %llu victim verdicts wrong\n",
                 static_cast<unsigned long long>(wrong));
    return 1;
  }
  const Sample& base = samples.front();
  const Sample& first = samples.size() > 1 ? samples[1] : base;
  const Sample& last = samples.back();
  std::printf("victim: every verdict right; cycles/packet %.1f (%.1f in bursts without a "
              "sweep) without the scan (minute 0), %.1f (%.1f) in the last minute; "
              "megaflows_expired %llu, upcall_limit_drops %llu, upcalls_megaflow_cap %llu in "
              "all; load %s\n",
              base.VictimCpp(), base.RestCpp(), last.VictimCpp(), last.RestCpp(),
              static_cast<unsigned long long>(end.stats.megaflows_expired),
              static_cast<unsigned long long>(end.stats.upcall_limit_drops),
              static_cast<unsigned long long>(end.stats.upcalls_megaflow_cap),
              LoadAverage().c_str());
  std::printf("soak: sim_seconds=%llu max_megaflows=%llu final_megaflows=%llu "
              "victim_cpp_first=%.1f victim_cpp_last=%.1f\n",
              static_cast<unsigned long long>(o.sim_seconds),
              static_cast<unsigned long long>(max_megaflows),
              static_cast<unsigned long long>(end.megaflows), first.VictimCpp(),
              last.VictimCpp());
  return 0;
}

}  // namespace
}  // namespace flowclass

int main(int argc, char** argv) { return flowclass::Main(argc, argv); }
