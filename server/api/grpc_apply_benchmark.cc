// Where the time of `add-rules` goes: the gRPC path alone (a dataplane that
// accepts every batch without a table), the same into FakeDataplane (a
// RuleTable copied per batch, as DpdkDataplane does), and the RuleTable copy
// on its own.  Server and client in one process on 127.0.0.1.
//   grpc_apply_benchmark --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/rpc/flowclass_client.h"
#include "dataplane/rules/rule_format.h"
#include "server/api/grpc_server.h"
#include "server/testing/fake_dataplane.h"

namespace flowclass {
namespace {

// Accepts everything, keeps nothing: the cost of the API itself.
class NullDataplane final : public Dataplane {
 public:
  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override {
    BatchResult r;
    r.inserted = ops.size();
    r.generation = ++gen_;
    return r;
  }
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override {
    return ApplyBatchesOneByOne(*this, batches);
  }
  absl::StatusOr<BatchResult> DeleteAll() override { return DeleteAllByListing(*this); }
  absl::StatusOr<Rule> GetRule(uint64_t) const override {
    return absl::NotFoundError("keeps no rules");
  }
  absl::StatusOr<TraceResult> Trace(const FlowKey&) const override {
    TraceResult t;
    t.generation = gen_.load();
    return t;
  }
  absl::StatusOr<std::vector<RuleHit>> RuleHits() const override {
    return std::vector<RuleHit>{};
  }
  uint64_t generation() const override { return gen_; }
  std::vector<Rule> ListRules() const override { return {}; }
  DataplaneStats Stats() const override { return {}; }
  std::map<std::string, std::string> GetConfig() const override { return {}; }
  absl::StatusOr<std::string> GetConfig(absl::string_view) const override {
    return absl::NotFoundError("none");
  }
  absl::Status ApplySettings(absl::Span<const ConfigValue>) override {
    return absl::NotFoundError("none");
  }

 private:
  std::atomic<uint64_t> gen_{0};
};

// ClassBench-like 5-tuple rules: /24../32 addresses, exact or ranged ports.
std::vector<RuleOp> MakeOps(size_t n) {
  std::vector<RuleOp> ops;
  for (size_t i = 0; i < n; ++i) {
    Rule r;
    r.id = i + 1;
    r.priority = static_cast<uint32_t>(n - i);
    r.match.SetExact(Field::kInPort, 1 + i / 10000);
    r.match.SetExact(Field::kEthType, kEthTypeIpv4);
    r.match.SetMasked(Field::kIpv4Src, 0x0a000000 | (i * 2654435761u & 0xffffff), 0xffffff00);
    r.match.SetExact(Field::kIpv4Dst, 0xc0a80000 | (i & 0xffff));
    r.match.SetExact(Field::kNwProto, 6);
    r.match.tp_dst = PortRange{static_cast<uint16_t>(i % 1024), static_cast<uint16_t>(i % 1024)};
    r.action = Action::Output(1);
    ops.push_back(RuleOp::Insert(r));
  }
  return ops;
}

void StreamInto(benchmark::State& state, Dataplane* dp) {
  GrpcServerConfig cfg;
  cfg.plaintext = true;
  cfg.port = 0;
  cfg.max_message_bytes = 64 << 20;
  auto server = StartGrpcServer(dp, cfg);
  if (!server.ok()) return state.SkipWithError(std::string(server.status().message()).c_str());
  ClientOptions co;
  co.target = (*server)->target();
  co.plaintext = true;
  co.timeout = std::chrono::milliseconds(600000);
  auto client = FlowclassClient::Connect(co);
  const std::vector<RuleOp> ops = MakeOps(static_cast<size_t>(state.range(0)));
  uint64_t first = 1;
  for (auto _ : state) {
    ApplyOptions ao;
    ao.batch_size = static_cast<size_t>(state.range(1));
    ao.first_batch_id = first;
    auto r = (*client)->ApplyOps(ops, ao);
    first += r->batches_acked;
    state.PauseTiming();
    if (!r.ok() || r->first_error) state.SkipWithError("batch rejected");
    if (auto* fake = dynamic_cast<FakeDataplane*>(dp)) {
      std::vector<RuleOp> del;
      for (const RuleOp& op : ops) del.push_back(RuleOp::Delete(op.rule.id));
      (void)fake->ApplyBatch(del);
    }
    state.ResumeTiming();
  }
  state.counters["rules_per_s"] =
      benchmark::Counter(static_cast<double>(ops.size()), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ApiOnly(benchmark::State& state) {
  NullDataplane dp;
  StreamInto(state, &dp);
}
BENCHMARK(BM_ApiOnly)->Args({100000, 1000})->Args({100000, 10000})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_IntoFakeDataplane(benchmark::State& state) {
  FakeDataplane dp;
  StreamInto(state, &dp);
}
BENCHMARK(BM_IntoFakeDataplane)->Args({20000, 1000})->Args({50000, 1000})->Args({50000, 10000})
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

void BM_RuleTableCopy(benchmark::State& state) {
  RuleTable t;
  const std::vector<RuleOp> ops = MakeOps(static_cast<size_t>(state.range(0)));
  (void)t.ApplyBatch(ops);
  for (auto _ : state) {
    RuleTable copy(t);
    benchmark::DoNotOptimize(copy.size());
  }
  state.counters["ns_per_rule"] = benchmark::Counter(
      static_cast<double>(state.range(0)),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RuleTableCopy)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace flowclass

BENCHMARK_MAIN();
