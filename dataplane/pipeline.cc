#include "dataplane/pipeline.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/quote.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace flowclass {
namespace {

inline uint64_t Cycles() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

// Check the clock every this many bursts (a clock read per burst of one
// packet would cost more than the classification).
constexpr uint32_t kBurstsPerClockCheck = 16;
// Dead EMC entries cleared per burst (OVS sweeps slowly too).
constexpr int kEmcSweepPerBurst = 2;

uint64_t SteadyMs(std::chrono::steady_clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
}

// The TSC rate is measured over at least this long (ms rounding < 1%).
constexpr uint64_t kMinCalibrationMs = 100;

Flow InPortExact() {
  Flow m;
  m.Set(Field::kInPort, 0xffffffffu);
  return m;
}

// What the PMD does with a packet depends on its action and on whether a
// rule matched (the no-match count), not on which rule: a burst of many
// rules with one action (a forwarding table's usual shape) still goes out as
// it came.
inline bool SameTreatment(const Verdict& a, const Verdict& b) {
  return a.action == b.action && (a.rule_id == 0) == (b.rule_id == 0);
}

}  // namespace

std::string_view UpcallLimitActionName(UpcallLimitAction a) {
  return a == UpcallLimitAction::kClassify ? "classify" : "drop";
}

absl::StatusOr<UpcallLimitAction> ParseUpcallLimitAction(std::string_view s) {
  if (s == "drop") return UpcallLimitAction::kDrop;
  if (s == "classify") return UpcallLimitAction::kClassify;
  return absl::InvalidArgumentError(
      absl::StrCat("upcall_limit_action: ",
                   QuoteForMessage(absl::string_view(s.data(), s.size()), '"'),
                   " is not drop or classify"));
}

