#include "server/api/idle_watchdog.h"

#include <utility>

#include "grpc/grpc.h"

namespace flowclass {

IdleWatchdog::IdleWatchdog(grpc::ServerContext* ctx, std::chrono::milliseconds timeout,
                           std::string message)
    : ctx_(ctx), timeout_(timeout), message_(std::move(message)), last_(Now()) {
  if (timeout_.count() > 0) thread_ = std::thread([this] { Run(); });
}

IdleWatchdog::~IdleWatchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

grpc::Status IdleWatchdog::status() const {
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, message_);
}

void IdleWatchdog::Run() {
  const int64_t timeout_ns = std::chrono::nanoseconds(timeout_).count();
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    const int64_t last = last_.load(std::memory_order_relaxed);
    int64_t wait_ns = timeout_ns;
    if (last != kPaused) {
      const int64_t idle = Now() - last;
      if (idle >= timeout_ns) {
        fired_.store(true, std::memory_order_release);
        grpc_call_cancel_with_status(ctx_->c_call(), GRPC_STATUS_DEADLINE_EXCEEDED,
                                     message_.c_str(), nullptr);
        return;
      }
      wait_ns = timeout_ns - idle;
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(wait_ns), [this] { return done_; });
  }
}

}  // namespace flowclass
