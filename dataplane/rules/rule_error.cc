// rule_error.cc — RuleOpError: the field names, the payload's encoding, the
// error constructors (see rule_error.h for the contract).
#include "dataplane/rules/rule_error.h"

#include <array>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flowclass {
namespace {

struct FieldNames {
  RuleField field;
  const char* native;
  const char* proto;
};

// The one table of error field names, in RuleField order.
constexpr std::array<FieldNames, static_cast<size_t>(RuleField::kCount)> kNames = {{
    {RuleField::kNone, "", ""},
    {RuleField::kInPort, "in_port", "in_port"},
    {RuleField::kEthType, "eth_type", "eth_type"},
    {RuleField::kTcpFlags, "tcp_flags", "tcp_flags"},
    {RuleField::kEthDst, "eth_dst", "eth_dst"},
    {RuleField::kVlan0Tci, "vlan0_tci", "vlan"},
    {RuleField::kEthSrc, "eth_src", "eth_src"},
    {RuleField::kVlan1Tci, "vlan1_tci", "inner_vlan"},
    {RuleField::kIpv4Src, "ipv4_src", "ipv4_src"},
    {RuleField::kIpv4Dst, "ipv4_dst", "ipv4_dst"},
    {RuleField::kIpv6Src, "ipv6_src", "ipv6_src"},
    {RuleField::kIpv6Dst, "ipv6_dst", "ipv6_dst"},
    {RuleField::kNwProto, "nw_proto", "ip_proto"},
    {RuleField::kNwTos, "nw_tos", "ip_tos"},
    {RuleField::kNwTtl, "nw_ttl", "ip_ttl"},
    {RuleField::kNwFrag, "nw_frag", "ip_frag"},
    {RuleField::kTpSrc, "tp_src", "tp_src"},
    {RuleField::kTpDst, "tp_dst", "tp_dst"},
    {RuleField::kMatch, "match", "match"},
    {RuleField::kId, "id", "id"},
    {RuleField::kAction, "action", "action"},
    {RuleField::kText, "text", "text"},
    {RuleField::kKind, "kind", "kind"},
    {RuleField::kOp, "op", "op"},
    {RuleField::kDeleteId, "delete_id", "delete_id"},
    {RuleField::kMaxRules, "max_rules", "max_rules"},
    {RuleField::kMaxEntries, "max_entries", "max_entries"},
    {RuleField::kOps, "ops", "ops"},
}};

constexpr bool InOrder() {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (static_cast<size_t>(kNames[i].field) != i) return false;
  return true;
}
static_assert(InOrder(), "kNames must list every RuleField in enum order");

// Flow field -> error field, in Field order.
constexpr std::array<RuleField, kFieldCount> kOfFlowField = {{
    RuleField::kInPort,  RuleField::kEthType, RuleField::kTcpFlags, RuleField::kEthDst,
    RuleField::kVlan0Tci, RuleField::kEthSrc, RuleField::kVlan1Tci, RuleField::kIpv4Src,
    RuleField::kIpv4Dst, RuleField::kIpv6Src, RuleField::kIpv6Src,  RuleField::kIpv6Dst,
    RuleField::kIpv6Dst, RuleField::kNwProto, RuleField::kNwTos,    RuleField::kNwTtl,
    RuleField::kNwFrag,  RuleField::kTpSrc,   RuleField::kTpDst,
}};

// A field's native name is the flow's (InfoOf(f).name), the IPv6 halves'
// being their address's.
constexpr bool SameAsFlowNames() {
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    if (f == Field::kIpv6SrcHi || f == Field::kIpv6SrcLo || f == Field::kIpv6DstHi ||
        f == Field::kIpv6DstLo)
      continue;
    const char* a = kNames[static_cast<size_t>(kOfFlowField[i])].native;
    const char* b = InfoOf(f).name;
    for (; *a != 0 && *a == *b; ++a) ++b;
    if (*a != *b) return false;
  }
  return true;
}
static_assert(SameAsFlowNames(), "a match field's native name is the flow field's name");

// Encoding, version 1: 16 bytes.
//   [0] version (1)  [1] kind  [2] field  [3] has_op (0 or 1)
//   [4..8) index, little-endian  [8..16) rule_id, little-endian
constexpr uint8_t kVersion = 1;
constexpr size_t kEncodedSize = 16;

