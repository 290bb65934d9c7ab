#include "dataplane/dpdk/dpdk_dataplane.h"

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_pause.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dataplane/dpdk/rule_publisher.h"
#include "dataplane/flow/packet_parser.h"

namespace flowclass {
namespace {

std::atomic<bool> g_eal_initialized{false};

// Single-writer counter: the owning PMD adds with a relaxed load + store
// (compiles to a plain add; no lock prefix), readers load relaxed.
using Counter = std::atomic<uint64_t>;
inline void Bump(Counter& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline uint64_t Read(const Counter& c) {
  return c.load(std::memory_order_relaxed);
}

// Layout: the scalar counters first, then the per-port arrays; the block is
// 64-byte aligned so two PMDs never write the same cache line.
struct alignas(64) PmdCounterBlock {
  Counter iterations{0}, rx{0}, tx{0}, tx_dropped{0}, rule_drops{0},
      no_match{0}, bad_port{0}, parse_errors{0}, busy_cycles{0},
      idle_cycles{0}, generation{0};
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

// ---- metrics ----
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
// Pipeline::Trace(trace_key) into `trace` instead of a snapshot.
struct alignas(64) SnapshotMailbox {
  std::atomic<uint64_t> req{0};
  std::atomic<uint64_t> done{0};
  std::atomic<bool> live{false};   // the PMD loop is running
  std::atomic<bool> final{false};  // snap holds the PMD's last state
  PipelineSnapshot snap;
  bool want_trace = false;
  FlowKey trace_key;
  PipelineTrace trace;
};

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
};
// How long ApplySettings waits for every PMD to take new pipeline settings.
constexpr auto kKnobsWait = std::chrono::seconds(2);

// How long Stats() waits for a PMD to answer a snapshot request.
constexpr auto kSnapshotWait = std::chrono::milliseconds(200);
// ---- end metrics ----

struct RxQueue {
  uint16_t eth_port;
  uint16_t queue;
  uint32_t number;  // in_port for the parser
};

struct PortState {
  PortOptions opts;
  uint16_t eth_port = 0;
  uint64_t rss_hf = 0;  // RSS hash functions configured (0: no RSS)
  bool probed_by_us = false;  // detach on destruction
  bool started = false;
};

absl::Status DpdkError(absl::string_view what, int err) {
  return absl::InternalError(
      absl::StrCat(what, ": ", rte_strerror(err < 0 ? -err : err)));
}

}  // namespace

static_assert(kMaxEalLcores == RTE_MAX_LCORE, "kMaxEalLcores must be DPDK's RTE_MAX_LCORE");

std::vector<std::string> BuildEalArgs(const EalOptions& o) {
  std::vector<std::string> a = {o.program};
  if (!o.lcore_map.empty()) {
    a.push_back("--lcores=" + o.lcore_map);
  } else {
    std::vector<int> lc = {o.main_lcore};
    for (int l : o.pmd_lcores)
      if (std::find(lc.begin(), lc.end(), l) == lc.end()) lc.push_back(l);
    a.push_back("-l");
    a.push_back(absl::StrJoin(lc, ","));
  }
  a.push_back(absl::StrCat("--main-lcore=", o.main_lcore));
  if (!o.hugepages) a.push_back("--no-huge");
  if (o.memory_mb > 0) {
    a.push_back("-m");
    a.push_back(absl::StrCat(o.memory_mb));
  }
  if (!o.file_prefix.empty()) a.push_back("--file-prefix=" + o.file_prefix);
  // Only configured PCI devices are probed: with none (and no -a / -b of
  // the user's own in extra_args), none at all, rather than every device
  // EAL can bind.
  // (The config allow-lists the PCI devices a vdev port names too, such as
  // net_bonding's slave=0000:3b:00.0.)
  bool user_picks_pci = false;
  for (const std::string& e : o.extra_args)
    for (const char* f : {"-a", "-b", "--allow", "--block"})
      user_picks_pci |= absl::StartsWith(e, f);
  if (!o.pci || (o.pci_allow.empty() && !user_picks_pci)) a.push_back("--no-pci");
  for (const std::string& p : o.pci_allow) {
    a.push_back("-a");
    a.push_back(p);
  }
  for (const std::string& v : o.vdevs) a.push_back("--vdev=" + v);
  if (!o.log_level.empty()) a.push_back("--log-level=" + o.log_level);
  for (const std::string& e : o.extra_args) a.push_back(e);
  return a;
}

absl::Status InitEal(const EalOptions& opts) {
  if (g_eal_initialized.load()) {
    return absl::FailedPreconditionError(
        "eal: already initialised in this process (DPDK allows it once)");
  }
  std::vector<std::string> args = BuildEalArgs(opts);
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (rc < 0) {
    // Some refusals leave rte_errno 0 ("Success"): e.g. another primary
    // process holding the file prefix.  EAL printed its reason on stderr.
    const std::string why =
        rte_errno != 0 ? rte_strerror(rte_errno)
                       : "EAL gave no error code; its own message is above (another running "
                         "process with this eal.file_prefix, an lcore the machine lacks, "
                         "too little memory, ...)";
    return absl::InternalError(absl::StrCat("eal: rte_eal_init failed: ", why, " (args: ",
                                            absl::StrJoin(args, " "), ")"));
  }
  g_eal_initialized.store(true);
  return absl::OkStatus();
}

bool EalInitialized() { return g_eal_initialized.load(); }

void CleanupEal() {
  if (g_eal_initialized.exchange(false)) rte_eal_cleanup();
}

struct DpdkDataplane::Impl {
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

