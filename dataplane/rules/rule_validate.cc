// rule_validate.cc — ValidateRule: the single gate every rule passes before it
// reaches a RuleTable (see rule.h for the contract).
//
// Checks run in a fixed order so that a rule with several problems always
// reports the same one: id, value/mask per field, bits outside every field,
// port ranges, protocol prerequisites (IPv4 / IPv6 / IP), VLAN TCI, action.
// Every message starts with the name of the field at fault (InfoOf(f).name,
// ipv6_src / ipv6_dst for either half of an address, or "id" / "action" /
// "match"), then says what is wrong with the numbers; the status carries the
// same field as a RuleOpError (rule_error.h), which is what callers read.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_error.h"

namespace flowclass {
namespace {

// "<field>: <problem>" with the typed field (its native name).
absl::Status Invalid(RuleField field, absl::string_view problem) {
  return RuleError(RuleErrorKind::kInvalid, field, problem);
}

// "0x0a000001": zero-padded to the field's width.
std::string Hex(uint64_t v, int bits) {
  return absl::StrFormat("0x%0*x", (bits + 3) / 4, v);
}

bool IsMatched(const Match& m, Field f) { return m.mask.Get(f) != 0; }

const PortRange* RangeOf(const Match& m, Field f) {
  if (f == Field::kTpSrc) return &m.tp_src;
  if (f == Field::kTpDst) return &m.tp_dst;
  return nullptr;
}

// True when the rule says something about field `f` (a mask or a range).
// An IPv6 address is two 64-bit fields here, but the user wrote one address:
// messages name and show the address a half belongs to.
// (RuleFieldOf names the address of either half.)
struct Ipv6Address {
  absl::uint128 (Flow::*get)() const;
};
std::optional<Ipv6Address> Ipv6AddressOf(Field f) {
  if (f == Field::kIpv6SrcHi || f == Field::kIpv6SrcLo) return Ipv6Address{&Flow::Ipv6Src};
  if (f == Field::kIpv6DstHi || f == Field::kIpv6DstLo) return Ipv6Address{&Flow::Ipv6Dst};
  return std::nullopt;
}

bool Constrains(const Match& m, Field f) {
  const PortRange* r = RangeOf(m, f);
  return IsMatched(m, f) || (r != nullptr && !r->IsFull());
}

// eth_type matched exactly (full 16-bit mask) with value `t`.
bool EthTypeIs(const Match& m, uint16_t t) {
  return m.mask.Get(Field::kEthType) == 0xffff &&
         m.value.Get(Field::kEthType) == t;
}

std::string EthTypeDescription(const Match& m) {
  const uint64_t mask = m.mask.Get(Field::kEthType);
  if (mask == 0) return "eth_type is not matched";
  if (mask != 0xffff)
    return absl::StrCat("eth_type is ", Hex(m.value.Get(Field::kEthType), 16),
                        "/", Hex(mask, 16), " (not exact)");
  return absl::StrCat("eth_type is ", Hex(m.value.Get(Field::kEthType), 16));
}

// Per flow word, the bits that belong to some field.
constexpr std::array<uint64_t, kFlowWords> KnownBits() {
  std::array<uint64_t, kFlowWords> known{};
  for (const FieldInfo& info : kFieldInfo) known[info.word] |= info.Mask();
  return known;
}
inline constexpr std::array<uint64_t, kFlowWords> kKnownBits = KnownBits();

absl::Status CheckValueInsideMask(const Match& m) {
  // Fast path (every rule of a million-rule stream passes here): no value
  // bit outside its mask and no bit outside every field, word by word.
  uint64_t bad = 0;
  for (int w = 0; w < kFlowWords; ++w) {
    bad |= m.value.w[w] & ~m.mask.w[w];
    bad |= (m.value.w[w] | m.mask.w[w]) & ~kKnownBits[w];
  }
  if (bad == 0) return absl::OkStatus();
  // Slow path: find the field to name, in the documented order.
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    const FieldInfo& info = InfoOf(f);
    const uint64_t v = m.value.Get(f);
    const uint64_t k = m.mask.Get(f);
    if ((v & ~k) != 0) {
      if (const std::optional<Ipv6Address> a = Ipv6AddressOf(f)) {
        return Invalid(RuleFieldOf(f),
                       absl::StrCat("value ", Ipv6String((m.value.*a->get)()),
                                    " has bits outside mask ", Ipv6String((m.mask.*a->get)())));
      }
      return Invalid(RuleFieldOf(f), absl::StrCat("value ", Hex(v, info.bits),
                                                  " has bits outside mask ", Hex(k, info.bits)));
    }
  }
  // Bits that belong to no field (word 0 [63:60]) can only be set by writing
  // Flow::w directly; they would never match a parsed key.
  for (int w = 0; w < kFlowWords; ++w) {
    const uint64_t stray = (m.value.w[w] | m.mask.w[w]) & ~kKnownBits[w];
    if (stray != 0) {
      return Invalid(RuleField::kMatch, absl::StrCat("word ", w, " has bits outside every field (",
                                                     Hex(stray, 64), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRanges(const Match& m) {
  for (Field f : {Field::kTpSrc, Field::kTpDst}) {
    const PortRange& r = *RangeOf(m, f);
    if (r.lo > r.hi) {
      return Invalid(RuleFieldOf(f),
                     absl::StrCat("range lo ", r.lo, " is greater than hi ", r.hi));
    }
    if (!r.IsFull() && IsMatched(m, f)) {
      return Invalid(RuleFieldOf(f),
                     absl::StrCat("range ", r.lo, "-", r.hi, " combined with mask ",
                                  Hex(m.mask.Get(f), 16), " (a range replaces the mask; use one)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPrerequisites(const Match& m) {
  // The usual rule first: IPv4 with no IPv6 address (every L3/L4 field is
  // then allowed).  A streamed load checks a million of them.
  if (EthTypeIs(m, kEthTypeIpv4) && m.mask.Ipv6Src() == 0 && m.mask.Ipv6Dst() == 0)
    return absl::OkStatus();
  for (Field f : {Field::kIpv4Src, Field::kIpv4Dst}) {
    if (Constrains(m, f) && !EthTypeIs(m, kEthTypeIpv4)) {
      return Invalid(RuleFieldOf(f),
                     absl::StrCat("requires eth_type=0x0800 but ", EthTypeDescription(m)));
    }
  }
  for (Field f : {Field::kIpv6SrcHi, Field::kIpv6SrcLo, Field::kIpv6DstHi,
                  Field::kIpv6DstLo}) {
    if (Constrains(m, f) && !EthTypeIs(m, kEthTypeIpv6)) {
      return Invalid(RuleFieldOf(f),
                     absl::StrCat("requires eth_type=0x86dd but ", EthTypeDescription(m)));
    }
  }
  // L3/L4 fields need an IP packet.  Ports need no nw_proto: ClassBench
  // rules match ports with a wildcard protocol.
  const bool ip = EthTypeIs(m, kEthTypeIpv4) || EthTypeIs(m, kEthTypeIpv6);
  for (Field f : {Field::kNwProto, Field::kNwTos, Field::kNwTtl, Field::kNwFrag,
                  Field::kTpSrc, Field::kTpDst, Field::kTcpFlags}) {
    if (Constrains(m, f) && !ip) {
      return Invalid(RuleFieldOf(f),
                     absl::StrCat("requires an IP eth_type (0x0800 or 0x86dd) but ",
                                  EthTypeDescription(m)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckVlan(const Match& m) {
  constexpr uint64_t kVidPcp = 0xffff & ~uint64_t{kVlanPresent};
  for (Field f : {Field::kVlan0Tci, Field::kVlan1Tci}) {
    const uint64_t v = m.value.Get(f);
    const uint64_t k = m.mask.Get(f);
    // Untagged (present bit matched as 0, OVS's vlan_tci=0) with vid/pcp
    // matched as 0 too is fine: an untagged frame's TCI is all zero.
    const bool untagged = (k & kVlanPresent) != 0 && (v & 0xffff) == 0;
    if ((k & kVidPcp) != 0 && (v & kVlanPresent) == 0 && !untagged) {
      return Invalid(RuleFieldOf(f),
                     absl::StrCat("matches vid/pcp (value ", Hex(v, 16), " mask ", Hex(k, 16),
                                  ") without the present bit 0x1000 in the value"));
    }
  }
  // An inner tag needs an outer one: with the outer matched as absent, any
  // match on the inner TCI can never hit (a frame without a tag has neither).
  const uint64_t outer_v = m.value.Get(Field::kVlan0Tci);
  const uint64_t outer_k = m.mask.Get(Field::kVlan0Tci);
  const uint64_t inner_v = m.value.Get(Field::kVlan1Tci);
  const uint64_t inner_k = m.mask.Get(Field::kVlan1Tci);
  if ((outer_k & kVlanPresent) != 0 && (outer_v & kVlanPresent) == 0 &&
      (inner_v & kVlanPresent) != 0)
    return Invalid(RuleField::kVlan1Tci, absl::StrCat(
        "matches an inner tag (value ", Hex(inner_v, 16),
        " mask ", Hex(inner_k, 16), ") but the outer tag is matched as absent (",
        InfoOf(Field::kVlan0Tci).name, " present bit 0): no frame has an inner tag without "
        "an outer one"));
  return absl::OkStatus();
}

absl::Status CheckAction(const Action& a) {
  switch (a.kind) {
    case Action::Kind::kDrop:
      return absl::OkStatus();
    case Action::Kind::kOutput:
      if (a.port > kMaxPortNumber) {
        return Invalid(RuleField::kAction, absl::StrCat("output port ", a.port,
                                                        " is greater than the maximum ",
                                                        kMaxPortNumber));
      }
      return absl::OkStatus();
  }
  return Invalid(RuleField::kAction,
                 absl::StrCat("unknown action kind ", static_cast<int>(a.kind)));
}

}  // namespace

absl::Status ValidateRule(const Rule& rule) {
  if (rule.id == 0) {
    return Invalid(RuleField::kId, "rule id must be non-zero");
  }
  if (absl::Status s = CheckValueInsideMask(rule.match); !s.ok()) return s;
  if (absl::Status s = CheckRanges(rule.match); !s.ok()) return s;
  if (absl::Status s = CheckPrerequisites(rule.match); !s.ok()) return s;
  if (absl::Status s = CheckVlan(rule.match); !s.ok()) return s;
  return CheckAction(rule.action);
}

}  // namespace flowclass
