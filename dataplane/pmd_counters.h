// pmd_counters.h — the pipeline's per-PMD counters, in one table.
//
// Every counter of PmdStats is one line of FLOWCLASS_PMD_COUNTERS below (as
// OVS's pmd_stat_type with its names, or DPDK's xstats name tables).  The line
// makes the PmdStats field, the PmdCounter enumerator and the kPmdCounters
// entry, and everything that handles "all the counters" loops over
// kPmdCounters: PmdStats::operator+= / -=, the DPDK PMD's counter mirror,
// Pipeline::FormatStats (and DataplaneStats::ToString through it), the
// GetStats fill (proto/pmd_stats_convert.h), flowclassctl stats and the
// Prometheus collector.  Adding a counter is one line here plus its
// increment on the PMD, plus a uint64 field of that name in v1.PmdStats when
// GetStats carries it (rpc = true).  Values derived from several counters
// (averages, the layer partition of flowclass_pmd_packets_total) are not
// table entries: they stay where they are computed.
//
// Columns of X(id, field, name, text, rpc, kind, unit, metric, help):
//   id      PmdCounter enumerator
//   field   PmdStats member (what the per-packet code increments)
//   name    snake_case name; with rpc, the v1.PmdStats field of the value
//   text    label of the pmd-stats-show style dumps ("  <text>: <value>"),
//           the names of `ovs-appctl dpif-netdev/pmd-stats-show` where OVS
//           has the counter
//   rpc     GetStats carries it as v1.PmdStats.<name>
//   kind    kCounter (monotonic) or kGauge
//   unit    kPackets, kCycles (TSC) or kEvents (lookups, rule changes,
//           megaflows)
//   metric  Prometheus family of its own, one series per PMD with label
//           `pmd` (nullptr: not exported on its own)
//   help    that family's HELP text (nullptr iff metric is)
//
// The line order is PmdStats' field order (the hot per-packet counters
// first) and the order of the dumps and of the /metrics families.
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
  X(kPackets, packets, "packets", "packets received", true,                    \
    kCounter, kPackets, nullptr, nullptr)                                      \
  X(kEmcHits, emc_hits, "emc_hits", "emc hits", true,                          \
    kCounter, kPackets, nullptr, nullptr)                                      \
  X(kSmcHits, smc_hits, "smc_hits", "smc hits", true,                          \
    kCounter, kPackets, nullptr, nullptr)                                      \
  /* includes cd_hits */                                                       \
  X(kMegaflowHits, megaflow_hits, "megaflow_hits", "megaflow hits", true,      \
    kCounter, kPackets, nullptr, nullptr)                                      \
  /* megaflow hits found through the Cuckoo Distributor */                     \
  X(kCdHits, cd_hits, "cd_hits", "cd hits", true,                              \
    kCounter, kPackets, nullptr, nullptr)                                      \
  /* miss, megaflow installed */                                               \
  X(kUpcallOk, upcall_ok, "upcall_ok", "miss with success upcall", true,       \
    kCounter, kPackets, nullptr, nullptr)                                      \
  /* miss, megaflow not installed (capacity); still classified */              \
  X(kUpcallFailed, upcall_failed, "upcall_failed", "miss with failed upcall",  \
    true, kCounter, kPackets, nullptr, nullptr)                                \
  /* verdict "no rule" (dropped), at whatever layer */                         \
  X(kNoMatch, no_match, "no_match", "no rule matched", true,                   \
    kCounter, kPackets, nullptr, nullptr)                                      \
  /* TSC cycles spent in ProcessBurst */                                       \
  X(kCycles, cycles, "cycles", "classifier cycles", false,                     \
    kCounter, kCycles, "flowclass_pmd_classifier_cycles_total",                \
    "TSC cycles spent in the classification pipeline (EMC to upcall).")        \
  /* subtables probed for megaflow hits */                                     \
  X(kSubtableLookups, subtable_lookups, "subtable_lookups",                    \
    "subtable lookups", true, kCounter, kEvents,                               \
    "flowclass_pmd_subtable_lookups_total",                                    \
    "Subtables probed for megaflow hits (divide by megaflow hits for "         \
    "lookups per hit).")                                                       \
  /* CD suggestions that did not verify */                                     \
  X(kCdFalseHits, cd_false_hits, "cd_false_hits", "cd false hits", true,       \
    kCounter, kEvents, "flowclass_pmd_cd_false_hits_total",                    \
    "Cuckoo Distributor suggestions that did not verify.")                     \
  /* SetRuleTable calls */                                                     \
  X(kRevalidations, revalidations, "revalidations", "revalidations", false,    \
    kCounter, kEvents, "flowclass_pmd_revalidations_total",                    \
    "Rule set changes the PMD installed (caches revalidated or flushed).")     \
  /* megaflows they removed */                                                 \
  X(kMegaflowsRevalidatedOut, megaflows_revalidated_out,                       \
    "megaflows_revalidated_out", "megaflows revalidated out", false,           \
    kCounter, kEvents, "flowclass_pmd_revalidated_megaflows_total",            \
    "Megaflows removed by revalidation after rule changes.")                   \
  /* megaflows they kept with a new verdict: the new rule's answer holds on */ \
  /* the whole megaflow (its megaflow mask is inside the old one) */           \
  X(kMegaflowsReverdicted, megaflows_reverdicted, "megaflows_reverdicted",     \
    "megaflows reverdicted", false, kCounter, kEvents,                         \
    "flowclass_pmd_reverdicted_megaflows_total",                               \
    "Megaflows revalidation kept with a new verdict (the new rule's answer "   \
    "holds on the whole megaflow).")                                           \
  /* slow-path lookups revalidation made */                                    \
  X(kMegaflowsRechecked, megaflows_rechecked, "megaflows_rechecked",           \
    "megaflows rechecked", false, kCounter, kEvents, nullptr, nullptr)         \
  /* What rule changes cost the PMD, in TSC cycles: SetRuleTable (caches */    \
  /* revalidated or flushed; not in `cycles`), and the upcalls' slow-path */   \
  /* lookups and megaflow installs (part of `cycles`). */                      \
  X(kRevalidationCycles, revalidation_cycles, "cycles_revalidation",           \
    "revalidation cycles", true, kCounter, kCycles,                            \
    "flowclass_pmd_revalidation_cycles_total",                                 \
    "TSC cycles spent installing rule changes (revalidating or flushing "      \
    "the caches); not in classifier cycles.")                                  \
  X(kUpcallCycles, upcall_cycles, "cycles_upcall", "upcall cycles", true,      \
    kCounter, kCycles, "flowclass_pmd_upcall_cycles_total",                    \
    "TSC cycles spent in upcalls (slow-path lookups, megaflow installs); "     \
    "part of classifier cycles.")
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
// upcall_failed.
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
  bool rpc;
  PmdCounterKind kind;
  PmdCounterUnit unit;
  const char* metric;  // nullptr: no Prometheus family of its own
  const char* help;
};

inline constexpr PmdCounterInfo kPmdCounters[] = {
#define FLOWCLASS_PMD_COUNTER_INFO(id, field, name, text, rpc, kind, unit,   \
                                   metric, help)                            \
  {PmdCounter::id, &PmdStats::field, name, text, rpc, PmdCounterKind::kind, \
   PmdCounterUnit::unit, metric, help},
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

// One line of the pmd-stats-show style dumps: "  <text>: <value>\n".
inline void AppendPmdCounterLine(std::string* out, const PmdCounterInfo& c,
                                 uint64_t value) {
  out->append("  ").append(c.text).append(": ").append(std::to_string(value));
  out->push_back('\n');
}

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_PMD_COUNTERS_H_