  struct Pmd {
    int index = 0;
    int lcore = 0;
    std::vector<RxQueue> rxq;
    std::unique_ptr<Pipeline> pipeline;
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
  bool AskPmd(const Pmd& pmd, const FlowKey* key) const;    // under snap_mu
  // Applies a checked request: pmd.* at once, the pipeline settings
  // published to the PMDs together (one version), waiting until each live
  // PMD runs with them.  Nothing changes when a PMD has not taken the
  // previous version yet.
  absl::Status Apply(const RuntimeSettingsUpdate& update);
  void PmdLoop(Pmd& pmd);
  // Under apply_mu: publishes the table at its generation, made from the
  // published `cur` by batches that changed `changes` (null: anything may
  // have changed, each PMD rechecks every megaflow), and waits for every PMD
  // to install it.  Then no PMD reads an older generation, nor memory the
  // table retired before: the table frees that and unlinks deleted rules.
  // `fresh`, if given, is a new table that replaces the old one (DeleteAll),
  // freed once no PMD reads it.
  void Publish(const PublishedTable* cur, RuleChangeSet* changes,
               std::unique_ptr<RuleTable> fresh = nullptr);
};

DpdkDataplane::Impl::~Impl() {
  for (PortState& p : ports) {
    if (p.started) rte_eth_dev_stop(p.eth_port);
    // Devices that existed before Create (EAL-probed PCI devices, ethdevs a
    // test made) belong to whoever made them: left stopped, not closed.  What
    // we probed is closed and detached, so the name can be probed again
    // (tests create several dataplanes in one EAL).
    if (!p.probed_by_us) continue;
    rte_eth_dev_info info;
    rte_device* dev = nullptr;
    if (rte_eth_dev_info_get(p.eth_port, &info) == 0) dev = info.device;
    rte_eth_dev_close(p.eth_port);
    if (dev) rte_dev_remove(dev);
  }
  // Pipelines may hold pointers into the published table: drop them first.
  pmds.clear();
  publisher.reset();
  if (pool) rte_mempool_free(pool);
}

int DpdkDataplane::Impl::PmdMain(void* arg) {
  Pmd* pmd = static_cast<Pmd*>(arg);
  pmd->dp->PmdLoop(*pmd);
  return 0;
}

void DpdkDataplane::Impl::PmdLoop(Pmd& pmd) {
  const int burst = opts.burst;
  const uint16_t txq = static_cast<uint16_t>(pmd.index);
  PmdCounterBlock& c = *pmd.counters;
  Pipeline& pipeline = *pmd.pipeline;
  const int8_t* port_index = port_index_by_number.data();
  const int n_ports = static_cast<int>(ports.size());
  std::array<uint16_t, kMaxDataplanePorts> eth_of{};
  for (int i = 0; i < n_ports; ++i) eth_of[i] = ports[i].eth_port;

  rte_mbuf* rx[kMaxBurst];
  rte_mbuf* drops[kMaxBurst];
  rte_mbuf* out[kMaxDataplanePorts][kMaxBurst];
  int out_n[kMaxDataplanePorts] = {};
  int used[kMaxDataplanePorts];
  const uint8_t* frames[kMaxBurst];
  uint16_t lens[kMaxBurst];
  FlowKey keys[kMaxBurst];
  Verdict verdicts[kMaxBurst];

  const PublishedTable* current = nullptr;
  uint64_t current_generation = 0;
  SnapshotMailbox& box = *pmd.mailbox;
  uint64_t snap_served = box.req.load(std::memory_order_relaxed);
  auto answer = [&](uint64_t r) {  // control path: allocates
    if (box.want_trace) {
      box.trace = pipeline.Trace(box.trace_key);
    } else {
      box.snap = pipeline.Snapshot();
    }
    snap_served = r;
    box.done.store(r, std::memory_order_release);
  };
  // The pipeline's counters as readers see them: after each busy iteration,
  // after a rule change (an idle PMD revalidates too) and at the end.
  auto publish_pipeline_counters = [&c, &pipeline] {
    PublishPipelineCounters(pipeline.stats(), c);
  };
  box.live.store(true, std::memory_order_release);
  CounterLine* rxq_lines = pmd.rxq_counters.get();
  publisher->Online(pmd.index);
  uint64_t knobs_seen = 0;
  // One TSC read per iteration: its end is the next one's start.
  uint64_t t0 = rte_rdtsc();
  while (!stop.load(std::memory_order_relaxed)) {
    // Run-time pipeline settings (see KnobsMailbox).
    if (const uint64_t kv = knobs_version.load(std::memory_order_acquire);
        kv != knobs_seen) {
      pipeline.SetEmcInsertInvProb(knobs.emc_insert_inv_prob);
      pipeline.SetSmcEnabled(knobs.smc);
      pipeline.SetCdMode(knobs.cd);
      pipeline.SetRankingIntervalMs(knobs.ranking_interval_ms);
      pipeline.SetLookupPriorities(knobs.lookup);
      knobs_seen = kv;
      pmd.knobs_box->ack.store(kv, std::memory_order_release);
    }
    // Metrics and Trace: answer a mailbox request (see SnapshotMailbox).
    if (const uint64_t r = box.req.load(std::memory_order_acquire);
        r != snap_served)
      answer(r);
    // Quiescent point: install the published table, then report it.
    const PublishedTable* v = publisher->Load();
    if (v != current || v->generation != current_generation) {
      // The change set describes the step from base_generation (one batch,
      // or a group commit of several): use it only when this PMD had exactly
      // that generation installed.
      const bool one_step = current != nullptr && v->has_changes &&
                            v->base_generation == current_generation;
      pipeline.SetRuleTable(v->table, one_step ? &v->changes : nullptr, v->generation);
      publish_pipeline_counters();  // the revalidation's counters
      current = v;
      current_generation = v->generation;
      // Counter first: Quiescent's release store publishes it, so a Stats()
      // after the ack already shows the new generation.
      c.generation.store(v->generation, std::memory_order_relaxed);
      publisher->Quiescent(pmd.index, v->generation);
    }
    const int retries = tx_retries.load(std::memory_order_relaxed);
    uint64_t got = 0;
    for (size_t qi = 0; qi < pmd.rxq.size(); ++qi) {
      const RxQueue& q = pmd.rxq[qi];
      const uint16_t n = rte_eth_rx_burst(q.eth_port, q.queue, rx,
                                          static_cast<uint16_t>(burst));
      if (n == 0) continue;
      got += n;
      Bump(rxq_lines[qi / 8].c[qi % 8], n);
      for (int i = 0; i < n; ++i) {
        frames[i] = rte_pktmbuf_mtod(rx[i], const uint8_t*);
        lens[i] = rte_pktmbuf_data_len(rx[i]);
      }  // ParseBurst prefetches the frames it is about to parse
      const int parse_errors =
          ParseBurst(frames, lens, n, q.number, keys, pipeline.parse_prefetch());
      const bool uniform =
          pipeline.ProcessBurst(keys, n, verdicts, /*emc_prefetched=*/true);

      int n_drop = 0, n_used = 0;
      uint64_t rule_drops = 0, no_match = 0, bad_port = 0;
      // Common case first: the whole burst goes out of one port (a burst
      // is usually a few flows with the same action), so the rx array is
      // the tx array and nothing is regrouped.
      const Verdict& v0 = verdicts[0];
      const int p0 = uniform && v0.rule_id != 0 &&
                             v0.action.kind == Action::Kind::kOutput &&
                             v0.action.port <= kMaxPortNumber
                         ? port_index[v0.action.port]
                         : -1;
      for (int i = 0; i < n && p0 < 0; ++i) {
        const Verdict& vd = verdicts[i];
        if (vd.rule_id == 0) {
          ++no_match;
          drops[n_drop++] = rx[i];
        } else if (vd.action.kind != Action::Kind::kOutput) {
          ++rule_drops;
          drops[n_drop++] = rx[i];
        } else {
          const int p = vd.action.port <= kMaxPortNumber
                            ? port_index[vd.action.port]
                            : -1;
          if (p < 0) {
            ++bad_port;
            drops[n_drop++] = rx[i];
          } else {
            if (out_n[p] == 0) used[n_used++] = p;
            out[p][out_n[p]++] = rx[i];
          }
        }
      }
      if (n_drop) rte_pktmbuf_free_bulk(drops, static_cast<unsigned>(n_drop));
      uint64_t tx_total = 0, tx_drop_total = 0;
      auto send = [&](int p, rte_mbuf** pkts, uint16_t want) {
        uint16_t sent = rte_eth_tx_burst(eth_of[p], txq, pkts, want);
        for (int r = 0; r < retries && sent < want; ++r)
          sent += rte_eth_tx_burst(eth_of[p], txq, pkts + sent,
                                   static_cast<uint16_t>(want - sent));
        if (sent < want)
          rte_pktmbuf_free_bulk(pkts + sent, static_cast<unsigned>(want - sent));
        Bump(c.port_tx[p], sent);
        if (sent < want) Bump(c.port_tx_dropped[p], want - sent);
        tx_total += sent;
        tx_drop_total += want - sent;
      };
      if (p0 >= 0) send(p0, rx, n);
      for (int u = 0; u < n_used; ++u) {
        const int p = used[u];
        send(p, out[p], static_cast<uint16_t>(out_n[p]));
        out_n[p] = 0;
      }
      Bump(c.rx, n);
      Bump(c.tx, tx_total);
      if (tx_drop_total) Bump(c.tx_dropped, tx_drop_total);
      if (rule_drops) Bump(c.rule_drops, rule_drops);
      if (no_match) Bump(c.no_match, no_match);
      if (bad_port) Bump(c.bad_port, bad_port);
      if (parse_errors) Bump(c.parse_errors, parse_errors);
    }
    Bump(c.iterations, 1);
    const uint64_t t1 = rte_rdtsc();
    const uint64_t dt = t1 - t0;
    t0 = t1;
    if (got) {
      Bump(c.busy_cycles, dt);
      publish_pipeline_counters();
    } else {
      Bump(c.idle_cycles, dt);
      const uint32_t sleep = idle_sleep_us.load(std::memory_order_relaxed);
      if (sleep) {
        rte_delay_us_sleep(sleep);
        // Time asleep is idle time: busy / (busy + idle) stays the share of
        // the PMD's time spent on packets.
        const uint64_t woke = rte_rdtsc();
        Bump(c.idle_cycles, woke - t0);
        t0 = woke;
      }
    }
  }
  publish_pipeline_counters();
  // Metrics: leave the last state for Stats() after Stop() (off the fast
  // path; the lock only orders us against a reader copying `snap`).
  // A reader may hold snap_mu while it waits for us: keep answering.
  while (!snap_mu.try_lock()) {
    if (const uint64_t r = box.req.load(std::memory_order_acquire);
        r != snap_served)
      answer(r);
    rte_pause();
  }
  box.snap = pipeline.Snapshot();
  box.final.store(true, std::memory_order_release);
  box.live.store(false, std::memory_order_release);
  snap_mu.unlock();
  // Going offline: hold no table pointer while not reporting quiescence.
  pipeline.SetRuleTable(nullptr);
  publisher->Offline(pmd.index);
}

DpdkDataplane::DpdkDataplane(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

DpdkDataplane::~DpdkDataplane() { Stop(); }

absl::StatusOr<std::unique_ptr<DpdkDataplane>> DpdkDataplane::Create(
    const DpdkDataplaneOptions& options, SetupStage* failed) {
  SetupStage dummy;
  SetupStage& stage = failed ? *failed : dummy;
  stage = SetupStage::kOptions;
  if (!EalInitialized())
    return absl::FailedPreconditionError("eal: not initialised (call InitEal)");
  const DpdkDataplaneOptions& o = options;
  if (o.ports.empty())
    return absl::InvalidArgumentError("ports: at least one port is required");
  if (static_cast<int>(o.ports.size()) > kMaxDataplanePorts)
    return absl::InvalidArgumentError(absl::StrCat(
        "ports: ", o.ports.size(), " ports, at most ", kMaxDataplanePorts));
  if (o.pmd_lcores.empty())
    return absl::InvalidArgumentError("pmd.lcores: at least one PMD lcore is required");
  if (static_cast<int>(o.pmd_lcores.size()) > kMaxPmds)
    return absl::InvalidArgumentError(absl::StrCat("pmd.lcores: at most ", kMaxPmds));
  if (o.burst < 1 || o.burst > kMaxBurst)
    return absl::InvalidArgumentError(absl::StrCat(
        "pmd.burst: ", o.burst, " is outside 1..", kMaxBurst));
  if (o.tx_retries < 0)
    return absl::InvalidArgumentError("pmd.tx_retries: must be >= 0");

  auto impl = std::make_unique<Impl>();
  impl->opts = o;
  RuntimeSettings& rs = impl->settings;
  rs.tx_retries = static_cast<uint32_t>(o.tx_retries);
  rs.idle_sleep_us = o.idle_sleep_us;
  rs.emc_insert_inv_prob = o.pipeline.emc_config.insert_inv_prob;
  rs.smc = o.pipeline.smc;
  rs.cd = o.pipeline.cd.mode;
  rs.ranking_interval_ms = o.pipeline.ranking_interval_ms;
  rs.lookup = o.pipeline.dpcls.lookup;
  impl->knobs = rs;
  impl->tx_retries.store(o.tx_retries);
  impl->idle_sleep_us.store(o.idle_sleep_us);
  impl->port_index_by_number.assign(kMaxPortNumber + 1, -1);

  // Lcores: enabled EAL workers, distinct, not the main lcore, not busy.
  stage = SetupStage::kLcore;
  for (size_t i = 0; i < o.pmd_lcores.size(); ++i) {
    const int l = o.pmd_lcores[i];
    if (l < 0 || l >= RTE_MAX_LCORE || !rte_lcore_is_enabled(static_cast<unsigned>(l)))
      return absl::InvalidArgumentError(absl::StrCat(
          "pmd.lcores: lcore ", l, " is not enabled in EAL (add it to the EAL lcore list)"));
    if (static_cast<unsigned>(l) == rte_get_main_lcore())
      return absl::InvalidArgumentError(absl::StrCat(
          "pmd.lcores: lcore ", l, " is the main (control) lcore"));
    for (size_t j = 0; j < i; ++j)
      if (o.pmd_lcores[j] == l)
        return absl::InvalidArgumentError(
            absl::StrCat("pmd.lcores: lcore ", l, " listed twice"));
    if (rte_eal_get_lcore_state(static_cast<unsigned>(l)) != WAIT)
      return absl::FailedPreconditionError(
          absl::StrCat("pmd.lcores: lcore ", l, " is already in use"));
  }

  // Ports: find or probe.
  stage = SetupStage::kPort;
  const uint16_t n_pmds = static_cast<uint16_t>(o.pmd_lcores.size());
  for (size_t i = 0; i < o.ports.size(); ++i) {
    const PortOptions& po = o.ports[i];
    const std::string where =
        absl::StrCat("ports[", i, "] (number ", po.number, ", device ", po.device, ")");
    if (po.number > kMaxPortNumber)
      return absl::InvalidArgumentError(absl::StrCat(where, ": number above ", kMaxPortNumber));
    if (impl->port_index_by_number[po.number] >= 0)
      return absl::InvalidArgumentError(absl::StrCat(where, ": duplicate port number"));
    if (po.device.empty())
      return absl::InvalidArgumentError(absl::StrCat(where, ": device is empty"));
    if (po.poll && (po.rx_queues < 1 || po.rx_queues > 64))
      return absl::InvalidArgumentError(absl::StrCat(where, ": rx_queues must be 1..64"));
    PortState ps;
    ps.opts = po;
    uint16_t pid = 0;
    if (rte_eth_dev_get_port_by_name(po.device.c_str(), &pid) != 0) {
      const std::string spec =
          po.devargs.empty() ? po.device : po.device + "," + po.devargs;
      int rc = rte_dev_probe(spec.c_str());
      if (rc != 0)
        return absl::NotFoundError(absl::StrCat(
            where, ": cannot probe device \"", spec, "\": ", rte_strerror(-rc)));
      if (rte_eth_dev_get_port_by_name(po.device.c_str(), &pid) != 0)
        return absl::NotFoundError(absl::StrCat(
            where, ": probed but no ethdev named \"", po.device, "\""));
      ps.probed_by_us = true;
    }
    for (const PortState& other : impl->ports)
      if (other.eth_port == pid)
        return absl::InvalidArgumentError(absl::StrCat(where, ": same device as another port"));
    ps.eth_port = pid;
    impl->ports.push_back(std::move(ps));
    impl->port_index_by_number[po.number] = static_cast<int8_t>(i);
  }

  // Mbuf pool.
  stage = SetupStage::kMempool;
  uint64_t need = 0;
  for (const PortOptions& po : o.ports) {
    if (po.poll) need += uint64_t(po.rx_queues) * po.rx_descriptors;
    need += uint64_t(n_pmds) * po.tx_descriptors;
  }
  need += uint64_t(n_pmds + 1) * (o.mbuf_cache + 2 * kMaxBurst) + 1024;
  const uint32_t n_mbufs = o.mbufs ? o.mbufs : static_cast<uint32_t>(need);
  static std::atomic<int> pool_seq{0};
  const std::string pool_name = absl::StrCat("fc_mbuf_", pool_seq.fetch_add(1));
  impl->pool = rte_pktmbuf_pool_create(pool_name.c_str(), n_mbufs,
                                       std::min<uint32_t>(o.mbuf_cache, 512), 0,
                                       o.mbuf_data_room,
                                       static_cast<int>(rte_socket_id()));
  if (!impl->pool)
    return absl::ResourceExhaustedError(absl::StrCat(
        "mempool.mbufs: cannot create a pool of ", n_mbufs, " mbufs of ",
        o.mbuf_data_room, " bytes: ", rte_strerror(rte_errno),
        rte_errno == EINVAL
            ? " (mempool.cache must be at most 512 and at most mempool.mbufs / 1.5)"
            : " (raise eal.memory_mb or lower mempool.mbufs)"));

  // Configure every port.
  stage = SetupStage::kPort;
  for (size_t i = 0; i < impl->ports.size(); ++i) {
    PortState& ps = impl->ports[i];
    const PortOptions& po = ps.opts;
    const std::string where =
        absl::StrCat("ports[", i, "] (number ", po.number, ", device ", po.device, ")");
    rte_eth_dev_info info;
    int rc = rte_eth_dev_info_get(ps.eth_port, &info);
    if (rc != 0) return DpdkError(where + ": rte_eth_dev_info_get", rc);
    const uint16_t nrx = po.OpenedRxQueues();
    if (nrx > info.max_rx_queues)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": rx_queues ", nrx, " but the device has at most ",
          info.max_rx_queues));
    // net_pcap makes one rx queue per rx_pcap= / rx_iface= / iface= input:
    // an input past rx_queues would never be read, silently.
    if (po.poll && info.driver_name != nullptr &&
        std::strcmp(info.driver_name, "net_pcap") == 0 && nrx < info.max_rx_queues)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the device has ", info.max_rx_queues,
          " rx inputs (rx_pcap=/rx_iface=/iface=) but rx_queues is ", nrx,
          ": the inputs past it would never be read; set rx_queues: ", info.max_rx_queues));
    if (n_pmds > info.max_tx_queues)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the device has ", info.max_tx_queues,
          " tx queues, one per PMD is needed (", n_pmds,
          "); for net_pcap repeat tx_pcap= once per PMD"));
    rte_eth_conf conf;
    std::memset(&conf, 0, sizeof(conf));
    if (po.rss && nrx > 1 && info.flow_type_rss_offloads != 0) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf =
          (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) &
          info.flow_type_rss_offloads;
    }
    ps.rss_hf = conf.rx_adv_conf.rss_conf.rss_hf;
    rc = rte_eth_dev_configure(ps.eth_port, nrx, n_pmds, &conf);
    if (rc != 0) return DpdkError(where + ": rte_eth_dev_configure", rc);
    uint16_t rxd = static_cast<uint16_t>(po.rx_descriptors);
    uint16_t txd = static_cast<uint16_t>(po.tx_descriptors);
    rc = rte_eth_dev_adjust_nb_rx_tx_desc(ps.eth_port, &rxd, &txd);
    if (rc != 0) return DpdkError(where + ": rte_eth_dev_adjust_nb_rx_tx_desc", rc);
    const int socket = rte_eth_dev_socket_id(ps.eth_port);
    for (uint16_t q = 0; q < nrx; ++q) {
      rc = rte_eth_rx_queue_setup(ps.eth_port, q, rxd,
                                  static_cast<unsigned>(socket < 0 ? SOCKET_ID_ANY : socket),
                                  nullptr, impl->pool);
      // net_pcap's infinite_rx copies the whole pcap into mbufs of the pool
      // here, and refuses (EINVAL) when the pool cannot hold it.
      if (rc == -EINVAL && info.driver_name != nullptr &&
          std::strcmp(info.driver_name, "net_pcap") == 0 &&
          absl::StrContains(po.devargs, "infinite_rx=1")) {
        stage = SetupStage::kMempool;
        return absl::ResourceExhaustedError(absl::StrCat(
            "mempool.mbufs: ", where, ": rx queue ", q,
            " (net_pcap, infinite_rx=1) keeps the whole pcap in the pool, which has ",
            rte_mempool_avail_count(impl->pool), " free mbufs of ", impl->pool->size,
            ": set mempool.mbufs to at least the pcap's packet count plus ", need,
            " (what the ports and PMDs need besides); or a frame of the pcap is larger than "
            "mempool.data_room - ", RTE_PKTMBUF_HEADROOM, " (",
            o.mbuf_data_room - RTE_PKTMBUF_HEADROOM, " bytes)"));
      }
      if (rc != 0) return DpdkError(absl::StrCat(where, ": rx queue ", q, " setup"), rc);
    }
    for (uint16_t q = 0; q < n_pmds; ++q) {
      rc = rte_eth_tx_queue_setup(ps.eth_port, q, txd,
                                  static_cast<unsigned>(socket < 0 ? SOCKET_ID_ANY : socket),
                                  nullptr);
      if (rc != 0) return DpdkError(absl::StrCat(where, ": tx queue ", q, " setup"), rc);
    }
  }

  // PMDs and their rx queues (round-robin in port, queue order).
  impl->table = std::make_unique<RuleTable>(o.limits, /*concurrent_readers=*/true);
  impl->publisher = std::make_unique<RulePublisher>(
      n_pmds, std::make_unique<PublishedTable>(impl->table.get(), 0));
  impl->pmds.resize(n_pmds);
  for (int i = 0; i < n_pmds; ++i) {
    auto& pmd = impl->pmds[i];
    pmd.index = i;
    pmd.lcore = o.pmd_lcores[i];
    absl::StatusOr<std::unique_ptr<Pipeline>> pipeline = Pipeline::Create(o.pipeline);
    if (!pipeline.ok()) {
      stage = SetupStage::kOptions;
      return pipeline.status();
    }
    pmd.pipeline = std::move(*pipeline);
    pmd.counters = std::make_unique<PmdCounterBlock>();
    pmd.mailbox = std::make_unique<SnapshotMailbox>();
    pmd.knobs_box = std::make_unique<KnobsMailbox>();
    pmd.dp = impl.get();
  }
  int next = 0;
  for (const PortState& ps : impl->ports) {
    if (!ps.opts.poll) continue;
    for (int q = 0; q < ps.opts.rx_queues; ++q) {
      impl->pmds[next % n_pmds].rxq.push_back(
          RxQueue{ps.eth_port, static_cast<uint16_t>(q), ps.opts.number});
      ++next;
    }
  }
  for (auto& pmd : impl->pmds)  // metrics: per-rxq counters
    pmd.rxq_counters = std::make_unique<CounterLine[]>(pmd.rxq.size() / 8 + 1);
  stage = SetupStage::kNone;
  return std::unique_ptr<DpdkDataplane>(new DpdkDataplane(std::move(impl)));
}

