// Per-subtable burst lookup: generic vs specialised vs avx512, for subtable
// shapes of 2, 4, 8 and 9 words (9 is the whole flow; a 16-word shape cannot
// exist with kFlowWords = 9), hit fractions 100 / 50 / 0 %.  Reports TSC
// cycles per key.  One subtable, 4096 megaflows (table and pool fit in L2,
// so this measures the lookup's compute, not DRAM).  Keys carry all 9 words,
// so extraction has to skip the words the subtable does not look at.
//
//   subtable_lookup_benchmark --benchmark_counters_tabular=true
#include <x86intrin.h>

#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "dataplane/dpcls/megaflow_classifier.h"
#include "dataplane/dpcls/subtable_lookup.h"

namespace flowclass {
namespace {

constexpr int kMegaflows = 4096;
constexpr int kBursts = 512;
const char* const kImpls[] = {"generic", "specialised", "avx512"};

void BM_SubtableLookup(benchmark::State& state) {
  const char* impl = kImpls[state.range(0)];
  const int n_words = static_cast<int>(state.range(1));
  const int hit_pct = static_cast<int>(state.range(2));
  if (std::string(impl) == "avx512" && !CpuHasAvx512Lookup()) {
    state.SkipWithError("CPU lacks AVX-512");
    return;
  }
  MegaflowPool pool(kMegaflows + 16);
  MegaflowClassifierOptions o;
  o.lookup = *LookupPriorities::Only(impl);
  auto c = *MegaflowClassifier::Create(&pool, o);

  // Mask: in_port plus the first n_words-1 other words, fully.
  Flow mask;
  mask.Set(Field::kInPort, 0xffffffff);
  for (int w = 1; w < n_words; ++w) mask.w[w] = ~uint64_t{0};
  std::mt19937_64 rng(n_words * 100 + hit_pct);
  std::vector<Flow> flows;
  for (int i = 0; i < kMegaflows; ++i) {
    Flow f;
    for (uint64_t& w : f.w) w = rng() | 1;  // never zero: all 9 words present
    f.Set(Field::kInPort, 5);
    if (c->Install(f & mask, mask, Verdict{1, Action::Drop()}) != nullptr)
      flows.push_back(f);
  }
  const uint16_t id = c->Subtables().at(0).id;
  if (c->Subtables().at(0).lookup_fn != impl) {
    state.SkipWithError("implementation not selected");
    return;
  }
  std::vector<FlowKey> keys(size_t{kBursts} * kMaxBurst);
  for (FlowKey& k : keys) {
    Flow f = flows[rng() % flows.size()];
    if (static_cast<int>(rng() % 100) >= hit_pct) {
      const int w = n_words > 1 ? 1 + static_cast<int>(rng() % (n_words - 1)) : 0;
      f.w[w] ^= uint64_t{1} << (w == 0 ? 40 : rng() % 64);  // a near miss
      if (w == 0) f.Set(Field::kInPort, 5);
    }
    // Vary the words the subtable ignores.
    for (int w = n_words; w < kFlowWords; ++w) f.w[w] = rng() | 1;
    k = FlowKey::FromFlow(f);
  }

  Megaflow* out[kMaxBurst];
  uint64_t cycles = 0, n_keys = 0, hits = 0;
  int b = 0;
  for (auto _ : state) {
    const uint64_t t0 = __rdtsc();
    hits += std::popcount(
        c->LookupInSubtable(id, &keys[size_t(b) * kMaxBurst], ~0u, out));
    cycles += __rdtsc() - t0;
    n_keys += kMaxBurst;
    benchmark::DoNotOptimize(out);
    b = (b + 1) % kBursts;
  }
  state.counters["cyc/key"] = double(cycles) / double(n_keys);
  state.counters["hit%"] = 100.0 * double(hits) / double(n_keys);
  state.SetItemsProcessed(static_cast<int64_t>(n_keys));
  state.SetLabel(impl);
}

BENCHMARK(BM_SubtableLookup)
    ->ArgNames({"impl", "words", "hit_pct"})
    ->ArgsProduct({{0, 1, 2}, {2, 4, 8, 9}, {100, 50, 0}});

}  // namespace
}  // namespace flowclass

BENCHMARK_MAIN();
