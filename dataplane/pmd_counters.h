// pmd_counters.h — the per-PMD counters, in two tables of one shape.
//
// Every counter of PmdStats (the pipeline's) is one line of
// FLOWCLASS_PMD_COUNTERS below, every counter of PmdLoopStats (the DPDK PMD
// loop's, around the pipeline) one line of FLOWCLASS_PMD_LOOP_COUNTERS (as
// OVS's pmd_stat_type with its names, or DPDK's xstats name tables).  A line
// makes the struct field, the enumerator and the info entry, and everything
// that handles "all the counters" loops over kPmdCounters / kPmdLoopCounters:
// PmdStats::operator+= / -= and PmdLoopStats::Add (DataplaneStats::Total),
// the DPDK PMD's counter block (dataplane/dpdk/internal/dpdk_dataplane_impl.h),
// Pipeline::FormatStats and DataplaneStats::ToString, the GetStats fill
// (proto/pmd_stats_convert.h), flowclassctl stats (the pipeline table), the
// Prometheus collector and flowclassd's periodic stats line.  Adding a
// counter is one line here plus its increment, plus a uint64 field of its
// name in v1.PmdStats when GetStats carries it.  Values derived from several
// counters (averages, busy share, the layer partition of
// flowclass_pmd_packets_total) are not table entries: they stay where they
// are computed.
//
// Columns of X(id, field, name, text, log, rpc, kind, unit, metric, help):
//   id      PmdCounter enumerator
//   field   PmdStats member (what the per-packet code increments)
//   name    snake_case name; with rpc, the v1.PmdStats field of the value
//   text    label of the pmd-stats-show style dumps ("  <text>: <value>"),
//           the names of `ovs-appctl dpif-netdev/pmd-stats-show` where OVS
//           has the counter
//   log     key of flowclassd's periodic stats line ("<log>=<value>";
//           nullptr: not in it)
//   rpc     GetStats carries it as v1.PmdStats.<name>
//   kind    kCounter (monotonic) or kGauge
//   unit    kPackets, kCycles (TSC) or kEvents (lookups, rule changes,
//           megaflows)
//   metric  Prometheus family of its own, one series per PMD with label
//           `pmd` (nullptr: not exported on its own; the packet counters
//           without one are the layers of flowclass_pmd_packets_total, or
//           the loop's own counts)
//   help    that family's HELP text (nullptr iff metric is)
//
// The line order is PmdStats' field order (the hot per-packet counters
// first) and the order of the dumps and of the /metrics families.
//
// Threads: PmdStats and PmdLoopStats are plain uint64_t written by the
// owning thread only (the DPDK PMD publishes copies through its atomic
// counter block); the tables are immutable.
//
// No DPDK, protobuf or Prometheus here: the dataplane, the server and the
// client all include it.
#ifndef FLOWCLASS_DATAPLANE_PMD_COUNTERS_H_
#define FLOWCLASS_DATAPLANE_PMD_COUNTERS_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

