#include "server/metrics/observed_dataplane.h"

#include <chrono>

namespace flowclass {

const std::vector<double>& ApplyLatencyMetrics::Buckets() {
  static const std::vector<double> kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};
  return kBuckets;
}

ApplyLatencyMetrics::ApplyLatencyMetrics()
    : registry_(std::make_shared<prometheus::Registry>()) {
  auto& family =
      prometheus::BuildHistogram()
          .Name(kApplyDurationMetric)
          .Help("Wall time of a rule batch from ApplyBatch call to ack "
                "(validated, published, every PMD past a quiescent point), by "
                "result (ok or error).")
          .Register(*registry_);
  ok_ = &family.Add({{"result", "ok"}}, Buckets());
  error_ = &family.Add({{"result", "error"}}, Buckets());
}

void ApplyLatencyMetrics::Observe(double seconds, bool ok) {
  (ok ? ok_ : error_)->Observe(seconds);
}

namespace {

// fn()'s result; *seconds = the wall time it took.
template <typename Fn>
auto Timed(Fn fn, double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = fn();
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

absl::StatusOr<BatchResult> ObservedDataplane::ApplyBatch(
    absl::Span<const RuleOp> ops) {
  double dt = 0;
  absl::StatusOr<BatchResult> r = Timed([&] { return inner_->ApplyBatch(ops); }, &dt);
  latency_->Observe(dt, r.ok());
  return r;
}

absl::StatusOr<BatchResult> ObservedDataplane::DeleteAll() {
  double dt = 0;
  absl::StatusOr<BatchResult> r = Timed([&] { return inner_->DeleteAll(); }, &dt);
  latency_->Observe(dt, r.ok());
  return r;
}

std::vector<absl::StatusOr<BatchResult>> ObservedDataplane::ApplyBatches(
    absl::Span<const absl::Span<const RuleOp>> batches) {
  double dt = 0;
  std::vector<absl::StatusOr<BatchResult>> r =
      Timed([&] { return inner_->ApplyBatches(batches); }, &dt);
  for (const absl::StatusOr<BatchResult>& one : r) latency_->Observe(dt, one.ok());
  return r;
}

std::vector<absl::StatusOr<BatchResult>> ObservedDataplane::ApplyBatchesNotifying(
    absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) {
  double dt = 0;
  std::vector<absl::StatusOr<BatchResult>> r =
      Timed([&] { return inner_->ApplyBatchesNotifying(batches, decided); }, &dt);
  for (const absl::StatusOr<BatchResult>& one : r) latency_->Observe(dt, one.ok());
  return r;
}

}  // namespace flowclass
