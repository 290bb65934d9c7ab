// store_records.cc — see store_records.h.
#include "server/store/internal/store_records.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/quote.h"
#include "dataplane/rules/rule_format.h"

namespace flowclass {
namespace store_internal {

// The CRC-32 of zlib's crc32() (the gzip polynomial, reflected), computed
// by ISA-L's crc32_gzip_refl: the same values (RecordCrcIsZlibCrc32 checks
// it, so stores written before load unchanged), with carry-less multiplies
// instead of table lookups.  zlib's took a fifth of flowclassd's store
// thread in a streamed load (2.2 GB/s on the development VM; ISA-L 11-17
// GB/s there).  ISA-L comes with DPDK (libdpdk-dev depends on libisal-dev).
uint32_t RecordCrc(char tag, std::initializer_list<uint64_t> fields, std::string_view body) {
  uint32_t c = crc32_gzip_refl(0, reinterpret_cast<const unsigned char*>(&tag), 1);
  for (uint64_t f : fields) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(f >> (8 * i));
    c = crc32_gzip_refl(c, b, sizeof b);
  }
  if (!body.empty())
    c = crc32_gzip_refl(c, reinterpret_cast<const unsigned char*>(body.data()),
                        static_cast<uint64_t>(body.size()));
  return c;
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
          return fail(absl::StrCat("bad number ", QuoteForMessage(absl::string_view(rest.data(), rest.size()), '"')));
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

// Field f's bits, shifted down.
constexpr uint64_t FieldOf(const FieldInfo& f, uint64_t word) { return (word & f.Mask()) >> f.shift; }
constexpr uint64_t FieldOnes(const FieldInfo& f) {
  return f.bits == 64 ? ~uint64_t{0} : (uint64_t{1} << f.bits) - 1;
}
constexpr size_t FieldBytes(const FieldInfo& f) { return (f.bits + 7u) / 8u; }

bool GetFixed(std::string_view* in, size_t n, uint64_t* v) {
  if (in->size() < n) return false;
  uint64_t r = 0;
  for (size_t i = 0; i < n; ++i) r |= uint64_t{static_cast<unsigned char>((*in)[i])} << (8 * i);
  in->remove_prefix(n);
  *v = r;
  return true;
}

constexpr uint32_t kAllFields = (uint32_t{1} << kFieldCount) - 1;

}  // namespace

bool RuleFitsRecord(const Rule& r) {
  for (size_t w = 0; w < static_cast<size_t>(kFlowWords); ++w)
    if (((r.match.mask.w[w] | r.match.value.w[w]) & ~kFieldBits[w]) != 0) return false;
  return true;
}

namespace {

// The writers below store through a pointer into room the caller reserved
// (kMaxRuleBytes a rule): one capacity check per operation instead of one
// per field, which was most of an append's CPU (docs/store.md, Performance).
char* WriteVarint(uint64_t v, char* p) {
  while (v >= 0x80) {
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

template <size_t N>
char* WriteFixed(uint64_t v, char* p) {
  for (size_t i = 0; i < N; ++i) *p++ = static_cast<char>(v >> (8 * i));
  return p;
}

// Field I's bits of the maps, then its value and mask: unrolled per field,
// so that each field's word, shift and width are constants.
template <size_t I>
void MapField(const Rule& r, uint32_t* present, uint32_t* exact) {
  constexpr FieldInfo f = kFieldInfo[I];
  const uint64_t m = FieldOf(f, r.match.mask.w[f.word]);
  if (m != 0) *present |= uint32_t{1} << I;
  if (m == FieldOnes(f)) *exact |= uint32_t{1} << I;
}

template <size_t I>
char* WriteField(const Rule& r, uint32_t present, uint32_t exact, char* p) {
  constexpr FieldInfo f = kFieldInfo[I];
  if ((present & (uint32_t{1} << I)) == 0) return p;
  p = WriteFixed<FieldBytes(f)>(FieldOf(f, r.match.value.w[f.word]), p);
  if ((exact & (uint32_t{1} << I)) == 0)
    p = WriteFixed<FieldBytes(f)>(FieldOf(f, r.match.mask.w[f.word]), p);
  return p;
}

template <size_t... I>
char* WriteFields(const Rule& r, char* p, std::index_sequence<I...>) {
  uint32_t present = 0, exact = 0;
  (MapField<I>(r, &present, &exact), ...);
  p = WriteFixed<3>(present, p);
  p = WriteFixed<3>(exact, p);
  ((p = WriteField<I>(r, present, exact, p)), ...);
  return p;
}

char* WriteRule(const Rule& r, char* p) {
  p = WriteVarint(r.id, p);
  p = WriteVarint(r.priority, p);
  p = WriteVarint(r.cookie, p);
  p = WriteFields(r, p, std::make_index_sequence<static_cast<size_t>(kFieldCount)>());
  const uint8_t flags = static_cast<uint8_t>((r.match.tp_src.IsFull() ? 0 : kRangeSrc) |
                                             (r.match.tp_dst.IsFull() ? 0 : kRangeDst));
  *p++ = static_cast<char>(flags);
  if (flags & kRangeSrc) {
    p = WriteFixed<2>(r.match.tp_src.lo, p);
    p = WriteFixed<2>(r.match.tp_src.hi, p);
  }
  if (flags & kRangeDst) {
    p = WriteFixed<2>(r.match.tp_dst.lo, p);
    p = WriteFixed<2>(r.match.tp_dst.hi, p);
  }
  *p++ = static_cast<char>(r.action.kind);
  return WriteVarint(r.action.port, p);
}

constexpr size_t AllFieldBytes() {
  size_t n = 0;
  for (const FieldInfo& f : kFieldInfo) n += FieldBytes(f);
  return n;
}

}  // namespace

// id, priority, cookie; two maps; every field's value and mask; flags and
// two ranges; action kind and port.
const size_t kMaxRuleBytes = 3 * 10 + 2 * 3 + 2 * AllFieldBytes() + 1 + 2 * 4 + 1 + 10;
const size_t kMaxOpBytes = 1 + kMaxRuleBytes;

void AppendRule(const Rule& r, std::string* out) {
  char buf[kMaxRuleBytes];
  out->append(buf, static_cast<size_t>(WriteRule(r, buf) - buf));
}

void ByteBuffer::Grow(size_t room) {
  size_t cap = std::max<size_t>(cap_ * 2, 4096);
  while (cap - size_ < room) cap *= 2;
  std::unique_ptr<char[]> next(new char[cap]);  // not zeroed: only written bytes are read
  if (size_ > 0) std::memcpy(next.get(), data_.get(), size_);
  data_ = std::move(next);
  cap_ = cap;
}

OpsAppend AppendOps(absl::Span<const RuleOp> ops, ByteBuffer* out) {
  // One pass: each operation is checked just before it is written (its rule
  // is read once: in flowclassd the rules are cold by then, and a separate
  // checking pass was a fifth of the store thread's time).  Nothing is
  // committed to *out until every operation is: a refused batch leaves it as
  // it was.
  out->Reserve(ops.size() * kMaxOpBytes);
  char* p = out->end();
  for (size_t j = 0; j < ops.size(); ++j) {
    const RuleOp& op = ops[j];
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
      case RuleOp::Kind::kReplace:
        if (!RuleFitsRecord(op.rule)) return {OpsAppend::kDoesNotFit, j};
        *p++ = op.kind == RuleOp::Kind::kInsert ? '+' : '=';
        p = WriteRule(op.rule, p);
        break;
      case RuleOp::Kind::kDelete:
        *p++ = '-';
        p = WriteVarint(op.id, p);
        break;
      case RuleOp::Kind::kDeleteByCookie:
        *p++ = '~';
        p = WriteVarint(op.cookie, p);
        break;
      default:
        return {OpsAppend::kUnknownKind, j};
    }
  }
  out->CommitTo(p);
  return {};
}

absl::StatusOr<Rule> ReadRule(std::string_view* in) {
  Rule r;
  uint64_t prio = 0, port = 0;
  auto truncated = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(what, ": truncated or malformed"));
  };
  if (!GetVarint(in, &r.id)) return truncated("rule id");
  if (!GetVarint(in, &prio) || prio > UINT32_MAX) return truncated("priority");
  r.priority = static_cast<uint32_t>(prio);
  if (!GetVarint(in, &r.cookie)) return truncated("cookie");
  uint64_t present = 0, exact = 0;
  if (!GetFixed(in, 3, &present) || !GetFixed(in, 3, &exact)) return truncated("field map");
  if ((present & ~uint64_t{kAllFields}) != 0)
    return absl::DataLossError(absl::StrFormat("rule id %d: unknown fields 0x%06x", r.id,
                                               present & ~uint64_t{kAllFields}));
  if ((exact & ~present) != 0)
    return absl::DataLossError(absl::StrFormat(
        "rule id %d: fields 0x%06x are exact but not present", r.id, exact & ~present));
  for (int i = 0; i < kFieldCount; ++i) {
    if ((present & (uint64_t{1} << i)) == 0) continue;
    const FieldInfo& f = kFieldInfo[static_cast<size_t>(i)];
    const uint64_t ones = FieldOnes(f);
    uint64_t v = 0, m = ones;
    if (!GetFixed(in, FieldBytes(f), &v)) return truncated(f.name);
    if ((exact & (uint64_t{1} << i)) == 0) {
      if (!GetFixed(in, FieldBytes(f), &m)) return truncated(f.name);
      if (m == 0 || m == ones)  // zero: not present; all ones: exact
        return absl::DataLossError(absl::StrFormat(
            "rule id %d: %s: mask 0x%x is not what its field map says", r.id, f.name, m));
    }
    if (((v | m) & ~ones) != 0)
      return absl::DataLossError(
          absl::StrFormat("rule id %d: %s: wider than its %d bits", r.id, f.name, f.bits));
    if ((v & ~m) != 0)
      return absl::DataLossError(absl::StrFormat(
          "rule id %d: %s: value 0x%x has bits outside mask 0x%x", r.id, f.name, v, m));
    r.match.value.w[f.word] |= v << f.shift;
    r.match.mask.w[f.word] |= m << f.shift;
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
  ByteBuffer buf;
  // A kind or rule AppendOps refuses is encoded as far as it can be (tests
  // only: the store checks first).
  if (AppendOps(ops, &buf).ok()) return std::string(buf.view());
  std::string out;
  for (const RuleOp& op : ops) {
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
      case RuleOp::Kind::kReplace:
        out.push_back(op.kind == RuleOp::Kind::kInsert ? '+' : '=');
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
