// rule_format_classbench.cc — parsers for ClassBench filters and traces
// (rule_format.h).  Their errors are built as the native parser's are (see
// rule_format.cc).
#include "dataplane/rules/rule_format.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/text_file.h"
#include "dataplane/flow/addr_text.h"
#include "dataplane/flow/flow.h"
#include "dataplane/internal/cat.h"
#include "dataplane/rules/internal/rule_text.h"
#include "dataplane/rules/rule.h"

namespace flowclass {
namespace {

using internal::Cat;
using internal::Quote;
using internal::AtLine;
using internal::Base;
using internal::ColumnError;
using internal::ForEachLine;
using internal::IsBlankOrComment;
using internal::ParseAddress;
using internal::ParseFitting;
using internal::StripUtf8Bom;
using internal::WithPath;

// --------------------------------------------------------------- ClassBench

// A cursor over one ClassBench or trace line.  Fields are separated by runs
// of spaces or tabs.
struct Cursor {
  std::string_view line;
  size_t pos = 0;

  void SkipSpace() {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
  }
  bool AtEnd() {
    SkipSpace();
    return pos >= line.size();
  }
  size_t Col() const { return pos + 1; }
  // The next run of non-blank characters (empty at end of line).
  std::string_view Token() {
    SkipSpace();
    size_t start = pos;
    while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
    return line.substr(start, pos - start);
  }
  // The next run of characters that are not blank and not ':'.
  std::string_view Number() {
    SkipSpace();
    size_t start = pos;
    while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t' &&
           line[pos] != ':') {
      ++pos;
    }
    return line.substr(start, pos - start);
  }
};

absl::Status ClassBenchPrefix(Cursor& c, Field f, Match* m) {
  const char* name = InfoOf(f).name;
  c.SkipSpace();
  size_t col = c.Col();
  std::string_view tok = c.Token();
  if (tok.empty()) return ColumnError(col, name, "missing");
  uint32_t v, mask;
  absl::Status s = ParseAddress(ParseIpv4Masked, tok, col, name, &v, &mask);
  if (!s.ok()) return s;
  m->SetMasked(f, v, mask);
  return absl::OkStatus();
}

// "lo : hi" (spaces around ':' optional).
absl::Status ClassBenchPorts(Cursor& c, Field f, PortRange* range) {
  const char* name = InfoOf(f).name;
  c.SkipSpace();
  size_t lo_col = c.Col();
  std::string_view lo_s = c.Number();
  if (lo_s.empty()) return ColumnError(lo_col, name, "missing port range");
  uint64_t lo, hi;
  absl::Status s = ParseFitting(lo_s, 16, lo_col, name, "port", &lo, Base::kDecimal);
  if (!s.ok()) return s;
  c.SkipSpace();
  if (c.pos >= c.line.size() || c.line[c.pos] != ':') {
    return ColumnError(c.Col(), name, "expected ':' in port range 'lo : hi'");
  }
  ++c.pos;
  c.SkipSpace();
  size_t hi_col = c.Col();
  std::string_view hi_s = c.Number();
  if (hi_s.empty()) return ColumnError(hi_col, name, "missing upper port");
  s = ParseFitting(hi_s, 16, hi_col, name, "port", &hi, Base::kDecimal);
  if (!s.ok()) return s;
  if (lo > hi) {
    return ColumnError(lo_col, name,
                       Cat("range ", lo, " : ", hi, " has lo > hi"));
  }
  *range = PortRange{static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)};
  return absl::OkStatus();
}

// "0xVV/0xMM" with hex numbers of at most `bits` bits.
absl::Status ClassBenchHexPair(std::string_view tok, size_t col,
                               std::string_view name, int bits,
                               uint64_t* value, uint64_t* mask) {
  size_t slash = tok.find('/');
  if (slash == std::string_view::npos) {
    return ColumnError(col, name,
                       Cat("expected hex value/mask like 0x06/0xFF, got ",
                                    Quote(tok)));
  }
  absl::Status s = ParseFitting(tok.substr(0, slash), bits, col, name, "value",
                                value, Base::kHex);
  if (!s.ok()) return s;
  return ParseFitting(tok.substr(slash + 1), bits, col + slash + 1, name,
                      "mask", mask, Base::kHex);
}

// The TCP-flags field of generator output is 16 bits wide; our tcp_flags is
// the 12 bits a TCP header carries next to the data offset, so the upper four
// bits of value and mask are dropped.
constexpr uint64_t kClassBenchFlagBits = 0x0fff;

