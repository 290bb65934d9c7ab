// tse_benchmark — the Tuple Space Explosion attack (Csikor et al., CoNEXT
// 2019) against one pipeline: victim Mpps with no attack, under attack with
// every defence off, and under attack with the defences as flowclassd has
// them by default (the mask-explosion defence; the upcall rate limit only
// with --upcall_rate), all in one run.
//
//   ninja -C build tse_benchmark && build/bench/tse_benchmark
//   [--seconds=S] [--rounds=R] [--attack_share=F] [--rare_mask_subtables=T]
//   [--upcall_rate=N] [--upcall_burst=N] [--repeat=K]
//
// The rule set is an ACL on in_port 1: four allow rules under 10.0.0.0/16 ->
// 192.168.0.0/16 (a /24 source, a /24 destination, tp_dst=80, tp_src=53)
// and a default drop.  A key inside both /16s that fails all four has, in
// its megaflow mask, one bit per failed rule (the highest bit where it
// differs from the rule, docs/classifier.md): choosing that bit in each of
// the four fields (8 x 8 x 16 x 16) gives 16384 keys of 16384 different
// masks, each a new subtable.  The attacker sends them round-robin (each
// K = --repeat times in a row), at --attack_share of the victim's packet
// rate, on the victim's port.  The victim is 3 x 20000 flows that the allow
// rules forward (3 megaflows), EMC off so every packet is a dpcls lookup.
//
// Each round runs the three cases one after the other (fresh pipeline,
// victim flows warm, the attack key set sent once, then --seconds of mixed
// traffic); the victim's Mpps of each case is victim packets over the
// case's wall time.  Prints per round, the subtables each case ended with,
// the medians, the load average, and last, exactly:
//   tse: no_attack=A undefended=B defended=C
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dataplane/bench_common.h"
#include "dataplane/pipeline.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {
namespace {

struct Options {
  double seconds = 1.0;
  int rounds = 5;
  double attack_share = 0.01;
  // The defended case: the pipeline's defaults unless told otherwise.
  uint32_t rare_mask_subtables = PipelineConfig{}.rare_mask_subtables;
  uint32_t upcall_rate = PipelineConfig{}.upcall_rate;
  uint32_t upcall_burst = PipelineConfig{}.upcall_burst;
  int repeat = 1;
};

using bench::AclRules;
using bench::Flag;
using bench::LoadAverage;
using bench::Median;
using bench::Rng;

// 3 x 20000 flows the allow rules 1, 2 and 3 forward.
std::vector<FlowKey> VictimKeys() {
  std::vector<FlowKey> keys;
  uint64_t s = 1;
  for (int i = 0; i < 60000; ++i) keys.push_back(bench::AclVictimKey(i, &s));
  // Interleaved, so that a burst has all three.
  for (size_t i = keys.size() - 1; i > 0; --i) std::swap(keys[i], keys[Rng(&s) % (i + 1)]);
  return keys;
}

enum Case { kNoAttack, kUndefended, kDefended };
const char* kCaseName[] = {"no_attack", "undefended", "defended"};

struct Result {
  double victim_mpps = 0;
  uint64_t subtables = 0, victim_forwarded = 0, victim_packets = 0;
  PmdStats stats;
};

Result RunCase(Case c, const Options& o, const RuleTable& table,
               const std::vector<FlowKey>& victim, const std::vector<FlowKey>& attack) {
  PipelineConfig cfg;
  cfg.emc = false;  // the victim goes through the dpcls
  if (c == kUndefended) {  // every defence off
    cfg.upcall_rate = 0;
    cfg.rare_mask_subtables = 0;
  } else if (c == kDefended) {
    cfg.upcall_rate = o.upcall_rate;
    cfg.upcall_burst = o.upcall_burst;
    cfg.upcall_limit_action = UpcallLimitAction::kDrop;
    cfg.rare_mask_subtables = o.rare_mask_subtables;
  }
  auto p = Pipeline::Create(cfg);
  if (!p.ok()) {
    std::fprintf(stderr, "pipeline: %s\n", std::string(p.status().message()).c_str());
    std::exit(1);
  }
  Pipeline& pl = **p;
  pl.SetRuleTable(&table);
  Verdict v[kMaxBurst];
  for (size_t i = 0; i + kMaxBurst <= victim.size(); i += kMaxBurst)
    pl.ProcessBurst(&victim[i], kMaxBurst, v);
  if (c != kNoAttack)
    for (size_t i = 0; i + kMaxBurst <= attack.size(); i += kMaxBurst)
      pl.ProcessBurst(&attack[i], kMaxBurst, v);
  pl.RunPeriodic();  // rank: the victim's subtables first

  Result r;
  const PmdStats before = pl.stats();
  size_t vi = 0, ai = 0;
  double credit = 0;
  const double per_victim_burst = kMaxBurst * o.attack_share;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto t = t0;
  while (t - t0 < std::chrono::duration<double>(o.seconds)) {
    for (int b = 0; b < 64; ++b) {
      pl.ProcessBurst(&victim[vi], kMaxBurst, v);
      for (int k = 0; k < kMaxBurst; ++k)
        r.victim_forwarded += v[k].rule_id != 0 && v[k].action.kind == Action::Kind::kOutput;
      r.victim_packets += kMaxBurst;
      vi += kMaxBurst;
      if (vi + kMaxBurst > victim.size()) vi = 0;
      if (c == kNoAttack) continue;
      credit += per_victim_burst;
      while (credit >= kMaxBurst) {
        pl.ProcessBurst(&attack[ai], kMaxBurst, v);
        ai += kMaxBurst;
        if (ai + kMaxBurst > attack.size()) ai = 0;
        credit -= kMaxBurst;
      }
    }
    t = Clock::now();
  }
  const double secs = std::chrono::duration<double>(t - t0).count();
  r.victim_mpps = static_cast<double>(r.victim_packets) / secs / 1e6;
  r.subtables = pl.Snapshot().subtables;
  r.stats = pl.stats();
  r.stats -= before;
  pl.SetRuleTable(nullptr);
  return r;
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (Flag(argv[i], "--seconds", &v)) {
      o.seconds = std::atof(v.c_str());
    } else if (Flag(argv[i], "--rounds", &v)) {
      o.rounds = std::atoi(v.c_str());
    } else if (Flag(argv[i], "--attack_share", &v)) {
      o.attack_share = std::atof(v.c_str());
    } else if (Flag(argv[i], "--rare_mask_subtables", &v)) {
      o.rare_mask_subtables = static_cast<uint32_t>(std::atoi(v.c_str()));
    } else if (Flag(argv[i], "--upcall_rate", &v)) {
      o.upcall_rate = static_cast<uint32_t>(std::atoi(v.c_str()));
    } else if (Flag(argv[i], "--upcall_burst", &v)) {
      o.upcall_burst = static_cast<uint32_t>(std::atoi(v.c_str()));
    } else if (Flag(argv[i], "--repeat", &v)) {
      o.repeat = std::max(1, std::atoi(v.c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: tse_benchmark [--seconds=S] [--rounds=R] [--attack_share=F] "
                   "[--rare_mask_subtables=T] [--upcall_rate=N] [--upcall_burst=N] "
                   "[--repeat=K]\nunknown argument: %s\n",
                   argv[i]);
      return 2;
    }
  }
  if (o.rounds < 1 || o.seconds <= 0 || o.attack_share < 0) {
    std::fprintf(stderr, "tse_benchmark: rounds >= 1, seconds > 0, attack_share >= 0\n");
    return 2;
  }
  RuleTable table;
  std::vector<RuleOp> ops;
  for (const Rule& r : AclRules()) ops.push_back(RuleOp::Insert(r));
  if (auto s = table.ApplyBatch(ops); !s.ok()) {
    std::fprintf(stderr, "rules: %s\n", std::string(s.status().message()).c_str());
    return 1;
  }
  const std::vector<FlowKey> victim = VictimKeys();
  const std::vector<FlowKey> attack = bench::TseAttackKeys(o.repeat);

  // What the attack claims, checked offline: distinct megaflow masks of the
  // attack keys, and that every victim key is forwarded.
  std::set<std::vector<uint64_t>> masks, victim_masks;
  for (const FlowKey& k : attack) {
    Flow wc;
    const Rule* r = table.Lookup(k, &wc);
    if (r == nullptr || r->id != 5) {
      std::fprintf(stderr, "attack key %s not denied by the default rule\n", k.ToString().c_str());
      return 1;
    }
    masks.insert(std::vector<uint64_t>(wc.w.begin(), wc.w.end()));
  }
  for (const FlowKey& k : victim) {
    Flow wc;
    const Rule* r = table.Lookup(k, &wc);
    if (r == nullptr || r->action.kind != Action::Kind::kOutput) {
      std::fprintf(stderr, "victim key %s not forwarded\n", k.ToString().c_str());
      return 1;
    }
    victim_masks.insert(std::vector<uint64_t>(wc.w.begin(), wc.w.end()));
  }
  std::printf("rules: %zu (ACL on in_port 1); victim: %zu flows, %zu masks; attack: %zu keys, "
              "%zu distinct megaflow masks (RuleTable), sent each %d time(s) in a row at %.2f%% "
              "of the victim's packets\n",
              ops.size(), victim.size(), victim_masks.size(), attack.size() / o.repeat,
              masks.size(), o.repeat, 100 * o.attack_share);
  std::printf("undefended: upcall_rate 0 rare_mask_subtables 0; defended: upcall_rate %u "
              "upcall_burst %u upcall_limit_action drop rare_mask_subtables %u; load %s\n",
              o.upcall_rate, o.upcall_burst, o.rare_mask_subtables, LoadAverage().c_str());

  std::vector<double> mpps[3];
  Result last[3];
  for (int round = 0; round < o.rounds; ++round) {
    for (Case c : {kNoAttack, kUndefended, kDefended}) {
      const Result r = RunCase(c, o, table, victim, attack);
      mpps[c].push_back(r.victim_mpps);
      last[c] = r;
      std::printf("round %d %-10s victim %.2f Mpps, forwarded %.4f, subtables %llu, upcalls "
                  "ok %llu failed %llu (rate limited %llu, rare mask %llu, subtable cap %llu)\n",
                  round, kCaseName[c], r.victim_mpps,
                  static_cast<double>(r.victim_forwarded) / static_cast<double>(r.victim_packets),
                  static_cast<unsigned long long>(r.subtables),
                  static_cast<unsigned long long>(r.stats.upcall_ok),
                  static_cast<unsigned long long>(r.stats.upcall_failed),
                  static_cast<unsigned long long>(r.stats.upcalls_rate_limited),
                  static_cast<unsigned long long>(r.stats.upcalls_rare_mask),
                  static_cast<unsigned long long>(r.stats.upcalls_subtable_cap));
      std::fflush(stdout);
    }
  }
  const double a = Median(mpps[kNoAttack]), b = Median(mpps[kUndefended]),
               d = Median(mpps[kDefended]);
  std::printf("subtables at the end: no_attack %llu undefended %llu defended %llu\n",
              static_cast<unsigned long long>(last[kNoAttack].subtables),
              static_cast<unsigned long long>(last[kUndefended].subtables),
              static_cast<unsigned long long>(last[kDefended].subtables));
  std::printf("medians of %d rounds: undefended %.2fx, defended %.2fx of no_attack; load %s\n",
              o.rounds, b / a, d / a, LoadAverage().c_str());
  std::printf("tse: no_attack=%.2f undefended=%.2f defended=%.2f\n", a, b, d);
  return 0;
}

}  // namespace
}  // namespace flowclass

int main(int argc, char** argv) { return flowclass::Main(argc, argv); }
