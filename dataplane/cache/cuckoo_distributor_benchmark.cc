// Cuckoo Distributor lookup cost per key, by number of resident flows.
//
//   cuckoo_distributor_benchmark --benchmark_filter=LookupBurst
//
// The table has the default capacity (1M entries, 4 MiB).  `resident` flows
// with random hashes are inserted, then bursts of 32 keys drawn uniformly from
// them are looked up.  The keys of a burst are copied into a small hot array
// first, as the parser would leave them in cache; the measured cost is the
// CD's own (bucket misses included).  At 1M resident flows the table is full,
// so some flows were evicted: see the hit_rate counter.
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "dataplane/cache/cuckoo_distributor.h"
#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"

namespace flowclass {
namespace {

constexpr int kStreamLen = 1 << 20;  // lookups drawn before wrapping around

struct Fixture {
  CuckooDistributor cd;
  std::vector<uint64_t> stream;  // hashes of the lookup sequence

  explicit Fixture(int resident) {
    std::mt19937_64 rng(resident);
    std::vector<uint64_t> hashes(resident);
    FlowKey k;
    for (int i = 0; i < resident; ++i) {
      hashes[i] = rng();
      k.hash = hashes[i];
      cd.Insert(k, static_cast<uint16_t>(i % 64));
    }
    stream.resize(kStreamLen);
    for (uint64_t& h : stream) h = hashes[rng() % resident];
  }
};

void BM_CdLookupBurst(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  FlowKey burst[kMaxBurst];
  uint16_t out[kMaxBurst];
  size_t pos = 0;
  uint64_t hits = 0;
  for (auto _ : state) {
    for (int i = 0; i < kMaxBurst; ++i) burst[i].hash = f.stream[pos + i];
    pos = (pos + kMaxBurst) & (kStreamLen - 1);
    const uint32_t hit = f.cd.LookupBurst(burst, 0xffffffffu, out);
    benchmark::DoNotOptimize(out);
    hits += static_cast<uint64_t>(__builtin_popcount(hit));
  }
  const double keys = static_cast<double>(state.iterations()) * kMaxBurst;
  state.SetItemsProcessed(static_cast<int64_t>(keys));
  state.counters["ns_per_key"] = benchmark::Counter(
      keys, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["hit_rate"] = static_cast<double>(hits) / keys;
  state.counters["occupancy"] = f.cd.Occupancy();
}
BENCHMARK(BM_CdLookupBurst)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20);

// The same lookups one key at a time (no staged prefetch): what the burst
// staging buys once the buckets no longer fit in cache.
void BM_CdLookupSingle(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  FlowKey key;
  size_t pos = 0;
  uint64_t hits = 0;
  for (auto _ : state) {
    for (int i = 0; i < kMaxBurst; ++i) {
      key.hash = f.stream[pos + i];
      uint16_t st;
      hits += f.cd.Lookup(key, &st);
      benchmark::DoNotOptimize(st);
    }
    pos = (pos + kMaxBurst) & (kStreamLen - 1);
  }
  const double keys = static_cast<double>(state.iterations()) * kMaxBurst;
  state.SetItemsProcessed(static_cast<int64_t>(keys));
  state.counters["ns_per_key"] = benchmark::Counter(
      keys, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["hit_rate"] = static_cast<double>(hits) / keys;
}
BENCHMARK(BM_CdLookupSingle)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20);

// Insert of resident flows (the update path a false hit takes).
void BM_CdInsertUpdate(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  FlowKey key;
  size_t pos = 0;
  for (auto _ : state) {
    key.hash = f.stream[pos];
    pos = (pos + 1) & (kStreamLen - 1);
    f.cd.Insert(key, static_cast<uint16_t>(pos));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CdInsertUpdate)->Arg(1 << 10)->Arg(1 << 20);

}  // namespace
}  // namespace flowclass

BENCHMARK_MAIN();
