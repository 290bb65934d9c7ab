// rule_format.cc — the native rule parser and printer, and rule files of
// either format (ClassBench filters and traces: rule_format_classbench.cc;
// the helpers both use: internal/rule_text.h).
//
// Every parser works one line at a time with byte offsets into that line, so
// an error can point at the column of the offending key or value.  Errors are
// built in two layers: the line parsers return "column C: field: problem",
// and the multi-line drivers prefix "line L, ".
#include "dataplane/rules/rule_format.h"

#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/text_file.h"
#include "dataplane/flow/addr_text.h"
#include "dataplane/internal/cat.h"
#include "dataplane/rules/internal/rule_text.h"

namespace flowclass {
namespace {

using internal::Cat;
using internal::CatTo;
using internal::Quote;
using internal::AtLine;
using internal::Base;
using internal::ColumnError;
using internal::ForEachLine;
using internal::IsBlankOrComment;
using internal::LowBits;
using internal::ParseAddress;
using internal::ParseFitting;
using internal::ParseU64;
using internal::StripLeading;
using internal::StripTrailing;
using internal::StripUtf8Bom;
using internal::WithPath;

// ------------------------------------------------------------------ helpers

// "N" (exact) or "N/M" for a `bits`-wide field; the value is masked.
absl::Status ParseNumMasked(std::string_view s, int bits, size_t col,
                            std::string_view field, uint64_t* value,
                            uint64_t* mask) {
  size_t slash = s.find('/');
  absl::Status st =
      ParseFitting(s.substr(0, slash), bits, col, field, "value", value);
  if (!st.ok()) return st;
  *mask = LowBits(bits);
  if (slash != std::string_view::npos) {
    st = ParseFitting(s.substr(slash + 1), bits, col + slash + 1, field, "mask",
                      mask);
    if (!st.ok()) return st;
  }
  *value &= *mask;
  return absl::OkStatus();
}

// ------------------------------------------------------------------- Native

// What a key claims, to report duplicates: dl_src and eth_src are the same
// field, dl_vlan and dl_vlan_pcp are different bits of one field, "tcp" sets
// eth_type and nw_proto.
enum Slot : uint32_t {
  kSlotId = 1u << 0,
  kSlotPriority = 1u << 1,
  kSlotCookie = 1u << 2,
  kSlotInPort = 1u << 3,
  kSlotEthSrc = 1u << 4,
  kSlotEthDst = 1u << 5,
  kSlotEthType = 1u << 6,
  kSlotVlanVid = 1u << 7,
  kSlotVlanPcp = 1u << 8,
  kSlotVlan1 = 1u << 9,
  kSlotNwProto = 1u << 10,
  kSlotIpv4Src = 1u << 11,
  kSlotIpv4Dst = 1u << 12,
  kSlotIpv6Src = 1u << 13,
  kSlotIpv6Dst = 1u << 14,
  kSlotDscp = 1u << 15,
  kSlotEcn = 1u << 16,
  kSlotTtl = 1u << 17,
  kSlotFrag = 1u << 18,
  kSlotTpSrc = 1u << 19,
  kSlotTpDst = 1u << 20,
  kSlotTcpFlags = 1u << 21,
};

// Names are string_views (length known at compile time): a key is compared
// by length first, not by strlen of every candidate.
struct Shorthand {
  std::string_view name;
  uint16_t eth_type;
  int nw_proto;  // -1: not set
};
constexpr Shorthand kShorthands[] = {
    {"ip", kEthTypeIpv4, -1},
    {"ipv6", kEthTypeIpv6, -1},
    {"arp", kEthTypeArp, -1},
    {"tcp", kEthTypeIpv4, kIpProtoTcp},
    {"udp", kEthTypeIpv4, kIpProtoUdp},
    {"sctp", kEthTypeIpv4, kIpProtoSctp},
    {"icmp", kEthTypeIpv4, kIpProtoIcmp},
    {"tcp6", kEthTypeIpv6, kIpProtoTcp},
    {"udp6", kEthTypeIpv6, kIpProtoUdp},
    {"sctp6", kEthTypeIpv6, kIpProtoSctp},
    {"icmp6", kEthTypeIpv6, kIpProtoIcmpv6},
};

struct NativeParser {
  Rule rule;
  uint32_t used = 0;

