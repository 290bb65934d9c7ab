// acl_pipeline.cc — EMC in front of the ACL classifier.
#include "dataplane/acl/acl_pipeline.h"

#include <rte_cycles.h>

#include <algorithm>
#include <bit>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace flowclass {

absl::StatusOr<std::unique_ptr<AclPipeline>> AclPipeline::Create(AclPipelineConfig config) {
  if (config.emc && (config.emc_entries < 2 || !std::has_single_bit(config.emc_entries))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "emc_entries: %d is not a power of two of at least 2", config.emc_entries));
  }
  return std::unique_ptr<AclPipeline>(new AclPipeline(config));
}

AclPipeline::AclPipeline(AclPipelineConfig config) : config_(config) {
  insert_countdown_ = NextInsertCountdown();
  if (config_.emc) {
    emc_.resize(config_.emc_entries);
    mask_ = config_.emc_entries - 1;
    shift_ = std::countr_zero(config_.emc_entries);
  }
}

void AclPipeline::SetClassifier(const AclClassifier* classifier) {
  classifier_ = classifier;
  // Every EMC entry of the old classifier is now a miss.
  if (++generation_ == 0) {
    for (EmcEntry& e : emc_) e.generation = 0;
    generation_ = 1;
  }
  emc_gate_.Emptied(stats_.emc_inserts);  // and it warms again
  ++stats_.generation;
}

uint32_t AclPipeline::NextInsertCountdown() {
  // Uniform in [1, 2 * inv - 1]: a mean of inv misses per insert (1: every
  // miss).  xorshift64.
  const uint64_t inv = config_.emc_insert_inv_prob;
  if (inv <= 1) return 1;
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  return 1 + static_cast<uint32_t>(rng_ % (2 * inv - 1));
}

uint32_t AclPipeline::Slot1(uint64_t hash) const {
  const uint32_t s0 = static_cast<uint32_t>(hash) & mask_;
  const uint32_t s1 = static_cast<uint32_t>(hash >> shift_) & mask_;
  return s1 == s0 ? s0 ^ 1 : s1;
}

