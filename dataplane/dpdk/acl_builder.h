// acl_builder.h — pipeline.kind acl: the builder thread that compiles rule
// generations into AclClassifiers off the PMDs and publishes them.
//
// Contract
// --------
// Private to dataplane/dpdk (it reads DpdkDataplane::Impl).  One builder per
// acl dataplane, made by Create, its thread running until the Impl goes.
//
// * Enqueue (control thread, holding Impl::apply_mu, right after the rule
//   table took batches that got the generations `generations`, ascending):
//   hands the builder "the table is at generations.back()" and returns the
//   ticket of those batches.  Wait (without apply_mu) returns once a build
//   covering every generation of the ticket has been published and waited
//   for: OK when every online PMD installed it (the batches' ack), the
//   publication's DEADLINE_EXCEEDED when one did not in time, the build's
//   error when it failed, FAILED_PRECONDITION when the dataplane went away.
// * The builder loop: wait for a generation newer than the last one built;
//   under apply_mu copy the table's rules and generation G (so every batch
//   applied up to then, by any caller, is in: batches that arrived during
//   the previous build are coalesced into this one); without any lock build
//   an AclClassifier of them (rte_acl_build; the PMDs keep classifying with
//   the operating one, nothing they read is touched); publish {classifier,
//   G} through Impl::publisher (RulePublisher::PublishWithDeadline: each PMD
//   installs it at its next quiescent point with AclPipeline::SetClassifier,
//   which invalidates its EMC, then reports G); then free the previous
//   classifier (the wait was its grace period) or, when a PMD did not report
//   G within pmd.publish_timeout_ms, keep it (and the old view) in the
//   Impl's owed grace period (SettleOwedGrace frees them).  Tickets are then
//   completed in FIFO (= generation) order, the ack observer (tests) called
//   once per batch generation in that order.
// * Live(): the classifier every PMD runs (or is being handed), for Trace,
//   under the builder's mutex (ClassifyLive).
// * SetAlgorithm (pipeline.acl_algorithm; control thread, any time): the
//   live classifier, the one being published and every later build classify
//   with it from their next burst (AclClassifier::SetAlgorithm: an atomic each
//   burst reads once; no rebuild, no publication).
// * Autovalidator: its differences are summed over every classifier (Stats);
//   while the builder waits for work it looks once a second and logs to
//   stderr when the sum grew (rate-limited, off the PMDs, which only count).
//
// Lock order: Impl::apply_mu before the builder's mutex; the builder never
// holds its mutex while it takes apply_mu.
#ifndef FLOWCLASS_DATAPLANE_DPDK_ACL_BUILDER_H_
#define FLOWCLASS_DATAPLANE_DPDK_ACL_BUILDER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "dataplane/acl/acl_classifier.h"
#include "dataplane/dataplane.h"
#include "dataplane/dpdk/dpdk_dataplane.h"

namespace flowclass {
namespace dpdk_internal {

class AclBuilder {
 public:
  struct Ticket {
    std::vector<uint64_t> generations;  // ascending, not empty
    bool done = false;
    absl::Status status;
  };

  // Starts the builder thread.  `dp` outlives the builder.
  explicit AclBuilder(DpdkDataplane::Impl* dp);
  // Fails the open tickets (FAILED_PRECONDITION) and joins the thread.
  ~AclBuilder();
  AclBuilder(const AclBuilder&) = delete;
  AclBuilder& operator=(const AclBuilder&) = delete;

  // Under apply_mu (see above).
  std::shared_ptr<Ticket> Enqueue(std::vector<uint64_t> generations);
  // Without apply_mu.
  absl::Status Wait(const std::shared_ptr<Ticket>& ticket);

  // The live classifier's answer for `key` (nullptr: no rule), and the
  // generation it was built from.
  const Rule* ClassifyLive(const FlowKey& key, Rule* copy, uint64_t* generation) const;
  AclBuilderStats Stats() const;
  // FAILED_PRECONDITION naming pipeline.acl_algorithm for one this CPU lacks
  // (nothing changes then).
  absl::Status SetAlgorithm(AclAlgorithm a);

  void SetDelayForTesting(std::chrono::milliseconds d) {
    delay_ms_.store(d.count(), std::memory_order_relaxed);
  }
  void SetAckObserverForTesting(std::function<void(uint64_t)> f);
  // While held, a build stops after it took the table's rules (before
  // rte_acl_build) until released; Held() says a build is stopped there.
  void HoldForTesting(bool hold);
  bool HeldForTesting() const;

 private:
  void Run();
  // Under mu_: completes, in order, the tickets a build at `generation`
  // covered, with `status`.
  void CompleteLocked(uint64_t generation, const absl::Status& status);
  // Under mu_: the autovalidator's differences over every classifier.
  uint64_t MismatchesLocked() const;
  // Under mu_: `c` stops being the live classifier; its differences are kept.
  void RetireLocked(const AclClassifier& c);
  // Under mu_: logs the differences found since the last log, if any.
  void LogMismatchesLocked();

  DpdkDataplane::Impl& d_;
  AclOptions options_;
  std::atomic<int64_t> delay_ms_{0};

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the builder waits for work
  std::condition_variable done_cv_;  // callers wait for their tickets
  std::deque<std::shared_ptr<Ticket>> waiting_;
  uint64_t requested_ = 0;  // newest generation enqueued
  uint64_t attempted_ = 0;  // newest generation a build took
  bool stop_ = false;
  std::unique_ptr<AclClassifier> live_;  // what the PMDs run (published last)
  AclClassifier* publishing_ = nullptr;  // built, being published (owned by Run)
  AclAlgorithm algorithm_ = AclAlgorithm::kDefault;  // pipeline.acl_algorithm
  uint64_t retired_mismatches_ = 0;  // of classifiers no longer live
  uint64_t logged_mismatches_ = 0;   // the sum at the last log
  uint64_t live_generation_ = 0;
  AclBuilderStats stats_;
  std::function<void(uint64_t)> observer_;
  mutable std::mutex hold_mu_;  // the hold test hook (not mu_: a held build holds no lock)
  std::condition_variable hold_cv_;
  bool hold_ = false;
  bool held_ = false;
  std::thread thread_;
};

}  // namespace dpdk_internal
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPDK_ACL_BUILDER_H_
