// internal/dpdk_dataplane_impl.h — what the files of the DPDK dataplane share:
// DpdkDataplane::Impl, the PMD's counter block and its mailboxes.
//
// Private to dataplane/dpdk: only its .cc files include this header (the
// public API is dpdk_dataplane.h, which names no DPDK type).  The files:
//   eal.cc      EAL arguments, rte_eal_init / cleanup, DpdkError
//   ports.cc    Create (options, lcores, ports, mbuf pool, PMD setup),
//               Start / Stop, ~Impl, the port accessors
//   pmd.cc      the PMD loop (PmdMain, PmdLoop): the only per-packet code
//   publish.cc  rule batches and their publication to the PMDs (RulePublisher)
//   mailbox.cc  the control thread's side of the mailboxes: Stats snapshots,
//               Trace, run-time settings (Apply), GetConfig
//   acl_builder.cc  pipeline.kind acl: the builder thread (acl_builder.h)
//
// Threads
// -------
// * Control thread(s): every public DpdkDataplane method.  ApplyBatch(es),
//   DeleteAll, ApplySettings, ListRules, GetRule and Trace hold
//   Impl::apply_mu; snapshot and trace requests hold Impl::snap_mu.
// * PMD thread i (an EAL worker lcore): Impl::PmdLoop(pmds[i]) only.  It
//   writes its own PmdCounterBlock, rx-queue counter lines, mailbox answers
//   and knobs ack, and reads Impl::knobs / knobs_version, the publisher and
//   the read-only port tables.  It takes no lock on the fast path (snap_mu
//   once, at exit), allocates nothing and logs nothing.
// * Everything in Impl not named above is written during Create (before any
//   PMD runs) or under apply_mu, and read-only for the PMDs once Start()
//   launched them.
#ifndef FLOWCLASS_DATAPLANE_DPDK_INTERNAL_DPDK_DATAPLANE_IMPL_H_
#define FLOWCLASS_DATAPLANE_DPDK_INTERNAL_DPDK_DATAPLANE_IMPL_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dataplane/acl/acl_classifier.h"
#include "dataplane/acl/acl_pipeline.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/dpdk/rule_publisher.h"
#include "dataplane/pipeline.h"
#include "dataplane/pmd_counters.h"
#include "dataplane/runtime_settings.h"

struct rte_mempool;

