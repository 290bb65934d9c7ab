// addr_text.h — the text form of IPv4, IPv6 and Ethernet addresses with masks.
//
// Contract
// --------
// The one codec for every place that reads or writes an address as text: the
// native rule format and ClassBench filters (rule_format.h), Rule::ToString
// and Flow::ToString (flow.h, rule.h), the rule table's dumps, and the gRPC
// API's address fields (proto/rule_convert.h).  A format and a parse for each
// kind, paired as VPP's format_x / unformat_x:
//
//   ADDR             exact (the mask is all ones)
//   ADDR/LEN         prefix: LEN is decimal digits only (leading zeros are
//                    fine, no sign, no blanks), 0..32 (IPv4), 0..128 (IPv6),
//                    0..48 (Ethernet)
//   ADDR/MASK        any mask, written in the address syntax; the suffix is a
//                    MASK when it holds the address separator ('.' for IPv4,
//                    ':' for IPv6 and Ethernet), a LEN otherwise
//
//   IPv4 ADDR        a.b.c.d: four decimal octets 0..255, no leading zeros
//                    (inet_pton's grammar; "010" is refused: inet_aton and
//                    many tools read it as octal 8)
//   IPv6 ADDR        what inet_pton(AF_INET6) accepts (no zone, no NUL)
//   Ethernet ADDR    six groups of one or two hex digits, separated by ':'
//
// Nothing else: no blanks anywhere, nothing after the address or mask.
//
// Value bits outside the mask are cleared, as ovs-ofctl does
// (match_set_nw_src_masked() and friends store value & mask):
// "10.1.2.3/8" parses to 10.0.0.0/8.  Every Parse* therefore returns a value
// inside its mask.
//
// Format* write the value as given and then nothing when the mask is all
// ones, "/LEN" when it is a prefix (IPv4 and IPv6), "/MASK" otherwise
// (Ethernet masks are always written out, as OVS prints them).  So
// Format(Parse(t)) is the canonical spelling of any accepted t, and
// Parse(Format(v, m)) == (v, m) for every mask m and value v inside it.
//
// Errors are INVALID_ARGUMENT whose message is the problem alone, e.g.
// "bad IPv4 address '1.2.3'", "prefix length 33 exceeds 32"; the caller puts
// the field (and a column) in front.  `*error_at`, if given, receives the
// byte offset in `text` of the part at fault: 0 for the address, one past
// the '/' for the mask or length.
//
// Plain functions, any thread.  Parse* and the *To / Append* formatters
// allocate nothing on success (an error's message does): they serve the bulk
// rule paths (ReadRuleBatchWire, AppendRuleBatchWire).
#ifndef FLOWCLASS_DATAPLANE_FLOW_ADDR_TEXT_H_
#define FLOWCLASS_DATAPLANE_FLOW_ADDR_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"

namespace flowclass {

// Longest texts the *To formatters write (no NUL is written), plus one.
inline constexpr size_t kMaxIpv4MaskedText = sizeof("255.255.255.255/255.255.255.255");
// inet_ntop wants INET6_ADDRSTRLEN (46) bytes of room for each address.
inline constexpr size_t kMaxIpv6MaskedText = 2 * 46;
inline constexpr size_t kMaxMacMaskedText = sizeof("ff:ff:ff:ff:ff:ff/ff:ff:ff:ff:ff:ff");

// ---------------------------------------------------------------------- IPv4

absl::Status ParseIpv4Masked(std::string_view text, uint32_t* value, uint32_t* mask,
                             size_t* error_at = nullptr);
// Into buf (kMaxIpv4MaskedText bytes at least); returns the length.
size_t FormatIpv4MaskedTo(uint32_t value, uint32_t mask, char* buf);
void AppendIpv4Masked(uint32_t value, uint32_t mask, std::string* out);
std::string FormatIpv4Masked(uint32_t value, uint32_t mask);

// ---------------------------------------------------------------------- IPv6

absl::Status ParseIpv6Masked(std::string_view text, absl::uint128* value, absl::uint128* mask,
                             size_t* error_at = nullptr);
// Into buf (kMaxIpv6MaskedText bytes at least); returns the length.
size_t FormatIpv6MaskedTo(absl::uint128 value, absl::uint128 mask, char* buf);
void AppendIpv6Masked(absl::uint128 value, absl::uint128 mask, std::string* out);
std::string FormatIpv6Masked(absl::uint128 value, absl::uint128 mask);

// ------------------------------------------------------------------ Ethernet

// The address in the low 48 bits, first byte on the wire most significant.
absl::Status ParseMacMasked(std::string_view text, uint64_t* value, uint64_t* mask,
                            size_t* error_at = nullptr);
// Into buf (kMaxMacMaskedText bytes at least); returns the length.
size_t FormatMacMaskedTo(uint64_t value, uint64_t mask, char* buf);
void AppendMacMasked(uint64_t value, uint64_t mask, std::string* out);
std::string FormatMacMasked(uint64_t value, uint64_t mask);

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_FLOW_ADDR_TEXT_H_
