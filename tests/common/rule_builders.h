// rule_builders.h — hand-built IPv4 rules for the classifier tests
// (header-only): eth_type 0x0800 exact, plus at most one address prefix.
#ifndef FLOWCLASS_TESTS_COMMON_RULE_BUILDERS_H_
#define FLOWCLASS_TESTS_COMMON_RULE_BUILDERS_H_

#include <cstdint>

#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"

namespace flowclass {

// The mask of a /len IPv4 prefix (len 0..32).
inline uint32_t Prefix32(int len) {
  return len == 0 ? 0 : static_cast<uint32_t>(~uint64_t{0} << (32 - len));
}

// An IPv4 rule that matches nothing else.
inline Rule Ipv4Rule(uint64_t id, uint32_t priority, Action action) {
  Rule r;
  r.id = id;
  r.priority = priority;
  r.match.SetExact(Field::kEthType, kEthTypeIpv4);
  r.action = action;
  return r;
}

// ... matching ipv4_src (or ipv4_dst) under a /len prefix; the address bits
// below the prefix are dropped.
inline Rule Ipv4SrcRule(uint64_t id, uint32_t priority, uint32_t src, int len,
                        Action action) {
  Rule r = Ipv4Rule(id, priority, action);
  r.match.SetMasked(Field::kIpv4Src, src & Prefix32(len), Prefix32(len));
  return r;
}
inline Rule Ipv4DstRule(uint64_t id, uint32_t priority, uint32_t dst, int len,
                        Action action) {
  Rule r = Ipv4Rule(id, priority, action);
  r.match.SetMasked(Field::kIpv4Dst, dst & Prefix32(len), Prefix32(len));
  return r;
}

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_RULE_BUILDERS_H_
