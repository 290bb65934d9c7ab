// libFuzzer target for the rule store's record decoders
// (server/store/internal/store_records.h): the body of a batch row, as read
// from disk, untrusted.  The first byte is the row's operation count, the
// second picks the schema (even: the binary records of schema 2, odd: the
// text of schema 1); the rest is the body.
//
// Invariants (any violation aborts):
//   1. An error is DATA_LOSS with one bounded line of printable text.
//   2. What decodes encodes and decodes back to the same operations.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "server/store/internal/store_records.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool SameOps(const std::vector<flowclass::RuleOp>& a, const std::vector<flowclass::RuleOp>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || !(a[i].rule == b[i].rule) || a[i].id != b[i].id ||
        a[i].cookie != b[i].cookie)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace flowclass;
  using namespace flowclass::store_internal;
  using fuzz::Check;
  if (size < 2) return 0;
  const uint64_t count = data[0];
  const bool text = data[1] & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  absl::StatusOr<std::vector<RuleOp>> ops = text ? DecodeOpsText(body, count) : DecodeOps(body, count);
  if (!ops.ok()) {
    Check(ops.status().code() == absl::StatusCode::kDataLoss, "a bad record is DATA_LOSS");
    fuzz::CheckErrorMessage(ops.status());
    return 0;
  }
  Check(ops->size() == count, "as many operations as the row says");
  const std::string again = text ? EncodeOpsText(*ops) : EncodeOps(*ops);
  absl::StatusOr<std::vector<RuleOp>> back = text ? DecodeOpsText(again, count) : DecodeOps(again, count);
  Check(back.ok() && SameOps(*back, *ops), "decoded operations encode and decode back");
  return 0;
}
