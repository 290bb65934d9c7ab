#include "server/cap_log.h"

#include "absl/strings/str_format.h"
#include "dataplane/runtime_settings.h"

namespace flowclass {

std::vector<std::string> CapLog::Report(const DataplaneStats& stats,
                                        const std::map<std::string, std::string>& config,
                                        Clock::time_point now) {
  std::vector<std::string> lines;
  const bool first = !started_;
  const double secs =
      first ? 0 : std::chrono::duration<double>(now - last_).count();
  started_ = true;
  last_ = now;
  auto value = [&](const char* key) {
    auto it = config.find(key);
    return it == config.end() ? std::string("?") : it->second;
  };
  for (const PmdCounters& p : stats.pmds) {
    Seen& seen = seen_[p.pmd];
    const Seen cur{p.pipeline.upcalls_megaflow_cap, p.pipeline.upcalls_subtable_cap,
                   p.pipeline.upcalls_rare_mask, p.pipeline.upcalls_rate_limited,
                   p.pipeline.upcall_limit_drops};
    // A counter below what was seen: a restarted PMD, start over.
    auto delta = [&](uint64_t Seen::*f) {
      return cur.*f >= seen.*f && !first ? cur.*f - seen.*f : 0;
    };
    const uint64_t d_mf = delta(&Seen::megaflow_cap);
    const uint64_t d_st = delta(&Seen::subtable_cap);
    const uint64_t d_rare = delta(&Seen::rare_mask);
    const uint64_t d_rate = delta(&Seen::rate_limited);
    const uint64_t d_drops = delta(&Seen::limit_drops);
    seen = cur;
    auto line = [&](const char* key, uint64_t n) {
      lines.push_back(absl::StrFormat(
          "pmd %d: cap %s=%s reached: %d misses not cached in the last %.0f s "
          "(classified by the slow path)",
          p.pmd, key, value(key), n, secs));
    };
    if (d_mf) line(kConfigMaxMegaflows, d_mf);
    if (d_st) line(kConfigMaxSubtablesPerPort, d_st);
    if (d_rare) line(kConfigRareMaskSubtables, d_rare);
    if (d_rate)
      lines.push_back(absl::StrFormat(
          "pmd %d: limit %s=%s reached: %d misses past the upcall budget in the "
          "last %.0f s (dropped: %d)",
          p.pmd, kConfigUpcallRate, value(kConfigUpcallRate), d_rate, secs, d_drops));
  }
  return lines;
}

}  // namespace flowclass
