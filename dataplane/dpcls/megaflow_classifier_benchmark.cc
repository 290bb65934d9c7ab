// Megaflow classifier (dpcls) benchmarks.
//
// BM_LookupBurst/<K>/<mode>: K subtables on one in_port, each one mask
//   (in_port + ipv4_src /16../32 + ipv4_dst + tp_dst, + nw_proto from the
//   18th on; tp_dst = subtable number keeps them disjoint), FLOWCLASS_BENCH_MEGAFLOWS megaflows
//   (default 1M) spread evenly; bursts of 32 random resident keys.
//   mode 0: uniform traffic over subtables (ranking cannot help);
//   mode 1: 90% of traffic to the subtable created last, never ranked
//           (the worst case ranking exists for);
//   mode 2: same skew after a warm-up and Rank().
//   Reports ns per key (items_per_second inverted) and lookups_per_hit
//   (OVS "avg. subtable lookups per megaflow hit").
// BM_LookupMiss/<K>: every key misses, so all K subtables are probed.
// BM_InstallRemove: the upcall side, one Install + one Remove.
// BM_Rank/<K>: the periodic re-sort, order already settled.
//
//   ninja -C build megaflow_classifier_benchmark &&
//   build/bench/megaflow_classifier_benchmark --benchmark_counters_tabular=true
#include <bit>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"
#include "dataplane/dpcls/megaflow_classifier.h"

namespace flowclass {
namespace {

constexpr uint32_t kPort = 3;
constexpr int kKeys = 1 << 16;

uint32_t MegaflowTarget() {
  if (const char* env = std::getenv("FLOWCLASS_BENCH_MEGAFLOWS"))
    return static_cast<uint32_t>(std::strtoul(env, nullptr, 10));
  return 1u << 20;
}

Flow SubtableMask(int k) {
  Flow m;
  m.Set(Field::kInPort, 0xffffffff);
  const int prefix = 16 + k % 17;
  m.Set(Field::kIpv4Src, (0xffffffffull << (32 - prefix)) & 0xffffffffull);
  m.Set(Field::kIpv4Dst, 0xffffffff);
  m.Set(Field::kTpDst, 0xffff);
  // Prefix lengths repeat after 17 subtables; nw_proto makes the shape new.
  if (k >= 17) m.Set(Field::kNwProto, 0xff);
  return m;
}

// One populated classifier, rebuilt only when K changes (benchmarks are
// registered grouped by K), so 1M-megaflow setups are not repeated per run.
struct World {
  int k = 0;
  std::unique_ptr<MegaflowPool> pool;
  std::unique_ptr<MegaflowClassifier> dpcls;
  std::vector<std::vector<Flow>> values;  // per subtable

  static World& Get(int k) {
    static World w;
    if (w.k != k) w.Build(k);
    return w;
  }

  void Build(int new_k) {
    dpcls.reset();
    pool.reset();
    k = new_k;
    const uint32_t n = MegaflowTarget();
    pool = std::make_unique<MegaflowPool>(n);
    dpcls = *MegaflowClassifier::Create(pool.get());
    values.assign(k, {});
    std::mt19937_64 rng(k);
    const uint32_t per = n / k;
    for (int s = 0; s < k; ++s) {
      const Flow mask = SubtableMask(s);
      for (uint32_t i = 0; i < per; ++i) {
        Flow v;
        v.Set(Field::kInPort, kPort);
        v.Set(Field::kIpv4Src, rng());
        v.Set(Field::kIpv4Dst, i * 2654435761u);  // distinct per subtable
        v.Set(Field::kTpDst, s);
        v.Set(Field::kNwProto, kIpProtoUdp);
        if (dpcls->Install(v, mask, Verdict{1, Action::Output(1)}) == nullptr)
          std::abort();
        values[s].push_back(v & mask);
      }
    }
    if (dpcls->subtable_count() != size_t(k)) std::abort();  // shapes distinct
  }

  // Ranks subtables in creation order again (undoing a previous run's
  // Rank()): subtable s gets k - s hits, then Rank() sorts by them.
  void RestoreCreationOrder() {
    dpcls->Rank();  // zero the counters
    Megaflow* out;
    for (int s = 0; s < k; ++s) {
      const FlowKey key = FlowKey::FromFlow(values[s][0]);
      for (int i = 0; i < k - s; ++i)
        dpcls->LookupBurst(kPort, &key, 1, &out, nullptr);
    }
    dpcls->Rank();
  }

