// fake_dataplane.h — an in-memory `Dataplane` for control-plane tests.
//
// Contract
// --------
// FakeDataplane keeps a RuleTable and applies batches to it exactly as the
// real dataplane does (validate whole batch on a copy, then swap), so it gives
// the same errors and generations.  It has no PMDs: its stats are whatever the
// test put there with SetStats(), plus the generation and rule counts it
// computes itself.  Tests can make the next ApplyBatch fail with an injected
// status and inspect every batch that was applied.  Its run-time settings
// are a RuntimeSettings, read and written with the dataplanes' one parser
// and formatter (runtime_settings.h), so a request is refused or applied
// exactly as the real dataplane does it (all or nothing, the same errors);
// only the keys it lists are the test's choice (DefineConfig).
//
// Threads: every method is safe to call from any thread (one mutex).
#ifndef FLOWCLASS_SERVER_TESTING_FAKE_DATAPLANE_H_
#define FLOWCLASS_SERVER_TESTING_FAKE_DATAPLANE_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "dataplane/dataplane.h"

namespace flowclass {

class FakeDataplane final : public Dataplane {
 public:
  explicit FakeDataplane(RuleTableLimits limits = {});

  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override;
  // One ApplyBatch per batch (ApplyBatchesOneByOne).
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override {
    return ApplyBatchesOneByOne(*this, batches);
  }
  // DeleteAllByListing, counted: delete_all_calls().
  absl::StatusOr<BatchResult> DeleteAll() override;
  uint64_t generation() const override;
  std::vector<Rule> ListRules() const override;
  DataplaneStats Stats() const override;
  std::map<std::string, std::string> GetConfig() const override;
  absl::StatusOr<std::string> GetConfig(absl::string_view key) const override;
  absl::Status ApplySettings(absl::Span<const ConfigValue> values) override;
  absl::StatusOr<Rule> GetRule(uint64_t id) const override;
  absl::StatusOr<TraceResult> Trace(const FlowKey& key) const override;
  absl::StatusOr<std::vector<RuleHit>> RuleHits() const override;

  // As DpdkDataplane::Restore: the rule set becomes `rules` at exactly
  // `generation` (RestoreRuleTable), or nothing changes.
  absl::Status Restore(absl::Span<const Rule> rules, uint64_t generation);

  // ---- test controls ----
  // The next ApplyBatch returns `status` (not OK) and changes nothing.
  void FailNextApply(absl::Status status);
  // pmds/ports reported by Stats() (generation and rules are filled in).
  void SetStats(DataplaneStats stats);
  // Declares a config key.  `mutable_at_runtime`: `key` is a run-time
  // setting (runtime_settings.h), listed from now on, and `value` its value
  // (a bad key or value aborts the test); else a start-up-only key that
  // SetConfig refuses with FAILED_PRECONDITION.  Listed by default:
  // pmd.tx_retries=4 and pmd.idle_sleep_us=0 (settings), pmd.burst=32 and
  // pmd.lcores=1 (start-up only).
  void DefineConfig(std::string key, std::string value, bool mutable_at_runtime);
  // What RuleHits() reports.
  void SetRuleHits(std::vector<RuleHit> hits);
  // Every successfully applied batch, in order.
  std::vector<std::vector<RuleOp>> applied_batches() const;
  // Calls of DeleteAll (so a wrapper's forwarding of it can be checked).
  int delete_all_calls() const;
  // Classifies one key with the current table (nullptr: no match).
  std::optional<Rule> Classify(const FlowKey& key) const;

 private:
  std::map<std::string, std::string> ConfigLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const RuleTableLimits limits_;
  mutable absl::Mutex mu_;
  std::unique_ptr<RuleTable> table_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_next_ ABSL_GUARDED_BY(mu_);
  DataplaneStats stats_ ABSL_GUARDED_BY(mu_);
  RuntimeSettings settings_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> listed_settings_ ABSL_GUARDED_BY(mu_);  // keys of settings_
  std::map<std::string, std::string> start_up_only_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<RuleOp>> batches_ ABSL_GUARDED_BY(mu_);
  std::vector<RuleHit> rule_hits_ ABSL_GUARDED_BY(mu_);
  int delete_all_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_TESTING_FAKE_DATAPLANE_H_
