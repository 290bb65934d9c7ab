// publish.cc — rule batches: applied to the one RuleTable under apply_mu on
// the calling control thread, then published to the PMDs (RulePublisher:
// one publication, one grace period per group of batches), and the reads of
// the table (ListRules, GetRule, generation).  Control thread only.
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/dpdk/internal/dpdk_dataplane_impl.h"
#include "dataplane/dpdk/rule_publisher.h"
#include "dataplane/rules/rule_change_set.h"

namespace flowclass {

absl::StatusOr<BatchResult> DpdkDataplane::ApplyBatch(absl::Span<const RuleOp> ops) {
  const absl::Span<const RuleOp> one[] = {ops};
  return std::move(ApplyBatches(one).front());
}

std::vector<absl::StatusOr<BatchResult>> DpdkDataplane::ApplyBatches(
    absl::Span<const absl::Span<const RuleOp>> batches) {
  Impl& d = *impl_;
  std::vector<absl::StatusOr<BatchResult>> results;
  results.reserve(batches.size());
  std::lock_guard<std::mutex> lock(d.apply_mu);
  if (d.stopped) {
    for (size_t i = 0; i < batches.size(); ++i)
      results.push_back(absl::FailedPreconditionError("dataplane: stopped"));
    return results;
  }
  const PublishedTable* cur = d.publisher->Current();
  RuleTable& table = *d.table;
  RuleChangeSet changes;
  bool changed = false;
  for (absl::Span<const RuleOp> ops : batches) {
    if (ops.empty()) {  // nothing to apply or publish
      results.push_back(table.ApplyBatch(ops));
      continue;
    }
    // Against the state before this batch (earlier ones of the group
    // included): that is what a replaced or deleted rule looked like.
    RuleChangeSet cs = MakeRuleChangeSet(table, ops);
    const uint64_t before = table.generation();
    absl::StatusOr<BatchResult> r = table.ApplyBatch(ops);
    // All or nothing: a rejected batch left the table as it was, and so did
    // one that changed nothing (no generation, nothing to publish).
    if (r.ok() && r->generation != before) {
      changes.Merge(std::move(cs));
      changed = true;
    }
    results.push_back(std::move(r));
  }
  if (changed) d.Publish(cur, &changes);
  return results;
}

void DpdkDataplane::Impl::Publish(const PublishedTable* cur, RuleChangeSet* changes,
                                  std::unique_ptr<RuleTable> fresh) {
  RuleTable* t = fresh ? fresh.get() : table.get();
  auto next = std::make_unique<PublishedTable>(t, t->generation());
  if (changes != nullptr) {
    changes->Seal();  // indexed here, on the control thread, for every PMD
    next->changes = std::move(*changes);
  }
  next->has_changes = changes != nullptr;
  next->base_generation = cur->generation;
  // The old view goes; PMDs never read a view after installing a newer one.
  publisher->PublishAndWait(std::move(next));
  if (fresh) {
    table.swap(fresh);  // the old table (and its rules) freed here
    return;
  }
  table->FreeRetired();    // retired before the publication
  table->RemoveDeleted();  // no PMD looks up at an older generation now
}

// Without a list of the rules or a change set of every deleted match: a new
// empty table at the next generation is published, and every PMD rechecks
// its megaflows against it (no change set: each megaflow is looked up
// again, and none survives an empty table).  The old table, once no PMD
// reads it, is freed: the cost is freeing the rules, under apply_mu.
absl::StatusOr<BatchResult> DpdkDataplane::DeleteAll() {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.apply_mu);
  if (d.stopped) return absl::FailedPreconditionError("dataplane: stopped");
  const PublishedTable* cur = d.publisher->Current();
  BatchResult result;
  result.deleted = d.table->size();
  result.generation = cur->generation;
  if (result.deleted == 0) return result;  // nothing to delete: like an empty batch
  ++result.generation;
  auto fresh = std::make_unique<RuleTable>(d.opts.limits, /*concurrent_readers=*/true);
  fresh->Clear(result.generation);
  d.Publish(cur, /*changes=*/nullptr, std::move(fresh));
  return result;
}

uint64_t DpdkDataplane::generation() const {
  return impl_->publisher->Current()->generation;
}

std::vector<Rule> DpdkDataplane::ListRules() const {
  std::lock_guard<std::mutex> lock(impl_->apply_mu);
  std::vector<Rule> out;
  for (const Rule* r : impl_->table->Rules()) out.push_back(*r);
  return out;
}

absl::StatusOr<Rule> DpdkDataplane::GetRule(uint64_t id) const {
  std::lock_guard<std::mutex> lock(impl_->apply_mu);
  const Rule* r = impl_->table->Find(id);
  if (!r) return absl::NotFoundError(absl::StrCat("rule id ", id, ": no such rule"));
  return *r;
}

}  // namespace flowclass
