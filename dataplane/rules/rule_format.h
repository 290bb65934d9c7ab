// rule_format.h — reading rule sets and packet traces from text.
//
// Contract
// --------
// Three text inputs are understood (full description with examples in
// docs/rule-formats.md):
//
//   ClassBench filters   "@a.b.c.d/len a.b.c.d/len lo : hi lo : hi 0xPP/0xMM"
//                        in the space-separated form, or the tab-separated
//                        generator output with a trailing TCP-flags field
//                        "0xVVVV/0xMMMM".  Which form a file uses is decided
//                        by its first rule; every rule must then agree.
//   Native rules         ovs-ofctl style, one rule per line:
//                        "priority=100,udp,nw_src=10.0.0.0/8,tp_dst=1000-2000,actions=output:2"
//                        Rule::ToString() prints this format, and parsing its
//                        output gives back the same Rule.
//   ClassBench traces    "sip dip sport dport proto expected" (decimal).
//
// These are control-plane/setup functions: they allocate, return
// absl::Status(Or), and are safe to call from any thread (no shared state).
// Nothing here is on the packet path.
//
// Addresses (IPv4, IPv6, Ethernet; exact, /prefix or /mask) are read by the
// codec of addr_text.h, the one the gRPC API's address fields use too: no
// leading zeros in IPv4 octets, address bits outside the mask cleared.
//
// Checks are syntactic only: a value must parse and fit its field, ranges
// must be ordered, keys must be known and not repeated.  Cross-field
// semantics (an IPv4 address on an IPv6 rule, a port on ARP, ...) are left
// to ValidateRule, which every rule passes on its way into a RuleTable.
//
// Errors are absl::InvalidArgumentError with the message
//     "line L, column C: <field>: <problem>"
// L is the 1-based line of the text (every physical line counts, including
// comments and blanks), C the 1-based byte column of the offending key or
// value.  <field> is the native key as written (e.g. "nw_src"), or for
// ClassBench/trace input the flow field name from kFieldInfo ("ipv4_src",
// "tp_dst", "tcp_flags", ...).  The file loaders prefix the path:
//     "rules/acl1: line 12, column 5: ipv4_src: prefix length 33 exceeds 32"
// and return NotFoundError when the file cannot be read.
#ifndef FLOWCLASS_DATAPLANE_RULES_RULE_FORMAT_H_
#define FLOWCLASS_DATAPLANE_RULES_RULE_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"

