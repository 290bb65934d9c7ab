// rule.h — what a controller asks for: match, priority, action, cookie, id.
//
// Contract
// --------
// A Rule is a plain value.  `ValidateRule` is the single gate every rule passes
// before it reaches a RuleTable (the gRPC server, the file loaders and the
// tests all call it through RuleTable::ApplyBatch); it returns an
// absl::Status whose message names the field and the problem, e.g.
//   "ipv4_src: value 0x0a000001 has bits outside mask 0xff000000"
// and whose RuleOpError payload (rule_error.h) holds the same field, typed:
// what callers read.
//
// Matching: a key K matches rule R when
//   (K & R.match.mask) == R.match.value            for every word, and
//   R.match.tp_src.lo <= K.tp_src <= R.match.tp_src.hi   (same for tp_dst).
// A port range replaces the mask of that field: when a range is set, the
// field's mask must be zero.  The full range 0-65535 is "no range".
//
// Winner among several matching rules: the highest priority; among equal
// priorities, the lowest rule id (deterministic tie-break, see
// docs/classifier.md).
#ifndef FLOWCLASS_DATAPLANE_RULES_RULE_H_
#define FLOWCLASS_DATAPLANE_RULES_RULE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "dataplane/flow/flow.h"

namespace flowclass {

struct PortRange {
  uint16_t lo = 0;
  uint16_t hi = 0xffff;
  bool IsFull() const { return lo == 0 && hi == 0xffff; }
  bool Contains(uint16_t p) const { return lo <= p && p <= hi; }
  friend bool operator==(const PortRange&, const PortRange&) = default;
};

struct Match {
  Flow value;  // must satisfy value == value & mask
  Flow mask;
  PortRange tp_src;  // full range = not used
  PortRange tp_dst;

  bool Matches(const Flow& key) const {
    for (int i = 0; i < kFlowWords; ++i)
      if ((key.w[i] & mask.w[i]) != value.w[i]) return false;
    return tp_src.Contains(static_cast<uint16_t>(key.Get(Field::kTpSrc))) &&
           tp_dst.Contains(static_cast<uint16_t>(key.Get(Field::kTpDst)));
  }
  // Convenience for tests and loaders: set one field exactly or under a mask.
  void SetExact(Field f, uint64_t v) { SetMasked(f, v, ~uint64_t{0}); }
  void SetMasked(Field f, uint64_t v, uint64_t m) {
    value.Set(f, v & m);
    mask.Set(f, m);
  }
  friend bool operator==(const Match&, const Match&) = default;
};

struct Action {
  enum class Kind : uint8_t { kDrop = 0, kOutput = 1 };
  Kind kind = Kind::kDrop;
  uint32_t port = 0;  // for kOutput

  static Action Drop() { return {}; }
  static Action Output(uint32_t p) { return {Kind::kOutput, p}; }
  std::string ToString() const;  // "drop" or "output:3"
  friend bool operator==(const Action&, const Action&) = default;
};

// Largest output port number accepted ("unknown action" otherwise).
inline constexpr uint32_t kMaxPortNumber = 0xffff;

struct Rule {
  uint64_t id = 0;        // unique within a table, non-zero
  uint32_t priority = 0;  // higher wins
  uint64_t cookie = 0;    // opaque to us; controllers delete by it
  Match match;
  Action action;

  // "id=3,priority=10,cookie=0x1,<match>,actions=output:2" (native format).
  std::string ToString() const;
  friend bool operator==(const Rule&, const Rule&) = default;
};

// Checks one rule on its own (not against a table): id non-zero, value
// inside mask, ranges ordered and not combined with a mask on the same field,
// IPv4 fields only with eth_type 0x0800, IPv6 only with 0x86dd, L4 fields only
// with an IP eth_type, VLAN TCI values carrying the present bit, a known
// action kind and an output port <= kMaxPortNumber.
absl::Status ValidateRule(const Rule& rule);

// Returns true when `a` beats `b` (priority, then lower id).
inline bool RuleBeats(const Rule& a, const Rule& b) {
  return a.priority != b.priority ? a.priority > b.priority : a.id < b.id;
}

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_RULE_H_
