// store_records.cc — see store_records.h.
#include "server/store/internal/store_records.h"

#include <zlib.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "dataplane/rules/rule_format.h"

namespace flowclass {
namespace store_internal {

uint32_t RecordCrc(char tag, std::initializer_list<uint64_t> fields, std::string_view body) {
  uLong c = crc32_z(0L, Z_NULL, 0);
  c = crc32_z(c, reinterpret_cast<const Bytef*>(&tag), 1);
  for (uint64_t f : fields) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(f >> (8 * i));
    c = crc32_z(c, b, sizeof b);
  }
  // (A null buffer would make zlib return its initial value instead.)
  if (!body.empty()) c = crc32_z(c, reinterpret_cast<const Bytef*>(body.data()), body.size());
  return static_cast<uint32_t>(c);
}

std::string EncodeOps(absl::Span<const RuleOp> ops) {
  std::string out;
  out.reserve(ops.size() * 128);
  for (const RuleOp& op : ops) {
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
        out.push_back('+');
        out.append(op.rule.ToString());
        break;
      case RuleOp::Kind::kReplace:
        out.push_back('=');
        out.append(op.rule.ToString());
        break;
      case RuleOp::Kind::kDelete:
        absl::StrAppend(&out, "-", op.id);
        break;
      case RuleOp::Kind::kDeleteByCookie:
        absl::StrAppend(&out, "~", op.cookie);
        break;
    }
    out.push_back('\n');
  }
  return out;
}

// Splits a body into its lines; false unless every line ends with '\n'.
bool SplitLines(std::string_view body, std::vector<std::string_view>* lines) {
  lines->clear();
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t nl = body.find('\n', pos);
    if (nl == std::string_view::npos) return false;
    lines->push_back(body.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return true;
}

absl::StatusOr<Rule> ParseStoredRule(std::string_view text) {
  if (text.find('#') != std::string_view::npos)
    return absl::DataLossError("'#' in a stored rule");
  absl::StatusOr<Rule> r = ParseNativeRule(text, 0);
  if (!r.ok()) return absl::DataLossError(r.status().message());
  if (absl::Status s = ValidateRule(*r); !s.ok())
    return absl::DataLossError(absl::StrCat("rule id ", r->id, ": ", s.message()));
  return r;
}

absl::StatusOr<std::vector<RuleOp>> DecodeOps(std::string_view body, uint64_t count) {
  std::vector<std::string_view> lines;
  if (!SplitLines(body, &lines))
    return absl::DataLossError("the operations do not end with a newline (truncated text)");
  if (lines.size() != count)
    return absl::DataLossError(absl::StrCat("holds ", lines.size(),
                                            " operations, its row says ", count));
  std::vector<RuleOp> ops;
  ops.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    auto fail = [&](absl::string_view what) {
      return absl::DataLossError(absl::StrCat("operation ", i, ": ", what));
    };
    if (line.empty()) return fail("empty line");
    const std::string_view rest = line.substr(1);
    switch (line[0]) {
      case '+':
      case '=': {
        absl::StatusOr<Rule> r = ParseStoredRule(rest);
        if (!r.ok()) return fail(r.status().message());
        ops.push_back(line[0] == '+' ? RuleOp::Insert(*std::move(r))
                                     : RuleOp::Replace(*std::move(r)));
        break;
      }
      case '-':
      case '~': {
        uint64_t v = 0;
        if (!ParseNativeNumber(rest, &v))
          return fail(absl::StrCat("bad number \"", std::string(rest.substr(0, 40)), "\""));
        ops.push_back(line[0] == '-' ? RuleOp::Delete(v) : RuleOp::DeleteByCookie(v));
        break;
      }
      default:
        return fail(absl::StrFormat("unknown operation kind '\\x%02x'",
                                    static_cast<unsigned char>(line[0])));
    }
  }
  return ops;
}

}  // namespace store_internal
}  // namespace flowclass