absl::Status DpdkDataplane::Start() {
  Impl& d = *impl_;
  if (d.started) return absl::FailedPreconditionError("dataplane: already started");
  for (PortState& ps : d.ports) {
    int rc = rte_eth_dev_start(ps.eth_port);
    if (rc != 0)
      return DpdkError(absl::StrCat("ports (number ", ps.opts.number, ", device ",
                                    ps.opts.device, "): rte_eth_dev_start"),
                       rc);
    ps.started = true;
    if (ps.opts.promiscuous) rte_eth_promiscuous_enable(ps.eth_port);  // best effort
  }
  d.stop.store(false);
  for (auto& pmd : d.pmds) {
    int rc = rte_eal_remote_launch(&Impl::PmdMain, &pmd,
                                   static_cast<unsigned>(pmd.lcore));
    if (rc != 0) {
      Stop();
      return DpdkError(absl::StrCat("pmd.lcores: launch on lcore ", pmd.lcore), rc);
    }
    pmd.launched = true;
  }
  d.started = true;
  running_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

void DpdkDataplane::Stop() {
  Impl& d = *impl_;
  if (d.stopped) return;
  d.stop.store(true);
  for (auto& pmd : d.pmds) {
    if (pmd.launched) rte_eal_wait_lcore(static_cast<unsigned>(pmd.lcore));
    pmd.launched = false;
  }
  for (PortState& ps : d.ports) {
    if (ps.started) rte_eth_dev_stop(ps.eth_port);
    ps.started = false;
  }
  if (d.started) d.stopped = true;
  running_.store(false, std::memory_order_release);
}

std::vector<std::pair<uint32_t, int>> DpdkDataplane::RxQueuesOf(int pmd) const {
  std::vector<std::pair<uint32_t, int>> r;
  for (const RxQueue& q : impl_->pmds.at(pmd).rxq) r.emplace_back(q.number, q.queue);
  return r;
}

std::vector<DpdkPortInfo> DpdkDataplane::Ports() const {
  std::vector<DpdkPortInfo> r;
  for (const PortState& ps : impl_->ports)
    r.push_back(DpdkPortInfo{ps.opts.number, ps.opts.device,
                             ps.opts.OpenedRxQueues(),
                             ps.rss_hf});
  return r;
}

int DpdkDataplane::EthPortOf(uint32_t number) const {
  if (number > kMaxPortNumber) return -1;
  const int i = impl_->port_index_by_number[number];
  return i < 0 ? -1 : impl_->ports[i].eth_port;
}

absl::StatusOr<BatchResult> DpdkDataplane::ApplyBatch(absl::Span<const RuleOp> ops) {
  const absl::Span<const RuleOp> one[] = {ops};
  return std::move(ApplyBatches(one).front());
}

std::vector<absl::StatusOr<BatchResult>> DpdkDataplane::ApplyBatches(
    absl::Span<const absl::Span<const RuleOp>> batches) {
  Impl& d = *impl_;
  std::vector<absl::StatusOr<BatchResult>> results;
  results.reserve(batches.size());
  std::lock_guard<std::mutex> lock(d.apply_mu);
  if (d.stopped) {
    for (size_t i = 0; i < batches.size(); ++i)
      results.push_back(absl::FailedPreconditionError("dataplane: stopped"));
    return results;
  }
  const PublishedTable* cur = d.publisher->Current();
  RuleTable& table = *d.table;
  RuleChangeSet changes;
  bool changed = false;
  for (absl::Span<const RuleOp> ops : batches) {
    if (ops.empty()) {  // nothing to apply or publish
      results.push_back(table.ApplyBatch(ops));
      continue;
    }
    // Against the state before this batch (earlier ones of the group
    // included): that is what a replaced or deleted rule looked like.
    RuleChangeSet cs = MakeRuleChangeSet(table, ops);
    const uint64_t before = table.generation();
    absl::StatusOr<BatchResult> r = table.ApplyBatch(ops);
    // All or nothing: a rejected batch left the table as it was, and so did
    // one that changed nothing (no generation, nothing to publish).
    if (r.ok() && r->generation != before) {
      changes.Merge(std::move(cs));
      changed = true;
    }
    results.push_back(std::move(r));
  }
  if (changed) d.Publish(cur, &changes);
  return results;
}

void DpdkDataplane::Impl::Publish(const PublishedTable* cur, RuleChangeSet* changes,
                                  std::unique_ptr<RuleTable> fresh) {
  RuleTable* t = fresh ? fresh.get() : table.get();
  auto next = std::make_unique<PublishedTable>(t, t->generation());
  if (changes != nullptr) {
    changes->Seal();  // indexed here, on the control thread, for every PMD
    next->changes = std::move(*changes);
  }
  next->has_changes = changes != nullptr;
  next->base_generation = cur->generation;
  // The old view goes; PMDs never read a view after installing a newer one.
  publisher->PublishAndWait(std::move(next));
  if (fresh) {
    table.swap(fresh);  // the old table (and its rules) freed here
    return;
  }
  table->FreeRetired();    // retired before the publication
  table->RemoveDeleted();  // no PMD looks up at an older generation now
}

// Without a list of the rules or a change set of every deleted match: a new
// empty table at the next generation is published, and every PMD rechecks
// its megaflows against it (no change set: each megaflow is looked up
// again, and none survives an empty table).  The old table, once no PMD
// reads it, is freed: the cost is freeing the rules, under apply_mu.
absl::StatusOr<BatchResult> DpdkDataplane::DeleteAll() {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.apply_mu);
  if (d.stopped) return absl::FailedPreconditionError("dataplane: stopped");
  const PublishedTable* cur = d.publisher->Current();
  BatchResult result;
  result.deleted = d.table->size();
  result.generation = cur->generation;
  if (result.deleted == 0) return result;  // nothing to delete: like an empty batch
  ++result.generation;
  auto fresh = std::make_unique<RuleTable>(d.opts.limits, /*concurrent_readers=*/true);
  fresh->Clear(result.generation);
  d.Publish(cur, /*changes=*/nullptr, std::move(fresh));
  return result;
}

