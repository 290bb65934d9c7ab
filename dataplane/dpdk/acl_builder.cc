// acl_builder.cc — the acl dataplane's builder thread (acl_builder.h).
#include "dataplane/dpdk/acl_builder.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dataplane/dpdk/internal/dpdk_dataplane_impl.h"
#include "dataplane/dpdk/rule_publisher.h"

namespace flowclass {
namespace dpdk_internal {

AclBuilder::AclBuilder(DpdkDataplane::Impl* dp) : d_(*dp) {
  stats_.enabled = true;
  algorithm_ = d_.opts.acl_algorithm;  // checked by Create
  options_.algorithm = algorithm_;
  thread_ = std::thread([this] { Run(); });
}

AclBuilder::~AclBuilder() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  HoldForTesting(false);
  thread_.join();
  std::lock_guard<std::mutex> l(mu_);
  for (const std::shared_ptr<Ticket>& t : waiting_) {
    t->done = true;
    t->status = absl::FailedPreconditionError("dataplane: stopped before the acl build");
  }
  waiting_.clear();
  done_cv_.notify_all();
}

std::shared_ptr<AclBuilder::Ticket> AclBuilder::Enqueue(std::vector<uint64_t> generations) {
  auto t = std::make_shared<Ticket>();
  t->generations = std::move(generations);
  std::lock_guard<std::mutex> l(mu_);
  if (stop_) {
    t->done = true;
    t->status = absl::FailedPreconditionError("dataplane: stopped");
    return t;
  }
  requested_ = std::max(requested_, t->generations.back());
  waiting_.push_back(t);
  work_cv_.notify_one();
  return t;
}

absl::Status AclBuilder::Wait(const std::shared_ptr<Ticket>& ticket) {
  std::unique_lock<std::mutex> l(mu_);
  done_cv_.wait(l, [&] { return ticket->done; });
  return ticket->status;
}

const Rule* AclBuilder::ClassifyLive(const FlowKey& key, Rule* copy,
                                     uint64_t* generation) const {
  std::lock_guard<std::mutex> l(mu_);
  *generation = live_generation_;
  const Rule* r = live_ ? live_->Classify(key) : nullptr;
  if (r) *copy = *r;
  return r ? copy : nullptr;
}

uint64_t AclBuilder::MismatchesLocked() const {
  uint64_t n = retired_mismatches_;
  if (live_) n += live_->autovalidator_mismatches();
  if (publishing_) n += publishing_->autovalidator_mismatches();
  return n;
}

void AclBuilder::RetireLocked(const AclClassifier& c) {
  retired_mismatches_ += c.autovalidator_mismatches();
}

void AclBuilder::LogMismatchesLocked() {
  const uint64_t n = MismatchesLocked();
  if (n == logged_mismatches_) return;
  std::fprintf(stderr,
               "flowclassd: acl autovalidator: %llu keys on which an implementation differed "
               "from scalar in the last ~second (%llu since start; the PMDs answered with "
               "scalar's)\n",
               static_cast<unsigned long long>(n - logged_mismatches_),
               static_cast<unsigned long long>(n));
  logged_mismatches_ = n;
}

absl::Status AclBuilder::SetAlgorithm(AclAlgorithm a) {
  if (absl::Status s = CheckAclAlgorithm(a, kConfigAclAlgorithm); !s.ok()) return s;
  std::lock_guard<std::mutex> l(mu_);
  algorithm_ = a;
  options_.algorithm = a;
  for (AclClassifier* c : {live_.get(), publishing_})
    if (c != nullptr) {
      if (absl::Status s = c->SetAlgorithm(a); !s.ok()) return s;
    }
  return absl::OkStatus();
}

AclBuilderStats AclBuilder::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  AclBuilderStats s = stats_;
  s.live_generation = live_generation_;
  s.algorithm = live_ ? live_->algorithm() : ResolveAclAlgorithm(algorithm_);
  s.autovalidator_mismatches = MismatchesLocked();
  s.context_bytes = live_ ? live_->stats().context_bytes : 0;
  s.queue_depth = 0;
  for (const std::shared_ptr<Ticket>& t : waiting_)
    for (uint64_t g : t->generations)
      if (g > attempted_) ++s.queue_depth;
  return s;
}

void AclBuilder::HoldForTesting(bool hold) {
  std::lock_guard<std::mutex> h(hold_mu_);
  hold_ = hold;
  hold_cv_.notify_all();
}

bool AclBuilder::HeldForTesting() const {
  std::lock_guard<std::mutex> h(hold_mu_);
  return held_;
}

void AclBuilder::SetAckObserverForTesting(std::function<void(uint64_t)> f) {
  std::lock_guard<std::mutex> l(mu_);
  observer_ = std::move(f);
}

void AclBuilder::CompleteLocked(uint64_t generation, const absl::Status& status) {
  while (!waiting_.empty() && waiting_.front()->generations.back() <= generation) {
    std::shared_ptr<Ticket> t = std::move(waiting_.front());
    waiting_.pop_front();
    if (status.ok() && observer_)
      for (uint64_t g : t->generations) observer_(g);
    t->status = status;
    t->done = true;
  }
  done_cv_.notify_all();
}

