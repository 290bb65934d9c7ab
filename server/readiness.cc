#include "server/readiness.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace flowclass {

Readiness::Readiness(ReadinessOptions options) : options_(options) {
  std::lock_guard<std::mutex> lock(mu_);
  Update();
}

Readiness::~Readiness() { Stop(); }

void Readiness::SetRulesRestored(bool restored) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_restored_ = restored;
  Update();
}

void Readiness::Observe(const DataplaneHeartbeat& h, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const PmdHeartbeat& p : h.pmds) {
    auto [it, fresh] = track_.try_emplace(p.pmd);
    PmdTrack& t = it->second;
    // A PMD that is not running yet (or any more) is not stalled: its clock
    // starts when it runs.
    if (fresh || !p.running || p.iterations != t.iterations) t.progressed = now;
    t.iterations = p.iterations;
  }
  // Lag is judged against the previous sample's generation (see the header).
  if (observed_) prev_generation_ = last_.generation;
  else prev_generation_ = h.generation;
  last_ = h;
  last_at_ = now;
  observed_ = true;
  Update();
}

void Readiness::Update() {
  ReadinessState s;
  s.publish_timeouts = last_.publish_timeouts;
  std::vector<std::string> why;     // not ready
  std::vector<std::string> wedged;  // not live
  if (!rules_restored_) why.push_back("rules not restored yet");
  if (!observed_) why.push_back("PMDs not observed yet");
  for (const PmdHeartbeat& p : last_.pmds) {
    s.pmds.emplace_back(p.pmd, p.lcore);
    const std::string name = absl::StrCat("pmd ", p.pmd, " (lcore ", p.lcore, ")");
    if (!p.running) {
      why.push_back(absl::StrCat(name, ": not running"));
      continue;
    }
    const auto it = track_.find(p.pmd);
    const auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(
        last_at_ - it->second.progressed);
    if (idle > options_.stall_timeout) {
      s.stalled_pmds.push_back(p.pmd);
      wedged.push_back(absl::StrCat(name, ": no loop iteration for ", idle.count(),
                                    " ms (stalled; pmd.stall_timeout_ms=",
                                    options_.stall_timeout.count(), ")"));
    } else if (const uint64_t want = std::max(prev_generation_, last_.owed_generation);
               p.generation < want) {
      why.push_back(absl::StrCat(name, ": runs rule generation ", p.generation, ", published ",
                                 want));
    }
  }
  s.live = wedged.empty();
  why.insert(why.end(), wedged.begin(), wedged.end());
  s.ready = why.empty();
  s.reason = s.ready ? "ready" : absl::StrJoin(why, "; ");
  const bool changed = s.ready != state_.ready;
  state_ = std::move(s);
  if (changed)
    for (auto& [id, cb] : subscribers_) cb(state_.ready);
}

ReadinessState Readiness::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

bool Readiness::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_.ready;
}

int Readiness::Subscribe(std::function<void(bool)> cb) {
  std::lock_guard<std::mutex> lock(mu_);
  const int id = next_id_++;
  cb(state_.ready);
  subscribers_.emplace(id, std::move(cb));
  return id;
}

void Readiness::Unsubscribe(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(id);
}

void Readiness::Start(HeartbeatFn heartbeat) {
  Stop();
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    stop_ = false;
  }
  Observe(heartbeat(), Clock::now());
  watchdog_ = std::thread([this, hb = std::move(heartbeat)] {
    std::unique_lock<std::mutex> lock(run_mu_);
    while (!run_cv_.wait_for(lock, options_.interval, [this] { return stop_; })) {
      lock.unlock();
      Observe(hb(), Clock::now());
      lock.lock();
    }
  });
}

void Readiness::Stop() {
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    stop_ = true;
  }
  run_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

}  // namespace flowclass
