// The Cuckoo Distributor RFC's setup, in process, through the real Pipeline.
//
// K rules, one per RuleTable subtable, all on ipv4_src: rule k (k = 0..K-1,
// priority K-k) matches the prefix "k zero bits then a one" (length k+1), so
// the rules are disjoint and a flow matching rule k makes the slow path
// consult subtables 0..k: its megaflow mask is that prefix, and the megaflow
// classifier ends up with exactly K subtables.  F flows (default 1M) with
// random src/dst addresses are spread evenly over the K rules, EMC on
// (insert probability 1/100, as OVS): most packets miss the 8K-entry EMC and
// are classified by the layers under test:
//
//   ranking   SMC off, CD off: ranked sequential subtable search
//   smc       SMC on,  CD off: signature -> megaflow
//   cd        SMC off, CD on:  signature -> subtable, one probe
//   auto      SMC off, CD adaptive (default thresholds, 100 ms intervals):
//             flowclassd's default until pipeline.smc auto
//   default   PipelineConfig's defaults: SMC auto (its cost controller,
//             docs/caches-emc-smc.md), CD adaptive; the warm-up goes on
//             until the SMC controller has decided (at most 10 s)
//
// Each configuration first runs two warm-up passes over all flows (megaflows
// installed, caches filled, subtables ranked), then the timed passes: bursts
// of 32 keys in a fixed random order.  Keys are prepared before timing.
// Prints Mpps, cycles/packet, lookups per megaflow hit and per-layer hit
// shares, and the ratios the issue asks for, all from this one process:
//   cd(K=30) / ranking(K=30)      target >= 3
//   cd(K=30) / cd(K=1)            target >= 0.7 (flat in K)
//   default / max(smc, auto)      the default must be the best mode (>= 1)
//
//   build/bench/cache_hierarchy_benchmark [--flows N] [--passes P]
//       [--reps R] [--k 1,10,20,30]
// Each row is the best of R runs (default 3): the machine this was written
// on is shared, and the best run is the one least disturbed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dataplane/pipeline.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {
namespace {

struct Options {
  uint32_t flows = 1u << 20;
  int passes = 3;
  int reps = 3;  // best of `reps` runs per configuration (noisy machines)
  std::vector<int> ks = {1, 10, 20, 30};
};

struct Result {
  double mpps = 0;
  double cycles_per_packet = 0;
  double lookups_per_hit = 0;
  double emc_share = 0, smc_share = 0, cd_share = 0, megaflow_share = 0,
         upcall_share = 0;
  uint64_t subtables = 0;
  bool cd_on = false;
  bool smc_on = false;
};

uint32_t PrefixMask(int len) {
  return len == 0 ? 0 : static_cast<uint32_t>(0xffffffffull << (32 - len));
}

std::unique_ptr<RuleTable> MakeRules(int k_count) {
  auto table = std::make_unique<RuleTable>();
  std::vector<RuleOp> ops;
  for (int k = 0; k < k_count; ++k) {
    Rule r;
    r.id = static_cast<uint64_t>(k + 1);
    r.priority = static_cast<uint32_t>(k_count - k);
    r.match.SetExact(Field::kEthType, kEthTypeIpv4);
    r.match.SetMasked(Field::kIpv4Src, 1u << (31 - k), PrefixMask(k + 1));
    r.action = Action::Output(static_cast<uint32_t>(k % 4 + 1));
    ops.push_back(RuleOp::Insert(r));
  }
  if (!table->ApplyBatch(ops).ok()) std::abort();
  return table;
}

std::vector<FlowKey> MakeFlows(int k_count, uint32_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<FlowKey> keys(n);
  for (uint32_t i = 0; i < n; ++i) {
    const int k = static_cast<int>(i % static_cast<uint32_t>(k_count));
    const uint32_t low = static_cast<uint32_t>(rng()) & ~PrefixMask(k + 1);
    const uint32_t src = (1u << (31 - k)) | low;
    keys[i] = MakeFiveTupleKey(src, static_cast<uint32_t>(rng()),
                               static_cast<uint16_t>(rng()),
                               static_cast<uint16_t>(rng()), kIpProtoUdp);
  }
  std::shuffle(keys.begin(), keys.end(), rng);
  return keys;
}

Result Run(const std::string& mode, const RuleTable& table,
           const std::vector<FlowKey>& keys, int passes) {
  PipelineConfig cfg;
  if (mode != "default") {
    cfg.smc = mode == "smc" ? CacheMode::kOn : CacheMode::kOff;
    cfg.cd.mode = mode == "cd"     ? CdMode::kOn
                  : mode == "auto" ? CdMode::kAuto
                                   : CdMode::kOff;
  }
  cfg.ranking_interval_ms = 100;  // lets the adaptive CD decide in a run
  cfg.max_megaflows = 1u << 16;
  auto p = Pipeline::Create(cfg);
  if (!p.ok()) std::abort();
  Pipeline& pipeline = **p;
  pipeline.SetRuleTable(&table);

  Verdict verdicts[kMaxBurst];
  const size_t n = keys.size();
  auto pass = [&] {
    for (size_t i = 0; i + kMaxBurst <= n; i += kMaxBurst) {
      pipeline.ProcessBurst(&keys[i], kMaxBurst, verdicts);
    }
  };
  pass();  // warm-up: megaflows, caches
  pass();
  if (mode == "default") {  // until the SMC's cost controller has decided
    const auto start = std::chrono::steady_clock::now();
    for (PipelineSnapshot s = pipeline.Snapshot();
         (s.smc_probes == 0 || s.smc_probing) &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10);
         s = pipeline.Snapshot())
      pass();
  }
  pipeline.RunPeriodic();  // rank subtables by the warm-up's hits
  const PmdStats before = pipeline.stats();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < passes; ++i) pass();
  const auto t1 = std::chrono::steady_clock::now();
  PmdStats d = pipeline.stats();
  d -= before;

  Result r;
  const double secs = std::chrono::duration<double>(t1 - t0).count();
  const double pk = static_cast<double>(d.packets);
  r.mpps = pk / secs / 1e6;
  r.cycles_per_packet = d.AvgCyclesPerPacket();
  r.lookups_per_hit = d.AvgSubtableLookupsPerHit();
  r.emc_share = d.emc_hits / pk;
  r.smc_share = d.smc_hits / pk;
  r.cd_share = d.cd_hits / pk;
  r.megaflow_share = (d.megaflow_hits - d.cd_hits) / pk;
  r.upcall_share = (d.upcall_ok + d.upcall_failed) / pk;
  r.subtables = pipeline.Snapshot().subtables;
  r.cd_on = pipeline.cd_enabled();
  r.smc_on = pipeline.smc_enabled();
  pipeline.SetRuleTable(nullptr);
  return r;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--flows") {
      o.flows = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    } else if (a == "--passes") {
      o.passes = std::atoi(argv[i + 1]);
    } else if (a == "--reps") {
      o.reps = std::max(1, std::atoi(argv[i + 1]));
    } else if (a == "--k") {
      o.ks.clear();
      for (char* s = argv[i + 1]; *s;) {
        o.ks.push_back(static_cast<int>(std::strtol(s, &s, 10)));
        if (*s == ',') ++s;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--flows N] [--passes P] [--reps R] [--k 1,10,20,30]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  return o;
}

