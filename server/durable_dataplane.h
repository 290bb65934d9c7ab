// durable_dataplane.h — a Dataplane whose rule changes are durable in a
// RuleStore before they are acknowledged.
//
// Contract
// --------
// DurableDataplane(inner, store) forwards every call to `inner`; the calls
// that change rules (ApplyBatch(es), ApplyBatchesDeferred, DeleteAll) apply
// their group to `inner` under one mutex, and every batch `inner` accepted
// with a generation is committed to `store` as one group
// (RuleStore::CommitGroup: one SQLite transaction, synced) before the call
// returns (ApplyBatchesDeferred: before its Finish() returns).  So when a
// result is OK with generation G, G is both applied (Dataplane's promise:
// every PMD classifies by it) and durable (a restart restores it).  A
// DeleteAll is stored as a batch with delete_all_first and no operations.
//
// Overlap.  The commits run on a store thread of this object's, one group
// at a time in generation order.  A group's commit is posted as soon as
// `inner` has decided its results (Dataplane::ApplyBatchesNotifying: after
// its rule table took the group, before the publication to the PMDs), so
// the commit's fsync and the publication's grace period overlap.  The mutex
// is released once the group is published, before its commit is waited
// for: with ApplyBatchesDeferred (the ApplyRules stream) the next group is
// applied and published while this one's fsync runs, and each group is
// acknowledged after its own Finish(), in order (a DeleteAll is committed
// after `inner` has returned: no overlap with its publication).  The
// checkpoint into rules.db (RuleStore::Settle, with any automatic
// compaction) runs on the same thread once it has had no commit to do for
// `settle_idle` (kSettleWhenIdle, store.checkpoint_idle_ms), and at the
// latest kSettleAtLatest after the first group not checkpointed: a stream
// of groups is committed back to back (one fsync a group; the store also
// checkpoints every RuleStoreOptions::checkpoint_groups groups), and a lone
// group is checkpointed `settle_idle` after it.
//
// A publication that fails (its deadline passes) while the commit succeeds:
// the group is in the rule table and durable, and its results are the
// publication's error (DEADLINE_EXCEEDED / UNAVAILABLE: "not
// acknowledged"); a restart restores it, as it may any unacknowledged group.
//
// With `store` null (no store.path: the in-memory mode) the calls are only
// forwarded.
//
// A failed commit: the dataplane has the group (it was published while the
// commit ran, or is being), the store does not.  Each batch of that group
// answers DATA_LOSS ("... applied but not durable ...") — whatever its
// publication gave — and so does each batch of a group applied before the
// failure was known (a later group of the same stream, applied while the
// failed commit ran: its commit is refused, "not committed: the rule store
// failed before it").  From then on every rule change answers UNAVAILABLE
// without reaching `inner` ("flowclassd refuses rule changes until it is
// restarted ..."): a restart restores the last durable generation, which a
// controller can then compare with the generations it holds acks for.
// Reads keep working.  A failed settle (checkpoint or compaction, after its
// group was acknowledged durable, which it stays, in rules.db-wal) makes
// the next rule change answer that UNAVAILABLE, nothing of it applied (or,
// one already being applied then, DATA_LOSS as above).  A group that
// changes nothing commits nothing, but its results name the generation of
// the last group before it, so they wait for that group's commit too (and
// are DATA_LOSS when it failed): no OK names a generation not yet durable.
//
// Only changes made through this object are stored: nothing else may change
// `inner`'s rules (the store checks that generations continue one by one and
// fails otherwise).
//
// Threads: as Dataplane; the store is used by the store thread only, one
// job at a time (commits, and a settle when idle); commits are posted under
// the mutex.
#ifndef FLOWCLASS_SERVER_DURABLE_DATAPLANE_H_
#define FLOWCLASS_SERVER_DURABLE_DATAPLANE_H_

#include <cassert>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dataplane/dataplane.h"
#include "dataplane/forwarding_dataplane.h"
#include "server/store/rule_store.h"

namespace flowclass {

class DurableDataplane final : public ForwardingDataplane {
 public:
  // How long the store thread waits without a commit before it checkpoints
  // (the default of store.checkpoint_idle_ms), and at most after the first
  // group it has not checkpointed (so that a steady trickle of groups, never
  // idle that long, still gets its checkpoints and automatic compactions).
  static constexpr absl::Duration kSettleWhenIdle = absl::Milliseconds(50);
  static constexpr absl::Duration kSettleAtLatest = absl::Seconds(5);

