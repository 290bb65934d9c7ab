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
// Cost gating (AccountCosted; AclPipeline): a hit rate above 1 in
// kMinHitInv says the EMC pays only where a hit is much cheaper than the
// lookup it saves.  In front of rte_acl it is not (a ClassBench 1K set: ~60
// cycles a packet in rte_acl, and a probe of an EMC entry that is not in L1
// costs about as much): on acl1_1k with 10,000 flows the EMC hit 46% of the
// packets and the pipeline ran at 0.6x its rate without the EMC; the break-even was
// ~78% hits there and ~30% on fw1_10k (rte_acl 3x dearer).  So an owner that
// reports each burst's cycles gets a third band: below 1 in kMinHitInv hits
// the EMC is skipped as above, at (kMinHitInv - 1) in kMinHitInv or more it is
// looked up by every burst, and in between the window's cycles a packet
// decide: the bursts that looked it up against those that did not (while the
// EMC is being skipped, the sampled bursts against the others; while it is
// looked up, one burst in kControlEvery skips it as a control).  Owners that
// call Account (the megaflow pipeline) never see the third band.
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
  // Cost gating, while the EMC is looked up: 1 burst in kControlEvery does
  // not (a control).  Where the EMC pays, a control costs what the EMC would
  // have saved (fw1_10k with 4,000 flows: the EMC doubles the rate, and 1
  // control in 8 bursts cost 14%), so fewer controls than samples.
  static constexpr uint32_t kControlEvery = 16;

  // Whether the current burst looks the EMC up (and inserts into it).
  bool probe() const { return probe_; }
  // True while the EMC is being skipped (sampled 1 burst in kSampleEvery).
  bool skipping() const { return skip_; }

  // After each burst: `probed` keys looked the EMC up (0 when !probe()),
  // `hits` of them hit.  Decides probe() for the next burst.
  void Account(uint64_t probed, uint64_t hits) { AccountBurst(probed, hits); }
  // The same, with cost gating (see above): the burst had `packets` packets
  // and took `cycles` (the owner's whole burst, EMC and lookup; any clock,
  // as long as it is always the same one).  Only read while measuring(): an
  // owner need not time the other bursts (pass 0).
  void AccountCosted(uint64_t packets, uint64_t probed, uint64_t hits, uint64_t cycles) {
    costed_ = true;
    if (!measure_) {
    } else if (probe_) {
      probe_cycles_ += cycles;
      probe_packets_ += packets;
    } else {
      skip_cycles_ += cycles;
      skip_packets_ += packets;
    }
    AccountBurst(probed, hits);
  }
  // True while a window's cycles decide (cost gating, hits in the middle
  // band at the end of the last window): some bursts of the window look the
  // EMC up and some do not, and AccountCosted reads their cycles.
  bool measuring() const { return measure_; }

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
  void AccountBurst(uint64_t probed, uint64_t hits) {
    window_probed_ += probed;
    window_hits_ += hits;
    if (++window_bursts_ == kWindow) {
      Decide();
      window_bursts_ = 0;
      window_probed_ = 0;
      window_hits_ = 0;
      probe_cycles_ = probe_packets_ = skip_cycles_ = skip_packets_ = 0;
    }
    // Skipping: 1 burst in kSampleEvery looks the EMC up; measuring while
    // looking it up: 1 in kControlEvery does not.
    probe_ = skip_ ? window_bursts_ % kSampleEvery == 0
                   : !(measure_ && window_bursts_ % kControlEvery == kControlEvery - 1);
  }
  // At the end of a window: skip the EMC in the next one?
  void Decide() {
    // Decide on the window's probed keys (none: keep probing sparsely).
    const bool few = window_probed_ > 0 && window_hits_ * kMinHitInv < window_probed_;
    if (!costed_) {
      skip_ = few;
      return;
    }
    const bool many = window_hits_ * kMinHitInv >= window_probed_ * (kMinHitInv - 1);
    measure_ = !few && !many;
    if (!measure_) {
      skip_ = few;
    } else if (probe_packets_ > 0 && skip_packets_ > 0) {
      // Skip unless a packet of the bursts that looked the EMC up cost
      // less than one of those that did not (the products compare the
      // per-packet means without a division).
      skip_ = probe_cycles_ * skip_packets_ >= skip_cycles_ * probe_packets_;
    }
    // Else into the middle band, no cycles yet: keep looking the EMC up, or
    // skipping it, and measure (a window of every burst probing an EMC that
    // hits 1 in 6 cost acl1_1k more than the sampling saved).
  }

  uint32_t window_bursts_ = 0;
  uint64_t window_probed_ = 0;
  uint64_t window_hits_ = 0;
  bool skip_ = false;
  bool probe_ = true;
  uint64_t warm_base_ = 0;  // the owner's insert count when the EMC was emptied
  // Cost gating (AccountCosted): this window's cycles and packets of the
  // bursts that looked the EMC up and of those that did not.
  bool costed_ = false;
  bool measure_ = false;
  uint64_t probe_cycles_ = 0;
  uint64_t probe_packets_ = 0;
  uint64_t skip_cycles_ = 0;
  uint64_t skip_packets_ = 0;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_CACHE_EMC_GATE_H_
