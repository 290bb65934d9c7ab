// rule_table.h — the slow-path classifier: a priority-aware tuple space.
//
// Contract
// --------
// * One subtable per distinct (expanded) mask.  A rule whose match has port
//   ranges is expanded into one or more masked entries (each range split into
//   aligned prefixes, the two ranges crossed); each entry lands in the
//   subtable of its mask.  Expansion counts are reported in Stats().
// * Lookup visits subtables in descending order of the highest priority they
//   hold and stops as soon as no remaining subtable can beat (or tie with)
//   the best match so far.  It returns the winning rule and ORs into `wc` the
//   mask of every subtable it consulted: the megaflow mask.  Every key that
//   agrees with the looked-up key on the bits of `wc` gets the same answer.
// * ApplyBatch validates every operation first (ValidateRule, ids, limits)
//   and changes nothing unless all of them are valid; errors name the
//   operation index, the rule id and the field.
// * Threads: not thread-safe.  One writer; readers only when no writer runs
//   (the dataplane publishes immutable tables under RCU, see ARCHITECTURE.md).
//   Lookup is const and allocates nothing.
#ifndef FLOWCLASS_DATAPLANE_RULE_TABLE_H_
#define FLOWCLASS_DATAPLANE_RULE_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/flow.h"
#include "dataplane/rule.h"

namespace flowclass {

struct RuleOp {
  enum class Kind : uint8_t {
    kInsert,          // rule.id must not exist
    kDelete,          // delete rule `id`; it must exist
    kReplace,         // rule.id must exist; match, priority, action, cookie replaced
    kDeleteByCookie,  // delete every rule whose cookie == cookie (0 or more)
  };
  Kind kind = Kind::kInsert;
  Rule rule;           // kInsert, kReplace
  uint64_t id = 0;     // kDelete
  uint64_t cookie = 0; // kDeleteByCookie