absl::StatusCode CodeOf(RuleErrorKind kind) {
  return kind == RuleErrorKind::kLimit ? absl::StatusCode::kResourceExhausted
                                       : absl::StatusCode::kInvalidArgument;
}

}  // namespace

absl::string_view NativeName(RuleField f) {
  const size_t i = static_cast<size_t>(f);
  return i < kNames.size() ? kNames[i].native : "";
}

absl::string_view ProtoName(RuleField f) {
  const size_t i = static_cast<size_t>(f);
  return i < kNames.size() ? kNames[i].proto : "";
}

RuleField RuleFieldOf(Field f) {
  const size_t i = static_cast<size_t>(f);
  return i < kOfFlowField.size() ? kOfFlowField[i] : RuleField::kNone;
}

absl::Cord EncodeRuleOpError(const RuleOpError& e) {
  char b[kEncodedSize];
  b[0] = static_cast<char>(kVersion);
  b[1] = static_cast<char>(e.kind);
  b[2] = static_cast<char>(e.field);
  b[3] = static_cast<char>(e.has_op ? 1 : 0);
  for (int i = 0; i < 4; ++i) b[4 + i] = static_cast<char>((e.index >> (8 * i)) & 0xff);
  for (int i = 0; i < 8; ++i) b[8 + i] = static_cast<char>((e.rule_id >> (8 * i)) & 0xff);
  return absl::Cord(absl::string_view(b, sizeof(b)));
}

std::optional<RuleOpError> DecodeRuleOpError(const absl::Cord& payload) {
  if (payload.size() != kEncodedSize) return std::nullopt;
  const std::string bytes(payload);
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  if (b[0] != kVersion || b[1] >= static_cast<uint8_t>(RuleErrorKind::kCount) ||
      b[2] >= static_cast<uint8_t>(RuleField::kCount) || b[3] > 1)
    return std::nullopt;
  RuleOpError e;
  e.kind = static_cast<RuleErrorKind>(b[1]);
  e.field = static_cast<RuleField>(b[2]);
  e.has_op = b[3] == 1;
  for (int i = 0; i < 4; ++i) e.index |= uint32_t{b[4 + i]} << (8 * i);
  for (int i = 0; i < 8; ++i) e.rule_id |= uint64_t{b[8 + i]} << (8 * i);
  return e;
}

void SetRuleOpError(absl::Status* s, const RuleOpError& e) {
  s->SetPayload(kRuleOpErrorTypeUrl, EncodeRuleOpError(e));
}

std::optional<RuleOpError> GetRuleOpError(const absl::Status& s) {
  const auto p = s.GetPayload(kRuleOpErrorTypeUrl);  // absl::optional<absl::Cord>
  if (!p.has_value()) return std::nullopt;
  return DecodeRuleOpError(*p);
}

absl::Status RuleError(RuleErrorKind kind, RuleField field, absl::string_view name,
                       absl::string_view problem) {
  absl::Status s(CodeOf(kind), absl::StrCat(name, ": ", problem));
  SetRuleOpError(&s, RuleOpError{kind, field, false, 0, 0});
  return s;
}

absl::Status RuleError(RuleErrorKind kind, RuleField field, absl::string_view problem) {
  return RuleError(kind, field, NativeName(field), problem);
}

std::string OperationPrefix(uint32_t index, uint64_t rule_id) {
  return absl::StrCat("operation ", index, " (rule id ", rule_id, "): ");
}

absl::Status AtOperation(const absl::Status& s, uint32_t index, uint64_t rule_id) {
  RuleOpError e = GetRuleOpError(s).value_or(RuleOpError{});
  e.has_op = true;
  e.index = index;
  e.rule_id = rule_id;
  absl::Status out(s.code(), absl::StrCat(OperationPrefix(index, rule_id), s.message()));
  s.ForEachPayload([&out](absl::string_view url, const absl::Cord& p) { out.SetPayload(url, p); });
  SetRuleOpError(&out, e);
  return out;
}

std::string RenameErrorField(absl::string_view message, const RuleOpError& e,
                             absl::string_view name) {
  const std::string was = absl::StrCat(OperationPrefix(e.index, e.rule_id), NativeName(e.field), ": ");
  if (e.field == RuleField::kNone || !absl::StartsWith(message, was)) return std::string(message);
  return absl::StrCat(OperationPrefix(e.index, e.rule_id), name, ": ", message.substr(was.size()));
}

}  // namespace flowclass
