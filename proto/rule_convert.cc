#include "proto/rule_convert.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/flow/addr_text.h"
#include "dataplane/rules/rule_error.h"
#include "dataplane/rules/rule_format.h"
#include "proto/rule_convert_internal.h"

namespace flowclass {
namespace {

using internal::SetRaw;
using internal::Structurable;
using internal::WidthMask;

// INVALID_ARGUMENT "<field>: <problem>" in the proto's name of the field,
// with the typed field (rule_error.h).
absl::Status Bad(RuleField field, absl::string_view problem) {
  return RuleError(RuleErrorKind::kInvalid, field, ProtoName(field), problem);
}

// Wraps an address-parser error (INVALID_ARGUMENT without a field) with the
// field.
absl::Status WithField(RuleField field, const absl::Status& s) {
  if (s.ok()) return s;
  return Bad(field, s.message());
}

// (The helpers below name the error by `f`: its v1 name, ProtoName.)
absl::Status MaskedFromProto(const v1::MaskedValue& mv, Field f, Match* m) {
  const RuleField name = RuleFieldOf(f);
  const int bits = InfoOf(f).bits;
  const uint64_t full = WidthMask(bits);
  const uint64_t mask = mv.has_mask() ? mv.mask() : full;
  if (mv.value() > full)
    return Bad(name, absl::StrFormat("value 0x%x does not fit %d bits",
                                     mv.value(), bits));
  if (mask > full)
    return Bad(name,
               absl::StrFormat("mask 0x%x does not fit %d bits", mask, bits));
  SetRaw(m, f, mv.value(), mask);
  return absl::OkStatus();
}

absl::Status PortFromProto(const v1::PortMatch& pm, Field f, PortRange* range, Match* m) {
  const RuleField name = RuleFieldOf(f);
  switch (pm.kind_case()) {
    case v1::PortMatch::kExact:
      if (pm.exact() > 0xffff)
        return Bad(name, absl::StrCat("port ", pm.exact(), " exceeds 65535"));
      SetRaw(m, f, pm.exact(), 0xffff);
      return absl::OkStatus();
    case v1::PortMatch::kMasked:
      return MaskedFromProto(pm.masked(), f, m);
    case v1::PortMatch::kRange:
      if (pm.range().lo() > 0xffff || pm.range().hi() > 0xffff)
        return Bad(name, absl::StrCat("range ", pm.range().lo(), "-",
                                      pm.range().hi(), " exceeds 65535"));
      if (pm.range().lo() > pm.range().hi())
        return Bad(name, absl::StrCat("range ", pm.range().lo(), "-",
                                      pm.range().hi(), " has lo > hi"));
      range->lo = static_cast<uint16_t>(pm.range().lo());
      range->hi = static_cast<uint16_t>(pm.range().hi());
      return absl::OkStatus();
    case v1::PortMatch::KIND_NOT_SET:
      break;
  }
  return Bad(name, "empty PortMatch (set exact, masked or range)");
}

absl::Status VlanFromProto(const v1::VlanMatch& v, Field f, Match* m) {
  const RuleField name = RuleFieldOf(f);
  if (v.untagged()) {
    if (v.has_vid() || v.has_pcp())
      return Bad(name, "untagged with vid or pcp");
    SetRaw(m, f, 0, kVlanPresent);
    return absl::OkStatus();
  }
  uint64_t value = kVlanPresent, mask = kVlanPresent;
  if (v.has_vid()) {
    if (v.vid() > kVlanVidMask)
      return Bad(name, absl::StrCat("vid ", v.vid(), " exceeds 4095"));
    value |= v.vid();
    mask |= kVlanVidMask;
  }
  if (v.has_pcp()) {
    if (v.pcp() > 7) return Bad(name, absl::StrCat("pcp ", v.pcp(), " exceeds 7"));
    value |= uint64_t{v.pcp()} << kVlanPcpShift;
    mask |= uint64_t{7} << kVlanPcpShift;
  }
  SetRaw(m, f, value, mask);
  return absl::OkStatus();
}

absl::Status MatchFromProto(const v1::Match& p, Match* m) {
  if (p.has_in_port()) SetRaw(m, Field::kInPort, p.in_port(), 0xffffffffu);
  if (p.has_eth_type()) {
    if (p.eth_type() > 0xffff)
      return Bad(RuleField::kEthType, absl::StrFormat("0x%x does not fit 16 bits", p.eth_type()));
    SetRaw(m, Field::kEthType, p.eth_type(), 0xffff);
  }
  uint64_t v = 0, mk = 0;
  if (p.has_eth_src()) {
    if (auto s = ParseMacMasked(p.eth_src(), &v, &mk); !s.ok())
      return WithField(RuleField::kEthSrc, s);
    SetRaw(m, Field::kEthSrc, v, mk);
  }
  if (p.has_eth_dst()) {
    if (auto s = ParseMacMasked(p.eth_dst(), &v, &mk); !s.ok())
      return WithField(RuleField::kEthDst, s);
    SetRaw(m, Field::kEthDst, v, mk);
  }
  if (p.has_vlan()) {
    if (auto s = VlanFromProto(p.vlan(), Field::kVlan0Tci, m); !s.ok())
      return s;
  }
  if (p.has_inner_vlan()) {
    if (auto s = VlanFromProto(p.inner_vlan(), Field::kVlan1Tci, m); !s.ok())
      return s;
  }
  bool ipv4 = false, ipv6 = false;
  uint32_t a4 = 0, m4 = 0;
  if (p.has_ipv4_src()) {
    if (auto s = ParseIpv4Masked(p.ipv4_src(), &a4, &m4); !s.ok())
      return WithField(RuleField::kIpv4Src, s);
    SetRaw(m, Field::kIpv4Src, a4, m4);
    ipv4 = true;
  }
  if (p.has_ipv4_dst()) {
    if (auto s = ParseIpv4Masked(p.ipv4_dst(), &a4, &m4); !s.ok())
      return WithField(RuleField::kIpv4Dst, s);
    SetRaw(m, Field::kIpv4Dst, a4, m4);
    ipv4 = true;
  }
  absl::uint128 a6 = 0, m6 = 0;
  if (p.has_ipv6_src()) {
    if (auto s = ParseIpv6Masked(p.ipv6_src(), &a6, &m6); !s.ok())
      return WithField(RuleField::kIpv6Src, s);
    SetRaw(m, Field::kIpv6SrcHi, absl::Uint128High64(a6), absl::Uint128High64(m6));
    SetRaw(m, Field::kIpv6SrcLo, absl::Uint128Low64(a6), absl::Uint128Low64(m6));
    ipv6 = true;
  }
  if (p.has_ipv6_dst()) {
    if (auto s = ParseIpv6Masked(p.ipv6_dst(), &a6, &m6); !s.ok())
      return WithField(RuleField::kIpv6Dst, s);
    SetRaw(m, Field::kIpv6DstHi, absl::Uint128High64(a6), absl::Uint128High64(m6));
    SetRaw(m, Field::kIpv6DstLo, absl::Uint128Low64(a6), absl::Uint128Low64(m6));
    ipv6 = true;
  }
  if (ipv4 && ipv6) return Bad(RuleField::kIpv6Src, "IPv4 and IPv6 fields in one match");
  if (!p.has_eth_type() && ipv4) SetRaw(m, Field::kEthType, kEthTypeIpv4, 0xffff);
  if (!p.has_eth_type() && ipv6) SetRaw(m, Field::kEthType, kEthTypeIpv6, 0xffff);
  if (p.has_ip_proto())
    if (auto s = MaskedFromProto(p.ip_proto(), Field::kNwProto, m); !s.ok())
      return s;
  if (p.has_ip_tos())
    if (auto s = MaskedFromProto(p.ip_tos(), Field::kNwTos, m); !s.ok())
      return s;
  if (p.has_ip_ttl())
    if (auto s = MaskedFromProto(p.ip_ttl(), Field::kNwTtl, m); !s.ok())
      return s;
  if (p.has_ip_frag()) {
    const int f = static_cast<int>(p.ip_frag());
    if (f == v1::FRAG_UNSPECIFIED)
      return Bad(RuleField::kNwFrag, "FRAG_UNSPECIFIED (say which fragments: FRAG_NO, "
                                     "FRAG_YES, FRAG_FIRST, FRAG_LATER, FRAG_NOT_LATER)");
    if (f < 1 || f > static_cast<int>(std::size(kFragNames)))
      return Bad(RuleField::kNwFrag, absl::StrCat("unknown value ", f));
    SetRaw(m, Field::kNwFrag, kFragNames[f - 1].value, kFragNames[f - 1].mask);
  }
  if (p.has_tp_src())
    if (auto s = PortFromProto(p.tp_src(), Field::kTpSrc, &m->tp_src, m); !s.ok())
      return s;
  if (p.has_tp_dst())
    if (auto s = PortFromProto(p.tp_dst(), Field::kTpDst, &m->tp_dst, m); !s.ok())
      return s;
  if (p.has_tcp_flags())
    if (auto s = MaskedFromProto(p.tcp_flags(), Field::kTcpFlags, m); !s.ok())
      return s;
  return absl::OkStatus();
}

absl::Status ActionFromProto(const v1::Action& a, Action* out) {
  switch (a.kind_case()) {
    case v1::Action::kDrop:
      *out = Action::Drop();
      return absl::OkStatus();
    case v1::Action::kOutputPort:
      if (a.output_port() > kMaxPortNumber)
        return Bad(RuleField::kAction, absl::StrCat("output port ", a.output_port(),
                                                    " exceeds ", kMaxPortNumber));
      *out = Action::Output(a.output_port());
      return absl::OkStatus();
    case v1::Action::KIND_NOT_SET:
      break;
  }
  if (!a.GetReflection()->GetUnknownFields(a).empty())
    return Bad(RuleField::kAction,
               "a kind this server does not know (a newer client?); it takes drop "
               "or output_port");
  return Bad(RuleField::kAction, "not set (drop or output_port)");
}

void MaskedToProto(const Match& m, Field f, v1::MaskedValue* out) {
  out->set_value(m.value.Get(f));
  const uint64_t mk = m.mask.Get(f);
  if (mk != WidthMask(InfoOf(f).bits)) out->set_mask(mk);
}

void PortToProto(const Match& m, Field f, const PortRange& r,
                 v1::PortMatch* out) {
  if (!r.IsFull()) {
    out->mutable_range()->set_lo(r.lo);
    out->mutable_range()->set_hi(r.hi);
  } else if (m.mask.Get(f) == 0xffff) {
    out->set_exact(static_cast<uint32_t>(m.value.Get(f)));
  } else {
    MaskedToProto(m, f, out->mutable_masked());
  }
}

void VlanToProto(const Match& m, Field f, v1::VlanMatch* out) {
  const uint64_t mk = m.mask.Get(f), v = m.value.Get(f);
  if (!(v & kVlanPresent)) {
    out->set_untagged(true);
    return;
  }
  if (mk & kVlanVidMask) out->set_vid(static_cast<uint32_t>(v & kVlanVidMask));
  if (mk >> kVlanPcpShift) out->set_pcp(static_cast<uint32_t>(v >> kVlanPcpShift));
}

}  // namespace

namespace internal {

bool Structurable(const Match& m) {
  auto exact_or_none = [&](Field f) {
    const uint64_t mk = m.mask.Get(f);
    return mk == 0 || mk == WidthMask(InfoOf(f).bits);
  };
  if (!exact_or_none(Field::kInPort) || !exact_or_none(Field::kEthType))
    return false;
  for (Field f : {Field::kVlan0Tci, Field::kVlan1Tci}) {
    const uint64_t mk = m.mask.Get(f), v = m.value.Get(f);
    if (mk == 0) continue;
    if (!(mk & kVlanPresent)) return false;
    const uint64_t rest = mk & ~uint64_t{kVlanPresent};
    if (!(v & kVlanPresent)) {  // untagged
      if (rest != 0 || v != 0) return false;
      continue;
    }
    if ((rest & kVlanVidMask) != 0 && (rest & kVlanVidMask) != kVlanVidMask)
      return false;
    const uint64_t pcp = rest & ~uint64_t{kVlanVidMask};
    if (pcp != 0 && pcp != (uint64_t{7} << kVlanPcpShift)) return false;
    if ((v & ~mk) != 0) return false;
  }
  const uint64_t fm = m.mask.Get(Field::kNwFrag);
  if (fm != 0) {
    bool found = false;
    for (const FragName& n : kFragNames)
      found |= n.mask == fm && n.value == m.value.Get(Field::kNwFrag);
    if (!found) return false;
  }
  // IPv4 and IPv6 fields without their implied eth_type would come back
  // with one: keep such (invalid) rules verbatim in text.
  const bool has4 = m.mask.Get(Field::kIpv4Src) || m.mask.Get(Field::kIpv4Dst);
  const bool has6 = m.mask.w[kWordIpv6SrcHi] || m.mask.w[kWordIpv6SrcLo] ||
                    m.mask.w[kWordIpv6DstHi] || m.mask.w[kWordIpv6DstLo];
  if ((has4 || has6) && m.mask.Get(Field::kEthType) == 0) return false;
  if (has4 && has6) return false;
  // Port ranges combined with a mask on the same field: only text keeps both.
  if (!m.tp_src.IsFull() && m.mask.Get(Field::kTpSrc)) return false;
  if (!m.tp_dst.IsFull() && m.mask.Get(Field::kTpDst)) return false;
  // Bits set in a value outside its mask cannot be written structurally for
  // fields whose proto form is "exact or absent".
  for (Field f : {Field::kInPort, Field::kEthType})
    if (m.mask.Get(f) == 0 && m.value.Get(f) != 0) return false;
  return true;
}

}  // namespace internal

absl::Status RuleFromProto(const v1::Rule& in, Rule* out) {
  Rule r;
  if (!in.text().empty()) {
    // An empty match or action message (a client that always fills them)
    // is as good as none.
    if ((in.has_match() && in.match().ByteSizeLong() != 0) ||
        (in.has_action() && in.action().kind_case() != v1::Action::KIND_NOT_SET))
      return Bad(RuleField::kText, "set either text or match/action, not both");
    absl::StatusOr<Rule> parsed = ParseNativeRule(in.text(), in.id());
    if (!parsed.ok()) return Bad(RuleField::kText, parsed.status().message());
    r = *std::move(parsed);
    const std::string& t = in.text();
    if (!absl::StrContains(t, "priority=")) r.priority = in.priority();
    if (!absl::StrContains(t, "cookie=")) r.cookie = in.cookie();
    *out = std::move(r);
    return absl::OkStatus();
  }
  r.id = in.id();
  r.priority = in.priority();
  r.cookie = in.cookie();
  if (absl::Status s = MatchFromProto(in.match(), &r.match); !s.ok()) return s;
  if (!in.has_action()) return Bad(RuleField::kAction, "required (drop or output_port)");
  if (absl::Status s = ActionFromProto(in.action(), &r.action); !s.ok()) return s;
  *out = std::move(r);
  return absl::OkStatus();
}

void ActionToProto(const Action& in, v1::Action* out) {
  if (in.kind == Action::Kind::kOutput) {
    out->set_output_port(in.port);
  } else {
    out->mutable_drop();
  }
}

void RuleToProto(const Rule& in, v1::Rule* out) {
  out->Clear();
  out->set_id(in.id);
  out->set_priority(in.priority);
  out->set_cookie(in.cookie);
  const Match& m = in.match;
  if (!Structurable(m) || (in.action.kind != Action::Kind::kDrop &&
                           in.action.kind != Action::Kind::kOutput)) {
    out->set_text(in.ToString());
    return;
  }
  v1::Match* pm = out->mutable_match();
  if (m.mask.Get(Field::kInPort))
    pm->set_in_port(static_cast<uint32_t>(m.value.Get(Field::kInPort)));
  if (m.mask.Get(Field::kEthType))
    pm->set_eth_type(static_cast<uint32_t>(m.value.Get(Field::kEthType)));
  if (m.mask.Get(Field::kEthSrc))
    pm->set_eth_src(FormatMacMasked(m.value.Get(Field::kEthSrc), m.mask.Get(Field::kEthSrc)));
  if (m.mask.Get(Field::kEthDst))
    pm->set_eth_dst(FormatMacMasked(m.value.Get(Field::kEthDst), m.mask.Get(Field::kEthDst)));
  if (m.mask.Get(Field::kVlan0Tci)) VlanToProto(m, Field::kVlan0Tci, pm->mutable_vlan());
  if (m.mask.Get(Field::kVlan1Tci))
    VlanToProto(m, Field::kVlan1Tci, pm->mutable_inner_vlan());
  char text[kMaxIpv4MaskedText];
  if (m.mask.Get(Field::kIpv4Src))
    pm->set_ipv4_src(text, FormatIpv4MaskedTo(static_cast<uint32_t>(m.value.Get(Field::kIpv4Src)),
                                              static_cast<uint32_t>(m.mask.Get(Field::kIpv4Src)),
                                              text));
  if (m.mask.Get(Field::kIpv4Dst))
    pm->set_ipv4_dst(text, FormatIpv4MaskedTo(static_cast<uint32_t>(m.value.Get(Field::kIpv4Dst)),
                                              static_cast<uint32_t>(m.mask.Get(Field::kIpv4Dst)),
                                              text));
  if (m.mask.Ipv6Src() != 0)
    pm->set_ipv6_src(FormatIpv6Masked(m.value.Ipv6Src(), m.mask.Ipv6Src()));
  if (m.mask.Ipv6Dst() != 0)
    pm->set_ipv6_dst(FormatIpv6Masked(m.value.Ipv6Dst(), m.mask.Ipv6Dst()));
  if (m.mask.Get(Field::kNwProto)) MaskedToProto(m, Field::kNwProto, pm->mutable_ip_proto());
  if (m.mask.Get(Field::kNwTos)) MaskedToProto(m, Field::kNwTos, pm->mutable_ip_tos());
  if (m.mask.Get(Field::kNwTtl)) MaskedToProto(m, Field::kNwTtl, pm->mutable_ip_ttl());
  if (const uint64_t fm = m.mask.Get(Field::kNwFrag); fm != 0) {
    for (size_t i = 0; i < std::size(kFragNames); ++i)
      if (kFragNames[i].mask == fm && kFragNames[i].value == m.value.Get(Field::kNwFrag))
        pm->set_ip_frag(static_cast<v1::Frag>(i + 1));
  }
  if (m.mask.Get(Field::kTpSrc) || !m.tp_src.IsFull())
    PortToProto(m, Field::kTpSrc, m.tp_src, pm->mutable_tp_src());
  if (m.mask.Get(Field::kTpDst) || !m.tp_dst.IsFull())
    PortToProto(m, Field::kTpDst, m.tp_dst, pm->mutable_tp_dst());
  if (m.mask.Get(Field::kTcpFlags))
    MaskedToProto(m, Field::kTcpFlags, pm->mutable_tcp_flags());
  ActionToProto(in.action, out->mutable_action());
}

absl::Status RuleOpFromProto(const v1::RuleOp& in, RuleOp* out) {
  switch (in.op_case()) {
    case v1::RuleOp::kInsert:
    case v1::RuleOp::kReplace: {
      const v1::Rule& p =
          in.op_case() == v1::RuleOp::kInsert ? in.insert() : in.replace();
      // Straight into the op (a streamed load converts a million rules).
      out->kind = in.op_case() == v1::RuleOp::kInsert ? RuleOp::Kind::kInsert
                                                       : RuleOp::Kind::kReplace;
      out->id = 0;
      out->cookie = 0;
      return RuleFromProto(p, &out->rule);
    }
    case v1::RuleOp::kDeleteId:
      if (in.delete_id() == 0) return Bad(RuleField::kDeleteId, "rule id 0 is never valid");
      *out = RuleOp::Delete(in.delete_id());
      return absl::OkStatus();
    case v1::RuleOp::kDeleteCookie:
      *out = RuleOp::DeleteByCookie(in.delete_cookie());
      return absl::OkStatus();
    case v1::RuleOp::OP_NOT_SET:
      break;
  }
  if (!in.GetReflection()->GetUnknownFields(in).empty())
    return Bad(RuleField::kOp, "a kind this server does not know (a newer client?); it takes "
                               "insert, replace, delete_id or delete_cookie");
  return Bad(RuleField::kOp, "not set (insert, replace, delete_id or delete_cookie)");
}

void RuleOpToProto(const RuleOp& in, v1::RuleOp* out) {
  switch (in.kind) {
    case RuleOp::Kind::kInsert:
      RuleToProto(in.rule, out->mutable_insert());
      break;
    case RuleOp::Kind::kReplace:
      RuleToProto(in.rule, out->mutable_replace());
      break;
    case RuleOp::Kind::kDelete:
      out->set_delete_id(in.id);
      break;
    case RuleOp::Kind::kDeleteByCookie:
      out->set_delete_cookie(in.cookie);
      break;
  }
}

}  // namespace flowclass
