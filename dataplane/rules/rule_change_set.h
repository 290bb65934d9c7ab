// rule_change_set.h — RuleChangeSet: what a rule batch changed.
// MakeRuleChangeSet (rule_table.h) makes one from a table and the batch
// about to be applied to it.
//
// Contract
// --------
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
#ifndef FLOWCLASS_DATAPLANE_RULES_RULE_CHANGE_SET_H_
#define FLOWCLASS_DATAPLANE_RULES_RULE_CHANGE_SET_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"

namespace flowclass {

// The matches of one bucket, in the chunks the steps of a group added:
// merging a later step moves its chunks, never copies its matches (a
// thousand inserts are a thousand 144-byte matches).
class ChangedMatches {
 public:
  ChangedMatches() = default;
  // A move keeps the index (it points into the chunks' buffers, which move
  // with them); a copy has none until sealed.
  ChangedMatches(ChangedMatches&&) noexcept = default;
  ChangedMatches& operator=(ChangedMatches&&) noexcept = default;
  ChangedMatches(const ChangedMatches& o) : chunks_(o.chunks_) {}
  ChangedMatches& operator=(const ChangedMatches& o) {
    chunks_ = o.chunks_;
    sealed_.clear();
    return *this;
  }

  // Into the last chunk while it has room, else into a new one of twice its
  // capacity: no match is copied twice as the set grows.
  void push_back(const Match& m) {
    if (chunks_.empty() || chunks_.back().size() == chunks_.back().capacity()) {
      const size_t cap = chunks_.empty() ? 16 : std::min<size_t>(2 * chunks_.back().capacity(), 4096);
      chunks_.emplace_back().reserve(cap);
    }
    chunks_.back().push_back(m);
    sealed_.clear();
  }
  void Splice(ChangedMatches&& later);
  size_t size() const;
  bool empty() const { return chunks_.empty(); }
  void clear() {
    chunks_.clear();
    sealed_.clear();
  }
  // Control thread, once the set is complete (before it is published):
  // indexes the matches by the top byte of ipv4_src, for AnyOverlapping.
  // Changing the set drops the index.
  void Seal();
  // True when pred(match) holds for some match.  No allocation.
  template <typename Pred>
  bool AnyOf(Pred&& pred) const {
    for (const std::vector<Match>& c : chunks_)
      for (const Match& m : c)
        if (pred(m)) return true;
    return false;
  }
  // The same, for a pred that can only hold for a match overlapping a
  // megaflow (value, mask): once sealed, when the megaflow's mask covers
  // the top byte of ipv4_src, only the matches with that top byte or with
  // it not exact are tried (a thousand changed rules on the megaflow's port
  // were a thousand overlap tests per megaflow).  No allocation.
  template <typename Pred>
  bool AnyOverlapping(const Flow& value, const Flow& mask, Pred&& pred) const {
    if (sealed_.empty() || (mask.Get(Field::kIpv4Src) >> 24) != 0xff) return AnyOf(pred);
    const auto top = static_cast<size_t>(value.Get(Field::kIpv4Src) >> 24);
    for (size_t b : {top, kNotExact}) {
      for (uint32_t i = start_[b]; i < start_[b + 1]; ++i)
        if (pred(*sealed_[i])) return true;
    }
    return false;
  }

 private:
  static constexpr size_t kNotExact = 256;  // bucket of the matches whose top byte is not exact
  std::vector<std::vector<Match>> chunks_;  // none empty
  // Sealed: the matches (in chunks_) grouped by bucket, bucket b at
  // [start_[b], start_[b + 1]); empty when not sealed.
  std::vector<const Match*> sealed_;
  std::array<uint32_t, kNotExact + 2> start_{};
};

struct RuleChangeSet {
  absl::flat_hash_set<uint64_t> removed_ids;  // deleted or replaced
  // Deleted (by id or cookie), even if a later operation inserted the id
  // again: that is a new rule, whose hits start at 0 (a replace keeps them).
  absl::flat_hash_set<uint64_t> deleted_ids;
  absl::flat_hash_map<uint32_t, ChangedMatches> by_in_port;
  ChangedMatches any_in_port;  // in_port not matched exactly
  size_t size() const;             // number of matches

  // True when a megaflow (value, mask) computed before the change may now
  // be wrong.  Port ranges are treated as overlapping whenever the other
  // fields overlap (conservative).
  bool MayAffect(const Flow& value, const Flow& mask, uint64_t rule_id) const;

  // Adds the changes of a later step: a megaflow that no step may affect is
  // unchanged across all of them, so the union describes the whole sequence.
  void Merge(RuleChangeSet&& later);

  // Indexes every bucket (ChangedMatches::Seal), once the set is complete.
  void Seal();

  void Clear();
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_RULE_CHANGE_SET_H_