  absl::Status Claim(uint32_t slots, size_t col, std::string_view key) {
    if (used & slots) {
      return ColumnError(col, key,
                         "duplicate key (this field is already set on the line)");
    }
    used |= slots;
    return absl::OkStatus();
  }

  // OR a value/mask pair into a field that several keys may share bits of.
  void Merge(Field f, uint64_t v, uint64_t m) {
    Match& mt = rule.match;
    mt.SetMasked(f, mt.value.Get(f) | (v & m), mt.mask.Get(f) | m);
  }

  absl::Status Key(std::string_view key, std::optional<std::string_view> val,
                   size_t kcol, size_t vcol);
  absl::Status Ports(std::string_view key, std::string_view val, size_t vcol,
                     Field f, PortRange* range);
  absl::Status TcpFlags(std::string_view key, std::string_view val, size_t vcol);
  absl::Status Actions(std::string_view val, size_t vcol);
};

absl::Status NativeParser::Ports(std::string_view key, std::string_view val,
                                 size_t vcol, Field f, PortRange* range) {
  size_t dash = val.find('-');
  if (dash == std::string_view::npos) {
    uint64_t v, m;
    absl::Status s = ParseNumMasked(val, 16, vcol, key, &v, &m);
    if (!s.ok()) return s;
    rule.match.SetMasked(f, v, m);
    return absl::OkStatus();
  }
  uint64_t lo, hi;
  absl::Status s = ParseFitting(val.substr(0, dash), 16, vcol, key, "value", &lo);
  if (s.ok()) {
    s = ParseFitting(val.substr(dash + 1), 16, vcol + dash + 1, key, "value", &hi);
  }
  if (!s.ok()) return s;
  if (lo > hi) {
    return ColumnError(vcol, key,
                       Cat("range ", lo, "-", hi, " has lo > hi"));
  }
  *range = PortRange{static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)};
  return absl::OkStatus();
}

// "value[/mask]" numeric, or flag names: "+syn-ack", "+syn+ack", "-rst".
absl::Status NativeParser::TcpFlags(std::string_view key, std::string_view val,
                                    size_t vcol) {
  const int bits = InfoOf(Field::kTcpFlags).bits;
  if (val.empty() || (val[0] != '+' && val[0] != '-')) {
    uint64_t v, m;
    absl::Status s = ParseNumMasked(val, bits, vcol, key, &v, &m);
    if (!s.ok()) return s;
    rule.match.SetMasked(Field::kTcpFlags, v, m);
    return absl::OkStatus();
  }
  uint64_t v = 0, m = 0;
  size_t i = 0;
  while (i < val.size()) {
    const bool on = val[i] == '+';
    if (val[i] != '+' && val[i] != '-') {
      return ColumnError(vcol + i, key,
                         Cat("expected '+' or '-' before a TCP flag, got ",
                                      Quote(val.substr(i))));
    }
    size_t start = ++i;
    while (i < val.size() && val[i] != '+' && val[i] != '-') ++i;
    std::string_view name = val.substr(start, i - start);
    int bit = -1;
    for (int b = 0; b < kNumTcpFlagNames; ++b) {
      if (name == kTcpFlagNames[b]) bit = b;
    }
    if (bit < 0) {
      return ColumnError(vcol + start, key,
                         Cat("unknown TCP flag ", Quote(name)));
    }
    if (m & (uint64_t{1} << bit)) {
      return ColumnError(vcol + start, key,
                         Cat("TCP flag ", name, " given twice"));
    }
    m |= uint64_t{1} << bit;
    if (on) v |= uint64_t{1} << bit;
  }
  rule.match.SetMasked(Field::kTcpFlags, v, m);
  return absl::OkStatus();
}

absl::Status NativeParser::Actions(std::string_view val, size_t vcol) {
  if (val.empty()) return ColumnError(vcol, "actions", "missing action");
  if (size_t comma = val.find(','); comma != std::string_view::npos) {
    if (val.find('=', comma) != std::string_view::npos) {
      return ColumnError(vcol + comma + 1, "actions",
                         "must be the last key (everything after actions= is "
                         "the action list)");
    }
    return ColumnError(vcol + comma, "actions",
                       "only one action is supported");
  }
  if (val == "drop") {
    rule.action = Action::Drop();
    return absl::OkStatus();
  }
  std::string_view port_s = val;
  size_t port_col = vcol;
  if (val.starts_with("output:")) {
    port_s.remove_prefix(7);
    port_col += 7;
  }
  uint64_t port;
  if (!ParseU64(port_s, Base::kAuto, &port)) {
    return ColumnError(vcol, "actions",
                       Cat("unknown action ", Quote(val)));
  }
  if (port > kMaxPortNumber) {
    return ColumnError(port_col, "actions",
                       Cat("output port ", port_s, " exceeds ",
                                    kMaxPortNumber));
  }
  rule.action = Action::Output(static_cast<uint32_t>(port));
  return absl::OkStatus();
}

absl::Status NativeParser::Key(std::string_view key,
                               std::optional<std::string_view> val, size_t kcol,
                               size_t vcol) {
  Match& m = rule.match;
  for (const Shorthand& sh : kShorthands) {
    if (key != sh.name) continue;
    if (val.has_value()) {
      return ColumnError(kcol, key, "protocol keyword takes no value");
    }
    absl::Status s =
        Claim(kSlotEthType | (sh.nw_proto >= 0 ? uint32_t{kSlotNwProto} : uint32_t{0}), kcol, key);
    if (!s.ok()) return s;
    m.SetExact(Field::kEthType, sh.eth_type);
    if (sh.nw_proto >= 0) {
      m.SetExact(Field::kNwProto, static_cast<uint64_t>(sh.nw_proto));
    }
    return absl::OkStatus();
  }

  // Keys that take a value.  Each entry: the slots it claims and a parser.
  struct Spec {
    uint32_t slots;
    int kind;
    Field field;
  };
  enum Kind {
    kId, kPriority, kCookie, kNum, kMac, kIpv4, kIpv6Src, kIpv6Dst, kVlanVid,
    kVlanPcp, kTci, kTos, kDscp, kEcn, kFrag, kPort, kIcmp, kFlags,
  };
  static constexpr struct {
    std::string_view name;
    Spec spec;
  } kKeys[] = {
      {"id", {kSlotId, kId, Field::kInPort}},
      {"priority", {kSlotPriority, kPriority, Field::kInPort}},
      {"cookie", {kSlotCookie, kCookie, Field::kInPort}},
      {"in_port", {kSlotInPort, kNum, Field::kInPort}},
      {"dl_src", {kSlotEthSrc, kMac, Field::kEthSrc}},
      {"eth_src", {kSlotEthSrc, kMac, Field::kEthSrc}},
      {"dl_dst", {kSlotEthDst, kMac, Field::kEthDst}},
      {"eth_dst", {kSlotEthDst, kMac, Field::kEthDst}},
      {"dl_type", {kSlotEthType, kNum, Field::kEthType}},
      {"eth_type", {kSlotEthType, kNum, Field::kEthType}},
      {"dl_vlan", {kSlotVlanVid, kVlanVid, Field::kVlan0Tci}},
      {"dl_vlan_pcp", {kSlotVlanPcp, kVlanPcp, Field::kVlan0Tci}},
      {"vlan_tci", {kSlotVlanVid | kSlotVlanPcp, kTci, Field::kVlan0Tci}},
      {"vlan0_tci", {kSlotVlanVid | kSlotVlanPcp, kTci, Field::kVlan0Tci}},
      {"vlan1_tci", {kSlotVlan1, kTci, Field::kVlan1Tci}},
      {"nw_src", {kSlotIpv4Src, kIpv4, Field::kIpv4Src}},
      {"ipv4_src", {kSlotIpv4Src, kIpv4, Field::kIpv4Src}},
      {"nw_dst", {kSlotIpv4Dst, kIpv4, Field::kIpv4Dst}},
      {"ipv4_dst", {kSlotIpv4Dst, kIpv4, Field::kIpv4Dst}},
      {"ipv6_src", {kSlotIpv6Src, kIpv6Src, Field::kIpv6SrcHi}},
      {"ipv6_dst", {kSlotIpv6Dst, kIpv6Dst, Field::kIpv6DstHi}},
      {"nw_proto", {kSlotNwProto, kNum, Field::kNwProto}},
      {"nw_tos", {kSlotDscp | kSlotEcn, kTos, Field::kNwTos}},
      {"ip_dscp", {kSlotDscp, kDscp, Field::kNwTos}},
      {"ip_ecn", {kSlotEcn, kEcn, Field::kNwTos}},
      {"nw_ttl", {kSlotTtl, kNum, Field::kNwTtl}},
      {"ip_frag", {kSlotFrag, kFrag, Field::kNwFrag}},
      {"nw_frag", {kSlotFrag, kNum, Field::kNwFrag}},
      {"tp_src", {kSlotTpSrc, kPort, Field::kTpSrc}},
      {"tp_dst", {kSlotTpDst, kPort, Field::kTpDst}},
      {"icmp_type", {kSlotTpSrc, kIcmp, Field::kTpSrc}},
      {"icmp_code", {kSlotTpDst, kIcmp, Field::kTpDst}},
      {"tcp_flags", {kSlotTcpFlags, kFlags, Field::kTcpFlags}},
  };
  const Spec* spec = nullptr;
  for (const auto& k : kKeys) {
    if (key == k.name) {
      spec = &k.spec;
      break;
    }
  }
  if (spec == nullptr) return ColumnError(kcol, key, "unknown key");
  if (!val.has_value()) {
    return ColumnError(kcol, key, Cat("missing value (", key, "=...)"));
  }
  if (val->empty()) return ColumnError(vcol, key, "empty value");
  absl::Status s = Claim(spec->slots, kcol, key);
  if (!s.ok()) return s;

  const std::string_view v = *val;
  const Field f = spec->field;
  const int bits = InfoOf(f).bits;
  uint64_t x, mask;
  // Fields without masks: "/..." is reported as a bad number.
  switch (spec->kind) {
    case kId:
      s = ParseFitting(v, 64, vcol, key, "value", &rule.id);
      return s;
    case kPriority:
      s = ParseFitting(v, 32, vcol, key, "value", &x);
      if (s.ok()) rule.priority = static_cast<uint32_t>(x);
      return s;
    case kCookie:
      return ParseFitting(v, 64, vcol, key, "value", &rule.cookie);
    case kNum:
      s = ParseNumMasked(v, bits, vcol, key, &x, &mask);
      if (s.ok()) m.SetMasked(f, x, mask);
      return s;
    case kMac:
      s = ParseAddress(ParseMacMasked, v, vcol, key, &x, &mask);
      if (s.ok()) m.SetMasked(f, x, mask);
      return s;
    case kIpv4: {
      uint32_t a, am;
      s = ParseAddress(ParseIpv4Masked, v, vcol, key, &a, &am);
      if (s.ok()) m.SetMasked(f, a, am);
      return s;
    }
    case kIpv6Src:
    case kIpv6Dst: {
      absl::uint128 a, am;
      s = ParseAddress(ParseIpv6Masked, v, vcol, key, &a, &am);
      if (!s.ok()) return s;
      if (spec->kind == kIpv6Src) {
        m.value.SetIpv6Src(a);
        m.mask.SetIpv6Src(am);
      } else {
        m.value.SetIpv6Dst(a);
        m.mask.SetIpv6Dst(am);
      }
      return absl::OkStatus();
    }
    case kVlanVid:
      s = ParseFitting(v, 12, vcol, key, "value", &x);
      if (s.ok()) Merge(f, x | kVlanPresent, kVlanVidMask | kVlanPresent);
      return s;
    case kVlanPcp:
      s = ParseFitting(v, 3, vcol, key, "value", &x);
      if (s.ok()) {
        Merge(f, (x << kVlanPcpShift) | kVlanPresent,
              (uint64_t{7} << kVlanPcpShift) | kVlanPresent);
      }
      return s;
    case kTci:
      s = ParseNumMasked(v, 16, vcol, key, &x, &mask);
      if (s.ok()) m.SetMasked(f, x, mask);
      return s;
    case kTos:
      // OVS: a bare nw_tos is the DSCP part of the byte; an explicit mask
      // gives the whole byte.
      if (v.find('/') == std::string_view::npos) {
        s = ParseFitting(v, 8, vcol, key, "value", &x);
        if (s.ok() && (x & 3) != 0) {
          return ColumnError(vcol, key,
                             Cat("value ", v,
                                          " has ECN bits set (use ip_ecn, or "
                                          "nw_tos=value/mask)"));
        }
        if (s.ok()) m.SetMasked(f, x, 0xfc);
        return s;
      }
      s = ParseNumMasked(v, 8, vcol, key, &x, &mask);
      if (s.ok()) m.SetMasked(f, x, mask);
      return s;
    case kDscp:
      s = ParseFitting(v, 6, vcol, key, "value", &x);
      if (s.ok()) Merge(f, x << 2, 0xfc);
      return s;
    case kEcn:
      s = ParseFitting(v, 2, vcol, key, "value", &x);
      if (s.ok()) Merge(f, x, 0x03);
      return s;
    case kFrag:
      for (const FragName& fn : kFragNames) {
        if (v == fn.name) {
          m.SetMasked(f, fn.value, fn.mask);
          return absl::OkStatus();
        }
      }
      return ColumnError(vcol, key,
                         Cat("unknown value ", Quote(v),
                                      " (no, yes, first, later, not_later)"));
    case kPort:
      return Ports(key, v, vcol, f, f == Field::kTpSrc ? &m.tp_src : &m.tp_dst);
    case kIcmp:
      s = ParseFitting(v, 8, vcol, key, "value", &x);
      if (s.ok()) m.SetExact(f, x);
      return s;
    case kFlags:
      return TcpFlags(key, v, vcol);
  }
  return ColumnError(kcol, key, "internal error: unhandled key");
}

bool IsSeparator(char c) { return c == ',' || c == ' ' || c == '\t'; }

// "#" starts a comment to the end of the line (no value contains one):
// what `flowclassctl dump-rules --hits` appends reads back.
std::string_view StripComment(std::string_view line) {
  return line.substr(0, line.find('#'));
}

// Calls fn(key, value, key column, value column) for each key of a native
// line, in order, until fn fails (columns 1-based; no value for a bare key).
// "actions=" takes the rest of the line as its value and ends the line.
template <typename Fn>
absl::Status ForEachNativeKey(std::string_view line, Fn fn) {
  line = StripComment(line);
  size_t i = 0;
  while (true) {
    while (i < line.size() && IsSeparator(line[i])) ++i;
    if (i >= line.size()) return absl::OkStatus();
    const size_t kstart = i;
    while (i < line.size() && !IsSeparator(line[i]) && line[i] != '=') ++i;
    std::string_view key = line.substr(kstart, i - kstart);
    std::optional<std::string_view> val;
    size_t vstart = i;
    if (i < line.size() && line[i] == '=') {
      vstart = ++i;
      if (key == "actions") {
        // Everything after "actions=" is the action list.
        return fn(key, StripTrailing(line.substr(vstart)), kstart + 1,
                  vstart + 1);
      }
      while (i < line.size() && !IsSeparator(line[i])) ++i;
      val = line.substr(vstart, i - vstart);
    }
    if (key.empty()) {
      return ColumnError(kstart + 1, "(empty)", "missing key before '='");
    }
    absl::Status s = fn(key, val, kstart + 1, vstart + 1);
    if (!s.ok()) return s;
  }
}

// Parses one native line; errors are "column C: ...".
absl::StatusOr<Rule> ParseNativeLine(std::string_view line,
                                     uint64_t default_id) {
  NativeParser p;
  p.rule.id = default_id;
  p.rule.priority = kDefaultNativePriority;
  bool have_actions = false;
  absl::Status s = ForEachNativeKey(
      line, [&](std::string_view key, std::optional<std::string_view> val,
                size_t kcol, size_t vcol) {
        if (key != "actions") return p.Key(key, val, kcol, vcol);
        if (!val.has_value()) {
          return ColumnError(kcol, key, "missing value (actions=...)");
        }
        have_actions = true;
        return p.Actions(*val, vcol);
      });
  if (!s.ok()) return s;
  if (!have_actions) {
    return ColumnError(StripComment(line).size() + 1, "actions",
                       "missing (every rule needs actions=output:N or "
                       "actions=drop as its last key)");
  }
  return std::move(p.rule);
}

// "<field>: <problem>": what a packet cannot have (ParseNativePacket).
absl::Status PacketError(std::string_view field, std::string_view problem) {
  return absl::InvalidArgumentError(Cat(field, ": ", problem));
}

}  // namespace