int Main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  std::printf("flows=%u passes=%d burst=%d emc_insert_inv_prob=100\n\n", o.flows,
              o.passes, kMaxBurst);
  std::printf("%-4s %-8s %8s %9s %9s %6s %6s %6s %6s %6s %9s %5s %6s\n", "K",
              "mode", "Mpps", "cyc/pkt", "lkup/hit", "emc", "smc", "cd",
              "mflow", "upcall", "subtables", "cd_on", "smc_on");
  std::map<std::pair<int, std::string>, Result> all;
  for (int k : o.ks) {
    const auto table = MakeRules(k);
    const auto keys = MakeFlows(k, o.flows, 12345 + k);
    for (const std::string mode : {"ranking", "smc", "cd", "auto", "default"}) {
      Result r = Run(mode, *table, keys, o.passes);
      for (int rep = 1; rep < o.reps; ++rep) {
        const Result again = Run(mode, *table, keys, o.passes);
        if (again.mpps > r.mpps) r = again;
      }
      all[{k, mode}] = r;
      std::printf(
          "%-4d %-8s %8.2f %9.1f %9.2f %6.3f %6.3f %6.3f %6.3f %6.3f %9lu %5s %6s\n",
          k, mode.c_str(), r.mpps, r.cycles_per_packet, r.lookups_per_hit,
          r.emc_share, r.smc_share, r.cd_share, r.megaflow_share,
          r.upcall_share, static_cast<unsigned long>(r.subtables),
          r.cd_on ? "on" : "off", r.smc_on ? "on" : "off");
    }
  }
  std::printf("\nratios (same process):\n");
  for (int k : o.ks) {
    const double rank = all[{k, "ranking"}].mpps;
    std::printf("  K=%-3d cd/ranking %.2fx   smc/ranking %.2fx   auto/ranking %.2fx   "
                "default/smc %.2fx   default/auto %.2fx\n",
                k, all[{k, "cd"}].mpps / rank, all[{k, "smc"}].mpps / rank,
                all[{k, "auto"}].mpps / rank, all[{k, "default"}].mpps / all[{k, "smc"}].mpps,
                all[{k, "default"}].mpps / all[{k, "auto"}].mpps);
  }
  const int kmin = o.ks.front(), kmax = o.ks.back();
  std::printf("  cd(K=%d)/cd(K=%d) %.2fx   (target >= 0.70)\n", kmax, kmin,
              all[{kmax, "cd"}].mpps / all[{kmin, "cd"}].mpps);
  std::printf("  cd(K=%d)/ranking(K=%d) %.2fx   (target >= 3.00)\n", kmax, kmax,
              all[{kmax, "cd"}].mpps / all[{kmax, "ranking"}].mpps);
  return 0;
}

}  // namespace
}  // namespace flowclass

int main(int argc, char** argv) { return flowclass::Main(argc, argv); }
