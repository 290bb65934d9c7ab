#include "server/durable_dataplane.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace flowclass {

// ------------------------------------------------------------- StoreWorker

// At the threads' own priority.  Until 2026-12-07 it ran at nice 10 (so that
// a commit would not delay the publication it overlaps), but what it delayed
// instead was the group's settle: the checkpoint after the acks got little
// CPU while the next group was applied, and that group's commit waited for
// it.  On the 2-vCPU VM at nice 0 the commits waited 54-79 ms in all for
// the settles of a 1M-rule stream, against 191-315 ms at nice 10, and the
// stream was 5-10% faster in each of 3 alternating pairs (tests/bench/
// README.md, "The durable rule store").
DurableDataplane::StoreWorker::StoreWorker() : thread_([this] { Run(); }) {}

DurableDataplane::StoreWorker::~StoreWorker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();  // after the jobs already posted
}

void DurableDataplane::StoreWorker::Post(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back(std::move(job));
}

void DurableDataplane::StoreWorker::PostIdle(std::function<void()> job, absl::Duration idle,
                                             absl::Duration latest) {
  absl::MutexLock lock(&mu_);
  if (idle_job_ == nullptr) idle_deadline_ = absl::Now() + latest;  // from the first arming
  idle_job_ = std::move(job);
  idle_ = idle;
}

void DurableDataplane::StoreWorker::Run() {
  pthread_setname_np(pthread_self(), "fc-store");  // for top -H, perf and gdb
  for (;;) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      // A job, a stop, or an idle job armed: then the idle job runs when no
      // job comes within idle_, or before the next job once it has waited
      // until idle_deadline_ (a steady trickle of jobs never leaves idle_).
      mu_.Await(absl::Condition(this, &StoreWorker::ReadyOrArmed));
      if (idle_job_ != nullptr) {
        const absl::Duration left = idle_deadline_ - absl::Now();
        bool due = left <= absl::ZeroDuration();
        if (!due && !Ready())
          due = !mu_.AwaitWithTimeout(absl::Condition(this, &StoreWorker::Ready),
                                      std::min(idle_, left));
        if (due) job = std::exchange(idle_job_, nullptr);
      }
      if (job == nullptr && !jobs_.empty()) {
        job = std::move(jobs_.front());
        jobs_.pop_front();
      } else if (job == nullptr) {  // stop_, and no job left but the idle one
        if (idle_job_ == nullptr) return;
        job = std::exchange(idle_job_, nullptr);
      }
    }
    job();
  }
}

// --------------------------------------------------------- DurableDataplane

DurableDataplane::DurableDataplane(Dataplane* inner, RuleStore* store, absl::Duration settle_idle)
    : ForwardingDataplane(inner), store_(store), settle_idle_(settle_idle) {
  if (store_ != nullptr) {
    durable_generation_ = store_->generation();
    worker_ = std::make_unique<StoreWorker>();
  }
}

DurableDataplane::~DurableDataplane() = default;  // the worker settles first

absl::Status DurableDataplane::failure() const {
  absl::MutexLock lock(&store_mu_);
  return store_failed_;
}

absl::Status DurableDataplane::RefusedLocked() const {
  absl::MutexLock lock(&store_mu_);
  return absl::UnavailableError(absl::StrCat(
      "flowclassd refuses rule changes until it is restarted: the rule store failed at "
      "generation ",
      store_failed_generation_, " (", store_failed_.message(),
      "); a restart restores the last durable generation, ", durable_generation_));
}

bool DurableDataplane::RefuseLocked() const {
  absl::MutexLock lock(&store_mu_);
  return !store_failed_.ok();
}

absl::Status DurableDataplane::CommitOnStoreThread(const std::vector<StoreBatch>& group) {
  {
    absl::MutexLock lock(&store_mu_);
    if (!store_failed_.ok())  // an earlier group's commit (or a settle) failed
      return absl::FailedPreconditionError(
          absl::StrCat("not committed: the rule store failed before it, at generation ",
                       store_failed_generation_, " (", store_failed_.message(), ")"));
  }
  absl::Status s = store_->CommitGroup(group);
  absl::ReleasableMutexLock lock(&store_mu_);
  if (!s.ok()) {
    store_failed_ = s;
    store_failed_generation_ = group.front().generation;
    return s;
  }
  durable_generation_ = group.back().generation;
  lock.Release();
  // The checkpoint into rules.db (and a compaction when one is due) runs
  // when no commit follows for settle_idle_ (at the latest kSettleAtLatest
  // after the first group it waits for): a stream's groups are committed
  // back to back (RuleStore::CommitGroup checkpoints first only when
  // checkpoint_groups groups or checkpoint_bytes wait).
  worker_->PostIdle([this] {
    absl::Status settled = store_->Settle();
    if (settled.ok()) return;
    // The groups committed are durable (in rules.db-wal); the next is not.
    absl::MutexLock lock(&store_mu_);
    if (!store_failed_.ok()) return;
    store_failed_ = std::move(settled);
    store_failed_generation_ = durable_generation_ + 1;
  }, settle_idle_, kSettleAtLatest);
  return s;
}

