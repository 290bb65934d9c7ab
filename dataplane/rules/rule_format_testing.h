// rule_format_testing.h — helpers of the rule format tests
// (rule_format*_test.cc; header-only).
#ifndef FLOWCLASS_DATAPLANE_RULES_RULE_FORMAT_TESTING_H_
#define FLOWCLASS_DATAPLANE_RULES_RULE_FORMAT_TESTING_H_

#include <cstdint>

namespace flowclass {

// The IPv4 address a.b.c.d in host order.
inline uint32_t Ip(int a, int b, int c, int d) {
  return (uint32_t(a) << 24) | (uint32_t(b) << 16) | (uint32_t(c) << 8) |
         uint32_t(d);
}

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_RULE_FORMAT_TESTING_H_