absl::Status ValidatePipelineConfig(const PipelineConfig& c) {
  if (absl::Status s = ValidateEmcConfig(c.emc_config); !s.ok()) return s;
  if (absl::Status s = ValidateSmcConfig(c.smc_config); !s.ok()) return s;
  if (absl::Status s = ValidateCdConfig(c.cd_table); !s.ok()) return s;
  if (absl::Status s = ValidateCdControllerConfig(c.cd); !s.ok()) return s;
  if (c.smc != CacheMode::kOff && c.smc != CacheMode::kOn && c.smc != CacheMode::kAuto)
    return absl::InvalidArgumentError(
        absl::StrCat("smc: unknown value ", static_cast<int>(c.smc)));
  if (absl::Status s = ValidateCacheCostControllerConfig(c.smc_controller); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat("smc: ", s.message()));
  if (c.max_megaflows == 0) {
    return absl::InvalidArgumentError("max_megaflows: must be at least 1");
  }
  if (c.max_subtables_per_port == 0) {
    return absl::InvalidArgumentError("max_subtables_per_port: must be at least 1");
  }
  if (c.upcall_rate > kMaxUpcallRate) {
    return absl::InvalidArgumentError(
        absl::StrCat("upcall_rate: must be at most ", kMaxUpcallRate));
  }
  if (c.upcall_burst == 0 || c.upcall_burst > kMaxUpcallBurst) {
    return absl::InvalidArgumentError(
        absl::StrCat("upcall_burst: must be in 1..", kMaxUpcallBurst));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(
    const PipelineConfig& config) {
  if (absl::Status s = ValidatePipelineConfig(config); !s.ok()) return s;
  std::unique_ptr<Pipeline> p(new Pipeline(config));
  absl::StatusOr<std::unique_ptr<MegaflowClassifier>> dpcls =
      MegaflowClassifier::Create(&p->pool_, config.dpcls);
  if (!dpcls.ok()) return dpcls.status();
  p->dpcls_ = *std::move(dpcls);
  p->dpcls_->set_megaflow_limit(config.max_megaflows);
  p->dpcls_->set_max_subtables_per_port(config.max_subtables_per_port);
  return p;
}

Pipeline::Pipeline(const PipelineConfig& config)
    : config_(config),
      pool_(config.max_megaflows),
      emc_(&pool_, config.emc_config),
      smc_(std::make_unique<Smc>(&pool_, config.smc_config)),
      cd_(std::make_unique<CuckooDistributor>(config.cd_table)),
      cd_ctl_(config.cd),
      smc_ctl_(config.smc, config.smc_controller),
      cd_group_size_(config.dpcls.max_subtables),
      last_periodic_(std::chrono::steady_clock::now()) {
  anchor_tsc_ = rate_tsc_ = Cycles();
  anchor_ms_ = rate_ms_ = now_ms_ = SteadyMs(last_periodic_);
  last_smc_window_ = last_periodic_;
  upcall_limited_.verdict = UpcallLimitedVerdict();
}

Pipeline::~Pipeline() {
  // The classifier names pool megaflows; release them before the pool goes.
  if (dpcls_) dpcls_->Clear();
}

void Pipeline::SetRuleTable(const RuleTable* table,
                            const RuleChangeSet* changes, uint64_t generation) {
  const uint64_t t0 = Cycles();
  DrainRetiredHits();  // before ForgetDeletedRules drops deleted rules' hits
  table_ = table;
  table_generation_ = generation;
  ++stats_.revalidations;
  if (config_.revalidate && table_ != nullptr) {
    Revalidate(changes);
  } else {
    stats_.megaflows_revalidated_out += dpcls_->megaflow_count();
    for (uint32_t k = 0; k < pool_.live(); ++k) {
      RetireHits(pool_.Get(pool_.LiveIndex(k)));
    }
    dpcls_->Clear();
    emc_.Flush();
    emc_gate_.Emptied(emc_.stats().inserts);
    smc_->Flush();
    cd_->Flush();
  }
  // Either way (revalidated or flushed), retired hits of deleted rules go.
  if (table_ != nullptr) ForgetDeletedRules(changes);
  stats_.revalidation_cycles += Cycles() - t0;
}

// A megaflow (value, mask, verdict) stays valid under the new table iff the
// new table gives `value` the same verdict with a megaflow mask wc inside
// `mask`: every key K it covers agrees with `value` on mask, hence on wc, and
// RuleTable guarantees that keys agreeing on wc get the same rule.  When wc
// is inside `mask` but the verdict changed (a replaced action, a new rule
// above the old one with the same reach), the megaflow is kept with the new
// verdict, as OVS's revalidators modify a datapath flow's actions: the EMC,
// SMC and CD entries that point at it stay good, so its packets neither upcall
// nor miss the EMC until it takes the flow back (1 in emc_insert_inv_prob).
void Pipeline::Revalidate(const RuleChangeSet* changes) {
  uint64_t removed = 0;
  // Megaflows match in_port exactly.  When every changed match names its
  // in_port (none wildcards it), a megaflow on a port the change set does
  // not name is provably unchanged: any rule it could name or overlap, old
  // or new, matches its port, and removed rules' old matches are in the set
  // too (MakeRuleChangeSet).  For a few such ports one compare per megaflow
  // replaces MayAffect's hash lookups (a controller's batch is usually
  // about one port, and most megaflows are on others).
  constexpr int kMaxPortFilter = 8;
  uint32_t ports[kMaxPortFilter];
  int n_ports = -1;  // no filter
  if (changes != nullptr && changes->any_in_port.empty()) {
    // A change on ports this PMD has no megaflow on (the usual case while a
    // controller loads another port's rules) costs no walk of the megaflows,
    // each visit a cache miss.
    bool any_megaflow = false;  // on a named port
    for (const auto& [port, matches] : changes->by_in_port) {
      if (dpcls_->HasPort(port)) {
        any_megaflow = true;
        break;
      }
    }
    if (!any_megaflow) return;
    if (changes->by_in_port.size() <= kMaxPortFilter) {
      n_ports = 0;
      for (const auto& [port, matches] : changes->by_in_port) ports[n_ports++] = port;
    }
  }
  // Backwards: Remove() frees the megaflow, which moves the last live entry
  // (already visited) into its place.
  for (uint32_t k = pool_.live(); k-- > 0;) {
    Megaflow& mf = pool_.Get(pool_.LiveIndex(k));
    if (n_ports >= 0) {
      const uint32_t port = static_cast<uint32_t>(mf.value.Get(Field::kInPort));
      bool named = false;
      for (int i = 0; i < n_ports; ++i) named |= ports[i] == port;
      if (!named) continue;
    }
    if (changes && !changes->MayAffect(mf.value, mf.mask, mf.verdict.rule_id)) {
      continue;  // see RuleChangeSet: provably unchanged
    }
    ++stats_.megaflows_rechecked;
    Flow wc;
    const Rule* r = table_->Lookup(mf.value, &wc, nullptr, table_generation_);
    const Verdict v = r ? Verdict{r->id, r->action} : Verdict{};
    bool covers = true;  // wc inside the megaflow's mask
    for (int w = 0; covers && w < kFlowWords; ++w) {
      covers = (wc.w[w] & ~mf.mask.w[w]) == 0;
    }
    if (!covers) {
      RetireHits(mf);
      dpcls_->Remove(&mf);  // frees it: EMC entries die by version
      ++removed;
      continue;
    }
    // A rule deleted and inserted again under its id is a new rule: its
    // hits start again, even when the verdict reads the same (the old
    // rule's retired hits go in ForgetDeletedRules).
    if (v != mf.verdict ||
        (changes != nullptr && changes->deleted_ids.contains(mf.verdict.rule_id))) {
      RetireHits(mf);
      mf.hits = 0;
      mf.verdict = v;
      ++stats_.megaflows_reverdicted;
    }
  }
  stats_.megaflows_revalidated_out += removed;
  // A removal may destroy a subtable whose id is later reused: CD entries
  // naming it would then suggest the wrong subtable.  Harmless (a probe that
  // misses is a false hit) but flushing keeps the false-hit counter honest.
  // Without removals no subtable died, and the 4 MiB flush is skipped.
  // SMC entries are verified on every hit.
  if (removed) cd_->Flush();
}

// Retired hits of a rule that is gone would grow without bound and be
// inherited by a later rule that reuses the id.  With a change set only its
// deleted ids can be gone (replaced ones stay: same rule id, hits kept; a
// rule that is gone was deleted, by id or by cookie; one deleted and
// inserted again is a new rule).  Without one, every retired id is checked
// against the new table with Find, which is the writer's: the dataplane
// installs a table without a change set only when no writer runs (a new
// empty table after DeleteAll, or a PMD's first table, when it has no
// retired hits).
void Pipeline::ForgetDeletedRules(const RuleChangeSet* changes) {
  if (changes != nullptr) {
    for (uint64_t id : changes->deleted_ids) retired_rule_hits_.erase(id);
    return;
  }
  if (retired_rule_hits_.empty()) return;  // a PMD's first table: no Find
  absl::erase_if(retired_rule_hits_,
                 [&](const auto& kv) { return table_->Find(kv.first) == nullptr; });
}

bool Pipeline::RetireHitsNoAlloc(const Megaflow& mf) {
  if (mf.verdict.rule_id == 0 || mf.hits == 0) return true;
  if (auto it = retired_rule_hits_.find(mf.verdict.rule_id); it != retired_rule_hits_.end()) {
    it->second += mf.hits;
    return true;
  }
  // One entry per rule: linear probing from the id's hash, at most half
  // the slots used, so a probe ends at the rule's entry or an empty slot.
  static_assert(std::has_single_bit(kPendingRetiredSlots));
  const uint64_t id = mf.verdict.rule_id;
  for (uint64_t h = id * 0x9e3779b97f4a7c15ull >> 32;; ++h) {
    std::pair<uint64_t, uint64_t>& e = pending_retired_[h & (kPendingRetiredSlots - 1)];
    if (e.first == id) {
      e.second += mf.hits;
      return true;
    }
    if (e.first == 0) {
      if (n_pending_retired_ == kPendingRetired) return false;
      ++n_pending_retired_;
      e = {id, mf.hits};
      return true;
    }
  }
}

void Pipeline::DrainRetiredHits() {
  if (n_pending_retired_ == 0) return;
  for (auto& e : pending_retired_) {
    if (e.first != 0) retired_rule_hits_[e.first] += e.second;
    e = {0, 0};
  }
  n_pending_retired_ = 0;
}

void Pipeline::RetireHits(const Megaflow& mf) {
  if (mf.verdict.rule_id != 0 && mf.hits != 0) {
    retired_rule_hits_[mf.verdict.rule_id] += mf.hits;
  }
}

void Pipeline::SetEmcInsertInvProb(uint32_t inv_prob) {
  config_.emc_config.insert_inv_prob = inv_prob;
  emc_.set_insert_inv_prob(inv_prob);
}

void Pipeline::SetEmcEnabled(bool on) {
  if (config_.emc && !on) emc_.Flush();
  if (!config_.emc && on) emc_gate_.Reset(emc_.stats().inserts);
  config_.emc = on;
}

void Pipeline::SetSmcMode(CacheMode mode) {
  if (mode == config_.smc) return;  // keeps the auto controller's schedule
  config_.smc = mode;
  smc_ctl_.SetMode(mode);
  // Turned off for good: the 8 MB go cold anyway.  (The auto rule's own
  // switches keep the entries: they are verified on every hit, and a probe
  // that turns the SMC on again finds them warm.)
  if (mode == CacheMode::kOff) smc_->Flush();
}

void Pipeline::RunSmcWindow() {
  const auto now = std::chrono::steady_clock::now();
  last_smc_window_ = now;
  const uint64_t cycles = stats_.cycles - stats_.upcall_cycles;
  const uint64_t dc = cycles - smc_window_cycles_, dp = stats_.packets - smc_window_packets_;
  smc_window_cycles_ = cycles;
  smc_window_packets_ = stats_.packets;
  // While the CD controller is on its way to a switch the cost is about to
  // move: a probe then would compare the SMC with a CD state that goes.
  smc_ctl_.Update(dc, dp, /*defer=*/cd_ctl_.streak() > 0);
}

void Pipeline::SetCdMode(CdMode mode) {
  if (mode == config_.cd.mode) return;  // keeps the auto controller's streak
  config_.cd.mode = mode;
  if (cd_ctl_.SetMode(mode) == CdTransition::kTurnedOn) cd_->Flush();
}

void Pipeline::RunPeriodic() {
  dpcls_->Rank();
  if (cd_ctl_.Update(interval_) == CdTransition::kTurnedOn) cd_->Flush();
  interval_ = CdIntervalStats{};
}

void Pipeline::SetMaxMegaflows(uint32_t n) {
  n = std::clamp<uint32_t>(n, 1, pool_.capacity());
  config_.max_megaflows = n;
  dpcls_->set_megaflow_limit(n);
}

void Pipeline::SetMaxSubtablesPerPort(uint32_t n) {
  n = std::max<uint32_t>(n, 1);
  config_.max_subtables_per_port = n;
  dpcls_->set_max_subtables_per_port(n);
}

void Pipeline::SetUpcallLimit(uint32_t rate, uint32_t burst, UpcallLimitAction action) {
  config_.upcall_rate = std::min(rate, kMaxUpcallRate);
  config_.upcall_burst = std::clamp<uint32_t>(burst, 1, kMaxUpcallBurst);
  config_.upcall_limit_action = action;
  const uint64_t cap = uint64_t{config_.upcall_burst} * 1000;
  for (UpcallBucket& b : upcall_buckets_) b.milli_tokens = std::min(b.milli_tokens, cap);
}

// A token bucket in thousandths of an upcall, refilled on the coarse clock:
// a rate under 1000/s still adds its share every millisecond.
Pipeline::UpcallBucket& Pipeline::BucketOf(uint32_t in_port) {
  const uint32_t h = (in_port * 0x9e3779b1u) >> 26;  // 6 bits
  static_assert(kUpcallBuckets == 64);
  for (uint32_t k = 0; k < kUpcallBuckets; ++k) {
    UpcallBucket& c = upcall_buckets_[(h + k) % kUpcallBuckets];
    if (!c.used) {
      c.used = true;
      c.port = in_port;
      return c;
    }
    if (c.port == in_port) return c;
  }
  return upcall_buckets_[kUpcallBuckets];  // shared: all taken
}

uint32_t Pipeline::TakeUpcallTokens(uint32_t in_port, uint32_t want) {
  const uint64_t rate = config_.upcall_rate;
  if (rate == 0) return want;
  UpcallBucket* b = &BucketOf(in_port);
  const uint64_t cap = uint64_t{config_.upcall_burst} * 1000;
  if (!b->full) {  // a new port's bucket starts full
    b->full = true;
    b->milli_tokens = cap;
    b->last_ms = now_ms_;
  }
  if (now_ms_ > b->last_ms) {
    // cap <= 1e10 and rate <= 1e7: the product fits in 64 bits.
    const uint64_t dt = std::min<uint64_t>(now_ms_ - b->last_ms, cap);
    b->milli_tokens = std::min(cap, b->milli_tokens + dt * rate);
    b->last_ms = now_ms_;
  }
  const uint32_t grant =
      static_cast<uint32_t>(std::min<uint64_t>(want, b->milli_tokens / 1000));
  b->milli_tokens -= uint64_t{grant} * 1000;
  return grant;
}

// TakeUpcallTokens(in_port, 1) == 0 at `now`, without taking or claiming
// anything: a port without a bucket yet would get a full one (or the shared
// one, when all are taken).
bool Pipeline::UpcallWouldBeLimited(uint32_t in_port, uint64_t now) const {
  const uint64_t rate = config_.upcall_rate;
  if (rate == 0) return false;
  const uint32_t h = (in_port * 0x9e3779b1u) >> 26;
  const UpcallBucket* b = &upcall_buckets_[kUpcallBuckets];
  for (uint32_t k = 0; k < kUpcallBuckets; ++k) {
    const UpcallBucket& c = upcall_buckets_[(h + k) % kUpcallBuckets];
    if (!c.used) return false;  // a new bucket, full
    if (c.port == in_port) {
      b = &c;
      break;
    }
  }
  if (!b->full) return false;
  const uint64_t cap = uint64_t{config_.upcall_burst} * 1000;
  uint64_t milli = b->milli_tokens;
  if (now > b->last_ms)
    milli = std::min(cap, milli + std::min<uint64_t>(now - b->last_ms, cap) * rate);
  return milli < 1000;
}

// A direct-mapped table of the masks kept out lately, by (in_port, mask)
// hash: a mask counts as popular once it has missed kRareMaskMinMisses times
// since its entry's window started (kRareMaskWindowMs); a colliding mask
// takes the entry over.  Attack masks that miss once each never get there.
bool Pipeline::MaskIsPopular(uint32_t in_port, const Flow& mask) {
  const uint64_t h = HashWords(mask.w.data(), kFlowWords, in_port);
  MaskCandidate& c = mask_candidates_[h % kMaskCandidates];
  if (c.hash != h || now_ms_ >= c.window_start_ms + kRareMaskWindowMs) {
    c.hash = h;
    c.window_start_ms = now_ms_;
    c.misses = 0;
  }
  return ++c.misses >= kRareMaskMinMisses;
}

void Pipeline::SetClock(const PipelineClock* clock) {
  clock_ = clock;
  now_ms_ = clock_ ? clock_->NowMs() : SteadyMs(CalibrateClock(Cycles()));
}

std::chrono::steady_clock::time_point Pipeline::CalibrateClock(uint64_t tsc) {
  const auto now = std::chrono::steady_clock::now();
  const uint64_t ms = SteadyMs(now);
  if (ms >= rate_ms_ + kMinCalibrationMs && tsc > rate_tsc_) {
    ms_per_tsc_q32_ = static_cast<uint64_t>(static_cast<double>(ms - rate_ms_) * 4294967296.0 /
                                            static_cast<double>(tsc - rate_tsc_));
    rate_ms_ = ms;
    rate_tsc_ = tsc;
  }
  anchor_ms_ = ms;
  anchor_tsc_ = tsc;
  return now;
}

uint64_t Pipeline::ReadNowMs(uint64_t tsc) const {
  if (clock_ != nullptr) return clock_->NowMs();
  uint64_t now = anchor_ms_;
  // One 64x64->128 multiply: no overflow whatever the time since the anchor
  // (a few bursts, or an idle spell of days).
  if (tsc > anchor_tsc_)
    now += static_cast<uint64_t>(
        (static_cast<unsigned __int128>(tsc - anchor_tsc_) * ms_per_tsc_q32_) >> 32);
  return std::max(now, now_ms_);  // monotonic across re-anchoring
}

// Backwards from the cursor, like Revalidate: Remove() moves the last live
// megaflow (visited already this round, or installed since) into the hole.
uint32_t Pipeline::ExpireSome(uint32_t budget) {
  const uint64_t idle = config_.megaflow_max_idle_ms;
  if (idle == 0) return 0;
  budget = std::min(budget, pool_.live());
  uint32_t removed = 0;
  for (uint32_t b = 0; b < budget; ++b) {
    const uint32_t live = pool_.live();
    if (live == 0) break;
    if (expiry_cursor_ == 0 || expiry_cursor_ > live) expiry_cursor_ = live;
    Megaflow& mf = pool_.Get(pool_.LiveIndex(--expiry_cursor_));
    if (mf.last_used_ms + idle > now_ms_) continue;
    if (!RetireHitsNoAlloc(mf)) continue;  // until DrainRetiredHits
    dpcls_->Remove(&mf);  // frees it: caches above miss (see SetRuleTable)
    ++removed;
  }
  stats_.megaflows_expired += removed;
  return removed;
}

uint32_t Pipeline::Housekeep() {
  const uint64_t tsc = Cycles();
  if (++housekeeps_since_clock_ >= kBurstsPerClockCheck) {
    housekeeps_since_clock_ = 0;
    CalibrateClock(tsc);
  }
  now_ms_ = ReadNowMs(tsc);
  return MaybeExpire();
}

// At most one budget per clock tick: a busy PMD runs many bursts per
// millisecond and an idle one spins fast; a packet arriving mid-sweep waits
// for it.
uint32_t Pipeline::MaybeExpire() {
  if (now_ms_ == last_sweep_ms_) return 0;
  last_sweep_ms_ = now_ms_;
  return ExpireSome(kExpiryPerTick);
}

void Pipeline::MaybePeriodic(uint64_t tsc) {
  if (++bursts_since_clock_ < kBurstsPerClockCheck) return;
  bursts_since_clock_ = 0;
  const auto now = CalibrateClock(tsc);
  if (config_.smc == CacheMode::kAuto && config_.megaflows && config_.smc_window_ms != 0 &&
      now - last_smc_window_ >= std::chrono::milliseconds(config_.smc_window_ms))
    RunSmcWindow();
  if (now - last_periodic_ >=
      std::chrono::milliseconds(config_.ranking_interval_ms)) {
    last_periodic_ = now;
    RunPeriodic();
  }
}

bool Pipeline::ProcessBurst(const FlowKey* keys, int n, Verdict* verdicts,
                            bool emc_prefetched) {
  if (n <= 0) return false;
  if (!config_.megaflows) return SlowPathBurst(keys, n, verdicts);
  const uint64_t t0 = Cycles();
  now_ms_ = ReadNowMs(t0);
  const uint64_t now = now_ms_;
  Megaflow* mf[kMaxBurst];
  uint32_t todo = BurstMap(n);
  uint64_t no_match = 0;
  // Every packet treated as *ref so far (SameTreatment): compared once per
  // run of hits on one megaflow, and once per packet below the EMC.
  const Verdict* ref = nullptr;
  bool uniform = true;

  emc_burst_ = EmcThisBurst();
  emc_insert_boost_ = emc_gate_.InsertWeight(emc_.stats().inserts, emc_.entries());
  uint32_t emc_hits = 0;
  if (emc_burst_) {
    const Megaflow* found[kMaxBurst];
    const uint32_t hits = emc_.LookupBurst(keys, todo, found, emc_prefetched);
    // A burst is usually a few flows: add a run of hits on one megaflow at
    // once instead of chaining 32 read-modify-writes of one counter.
    Megaflow* run_mf = nullptr;
    uint64_t run = 0;
    for (uint32_t m = hits; m; m &= m - 1) {
      const int i = std::countr_zero(m);
      Megaflow* const f = pool_.Mutable(found[i]);
      if (f != run_mf) {
        if (run_mf != nullptr) {
          run_mf->hits += run;
          run_mf->last_used_ms = now;
          uniform &= SameTreatment(f->verdict, *ref);
        } else {
          ref = &f->verdict;
        }
        run_mf = f;
        run = 0;
      }
      ++run;
      verdicts[i] = f->verdict;
      no_match += f->verdict.rule_id == 0;
    }
    if (run_mf != nullptr) {
      run_mf->hits += run;
      run_mf->last_used_ms = now;
    }
    emc_hits = static_cast<uint32_t>(std::popcount(hits));
    stats_.emc_hits += emc_hits;
    todo &= ~hits;
    emc_.SweepSome(kEmcSweepPerBurst);
  }
  if (config_.emc && config_.emc_adaptive)
    emc_gate_.Account(emc_burst_ ? static_cast<uint64_t>(n) : 0, emc_hits);

  // The rest, one in_port at a time (a burst from one rx queue has one).
  const uint32_t rest = todo;
  while (todo) {
    const uint32_t port =
        static_cast<uint32_t>(keys[std::countr_zero(todo)].Get(Field::kInPort));
    uint32_t same = 0;
    for (uint32_t m = todo; m; m &= m - 1) {
      const int i = std::countr_zero(m);
      if (keys[i].Get(Field::kInPort) == port) same |= 1u << i;
    }
    ProcessPort(port, keys, same, mf);
    todo &= ~same;
  }

  for (uint32_t m = rest; m; m &= m - 1) {
    const int i = std::countr_zero(m);
    verdicts[i] = mf[i]->verdict;
    no_match += verdicts[i].rule_id == 0;
    if (ref == nullptr) ref = &mf[i]->verdict;
    uniform &= SameTreatment(verdicts[i], *ref);
  }
  // Rate-limited drops carry rule id 0 but are not "no rule".
  no_match -= burst_limit_drops_;
  burst_limit_drops_ = 0;
  stats_.no_match += no_match;
  stats_.packets += static_cast<uint64_t>(n);
  MaybePeriodic(t0);
  MaybeExpire();
  stats_.cycles += Cycles() - t0;
  return uniform;
}

bool Pipeline::SlowPathBurst(const FlowKey* keys, int n, Verdict* verdicts) {
  const uint64_t t0 = Cycles();
  uint64_t no_match = 0;
  bool uniform = true;
  for (int i = 0; i < n; ++i) {
    Flow wc;  // the megaflow mask, unused: nothing is installed
    const Rule* r =
        table_ ? table_->Lookup(keys[i], &wc, nullptr, table_generation_) : nullptr;
    verdicts[i] = r ? Verdict{r->id, r->action} : Verdict{};
    no_match += verdicts[i].rule_id == 0;
    uniform &= SameTreatment(verdicts[i], verdicts[0]);
  }
  const uint64_t t1 = Cycles();
  stats_.upcall_ok += static_cast<uint64_t>(n);
  stats_.upcall_cycles += t1 - t0;
  stats_.no_match += no_match;
  stats_.packets += static_cast<uint64_t>(n);
  MaybePeriodic(t0);
  stats_.cycles += Cycles() - t0;
  return uniform;
}

// A key found below the EMC goes into the caches above the layer that
// found it: the CD (when it did not suggest the subtable), SMC, EMC.
void Pipeline::CacheAbove(const FlowKey& key, const Megaflow& mf, bool into_cd) {
  if (into_cd) cd_->Insert(key, mf.subtable);
  if (smc_ctl_.enabled()) smc_->Insert(key, mf.index);
  if (emc_burst_) emc_.MaybeInsert(key, mf.index, emc_insert_boost_);
}

// Megaflow-classifier hits (through the CD or the ranked search): counts
// first-rank hits for the CD controller and caches the keys above.
void Pipeline::CacheMegaflowHits(const FlowKey* keys, uint32_t hits,
                                 Megaflow* const* mf, bool into_cd) {
  for (uint32_t m = hits; m; m &= m - 1) {
    const int i = std::countr_zero(m);
    if (dpcls_->RankOf(mf[i]->subtable) == 0) ++interval_.first_rank_hits;
    mf[i]->last_used_ms = now_ms_;
    CacheAbove(keys[i], *mf[i], into_cd);
  }
}

PipelineTrace Pipeline::Trace(const FlowKey& key) const {
  PipelineTrace t;
  const Megaflow* mf = nullptr;
  if (!config_.megaflows) {
    t.layer = "upcall";
    return t;
  }
  if (config_.emc) {
    const uint32_t idx = emc_.Lookup(key);
    if (idx != kInvalidIndex) {
      t.layer = "emc";
      mf = &pool_.Get(idx);
    }
  }
  if (!mf && smc_ctl_.enabled()) {
    const uint32_t idx = smc_->Peek(key);
    if (idx != kInvalidIndex) {
      t.layer = "smc";
      mf = &pool_.Get(idx);
    }
  }
  if (!mf && cd_ctl_.enabled()) {
    uint16_t sub = 0;
    if (cd_->Lookup(key, &sub) && sub < cd_group_size_) {
      t.subtables_visited.push_back(sub);
      if ((mf = dpcls_->TraceSubtable(sub, key)) != nullptr) t.layer = "cd";
    }
  }
  if (!mf && (mf = dpcls_->Trace(key, &t.subtables_visited)) != nullptr)
    t.layer = "megaflow";
  if (!mf) {
    // The clock as the next burst would read it (the bucket refills on it).
    t.layer = UpcallWouldBeLimited(static_cast<uint32_t>(key.Get(Field::kInPort)),
                                   ReadNowMs(Cycles()))
                  ? "upcall_limited"
                  : "upcall";
    return t;
  }
  t.has_megaflow = true;
  t.megaflow_value = mf->value;
  t.megaflow_mask = mf->mask;
  t.verdict = mf->verdict;
  return t;
}

void Pipeline::ProcessPort(uint32_t in_port, const FlowKey* keys,
                           uint32_t todo, Megaflow** mf) {
  if (smc_ctl_.enabled()) {
    uint32_t idx[kMaxBurst];
    const uint32_t hits = smc_->LookupBurst(keys, todo, idx);
    for (uint32_t m = hits; m; m &= m - 1) {
      const int i = std::countr_zero(m);
      mf[i] = &pool_.Get(idx[i]);
      ++mf[i]->hits;
      mf[i]->last_used_ms = now_ms_;
      if (emc_burst_) emc_.MaybeInsert(keys[i], idx[i], emc_insert_boost_);
    }
    stats_.smc_hits += std::popcount(hits);
    todo &= ~hits;
  }
  if (!todo) return;

  interval_.dpcls_packets += std::popcount(todo);
  const bool cd_on = cd_ctl_.enabled();
  if (cd_on) {
    uint16_t sub[kMaxBurst];
    const uint32_t suggested = cd_->LookupBurst(keys, todo, sub);
    // Each key probes only its suggested subtable, all keys in one staged
    // pass (their buckets and megaflows are fetched in parallel).
    const uint32_t found =
        dpcls_->LookupSuggested(keys, suggested, sub, mf, &interval_.cd_hit_rank_sum);
    // Suggestions that did not verify (a stale entry, a subtable gone, an
    // id no subtable can have) are false hits and wasted probes.
    const int false_hits = std::popcount(suggested & ~found);
    stats_.cd_false_hits += false_hits;
    interval_.cd_false_hits += false_hits;
    interval_.subtable_lookups += false_hits;
    const int n_found = std::popcount(found);
    stats_.cd_hits += n_found;
    stats_.megaflow_hits += n_found;
    stats_.subtable_lookups += n_found;
    interval_.cd_hits += n_found;
    interval_.megaflow_hits += n_found;
    interval_.subtable_lookups += n_found;
    CacheMegaflowHits(keys, found, mf, /*into_cd=*/false);
    todo &= ~found;
    if (!todo) return;
  }

  uint64_t lookups = 0;
  const uint32_t hits = dpcls_->LookupBurst(in_port, keys, todo, mf, &lookups);
  const int n_hits = std::popcount(hits);
  stats_.megaflow_hits += n_hits;
  stats_.subtable_lookups += lookups;
  interval_.megaflow_hits += n_hits;
  interval_.subtable_lookups += lookups;
  CacheMegaflowHits(keys, hits, mf, /*into_cd=*/cd_on);
  todo &= ~hits;

  // Upcalls.  A packet whose megaflow cannot be installed still gets the
  // table's verdict, through a per-burst scratch megaflow.
  if (!todo) return;
  const uint64_t t0 = Cycles();
  const Flow in_port_exact = InPortExact();
  // The port's upcall budget: the first misses get it, the rest are limited.
  uint32_t limited = 0;
  if (config_.upcall_rate != 0) {
    uint32_t grant = TakeUpcallTokens(in_port, static_cast<uint32_t>(std::popcount(todo)));
    uint32_t allowed = 0;
    for (uint32_t m = todo; m && grant; m &= m - 1, --grant) allowed |= m & (0u - m);
    limited = todo & ~allowed;
    todo = allowed;
  }
  if (limited) {
    const int n_limited = std::popcount(limited);
    stats_.upcall_failed += n_limited;
    stats_.upcalls_rate_limited += n_limited;
    if (config_.upcall_limit_action == UpcallLimitAction::kDrop) {
      stats_.upcall_limit_drops += n_limited;
      burst_limit_drops_ += n_limited;
      for (uint32_t m = limited; m; m &= m - 1) mf[std::countr_zero(m)] = &upcall_limited_;
    } else {
      for (uint32_t m = limited; m; m &= m - 1) {
        const int i = std::countr_zero(m);
        Flow wc;  // unused: nothing is installed
        const Rule* r =
            table_ ? table_->Lookup(keys[i], &wc, nullptr, table_generation_) : nullptr;
        uncached_[i].verdict = r ? Verdict{r->id, r->action} : Verdict{};
        mf[i] = &uncached_[i];
      }
    }
  }
  const uint32_t rare_limit =
      config_.rare_mask_subtables ? config_.rare_mask_subtables : 0xffffffffu;
  for (uint32_t m = todo; m; m &= m - 1) {
    const int i = std::countr_zero(m);
    const Flow key = keys[i].ToFlow();
    Flow wc;
    const Rule* r = table_ ? table_->Lookup(key, &wc, nullptr, table_generation_) : nullptr;
    const Verdict v = r ? Verdict{r->id, r->action} : Verdict{};
    wc |= in_port_exact;
    MegaflowClassifier::InstallError why;
    Megaflow* installed = dpcls_->Install(key & wc, wc, v, &why, rare_limit);
    if (installed == nullptr && why == MegaflowClassifier::InstallError::kNewSubtableLimit) {
      UpcallBucket& b = BucketOf(in_port);
      if (MaskIsPopular(in_port, wc) &&
          (b.rare_install_ms == 0 || now_ms_ + 1 >= b.rare_install_ms + kRareMaskInstallIntervalMs)) {
        installed = dpcls_->Install(key & wc, wc, v, &why);
        if (installed) b.rare_install_ms = now_ms_ + 1;
      } else {
        ++stats_.upcalls_rare_mask;
      }
    }
    if (installed) {
      ++stats_.upcall_ok;
      ++installed->hits;
      installed->last_used_ms = now_ms_;
      mf[i] = installed;
      CacheAbove(keys[i], *installed, /*into_cd=*/cd_on);
    } else {
      ++stats_.upcall_failed;
      stats_.upcalls_megaflow_cap += why == MegaflowClassifier::InstallError::kMegaflowLimit;
      stats_.upcalls_subtable_cap += why == MegaflowClassifier::InstallError::kSubtablesPerPort;
      uncached_[i].verdict = v;
      mf[i] = &uncached_[i];
    }
  }
  stats_.upcall_cycles += Cycles() - t0;
}

absl::Status Pipeline::SetLookupPriority(std::string_view name,
                                        int priority) {
  absl::Status s = dpcls_->SetLookupPriority(name, priority);
  if (s.ok()) config_.dpcls.lookup = dpcls_->lookup_priorities();
  return s;
}

void Pipeline::SetLookupPriorities(const LookupPriorities& priorities) {
  if (priorities == config_.dpcls.lookup) return;  // nothing to re-select
  dpcls_->SetLookupPriorities(priorities);
  config_.dpcls.lookup = dpcls_->lookup_priorities();
}

PipelineSnapshot Pipeline::Snapshot() const {
  PipelineSnapshot s;
  s.stats = stats_;
  s.cd_enabled = cd_ctl_.enabled();
  s.cd_transitions = cd_ctl_.transitions();
  s.smc_enabled = smc_ctl_.chosen();
  s.smc_probing = smc_ctl_.probing();
  s.smc_switches = smc_ctl_.switches();
  s.smc_probes = smc_ctl_.probes();
  s.emc_skipping = config_.emc && emc_gate_.skipping();
  s.emc_occupancy = emc_.Occupancy();
  s.emc_entries = emc_.entries();
  s.smc_occupancy = smc_->Held();  // O(1): a walk would stall the PMD for ms
  s.smc_entries = smc_->entries();
  s.cd_occupancy = cd_->Occupancy();
  s.cd_entries = cd_->capacity();
  s.megaflows = dpcls_->megaflow_count();
  s.subtables = dpcls_->subtable_count();
  s.subtable = dpcls_->Subtables();
  absl::flat_hash_map<uint64_t, uint64_t> hits = retired_rule_hits_;
  for (const auto& e : pending_retired_)
    if (e.first != 0) hits[e.first] += e.second;
  for (uint32_t k = 0; k < pool_.live(); ++k) {
    const Megaflow& mf = pool_.Get(pool_.LiveIndex(k));
    if (mf.verdict.rule_id != 0 && mf.hits != 0) hits[mf.verdict.rule_id] += mf.hits;
  }
  s.rule_hits.assign(hits.begin(), hits.end());
  std::sort(s.rule_hits.begin(), s.rule_hits.end());
  return s;
}

std::string Pipeline::FormatStats(const PipelineSnapshot& s) {
  const PmdStats& st = s.stats;
  std::string out;
  for (const PmdCounterInfo& c : kPmdCounters) AppendPmdCounterLine(&out, c, st.*c.field);
  absl::StrAppendFormat(&out,
                        "  avg. subtable lookups per megaflow hit: %.2f\n"
                        "  avg cycles per packet: %.1f\n"
                        "  cd state: %s (transitions %d)\n"
                        "  smc state: %s%s (switches %d, probes %d)\n"
                        "  emc occupancy: %d/%d%s\n"
                        "  smc occupancy: %d/%d\n"
                        "  cd occupancy: %d/%d\n"
                        "  megaflows: %d in %d subtables\n",
                        st.AvgSubtableLookupsPerHit(), st.AvgCyclesPerPacket(),
                        s.cd_enabled ? "on" : "off", s.cd_transitions,
                        s.smc_enabled ? "on" : "off", s.smc_probing ? ", probing" : "",
                        s.smc_switches, s.smc_probes, s.emc_occupancy,
                        s.emc_entries, s.emc_skipping ? " (skipped: few hits)" : "",
                        s.smc_occupancy, s.smc_entries, s.cd_occupancy,
                        s.cd_entries, s.megaflows, s.subtables);
  for (const SubtableInfo& t : s.subtable) {
    absl::StrAppendFormat(&out,
                          "  subtable %d port %d rank %d megaflows %d hits %d "
                          "lookup %s mask %s\n",
                          t.id, t.in_port, t.rank, t.megaflows, t.hits,
                          t.lookup_fn, t.mask.ToString());
  }
  return out;
}

std::string Pipeline::DebugString() const {
  std::string out = FormatStats(Snapshot());
  absl::StrAppend(&out, emc_.DebugString(), "\n", smc_->DebugString(), "\n",
                  cd_->DebugString(), "\n", cd_ctl_.DebugString(), "\nsmc: ",
                  smc_ctl_.DebugString(), "\n",
                  dpcls_->DebugString());
  return out;
}

uint32_t Pipeline::DumpMegaflows(const MegaflowFilter& filter, uint32_t* cursor,
                                 uint32_t budget, MegaflowEntry* out, uint32_t cap) const {
  uint32_t c = std::min(*cursor, pool_.live());
  uint32_t n = 0;
  for (; c > 0 && budget > 0 && n < cap; --budget) {
    const Megaflow& mf = pool_.Get(pool_.LiveIndex(--c));
    if (filter.rule_id && mf.verdict.rule_id != *filter.rule_id) continue;
    if (filter.in_port && mf.value.Get(Field::kInPort) != *filter.in_port) continue;
    MegaflowEntry& e = out[n++];
    e.value = mf.value;
    e.mask = mf.mask;
    e.verdict = mf.verdict;
    e.packets = mf.hits;
    e.idle_ms = now_ms_ > mf.last_used_ms ? now_ms_ - mf.last_used_ms : 0;
    e.index = mf.index;
    e.version = mf.version;
    e.subtable = mf.subtable;
  }
  *cursor = c;
  return n;
}

}  // namespace flowclass
