// libFuzzer target for the flow text a trace takes (`flowclassctl trace`,
// the Trace RPC): ParseNativePacket, the native match syntax with exact
// values only.
//
// Invariants (any violation aborts):
//   1. An error is one bounded line of printable text (fuzz_check.h).
//   2. A parsed packet is a match of exact values: the same text with
//      ",actions=drop" is a rule whose match is that packet's exact fields
//      (every bit of the value inside the rule's mask).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dataplane/rules/rule_format.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace flowclass;
  using fuzz::Check;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Flow> flow = ParseNativePacket(text);
  if (!flow.ok()) {
    fuzz::CheckErrorMessage(flow.status());
    return 0;
  }
  if (text.find('#') != std::string_view::npos) return 0;  // a comment would hide the action
  absl::StatusOr<Rule> rule = ParseNativeRule(std::string(text) + ",actions=drop", 1);
  if (rule.ok()) {
    for (int i = 0; i < kFlowWords; ++i)
      Check((flow->w[i] & ~rule->match.mask.w[i]) == 0, "packet bits inside the rule's mask");
    Check(rule->match.Matches(*flow), "the rule of a packet's text matches the packet");
  } else {
    fuzz::CheckErrorMessage(rule.status());
  }
  return 0;
}
