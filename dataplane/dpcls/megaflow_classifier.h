// megaflow_classifier.h — the megaflow classifier ("dpcls"): a tuple-space
// search over non-overlapping megaflows, one ranked subtable list per in_port.
//
// Contract
// --------
// * Threads: a MegaflowClassifier belongs to one PMD thread, like the
//   MegaflowPool it allocates from.  Every method, including Install/Remove
//   (upcall handling) and Rank (timer), is called from that thread.  The
//   introspection calls (Subtables, DebugString) are also owner-thread calls;
//   another thread must ask the PMD to run them.
// * Memory: everything is sized from MegaflowClassifierOptions and the pool
//   capacity and allocated in Create().  Install, Remove, Clear, Rank and the
//   lookups never touch the heap.  Only Subtables() and DebugString() (control
//   path) allocate their results.
// * Megaflows: Install() takes the megaflow mask as the RuleTable produced it;
//   it must match in_port exactly (Install returns nullptr otherwise), which
//   partitions megaflows by in_port.  Live megaflows must not overlap (the
//   RuleTable guarantees it), so no priorities exist: at most one megaflow
//   covers a key and the first subtable that hits is the answer.
//   A megaflow returned by Install stays valid until Remove(mf) or Clear();
//   it must be released only through them (never MegaflowPool::Free
//   directly), since the classifier's table still names it.
// * Hot path: LookupBurst and LookupInSubtable allocate nothing, lock
//   nothing, log nothing, throw nothing; they return a hit bitmask over the
//   burst and write out[i] only for hit bits i (misses and bits outside
//   todo_map are left untouched).  keys[i] is read only for i in todo_map.
// * Ranking: each port's subtables are probed in rank order.  Rank() re-sorts
//   every port's list by hits since the previous Rank() (descending, stable:
//   ties keep their order), then zeroes those counters.  New subtables are
//   appended at the end of their port's list.  O(subtables) when the order
//   is unchanged, allocation-free.
// * Subtable ids are uint16 slots in [0, max_subtables); an id is reused after
//   its subtable empties and is destroyed.  A stale id handed to
//   LookupInSubtable is harmless: it probes nothing (destroyed) or another
//   subtable whose megaflows are verified on hit like any other.
//
// Layout (details in internal/subtable.h): one shared cuckoo hash table of
// 64-byte buckets (8 x {32-bit signature, 32-bit megaflow index}), two
// candidate buckets per key, keyed by Hash(masked key words, subtable basis);
// a fixed array of subtable descriptors indexed by id; per port slot an array
// of subtable ids in rank order; a small open-addressing map in_port -> slot.
#ifndef FLOWCLASS_DATAPLANE_DPCLS_MEGAFLOW_CLASSIFIER_H_
#define FLOWCLASS_DATAPLANE_DPCLS_MEGAFLOW_CLASSIFIER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dataplane/flow/flow.h"
#include "dataplane/dpcls/megaflow.h"
#include "dataplane/dpcls/internal/subtable.h"
#include "dataplane/dpcls/subtable_lookup.h"

namespace flowclass {

struct MegaflowClassifierOptions {
  // Distinct in_port values tracked at once (each needs a slot while it has
  // at least one megaflow).
  uint32_t max_ports = 64;
  // Subtables across all ports; ids are [0, max_subtables), <= 65535.
  uint32_t max_subtables = 1024;
  // Hash table entries; 0 = 2 x pool capacity.  Rounded up to a power-of-two
  // number of 8-entry buckets (at least 2 buckets).
  uint32_t table_entries = 0;
  // Tests only: replaces HashWords (e.g. a constant hash to force collisions).
  uint64_t (*hash_override)(const uint64_t* words, int n,
                            uint64_t basis) = nullptr;
  // Which subtable lookup implementation each subtable uses
  // (subtable_lookup.h): priorities and the force-scalar switch.
  LookupPriorities lookup;
  // Tests only: one more implementation the autovalidator checks beside the
  // registered ones (a deliberately wrong one proves differences are caught).
  internal::SubtableLookupFn extra_validated_lookup = nullptr;
};

// Introspection of one subtable (control path).
struct SubtableInfo {
  uint16_t id = 0;
  uint32_t in_port = 0;
  Flow mask;
  uint32_t megaflows = 0;
  uint64_t hits = 0;  // total since the subtable was created
  int rank = 0;       // 0-based position in its port's list
  std::string lookup_fn;
};

class MegaflowClassifier {
 public:
  // `pool` must outlive the classifier.  Errors: INVALID_ARGUMENT naming the
  // option (null pool, max_ports or max_subtables 0 or > 65535, their
  // product > 2^24, table too large).
  static absl::StatusOr<std::unique_ptr<MegaflowClassifier>> Create(
      MegaflowPool* pool, const MegaflowClassifierOptions& options = {});

