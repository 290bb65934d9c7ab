#include "server/durable_dataplane.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace flowclass {

absl::Status DurableDataplane::failure() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

absl::Status DurableDataplane::RefusedLocked() const {
  return absl::UnavailableError(absl::StrCat(
      "flowclassd refuses rule changes until it is restarted: the rule store failed at "
      "generation ",
      failed_generation_, " (", failed_.message(),
      "); a restart restores the last durable generation"));
}

void DurableDataplane::AppendLocked(uint64_t before,
                                    absl::Span<const absl::Span<const RuleOp>> batches,
                                    bool delete_all,
                                    std::vector<absl::StatusOr<BatchResult>>* results) {
  // A group whose publication timed out (DEADLINE_EXCEEDED: some PMD did
  // not install it in time) is applied all the same, only not acknowledged:
  // it is stored too, or the store would fall behind the dataplane's
  // generations and refuse the next group.  Its results carry no
  // generation: each of its non-empty batches took the next one, which the
  // dataplane's generation confirms (a batch that changed nothing, e.g. a
  // delete by a cookie no rule has, would make them disagree: then the
  // store cannot follow and rule changes are refused, as for a failed
  // append).
  const auto timed_out = [&](size_t i) {
    return absl::IsDeadlineExceeded((*results)[i].status()) &&
           (delete_all || !batches[i].empty());
  };
  uint64_t expected = before;
  bool any_timed_out = false;
  for (size_t i = 0; i < results->size(); ++i) {
    const absl::StatusOr<BatchResult>& r = (*results)[i];
    if (timed_out(i)) {
      ++expected;
      any_timed_out = true;
    } else if (r.ok()) {
      expected = r->generation;
    }
  }
  if (any_timed_out && expected != inner_->generation()) {
    failed_ = absl::DataLossError(absl::StrCat(
        "a group whose publication timed out left the dataplane at generation ",
        inner_->generation(), ", the store cannot tell which of its batches changed the rules"));
    failed_generation_ = before + 1;
    return;
  }
  std::vector<StoreBatch> group;
  std::vector<size_t> stored;  // index in results of group[i]
  uint64_t gen = before;
  for (size_t i = 0; i < results->size(); ++i) {
    const absl::StatusOr<BatchResult>& r = (*results)[i];
    if (timed_out(i)) {
      ++gen;
    } else if (!r.ok() || r->generation == gen) {
      continue;  // rejected, or changed nothing
    } else {
      gen = r->generation;
    }
    StoreBatch b;
    b.generation = gen;
    if (delete_all) {
      b.delete_all_first = true;
    } else {
      b.ops = batches[i];
    }
    group.push_back(b);
    stored.push_back(i);
  }
  if (group.empty()) return;
  const absl::Status s = store_->AppendGroup(group);
  if (s.ok()) return;
  failed_ = s;
  failed_generation_ = group.front().generation;
  for (size_t k = 0; k < stored.size(); ++k)
    (*results)[stored[k]] = absl::DataLossError(absl::StrCat(
        "generation ", group[k].generation,
        " was applied to the dataplane but is not durable: rule store: ", s.message(),
        "; flowclassd refuses rule changes until it is restarted, and a restart restores "
        "generation ",
        before));
}

absl::StatusOr<BatchResult> DurableDataplane::ApplyBatch(absl::Span<const RuleOp> ops) {
  const absl::Span<const RuleOp> one[] = {ops};
  return std::move(ApplyBatches(one).front());
}

std::vector<absl::StatusOr<BatchResult>> DurableDataplane::ApplyBatches(
    absl::Span<const absl::Span<const RuleOp>> batches) {
  if (store_ == nullptr) return inner_->ApplyBatches(batches);
  absl::MutexLock lock(&mu_);
  if (!failed_.ok())
    return std::vector<absl::StatusOr<BatchResult>>(batches.size(), RefusedLocked());
  const uint64_t before = inner_->generation();
  std::vector<absl::StatusOr<BatchResult>> results = inner_->ApplyBatches(batches);
  AppendLocked(before, batches, /*delete_all=*/false, &results);
  return results;
}

absl::StatusOr<BatchResult> DurableDataplane::DeleteAll() {
  if (store_ == nullptr) return inner_->DeleteAll();
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return RefusedLocked();
  const uint64_t before = inner_->generation();
  std::vector<absl::StatusOr<BatchResult>> results;
  results.push_back(inner_->DeleteAll());
  AppendLocked(before, {}, /*delete_all=*/true, &results);
  return std::move(results.front());
}

}  // namespace flowclass