// clang-format off
#define FLOWCLASS_PMD_COUNTERS(X)                                              \
  X(kPackets, packets, "packets", "packets received", nullptr, true,           \
    kCounter, kPackets, nullptr, nullptr)                                      \
  X(kEmcHits, emc_hits, "emc_hits", "emc hits", "emc_hits", true,              \
    kCounter, kPackets, nullptr, nullptr)                                      \
  X(kSmcHits, smc_hits, "smc_hits", "smc hits", "smc_hits", true,              \
    kCounter, kPackets, nullptr, nullptr)                                      \
  /* includes cd_hits */                                                       \
  X(kMegaflowHits, megaflow_hits, "megaflow_hits", "megaflow hits",            \
    "megaflow_hits", true, kCounter, kPackets, nullptr, nullptr)               \
  /* megaflow hits found through the Cuckoo Distributor */                     \
  X(kCdHits, cd_hits, "cd_hits", "cd hits", nullptr, true,                     \
    kCounter, kPackets, nullptr, nullptr)                                      \
  /* miss, megaflow installed (megaflows off: every packet, none installed) */\
  X(kUpcallOk, upcall_ok, "upcall_ok", "miss with success upcall", "upcalls",  \
    true, kCounter, kPackets, nullptr, nullptr)                                \
  /* miss, megaflow not installed (capacity); still classified */              \
  X(kUpcallFailed, upcall_failed, "upcall_failed", "miss with failed upcall",  \
    "upcalls_failed", true, kCounter, kPackets, nullptr, nullptr)              \
  /* failed upcalls (a subset) whose cap bit: pipeline.max_megaflows */       \
  /* megaflows exist, or the port has pipeline.max_subtables_per_port */       \
  /* subtables and the megaflow needed a new one */                            \
  X(kUpcallsMegaflowCap, upcalls_megaflow_cap, "upcalls_megaflow_cap",         \
    "failed upcalls at megaflow cap", nullptr, true, kCounter, kPackets,       \
    "flowclass_pmd_megaflow_cap_upcalls_total",                                \
    "Misses not cached because pipeline.max_megaflows megaflows exist (still " \
    "classified by the slow path; part of upcall_failed).")                    \
  X(kUpcallsSubtableCap, upcalls_subtable_cap, "upcalls_subtable_cap",         \
    "failed upcalls at subtable cap", nullptr, true, kCounter, kPackets,       \
    "flowclass_pmd_subtable_cap_upcalls_total",                                \
    "Misses not cached because their port has pipeline.max_subtables_per_port " \
    "subtables and the megaflow needed a new one (still classified by the "   \
    "slow path; part of upcall_failed).")                                      \
  /* failed upcalls (a subset): misses past their port's upcall budget */      \
  /* (pipeline.upcall_rate / upcall_burst), dropped or classified */           \
  /* without installing (pipeline.upcall_limit_action) */                      \
  X(kUpcallsRateLimited, upcalls_rate_limited, "upcalls_rate_limited",         \
    "upcalls rate limited", "upcalls_limited", true, kCounter, kPackets,       \
    "flowclass_pmd_rate_limited_upcalls_total",                                \
    "Misses past their port's upcall budget (pipeline.upcall_rate, "           \
    "pipeline.upcall_burst): dropped, or classified by the slow path without " \
    "installing (pipeline.upcall_limit_action); part of upcall_failed.")       \
  /* of those, dropped (upcall_limit_action drop; the PMD loop counts them */  \
  /* too, as drops of reason upcall_limit) */                                  \
  X(kUpcallLimitDrops, upcall_limit_drops, "upcall_limit_drops",               \
    "upcall limit drops", nullptr, true, kCounter, kPackets, nullptr, nullptr) \
  /* failed upcalls (a subset) the mask-explosion defence kept out: the */     \
  /* port has pipeline.rare_mask_subtables subtables and the megaflow's */     \
  /* mask, which needed a new one, missed too rarely */                        \
  X(kUpcallsRareMask, upcalls_rare_mask, "upcalls_rare_mask",                  \
    "failed upcalls of rare masks", nullptr, true, kCounter, kPackets,         \
    "flowclass_pmd_rare_mask_upcalls_total",                                   \
    "Misses not cached because their port has pipeline.rare_mask_subtables "   \
    "subtables and their mask, which needed a new one, is rare (still "        \
    "classified by the slow path; part of upcall_failed).")                    \
  /* verdict "no rule" (dropped), at whatever layer */                         \
  X(kNoMatch, no_match, "no_match", "no rule matched", nullptr, true,          \
    kCounter, kPackets, nullptr, nullptr)                                      \
  /* pipeline.kind acl: EMC misses the ACL matched to a rule, and those */    \
  /* no rule matches (also counted in no_match) */                             \
  X(kAclHits, acl_hits, "acl_hits", "acl hits", "acl_hits", true, kCounter,    \
    kPackets, "flowclass_pmd_acl_hits_total",                                  \
    "pipeline.kind acl: packets the EMC missed that rte_acl matched to a rule.") \
  X(kAclMisses, acl_misses, "acl_misses", "acl misses", "acl_misses", true,    \
    kCounter, kPackets, "flowclass_pmd_acl_misses_total",                      \
    "pipeline.kind acl: packets the EMC missed that no rule matches (dropped; "\
    "part of no_match).")                                                      \
  /* TSC cycles spent in ProcessBurst */                                       \
  X(kCycles, cycles, "cycles_classifier", "classifier cycles", nullptr, true,  \
    kCounter, kCycles, "flowclass_pmd_classifier_cycles_total",                \
    "TSC cycles spent in the classification pipeline (EMC to upcall).")        \
  /* subtables probed for megaflow hits */                                     \
  X(kSubtableLookups, subtable_lookups, "subtable_lookups",                    \
    "subtable lookups", nullptr, true, kCounter, kEvents,                      \
    "flowclass_pmd_subtable_lookups_total",                                    \
    "Subtables probed for megaflow hits (divide by megaflow hits for "         \
    "lookups per hit).")                                                       \
  /* CD suggestions that did not verify */                                     \
  X(kCdFalseHits, cd_false_hits, "cd_false_hits", "cd false hits", nullptr,    \
    true, kCounter, kEvents, "flowclass_pmd_cd_false_hits_total",              \
    "Cuckoo Distributor suggestions that did not verify.")                     \
  /* SetRuleTable calls */                                                     \
  X(kRevalidations, revalidations, "revalidations", "revalidations", nullptr,  \
    true, kCounter, kEvents, "flowclass_pmd_revalidations_total",              \
    "Rule set changes the PMD installed (caches revalidated or flushed).")     \
  /* megaflows they removed */                                                 \
  X(kMegaflowsRevalidatedOut, megaflows_revalidated_out,                       \
    "megaflows_revalidated_out", "megaflows revalidated out", nullptr, true,   \
    kCounter, kEvents, "flowclass_pmd_revalidated_megaflows_total",            \
    "Megaflows removed by revalidation after rule changes.")                   \
  /* megaflows they kept with a new verdict: the new rule's answer holds on */ \
  /* the whole megaflow (its megaflow mask is inside the old one) */           \
  X(kMegaflowsReverdicted, megaflows_reverdicted, "megaflows_reverdicted",     \
    "megaflows reverdicted", nullptr, true, kCounter, kEvents,                 \
    "flowclass_pmd_reverdicted_megaflows_total",                               \
    "Megaflows revalidation kept with a new verdict (the new rule's answer "   \
    "holds on the whole megaflow).")                                           \
  /* slow-path lookups revalidation made (megaflows it could not prove */      \
  /* unchanged by the change set) */                                           \
  X(kMegaflowsRechecked, megaflows_rechecked, "megaflows_rechecked",           \
    "megaflows rechecked", nullptr, true, kCounter, kEvents,                   \
    "flowclass_pmd_rechecked_megaflows_total",                                 \
    "Megaflows revalidation looked up again in the slow path after rule "      \
    "changes (those the change set could not prove unchanged).")               \
  /* megaflows removed after pipeline.megaflow_max_idle_ms without a packet */ \
  X(kMegaflowsExpired, megaflows_expired, "megaflows_expired",                 \
    "megaflows expired", nullptr, true, kCounter, kEvents,                     \
    "flowclass_pmd_expired_megaflows_total",                                   \
    "Megaflows removed after pipeline.megaflow_max_idle_ms without a packet.") \
  /* What rule changes cost the PMD, in TSC cycles: SetRuleTable (caches */    \
  /* revalidated or flushed; not in `cycles`), and the upcalls' slow-path */   \
  /* lookups and megaflow installs (part of `cycles`). */                      \
  X(kRevalidationCycles, revalidation_cycles, "cycles_revalidation",           \
    "revalidation cycles", nullptr, true, kCounter, kCycles,                   \
    "flowclass_pmd_revalidation_cycles_total",                                 \
    "TSC cycles spent installing rule changes (revalidating or flushing "      \
    "the caches); not in classifier cycles.")                                  \
  X(kUpcallCycles, upcall_cycles, "cycles_upcall", "upcall cycles", nullptr,   \
    true, kCounter, kCycles, "flowclass_pmd_upcall_cycles_total",              \
    "TSC cycles spent in upcalls (slow-path lookups, megaflow installs); "     \
    "part of classifier cycles.")

