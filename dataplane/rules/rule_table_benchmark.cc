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
//
// BM_SlowPath/<set>: one row per ClassBench set the repository carries (the
// hypersplit ~1K sets, the NeuroCuts 1k and 10k sets, staged into
// BUILD/classbench by CMake) and two random sets (random_1k, random_10k: the
// BM_Lookup shape 0 mix).  Counters:
//   rules, subtables    the table built from the file in one batch
//   lookup_ns           median, over chunks of 128 consecutive lookups, of
//                       the mean time per key (keys cycled: the set's trace
//                       for the hypersplit sets, else 4096 keys near random
//                       rules, RandomRuleGen::NextKeyNear)
//   visited             subtables probed per lookup (mean)
//   insert_ns           per rule: the last S rules of the set (S = min(rules,
//                       1000), random sets 100) inserted one batch per rule,
//                       in file order, into a table holding the others
//                       (loaded in one batch, untimed; for sets of <= S
//                       rules, an empty table)
//   delete_ns           per rule: then S rules, drawn at random, deleted one
//                       batch per rule
//   bytes_per_rule      heap bytes the one-batch table holds per rule: glibc
//                       mallinfo2 in-use bytes (uordblks + hblkhd) after the
//                       batch minus before, i.e. allocations counted, not RSS
//                       (the benchmark uses glibc malloc; flowclassd and
//                       flowclassctl link jemalloc)
//   hit_rate            fraction of keys some rule matched
// Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall
// time: the machine may be shared.
// A data file that is missing stops the binary before any benchmark runs
// (exit 1, naming the path): no row is skipped for want of data.
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/types/span.h"
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

