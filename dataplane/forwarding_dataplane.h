// forwarding_dataplane.h — a Dataplane that passes every call to another
// one.  The base of decorators (flowclassd's DurableDataplane, test fakes
// that change one call): they override only what they change.
#ifndef FLOWCLASS_DATAPLANE_FORWARDING_DATAPLANE_H_
#define FLOWCLASS_DATAPLANE_FORWARDING_DATAPLANE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dataplane/dataplane.h"

namespace flowclass {

class ForwardingDataplane : public Dataplane {
 public:
  explicit ForwardingDataplane(Dataplane* inner) : inner_(inner) {}

  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override {
    return inner_->ApplyBatch(ops);
  }
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override {
    return inner_->ApplyBatches(batches);
  }
  std::vector<absl::StatusOr<BatchResult>> ApplyBatchesNotifying(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) override {
    return inner_->ApplyBatchesNotifying(batches, decided);
  }
  // ApplyBatchesDeferred is not forwarded: Dataplane's default goes through
  // this object's ApplyBatches, which a decorator may override (forwarding
  // would skip it).  A decorator that keeps inner's deferral forwards it.
  absl::StatusOr<BatchResult> DeleteAll() override { return inner_->DeleteAll(); }
  uint64_t generation() const override { return inner_->generation(); }
  std::vector<Rule> ListRules() const override { return inner_->ListRules(); }
  DataplaneStats Stats() const override { return inner_->Stats(); }
  std::map<std::string, std::string> GetConfig() const override { return inner_->GetConfig(); }
  absl::StatusOr<std::string> GetConfig(absl::string_view key) const override {
    return inner_->GetConfig(key);
  }
  absl::Status ApplySettings(absl::Span<const ConfigValue> values) override {
    return inner_->ApplySettings(values);
  }
  absl::StatusOr<Rule> GetRule(uint64_t id) const override { return inner_->GetRule(id); }
  absl::StatusOr<TraceResult> Trace(const FlowKey& key) const override {
    return inner_->Trace(key);
  }
  absl::StatusOr<std::vector<RuleHit>> RuleHits() const override { return inner_->RuleHits(); }
  absl::StatusOr<std::vector<MegaflowEntry>> DumpMegaflows(
      const MegaflowDumpRequest& req) const override {
    return inner_->DumpMegaflows(req);
  }

 protected:
  Dataplane* const inner_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_FORWARDING_DATAPLANE_H_
