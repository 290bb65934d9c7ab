// durable_dataplane.h — a Dataplane whose rule changes are durable in a
// RuleStore before they are acknowledged.
//
// Contract
// --------
// DurableDataplane(inner, store) forwards every call to `inner`; the calls
// that change rules (ApplyBatch, ApplyBatches, DeleteAll) are serialised by
// one mutex and, after `inner` has applied them, every accepted batch that
// got a generation is appended to `store` as one group (RuleStore::
// AppendGroup: one SQLite transaction, synced) before the call returns.  So
// when a result is OK with generation G, G is both applied (Dataplane's
// promise: every PMD classifies by it) and durable (a restart restores it).
// A DeleteAll is stored as a batch with delete_all_first and no operations.
//
// With `store` null (no store.path: the in-memory mode) the calls are only
// forwarded.
//
// A group that `inner` applied but whose publication timed out (its
// accepted batches answer DEADLINE_EXCEEDED, not acknowledged; see
// DpdkDataplane's publication deadline) is stored all the same, each
// non-empty batch at the next generation: the store keeps following the
// dataplane, so later batches are stored and a restart restores what ran.
//
// A failed append: the dataplane has the group, the store does not.  Each
// batch of that group answers DATA_LOSS ("... applied but not durable ...")
// and from then on every rule change answers UNAVAILABLE without reaching
// `inner` ("flowclassd refuses rule changes until it is restarted ..."): a
// restart restores the last durable generation, which a controller can then
// compare with the generations it holds acks for.  Reads keep working.
//
// Only changes made through this object are stored: nothing else may change
// `inner`'s rules (the store checks that generations continue one by one and
// fails otherwise).
//
// Threads: as Dataplane; the store is used under the mutex only.
#ifndef FLOWCLASS_SERVER_DURABLE_DATAPLANE_H_
#define FLOWCLASS_SERVER_DURABLE_DATAPLANE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dataplane/dataplane.h"
#include "server/store/rule_store.h"

namespace flowclass {

class DurableDataplane final : public Dataplane {
 public:
  // `inner` and `store` (may be null) must outlive this object.
  DurableDataplane(Dataplane* inner, RuleStore* store) : inner_(inner), store_(store) {}

  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override;
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override;
  absl::StatusOr<BatchResult> DeleteAll() override;
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

  bool durable() const { return store_ != nullptr; }
  // OK, or why rule changes are refused (the append that failed).
  absl::Status failure() const;

 private:
  // Appends the accepted batches of `results` (of `batches`; delete_all for
  // a DeleteAll) that got a generation after `before`; on failure turns
  // their results into DATA_LOSS and fails this object.
  void AppendLocked(uint64_t before, absl::Span<const absl::Span<const RuleOp>> batches,
                    bool delete_all, std::vector<absl::StatusOr<BatchResult>>* results)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RefusedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  Dataplane* const inner_;
  RuleStore* const store_;
  mutable absl::Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // the append that failed
  uint64_t failed_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_DURABLE_DATAPLANE_H_