// Parses one ClassBench rule into `r` (match only).  `has_flags` says whether
// this file's rules carry a TCP-flags field (nullopt: decide from this line).
absl::Status ParseClassBenchLine(std::string_view line,
                                 std::optional<bool>* has_flags, Rule* r) {
  Cursor c{line};
  c.SkipSpace();
  if (c.pos >= line.size() || line[c.pos] != '@') {
    return ColumnError(c.Col(), "ipv4_src",
                       "expected '@' at the start of a ClassBench rule");
  }
  ++c.pos;
  Match& m = r->match;
  m.SetExact(Field::kEthType, kEthTypeIpv4);
  absl::Status s = ClassBenchPrefix(c, Field::kIpv4Src, &m);
  if (s.ok()) s = ClassBenchPrefix(c, Field::kIpv4Dst, &m);
  if (s.ok()) s = ClassBenchPorts(c, Field::kTpSrc, &m.tp_src);
  if (s.ok()) s = ClassBenchPorts(c, Field::kTpDst, &m.tp_dst);
  if (!s.ok()) return s;
  // A full range is "no range" in a Match.
  if (m.tp_src.IsFull()) m.tp_src = PortRange{};
  if (m.tp_dst.IsFull()) m.tp_dst = PortRange{};

  c.SkipSpace();
  size_t col = c.Col();
  std::string_view tok = c.Token();
  if (tok.empty()) return ColumnError(col, "nw_proto", "missing");
  uint64_t v, mask;
  s = ClassBenchHexPair(tok, col, "nw_proto", 8, &v, &mask);
  if (!s.ok()) return s;
  // ClassBench's protocol is exact (0xFF) or any (0x00/0x00).  Any other
  // mask, or a value with bits outside it, comes from a cut or edited line
  // ("0x06/0" of "0x06/0xFF") and would match more than was written.
  if (mask != 0 && mask != 0xff) {
    return ColumnError(col, "nw_proto",
                       Cat("mask ", Quote(tok.substr(tok.find('/') + 1)),
                           " is neither 0xFF (exact) nor 0x00 (any); a cut line?"));
  }
  if ((v & ~mask) != 0) {
    return ColumnError(col, "nw_proto",
                       Cat(Quote(tok), " has value bits outside its mask (any protocol is 0x00/0x00); a cut line?"));
  }
  if (mask != 0) m.SetMasked(Field::kNwProto, v, mask);

  c.SkipSpace();
  col = c.Col();
  tok = c.Token();
  const bool line_has_flags = !tok.empty();
  if (!has_flags->has_value()) *has_flags = line_has_flags;
  if (line_has_flags != **has_flags) {
    if (line_has_flags) {
      return ColumnError(col, "tcp_flags",
                         Cat("unexpected field ", Quote(tok),
                                      "; the first rule of this file has no "
                                      "TCP-flags field"));
    }
    return ColumnError(col, "tcp_flags",
                       "missing; the first rule of this file has a TCP-flags "
                       "field");
  }
  if (line_has_flags) {
    s = ClassBenchHexPair(tok, col, "tcp_flags", 16, &v, &mask);
    if (!s.ok()) return s;
    if ((v & ~mask) != 0) {
      return ColumnError(col, "tcp_flags",
                         Cat(Quote(tok), " has value bits outside its mask; a cut line?"));
    }
    mask &= kClassBenchFlagBits;
    if (mask != 0) m.SetMasked(Field::kTcpFlags, v, mask);
  }
  c.SkipSpace();
  if (c.pos < line.size()) {
    return ColumnError(c.Col(), line_has_flags ? "tcp_flags" : "nw_proto",
                       Cat("unexpected text ",
                                    Quote(line.substr(c.pos)),
                                    " after the last field"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Rule>> ParseClassBench(
    std::string_view text, const ClassBenchOptions& opts, std::vector<size_t>* lines) {
  std::vector<Rule> rules;
  if (lines != nullptr) lines->clear();
  std::optional<bool> has_flags;
  absl::Status s =
      ForEachLine(text, [&](size_t line_no, std::string_view line) {
        if (IsBlankOrComment(line)) return absl::OkStatus();
        Rule r;
        absl::Status ls = ParseClassBenchLine(line, &has_flags, &r);
        if (!ls.ok()) return AtLine(line_no, ls);
        const uint64_t l = rules.size() + 1;
        r.id = l;
        r.action = opts.num_ports > 0
                       ? Action::Output(static_cast<uint32_t>(
                             (l - 1) % opts.num_ports + 1))
                       : opts.action;
        rules.push_back(r);
        if (lines != nullptr) lines->push_back(line_no);
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  const size_t n = rules.size();
  for (size_t i = 0; i < n; ++i) {
    rules[i].priority = static_cast<uint32_t>(n - i);  // N - L + 1
  }
  return rules;
}

absl::StatusOr<std::vector<TraceEntry>> ParseTrace(std::string_view text) {
  std::vector<TraceEntry> entries;
  absl::Status s =
      ForEachLine(text, [&](size_t line_no, std::string_view line) {
        if (IsBlankOrComment(line)) return absl::OkStatus();
        static constexpr struct {
          const char* name;
          int bits;
        } kColumns[] = {{"ipv4_src", 32}, {"ipv4_dst", 32}, {"tp_src", 16},
                        {"tp_dst", 16},   {"nw_proto", 8},  {"expected", 32}};
        uint64_t v[6];
        Cursor c{line};
        for (int i = 0; i < 6; ++i) {
          c.SkipSpace();
          const size_t col = c.Col();
          std::string_view tok = c.Token();
          absl::Status ts =
              tok.empty() ? ColumnError(col, kColumns[i].name, "missing")
                          : ParseFitting(tok, kColumns[i].bits, col,
                                         kColumns[i].name, "value", &v[i],
                                         Base::kDecimal);
          if (!ts.ok()) return AtLine(line_no, ts);
        }
        entries.push_back(TraceEntry{
            MakeFiveTupleKey(static_cast<uint32_t>(v[0]),
                             static_cast<uint32_t>(v[1]),
                             static_cast<uint16_t>(v[2]),
                             static_cast<uint16_t>(v[3]),
                             static_cast<uint8_t>(v[4])),
            static_cast<uint32_t>(v[5])});
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  return entries;
}

absl::StatusOr<std::vector<TraceEntry>> LoadTraceFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  StripUtf8Bom(&*text);
  absl::StatusOr<std::vector<TraceEntry>> entries = ParseTrace(*text);
  if (!entries.ok()) return WithPath(path, entries.status());
  return entries;
}

}  // namespace flowclass