  static RuleOp Insert(Rule r) { return {Kind::kInsert, std::move(r), 0, 0}; }
  static RuleOp Replace(Rule r) { return {Kind::kReplace, std::move(r), 0, 0}; }
  static RuleOp Delete(uint64_t id) { return {Kind::kDelete, {}, id, 0}; }
  static RuleOp DeleteByCookie(uint64_t c) {
    return {Kind::kDeleteByCookie, {}, 0, c};
  }
};

struct RuleTableLimits {
  size_t max_rules = 4u << 20;
  size_t max_entries = 16u << 20;  // after port-range expansion
};

struct RuleTableStats {
  size_t rules = 0;
  size_t entries = 0;          // masked entries after range expansion
  size_t expanded_rules = 0;   // rules that needed more than one entry
  size_t subtables = 0;
  uint64_t generation = 0;     // +1 per applied batch that changes the rules
};

// A rule shared by the tables of a left-right pair and the AppliedBatch
// between them: one allocation holding the rule and its reference count, and
// 8 bytes per reference (a shared_ptr is 16, and make_shared adds 16 bytes
// to each rule: the id map of a million rules is memory the control thread
// faults in and misses on).  Copies may be made and dropped on any thread;
// in the dataplane only the control thread owns rules (PMDs read `const
// Rule*` from published tables, freed only after a grace period).
class SharedRule {
 public:
  SharedRule() = default;
  static SharedRule Make(const Rule& rule) { return SharedRule(new Node{{1}, rule}); }
  SharedRule(const SharedRule& o) : node_(o.node_) {
    if (node_ != nullptr) node_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  SharedRule(SharedRule&& o) noexcept : node_(std::exchange(o.node_, nullptr)) {}
  SharedRule& operator=(SharedRule o) noexcept {
    std::swap(node_, o.node_);
    return *this;
  }
  ~SharedRule() {
    if (node_ != nullptr && node_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete node_;
  }
  const Rule* get() const { return node_ != nullptr ? &node_->rule : nullptr; }
  const Rule& operator*() const { return node_->rule; }
  const Rule* operator->() const { return &node_->rule; }
  explicit operator bool() const { return node_ != nullptr; }

 private:
  struct Node {
    std::atomic<uint32_t> refs;
    const Rule rule;
  };
  explicit SharedRule(Node* n) : node_(n) {}
  Node* node_ = nullptr;
};

// A batch as ApplyBatch applied it, for the other table of a left-right pair
// to replay: the operations in order, each insert or replace carrying the
// rule object the applying table made.  The replaying table shares that
// object instead of copying the rule (rules are immutable once in a table),
// so a rule costs one allocation for both tables.
struct AppliedOp {
  RuleOp::Kind kind = RuleOp::Kind::kInsert;
  uint64_t key = 0;                   // kDelete: the id; kDeleteByCookie: the cookie
  SharedRule rule;                    // kInsert, kReplace
};
using AppliedBatch = std::vector<AppliedOp>;

// Summary of an applied batch.
struct BatchResult {
  size_t inserted = 0;
  size_t deleted = 0;
  size_t replaced = 0;
  uint64_t generation = 0;
  size_t rules = 0;  // in the table after the batch
};

class RuleTable {
 public:
  explicit RuleTable(RuleTableLimits limits = {});
  ~RuleTable();
  RuleTable(const RuleTable&);  // same rules (the Rule objects are shared)
  RuleTable& operator=(const RuleTable&) = delete;

  // All or nothing.  INVALID_ARGUMENT for a bad rule / unknown or duplicate
  // id, RESOURCE_EXHAUSTED for a limit; the message starts with
  // "operation <i> (rule id <id>): ".  A batch that changes nothing (empty,
  // or only delete-by-cookie of cookies no rule carries) keeps the
  // generation.  When it succeeds and `applied` is not null, *applied
  // receives the batch for ReplayBatch (empty when it changed nothing;
  // untouched on error).
  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops,
                                         AppliedBatch* applied = nullptr);
  // Applies a batch that ApplyBatch accepted on a table holding the same
  // rules as this one (the other table of a left-right pair catching up),
  // without validating it again.  Anything else is undefined behaviour.
  BatchResult ReplayBatch(const AppliedBatch& batch);
  // Removes every rule as one batch: generation +1, `deleted` = the rules
  // there were.  An empty table is left as it is (like an empty batch).
  // No list of the rules and no per-rule operation: the cost is freeing them.
  BatchResult DeleteAll();
  // Empties the table and sets its generation, for the tables of a left-right
  // pair when every rule is deleted: neither needs the batches it has not
  // replayed yet.
  void Clear(uint64_t generation);

  // Winning rule or nullptr; ORs the consulted subtables' masks into *wc
  // (which the caller zeroes).  `subtables_visited`, if not null, receives the
  // number of subtables probed.
  const Rule* Lookup(const Flow& key, Flow* wc,
                     int* subtables_visited = nullptr) const;
  const Rule* Lookup(const FlowKey& key, Flow* wc,
                     int* subtables_visited = nullptr) const;

  const Rule* Find(uint64_t id) const;
  // Rules carrying `cookie` (control path; allocates).
  std::vector<const Rule*> RulesWithCookie(uint64_t cookie) const;
  size_t size() const;
  RuleTableStats Stats() const;
  uint64_t generation() const;
  // Every rule, in (priority desc, id asc) order.
  std::vector<const Rule*> Rules() const;
  std::string DebugString() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True for ApplyBatch's error on a delete or replace of an id the table does
// not hold (INVALID_ARGUMENT; the gRPC API answers NOT_FOUND for it).
bool IsUnknownRuleIdError(const absl::Status& s);

// What a batch changed, for targeted megaflow revalidation.  A cached result
// (value, mask, verdict) computed under the old table stays right under the
// new one when (a) its rule (verdict.rule_id) was neither deleted nor
// replaced, and (b) no changed match overlaps it: the old winner is still
// there and no new or changed rule can match any key it covers (removing a
// losing rule never changes the winner).  `matches` holds every match the
// batch inserted, and the old and new matches of every rule it replaced or
// deleted; bucketed by exact in_port so that a megaflow (whose in_port is
// always exact) checks only the matches that can concern its port.
//
// Built by the control plane (allocates); read by PMDs (no allocation).
struct RuleChangeSet {
  absl::flat_hash_set<uint64_t> removed_ids;  // deleted or replaced
  // Deleted (by id or cookie), even if a later operation inserted the id
  // again: that is a new rule, whose hits start at 0 (a replace keeps them).
  absl::flat_hash_set<uint64_t> deleted_ids;
  absl::flat_hash_map<uint32_t, std::vector<Match>> by_in_port;
  std::vector<Match> any_in_port;  // in_port not matched exactly
  size_t size() const;             // number of matches

  // True when a megaflow (value, mask) computed before the change may now
  // be wrong.  Port ranges are treated as overlapping whenever the other
  // fields overlap (conservative).
  bool MayAffect(const Flow& value, const Flow& mask, uint64_t rule_id) const;

  // Adds the changes of a later step: a megaflow that no step may affect is
  // unchanged across all of them, so the union describes the whole sequence.
  void Merge(RuleChangeSet&& later);

  void Clear();
};

// The change set of `ops` applied to `before` (the table before the batch).
// Call it before applying ops.  Ops are not validated here.
RuleChangeSet MakeRuleChangeSet(const RuleTable& before,
                                absl::Span<const RuleOp> ops);

// Splits [lo, hi] into the minimal list of (value, mask) prefixes over a
// 16-bit field.  Exposed for tests and for the ACL backend.
std::vector<std::pair<uint16_t, uint16_t>> RangeToPrefixes(uint16_t lo,
                                                           uint16_t hi);

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULE_TABLE_H_
