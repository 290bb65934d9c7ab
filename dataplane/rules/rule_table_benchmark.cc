// rule_table_benchmark — slow-path lookup cost (ns per packet) for random rule
// sets of 100, 1k and 10k rules, and the control-plane cost of inserts
// (BM_ApplyBatchInsert; BM_StreamedLoad: what flowclassd does per streamed
// rule, see below).
//
//   ninja -C build rule_table_benchmark &&
//   build/bench/rule_table_benchmark
//
// BM_Lookup/<rules>/<shape>: shape 0 = the full random mix (IPv4/IPv6/L2,
// arbitrary masks, ranges: many subtables), shape 1 = ClassBench-like IPv4
// 5-tuples (prefixes and port ranges only).  Counters: subtables in the
// table, average subtables visited per lookup, fraction of keys matched.
// Keys are FlowKeys (what the upcall path passes), 4096 of them, cycled.
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_format.h"
#include "dataplane/rules/rule_table.h"
#include "tests/common/classbench_data.h"
#include "tests/common/random_rules.h"

namespace flowclass {
namespace {

RandomRuleOptions Shape(int shape) {
  RandomRuleOptions o;
  if (shape == 1) {
    o.ipv6_fraction = 0;
    o.l2_only_fraction = 0;
    o.arbitrary_mask_fraction = 0;
    o.max_priority = 1u << 20;
  }
  return o;
}

// Shape 1 also drops the non-5-tuple fields the generator adds.
Rule FiveTupleOnly(Rule r) {
  Match m;
  for (Field f : {Field::kEthType, Field::kIpv4Src, Field::kIpv4Dst,
                  Field::kNwProto, Field::kTpSrc, Field::kTpDst})
    m.SetMasked(f, r.match.value.Get(f), r.match.mask.Get(f));
  m.tp_src = r.match.tp_src;
  m.tp_dst = r.match.tp_dst;
  r.match = m;
  return r;
}

// The timed loop of the lookup benchmarks: `keys` (4096 of them) cycled.
// Counters: subtables and entries in the table, average subtables visited
// per lookup, fraction of keys matched.
void TimeLookups(benchmark::State& state, const RuleTable& table,
                 const std::vector<FlowKey>& keys) {
  size_t i = 0;
  int64_t visited_total = 0;
  int64_t hits = 0;
  for (auto _ : state) {
    Flow wc;
    int visited = 0;
    const Rule* r = table.Lookup(keys[i], &wc, &visited);
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(wc);
    visited_total += visited;
    hits += r != nullptr;
    i = (i + 1) & 4095;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["subtables"] = static_cast<double>(table.Stats().subtables);
  state.counters["entries"] = static_cast<double>(table.Stats().entries);
  state.counters["visited"] = static_cast<double>(visited_total) /
                              static_cast<double>(state.iterations());
  state.counters["hit_rate"] =
      static_cast<double>(hits) / static_cast<double>(state.iterations());
}

void BM_Lookup(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const int shape = static_cast<int>(state.range(1));
  RandomRuleGen gen(12345, Shape(shape));
  std::vector<Rule> rules = gen.NextRules(n);
  if (shape == 1)
    for (Rule& r : rules) r = FiveTupleOnly(r);
  std::vector<RuleOp> ops;
  for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));
  RuleTable table;
  if (!table.ApplyBatch(ops).ok()) {
    state.SkipWithError("ApplyBatch failed");
    return;
  }
  std::vector<FlowKey> keys;
  for (int i = 0; i < 4096; ++i)
    keys.push_back(FlowKey::FromFlow(gen.NextKeyNear(rules)));

