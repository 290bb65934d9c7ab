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
  std::vector<StoreBatch> group;
  std::vector<size_t> stored;  // index in results of group[i]
  uint64_t gen = before;
  for (size_t i = 0; i < results->size(); ++i) {
    const absl::StatusOr<BatchResult>& r = (*results)[i];
    if (!r.ok() || r->generation == gen) continue;  // rejected, or changed nothing
    gen = r->generation;
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
