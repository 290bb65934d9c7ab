#include "tests/common/reference_classifier.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace flowclass {

ReferenceClassifier::ReferenceClassifier(std::vector<Rule> rules)
    : rules_(std::move(rules)) {
  Sort();
}

void ReferenceClassifier::Sort() {
  std::sort(rules_.begin(), rules_.end(), RuleBeats);
}

void ReferenceClassifier::Insert(const Rule& r) {
  rules_.push_back(r);
  Sort();
}

bool ReferenceClassifier::Delete(uint64_t id) {
  auto it = std::find_if(rules_.begin(), rules_.end(),
                         [&](const Rule& r) { return r.id == id; });
  if (it == rules_.end()) return false;
  rules_.erase(it);
  return true;
}

absl::Status ReferenceClassifier::ApplyBatch(absl::Span<const RuleOp> ops) {
  std::vector<Rule> next = rules_;
  auto find = [&](uint64_t id) {
    return std::find_if(next.begin(), next.end(),
                        [&](const Rule& r) { return r.id == id; });
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const RuleOp& op = ops[i];
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
        if (find(op.rule.id) != next.end())
          return absl::InvalidArgumentError(
              absl::StrCat("operation ", i, ": duplicate id ", op.rule.id));
        next.push_back(op.rule);
        break;
      case RuleOp::Kind::kReplace: {
        auto it = find(op.rule.id);
        if (it == next.end())
          return absl::InvalidArgumentError(
              absl::StrCat("operation ", i, ": unknown id ", op.rule.id));
        *it = op.rule;
        break;
      }
      case RuleOp::Kind::kDelete: {
        auto it = find(op.id);
        if (it == next.end())
          return absl::InvalidArgumentError(
              absl::StrCat("operation ", i, ": unknown id ", op.id));
        next.erase(it);
        break;
      }
      case RuleOp::Kind::kDeleteByCookie:
        next.erase(std::remove_if(
                       next.begin(), next.end(),
                       [&](const Rule& r) { return r.cookie == op.cookie; }),
                   next.end());
        break;
    }
  }
  rules_ = std::move(next);
  Sort();
  return absl::OkStatus();
}

const Rule* ReferenceClassifier::Lookup(const Flow& key) const {
  for (const Rule& r : rules_)
    if (r.match.Matches(key)) return &r;  // sorted: the first match wins
  return nullptr;
}

const Rule* ReferenceClassifier::Find(uint64_t id) const {
  for (const Rule& r : rules_)
    if (r.id == id) return &r;
  return nullptr;
}

}  // namespace flowclass
