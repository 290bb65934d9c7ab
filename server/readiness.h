// readiness.h — whether flowclassd is ready (serves the rule set it should)
// and live (not wedged): what gRPC health, /readyz and /healthz report.
//
// Contract
// --------
// Ready when all of these hold:
//   * the start-up rule load is done (SetRulesRestored(true));
//   * a heartbeat was observed (the watchdog runs) and every PMD is running;
//   * no PMD is stalled: each one's loop iteration counter advanced within
//     `stall_timeout` (a PMD passes a quiescent point every iteration);
//   * no PMD lags: each runs at least the generation that was published one
//     observation earlier (a healthy PMD installs a new table within one
//     iteration, so a PMD still behind one interval later did not take it)
//     and at least the heartbeat's owed_generation (a publication whose
//     deadline expired: exact, whatever the sampling).
// Live unless a PMD is stalled (a restart is what helps a wedged PMD);
// starting, restoring rules or a lagging generation do not fail liveness.
// Kubernetes: readinessProbe on /readyz takes the pod out of service (and
// holds a rolling update) while not ready; livenessProbe on /healthz
// restarts it when wedged.
//
// Observe(heartbeat, now) feeds one sample; the watchdog (Start) samples
// every `interval` on its own thread.  Tests call Observe with their own
// clock.  Subscribers (gRPC health) get ready() at once and on every change.
//
// Threads: every method from any control thread (a mutex; nothing here is
// on the packet path: the heartbeat is read with relaxed loads of counters
// the PMDs write anyway).  Subscriber callbacks run under the mutex: they
// must be quick and must not call back into Readiness.
#ifndef FLOWCLASS_SERVER_READINESS_H_
#define FLOWCLASS_SERVER_READINESS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/dataplane.h"

namespace flowclass {

struct ReadinessOptions {
  std::chrono::milliseconds stall_timeout{2000};  // pmd.stall_timeout_ms
  std::chrono::milliseconds interval{100};        // watchdog sampling period
};

struct ReadinessState {
  bool ready = false;
  bool live = true;
  // Why not ready (or not live): "rules not restored yet",
  // "pmd 1 (lcore 2): no loop iteration for 2300 ms (stalled)", ...;
  // "ready" when ready.
  std::string reason = "starting";
  uint64_t publish_timeouts = 0;  // from the last heartbeat
  std::vector<uint32_t> stalled_pmds;
  std::vector<std::pair<uint32_t, uint32_t>> pmds;  // (pmd, lcore) last seen
};

class Readiness {
 public:
  using Clock = std::chrono::steady_clock;
  using HeartbeatFn = std::function<DataplaneHeartbeat()>;

  explicit Readiness(ReadinessOptions options = {});
  ~Readiness();  // stops the watchdog
  Readiness(const Readiness&) = delete;
  Readiness& operator=(const Readiness&) = delete;

  void SetRulesRestored(bool restored);
  // One sample of the dataplane, taken at `now`.
  void Observe(const DataplaneHeartbeat& heartbeat, Clock::time_point now);

  // Samples heartbeat() every interval on a thread of its own (one at once
  // when started) until Stop() or destruction.  heartbeat must stay valid
  // until then.
  void Start(HeartbeatFn heartbeat);
  void Stop();

  ReadinessState Get() const;
  bool ready() const;

  // cb(ready()) now and on every change of ready(); the id unsubscribes.
  int Subscribe(std::function<void(bool)> cb);
  void Unsubscribe(int id);

 private:
  void Update();  // under mu_: recompute state_ and notify on change

  const ReadinessOptions options_;
  mutable std::mutex mu_;
  bool rules_restored_ = false;
  bool observed_ = false;
  uint64_t prev_generation_ = 0;  // published generation of the previous sample
  struct PmdTrack {
    uint64_t iterations = 0;
    Clock::time_point progressed;
  };
  std::map<uint32_t, PmdTrack> track_;
  DataplaneHeartbeat last_;
  Clock::time_point last_at_;
  ReadinessState state_;
  std::map<int, std::function<void(bool)>> subscribers_;
  int next_id_ = 1;

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_READINESS_H_