namespace {

// First line that is neither blank nor a comment starts with '@'.
bool LooksLikeClassBench(std::string_view text) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    if (!IsBlankOrComment(line)) return StripLeading(line).front() == '@';
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return false;
}

}  // namespace

absl::StatusOr<Rule> ParseNativeRule(std::string_view line,
                                     uint64_t default_id) {
  return ParseNativeLine(line, default_id);
}

absl::StatusOr<Flow> ParseNativePacket(std::string_view text) {
  NativeParser p;
  absl::Status s = ForEachNativeKey(
      text,
      [&](std::string_view key, std::optional<std::string_view> val,
          size_t kcol, size_t vcol) -> absl::Status {
        if (key == "actions") {
          return PacketError(key,
                             "a trace takes match fields only (the rule's "
                             "action is what it reports)");
        }
        if (key == "id" || key == "priority" || key == "cookie") {
          return PacketError(key, "not a packet field");
        }
        if (absl::Status ks = p.Key(key, val, kcol, vcol); !ks.ok()) return ks;
        // A mask that covers the whole field (/32, /255.255.255.255, /128,
        // 0x35/0xffff) is an exact value: the key reads the same without it.
        const size_t slash =
            val.has_value() ? val->find('/') : std::string_view::npos;
        if (slash == std::string_view::npos) return absl::OkStatus();
        NativeParser masked, unmasked;
        if (masked.Key(key, val, kcol, vcol).ok() &&
            unmasked.Key(key, val->substr(0, slash), kcol, vcol).ok() &&
            masked.rule.match == unmasked.rule.match) {
          return absl::OkStatus();
        }
        return PacketError(
            key, "a mask is not allowed in a trace (exact values only)");
      });
  if (!s.ok()) return s;
  const Match& m = p.rule.match;
  if (!m.tp_src.IsFull() || !m.tp_dst.IsFull()) {
    return PacketError(m.tp_src.IsFull() ? "tp_dst" : "tp_src",
                       "a range is not allowed in a trace (exact values only)");
  }
  return m.value;
}

