// store_records.cc — see store_records.h.
#include "server/store/internal/store_records.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>

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

std::string EncodeOpsText(absl::Span<const RuleOp> ops) {
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

absl::StatusOr<std::vector<RuleOp>> DecodeOpsText(std::string_view body, uint64_t count) {
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

// ---- binary records ----
namespace {

constexpr uint8_t kRangeSrc = 1, kRangeDst = 2;

// The bits of each word that some field occupies.
constexpr std::array<uint64_t, kFlowWords> FieldBits() {
  std::array<uint64_t, kFlowWords> bits{};
  for (const FieldInfo& f : kFieldInfo) bits[f.word] |= f.Mask();
  return bits;
}
constexpr std::array<uint64_t, kFlowWords> kFieldBits = FieldBits();

void PutVarint(uint64_t v, std::string* out) {
  char buf[10];
  int n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, static_cast<size_t>(n));
}

void PutU16(uint16_t v, std::string* out) {
  const char b[2] = {static_cast<char>(v & 0xff), static_cast<char>(v >> 8)};
  out->append(b, 2);
}

// false when the varint runs past `in` or past 64 bits.
bool GetVarint(std::string_view* in, uint64_t* v) {
  uint64_t r = 0;
  for (size_t i = 0; i < in->size() && i < 10; ++i) {
    const uint64_t b = static_cast<unsigned char>((*in)[i]);
    if (i == 9 && b > 1) return false;  // more than 64 bits
    r |= (b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      in->remove_prefix(i + 1);
      *v = r;
      return true;
    }
  }
  return false;
}

bool GetU16(std::string_view* in, uint16_t* v) {
  if (in->size() < 2) return false;
  *v = static_cast<uint16_t>(static_cast<unsigned char>((*in)[0]) |
                             (static_cast<unsigned char>((*in)[1]) << 8));
  in->remove_prefix(2);
  return true;
}

bool GetU8(std::string_view* in, uint8_t* v) {
  if (in->empty()) return false;
  *v = static_cast<uint8_t>((*in)[0]);
  in->remove_prefix(1);
  return true;
}

}  // namespace

void AppendRule(const Rule& r, std::string* out) {
  PutVarint(r.id, out);
  PutVarint(r.priority, out);
  PutVarint(r.cookie, out);
  FlowMap map = 0;
  for (int i = 0; i < kFlowWords; ++i)
    if (r.match.mask.w[static_cast<size_t>(i)] != 0) map = static_cast<FlowMap>(map | (1u << i));
  PutU16(map, out);
  for (int i = 0; i < kFlowWords; ++i) {
    if ((map & (1u << i)) == 0) continue;
    PutVarint(r.match.mask.w[static_cast<size_t>(i)], out);
    PutVarint(r.match.value.w[static_cast<size_t>(i)], out);
  }
  const uint8_t flags = static_cast<uint8_t>((r.match.tp_src.IsFull() ? 0 : kRangeSrc) |
                                             (r.match.tp_dst.IsFull() ? 0 : kRangeDst));
  out->push_back(static_cast<char>(flags));
  if (flags & kRangeSrc) {
    PutU16(r.match.tp_src.lo, out);
    PutU16(r.match.tp_src.hi, out);
  }
  if (flags & kRangeDst) {
    PutU16(r.match.tp_dst.lo, out);
    PutU16(r.match.tp_dst.hi, out);
  }
  out->push_back(static_cast<char>(r.action.kind));
  PutVarint(r.action.port, out);
}

absl::StatusOr<Rule> ReadRule(std::string_view* in) {
  Rule r;
  uint64_t prio = 0, port = 0;
  auto truncated = [](const char* what) {
    return absl::DataLossError(absl::StrCat(what, ": truncated or malformed"));
  };
  if (!GetVarint(in, &r.id)) return truncated("rule id");
  if (!GetVarint(in, &prio) || prio > UINT32_MAX) return truncated("priority");
  r.priority = static_cast<uint32_t>(prio);
  if (!GetVarint(in, &r.cookie)) return truncated("cookie");
  uint16_t map = 0;
  if (!GetU16(in, &map)) return truncated("word map");
  if ((map & ~kFullFlowMap) != 0)
    return absl::DataLossError(absl::StrFormat("rule id %d: unknown match words 0x%04x", r.id,
                                               map & ~kFullFlowMap));
  for (int i = 0; i < kFlowWords; ++i) {
    if ((map & (1u << i)) == 0) continue;
    const size_t w = static_cast<size_t>(i);
    uint64_t& mask = r.match.mask.w[w];
    uint64_t& value = r.match.value.w[w];
    if (!GetVarint(in, &mask) || !GetVarint(in, &value)) return truncated("match word");
    if (mask == 0)
      return absl::DataLossError(absl::StrCat("rule id ", r.id, ": match word ", i,
                                              " is listed with a zero mask"));
    if ((mask & ~kFieldBits[w]) != 0)
      return absl::DataLossError(absl::StrFormat(
          "rule id %d: match word %d: mask bits 0x%016x are in no field", r.id, i,
          mask & ~kFieldBits[w]));
    if ((value & ~mask) != 0)
      return absl::DataLossError(absl::StrFormat(
          "rule id %d: match word %d: value bits 0x%016x are outside its mask", r.id, i,
          value & ~mask));
  }
  uint8_t flags = 0;
  if (!GetU8(in, &flags)) return truncated("flags");
  if ((flags & ~(kRangeSrc | kRangeDst)) != 0)
    return absl::DataLossError(absl::StrCat("rule id ", r.id, ": unknown flags ", flags));
  if ((flags & kRangeSrc) && (!GetU16(in, &r.match.tp_src.lo) || !GetU16(in, &r.match.tp_src.hi)))
    return truncated("tp_src range");
  if ((flags & kRangeDst) && (!GetU16(in, &r.match.tp_dst.lo) || !GetU16(in, &r.match.tp_dst.hi)))
    return truncated("tp_dst range");
  uint8_t kind = 0;
  if (!GetU8(in, &kind)) return truncated("action");
  if (kind != static_cast<uint8_t>(Action::Kind::kDrop) &&
      kind != static_cast<uint8_t>(Action::Kind::kOutput))
    return absl::DataLossError(absl::StrCat("rule id ", r.id, ": unknown action kind ", kind));
  r.action.kind = static_cast<Action::Kind>(kind);
  if (!GetVarint(in, &port) || port > UINT32_MAX) return truncated("action port");
  r.action.port = static_cast<uint32_t>(port);
  if (absl::Status s = ValidateRule(r); !s.ok())
    return absl::DataLossError(absl::StrCat("rule id ", r.id, ": ", s.message()));
  return r;
}

std::string EncodeOps(absl::Span<const RuleOp> ops) {
  std::string out;
  out.reserve(ops.size() * 48);
  for (const RuleOp& op : ops) {
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
        out.push_back('+');
        AppendRule(op.rule, &out);
        break;
      case RuleOp::Kind::kReplace:
        out.push_back('=');
        AppendRule(op.rule, &out);
        break;
      case RuleOp::Kind::kDelete:
        out.push_back('-');
        PutVarint(op.id, &out);
        break;
      case RuleOp::Kind::kDeleteByCookie:
        out.push_back('~');
        PutVarint(op.cookie, &out);
        break;
    }
  }
  return out;
}

