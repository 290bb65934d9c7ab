// libFuzzer target for the native rule text (rule_format.h): a file's worth
// of text through ParseNativeRules.
//
// Invariants (any violation aborts):
//   1. An error is one bounded line of printable text (fuzz_check.h).
//   2. A parsed rule set prints and parses back to itself: FormatNativeRules
//      then ParseNativeRules gives equal rules, in order.
//   3. The lines vector has one entry per rule, each a line of the text.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "dataplane/rules/rule_format.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace flowclass;
  using fuzz::Check;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<size_t> lines;
  absl::StatusOr<std::vector<Rule>> rules = ParseNativeRules(text, &lines);
  if (!rules.ok()) {
    fuzz::CheckErrorMessage(rules.status());
    return 0;
  }
  Check(lines.size() == rules->size(), "one line per rule");
  for (size_t l : lines) Check(l >= 1 && l <= size + 1, "line inside the text");
  const std::string printed = FormatNativeRules(*rules);
  absl::StatusOr<std::vector<Rule>> again = ParseNativeRules(printed);
  Check(again.ok(), "printed rules parse");
  Check(again->size() == rules->size(), "printed rules: same count");
  for (size_t i = 0; i < rules->size(); ++i)
    Check((*again)[i] == (*rules)[i], "printed rule parses back to itself");
  return 0;
}
