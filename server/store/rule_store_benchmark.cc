// rule_store_benchmark.cc — what the durable rule store costs at 1M rules:
// appending them in group commits, restoring them on start, compacting them,
// and the bytes per rule on disk.
//
// Rules: the 1M of tests/e2e/grpc_add_rules_bench.sh — ClassBench acl1_10k's
// 5-tuples copied over 100 in_ports, ids 1..1M, first-match priorities.
// Batches of 1000 inserts (the stream's batch size), groups of Arg batches.
// The store lives in $TMPDIR (default /tmp): the disk and its fsync are part
// of what is measured.
//
//   BUILD/bench/rule_store_benchmark --benchmark_filter=...
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/rules/rule_format.h"
#include "server/store/rule_store.h"
#include "tests/common/classbench_data.h"

namespace flowclass {
namespace {

namespace fs = std::filesystem;

constexpr size_t kRules = 1000000;
constexpr size_t kBatch = 1000;

const std::vector<Rule>& SeedRules() {
  static const std::vector<Rule>* seed = [] {
    const std::string path = ClassBenchDir() + "/neurocuts/acl1_10k";
    absl::StatusOr<std::vector<Rule>> r = LoadRuleFile(path);
    if (!r.ok() || r->empty()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(r.status().message()).c_str());
      std::abort();
    }
    return new std::vector<Rule>(*std::move(r));
  }();
  return *seed;
}

// Rule i (0-based) of the 1M.
Rule MillionRule(size_t i) {
  const std::vector<Rule>& seed = SeedRules();
  Rule r = seed[i % seed.size()];
  r.id = i + 1;
  r.priority = static_cast<uint32_t>(kRules - i);
  r.match.SetExact(Field::kInPort, 1 + i / seed.size());
  return r;
}

std::string BenchDir(const char* name) {
  const char* base = std::getenv("TMPDIR");
  return absl::StrCat(base != nullptr ? base : "/tmp", "/rule_store_benchmark.", name, ".",
                      ::getpid());
}

// Appends the 1M rules to a new store in `dir`, groups of `group` batches.
void AppendMillion(RuleStore& store, size_t group) {
  std::vector<std::vector<RuleOp>> ops(group);
  std::vector<StoreBatch> batches(group);
  uint64_t gen = store.generation();
  for (size_t first = 0; first < kRules;) {
    size_t n = 0;
    for (; n < group && first < kRules; ++n) {
      ops[n].clear();
      for (size_t i = first; i < first + kBatch && i < kRules; ++i)
        ops[n].push_back(RuleOp::Insert(MillionRule(i)));
      first += ops[n].size();
      batches[n] = {++gen, ops[n]};
    }
    absl::Status s = store.AppendGroup(absl::MakeConstSpan(batches.data(), n));
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      std::abort();
    }
  }
}

std::unique_ptr<RuleStore> OpenLoaded(const std::string& dir, RuleStoreOptions o = {}) {
  auto store = RuleStore::Open(dir, o);
  if (!store.ok()) std::abort();
  if (!(*store)->Load().ok()) std::abort();
  return *std::move(store);
}

// Append: 1M rules into an empty store (automatic compaction off, so this
// is the append path alone; BM_Compact prices compaction).
void BM_Append1M(benchmark::State& state) {
  const size_t group = static_cast<size_t>(state.range(0));
  SeedRules();
  RuleStoreOptions o;
  o.auto_compact_bytes = 0;
  o.auto_compact_batches = 0;
  uint64_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string dir = BenchDir("append");
    fs::remove_all(dir);
    auto store = OpenLoaded(dir, o);
    state.ResumeTiming();
    AppendMillion(*store, group);
    state.PauseTiming();
    bytes = store->Stats().file_bytes;
    store.reset();
    fs::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRules));
  state.counters["bytes_per_rule"] = static_cast<double>(bytes) / kRules;
}
BENCHMARK(BM_Append1M)->Arg(10)->Arg(50)->Unit(benchmark::kMillisecond)->Iterations(1);

// Append with the default automatic compaction (what the daemon would run).
void BM_Append1MAutoCompact(benchmark::State& state) {
  SeedRules();
  uint64_t compactions = 0, bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string dir = BenchDir("append_auto");
    fs::remove_all(dir);
    auto store = OpenLoaded(dir);
    state.ResumeTiming();
    AppendMillion(*store, static_cast<size_t>(state.range(0)));
    state.PauseTiming();
    compactions = store->Stats().compactions;
    bytes = store->Stats().file_bytes;
    store.reset();
    fs::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRules));
  state.counters["compactions"] = static_cast<double>(compactions);
  state.counters["bytes_per_rule"] = static_cast<double>(bytes) / kRules;
}
BENCHMARK(BM_Append1MAutoCompact)->Arg(20)->Unit(benchmark::kMillisecond)->Iterations(1);

// Restore (Open + Load with every check) of 1M rules: Arg 0 = all in batch
// rows (no compaction yet), 1 = all in the snapshot.
void BM_Load1M(benchmark::State& state) {
  SeedRules();
  const bool compacted = state.range(0) != 0;
  const std::string dir = BenchDir(compacted ? "load_snapshot" : "load_batches");
  fs::remove_all(dir);
  {
    RuleStoreOptions o;
    o.auto_compact_bytes = 0;
    o.auto_compact_batches = 0;
    auto store = OpenLoaded(dir, o);
    AppendMillion(*store, 20);
    if (compacted && !store->Compact().ok()) std::abort();
  }
  size_t rules = 0;
  uint64_t bytes = 0;
  for (auto _ : state) {
    auto store = RuleStore::Open(dir);
    absl::StatusOr<RuleStoreState> s = (*store)->Load();
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      break;
    }
    rules = s->rules.size();
    bytes = s->info.file_bytes;
  }
  fs::remove_all(dir);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * rules));
  state.counters["rules"] = static_cast<double>(rules);
  state.counters["bytes_per_rule"] = static_cast<double>(bytes) / kRules;
}
BENCHMARK(BM_Load1M)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(2);

// Compact a store of 1M rules in batch rows into a snapshot.
void BM_Compact1M(benchmark::State& state) {
  SeedRules();
  RuleStoreOptions o;
  o.auto_compact_bytes = 0;
  o.auto_compact_batches = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string dir = BenchDir("compact");
    fs::remove_all(dir);
    auto store = OpenLoaded(dir, o);
    AppendMillion(*store, 20);
    state.ResumeTiming();
    if (!store->Compact().ok()) std::abort();
    state.PauseTiming();
    store.reset();
    fs::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRules));
}
BENCHMARK(BM_Compact1M)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace flowclass

BENCHMARK_MAIN();
