// internal/rule_text.h — the line and number helpers the rule-text parsers
// share (rule_format.cc: native rules, files; rule_format_classbench.cc:
// ClassBench filters and traces); nothing else includes this.  Control path
// only (errors allocate).
#ifndef FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_TEXT_H_
#define FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "dataplane/internal/cat.h"

namespace flowclass {
namespace internal {

inline absl::Status ColumnError(size_t col, std::string_view field,
                         std::string_view problem) {
  return absl::InvalidArgumentError(
      Cat("column ", col, ": ", ShownName(field), ": ", problem));
}

// Prefixes "line L, " to an error from a line parser.
inline absl::Status AtLine(size_t line, const absl::Status& s) {
  return absl::Status(s.code(), Cat("line ", line, ", ", s.message()));
}

inline bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

inline std::string_view StripLeading(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

inline std::string_view StripTrailing(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

inline bool IsBlankOrComment(std::string_view line) {
  std::string_view t = StripLeading(line);
  return t.empty() || t[0] == '#';
}

// Calls fn(line_number, line) for every line of `text` (1-based; a trailing
// '\r' is dropped so CRLF files work).  Stops at the first error.
template <typename Fn>
inline absl::Status ForEachLine(std::string_view text, Fn fn) {
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    absl::Status s = fn(line_no, line);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

inline int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

enum class Base { kAuto, kDecimal, kHex };

// Unsigned integer: decimal, or hex with a "0x" prefix (kAuto), or hex with an
// optional prefix (kHex).  No sign, no spaces, overflow is a failure.
inline bool ParseU64(std::string_view s, Base base, uint64_t* out) {
  int radix = 10;
  if (base != Base::kDecimal && s.size() > 2 && s[0] == '0' &&
      (s[1] == 'x' || s[1] == 'X')) {
    radix = 16;
    s.remove_prefix(2);
  } else if (base == Base::kHex) {
    radix = 16;
  }
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d = radix == 16 ? HexDigit(c) : (c >= '0' && c <= '9' ? c - '0' : -1);
    if (d < 0) return false;
    if (__builtin_mul_overflow(v, static_cast<uint64_t>(radix), &v) ||
        __builtin_add_overflow(v, static_cast<uint64_t>(d), &v))
      return false;
  }
  *out = v;
  return true;
}

inline uint64_t LowBits(int bits) {
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

// A number that must fit `bits` bits; `what` is "value" or "mask".
inline absl::Status ParseFitting(std::string_view s, int bits, size_t col,
                          std::string_view field, std::string_view what,
                          uint64_t* out, Base base = Base::kAuto) {
  if (!ParseU64(s, base, out)) {
    return ColumnError(col, field, Cat("bad number ", Quote(s)));
  }
  if (*out > LowBits(bits)) {
    // In hex the text is read as hex, and the limit is given in hex too
    // ("255" is 0x255 there, not 255).
    if (base == Base::kHex)
      return ColumnError(col, field,
                         Cat(what, " ", Quote(s), " is ", absl::StrFormat("%#x", *out),
                             " in hex, which does not fit ", bits, " bits (max ",
                             absl::StrFormat("%#x", LowBits(bits)),
                             "; this column is hex, e.g. 0x06/0xFF)"));
    return ColumnError(col, field,
                       Cat(what, " ", s, " does not fit ", bits,
                                    " bits (max ", LowBits(bits), ")"));
  }
  return absl::OkStatus();
}

// An address value through the codec (addr_text.h), its error at the column
// of the part at fault (the address, or the mask or length after '/').
template <typename T>
inline absl::Status ParseAddress(absl::Status (*parse)(std::string_view, T*, T*, size_t*),
                          std::string_view s, size_t col, std::string_view field, T* value,
                          T* mask) {
  size_t at = 0;
  absl::Status st = parse(s, value, mask, &at);
  if (st.ok()) return st;
  return ColumnError(col + at, field, std::string_view(st.message().data(), st.message().size()));
}

inline absl::Status WithPath(const std::string& path, const absl::Status& s) {
  return absl::Status(s.code(), Cat(path, ": ", s.message()));
}

// Editors on some systems start a UTF-8 file with a byte-order mark: it is
// not part of the first rule (nor a reason to take a ClassBench file for a
// native one).
inline void StripUtf8Bom(std::string* text) {
  if (text->compare(0, 3, "\xEF\xBB\xBF") == 0) text->erase(0, 3);
}

}  // namespace internal
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_TEXT_H_
