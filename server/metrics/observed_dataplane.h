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
// ObservedDataplane is a decorator: it forwards every Dataplane call to
// `inner` and times ApplyBatch into an ApplyLatencyMetrics.  Whoever applies
// rule batches (flowclassd's start-up, the gRPC service) should be handed
// the decorator; Stats() and the rest cost nothing extra.  Both pointers
// must outlive it.  Thread-safety is the inner dataplane's.
#ifndef FLOWCLASS_SERVER_METRICS_OBSERVED_DATAPLANE_H_
#define FLOWCLASS_SERVER_METRICS_OBSERVED_DATAPLANE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/dataplane.h"
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

class ObservedDataplane final : public Dataplane {
 public:
  ObservedDataplane(Dataplane* inner, ApplyLatencyMetrics* latency)
      : inner_(inner), latency_(latency) {}

  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override;
  // Forwarded as one group; every batch of it is observed with the group's
  // wall time (from the call to its ack).
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override;
  std::vector<absl::StatusOr<BatchResult>> ApplyBatchesNotifying(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) override;
  uint64_t generation() const override { return inner_->generation(); }
  absl::StatusOr<BatchResult> DeleteAll() override;
  std::vector<Rule> ListRules() const override { return inner_->ListRules(); }
  DataplaneStats Stats() const override { return inner_->Stats(); }
  std::map<std::string, std::string> GetConfig() const override {
    return inner_->GetConfig();
  }
  absl::StatusOr<std::string> GetConfig(absl::string_view key) const override {
    return inner_->GetConfig(key);
  }
  absl::Status ApplySettings(absl::Span<const ConfigValue> values) override {
    return inner_->ApplySettings(values);
  }
  absl::StatusOr<Rule> GetRule(uint64_t id) const override {
    return inner_->GetRule(id);
  }
  absl::StatusOr<TraceResult> Trace(const FlowKey& key) const override {
    return inner_->Trace(key);
  }
  absl::StatusOr<std::vector<RuleHit>> RuleHits() const override {
    return inner_->RuleHits();
  }

 private:
  Dataplane* inner_;
  ApplyLatencyMetrics* latency_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_METRICS_OBSERVED_DATAPLANE_H_