namespace flowclass {

// ---------------------------------------------------------------- ClassBench

struct ClassBenchOptions {
  // Action of every rule when num_ports == 0.
  Action action = Action::Output(1);
  // When > 0, rule L (1-based) gets output:((L-1) % num_ports) + 1, which
  // spreads traffic over ports 1..num_ports.
  uint32_t num_ports = 0;
};

// Parses a whole ClassBench filter file.  Rule L of an N-rule file (counting
// only rule lines) gets id = L, priority = N - L + 1 (the first rule wins, as
// in ClassBench's first-match semantics), cookie 0, eth_type 0x0800 exact.
// Blank lines and lines starting with '#' are skipped.
// `lines`, if not null, receives the 1-based line of each rule (this and the
// other file parsers below).
absl::StatusOr<std::vector<Rule>> ParseClassBench(
    std::string_view text, const ClassBenchOptions& opts = {},
    std::vector<size_t>* lines = nullptr);

// -------------------------------------------------------------------- Native

inline constexpr uint32_t kDefaultNativePriority = 32768;

// Parses one rule line ('#' and what follows it is ignored).  `default_id` is used when the
// line has no "id=".  Errors read "column C: field: problem" (no line).
absl::StatusOr<Rule> ParseNativeRule(std::string_view line,
                                     uint64_t default_id);

// Parses the fields of one packet in the native match syntax, as a trace
// takes them ("in_port=1,udp,nw_src=10.0.0.1,tp_dst=53"): the match keys of
// a rule, each taken exactly; a field left out is 0.  Returns the match's
// value.  Syntax errors read as ParseNativeRule's ("column C: field:
// problem"); what a packet cannot have is refused as "<key>: <problem>":
//   id, priority, cookie  "not a packet field"
//   actions               "a trace takes match fields only (...)"
//   a mask (value/mask, addr/len) that leaves bits of the field out:
//     "a mask is not allowed in a trace (exact values only)"
//   a port range (tp_src, tp_dst):
//     "a range is not allowed in a trace (exact values only)"
// A mask covering the whole field (/32, /128, 0x35/0xffff) is an exact
// value; keys that set part of a field by their nature (dl_vlan, nw_tos,
// ip_dscp, ip_frag, tcp_flags=+syn) are fine: the packet has the field's
// other bits 0.
absl::StatusOr<Flow> ParseNativePacket(std::string_view text);

// Parses a native rule file: '#' comment lines and blank lines are skipped; a
// rule without "id=" gets the 1-based number of the line it is on.
absl::StatusOr<std::vector<Rule>> ParseNativeRules(std::string_view text,
                                                   std::vector<size_t>* lines = nullptr);

// An unsigned number as the native format reads it (ids, cookies): decimal,
// or hex after 0x / 0X; no sign, no blanks; false on overflow past 2^64-1.
bool ParseNativeNumber(std::string_view s, uint64_t* out);

// One Rule::ToString() per line, newline-terminated.
std::string FormatNativeRules(absl::Span<const Rule> rules);

// ---------------------------------------------------------------------- Files

enum class RuleFormat { kAuto, kClassBench, kNative };

// kAuto: the file is ClassBench when its first line that is neither blank nor
// a '#' comment starts with '@', native otherwise.  A UTF-8 byte-order mark at
// the start is skipped.  `used`, if not null, receives the format the file
// was read as (kClassBench or kNative).
absl::StatusOr<std::vector<Rule>> LoadRuleFile(
    const std::string& path, RuleFormat fmt = RuleFormat::kAuto,
    const ClassBenchOptions& opts = {}, std::vector<size_t>* lines = nullptr,
    RuleFormat* used = nullptr);

// LoadRuleFile's parsing of rule text read elsewhere (stdin, a command
// line): `name` stands for the path in error messages.
absl::StatusOr<std::vector<Rule>> ParseRuleText(
    std::string text, const std::string& name, RuleFormat fmt = RuleFormat::kAuto,
    const ClassBenchOptions& opts = {}, std::vector<size_t>* lines = nullptr,
    RuleFormat* used = nullptr);

// -------------------------------------------------------------------- Traces

struct TraceEntry {
  FlowKey key;        // MakeFiveTupleKey(sip, dip, sport, dport, proto), in_port 0
  uint32_t expected;  // ClassBench: 1-based line of the first matching filter
};

// Columns beyond the sixth are ignored; blank and '#' lines are skipped.
absl::StatusOr<std::vector<TraceEntry>> ParseTrace(std::string_view text);
absl::StatusOr<std::vector<TraceEntry>> LoadTraceFile(const std::string& path);

// ------------------------------------------------- names shared with printers

// TCP flag names for "tcp_flags=+syn-ack" (bit i of the 12-bit field).
inline constexpr const char* kTcpFlagNames[] = {"fin", "syn", "rst", "psh",
                                                "ack", "urg", "ece", "cwr",
                                                "ns"};
inline constexpr int kNumTcpFlagNames = 9;

// ip_frag keywords and the nw_frag value/mask each stands for (OVS).
struct FragName {
  const char* name;
  uint8_t value;
  uint8_t mask;
};
inline constexpr FragName kFragNames[] = {
    {"no", 0, kFragAny},
    {"yes", kFragAny, kFragAny},
    {"first", kFragAny, kFragMask},
    {"later", kFragAny | kFragLater, kFragMask},
    {"not_later", 0, kFragLater},
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_RULE_FORMAT_H_