namespace flowclass {
namespace dpdk_internal {

// Single-writer counter: the owning PMD adds with a relaxed load + store
// (compiles to a plain add; no lock prefix), readers load relaxed.
using Counter = std::atomic<uint64_t>;
inline void Bump(Counter& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline uint64_t Read(const Counter& c) {
  return c.load(std::memory_order_relaxed);
}

// Layout: the loop's counters first, then the pipeline mirror, then the
// per-port arrays; the block is 64-byte aligned so two PMDs never write the
// same cache line.
struct alignas(64) PmdCounterBlock {
  // The PMD loop's counters: loop[i] holds kPmdLoopCounters[i] (Bump them
  // through At()); Stats() reads them back through the same table.
  std::array<Counter, kNumPmdLoopCounters> loop{};
  // Mirror of the pipeline's PmdStats (plain fields owned by the PMD),
  // refreshed after every busy iteration: pipeline[i] holds kPmdCounters[i].
  std::array<Counter, kNumPmdCounters> pipeline{};
  std::array<Counter, kMaxDataplanePorts> port_tx{};
  std::array<Counter, kMaxDataplanePorts> port_tx_dropped{};
};

// The PMD stores the pipeline's counters into the mirror and Stats() reads
// them back, both through the counter table, so the two cannot disagree.
inline void PublishPipelineCounters(const PmdStats& s, PmdCounterBlock& c) {
#pragma GCC unroll 32
  for (size_t i = 0; i < kNumPmdCounters; ++i)
    c.pipeline[i].store(s.*kPmdCounters[i].field, std::memory_order_relaxed);
}
inline void ReadPipelineCounters(const PmdCounterBlock& c, PmdStats* s) {
  for (size_t i = 0; i < kNumPmdCounters; ++i) s->*kPmdCounters[i].field = Read(c.pipeline[i]);
}

// The loop counter `id` of the block (a constant index: the cost of a member).
inline Counter& At(PmdCounterBlock& c, PmdLoopCounter id) {
  return c.loop[PmdLoopCounterIndex(id)];
}
inline void ReadLoopCounters(const PmdCounterBlock& c, PmdLoopStats* s) {
  for (size_t i = 0; i < kNumPmdLoopCounters; ++i)
    s->*kPmdLoopCounters[i].field = Read(c.loop[i]);
}

// Per-rx-queue packet counters, 8 to a cache line, written by the owning PMD
// only (queue i is line i / 8, slot i % 8).
struct alignas(64) CounterLine {
  std::array<Counter, 8> c{};
};
static_assert(sizeof(CounterLine) == 64);

// The pipeline snapshot service.  The snapshot (cache occupancy, CD state,
// subtables) can only be taken on the PMD that owns the pipeline, so the
// control thread asks for one and the PMD answers at its next quiescent point
// (top of an iteration, between bursts):
//   control: under Impl::snap_mu, req += 1; wait until done == req (or final).
//   PMD:     if req != served: snap = Snapshot(); done.store(req, release).
//   PMD at exit (once, under snap_mu): snap = Snapshot(); final = true.
// `snap` is written by the PMD only while the control thread waits for it
// (or holds snap_mu) and read by the control thread only after acquiring
// done == req or final, so the two never touch it at the same time.  The
// PMD's cost when nobody asks: one relaxed load per iteration of a line that
// only changes once per request.  When asked: one Snapshot() (O(EMC + SMC +
// CD entries) walk plus the subtable list allocation), i.e. once per scrape,
// never per packet.
//
// The same handshake carries Trace requests: the control thread sets
// `want_trace` and `trace_key` before it bumps req (release; the PMD's
// acquire load of req makes them visible), and the PMD answers with
// Pipeline::Trace(trace_key) into `trace` instead of a snapshot.  And the
// steps of a megaflow dump (DumpMegaflows): with `want_dump` the PMD runs one
// Pipeline::DumpMegaflows step (dump_filter from dump_cursor, at most
// kDumpVisitPerStep megaflows visited, at most dump.size() copied into the
// entries the control thread sized) and answers dump_n and the new cursor:
// bounded work per iteration, no allocation on the PMD.
struct alignas(64) SnapshotMailbox {
  std::atomic<uint64_t> req{0};
  std::atomic<uint64_t> done{0};
  std::atomic<bool> live{false};   // the PMD loop is running
  std::atomic<bool> final{false};  // snap holds the PMD's last state
  PipelineSnapshot snap;
  bool want_trace = false;
  FlowKey trace_key;
  PipelineTrace trace;
  bool want_dump = false;
  MegaflowFilter dump_filter;
  uint32_t dump_cursor = 0;          // in: where to go on; out: where to go on next
  std::vector<MegaflowEntry> dump;   // sized by the control thread (kDumpPage)
  uint32_t dump_n = 0;               // entries of `dump` this step filled
};
// A dump step visits at most this many megaflows and copies at most
// kDumpPage of them.
constexpr uint32_t kDumpVisitPerStep = 4096;
constexpr uint32_t kDumpPage = 1024;

// Run-time pipeline settings (ApplySettings of "pipeline.*" / "dpcls.*").
// Same handshake as the snapshot mailbox, the other way round: the control
// thread (holding apply_mu) writes Impl::knobs, bumps Impl::knobs_version
// (release) and waits until every live PMD has stored that version in its
// `ack`; a PMD applies `knobs` to its Pipeline at the top of an iteration
// when it sees a new version (acquire).  The writer never writes `knobs`
// before every live PMD has acknowledged the previous version (Apply checks,
// also after a request that timed out), so the two never touch it at once.
// One version carries every setting of one request: a PMD takes them all in
// one iteration.
struct alignas(64) KnobsMailbox {
  std::atomic<uint64_t> ack{0};
  // Test hook (DpdkDataplane::StallPmdForTesting): while true the PMD stops
  // at the end of its iteration, holding its rule table, and passes no
  // quiescent point (it still leaves when the dataplane stops).  Read once
  // per iteration, relaxed: a line the PMD reads anyway.
  std::atomic<bool> stall_for_testing{false};
  std::atomic<bool> stalled_for_testing{false};  // the PMD is in the stall
};
// How long ApplySettings waits for every PMD to take new pipeline settings.
constexpr auto kKnobsWait = std::chrono::seconds(2);

// How long Stats() waits for a PMD to answer a snapshot request.
constexpr auto kSnapshotWait = std::chrono::milliseconds(200);

struct RxQueue {
  uint16_t eth_port;
  uint16_t queue;
  uint32_t number;  // in_port for the parser
};

class AclBuilder;

struct PortState {
  PortOptions opts;
  uint16_t eth_port = 0;
  uint64_t rss_hf = 0;  // RSS hash functions configured (0: no RSS)
  bool probed_by_us = false;  // detach on destruction
  bool started = false;
};

// An INTERNAL status "<what>: <rte_strerror(|err|)>" (err: a negative or
// positive errno value from a DPDK call).
absl::Status DpdkError(absl::string_view what, int err);

}  // namespace dpdk_internal

// The dataplane's state.  Which thread touches which member: see the field
// comments and the Threads section above.
struct DpdkDataplane::Impl {
  using CounterLine = dpdk_internal::CounterLine;
  using KnobsMailbox = dpdk_internal::KnobsMailbox;
  using PmdCounterBlock = dpdk_internal::PmdCounterBlock;
  using PortState = dpdk_internal::PortState;
  using RxQueue = dpdk_internal::RxQueue;
  using SnapshotMailbox = dpdk_internal::SnapshotMailbox;

