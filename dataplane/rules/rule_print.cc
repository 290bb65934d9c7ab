// rule_print.cc — the textual forms of Action and Rule (declared in rule.h).
//
// Rule::ToString() prints the native rule format of rule_format.h, choosing
// the most readable spelling of each field (protocol keywords, prefixes,
// dl_vlan, ip_dscp, ip_frag names, +syn-ack) and falling back to a numeric
// value/mask when no shorter spelling says exactly the same thing, so that
// ParseNativeRule(rule.ToString()) == rule for every rule the format can
// express (see rule_format_test.cc's round-trip property test).  Addresses
// and numbers are spelled by the flow room's codecs (flow/addr_text.h,
// flow/internal/field_text.h), so a rule and a flow dump never disagree.
#include <string>
#include <string_view>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "dataplane/flow/addr_text.h"
#include "dataplane/flow/flow.h"
#include "dataplane/flow/internal/field_text.h"
#include "dataplane/internal/cat.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_format.h"

namespace flowclass {
namespace {

using internal::Cat;
using internal::CatTo;
using internal::Ipv4Masked;
using internal::NumMasked;
using internal::NumString;

std::string TcpFlagsString(uint64_t v, uint64_t m) {
  if (m != 0 && (m >> kNumTcpFlagNames) == 0) {
    std::string out;
    for (int b = 0; b < kNumTcpFlagNames; ++b) {
      if (m & (uint64_t{1} << b)) {
        CatTo(&out, (v >> b) & 1 ? "+" : "-", kTcpFlagNames[b]);
      }
    }
    return out;
  }
  return NumMasked(Field::kTcpFlags, v, m);
}

const char* ShorthandName(uint64_t eth_type, int nw_proto) {
  if (eth_type == kEthTypeArp) return nw_proto < 0 ? "arp" : nullptr;
  const bool v6 = eth_type == kEthTypeIpv6;
  if (!v6 && eth_type != kEthTypeIpv4) return nullptr;
  switch (nw_proto) {
    case -1:
      return v6 ? "ipv6" : "ip";
    case kIpProtoTcp:
      return v6 ? "tcp6" : "tcp";
    case kIpProtoUdp:
      return v6 ? "udp6" : "udp";
    case kIpProtoSctp:
      return v6 ? "sctp6" : "sctp";
    case kIpProtoIcmp:
      return v6 ? nullptr : "icmp";
    case kIpProtoIcmpv6:
      return v6 ? "icmp6" : nullptr;
    default:
      return nullptr;
  }
}

// The native-format spelling of a match, each key followed by ','.
std::string MatchToNative(const Match& match) {
  const Flow& val = match.value;
  const Flow& msk = match.mask;
  std::string out;
  auto add = [&out](std::string_view key, const std::string& text) {
    CatTo(&out, key, text.empty() ? "" : "=", text, ",");
  };
  auto full = [&msk](Field f) {
    return msk.Get(f) == InfoOf(f).Mask() >> InfoOf(f).shift;
  };

  // eth_type and nw_proto, through a protocol keyword when one fits.
  bool proto_done = false;
  if (full(Field::kEthType)) {
    const uint64_t et = val.Get(Field::kEthType);
    const char* with_proto =
        full(Field::kNwProto)
            ? ShorthandName(et, static_cast<int>(val.Get(Field::kNwProto)))
            : nullptr;
    if (with_proto != nullptr) {
      add(with_proto, "");
      proto_done = true;
    } else if (const char* alone = ShorthandName(et, -1)) {
      add(alone, "");
    } else {
      add("dl_type", NumString(Field::kEthType, et));
    }
  } else if (msk.Get(Field::kEthType) != 0) {
    add("dl_type", NumMasked(Field::kEthType, val.Get(Field::kEthType),
                             msk.Get(Field::kEthType)));
  }
  if (msk.Get(Field::kInPort) != 0) {
    add("in_port", NumMasked(Field::kInPort, val.Get(Field::kInPort),
                             msk.Get(Field::kInPort)));
  }
  if (msk.Get(Field::kEthSrc) != 0) {
    add("dl_src", FormatMacMasked(val.Get(Field::kEthSrc), msk.Get(Field::kEthSrc)));
  }
  if (msk.Get(Field::kEthDst) != 0) {
    add("dl_dst", FormatMacMasked(val.Get(Field::kEthDst), msk.Get(Field::kEthDst)));
  }

  // Outer VLAN: dl_vlan/dl_vlan_pcp when the mask is exactly their shape.
  {
    const uint64_t v = val.Get(Field::kVlan0Tci), m = msk.Get(Field::kVlan0Tci);
    const uint64_t vid_m = m & kVlanVidMask;
    const uint64_t pcp_m = m & (uint64_t{7} << kVlanPcpShift);
    const bool shaped = (m & kVlanPresent) && (v & kVlanPresent) &&
                        (vid_m == 0 || vid_m == kVlanVidMask) &&
                        (pcp_m == 0 || pcp_m == uint64_t{7} << kVlanPcpShift);
    if (shaped) {
      if (vid_m) add("dl_vlan", Cat(v & kVlanVidMask));
      if (pcp_m) add("dl_vlan_pcp", Cat(v >> kVlanPcpShift));
      if (!vid_m && !pcp_m) add("vlan_tci", NumMasked(Field::kVlan0Tci, v, m));
    } else if (m != 0) {
      add("vlan_tci", NumMasked(Field::kVlan0Tci, v, m));
    }
  }
  if (msk.Get(Field::kVlan1Tci) != 0) {
    add("vlan1_tci", NumMasked(Field::kVlan1Tci, val.Get(Field::kVlan1Tci),
                               msk.Get(Field::kVlan1Tci)));
  }
  if (msk.Get(Field::kIpv4Src) != 0) {
    add("nw_src", Ipv4Masked(val.Get(Field::kIpv4Src), msk.Get(Field::kIpv4Src)));
  }
  if (msk.Get(Field::kIpv4Dst) != 0) {
    add("nw_dst", Ipv4Masked(val.Get(Field::kIpv4Dst), msk.Get(Field::kIpv4Dst)));
  }
  if (msk.Ipv6Src() != 0) add("ipv6_src", FormatIpv6Masked(val.Ipv6Src(), msk.Ipv6Src()));
  if (msk.Ipv6Dst() != 0) add("ipv6_dst", FormatIpv6Masked(val.Ipv6Dst(), msk.Ipv6Dst()));
  if (!proto_done && msk.Get(Field::kNwProto) != 0) {
    add("nw_proto", NumMasked(Field::kNwProto, val.Get(Field::kNwProto),
                              msk.Get(Field::kNwProto)));
  }

  // nw_tos: DSCP and ECN parts separately when each is all-or-nothing.
  {
    const uint64_t v = val.Get(Field::kNwTos), m = msk.Get(Field::kNwTos);
    const uint64_t dscp_m = m & 0xfc, ecn_m = m & 0x03;
    if ((dscp_m == 0 || dscp_m == 0xfc) && (ecn_m == 0 || ecn_m == 0x03)) {
      if (dscp_m) add("ip_dscp", Cat(v >> 2));
      if (ecn_m) add("ip_ecn", Cat(v & 3));
    } else {
      add("nw_tos", absl::StrFormat("%d/0x%x", v, m));
    }
  }
  if (msk.Get(Field::kNwTtl) != 0) {
    add("nw_ttl", NumMasked(Field::kNwTtl, val.Get(Field::kNwTtl),
                            msk.Get(Field::kNwTtl)));
  }
  if (const uint64_t m = msk.Get(Field::kNwFrag); m != 0) {
    const uint64_t v = val.Get(Field::kNwFrag);
    const char* name = nullptr;
    for (const FragName& fn : kFragNames) {
      if (fn.value == v && fn.mask == m) name = fn.name;
    }
    if (name != nullptr) {
      add("ip_frag", name);
    } else {
      add("nw_frag", NumMasked(Field::kNwFrag, v, m));
    }
  }

  // Ports, or ICMP type/code when the protocol is ICMP and the match exact.
  const bool icmp = full(Field::kNwProto) &&
                    (val.Get(Field::kNwProto) == kIpProtoIcmp ||
                     val.Get(Field::kNwProto) == kIpProtoIcmpv6);
  auto port = [&](Field f, const PortRange& range, const char* tp_key,
                  const char* icmp_key) {
    const uint64_t v = val.Get(f), m = msk.Get(f);
    if (!range.IsFull()) add(tp_key, Cat(range.lo, "-", range.hi));
    if (m == 0) return;
    if (icmp && m == 0xffff && v <= 0xff) {
      add(icmp_key, Cat(v));
    } else {
      add(tp_key, NumMasked(f, v, m));
    }
  };
  port(Field::kTpSrc, match.tp_src, "tp_src", "icmp_type");
  port(Field::kTpDst, match.tp_dst, "tp_dst", "icmp_code");
  if (const uint64_t m = msk.Get(Field::kTcpFlags); m != 0) {
    add("tcp_flags", TcpFlagsString(val.Get(Field::kTcpFlags), m));
  }
  return out;
}

}  // namespace

std::string Action::ToString() const {
  switch (kind) {
    case Kind::kDrop:
      return "drop";
    case Kind::kOutput:
      return Cat("output:", port);
  }
  return Cat("unknown(", static_cast<int>(kind), ")");
}

std::string Rule::ToString() const {
  return absl::StrFormat("id=%d,priority=%d,cookie=0x%x,%sactions=%s", id,
                         priority, cookie, MatchToNative(match),
                         action.ToString());
}

}  // namespace flowclass