bool ParseNativeNumber(std::string_view s, uint64_t* out) {
  return ParseU64(s, Base::kAuto, out);
}

absl::StatusOr<std::vector<Rule>> ParseNativeRules(std::string_view text,
                                                   std::vector<size_t>* lines) {
  std::vector<Rule> rules;
  if (lines != nullptr) lines->clear();
  absl::Status s =
      ForEachLine(text, [&](size_t line_no, std::string_view line) {
        if (IsBlankOrComment(line)) return absl::OkStatus();
        absl::StatusOr<Rule> r = ParseNativeLine(line, line_no);
        if (!r.ok()) return AtLine(line_no, r.status());
        rules.push_back(*std::move(r));
        if (lines != nullptr) lines->push_back(line_no);
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  return rules;
}

std::string FormatNativeRules(absl::Span<const Rule> rules) {
  std::string out;
  for (const Rule& r : rules) CatTo(&out, r.ToString(), "\n");
  return out;
}

absl::StatusOr<std::vector<Rule>> LoadRuleFile(const std::string& path,
                                               RuleFormat fmt,
                                               const ClassBenchOptions& opts,
                                               std::vector<size_t>* lines,
                                               RuleFormat* used) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseRuleText(*std::move(text), path, fmt, opts, lines, used);
}

absl::StatusOr<std::vector<Rule>> ParseRuleText(std::string text, const std::string& name,
                                                RuleFormat fmt, const ClassBenchOptions& opts,
                                                std::vector<size_t>* lines, RuleFormat* used) {
  StripUtf8Bom(&text);
  if (fmt == RuleFormat::kAuto) {
    fmt = LooksLikeClassBench(text) ? RuleFormat::kClassBench
                                    : RuleFormat::kNative;
  }
  if (used != nullptr) *used = fmt;
  absl::StatusOr<std::vector<Rule>> rules =
      fmt == RuleFormat::kClassBench ? ParseClassBench(text, opts, lines)
                                     : ParseNativeRules(text, lines);
  if (!rules.ok()) return WithPath(name, rules.status());
  return rules;
}

}  // namespace flowclass