// The ClassBench acl1_10k rules (the gRPC bench's seed set); exits 1 when
// it cannot be read.
std::optional<std::vector<Rule>> Acl1Seed(benchmark::State&) {
  std::ifstream in(ClassBenchDir() + "/neurocuts/acl1_10k");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<Rule>> seed = ParseClassBench(text.str());
  if (!seed.ok() || seed->empty()) {  // main checked the file is there
    std::fprintf(stderr, "rule_table_benchmark: cannot read %s/neurocuts/acl1_10k\n",
                 ClassBenchDir().c_str());
    std::exit(1);
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

// ----------------------------------------------------- BM_SlowPath/<set>

struct SlowPathSet {
  std::string name;        // row name: "hypersplit/acl1_1K", "random_10k"
  std::string rules_path;  // empty: random rules
  std::string trace_path;  // empty: keys near random rules
  size_t random_rules = 0;
  // Rules inserted and deleted one per batch for insert_ns / delete_ns.
  size_t timed_ops = 1000;
};

std::vector<SlowPathSet> SlowPathSets() {
  std::vector<SlowPathSet> sets;
  const std::string dir = ClassBenchDir();
  for (const char* s : {"acl1_1K", "fw1_1K", "ipc1_1K"}) {
    const std::string path = dir + "/hypersplit/" + s;
    sets.push_back({std::string("hypersplit/") + s, path, path + "_trace"});
  }
  for (const char* size : {"1k", "10k"}) {
    for (const char* seed : {"acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3",
                             "fw4", "fw5", "ipc1", "ipc2"}) {
      const std::string name = std::string(seed) + "_" + size;
      sets.push_back({"neurocuts/" + name, dir + "/neurocuts/" + name, ""});
    }
  }
  // Random rules make thousands of subtables, and every batch re-sorts
  // them: 100 one-rule batches are enough to time.
  sets.push_back({"random_1k", "", "", 1000, 100});
  sets.push_back({"random_10k", "", "", 10000, 100});
  return sets;
}

size_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// This thread's CPU time in ns.
int64_t CpuNs() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double NsPerItem(int64_t ns, size_t n) {
  return static_cast<double>(ns) / static_cast<double>(n);
}

// BM_SlowPath's timed one-rule batches, out of line so that callgrind can
// count them alone: valgrind --tool=callgrind
// --toggle-collect='*OneRuleInserts*' (or '*OneRuleDeletes*')
// build/bench/rule_table_benchmark --benchmark_filter=BM_SlowPath/random_10k
// counts the instructions of every call (the calls count shows how many:
// google benchmark may run the function more than once).  False if a batch
// failed.
[[gnu::noinline]] bool OneRuleInserts(RuleTable* t, absl::Span<const RuleOp> ops) {
  for (const RuleOp& op : ops)
    if (!t->ApplyBatch({&op, 1}).ok()) return false;
  return true;
}
[[gnu::noinline]] bool OneRuleDeletes(RuleTable* t, absl::Span<const uint64_t> ids) {
  for (uint64_t id : ids) {
    const RuleOp del = RuleOp::Delete(id);
    if (!t->ApplyBatch({&del, 1}).ok()) return false;
  }
  return true;
}

void BM_SlowPath(benchmark::State& state, const SlowPathSet& set) {
  std::vector<Rule> rules;
  std::vector<FlowKey> keys;
  RandomRuleGen gen(2026);
  if (set.rules_path.empty()) {
    rules = gen.NextRules(set.random_rules);
  } else {
    absl::StatusOr<std::vector<Rule>> loaded = LoadRuleFile(set.rules_path, RuleFormat::kClassBench);
    if (!loaded.ok() || loaded->empty()) {  // checked in main; never silent
      std::fprintf(stderr, "rule_table_benchmark: %s: %s\n", set.rules_path.c_str(),
                   loaded.ok() ? "no rules" : std::string(loaded.status().message()).c_str());
      std::exit(1);
    }
    rules = *std::move(loaded);
  }
  if (!set.trace_path.empty()) {
    absl::StatusOr<std::vector<TraceEntry>> trace = LoadTraceFile(set.trace_path);
    if (!trace.ok() || trace->empty()) {
      std::fprintf(stderr, "rule_table_benchmark: %s: %s\n", set.trace_path.c_str(),
                   trace.ok() ? "empty trace" : std::string(trace.status().message()).c_str());
      std::exit(1);
    }
    for (const TraceEntry& e : *trace) keys.push_back(e.key);
  } else {
    for (int i = 0; i < 4096; ++i) keys.push_back(FlowKey::FromFlow(gen.NextKeyNear(rules)));
  }
  const size_t n = rules.size();
  std::vector<RuleOp> ops;
  ops.reserve(n);
  for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));

  // Insert and delete, one rule per batch, at (about) the set's size.
  const size_t timed = std::min(n, set.timed_ops);
  double insert_ns = 0, delete_ns = 0;
  {
    RuleTable t;
    if (!t.ApplyBatch(absl::MakeConstSpan(ops).first(n - timed)).ok()) {
      state.SkipWithError("ApplyBatch failed");
      return;
    }
    const int64_t t0 = CpuNs();
    if (!OneRuleInserts(&t, absl::MakeConstSpan(ops).subspan(n - timed))) {
      state.SkipWithError("one-rule insert failed");
      return;
    }
    const int64_t t1 = CpuNs();
    std::vector<uint64_t> ids;
    for (const Rule& r : rules) ids.push_back(r.id);
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(7));
    ids.resize(timed);
    const int64_t t2 = CpuNs();
    if (!OneRuleDeletes(&t, ids)) {
      state.SkipWithError("one-rule delete failed");
      return;
    }
    const int64_t t3 = CpuNs();
    insert_ns = NsPerItem(t1 - t0, timed);
    delete_ns = NsPerItem(t3 - t2, timed);
  }

  // The lookup table: one batch, as flowclassctl replay builds it.
  const size_t heap_before = HeapInUse();
  auto table = std::make_unique<RuleTable>();
  if (!table->ApplyBatch(ops).ok()) {
    state.SkipWithError("ApplyBatch failed");
    return;
  }
  const size_t heap_after = HeapInUse();
  if (heap_after <= heap_before) {  // another allocator (jemalloc) took the calls
    state.SkipWithError("mallinfo2 counted no allocation: not glibc malloc?");
    return;
  }

  constexpr size_t kChunk = 128;
  std::vector<double> chunk_ns;
  int64_t visited_total = 0, hits = 0, lookups = 0;
  size_t next = 0;
  for (auto _ : state) {
    const int64_t t0 = CpuNs();
    for (size_t c = 0; c < kChunk; ++c) {
      Flow wc;
      int visited = 0;
      const Rule* r = table->Lookup(keys[next], &wc, &visited);
      benchmark::DoNotOptimize(r);
      benchmark::DoNotOptimize(wc);
      visited_total += visited;
      hits += r != nullptr;
      next = next + 1 == keys.size() ? 0 : next + 1;
    }
    chunk_ns.push_back(NsPerItem(CpuNs() - t0, kChunk));
    lookups += kChunk;
  }
  std::sort(chunk_ns.begin(), chunk_ns.end());
  state.SetItemsProcessed(lookups);
  const RuleTableStats st = table->Stats();
  state.counters["rules"] = static_cast<double>(n);
  state.counters["subtables"] = static_cast<double>(st.subtables);
  state.counters["lookup_ns"] = chunk_ns.empty() ? 0 : chunk_ns[chunk_ns.size() / 2];
  state.counters["visited"] = static_cast<double>(visited_total) / static_cast<double>(lookups);
  state.counters["insert_ns"] = insert_ns;
  state.counters["delete_ns"] = delete_ns;
  state.counters["bytes_per_rule"] =
      static_cast<double>(heap_after - heap_before) / static_cast<double>(n);
  state.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(lookups);
}

// Every data file the benchmarks read, or exit 1 naming the missing ones.
void RequireData(const std::vector<SlowPathSet>& sets) {
  std::vector<std::string> paths = {ClassBenchDir() + "/neurocuts/acl1_10k"};  // Acl1Seed
  for (const SlowPathSet& s : sets) {
    if (!s.rules_path.empty()) paths.push_back(s.rules_path);
    if (!s.trace_path.empty()) paths.push_back(s.trace_path);
  }
  bool missing = false;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec)) {
      std::fprintf(stderr, "rule_table_benchmark: missing data file %s\n", p.c_str());
      missing = true;
    }
  }
  if (missing) {
    std::fprintf(stderr,
                 "rule_table_benchmark: configure the build (CMake stages "
                 "tests/data/classbench into BUILD/classbench) or set "
                 "FLOWCLASS_CLASSBENCH_DIR\n");
    std::exit(1);
  }
}

}  // namespace
}  // namespace flowclass

int main(int argc, char** argv) {
  using namespace flowclass;
  static const std::vector<SlowPathSet> sets = SlowPathSets();
  RequireData(sets);
  for (const SlowPathSet& s : sets) {
    benchmark::RegisterBenchmark(("BM_SlowPath/" + s.name).c_str(),
                                 [&s](benchmark::State& st) { BM_SlowPath(st, s); })
        ->MinTime(0.3)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