absl::StatusOr<std::vector<RuleOp>> DecodeOps(std::string_view body, uint64_t count) {
  std::vector<RuleOp> ops;
  // The count is untrusted too: reserve no more than the body could hold.
  ops.reserve(static_cast<size_t>(std::min<uint64_t>(count, body.size() / 2)));
  for (uint64_t i = 0; !body.empty(); ++i) {
    auto fail = [&](absl::string_view what) {
      return absl::DataLossError(absl::StrCat("operation ", i, ": ", what));
    };
    if (i >= count)
      return absl::DataLossError(absl::StrCat("holds more than the ", count,
                                              " operations its row says"));
    const char kind = body[0];
    body.remove_prefix(1);
    switch (kind) {
      case '+':
      case '=': {
        absl::StatusOr<Rule> r = ReadRule(&body);
        if (!r.ok()) return fail(r.status().message());
        ops.push_back(kind == '+' ? RuleOp::Insert(*std::move(r)) : RuleOp::Replace(*std::move(r)));
        break;
      }
      case '-':
      case '~': {
        uint64_t v = 0;
        if (!GetVarint(&body, &v)) return fail("number: truncated or malformed");
        ops.push_back(kind == '-' ? RuleOp::Delete(v) : RuleOp::DeleteByCookie(v));
        break;
      }
      default:
        return fail(absl::StrFormat("unknown operation kind '\\x%02x'",
                                    static_cast<unsigned char>(kind)));
    }
  }
  if (ops.size() != count)
    return absl::DataLossError(absl::StrCat("holds ", ops.size(),
                                            " operations, its row says ", count));
  return ops;
}

}  // namespace store_internal
}  // namespace flowclass
