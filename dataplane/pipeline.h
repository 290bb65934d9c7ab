// pipeline.h — one PMD's classification pipeline: keys in, verdicts out.
//
// Contract
// --------
// ProcessBurst(keys, n, verdicts) classifies up to kMaxBurst keys.  It is the
// per-packet path: it allocates nothing, takes no lock, logs nothing and
// throws nothing.  The same code serves the PMD threads and
// `flowclassctl replay`.
//
// Threads: a Pipeline belongs to one PMD thread.  SetRuleTable() is called by
// that same thread at a quiescent point (the dataplane hands it the newly
// published table); the table must stay alive and unmodified until the next
// SetRuleTable() call.
#ifndef FLOWCLASS_DATAPLANE_PIPELINE_H_
#define FLOWCLASS_DATAPLANE_PIPELINE_H_

#include <cstdint>
#include <string>

#include "dataplane/flow.h"
#include "dataplane/megaflow.h"
#include "dataplane/rule_table.h"

namespace flowclass {

// Counters named after `ovs-appctl dpif-netdev/pmd-stats-show`.  Plain
// uint64_t written by the owning thread only.
struct PmdStats {
  uint64_t packets = 0;           // packets received
  uint64_t emc_hits = 0;
  uint64_t smc_hits = 0;
  uint64_t megaflow_hits = 0;
  uint64_t subtable_lookups = 0;  // summed over megaflow hits
  uint64_t upcall_ok = 0;         // miss with success upcall
  uint64_t upcall_failed = 0;     // miss with failed upcall
  uint64_t no_match = 0;          // packets no rule matched (dropped)
  uint64_t cycles = 0;            // TSC cycles spent in ProcessBurst
  std::string ToString() const;
};

struct PipelineConfig {
  // Issue "Megaflow cache hierarchy" adds the caches; until then every
  // packet is classified by the RuleTable directly.
};

class Pipeline {
 public:
  explicit Pipeline(const PipelineConfig& config = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Installs the table to classify against.  May be nullptr (everything
  // misses).  Drops every cached result derived from the previous table.
  void SetRuleTable(const RuleTable* table);

  // keys[0..n) -> verdicts[0..n); 0 <= n <= kMaxBurst.  verdicts[n..] are
  // not written.
  void ProcessBurst(const FlowKey* keys, int n, Verdict* verdicts);

  const PmdStats& stats() const { return stats_; }

 private:
  PipelineConfig config_;
  const RuleTable* table_ = nullptr;
  PmdStats stats_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_PIPELINE_H_