  DpdkDataplaneOptions opts;
  std::vector<PortState> ports;
  // Rule port number -> index in `ports` (-1: none).  Read-only after Create.
  std::vector<int8_t> port_index_by_number;
  rte_mempool* pool = nullptr;
  std::mutex apply_mu;  // serialises ApplyBatch (control plane only)
  // The one rule table (written under apply_mu): the control thread applies
  // batches to it in place while the PMDs look up at the generation they
  // installed (RuleTable's concurrent readers), so a rule is inserted once.
  // Each publication is a view of it at a generation.
  std::unique_ptr<RuleTable> table;
  std::unique_ptr<RulePublisher> publisher;
  // Run-time settings as GetConfig reports them: written under apply_mu.
  RuntimeSettings settings;
  // What the PMDs apply to their pipelines (see KnobsMailbox): written under
  // apply_mu, from `settings`.
  RuntimeSettings knobs;
  // Read by every PMD every iteration: a line of its own, away from the
  // mutexes the control thread takes on every scrape.
  alignas(64) std::atomic<uint64_t> knobs_version{0};
  mutable std::mutex snap_mu;  // metrics: one snapshot request at a time

  // ---- publication deadline (see Publish) ----
  // How long Publish waits for every PMD (opts.publish_timeout_ms).
  std::chrono::milliseconds publish_timeout{5000};
  // Written under apply_mu, read by Heartbeat() from any thread.
  std::atomic<uint64_t> published_generation{0};
  std::atomic<uint64_t> publish_timeouts{0};
  // owed_generation while grace_owed, else 0 (for Heartbeat()).
  std::atomic<uint64_t> owed_generation_seen{0};
  // Under apply_mu.  A publication timed out: the PMD `owed_reader` had not
  // installed generation `owed_generation` in time, so the grace period it
  // would have ended is still owed.  Until that PMD reports the generation,
  // nothing retired is freed and no deleted rule is unlinked (RuleTable),
  // the views and tables it may still read are kept here, and every batch
  // fails at once with UNAVAILABLE (SettleOwedGrace) without being applied.
  bool grace_owed = false;
  int owed_reader = -1;
  uint64_t owed_generation = 0;
  std::chrono::steady_clock::time_point owed_since;
  std::vector<std::unique_ptr<PublishedTable>> owed_views;
  std::vector<std::unique_ptr<RuleTable>> owed_tables;
  // pipeline.kind acl: classifiers a lagging PMD may still run.
  std::vector<std::unique_ptr<AclClassifier>> owed_classifiers;

