// emc_gate.h — whether a burst looks the EMC up: skip it while it does not
// pay.  Shared by both pipelines (Pipeline, AclPipeline).
//
// On traffic of few long flows the EMC answers almost every packet; on many
// flows (a scan, a ClassBench trace, 262k flows over K megaflow masks) nearly
// every probe is a miss, a cache line or two for nothing, and every insert
// evicts a live entry.  So every kWindow bursts the gate compares the hits of
// the bursts that looked the EMC up with the keys they looked up: below 1 in
// kMinHitInv, only every kSampleEvery-th burst looks it up (and inserts its
// misses; while the EMC warms -- fewer inserts since it was emptied than it
// has entries -- kSampleEvery times as likely (InsertWeight), since the
// burst stands for the ones that were not sampled: a slowly warming EMC, one
// insert in 100 misses, is not shut out by its first cold windows, and a
// full one that still does not pay costs no extra inserts) until a window is
// above again.  When the traffic turns
// to few flows, the sampled bursts fill the EMC, hit, and the gate opens.  (OVS gets the same effect by hand: emc-insert-inv-prob=0
// turns its EMC lookups off.)
//
// Per-packet code: two counters and a compare per burst; no allocation.
#ifndef FLOWCLASS_DATAPLANE_CACHE_EMC_GATE_H_
#define FLOWCLASS_DATAPLANE_CACHE_EMC_GATE_H_

#include <cstdint>

namespace flowclass {

class EmcGate {
 public:
  static constexpr uint32_t kWindow = 64;
  static constexpr uint32_t kMinHitInv = 8;
  static constexpr uint32_t kSampleEvery = 8;

  // Whether the current burst looks the EMC up (and inserts into it).
  bool probe() const { return probe_; }
  // True while the EMC is being skipped (sampled 1 burst in kSampleEvery).
  bool skipping() const { return skip_; }

  // After each burst: `probed` keys looked the EMC up (0 when !probe()),
  // `hits` of them hit.  Decides probe() for the next burst.
  void Account(uint64_t probed, uint64_t hits) {
    window_probed_ += probed;
    window_hits_ += hits;
    if (++window_bursts_ == kWindow) {
      // Decide on the window's probed keys (none: keep probing sparsely).
      skip_ = window_probed_ > 0 && window_hits_ * kMinHitInv < window_probed_;
      window_bursts_ = 0;
      window_probed_ = 0;
      window_hits_ = 0;
    }
    probe_ = !skip_ || window_bursts_ % kSampleEvery == 0;
  }

  // The EMC was emptied (flushed, invalidated, turned on): it warms again
  // from `inserts`, the owner's running count of EMC inserts.
  void Emptied(uint64_t inserts) { warm_base_ = inserts; }

  // How many misses each miss of this burst counts for when the owner
  // decides its 1-in-N inserts: kSampleEvery while the gate skips and the
  // EMC is still warming (fewer inserts since it was emptied than it has
  // entries), since a sampled burst stands for the ones not sampled; else 1.
  uint32_t InsertWeight(uint64_t inserts, uint32_t entries) const {
    return skip_ && inserts - warm_base_ < entries ? kSampleEvery : 1;
  }

  // Back to probing every burst (the EMC turned on again), warming from
  // `inserts`.
  void Reset(uint64_t inserts) {
    *this = EmcGate();
    warm_base_ = inserts;
  }

 private:
  uint32_t window_bursts_ = 0;
  uint64_t window_probed_ = 0;
  uint64_t window_hits_ = 0;
  bool skip_ = false;
  bool probe_ = true;
  uint64_t warm_base_ = 0;  // the owner's insert count when the EMC was emptied
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_CACHE_EMC_GATE_H_