void AclBuilder::Run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      while (!work_cv_.wait_for(l, std::chrono::seconds(1),
                                [&] { return stop_ || requested_ > attempted_; }))
        LogMismatchesLocked();  // at most once a second, and only while idle
      if (stop_) return;
    }

    // The table at its newest generation: every batch applied so far.
    std::vector<Rule> rules;
    uint64_t generation = 0;
    uint64_t batches = 0;
    {
      std::lock_guard<std::mutex> a(d_.apply_mu);
      const std::vector<const Rule*> current = d_.table->Rules();
      rules.reserve(current.size());
      for (const Rule* r : current) rules.push_back(*r);
      generation = d_.table->generation();
      std::lock_guard<std::mutex> l(mu_);
      for (const std::shared_ptr<Ticket>& t : waiting_)
        for (uint64_t g : t->generations)
          if (g > attempted_ && g <= generation) ++batches;
      attempted_ = std::max(attempted_, generation);
    }

    // Off every lock: the PMDs go on with the operating classifier.
    AclOptions options;
    {
      std::lock_guard<std::mutex> l(mu_);
      options = options_;
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (const int64_t ms = delay_ms_.load(std::memory_order_relaxed); ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));  // a slow build (tests)
    {
      std::unique_lock<std::mutex> h(hold_mu_);  // a held build (tests)
      held_ = hold_;
      hold_cv_.wait(h, [&] { return !hold_; });
      held_ = false;
    }
    absl::StatusOr<std::unique_ptr<AclClassifier>> built = AclClassifier::Build(rules, options);
    const uint64_t ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                             t0)
            .count());
    if (!built.ok()) {
      absl::Status e(built.status().code(),
                     absl::StrCat("acl build of rule generation ", generation,
                                  " failed (the batch is in the rule table but not live; the "
                                  "PMDs keep the last live generation): ",
                                  built.status().message()));
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.build_failures;
      CompleteLocked(generation, e);
      continue;
    }

    {
      // A SetAlgorithm during the build reaches this classifier from here on.
      std::lock_guard<std::mutex> l(mu_);
      (*built)->SetAlgorithm(algorithm_).IgnoreError();  // checked when it was set
      publishing_ = built->get();
    }
    auto view = std::make_unique<PublishedTable>(nullptr, generation);
    view->acl = built->get();
    RulePublisher::WaitResult wait;
    const auto published_at = std::chrono::steady_clock::now();
    std::unique_ptr<PublishedTable> old = d_.publisher->PublishWithDeadline(
        std::move(view), published_at + d_.publish_timeout, &wait);
    d_.published_generation.store(generation, std::memory_order_release);

    absl::Status status;
    std::unique_ptr<AclClassifier> retired;
    {
      std::lock_guard<std::mutex> a(d_.apply_mu);
      std::lock_guard<std::mutex> l(mu_);
      if (!wait.complete()) {
        // No grace period: the lagging PMD may still classify with the old
        // classifier through the old view.  Both stay until it catches up.
        d_.owed_views.push_back(std::move(old));
        if (live_) {
          RetireLocked(*live_);
          d_.owed_classifiers.push_back(std::move(live_));
        }
        d_.grace_owed = true;
        d_.owed_reader = wait.lagging_reader;
        d_.owed_generation = generation;
        d_.owed_generation_seen.store(generation, std::memory_order_relaxed);
        d_.owed_since = published_at;
        d_.publish_timeouts.fetch_add(1, std::memory_order_relaxed);
        status = absl::DeadlineExceededError(absl::StrCat(
            "dataplane: ", d_.PmdName(wait.lagging_reader),
            " did not install rule generation ", generation,
            " within pmd.publish_timeout_ms=", d_.publish_timeout.count(),
            " (stalled?); the batch is applied and the other PMDs run it, the stalled PMD "
            "takes it when it resumes; not acknowledged"));
      } else {
        if (live_) RetireLocked(*live_);
        retired = std::move(live_);  // freed below, off the locks
      }
      publishing_ = nullptr;
      live_ = std::move(*built);
      live_generation_ = generation;
      ++stats_.builds;
      stats_.build_ns += ns;
      stats_.last_build_ns = ns;
      stats_.last_build_rules = rules.size();
      stats_.rules_built += rules.size();
      stats_.batches += batches;
      if (batches > 1) stats_.coalesced_batches += batches - 1;
      const double ms = static_cast<double>(ns) / 1e6;
      for (size_t i = 0; i < AclBuilderStats::kNumBuckets; ++i)
        if (ms <= AclBuilderStats::kBucketsMs[i]) ++stats_.le_ms[i];
      CompleteLocked(generation, status);
    }
    old.reset();
    retired.reset();  // rte_acl_free: no PMD reads it any more
  }
}

}  // namespace dpdk_internal
}  // namespace flowclass