uint64_t DpdkDataplane::generation() const {
  return impl_->publisher->Current()->generation;
}

std::vector<Rule> DpdkDataplane::ListRules() const {
  std::lock_guard<std::mutex> lock(impl_->apply_mu);
  std::vector<Rule> out;
  for (const Rule* r : impl_->table->Rules()) out.push_back(*r);
  return out;
}

// ---- metrics ----
// One request to the PMD's mailbox (see SnapshotMailbox), under snap_mu:
// a snapshot, or a trace of `key` when `key` is not null.  True when the PMD
// answered; false when it is not running or did not answer in time.  The
// mailbox fields are written only once the PMD has answered every earlier
// request, so a request that timed out never races with a new one.
bool DpdkDataplane::Impl::AskPmd(const Pmd& pmd, const FlowKey* key) const {
  SnapshotMailbox& box = *pmd.mailbox;
  if (!box.live.load(std::memory_order_acquire)) return false;
  const auto deadline = std::chrono::steady_clock::now() + kSnapshotWait;
  auto wait_done = [&](uint64_t req) {
    while (box.done.load(std::memory_order_acquire) != req) {
      // The PMD cannot write `final` while we hold snap_mu; if it stopped
      // without answering, give up at once.
      if (!box.live.load(std::memory_order_acquire) ||
          std::chrono::steady_clock::now() >= deadline)
        return false;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return true;
  };
  const uint64_t last = box.req.load(std::memory_order_relaxed);
  if (!wait_done(last)) return false;  // an earlier request is still open
  box.want_trace = key != nullptr;
  if (key) box.trace_key = *key;
  box.req.store(last + 1, std::memory_order_release);
  return wait_done(last + 1);
}

// Fills p->snapshot from the PMD's mailbox.
void DpdkDataplane::Impl::TakeSnapshot(const Pmd& pmd, PmdCounters* p) const {
  std::lock_guard<std::mutex> lock(snap_mu);
  const SnapshotMailbox& box = *pmd.mailbox;
  if (box.final.load(std::memory_order_acquire) || AskPmd(pmd, nullptr)) {
    p->snapshot = box.snap;
    p->has_snapshot = true;
  }
}
// ---- end metrics ----

absl::StatusOr<Rule> DpdkDataplane::GetRule(uint64_t id) const {
  std::lock_guard<std::mutex> lock(impl_->apply_mu);
  const Rule* r = impl_->table->Find(id);
  if (!r) return absl::NotFoundError(absl::StrCat("rule id ", id, ": no such rule"));
  return *r;
}

absl::StatusOr<std::vector<RuleHit>> DpdkDataplane::RuleHits() const {
  const DataplaneStats stats = Stats();
  std::map<uint64_t, uint64_t> sum;
  for (const PmdCounters& p : stats.pmds) {
    if (!p.has_snapshot) {
      return absl::UnavailableError(absl::StrCat(
          "rule hits: PMD ", p.pmd, " did not answer the snapshot request"));
    }
    for (const auto& [id, hits] : p.snapshot.rule_hits) sum[id] += hits;
  }
  std::vector<RuleHit> out;
  std::lock_guard<std::mutex> lock(impl_->apply_mu);
  const RuleTable& table = *impl_->table;
  for (const auto& [id, hits] : sum) {
    if (table.Find(id) != nullptr) out.push_back(RuleHit{id, hits});
  }
  return out;
}

absl::StatusOr<TraceResult> DpdkDataplane::Trace(const FlowKey& key) const {
  // apply_mu held throughout: every PMD has the published generation
  // installed (ack semantics) and no batch can change it under the trace.
  std::lock_guard<std::mutex> lock(impl_->apply_mu);
  const PublishedTable* cur = impl_->publisher->Current();
  TraceResult t;
  t.generation = cur->generation;
  const Rule* r = impl_->table->Lookup(key, &t.megaflow_mask, &t.rule_subtables_visited,
                                      cur->generation);
  if (r) {
    t.matched = true;
    t.rule = *r;
  }
  // The PMD caches: the first PMD that has the key cached, else the first
  // that answered ("upcall").  A PMD that does not answer is skipped.
  std::lock_guard<std::mutex> snap_lock(impl_->snap_mu);
  for (const auto& pmd : impl_->pmds) {
    if (!impl_->AskPmd(pmd, &key)) continue;
    const PipelineTrace& pt = pmd.mailbox->trace;
    if (t.pmd >= 0 && !pt.has_megaflow) continue;  // "upcall"
    t.pmd = pmd.index;
    t.layer = pt.layer;
    t.megaflow_subtables_visited.assign(pt.subtables_visited.begin(),
                                        pt.subtables_visited.end());
    if (pt.has_megaflow) {
      t.has_megaflow = true;
      t.megaflow_value = pt.megaflow_value;
      t.megaflow_mask = pt.megaflow_mask;
      break;
    }
  }
  return t;
}

DataplaneStats DpdkDataplane::Stats() const {
  const Impl& d = *impl_;
  DataplaneStats s;
  {
    std::lock_guard<std::mutex> lock(impl_->apply_mu);
    const PublishedTable* cur = d.publisher->Current();
    s.generation = cur->generation;
    s.rules = d.table->Stats();
  }
  s.tsc_hz = rte_get_tsc_hz();
  for (const auto& pmd : d.pmds) {
    const PmdCounterBlock& c = *pmd.counters;
    PmdCounters p;
    p.pmd = static_cast<uint32_t>(pmd.index);
    p.lcore = static_cast<uint32_t>(pmd.lcore);
    p.iterations = Read(c.iterations);
    p.rx_packets = Read(c.rx);
    p.tx_packets = Read(c.tx);
    p.tx_dropped = Read(c.tx_dropped);
    p.rule_drops = Read(c.rule_drops);
    p.no_match = Read(c.no_match);
    p.bad_port = Read(c.bad_port);
    p.parse_errors = Read(c.parse_errors);
    p.busy_cycles = Read(c.busy_cycles);
    p.idle_cycles = Read(c.idle_cycles);
    p.generation = Read(c.generation);
    ReadPipelineCounters(c, &p.pipeline);
    for (size_t qi = 0; qi < pmd.rxq.size(); ++qi) {
      QueueCounters q;
      q.port = pmd.rxq[qi].number;
      q.queue = pmd.rxq[qi].queue;
      q.packets = Read(pmd.rxq_counters[qi / 8].c[qi % 8]);
      p.rx_queues.push_back(q);
    }
    for (size_t i = 0; i < d.ports.size(); ++i) {
      QueueCounters q;
      q.port = d.ports[i].opts.number;
      q.queue = static_cast<uint32_t>(pmd.index);  // one tx queue per PMD
      q.packets = Read(c.port_tx[i]);
      q.dropped = Read(c.port_tx_dropped[i]);
      p.tx_queues.push_back(q);
    }
    d.TakeSnapshot(pmd, &p);
    // ---- end metrics ----
    s.pmds.push_back(p);
  }
  for (size_t i = 0; i < d.ports.size(); ++i) {
    const PortState& ps = d.ports[i];
    PortCounters pc;
    pc.number = ps.opts.number;
    pc.device = ps.opts.device;
    for (const PmdCounters& p : s.pmds)
      for (const QueueCounters& q : p.rx_queues)
        if (q.port == pc.number) pc.rx_packets += q.packets;
    for (const auto& pmd : d.pmds) {
      pc.tx_packets += Read(pmd.counters->port_tx[i]);
      pc.tx_dropped += Read(pmd.counters->port_tx_dropped[i]);
    }
    rte_eth_stats es;
    if (rte_eth_stats_get(ps.eth_port, &es) == 0) {
      pc.dev_ipackets = es.ipackets;
      pc.dev_opackets = es.opackets;
      pc.dev_imissed = es.imissed;
      pc.dev_ierrors = es.ierrors;
      pc.dev_oerrors = es.oerrors;
      pc.dev_rx_nombuf = es.rx_nombuf;
    }
    s.ports.push_back(pc);
  }
  return s;
}

std::map<std::string, std::string> DpdkDataplane::GetConfig() const {
  const Impl& d = *impl_;
  std::map<std::string, std::string> m;
  m["pmd.lcores"] = absl::StrJoin(d.opts.pmd_lcores, ",");
  m["pmd.burst"] = absl::StrCat(d.opts.burst);
  m["mempool.mbufs"] = absl::StrCat(d.pool ? d.pool->size : 0);
  m["ports"] = absl::StrJoin(d.ports, ",", [](std::string* out, const PortState& p) {
    absl::StrAppend(out, p.opts.number, "=", p.opts.device);
  });
  // Run-time settings (every PMD runs with these once ApplySettings
  // returned).  Apply writes them under apply_mu.
  RuntimeSettings rs;
  {
    std::lock_guard<std::mutex> lock(impl_->apply_mu);
    rs = d.settings;
  }
  for (auto& [k, v] : FormatRuntimeSettings(RuntimeSettingsUpdate::All(rs)))
    m[std::move(k)] = std::move(v);
  return m;
}

absl::StatusOr<std::string> DpdkDataplane::GetConfig(absl::string_view key) const {
  auto m = GetConfig();
  auto it = m.find(std::string(key));
  if (it == m.end())
    return UnknownConfigKeyError(key);
  return it->second;
}

absl::Status DpdkDataplane::ApplySettings(absl::Span<const ConfigValue> values) {
  absl::StatusOr<RuntimeSettingsUpdate> update = ParseRuntimeSettingsRequest(values, GetConfig());
  if (!update.ok()) return update.status();
  return impl_->Apply(*update);
}

absl::Status DpdkDataplane::Impl::Apply(const RuntimeSettingsUpdate& update) {
  std::lock_guard<std::mutex> lock(apply_mu);
  RuntimeSettings next = settings;
  update.ApplyTo(&next);
  // Every live PMD must have taken `version` before `knobs` may change: a
  // PMD still reading the settings of a request that timed out would race
  // with the write.
  auto all_took = [&](uint64_t version, absl::string_view what) -> absl::Status {
    const auto deadline = std::chrono::steady_clock::now() + kKnobsWait;
    for (const Pmd& pmd : pmds) {
      while (pmd.mailbox->live.load(std::memory_order_acquire) &&
             pmd.knobs_box->ack.load(std::memory_order_acquire) < version) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::vector<std::string> keys;
          for (const ConfigValue& kv : FormatRuntimeSettings(update)) keys.push_back(kv.first);
          return absl::DeadlineExceededError(absl::StrCat(
              absl::StrJoin(keys, ", "), ": PMD ", pmd.index, " did not take ", what, " within ",
              std::chrono::duration_cast<std::chrono::milliseconds>(kKnobsWait).count(), " ms"));
        }
        std::this_thread::yield();
      }
    }
    return absl::OkStatus();
  };
  const bool publish = update.ChangesPipeline();
  if (publish) {
    if (absl::Status s =
            all_took(knobs_version.load(std::memory_order_relaxed), "the previous setting");
        !s.ok())
      return s;
  }
  // From here on the request is applied, pmd.* and pipeline alike.
  settings = next;
  tx_retries.store(static_cast<int>(next.tx_retries), std::memory_order_relaxed);
  idle_sleep_us.store(next.idle_sleep_us, std::memory_order_relaxed);
  if (!publish) return absl::OkStatus();
  knobs = next;
  return all_took(knobs_version.fetch_add(1, std::memory_order_acq_rel) + 1,
                  "the new setting");
}

}  // namespace flowclass