DurableDataplane::Commit DurableDataplane::StartAppendLocked(
    uint64_t before, absl::Span<const absl::Span<const RuleOp>> batches, bool delete_all,
    absl::Span<const absl::StatusOr<BatchResult>> results) {
  std::vector<StoreBatch> group;
  uint64_t gen = before;
  for (size_t i = 0; i < results.size(); ++i) {
    const absl::StatusOr<BatchResult>& r = results[i];
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
  }
  // Nothing to commit: the generation the results name may still be a
  // group's whose commit is running (or failed), so they wait for it.
  if (group.empty()) return last_commit_;
  // The batches' operations outlive the commit: FinishAppend waits for it
  // (ApplyBatchesDeferred's caller keeps them until Finish()).
  auto done = std::make_shared<std::promise<absl::Status>>();
  last_commit_ = done->get_future().share();
  worker_->Post([this, group = std::move(group), done] {
    done->set_value(CommitOnStoreThread(group));
  });
  return last_commit_;
}

void DurableDataplane::FinishAppend(const Commit& commit,
                                    std::vector<absl::StatusOr<BatchResult>>* results) {
  if (!commit.valid()) return;
  const absl::Status s = commit.get();
  uint64_t durable = 0;
  absl::Status failed;
  {
    absl::MutexLock lock(&store_mu_);
    durable = durable_generation_;
    failed = store_failed_;
  }
  if (failed.ok()) return;  // every commit so far succeeded: all durable
  // The commit waited for (this group's, or the one before a group that
  // changed nothing) or an earlier one failed: every result it would have
  // made durable is not.
  const absl::string_view why = s.ok() ? failed.message() : s.message();
  for (absl::StatusOr<BatchResult>& r : *results)
    if (r.ok() && r->generation > durable)
      r = absl::DataLossError(absl::StrCat(
          "generation ", r->generation,
          " was applied to the dataplane but is not durable: rule store: ", why,
          "; flowclassd refuses rule changes until it is restarted, and a restart restores "
          "generation ",
          durable));
}

absl::StatusOr<BatchResult> DurableDataplane::ApplyBatch(absl::Span<const RuleOp> ops) {
  const absl::Span<const RuleOp> one[] = {ops};
  return std::move(ApplyBatches(one).front());
}

std::vector<absl::StatusOr<BatchResult>> DurableDataplane::ApplyBatches(
    absl::Span<const absl::Span<const RuleOp>> batches) {
  return std::move(ApplyBatchesDeferred(batches).Finish());
}

Dataplane::Deferred DurableDataplane::ApplyBatchesDeferred(
    absl::Span<const absl::Span<const RuleOp>> batches) {
  if (store_ == nullptr) return Deferred(inner_->ApplyBatches(batches));
  absl::MutexLock lock(&mu_);
  if (RefuseLocked())
    return Deferred(std::vector<absl::StatusOr<BatchResult>>(batches.size(), RefusedLocked()));
  const uint64_t before = inner_->generation();
  Commit commit;
  // The store commits the group while the dataplane publishes it.
  std::vector<absl::StatusOr<BatchResult>> results = inner_->ApplyBatchesNotifying(
      batches, [&](absl::Span<const absl::StatusOr<BatchResult>> decided) {
        commit = StartAppendLocked(before, batches, /*delete_all=*/false, decided);
      });
  if (!commit.valid()) return Deferred(std::move(results));
  // Finished without mu_: the next group is applied while this one's commit runs.
  return Deferred(std::move(results),
                  [this, commit](std::vector<absl::StatusOr<BatchResult>>* r) {
                    FinishAppend(commit, r);
                  });
}

absl::StatusOr<BatchResult> DurableDataplane::DeleteAll() {
  if (store_ == nullptr) return inner_->DeleteAll();
  Commit commit;
  std::vector<absl::StatusOr<BatchResult>> results;
  {
    absl::MutexLock lock(&mu_);
    if (RefuseLocked()) return RefusedLocked();
    const uint64_t before = inner_->generation();
    results.push_back(inner_->DeleteAll());
    commit = StartAppendLocked(before, {}, /*delete_all=*/true, results);
  }
  FinishAppend(commit, &results);
  return std::move(results.front());
}

}  // namespace flowclass