// The PMD loop's own counters (PmdLoopStats, the base of PmdCounters in
// dataplane.h): what the DPDK PMD counts around the pipeline, per PMD.  Same
// shape as the table above, with the metric's label instead of `rpc` (GetStats
// carries every one of them):
// X(id, field, name, text, log, kind, unit, metric, label, label_value, help)
//   name    the v1.PmdStats field carrying it.  "packets", "no_match" and
//           "upcall_limit_drops" are also pipeline counters' fields: the loop's count, when not 0,
//           is the one GetStats reports (it sees every received packet)
//   text    label of DataplaneStats::ToString ("  <text>: <value>"; nullptr:
//           not there)
//   metric  Prometheus family; with `label`, the series of that family with
//           label=label_value (entries sharing a family share its help)
// The line order is the order of the dumps and of the periodic log.
#define FLOWCLASS_PMD_DROPPED_HELP                                             \
  "Packets the PMD dropped, by reason: rule (the winning rule says drop), "    \
  "no_match (no rule), bad_port (output to a port we do not have), "           \
  "tx_full (tx queue refused them after retries), upcall_limit (misses past "  \
  "their port's upcall budget, pipeline.upcall_limit_action drop)."
#define FLOWCLASS_PMD_CYCLES_HELP                                              \
  "TSC cycles of poll loop iterations, state=busy (some packet received) "     \
  "or idle; divide by flowclass_tsc_hertz for seconds."
