// rule_change_set.cc — RuleChangeSet and MakeRuleChangeSet (see
// rule_change_set.h and rule_table.h).
#include "dataplane/rules/rule_change_set.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {

namespace {

void AddChangedMatch(RuleChangeSet* cs, const Match& m) {
  if (m.mask.Get(Field::kInPort) == 0xffffffffu) {
    cs->by_in_port[static_cast<uint32_t>(m.value.Get(Field::kInPort))]
        .push_back(m);
  } else {
    cs->any_in_port.push_back(m);
  }
}

bool Overlaps(const Match& m, const Flow& value, const Flow& mask) {
  // The addresses first: they tell most pairs apart (the meta and Ethernet
  // words of IP rules rarely do), then the rest without branches.
  constexpr int kFirst = kWordIpv4;
  if ((m.value.w[kFirst] ^ value.w[kFirst]) & m.mask.w[kFirst] & mask.w[kFirst]) return false;
  uint64_t diff = 0;
  for (int i = 0; i < kFlowWords; ++i)
    diff |= (m.value.w[i] ^ value.w[i]) & m.mask.w[i] & mask.w[i];
  return diff == 0;  // port ranges: assume they overlap (conservative)
}

}  // namespace

size_t RuleChangeSet::size() const {
  size_t n = any_in_port.size();
  for (const auto& [port, v] : by_in_port) n += v.size();
  return n;
}

bool RuleChangeSet::MayAffect(const Flow& value, const Flow& mask,
                              uint64_t rule_id) const {
  if (rule_id != 0 && removed_ids.contains(rule_id)) return true;
  auto overlaps = [&](const Match& m) { return Overlaps(m, value, mask); };
  if (auto it = by_in_port.find(static_cast<uint32_t>(value.Get(Field::kInPort)));
      it != by_in_port.end() && it->second.AnyOverlapping(value, mask, overlaps)) {
    return true;
  }
  return any_in_port.AnyOverlapping(value, mask, overlaps);
}

void ChangedMatches::Seal() {
  sealed_.clear();
  start_.fill(0);
  if (chunks_.empty()) return;
  auto bucket = [](const Match& m) {
    return (m.mask.Get(Field::kIpv4Src) >> 24) == 0xff
               ? static_cast<size_t>(m.value.Get(Field::kIpv4Src) >> 24)
               : kNotExact;
  };
  // Counting sort: counts, then starts, then the pointers.
  for (const std::vector<Match>& c : chunks_)
    for (const Match& m : c) ++start_[bucket(m) + 1];
  for (size_t b = 1; b < start_.size(); ++b) start_[b] += start_[b - 1];
  sealed_.resize(start_.back());
  std::array<uint32_t, kNotExact + 1> next;
  std::copy(start_.begin(), start_.end() - 1, next.begin());
  for (const std::vector<Match>& c : chunks_)
    for (const Match& m : c) sealed_[next[bucket(m)]++] = &m;
}

void RuleChangeSet::Seal() {
  for (auto& [port, v] : by_in_port) v.Seal();
  any_in_port.Seal();
}

void ChangedMatches::Splice(ChangedMatches&& later) {
  for (std::vector<Match>& c : later.chunks_) chunks_.push_back(std::move(c));
  later.clear();
  sealed_.clear();
}

size_t ChangedMatches::size() const {
  size_t n = 0;
  for (const std::vector<Match>& c : chunks_) n += c.size();
  return n;
}

void RuleChangeSet::Merge(RuleChangeSet&& later) {
  if (removed_ids.empty()) {
    removed_ids = std::move(later.removed_ids);
  } else {
    removed_ids.insert(later.removed_ids.begin(), later.removed_ids.end());
  }
  deleted_ids.insert(later.deleted_ids.begin(), later.deleted_ids.end());
  for (auto& [port, v] : later.by_in_port) by_in_port[port].Splice(std::move(v));
  any_in_port.Splice(std::move(later.any_in_port));
  later.Clear();
}

void RuleChangeSet::Clear() {
  removed_ids.clear();
  deleted_ids.clear();
  by_in_port.clear();
  any_in_port.clear();
}

RuleChangeSet MakeRuleChangeSet(const RuleTable& before,
                                absl::Span<const RuleOp> ops) {
  RuleChangeSet cs;
  auto remove_old = [&](uint64_t id) {
    cs.removed_ids.insert(id);
    if (const Rule* old = before.Find(id)) AddChangedMatch(&cs, old->match);
  };
  // With a delete by cookie in the batch: the cookie each id inserted or
  // replaced so far carries now (a delete by cookie takes the rules that
  // carry it at that point of the batch, not later, not before).
  const bool by_cookie = std::any_of(ops.begin(), ops.end(), [](const RuleOp& op) {
    return op.kind == RuleOp::Kind::kDeleteByCookie;
  });
  absl::flat_hash_map<uint64_t, uint64_t> cookie_now;
  for (const RuleOp& op : ops) {
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
        AddChangedMatch(&cs, op.rule.match);
        if (by_cookie) cookie_now[op.rule.id] = op.rule.cookie;
        break;
      case RuleOp::Kind::kReplace:
        remove_old(op.rule.id);
        AddChangedMatch(&cs, op.rule.match);
        if (by_cookie) cookie_now[op.rule.id] = op.rule.cookie;
        break;
      case RuleOp::Kind::kDelete:
        remove_old(op.id);
        cs.deleted_ids.insert(op.id);
        break;
      case RuleOp::Kind::kDeleteByCookie:
        // The table's rules with the cookie, unless the batch gave them
        // another one before this op.
        for (const Rule* r : before.RulesWithCookie(op.cookie)) {
          if (auto it = cookie_now.find(r->id); it != cookie_now.end() && it->second != op.cookie)
            continue;
          remove_old(r->id);
          cs.deleted_ids.insert(r->id);
        }
        // Rules inserted or replaced earlier in this batch with the cookie:
        // their matches are already in the set; their ids count as removed.
        for (const auto& [id, cookie] : cookie_now) {
          if (cookie == op.cookie) {
            cs.removed_ids.insert(id);
            cs.deleted_ids.insert(id);
          }
        }
        break;
    }
  }
  return cs;
}

}  // namespace flowclass
