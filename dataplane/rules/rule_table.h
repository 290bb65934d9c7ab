// rule_table.h — the slow-path classifier: a priority-aware tuple space.
//
// Contract
// --------
// * Rules whose in_port is exact are partitioned by it: a key's lookup walks
//   its port's subtables and those of the rules without in_port, never
//   another port's (see "Partitions by in_port" in docs/classifier.md).
// * Every rule is one entry (port ranges are not expanded), in the subtable
//   of its table mask in its partition: its match mask relaxed to a few
//   coarse shapes (IPv4 prefixes to multiples of 16 bits; ports left out
//   when the rule has an IPv4 prefix), a function of the rule alone.  A bucket's
//   rules are checked against the key, ranges included.  Stats() reports
//   one entry per rule.
// * Lookup visits those subtables in descending order of the highest
//   priority they hold and stops as soon as no remaining subtable can beat
//   (or tie with) the best match so far; a subtable whose mask needs a
//   longer address or port prefix than any entry shares with the key is
//   skipped.  It returns the winning rule and ORs into `wc` the bits its
//   decisions read: the mask of each subtable probed, the first missing
//   prefix level of each one skipped, the winner's mask and in-range bits,
//   and a disproving bit for each rule that had to lose (see "The megaflow
//   mask" in docs/classifier.md): the megaflow mask.  Every key that agrees
//   with the looked-up key on the bits of `wc` gets the same answer.
// * ApplyBatch validates every operation first (ValidateRule, ids, limits)
//   and changes nothing unless all of them are valid; errors name the
//   operation index, the rule id and the field, in the message and, typed,
//   in a RuleOpError payload (rule_error.h).
// * Threads: one writer.  By default readers run only when no writer does.
//   A table made with `concurrent_readers` may also be read by Lookup on
//   other threads while the writer applies batches (the dataplane's one
//   table, read by every PMD; see "One table, read while written" in
//   docs/classifier.md):
//     - every rule carries the generations it lives in: a batch's rules are
//       added with the batch's generation, and a delete only marks the rule
//       with it, so a Lookup at generation G sees exactly the rule set G
//       whatever the writer is doing;
//     - the writer never changes memory a reader may be reading: a slot is
//       filled before it is published, a key's rule list is replaced, not
//       edited, and a grown slot array, an emptied subtable and the old
//       subtable order (the Order, and the walks and walk blocks it
//       replaced) are handed to FreeRetired instead of freed;
//     - the caller tells the table when readers have moved on:
//       RemoveDeleted once no reader looks up at a generation older than
//       generation(), FreeRetired once every reader has passed a quiescent
//       point after the memory was retired (the dataplane: after its
//       publication's grace period).
//   Lookup is const and allocates nothing; everything else is the writer's
//   (Find, Rules, Stats, ... run on the writer's thread or under its lock).
#ifndef FLOWCLASS_DATAPLANE_RULES_RULE_TABLE_H_
#define FLOWCLASS_DATAPLANE_RULES_RULE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_change_set.h"
#include "dataplane/rules/rule_error.h"

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

// They bound the rule set a batch leaves.  With concurrent readers, deleted
// and replaced rules stay linked until RemoveDeleted, so a table may briefly
// hold more entries: those its unpublished batches deleted.
struct RuleTableLimits {
  size_t max_rules = 4u << 20;
  size_t max_entries = 16u << 20;  // one per rule (ranges are not expanded)
};

struct RuleTableStats {
  size_t rules = 0;
  size_t entries = 0;          // one per rule (ranges are checked, not expanded)
  size_t expanded_rules = 0;   // rules that needed more than one entry: 0
  size_t subtables = 0;
  uint64_t generation = 0;     // +1 per applied batch that changes the rules
};

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
  // Lookup's generation when none is given: the table's own (the writer's
  // view, or a reader that runs only when no writer does).
  static constexpr uint64_t kLatestGeneration = ~uint64_t{0};

  explicit RuleTable(RuleTableLimits limits = {}, bool concurrent_readers = false);
  ~RuleTable();
  RuleTable(const RuleTable&);  // same rules, no concurrent readers
  RuleTable& operator=(const RuleTable&) = delete;

  // All or nothing.  INVALID_ARGUMENT for a bad rule / unknown or duplicate
  // id, RESOURCE_EXHAUSTED for a limit; the message starts with
  // "operation <i> (rule id <id>): <field>: ".  Every error carries a
  // RuleOpError (GetRuleOpError) with the operation's index and rule id, the
  // field and the kind: kInvalid, kAlreadyExists (insert of an id there is),
  // kNotFound (delete or replace of an id there is not), kLimit (max_rules,
  // max_entries).  A batch that changes nothing (empty,
  // or only delete-by-cookie of cookies no rule carries) keeps the
  // generation.  Without concurrent readers, deleted rules and retired
  // memory are freed before it returns.
  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops);
  // Concurrent readers only (a no-op otherwise, where ApplyBatch does both):
  // RemoveDeleted unlinks the rules deleted by the batches applied so far;
  // call it when no reader looks up at an older generation than
  // generation().  What it unlinks is retired, like the memory batches
  // replace.  FreeRetired frees what was retired before it; call it when
  // every reader has passed a quiescent point since.  Returns the number of
  // rules unlinked / blocks freed.
  size_t RemoveDeleted();
  size_t FreeRetired();
  // Removes every rule as one batch: generation +1, `deleted` = the rules
  // there were.  An empty table is left as it is (like an empty batch).
  // No list of the rules and no per-rule operation: the cost is freeing them
  // (with concurrent readers: marking each deleted, as a batch would; the
  // dataplane publishes a new empty table instead).
  BatchResult DeleteAll();
  // Empties the table and sets its generation (no reader may be using it:
  // the dataplane publishes a new empty table instead, see DeleteAll there).
  void Clear(uint64_t generation);

  // Winning rule of the rule set of `generation` (a generation the table
  // has reached, and not older than the last RemoveDeleted's) or nullptr;
  // ORs the bits the answer depends on into *wc (which the caller zeroes).
  // `subtables_visited`, if not null, receives the number of subtables the
  // walk reached (probed, or skipped by a prefix level).  The rule stays valid until the reader's next quiescent point.
  const Rule* Lookup(const Flow& key, Flow* wc,
                     int* subtables_visited = nullptr,
                     uint64_t generation = kLatestGeneration) const;
  const Rule* Lookup(const FlowKey& key, Flow* wc,
                     int* subtables_visited = nullptr,
                     uint64_t generation = kLatestGeneration) const;

  // The writer's view (the latest generation).
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

// The change set (rule_change_set.h) of `ops` applied to `before` (the
// table before the batch).  Call it before applying ops.  Ops are not
// validated here.
RuleChangeSet MakeRuleChangeSet(const RuleTable& before,
                                absl::Span<const RuleOp> ops);

// Splits [lo, hi] into the minimal list of (value, mask) prefixes over a
// 16-bit field.  Exposed for tests and for the ACL backend.
std::vector<std::pair<uint16_t, uint16_t>> RangeToPrefixes(uint16_t lo,
                                                           uint16_t hi);

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_RULE_TABLE_H_