#define FLOWCLASS_PMD_LOOP_COUNTERS(X)                                         \
  /* rule set generation the PMD classifies with */                            \
  X(kGeneration, generation, "generation", nullptr, "gen", kGauge, kEvents,    \
    "flowclass_pmd_generation", nullptr, nullptr,                              \
    "Rule set generation the PMD classifies with.")                            \
  /* packets received from every polled queue */                               \
  X(kRxPackets, rx_packets, "packets", "rx packets", "rx", kCounter, kPackets, \
    "flowclass_pmd_rx_packets_total", nullptr, nullptr,                        \
    "Packets the PMD received from all the rx queues it polls.")               \
  /* packets accepted by a tx queue */                                         \
  X(kTxPackets, tx_packets, "tx_packets", "tx packets", "tx", kCounter,        \
    kPackets, "flowclass_pmd_tx_packets_total", nullptr, nullptr,              \
    "Packets the PMD handed to a tx queue (accepted).")                        \
  /* output packets the tx queue refused after retries */                      \
  X(kTxDropped, tx_dropped, "tx_dropped", "tx dropped", "tx_dropped",          \
    kCounter, kPackets, "flowclass_pmd_dropped_packets_total", "reason",       \
    "tx_full", FLOWCLASS_PMD_DROPPED_HELP)                                     \
  /* packets whose winning rule says drop */                                   \
  X(kRuleDrops, rule_drops, "rule_drops", "rule drops", "rule_drops",          \
    kCounter, kPackets, "flowclass_pmd_dropped_packets_total", "reason",       \
    "rule", FLOWCLASS_PMD_DROPPED_HELP)                                        \
  /* packets no rule matched (dropped) */                                      \
  X(kNoMatch,     no_match, "no_match", "no match", "no_match", kCounter,      \
    kPackets, "flowclass_pmd_dropped_packets_total", "reason", "no_match",     \
    FLOWCLASS_PMD_DROPPED_HELP)                                                \
  /* output:<port> naming a port we do not have */                             \
  X(kBadPort, bad_port, "bad_port", "bad port", "bad_port", kCounter,          \
    kPackets, "flowclass_pmd_dropped_packets_total", "reason", "bad_port",     \
    FLOWCLASS_PMD_DROPPED_HELP)                                                \
  /* misses past their port's upcall budget, dropped (upcall_limit_action */   \
  /* drop; the pipeline's upcall_limit_drops, which shares its field) */       \
  X(kUpcallLimitDrops, upcall_limit_drops, "upcall_limit_drops",               \
    "upcall limit drops", "upcall_limit_drops", kCounter, kPackets,            \
    "flowclass_pmd_dropped_packets_total", "reason", "upcall_limit",           \
    FLOWCLASS_PMD_DROPPED_HELP)                                                \
  /* keys flagged truncated/malformed (still classified) */                    \
  X(kParseErrors, parse_errors, "parse_errors", "parse errors",                \
    "parse_errors", kCounter, kPackets, "flowclass_pmd_parse_errors_total",    \
    nullptr, nullptr,                                                          \
    "Packets whose headers were truncated or malformed (still classified).")   \
  /* poll loop iterations */                                                   \
  X(kIterations, iterations, "iterations", nullptr, nullptr, kCounter,         \
    kEvents, "flowclass_pmd_iterations_total", nullptr, nullptr,               \
    "Poll loop iterations.")                                                   \
  /* TSC cycles of iterations that received packets / none (idle includes */   \
  /* pmd.idle_sleep_us sleeps) */                                              \
  X(kBusyCycles, busy_cycles, "cycles_busy", "busy cycles", nullptr,           \
    kCounter, kCycles, "flowclass_pmd_cycles_total", "state", "busy",          \
    FLOWCLASS_PMD_CYCLES_HELP)                                                 \
  X(kIdleCycles, idle_cycles, "cycles_idle", "idle cycles", nullptr,           \
    kCounter, kCycles, "flowclass_pmd_cycles_total", "state", "idle",          \
    FLOWCLASS_PMD_CYCLES_HELP)