  MegaflowClassifier(const MegaflowClassifier&) = delete;
  MegaflowClassifier& operator=(const MegaflowClassifier&) = delete;
  ~MegaflowClassifier();

  // Why Install returned nullptr.
  enum class InstallError : uint8_t {
    kNone,
    // megaflow_limit() megaflows exist (or the pool is full).
    kMegaflowLimit,
    // A new subtable was needed on a port that has
    // max_subtables_per_port() of them.
    kSubtablesPerPort,
    // A new subtable was needed on a port that has the caller's
    // `new_subtable_limit` of them (below max_subtables_per_port()).
    kNewSubtableLimit,
    // Anything else: the mask does not match in_port exactly, the port
    // slots or the subtables of all ports are used up, or the table's probe
    // sequence is full.
    kOther,
  };

  // Installs (value & mask, mask, verdict).  Returns the megaflow (with
  // mf->subtable set), the already installed equal megaflow (same mask and
  // masked value; its verdict is kept), or nullptr when the mask does not
  // match in_port exactly, or the megaflow limit, the pool, the port slots,
  // the subtables (of the port: max_subtables_per_port; of all ports:
  // max_subtables) or the table's probe sequence are full; `*why` (when
  // given) says which.  On nullptr nothing changed.  `new_subtable_limit`:
  // a lower cap on the port's subtables for this install only (kNewSubtableLimit).
  Megaflow* Install(const Flow& value, const Flow& mask, const Verdict& v,
                    InstallError* why = nullptr,
                    uint32_t new_subtable_limit = 0xffffffffu);
  // Subtables of `in_port` (0 when it has none).
  uint32_t PortSubtableCount(uint32_t in_port) const;

  // Soft caps under the sizes fixed at Create (owner thread, O(1)).
  // Lowering one below what is installed removes nothing: installs that
  // would exceed it fail until removals bring the count under it.
  // megaflow_limit: megaflows in all (at most the pool's capacity is
  // reachable; default unlimited).  max_subtables_per_port: subtables one
  // in_port may have (default max_subtables).
  void set_megaflow_limit(uint32_t n) { megaflow_limit_ = n; }
  uint32_t megaflow_limit() const { return megaflow_limit_; }
  void set_max_subtables_per_port(uint32_t n) { max_subtables_per_port_ = n; }
  uint32_t max_subtables_per_port() const { return max_subtables_per_port_; }

  // Removes `mf` and frees it in the pool; destroys its subtable (and port
  // slot) when they become empty.  A null, dead or foreign megaflow is
  // ignored.
  void Remove(Megaflow* mf);

  // Removes and frees every megaflow; destroys every subtable.
  void Clear();

  // Looks up keys[i] for every bit i of todo_map (all keys have `in_port`).
  // Subtables are visited in rank order until no key remains.  For each hit:
  // out[i] = megaflow, megaflow->hits and the subtable's hit counters are
  // incremented, and *lookups_on_hits += rank position + 1.
  uint32_t LookupBurst(uint32_t in_port, const FlowKey* keys,
                       uint32_t todo_map, Megaflow** out,
                       uint64_t* lookups_on_hits);

  // Probes only subtable `subtable_id` (the Cuckoo Distributor path).  Counts
  // hits like LookupBurst.  A stale or destroyed id returns 0.
  uint32_t LookupInSubtable(uint16_t subtable_id, const FlowKey* keys,
                            uint32_t todo_map, Megaflow** out);

  // The Cuckoo Distributor path for a whole burst: for every bit i of
  // todo_map, probes only subtable sub[i] for keys[i] (each key its own
  // subtable).  Staged across the burst, VPP-style, so that the memory
  // latency of one key hides behind the work of the others: (1) hash every
  // key under its subtable and prefetch both buckets; (2) scan the buckets
  // for the signature and prefetch each candidate megaflow; (3) verify.
  // Per key, the same answer as LookupInSubtable(sub[i], ...).  Counts hits
  // like LookupBurst; *rank_sum += the hit subtable's rank + 1 per hit.  A
  // stale or destroyed id is a miss.  Subtables under the autovalidator
  // are probed through their lookup function, one key at a time.
  uint32_t LookupSuggested(const FlowKey* keys, uint32_t todo_map,
                           const uint16_t* sub, Megaflow** out,
                           uint64_t* rank_sum);