  // pipeline.kind acl (opts.kind): the builder (acl_builder.h), made by
  // Create; null for megaflow.  ~Impl destroys it (joins its thread) before
  // anything else.
  std::unique_ptr<dpdk_internal::AclBuilder> acl_builder;
  bool acl() const { return opts.kind == PipelineKind::kAcl; }

  struct Pmd {
    int index = 0;
    int lcore = 0;
    std::vector<RxQueue> rxq;
    std::unique_ptr<Pipeline> pipeline;        // megaflow
    std::unique_ptr<AclPipeline> acl_pipeline;  // acl
    std::unique_ptr<PmdCounterBlock> counters;
    std::unique_ptr<CounterLine[]> rxq_counters;  // metrics: one per rxq
    std::unique_ptr<SnapshotMailbox> mailbox;     // metrics: snapshot service
    std::unique_ptr<KnobsMailbox> knobs_box;      // run-time pipeline settings
    Impl* dp = nullptr;
    bool launched = false;
  };
  std::vector<Pmd> pmds;

  // Run-time tunables read by the PMDs every iteration.
  std::atomic<int> tx_retries{4};
  std::atomic<uint32_t> idle_sleep_us{0};
  std::atomic<bool> stop{false};
  bool started = false;
  bool stopped = false;

  ~Impl();
  static int PmdMain(void* arg);
  void TakeSnapshot(const Pmd& pmd, PmdCounters* p) const;  // metrics
  // Under snap_mu: `prepare` fills the request into the mailbox once the
  // PMD answered every earlier one.
  bool AskPmd(const Pmd& pmd, absl::FunctionRef<void(SnapshotMailbox&)> prepare) const;
  // Applies a checked request: pmd.* at once, the pipeline settings
  // published to the PMDs together (one version), waiting until each live
  // PMD runs with them.  Nothing changes when a PMD has not taken the
  // previous version yet.
  absl::Status Apply(const RuntimeSettingsUpdate& update);
  void PmdLoop(Pmd& pmd);
  template <bool kAcl>
  void PmdLoopOf(Pmd& pmd);
  // Under apply_mu: publishes the table at its generation, made from the
  // published `cur` by batches that changed `changes` (null: anything may
  // have changed, each PMD rechecks every megaflow), and waits for every PMD
  // to install it.  Then no PMD reads an older generation, nor memory the
  // table retired before: the table frees that and unlinks deleted rules.
  // `fresh`, if given, is a new table that replaces the old one (DeleteAll),
  // freed once no PMD reads it.
  //
  // Waits at most `publish_timeout`: then the publication stays (PMDs that
  // reach a quiescent point install it, the lagging one too once it
  // resumes), nothing is freed (the grace period is owed, see grace_owed)
  // and the result is DEADLINE_EXCEEDED naming the PMD and its lcore.
  absl::Status Publish(const PublishedTable* cur, RuleChangeSet* changes,
                       std::unique_ptr<RuleTable> fresh = nullptr);
  // Under apply_mu, before a batch is applied: OK when no grace period is
  // owed or the lagging PMD has caught up (then the owed one ends here:
  // retired memory, deleted rules, old views and tables are freed);
  // UNAVAILABLE naming the PMD while it is still behind.
  absl::Status SettleOwedGrace();
  // pipeline.kind acl: ApplyBatchesNotifying after its checks, holding
  // apply_mu in `lock` (released while it waits for the build).
  std::vector<absl::StatusOr<BatchResult>> ApplyAclLocked(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided,
      std::unique_lock<std::mutex> lock);
  // "pmd 1 (lcore 2)".
  std::string PmdName(int index) const;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPDK_INTERNAL_DPDK_DATAPLANE_IMPL_H_