  TimeLookups(state, table, keys);
}
BENCHMARK(BM_Lookup)
    ->ArgsProduct({{100, 1000, 10000}, {0, 1}})
    ->ArgNames({"rules", "shape"});

// Control-plane cost: one batch inserting `n` random rules into an empty table.
void BM_ApplyBatchInsert(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  RandomRuleGen gen(777);
  std::vector<RuleOp> ops;
  for (const Rule& r : gen.NextRules(n)) ops.push_back(RuleOp::Insert(r));
  for (auto _ : state) {
    RuleTable table;
    benchmark::DoNotOptimize(table.ApplyBatch(ops));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_ApplyBatchInsert)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond);

// The ClassBench acl1_10k rules (the gRPC bench's seed set), or nothing
// with the benchmark skipped.
std::optional<std::vector<Rule>> Acl1Seed(benchmark::State& state) {
  std::ifstream in(ClassBenchDir() + "/neurocuts/acl1_10k");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<Rule>> seed = ParseClassBench(text.str());
  if (!seed.ok() || seed->empty()) {
    state.SkipWithError("cannot read acl1_10k");
    return std::nullopt;
  }
  return *std::move(seed);
}

// The control-plane work of one streamed rule in flowclassd
// (DpdkDataplane::ApplyBatches): the change set against the table before
// the batch, and the batch applied to the one table the PMDs read (a table
// with concurrent readers; after each batch, what the dataplane does after
// its grace period: FreeRetired, RemoveDeleted).  Until 2026-12-01 the
// dataplane kept a left-right pair, and this benchmark (BM_LeftRightStream)
// also replayed each batch on the second table.  Rules: the
// ClassBench acl1_10k 5-tuples replicated over in_port 1..ceil(n/10k), as
// tests/e2e/grpc_add_rules_bench.sh streams them, in batches of 1000.
void BM_StreamedLoad(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const int id_shift = static_cast<int>(state.range(1));  // ids (i+1) << shift
  const std::optional<std::vector<Rule>> seed = Acl1Seed(state);
  if (!seed) return;
  std::vector<RuleOp> ops;
  ops.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Rule r = (*seed)[i % seed->size()];
    r.id = (i + 1) << id_shift;
    r.priority = static_cast<uint32_t>(n - i);
    r.match.SetExact(Field::kInPort, i / seed->size() + 1);
    ops.push_back(RuleOp::Insert(std::move(r)));
  }
  constexpr size_t kBatch = 1000;
  for (auto _ : state) {
    auto table = std::make_unique<RuleTable>(RuleTableLimits{}, /*concurrent_readers=*/true);
    for (size_t b = 0; b < n; b += kBatch) {
      const absl::Span<const RuleOp> batch =
          absl::MakeConstSpan(ops).subspan(b, std::min(kBatch, n - b));
      RuleChangeSet cs = MakeRuleChangeSet(*table, batch);
      benchmark::DoNotOptimize(table->ApplyBatch(batch));
      table->FreeRetired();
      table->RemoveDeleted();
      benchmark::DoNotOptimize(cs);
    }
    state.PauseTiming();  // the daemon keeps its table
    table.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
// The upcall of a PMD whose port holds one copy of acl1_10k while the other
// ports hold the rest (what tests/e2e/grpc_add_rules_bench.sh makes): keys
// of random 5-tuples on the middle copy's port, looked up in tables of 1
// copy (10k rules) and 100 copies (1M rules).  The ratio of the two is what
// the other ports' rules cost this port's upcalls.
void BM_LookupAmongPorts(benchmark::State& state) {
  const size_t copies = static_cast<size_t>(state.range(0));
  const std::optional<std::vector<Rule>> seed = Acl1Seed(state);
  if (!seed) return;
  const size_t n = copies * seed->size();
  const uint32_t port = static_cast<uint32_t>(copies / 2 + 1);
  auto table = std::make_unique<RuleTable>(RuleTableLimits{}, /*concurrent_readers=*/true);
  std::vector<RuleOp> ops;
  for (size_t i = 0; i < n; ++i) {
    Rule r = (*seed)[i % seed->size()];
    r.id = i + 1;
    r.priority = static_cast<uint32_t>(n - i);
    r.match.SetExact(Field::kInPort, i / seed->size() + 1);
    ops.push_back(RuleOp::Insert(std::move(r)));
    if (ops.size() == 10000 || i + 1 == n) {
      if (!table->ApplyBatch(ops).ok()) {
        state.SkipWithError("ApplyBatch failed");
        return;
      }
      table->FreeRetired();
      ops.clear();
    }
  }
  std::mt19937_64 rng(1);
  std::vector<FlowKey> keys;
  for (int i = 0; i < 4096; ++i) {
    const uint64_t a = rng(), b = rng();
    keys.push_back(MakeFiveTupleKey(static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32),
                                    static_cast<uint16_t>(b), static_cast<uint16_t>(b >> 16),
                                    (b >> 32) & 1 ? 6 : 17, port));
  }
  TimeLookups(state, *table, keys);
}
BENCHMARK(BM_LookupAmongPorts)->Arg(1)->Arg(100)->ArgName("copies");

// Second argument: ids are (i + 1) << it.  0: a load numbered 1..N, as
// controllers number them; 32: ids that differ only in their high half (the
// id map's hash must not collapse them).
BENCHMARK(BM_StreamedLoad)
    ->Args({100000, 0})
    ->Args({300000, 0})
    ->Args({1000000, 0})
    ->Args({300000, 32})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace flowclass

BENCHMARK_MAIN();
