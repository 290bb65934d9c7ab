// idle_watchdog.h — ends a streaming call that makes no progress.
//
// Contract
// --------
// IdleWatchdog(ctx, timeout, message) watches one streaming call from a
// thread of its own: when neither side has made progress (Kick) for
// `timeout`, it cancels the call with DEADLINE_EXCEEDED and `message`, which
// is what the client receives (grpc_call_cancel_with_status), and every
// blocked Read or Write of the call returns false.  Kick() is cheap (one
// clock read, one relaxed store): call it after each message read or
// written.  Pause() stops the clock while the server itself is busy (a
// commit, a listing being built): the next Kick starts it again.  A timeout
// of 0 starts no thread and never fires.  The destructor stops the thread;
// it does not cancel anything.
//
// Threads: Kick, Pause and fired() from any thread; one owner constructs
// and destroys it, within the call.
#ifndef FLOWCLASS_SERVER_API_IDLE_WATCHDOG_H_
#define FLOWCLASS_SERVER_API_IDLE_WATCHDOG_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace flowclass {

class IdleWatchdog {
 public:
  IdleWatchdog(grpc::ServerContext* ctx, std::chrono::milliseconds timeout, std::string message);
  ~IdleWatchdog();
  IdleWatchdog(const IdleWatchdog&) = delete;
  IdleWatchdog& operator=(const IdleWatchdog&) = delete;

  void Kick() { last_.store(Now(), std::memory_order_relaxed); }
  void Pause() { last_.store(kPaused, std::memory_order_relaxed); }
  bool fired() const { return fired_.load(std::memory_order_acquire); }
  // The status the client got (DEADLINE_EXCEEDED, `message`).
  grpc::Status status() const;

 private:
  static constexpr int64_t kPaused = INT64_MAX;
  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void Run();

  grpc::ServerContext* ctx_;
  const std::chrono::milliseconds timeout_;
  const std::string message_;
  std::atomic<int64_t> last_;
  std::atomic<bool> fired_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_API_IDLE_WATCHDOG_H_
