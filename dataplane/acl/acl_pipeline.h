// acl_pipeline.h — the "acl" pipeline: EMC -> rte_acl_classify -> action.
//
// Contract
// --------
// The per-thread pipeline of `pipeline.kind: acl` (docs/acl-pipeline.md):
//
//   ProcessBurst(keys[0..n), n <= 32)
//     EMC   exact key -> result, 2 probes        if emc (and paying, see
//                                                emc_adaptive)
//     ACL   AclClassifier::ClassifyKeysToResults on the burst's misses
//     verdicts[i] = verdict_table()[result]: {rule id, action} of the
//           winner ({0, drop}: none)
//     one miss in emc_insert_inv_prob is inserted into the EMC (on average),
//     only by bursts that looked it up
//
// The EMC caches answers of one classifier: SetClassifier (a new rule set,
// a new AclClassifier) bumps the EMC's generation, which invalidates every
// entry at once (an entry of another generation is a miss and a free slot),
// so after it returns no answer of the old classifier survives.
//
// Threads: one pipeline per thread, like Pipeline.  ProcessBurst allocates
// nothing, locks nothing, logs nothing, throws nothing; the EMC is allocated
// by Create.  The classifier must outlive its use by the pipeline.
#ifndef FLOWCLASS_DATAPLANE_ACL_ACL_PIPELINE_H_
#define FLOWCLASS_DATAPLANE_ACL_ACL_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/acl/acl_classifier.h"
#include "dataplane/cache/emc_gate.h"
#include "dataplane/dpcls/megaflow.h"
#include "dataplane/flow/flow.h"

namespace flowclass {

struct AclPipelineConfig {
  bool emc = true;
  uint32_t emc_entries = 8192;       // power of two
  // One miss in emc_insert_inv_prob enters the EMC (on average: a random
  // countdown); 1: every miss; 0: none.
  uint32_t emc_insert_inv_prob = 100;
  // Skip the EMC while it does not pay (EmcGate, cache/emc_gate.h: below 1
  // hit in 8 keys over a window of 64 bursts, only 1 burst in 8 looks it up,
  // kSampleKeys of its keys, and inserts their misses, until a window is
  // above again, so a workload of few flows turns it back on; between 1 in 8
  // and 7 in 8 hits, the cycles a packet of the bursts that looked it up and
  // of those that did not decide, since in front of rte_acl a hit saves
  // little more than it costs).  false: every burst looks it up.
  bool emc_adaptive = true;
};

struct AclPipelineStats {
  uint64_t packets = 0;
  uint64_t emc_hits = 0;
  uint64_t acl_hits = 0;    // misses of the EMC the ACL matched to a rule
  uint64_t acl_misses = 0;  // ... and those no rule matches
  uint64_t emc_inserts = 0;
  // Packets that did not look the EMC up (adaptive): those of the bursts
  // that skipped it and those a sampled burst did not sample.
  uint64_t emc_skipped = 0;
  uint64_t generation = 0;  // SetClassifier calls
};

class AclPipeline {
 public:
  // INVALID_ARGUMENT naming the field (emc_entries not a power of two).
  static absl::StatusOr<std::unique_ptr<AclPipeline>> Create(AclPipelineConfig config);
  // Keys a sampled burst looks up while the EMC gate skips the EMC.
  static constexpr int kSampleKeys = 8;

  void SetClassifier(const AclClassifier* classifier);
  // Returns whether all n verdicts are alike: one action, and every packet
  // matched a rule or none did (Pipeline::ProcessBurst's answer).
  bool ProcessBurst(const FlowKey* keys, int n, Verdict* verdicts);

  const AclPipelineStats& stats() const { return stats_; }
  // Tests: the EMC's generation as if SetClassifier had been called that
  // often (g != 0), to reach its wrap without 2^32 calls.
  void SetEmcGenerationForTesting(uint32_t g) { generation_ = g; }
  const AclPipelineConfig& config() const { return config_; }
  // "  packets: ... emc_hits: ... acl_hits: ... acl_misses: ..." lines.
  std::string FormatStats() const;

 private:
  // The generation and the key's hash first: a probe's first compares
  // read the entry's first 16 bytes, which 96-byte entries keep in one
  // cache line (so a probe that misses, the common case on traffic of new
  // flows, touches one line a slot; the generation after the 88-byte key,
  // as it was, made it two).
  struct EmcEntry {
    uint32_t generation = 0;   // 0: empty
    uint32_t result = 0;       // the classifier's result (0: no rule matches)
    FlowKey key;
  };
  static_assert(sizeof(EmcEntry) == 96);
  explicit AclPipeline(AclPipelineConfig config);
  uint32_t Slot1(uint64_t hash) const;
  uint32_t NextInsertCountdown();

  AclPipelineConfig config_;
  const AclClassifier* classifier_ = nullptr;
  std::vector<EmcEntry> emc_;
  uint32_t mask_ = 0;
  int shift_ = 0;
  // The EMC's generation (never 0, the empty entry's).  When it wraps, every
  // entry is cleared (SetClassifier), so an entry of 2^32 classifiers ago
  // cannot answer.
  uint32_t generation_ = 1;
  uint64_t rng_ = 0x9e3779b97f4a7c15ULL;
  uint32_t insert_countdown_ = 1;  // misses until the next EMC insert
  EmcGate emc_gate_;  // emc_adaptive: whether a burst looks the EMC up
  AclPipelineStats stats_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_ACL_ACL_PIPELINE_H_
