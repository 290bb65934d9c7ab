// libFuzzer target for the ClassBench readers (rule_format.h): the text as a
// filter file (ParseClassBench) and as a trace (ParseTrace).
//
// Invariants (any violation aborts):
//   1. An error is one bounded line of printable text (fuzz_check.h).
//   2. A parsed filter set numbers its rules 1..N, priorities N..1, each an
//      IPv4 rule (eth_type 0x0800 exact), and prints as native text that
//      parses back to the same rule.
//   3. A ClassBench protocol is exact or any: a parsed rule's nw_proto mask
//      is 0 or 0xff (a cut "0x06/0" line is refused, never widened).
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
  absl::StatusOr<std::vector<Rule>> rules = ParseClassBench(text, {}, &lines);
  if (!rules.ok()) {
    fuzz::CheckErrorMessage(rules.status());
  } else {
    const size_t n = rules->size();
    Check(lines.size() == n, "one line per rule");
    for (size_t i = 0; i < n; ++i) {
      const Rule& r = (*rules)[i];
      Check(r.id == i + 1, "ids 1..N");
      Check(r.priority == n - i, "priorities N..1");
      Check(r.match.value.Get(Field::kEthType) == kEthTypeIpv4 &&
                r.match.mask.Get(Field::kEthType) == 0xffff,
            "eth_type 0x0800 exact");
      const uint64_t proto_mask = r.match.mask.Get(Field::kNwProto);
      Check(proto_mask == 0 || proto_mask == 0xff, "nw_proto exact or any");
      absl::StatusOr<Rule> again = ParseNativeRule(r.ToString(), r.id);
      Check(again.ok() && *again == r, "native text of a ClassBench rule parses back");
    }
  }

  absl::StatusOr<std::vector<TraceEntry>> trace = ParseTrace(text);
  if (!trace.ok()) fuzz::CheckErrorMessage(trace.status());
  return 0;
}
