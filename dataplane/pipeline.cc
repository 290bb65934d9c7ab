#include "dataplane/pipeline.h"

#include "absl/strings/str_format.h"

namespace flowclass {

Pipeline::Pipeline(const PipelineConfig& config) : config_(config) {}
Pipeline::~Pipeline() = default;

void Pipeline::SetRuleTable(const RuleTable* table) { table_ = table; }

void Pipeline::ProcessBurst(const FlowKey* keys, int n, Verdict* verdicts) {
  for (int i = 0; i < n; ++i) {
    Flow wc;
    const Rule* r = table_ ? table_->Lookup(keys[i], &wc) : nullptr;
    if (r) {
      verdicts[i] = Verdict{r->id, r->action};
      ++stats_.upcall_ok;
    } else {
      verdicts[i] = Verdict{};
      ++stats_.no_match;
    }
  }
  stats_.packets += static_cast<uint64_t>(n);
}

std::string PmdStats::ToString() const {
  return absl::StrFormat(
      "  packets received: %d\n  emc hits: %d\n  smc hits: %d\n"
      "  megaflow hits: %d\n  miss with success upcall: %d\n"
      "  miss with failed upcall: %d\n  no rule matched: %d\n",
      packets, emc_hits, smc_hits, megaflow_hits, upcall_ok, upcall_failed,
      no_match);
}

}  // namespace flowclass