  // Trace (control path, on the owning thread): what LookupBurst would do
  // for `key`, counting nothing.  Appends the subtable ids probed, in rank
  // order up to the hit, to *visited; returns the megaflow, or nullptr.
  const Megaflow* Trace(const FlowKey& key, std::vector<uint16_t>* visited) const;
  // What LookupInSubtable would return for `key`, counting nothing.
  const Megaflow* TraceSubtable(uint16_t subtable_id, const FlowKey& key) const;

  // 0-based position of the subtable in its port's ranking, -1 if none.
  int RankOf(uint16_t subtable_id) const;

  // Re-sorts each port's subtables by hits since the last Rank().
  void Rank();

  // Lookup implementation priorities (subtable_lookup.h).  Setting them
  // re-probes every existing subtable, so the change applies from the next
  // lookup on.  Owner thread; allocation-free.  INVALID_ARGUMENT for an
  // unknown name or a priority outside [0, 255] (nothing changes then).
  absl::Status SetLookupPriority(std::string_view name, int priority);
  void SetLookupPriorities(const LookupPriorities& priorities);
  const LookupPriorities& lookup_priorities() const {
    return selection_.priorities;
  }
  // Differences the autovalidator found in this classifier's subtables.
  uint64_t lookup_mismatches() const { return lookup_mismatches_; }

  // True when some megaflow matches `in_port` (the port has a slot: it
  // goes with its last subtable).  Owner thread; allocation-free.
  bool HasPort(uint32_t in_port) const { return FindPortSlot(in_port) >= 0; }

  size_t megaflow_count() const { return megaflow_count_; }
  size_t subtable_count() const { return subtable_count_; }
  size_t port_count() const { return port_count_; }
  size_t table_capacity() const {
    return size_t{table_.bucket_mask + 1} * internal::kBucketEntries;
  }

  // Walks every structure and checks it against the others: each table entry
  // names a live megaflow of a live subtable and sits in one of its two
  // buckets under its signature; per-subtable, per-port and total counts
  // agree; ranks are a permutation; the in_port map finds every port.
  // O(table); for tests and `flowclassctl` debugging.  INTERNAL on failure,
  // naming the first broken structure.
  absl::Status CheckInvariants() const;

  // Control path; allocate.  Subtables() is ordered by port slot, then rank.
  std::vector<SubtableInfo> Subtables() const;
  std::string DebugString() const;

 private:
  MegaflowClassifier(MegaflowPool* pool, const MegaflowClassifierOptions& o,
                     uint32_t n_buckets);

  // in_port -> port slot map (linear probing, backward-shift deletion).
  int FindPortSlot(uint32_t in_port) const;
  int AddPortSlot(uint32_t in_port);  // -1 when max_ports slots are in use
  void RemovePortSlot(uint32_t in_port);

  internal::SubtableDesc* FindSubtable(int port_slot, const Flow& mask);
  internal::SubtableDesc* CreateSubtable(int port_slot, uint32_t in_port,
                                         const Flow& mask);
  void DestroySubtable(internal::SubtableDesc* st);

  // Table operations keyed by a megaflow of subtable `st`.
  bool TableInsert(uint64_t hash, uint32_t index);
  bool TableErase(uint64_t hash, uint32_t index);
  uint64_t HashOf(const internal::SubtableDesc& st, const Flow& value) const;

  void CountHits(internal::SubtableDesc& st, uint32_t hits, Megaflow** out);

  void ReprobeSubtables();

  MegaflowPool* pool_;
  MegaflowClassifierOptions options_;
  internal::LookupSelection selection_;
  uint64_t lookup_mismatches_ = 0;

  internal::Table table_;
  std::unique_ptr<internal::Bucket[]> buckets_;

  std::unique_ptr<internal::SubtableDesc[]> subtables_;  // by id
  std::unique_ptr<uint16_t[]> free_ids_;                 // stack
  uint32_t n_free_ids_ = 0;

  // Port slots: ranked_[slot * max_subtables + r] is the id at rank r.
  std::unique_ptr<uint16_t[]> ranked_;
  std::unique_ptr<uint32_t[]> port_n_subtables_;  // by slot
  std::unique_ptr<uint32_t[]> port_of_slot_;      // by slot
  std::unique_ptr<uint16_t[]> free_slots_;        // stack
  uint32_t n_free_slots_ = 0;
  // Open-addressing map: port_map_slot_[b] == -1 means empty.
  std::unique_ptr<uint32_t[]> port_map_port_;
  std::unique_ptr<int32_t[]> port_map_slot_;
  uint32_t port_map_mask_ = 0;

  uint32_t megaflow_limit_ = 0xffffffffu;
  uint32_t max_subtables_per_port_ = 0xffffffffu;

  size_t megaflow_count_ = 0;
  size_t subtable_count_ = 0;
  size_t port_count_ = 0;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPCLS_MEGAFLOW_CLASSIFIER_H_