// clang-format on

namespace flowclass {

enum class PmdCounter : uint8_t {
#define FLOWCLASS_PMD_COUNTER_ENUM(id, ...) id,
  FLOWCLASS_PMD_COUNTERS(FLOWCLASS_PMD_COUNTER_ENUM)
#undef FLOWCLASS_PMD_COUNTER_ENUM
};

enum class PmdCounterKind : uint8_t { kCounter, kGauge };
enum class PmdCounterUnit : uint8_t { kPackets, kCycles, kEvents };

// The pipeline's counters, named after `ovs-appctl dpif-netdev/pmd-stats-show`
// plus the Cuckoo Distributor's and the rule changes' (see the table above
// for each one).  Plain uint64_t written by the owning thread only.
// Add up: packets = emc_hits + smc_hits + megaflow_hits + upcall_ok +
// upcall_failed (megaflow), packets = emc_hits + acl_hits + acl_misses (acl).
struct PmdStats {
#define FLOWCLASS_PMD_COUNTER_FIELD(id, field, ...) uint64_t field = 0;
  FLOWCLASS_PMD_COUNTERS(FLOWCLASS_PMD_COUNTER_FIELD)
#undef FLOWCLASS_PMD_COUNTER_FIELD

  // Every counter (the table's loop).
  PmdStats& operator+=(const PmdStats& o);
  PmdStats& operator-=(const PmdStats& o);
  double AvgSubtableLookupsPerHit() const {
    return megaflow_hits ? double(subtable_lookups) / double(megaflow_hits) : 0;
  }
  double AvgCyclesPerPacket() const {
    return packets ? double(cycles) / double(packets) : 0;
  }
};

struct PmdCounterInfo {
  PmdCounter id;
  uint64_t PmdStats::*field;
  const char* name;
  const char* text;
  const char* log;  // key in flowclassd's periodic stats line (nullptr: none)
  bool rpc;
  PmdCounterKind kind;
  PmdCounterUnit unit;
  const char* metric;  // nullptr: no Prometheus family of its own
  const char* help;
};

inline constexpr PmdCounterInfo kPmdCounters[] = {
#define FLOWCLASS_PMD_COUNTER_INFO(id, field, name, text, log, rpc, kind,      \
                                   unit, metric, help)                        \
  {PmdCounter::id, &PmdStats::field, name, text, log, rpc,                    \
   PmdCounterKind::kind, PmdCounterUnit::unit, metric, help},
    FLOWCLASS_PMD_COUNTERS(FLOWCLASS_PMD_COUNTER_INFO)
#undef FLOWCLASS_PMD_COUNTER_INFO
};
inline constexpr size_t kNumPmdCounters = std::size(kPmdCounters);

