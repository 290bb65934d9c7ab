// rule_table_testing.h — helpers of the RuleTable tests (header-only):
// rules with output:<id>, five-tuple keys, a table's rules, and iteration
// counts that shrink under ASan.
#ifndef FLOWCLASS_TESTS_COMMON_RULE_TABLE_TESTING_H_
#define FLOWCLASS_TESTS_COMMON_RULE_TABLE_TESTING_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"
#include "gtest/gtest.h"
#include "tests/common/rule_builders.h"
#include "tests/common/sanitizer.h"

namespace flowclass {

// Iteration counts shrink under ASan so every binary stays well under 20 s.
inline int Scaled(int n) { return kSanitized ? std::max(1, n / 10) : n; }

inline uint64_t IdOf(const Rule* r) { return r == nullptr ? 0 : r->id; }

inline std::string Dump(const Flow& f) {
  std::string out;
  for (int i = 0; i < kFlowWords; ++i)
    absl::StrAppend(&out, i ? " " : "", absl::StrFormat("%016x", f.w[i]));
  return out;
}

inline std::vector<Rule> Snapshot(const RuleTable& t) {
  std::vector<Rule> out;
  for (const Rule* r : t.Rules()) out.push_back(*r);
  return out;
}

// The rule builders of tests/common with output:<id>.
inline Rule V4Rule(uint64_t id, uint32_t priority) {
  return Ipv4Rule(id, priority, Action::Output(static_cast<uint32_t>(id)));
}
inline Rule SrcRule(uint64_t id, uint32_t priority, uint32_t src) {
  return Ipv4SrcRule(id, priority, src, 32, Action::Output(static_cast<uint32_t>(id)));
}
inline Rule DstRule(uint64_t id, uint32_t priority, uint32_t dst, int len) {
  return Ipv4DstRule(id, priority, dst, len, Action::Output(static_cast<uint32_t>(id)));
}

inline Flow V4Key(uint32_t src, uint32_t dst, uint16_t sp = 1000, uint16_t dp = 80,
                  uint8_t proto = kIpProtoTcp, uint32_t in_port = 1) {
  return MakeFiveTupleKey(src, dst, sp, dp, proto, in_port).ToFlow();
}

inline void ApplyOk(RuleTable* t, const std::vector<RuleOp>& ops) {
  const auto r = t->ApplyBatch(ops);
  ASSERT_TRUE(r.ok()) << r.status();
}

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_RULE_TABLE_TESTING_H_