  // Keys covered by resident megaflows; skewed: 90% from subtable k-1.
  std::vector<FlowKey> Keys(bool skewed, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::vector<FlowKey> keys(kKeys);
    for (FlowKey& key : keys) {
      const int s = skewed && rng() % 10 != 0 ? k - 1 : rng() % k;
      Flow f = values[s][rng() % values[s].size()];
      const Flow mask = SubtableMask(s);
      const uint64_t noise = rng();
      f.w[kWordIpv4] |= noise & ~mask.w[kWordIpv4];
      f.Set(Field::kEthType, kEthTypeIpv4);
      f.Set(Field::kNwProto, kIpProtoUdp);
      f.Set(Field::kTpSrc, noise >> 48);
      key = FlowKey::FromFlow(f);
    }
    return keys;
  }
};

void BM_LookupBurst(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const int mode = static_cast<int>(state.range(1));
  World& w = World::Get(k);
  w.RestoreCreationOrder();
  const std::vector<FlowKey> keys = w.Keys(/*skewed=*/mode != 0, 42);
  Megaflow* out[kMaxBurst];
  uint64_t lookups = 0;
  if (mode == 2) {
    for (int i = 0; i + kMaxBurst <= kKeys; i += kMaxBurst)
      w.dpcls->LookupBurst(kPort, &keys[i], ~0u, out, &lookups);
    w.dpcls->Rank();
  }
  lookups = 0;
  uint64_t hits = 0;
  size_t pos = 0;
  for (auto _ : state) {
    const uint32_t hit =
        w.dpcls->LookupBurst(kPort, &keys[pos], ~0u, out, &lookups);
    benchmark::DoNotOptimize(hit);
    benchmark::DoNotOptimize(out[0]);
    hits += std::popcount(hit);
    pos = (pos + kMaxBurst) & (kKeys - 1);
  }
  if (hits != uint64_t(state.iterations()) * kMaxBurst)
    state.SkipWithError("a resident key missed");
  state.SetItemsProcessed(state.iterations() * kMaxBurst);
  state.counters["ns_per_key"] = benchmark::Counter(
      double(state.iterations()) * kMaxBurst,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["lookups_per_hit"] = hits ? double(lookups) / hits : 0;
}

void BM_LookupMiss(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  World& w = World::Get(k);
  std::vector<FlowKey> keys = w.Keys(/*skewed=*/false, 7);
  for (FlowKey& key : keys) {
    Flow f = key.ToFlow();
    f.Set(Field::kTpDst, 40000);  // no subtable has this tp_dst
    key = FlowKey::FromFlow(f);
  }
  Megaflow* out[kMaxBurst];
  uint64_t lookups = 0;
  size_t pos = 0;
  for (auto _ : state) {
    const uint32_t hit =
        w.dpcls->LookupBurst(kPort, &keys[pos], ~0u, out, &lookups);
    benchmark::DoNotOptimize(hit);
    pos = (pos + kMaxBurst) & (kKeys - 1);
  }
  state.SetItemsProcessed(state.iterations() * kMaxBurst);
  state.counters["ns_per_key"] = benchmark::Counter(
      double(state.iterations()) * kMaxBurst,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_InstallRemove(benchmark::State& state) {
  World& w = World::Get(static_cast<int>(state.range(0)));
  const Flow mask = SubtableMask(0);
  std::mt19937_64 rng(1);
  Flow v;
  v.Set(Field::kInPort, kPort);
  v.Set(Field::kTpDst, 0);
  for (auto _ : state) {
    v.Set(Field::kIpv4Src, rng());
    v.Set(Field::kIpv4Dst, rng() | 1);  // odd: never a resident value's twin
    Megaflow* mf = w.dpcls->Install(v, mask, Verdict{});
    if (mf == nullptr) {
      state.SkipWithError("install failed");
      break;
    }
    w.dpcls->Remove(mf);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Rank(benchmark::State& state) {
  World& w = World::Get(static_cast<int>(state.range(0)));
  for (auto _ : state) w.dpcls->Rank();
}

void LookupArgs(benchmark::internal::Benchmark* b) {
  for (int k : {1, 10, 20, 30})
    for (int mode : {0, 1, 2}) b->Args({k, mode});
}

// Order matters: each K's benchmarks run together so World builds once per K.
BENCHMARK(BM_LookupBurst)->Apply(LookupArgs)->ArgNames({"K", "mode"});
BENCHMARK(BM_LookupMiss)->Arg(30)->ArgName("K");
BENCHMARK(BM_InstallRemove)->Arg(30)->ArgName("K");
BENCHMARK(BM_Rank)->Arg(30)->ArgName("K");

}  // namespace
}  // namespace flowclass

BENCHMARK_MAIN();
