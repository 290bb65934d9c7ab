// publish.cc — rule batches: applied to the one RuleTable under apply_mu on
// the calling control thread, then published to the PMDs (RulePublisher:
// one publication, one grace period per group of batches), and the reads of
// the table (ListRules, GetRule, generation).  Control thread only.
#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "dataplane/acl/acl_classifier.h"
#include "dataplane/dpdk/acl_builder.h"
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
  return ApplyBatchesNotifying(batches, [](absl::Span<const absl::StatusOr<BatchResult>>) {});
}

std::vector<absl::StatusOr<BatchResult>> DpdkDataplane::ApplyBatchesNotifying(
    absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) {
  Impl& d = *impl_;
  std::vector<absl::StatusOr<BatchResult>> results;
  results.reserve(batches.size());
  std::unique_lock<std::mutex> lock(d.apply_mu);
  if (d.stopped) {
    for (size_t i = 0; i < batches.size(); ++i)
      results.push_back(absl::FailedPreconditionError("dataplane: stopped"));
    decided(results);
    return results;
  }
  // While a PMD has not taken an earlier publication: fail fast, apply nothing.
  if (absl::Status owed = d.SettleOwedGrace(); !owed.ok()) {
    for (size_t i = 0; i < batches.size(); ++i) results.push_back(owed);
    decided(results);
    return results;
  }
  if (d.acl()) return d.ApplyAclLocked(batches, decided, std::move(lock));
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
  decided(results);
  if (changed) {
    if (absl::Status st = d.Publish(cur, &changes); !st.ok()) {
      // Applied and published, but not acknowledged: every batch of the
      // group that was accepted gets the deadline's status.
      for (absl::StatusOr<BatchResult>& r : results)
        if (r.ok()) r = st;
    }
  }
  return results;
}

// pipeline.kind acl: each batch checked for what the ACL can express, then
// applied to the table as for megaflow (under apply_mu, held in `lock`);
// the builder builds and publishes (acl_builder.h) while this caller waits
// without apply_mu, so batches of other callers applied meanwhile go into
// the same or the next build.
std::vector<absl::StatusOr<BatchResult>> DpdkDataplane::Impl::ApplyAclLocked(
    absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided,
    std::unique_lock<std::mutex> lock) {
  std::vector<absl::StatusOr<BatchResult>> results;
  results.reserve(batches.size());
  std::vector<uint64_t> generations;  // of the batches that changed the table
  for (absl::Span<const RuleOp> ops : batches) {
    absl::Status expressible;
    for (size_t i = 0; i < ops.size() && expressible.ok(); ++i)
      if (ops[i].kind == RuleOp::Kind::kInsert || ops[i].kind == RuleOp::Kind::kReplace)
        expressible = CheckAclExpressible(ops[i].rule, i);
    if (!expressible.ok()) {  // the whole batch refused, nothing applied
      results.push_back(std::move(expressible));
      continue;
    }
    const uint64_t before = table->generation();
    absl::StatusOr<BatchResult> r = table->ApplyBatch(ops);
    if (r.ok() && r->generation != before) generations.push_back(r->generation);
    results.push_back(std::move(r));
  }
  // No PMD reads the table (they run classifiers): nothing it retired or
  // deleted needs a grace period.
  table->FreeRetired();
  table->RemoveDeleted();
  decided(results);
  if (generations.empty()) return results;
  std::shared_ptr<dpdk_internal::AclBuilder::Ticket> ticket =
      acl_builder->Enqueue(std::move(generations));
  lock.unlock();
  if (absl::Status st = acl_builder->Wait(ticket); !st.ok()) {
    for (absl::StatusOr<BatchResult>& r : results)
      if (r.ok() && r->generation > 0 &&
          std::find(ticket->generations.begin(), ticket->generations.end(), r->generation) !=
              ticket->generations.end())
        r = st;
  }
  return results;
}

std::string DpdkDataplane::Impl::PmdName(int index) const {
  return absl::StrCat("pmd ", index, " (lcore ", pmds[static_cast<size_t>(index)].lcore, ")");
}

