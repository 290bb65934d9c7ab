// observed_dataplane.h — rule-batch apply latency for /metrics.
//
// Contract
// --------
// ApplyLatencyMetrics owns a prometheus::Registry with one histogram family,
// flowclass_rule_batch_apply_duration_seconds{result="ok"|"error"}: the wall
// time of Dataplane::ApplyBatch from call to ack (validation, publication,
// every PMD's quiescent point).  Observe() is thread-safe (prometheus-cpp's
// histogram is internally synchronised) and is only ever called from control
// threads, never from a PMD.
//
// ObservedDataplane is a decorator (a ForwardingDataplane): it forwards
// every Dataplane call to `inner` and times the rule changes (ApplyBatch,
// ApplyBatches, ApplyBatchesNotifying, DeleteAll) into an
// ApplyLatencyMetrics.  Whoever applies
// rule batches (flowclassd's start-up, the gRPC service) should be handed
// the decorator; Stats() and the rest cost nothing extra.  Both pointers
// must outlive it.  Thread-safety is the inner dataplane's.
#ifndef FLOWCLASS_SERVER_METRICS_OBSERVED_DATAPLANE_H_
#define FLOWCLASS_SERVER_METRICS_OBSERVED_DATAPLANE_H_

#include <memory>
#include <vector>

#include "dataplane/dataplane.h"
#include "dataplane/forwarding_dataplane.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace flowclass {

inline constexpr char kApplyDurationMetric[] =
    "flowclass_rule_batch_apply_duration_seconds";

class ApplyLatencyMetrics {
 public:
  ApplyLatencyMetrics();
  // Records one ApplyBatch call that took `seconds` and succeeded or not.
  void Observe(double seconds, bool ok);
  // Register with an Exposer (it holds a weak pointer).
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // Bucket upper bounds, seconds (100 us .. 10 s).
  static const std::vector<double>& Buckets();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* ok_;
  prometheus::Histogram* error_;
};

class ObservedDataplane final : public ForwardingDataplane {
 public:
  ObservedDataplane(Dataplane* inner, ApplyLatencyMetrics* latency)
      : ForwardingDataplane(inner), latency_(latency) {}

  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override;
  // Forwarded as one group; every batch of it is observed with the group's
  // wall time (from the call to its ack).
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override;
  // Forwarded to inner's ApplyBatchesNotifying (its overlap kept), timed
  // like ApplyBatches.
  std::vector<absl::StatusOr<BatchResult>> ApplyBatchesNotifying(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) override;
  absl::StatusOr<BatchResult> DeleteAll() override;
  // The other calls are ForwardingDataplane's.

 private:
  ApplyLatencyMetrics* latency_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_METRICS_OBSERVED_DATAPLANE_H_
