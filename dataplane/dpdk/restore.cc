// restore.cc — DpdkDataplane::Restore: the rule set a durable store kept,
// installed at start-up as one publication of a new table at the stored
// generation.  Control thread only.
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "dataplane/acl/acl_classifier.h"
#include "dataplane/dpdk/acl_builder.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/dpdk/internal/dpdk_dataplane_impl.h"
#include "dataplane/dpdk/rule_publisher.h"

namespace flowclass {

absl::Status DpdkDataplane::Restore(absl::Span<const Rule> rules, uint64_t generation) {
  Impl& d = *impl_;
  std::unique_lock<std::mutex> lock(d.apply_mu);
  if (d.stopped) return absl::FailedPreconditionError("dataplane: stopped");
  const PublishedTable* cur = d.publisher->Current();
  if (d.acl()) {
    // What the ACL cannot express is refused before anything changes.
    for (size_t i = 0; i < rules.size(); ++i)
      if (absl::Status s = CheckAclExpressible(rules[i], i); !s.ok()) return s;
  }
  auto fresh = std::make_unique<RuleTable>(d.opts.limits, /*concurrent_readers=*/true);
  if (absl::Status s = RestoreRuleTable(rules, generation, cur->generation, fresh.get());
      !s.ok())
    return s;
  if (d.acl()) {
    // The builder compiles and publishes the restored table (no PMD reads
    // the table itself, so it is swapped at once).
    d.table.swap(fresh);
    if (d.table->generation() == cur->generation && d.table->size() == 0)
      return absl::OkStatus();  // nothing stored: the empty classifier stays
    std::shared_ptr<dpdk_internal::AclBuilder::Ticket> ticket =
        d.acl_builder->Enqueue({d.table->generation()});
    lock.unlock();
    fresh.reset();
    return d.acl_builder->Wait(ticket);
  }
  // Before Start() no PMD runs, so nothing is waited for; the deadline
  // applies all the same.
  return d.Publish(cur, /*changes=*/nullptr, std::move(fresh));
}

}  // namespace flowclass
