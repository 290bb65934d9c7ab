// reference_classifier.h — the obviously-right classifier tests compare with.
//
// Contract
// --------
// A vector of rules kept in (priority desc, id asc) order; Lookup returns the
// first rule whose Match::Matches the key, i.e. the RuleBeats winner among all
// matching rules.  No subtables, no expansion, no cleverness: a linear scan
// (OVS test-classifier.c's "tcls").  It does not call ValidateRule; ApplyBatch
// only enforces the id rules (insert of a present id, delete/replace of an
// absent one) so tests can feed it the same batches as a RuleTable and expect
// the same accept/reject decision for id errors.  All or nothing, like
// RuleTable.  Test-only; single-threaded.
#ifndef FLOWCLASS_TESTS_COMMON_REFERENCE_CLASSIFIER_H_
#define FLOWCLASS_TESTS_COMMON_REFERENCE_CLASSIFIER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {

class ReferenceClassifier {
 public:
  ReferenceClassifier() = default;
  explicit ReferenceClassifier(std::vector<Rule> rules);

  // Applies `ops` in order on a copy and commits only if every id rule holds.
  absl::Status ApplyBatch(absl::Span<const RuleOp> ops);
  // Unchecked single-rule helpers.
  void Insert(const Rule& r);
  bool Delete(uint64_t id);

  // Highest priority, then lowest id, among the rules matching `key`.
  const Rule* Lookup(const Flow& key) const;
  const Rule* Lookup(const FlowKey& key) const { return Lookup(key.ToFlow()); }
  const Rule* Find(uint64_t id) const;

  // (priority desc, id asc).
  const std::vector<Rule>& rules() const { return rules_; }
  size_t size() const { return rules_.size(); }

 private:
  void Sort();
  std::vector<Rule> rules_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_REFERENCE_CLASSIFIER_H_