// PmdStats holds the counters and nothing else (the table's loops cover it).
static_assert(sizeof(PmdStats) == kNumPmdCounters * sizeof(uint64_t));

constexpr const PmdCounterInfo& PmdCounterInfoOf(PmdCounter c) {
  return kPmdCounters[static_cast<size_t>(c)];
}

inline PmdStats& PmdStats::operator+=(const PmdStats& o) {
  for (const PmdCounterInfo& c : kPmdCounters) this->*c.field += o.*c.field;
  return *this;
}
inline PmdStats& PmdStats::operator-=(const PmdStats& o) {
  for (const PmdCounterInfo& c : kPmdCounters) this->*c.field -= o.*c.field;
  return *this;
}

// The PMD loop's counters (FLOWCLASS_PMD_LOOP_COUNTERS), the base of
// DataplaneStats' PmdCounters.
enum class PmdLoopCounter : uint8_t {
#define FLOWCLASS_PMD_LOOP_COUNTER_ENUM(id, ...) id,
  FLOWCLASS_PMD_LOOP_COUNTERS(FLOWCLASS_PMD_LOOP_COUNTER_ENUM)
#undef FLOWCLASS_PMD_LOOP_COUNTER_ENUM
};

struct PmdLoopStats {
#define FLOWCLASS_PMD_LOOP_COUNTER_FIELD(id, field, ...) uint64_t field = 0;
  FLOWCLASS_PMD_LOOP_COUNTERS(FLOWCLASS_PMD_LOOP_COUNTER_FIELD)
#undef FLOWCLASS_PMD_LOOP_COUNTER_FIELD

  // Every entry: counters summed, gauges the larger.
  void Add(const PmdLoopStats& o);
};

struct PmdLoopCounterInfo {
  PmdLoopCounter id;
  uint64_t PmdLoopStats::*field;
  const char* name;         // v1.PmdStats field
  const char* text;         // DataplaneStats::ToString label (nullptr: none)
  const char* log;          // periodic stats line key (nullptr: none)
  PmdCounterKind kind;
  PmdCounterUnit unit;
  const char* metric;       // Prometheus family
  const char* label;        // with label_value, the family's series label
  const char* label_value;  // (nullptr: the family has one series per PMD)
  const char* help;
};

inline constexpr PmdLoopCounterInfo kPmdLoopCounters[] = {
#define FLOWCLASS_PMD_LOOP_COUNTER_INFO(id, field, name, text, log, kind, unit, \
                                        metric, label, label_value, help)     \
  {PmdLoopCounter::id, &PmdLoopStats::field, name, text, log,                 \
   PmdCounterKind::kind, PmdCounterUnit::unit, metric, label, label_value, help},
    FLOWCLASS_PMD_LOOP_COUNTERS(FLOWCLASS_PMD_LOOP_COUNTER_INFO)
#undef FLOWCLASS_PMD_LOOP_COUNTER_INFO
};
inline constexpr size_t kNumPmdLoopCounters = std::size(kPmdLoopCounters);

static_assert(sizeof(PmdLoopStats) == kNumPmdLoopCounters * sizeof(uint64_t));

constexpr size_t PmdLoopCounterIndex(PmdLoopCounter c) { return static_cast<size_t>(c); }
constexpr const PmdLoopCounterInfo& PmdLoopCounterInfoOf(PmdLoopCounter c) {
  return kPmdLoopCounters[PmdLoopCounterIndex(c)];
}

inline void PmdLoopStats::Add(const PmdLoopStats& o) {
  for (const PmdLoopCounterInfo& c : kPmdLoopCounters) {
    uint64_t& v = this->*c.field;
    v = c.kind == PmdCounterKind::kCounter ? v + o.*c.field
                                           : (v > o.*c.field ? v : o.*c.field);
  }
}

// One line of the pmd-stats-show style dumps: "  <text>: <value>\n".
inline void AppendPmdCounterLine(std::string* out, const PmdCounterInfo& c,
                                 uint64_t value) {
  out->append("  ").append(c.text).append(": ").append(std::to_string(value));
  out->push_back('\n');
}

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_PMD_COUNTERS_H_