absl::Status DpdkDataplane::Impl::SettleOwedGrace() {
  if (!grace_owed) return absl::OkStatus();
  const int lagging = publisher->LaggingReader(owed_generation);
  if (lagging >= 0) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - owed_since)
                        .count();
    return absl::UnavailableError(absl::StrCat(
        "dataplane: ", PmdName(lagging), " has not installed rule generation ",
        owed_generation, " published ", ms,
        " ms ago (stalled); batch not applied, retry once it recovers"));
  }
  // Every online PMD reports owed_generation: the owed grace period is over.
  owed_views.clear();
  owed_tables.clear();
  owed_classifiers.clear();
  table->FreeRetired();
  table->RemoveDeleted();
  grace_owed = false;
  owed_reader = -1;
  owed_generation_seen.store(0, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status DpdkDataplane::Impl::Publish(const PublishedTable* cur, RuleChangeSet* changes,
                                          std::unique_ptr<RuleTable> fresh) {
  RuleTable* t = fresh ? fresh.get() : table.get();
  const uint64_t gen = t->generation();
  auto next = std::make_unique<PublishedTable>(t, gen);
  if (changes != nullptr) {
    changes->Seal();  // indexed here, on the control thread, for every PMD
    next->changes = std::move(*changes);
  }
  next->has_changes = changes != nullptr;
  next->base_generation = cur->generation;
  RulePublisher::WaitResult wait;
  const auto published_at = std::chrono::steady_clock::now();
  std::unique_ptr<PublishedTable> old =
      publisher->PublishWithDeadline(std::move(next), published_at + publish_timeout, &wait);
  published_generation.store(gen, std::memory_order_release);
  if (!wait.complete()) {
    // No grace period: the lagging PMD may still read the old view, the old
    // table (DeleteAll) and whatever the table retired.  Keep all of it
    // until it catches up (SettleOwedGrace).
    owed_views.push_back(std::move(old));
    if (fresh) {
      table.swap(fresh);
      owed_tables.push_back(std::move(fresh));
    }
    grace_owed = true;
    owed_reader = wait.lagging_reader;
    owed_generation = gen;
    owed_generation_seen.store(gen, std::memory_order_relaxed);
    owed_since = published_at;  // "published N ms ago" in SettleOwedGrace
    publish_timeouts.fetch_add(1, std::memory_order_relaxed);
    return absl::DeadlineExceededError(absl::StrCat(
        "dataplane: ", PmdName(wait.lagging_reader), " did not install rule generation ", gen,
        " within pmd.publish_timeout_ms=", publish_timeout.count(),
        " (stalled?); the batch is applied and the other PMDs run it, the stalled PMD takes "
        "it when it resumes; not acknowledged"));
  }
  // The old view goes; PMDs never read a view after installing a newer one.
  old.reset();
  if (fresh) {
    table.swap(fresh);  // the old table (and its rules) freed here
    return absl::OkStatus();
  }
  table->FreeRetired();    // retired before the publication
  table->RemoveDeleted();  // no PMD looks up at an older generation now
  return absl::OkStatus();
}

// Without a list of the rules or a change set of every deleted match: a new
// empty table at the next generation is published, and every PMD rechecks
// its megaflows against it (no change set: each megaflow is looked up
// again, and none survives an empty table).  The old table, once no PMD
// reads it, is freed: the cost is freeing the rules, under apply_mu.
absl::StatusOr<BatchResult> DpdkDataplane::DeleteAll() {
  Impl& d = *impl_;
  std::unique_lock<std::mutex> lock(d.apply_mu);
  if (d.stopped) return absl::FailedPreconditionError("dataplane: stopped");
  if (absl::Status owed = d.SettleOwedGrace(); !owed.ok()) return owed;
  const PublishedTable* cur = d.publisher->Current();
  BatchResult result;
  result.deleted = d.table->size();
  result.generation = cur->generation;
  if (result.deleted == 0) return result;  // nothing to delete: like an empty batch
  ++result.generation;
  auto fresh = std::make_unique<RuleTable>(d.opts.limits, /*concurrent_readers=*/true);
  fresh->Clear(result.generation);
  if (d.acl()) {  // no PMD reads the table: swapped at once, then built
    d.table.swap(fresh);
    std::shared_ptr<dpdk_internal::AclBuilder::Ticket> ticket =
        d.acl_builder->Enqueue({result.generation});
    lock.unlock();
    fresh.reset();
    if (absl::Status st = d.acl_builder->Wait(ticket); !st.ok()) return st;
    return result;
  }
  if (absl::Status st = d.Publish(cur, /*changes=*/nullptr, std::move(fresh)); !st.ok())
    return st;
  return result;
}

DataplaneHeartbeat DpdkDataplane::Heartbeat() const {
  const Impl& d = *impl_;
  DataplaneHeartbeat h;
  h.generation = d.published_generation.load(std::memory_order_acquire);
  h.publish_timeouts = d.publish_timeouts.load(std::memory_order_relaxed);
  h.owed_generation = d.owed_generation_seen.load(std::memory_order_relaxed);
  h.pmds.reserve(d.pmds.size());
  for (const Impl::Pmd& p : d.pmds) {
    PmdHeartbeat b;
    b.pmd = static_cast<uint32_t>(p.index);
    b.lcore = static_cast<uint32_t>(p.lcore);
    b.running = p.mailbox->live.load(std::memory_order_acquire);
    b.iterations = dpdk_internal::Read(
        p.counters->loop[PmdLoopCounterIndex(PmdLoopCounter::kIterations)]);
    b.generation = d.publisher->ReaderGeneration(p.index);
    h.pmds.push_back(b);
  }
  return h;
}

void DpdkDataplane::StallPmdForTesting(int pmd, bool stalled) {
  Impl& d = *impl_;
  if (pmd < 0 || static_cast<size_t>(pmd) >= d.pmds.size()) return;
  Impl::KnobsMailbox& box = *d.pmds[static_cast<size_t>(pmd)].knobs_box;
  box.stall_for_testing.store(stalled, std::memory_order_relaxed);
  // Until the PMD is in (or out of) the stall, unless it does not run.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (d.pmds[static_cast<size_t>(pmd)].mailbox->live.load(std::memory_order_acquire) &&
         box.stalled_for_testing.load(std::memory_order_acquire) != stalled &&
         std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

void DpdkDataplane::SetAclBuildDelayForTesting(std::chrono::milliseconds delay) {
  if (impl_->acl_builder) impl_->acl_builder->SetDelayForTesting(delay);
}

void DpdkDataplane::SetAclAckObserverForTesting(std::function<void(uint64_t)> observer) {
  if (impl_->acl_builder) impl_->acl_builder->SetAckObserverForTesting(std::move(observer));
}

void DpdkDataplane::HoldAclBuildForTesting(bool hold) {
  if (impl_->acl_builder) impl_->acl_builder->HoldForTesting(hold);
}

bool DpdkDataplane::AclBuildHeldForTesting() const {
  return impl_->acl_builder && impl_->acl_builder->HeldForTesting();
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