bool AclPipeline::ProcessBurst(const FlowKey* keys, int n, Verdict* verdicts) {
  if (n <= 0) return true;
  // res[i]: key i's classifier result (0: no rule; r: verdict_table()[r]).
  uint32_t res[kMaxBurst];
  int miss_index[kMaxBurst];
  int misses = 0;
  uint64_t emc_matched = 0;  // EMC hits whose result is a rule
  stats_.packets += static_cast<uint64_t>(n);
  // The gate weighs the EMC by what the bursts cost (EmcGate::AccountCosted):
  // in front of rte_acl, a hit saves less than in front of the megaflow
  // classifier, so a hit rate alone does not say the EMC pays.
  // Only while it is measuring (hits in its middle band) are bursts timed:
  // two TSC reads (~20 cycles each here) are 10% of a burst the EMC answers.
  const bool adaptive = config_.emc && config_.emc_adaptive;
  const bool timed = adaptive && emc_gate_.measuring();
  const uint64_t t0 = timed ? rte_rdtsc() : 0;
  const bool probe = config_.emc && (!config_.emc_adaptive || emc_gate_.probe());
  // While the gate skips the EMC for too few hits, a sampled burst looks up
  // only its first kSampleKeys keys (and inserts only their misses): enough
  // to see the hit rate turn, at a quarter of the probes, which on traffic
  // of new flows are the EMC's whole cost (two cold slots a key).  While it
  // measures (hits in the middle band), whole bursts: a quarter of a burst
  // probed changes its cycles too little to be told from noise (acl1_1k at
  // 19% hits flipped to probing every other window).
  const int probe_n = !probe ? 0
                      : (adaptive && emc_gate_.skipping() && !emc_gate_.measuring())
                          ? std::min(n, kSampleKeys)
                          : n;
  uint32_t insert_step = emc_gate_.InsertWeight(stats_.emc_inserts, config_.emc_entries);
  // A sampled miss stands for the unsampled keys of its burst too while the
  // EMC warms (InsertWeight > 1), so a cold EMC still fills as fast as an
  // ungated one.
  if (insert_step > 1 && probe_n > 0 && probe_n < n)
    insert_step *= static_cast<uint32_t>(n / probe_n);
  if (config_.emc) stats_.emc_skipped += static_cast<uint64_t>(n - probe_n);
  int probed_misses = 0;
  if (probe) {
    // Every key's slots are fetched before any is compared, so the cache
    // misses of a burst overlap.  The second slot too only while the gate
    // skips or measures (below 7 hits in 8, where most keys read it): on
    // few flows the first slot answers and the second's prefetch was 20%
    // of a burst (acl1_1k, 100 flows).
    // (Two loops: GCC kept the test inside one, ~5 instructions a packet.)
    if (adaptive && (emc_gate_.skipping() || emc_gate_.measuring())) {
      for (int i = 0; i < probe_n; ++i) {
        const uint64_t h = keys[i].hash;
        __builtin_prefetch(&emc_[static_cast<uint32_t>(h) & mask_]);
        __builtin_prefetch(&emc_[Slot1(h)]);
      }
    } else {
      for (int i = 0; i < probe_n; ++i)
        __builtin_prefetch(&emc_[static_cast<uint32_t>(keys[i].hash) & mask_]);
    }
    for (int i = 0; i < probe_n; ++i) {
      const uint64_t h = keys[i].hash;
      const EmcEntry& a = emc_[static_cast<uint32_t>(h) & mask_];
      if (a.generation == generation_ && a.key.hash == h && a.key.SameFlow(keys[i])) {
        res[i] = a.result;
        emc_matched += a.result != 0;
        continue;
      }
      const EmcEntry& b = emc_[Slot1(h)];
      if (b.generation == generation_ && b.key.hash == h && b.key.SameFlow(keys[i])) {
        res[i] = b.result;
        emc_matched += b.result != 0;
        continue;
      }
      miss_index[misses++] = i;
    }
    probed_misses = misses;
    stats_.emc_hits += static_cast<uint64_t>(probe_n - misses);
    for (int i = probe_n; i < n; ++i) miss_index[misses++] = i;  // not sampled
  } else {
    misses = n;
  }
  if (misses > 0) {
    // The burst's misses through the ACL.  A burst that did not look the
    // EMC up (or missed it entirely) is classified in place: key i's result
    // is res[i], no gather or scatter.
    const bool all = misses == n;
    uint32_t found_buf[kMaxBurst];
    uint32_t* found = all ? res : found_buf;
    if (classifier_ == nullptr) {
      for (int j = 0; j < misses; ++j) found[j] = 0;
    } else {
      // Images, data pointers and the context in one pass (acl_classifier.cc).
      classifier_->ClassifyKeysToResults(keys, all ? nullptr : miss_index, misses, found);
    }
    // Inserts: only from bursts that looked the EMC up (while it is being
    // skipped, the sampled ones, each miss counting for kSampleEvery), one
    // miss in emc_insert_inv_prob on average: a countdown of misses, redrawn
    // at each insert, so a miss that is not inserted costs a subtraction.
    // (miss_index is ascending: the misses of looked-up keys come first.)
    if (probe && config_.emc_insert_inv_prob != 0) {
      for (int j = 0; j < probed_misses; ++j) {
        if (insert_countdown_ > insert_step) {
          insert_countdown_ -= insert_step;
          continue;
        }
        insert_countdown_ = NextInsertCountdown();
        // Slot 0 unless it holds a live entry and slot 1 does not.
        const int i = all ? j : miss_index[j];
        const uint64_t h = keys[i].hash;
        EmcEntry* a = &emc_[static_cast<uint32_t>(h) & mask_];
        EmcEntry* b = &emc_[Slot1(h)];
        EmcEntry* e = (a->generation == generation_ && b->generation != generation_) ? b : a;
        e->key = keys[i];
        e->result = found[j];
        e->generation = generation_;
        ++stats_.emc_inserts;
      }
    }
    if (!all) {
      for (int j = 0; j < misses; ++j) res[miss_index[j]] = found[j];
    }
  }
  // Verdicts from the classifier's 16-byte table, not from the rules.  (No
  // classifier: every result is 0, and kNoRule[0] is Verdict{}.)
  // Alike: the verdicts' classes (verdict_class: same action, both matched
  // or neither) all equal the first's, one 4-byte compare a packet.
  static const Verdict kNoRule[1] = {};
  static const uint32_t kNoRuleClass[1] = {0};
  const Verdict* table = kNoRule;
  const uint32_t* cls = kNoRuleClass;
  if (classifier_ != nullptr) {
    table = classifier_->verdict_table();
    cls = classifier_->verdict_class();
  }
  // The ACL's hits are counted here too (results that are a rule, less the
  // EMC's), not in a pass of their own.
  const uint32_t c0 = cls[res[0]];
  uint32_t differ = 0;
  uint64_t matched = 0;
  for (int i = 0; i < n; ++i) {
    verdicts[i] = table[res[i]];
    differ |= cls[res[i]] ^ c0;
    matched += res[i] != 0;
  }
  const uint64_t acl_hits = matched - emc_matched;
  stats_.acl_hits += acl_hits;
  stats_.acl_misses += static_cast<uint64_t>(misses) - acl_hits;
  if (adaptive) {
    emc_gate_.AccountCosted(static_cast<uint64_t>(n), static_cast<uint64_t>(probe_n),
                            static_cast<uint64_t>(probe_n - probed_misses),
                            timed ? rte_rdtsc() - t0 : 0);
  }
  return differ == 0;
}

std::string AclPipeline::FormatStats() const {
  return absl::StrFormat(
      "  packets: %d\n  emc_hits: %d\n  acl_hits: %d\n  acl_misses: %d\n  emc_inserts: %d\n"
      "  emc_skipped: %d\n  generation: %d\n",
      stats_.packets, stats_.emc_hits, stats_.acl_hits, stats_.acl_misses, stats_.emc_inserts,
      stats_.emc_skipped, stats_.generation);
}

}  // namespace flowclass