  // `inner` and `store` (may be null) must outlive this object.
  DurableDataplane(Dataplane* inner, RuleStore* store,
                   absl::Duration settle_idle = kSettleWhenIdle);
  // Waits for the store thread's last job (the last settle).
  ~DurableDataplane() override;

  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override;
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override;
  // Returns once the group is applied and published, its commit posted to
  // the store thread; Finish() waits for the commit.  So a caller with more
  // groups (the ApplyRules stream) applies the next while this one's fsync
  // runs, and acknowledges each after its Finish().
  Deferred ApplyBatchesDeferred(absl::Span<const absl::Span<const RuleOp>> batches) override;
  absl::StatusOr<BatchResult> DeleteAll() override;
  // Not forwarded: the group is durable before `decided` hears of it
  // (Dataplane's default: ApplyBatches above, then `decided`).
  std::vector<absl::StatusOr<BatchResult>> ApplyBatchesNotifying(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) override {
    return Dataplane::ApplyBatchesNotifying(batches, decided);
  }
  // The other calls are ForwardingDataplane's: reads and settings pass to `inner`.

  bool durable() const { return store_ != nullptr; }
  // Tests: `job` runs on the store thread after the jobs posted so far (a
  // test holds the thread with it, as a slow fsync would).  Needs a store.
  void PostStoreJobForTesting(std::function<void()> job) {
    assert(worker_ != nullptr);
    worker_->Post(std::move(job));
  }
  // OK, or why rule changes are refused (the append that failed).
  absl::Status failure() const;

 private:
  // Runs posted jobs one at a time, in order, on a thread of its own.
  class StoreWorker {
   public:
    StoreWorker();
    ~StoreWorker();  // runs the jobs already posted, then joins
    void Post(std::function<void()> job);
    // `job` runs once the worker has had nothing to do for `idle`, before
    // the next job once `latest` has passed since the idle job was first
    // armed, or when the worker stops; it replaces an idle job not yet run.
    void PostIdle(std::function<void()> job, absl::Duration idle, absl::Duration latest);

   private:
    void Run();
    bool Ready() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !jobs_.empty(); }
    bool ReadyOrArmed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return Ready() || idle_job_ != nullptr;
    }
    absl::Mutex mu_;
    std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
    bool stop_ ABSL_GUARDED_BY(mu_) = false;
    std::function<void()> idle_job_ ABSL_GUARDED_BY(mu_);
    absl::Duration idle_ ABSL_GUARDED_BY(mu_);
    absl::Time idle_deadline_ ABSL_GUARDED_BY(mu_);
    std::thread thread_;
  };
  // What a group's results wait for: its commit, or (a group that changed
  // nothing) the last commit posted before it, which the generation its
  // results name may still be waiting for; invalid: nothing.
  using Commit = std::shared_future<absl::Status>;
  // Posts the commit of the accepted batches of `results` (of `batches`;
  // delete_all for a DeleteAll) that got a generation after `before`, and
  // returns what the results wait for.
  Commit StartAppendLocked(uint64_t before, absl::Span<const absl::Span<const RuleOp>> batches,
                           bool delete_all, absl::Span<const absl::StatusOr<BatchResult>> results)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for `commit` (without mu_); then every OK result whose generation
  // is not durable (its commit, or one before it, failed) turns into
  // DATA_LOSS.
  void FinishAppend(const Commit& commit, std::vector<absl::StatusOr<BatchResult>>* results)
      ABSL_LOCKS_EXCLUDED(mu_, store_mu_);
  // The store thread's job for one group: refused once the store has failed,
  // else RuleStore::CommitGroup; a failure fails this object, a success arms
  // the idle settle.
  absl::Status CommitOnStoreThread(const std::vector<StoreBatch>& group)
      ABSL_LOCKS_EXCLUDED(store_mu_);
  // True when rule changes are refused (the store failed).
  bool RefuseLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) ABSL_LOCKS_EXCLUDED(store_mu_);
  absl::Status RefusedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
      ABSL_LOCKS_EXCLUDED(store_mu_);

  RuleStore* const store_;
  const absl::Duration settle_idle_;
  // Held while a group is applied and its commit posted, so that the store
  // thread commits groups in generation order.
  mutable absl::Mutex mu_;
  Commit last_commit_ ABSL_GUARDED_BY(mu_);  // the last posted
  // Set by the store thread.
  mutable absl::Mutex store_mu_;
  absl::Status store_failed_ ABSL_GUARDED_BY(store_mu_);  // the commit or settle that failed
  uint64_t store_failed_generation_ ABSL_GUARDED_BY(store_mu_) = 0;  // first not durable
  uint64_t durable_generation_ ABSL_GUARDED_BY(store_mu_) = 0;
  // Last member: destroyed first, so its thread is joined before the rest.
  std::unique_ptr<StoreWorker> worker_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_DURABLE_DATAPLANE_H_
