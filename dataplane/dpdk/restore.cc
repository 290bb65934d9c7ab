// restore.cc — DpdkDataplane::Restore: the rule set a durable store kept,
// installed at start-up as one publication of a new table at the stored
// generation.  Control thread only.
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/dpdk/internal/dpdk_dataplane_impl.h"
#include "dataplane/dpdk/rule_publisher.h"

namespace flowclass {

absl::Status DpdkDataplane::Restore(absl::Span<const Rule> rules, uint64_t generation) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.apply_mu);
  if (d.stopped) return absl::FailedPreconditionError("dataplane: stopped");
  const PublishedTable* cur = d.publisher->Current();
  auto fresh = std::make_unique<RuleTable>(d.opts.limits, /*concurrent_readers=*/true);
  if (absl::Status s = RestoreRuleTable(rules, generation, cur->generation, fresh.get());
      !s.ok())
    return s;
  // Before Start() no PMD runs, so nothing is waited for; the deadline
  // applies all the same.
  return d.Publish(cur, /*changes=*/nullptr, std::move(fresh));
}

}  // namespace flowclass
