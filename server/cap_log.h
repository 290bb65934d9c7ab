// cap_log.h — flowclassd's log line for megaflow caps that bite.
//
// When pipeline.max_megaflows or pipeline.max_subtables_per_port stops a
// PMD from caching a miss, the packet is still classified (by the slow
// path) and the PMD counts it (upcalls_megaflow_cap / upcalls_subtable_cap,
// dataplane/pmd_counters.h); it never logs.  The daemon's control thread
// feeds CapLog a Stats() snapshot now and then, and CapLog turns the
// counters' growth since the previous report into at most one line per PMD
// and cap per interval, which the daemon logs at level warn (server/log.h
// puts the timestamp, the level and "flowclassd: " before it):
//   flowclassd: pmd 0: cap pipeline.max_megaflows=200000 reached: 1234
//   misses not cached in the last 10 s (classified by the slow path)
// The mask-explosion defence (upcalls_rare_mask) reads the same, as cap
// pipeline.rare_mask_subtables; the upcall rate limit (upcalls_rate_limited)
//   flowclassd: pmd 0: limit pipeline.upcall_rate=1000 reached: 56 misses
//   past the upcall budget in the last 10 s (dropped: 56)
// Plain values, no threads: the caller serialises Report calls.
#ifndef FLOWCLASS_SERVER_CAP_LOG_H_
#define FLOWCLASS_SERVER_CAP_LOG_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dataplane/dataplane.h"

namespace flowclass {

class CapLog {
 public:
  using Clock = std::chrono::steady_clock;
  // At most one report per `interval`; the first Report only takes the
  // counters' start values.
  explicit CapLog(std::chrono::milliseconds interval = std::chrono::seconds(10))
      : interval_(interval) {}

  // Whether Report at `now` may produce lines (the interval has passed):
  // the caller takes a Stats() snapshot only then.
  bool Due(Clock::time_point now) const { return !started_ || now - last_ >= interval_; }

  // The lines for the cap counters that grew since the previous report
  // (without a newline); `config` is the dataplane's GetConfig, for the
  // caps' current values.  Empty when nothing grew.
  std::vector<std::string> Report(const DataplaneStats& stats,
                                  const std::map<std::string, std::string>& config,
                                  Clock::time_point now);

 private:
  struct Seen {
    uint64_t megaflow_cap = 0;
    uint64_t subtable_cap = 0;
    uint64_t rare_mask = 0;
    uint64_t rate_limited = 0;
    uint64_t limit_drops = 0;
  };
  std::chrono::milliseconds interval_;
  bool started_ = false;
  Clock::time_point last_;
  std::map<uint32_t, Seen> seen_;  // by PMD index
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_CAP_LOG_H_
