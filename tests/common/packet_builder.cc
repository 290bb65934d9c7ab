#include "tests/common/packet_builder.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace flowclass {
namespace {

// Misuse of the builder is a bug in the test: fail loudly in every build type.
void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "PacketBuilder: %s\n", what);
    std::abort();
  }
}

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Put32(uint8_t* p, uint32_t v) {
  Put16(p, static_cast<uint16_t>(v >> 16));
  Put16(p + 2, static_cast<uint16_t>(v));
}
void Put48(uint8_t* p, uint64_t v) {
  Put16(p, static_cast<uint16_t>(v >> 32));
  Put32(p + 2, static_cast<uint32_t>(v));
}
void Put64(uint8_t* p, uint64_t v) {
  Put32(p, static_cast<uint32_t>(v >> 32));
  Put32(p + 4, static_cast<uint32_t>(v));
}
uint16_t Get16(const uint8_t* p) {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

// RFC 1071 sum, not yet folded/complemented.
uint32_t SumBytes(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += Get16(p + i);
  if (n & 1) sum += uint32_t{p[n - 1]} << 8;
  return sum;
}
uint16_t FoldChecksum(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace

PacketBuilder& PacketBuilder::Add(Kind kind, size_t size, uint16_t type) {
  layers_.push_back(Layer{kind, type, -1, std::vector<uint8_t>(size, 0)});
  return *this;
}

PacketBuilder::Layer* PacketBuilder::Last(std::initializer_list<Kind> kinds) {
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it)
    if (std::find(kinds.begin(), kinds.end(), it->kind) != kinds.end())
      return &*it;
  Require(false, "no earlier layer of the kind this call modifies");
  return nullptr;
}

PacketBuilder& PacketBuilder::Eth(uint64_t src, uint64_t dst) {
  Add(Kind::kEth, 14);
  uint8_t* p = layers_.back().bytes.data();
  Put48(p, dst);
  Put48(p + 6, src);
  return *this;
}

PacketBuilder& PacketBuilder::Vlan(uint16_t vid, uint8_t pcp, uint16_t tpid) {
  Add(Kind::kVlan, 4, tpid);
  Put16(layers_.back().bytes.data(),
        static_cast<uint16_t>(((pcp & 7) << kVlanPcpShift) |
                              (vid & kVlanVidMask)));
  return *this;
}

PacketBuilder& PacketBuilder::QinQ(uint16_t outer_vid, uint16_t inner_vid,
                                   uint8_t outer_pcp, uint8_t inner_pcp) {
  Vlan(outer_vid, outer_pcp, kEthTypeQinQ);
  return Vlan(inner_vid, inner_pcp, kEthTypeVlan);
}

PacketBuilder& PacketBuilder::EthType(uint16_t type) {
  Last({Kind::kEth, Kind::kVlan})->next_override = type;
  return *this;
}

PacketBuilder& PacketBuilder::Ipv4(uint32_t src, uint32_t dst, uint8_t ttl,
                                   uint8_t tos) {
  Add(Kind::kIpv4, 20);
  uint8_t* p = layers_.back().bytes.data();
  p[0] = 0x45;
  p[1] = tos;
  Put16(p + 4, 0x0001);  // identification
  p[8] = ttl;
  Put32(p + 12, src);
  Put32(p + 16, dst);
  return *this;
}

PacketBuilder& PacketBuilder::Ipv4Options(size_t n_bytes) {
  Require(n_bytes % 4 == 0 && n_bytes <= 40, "size out of range");
  Layer* l = Last({Kind::kIpv4});
  l->bytes.resize(20 + n_bytes, 1);      // NOP
  if (n_bytes > 0) l->bytes.back() = 0;  // EOL
  l->bytes[0] = static_cast<uint8_t>(0x40 | (l->bytes.size() / 4));
  return *this;
}

PacketBuilder& PacketBuilder::Ipv4Fragment(bool more_fragments,
                                           uint16_t offset_units, uint16_t id) {
  uint8_t* p = Last({Kind::kIpv4})->bytes.data();
  Put16(p + 4, id);
  Put16(p + 6, static_cast<uint16_t>((more_fragments ? 0x2000 : 0) |
                                     (offset_units & 0x1fff)));
  return *this;
}

PacketBuilder& PacketBuilder::Ipv6(absl::uint128 src, absl::uint128 dst,
                                   uint8_t hop_limit, uint8_t tclass,
                                   uint32_t flow_label) {
  Add(Kind::kIpv6, 40);
  uint8_t* p = layers_.back().bytes.data();
  Put32(p, (6u << 28) | (uint32_t{tclass} << 20) | (flow_label & 0xfffff));
  p[7] = hop_limit;
  Put64(p + 8, absl::Uint128High64(src));
  Put64(p + 16, absl::Uint128Low64(src));
  Put64(p + 24, absl::Uint128High64(dst));
  Put64(p + 32, absl::Uint128Low64(dst));
  return *this;
}

PacketBuilder& PacketBuilder::Ipv6Ext(uint8_t type, size_t len_bytes,
                                      uint8_t len_field) {
  Add(Kind::kIpv6Ext, len_bytes, type);
  layers_.back().bytes[1] = len_field;
  return *this;
}

// Hop-by-hop and destination options carry one PadN option filling the rest.
PacketBuilder& PacketBuilder::Ipv6HopByHop(size_t len_bytes) {
  Require(len_bytes >= 8 && len_bytes % 8 == 0 && len_bytes <= 2048,
          "size out of range");
  Ipv6Ext(kIpv6ExtHopByHop, len_bytes, static_cast<uint8_t>(len_bytes / 8 - 1));
  layers_.back().bytes[2] = 1;
  layers_.back().bytes[3] = static_cast<uint8_t>(len_bytes - 4);
  return *this;
}

PacketBuilder& PacketBuilder::Ipv6Routing(size_t len_bytes) {
  Require(len_bytes >= 8 && len_bytes % 8 == 0 && len_bytes <= 2048,
          "size out of range");
  return Ipv6Ext(kIpv6ExtRouting, len_bytes,
                 static_cast<uint8_t>(len_bytes / 8 - 1));
}

PacketBuilder& PacketBuilder::Ipv6DestOpts(size_t len_bytes) {
  Require(len_bytes >= 8 && len_bytes % 8 == 0 && len_bytes <= 2048,
          "size out of range");
  Ipv6Ext(kIpv6ExtDestOpts, len_bytes, static_cast<uint8_t>(len_bytes / 8 - 1));
  layers_.back().bytes[2] = 1;
  layers_.back().bytes[3] = static_cast<uint8_t>(len_bytes - 4);
  return *this;
}

PacketBuilder& PacketBuilder::Ipv6Ah(size_t len_bytes) {
  Require(len_bytes >= 8 && len_bytes % 4 == 0 && len_bytes <= 1028,
          "size out of range");
  Ipv6Ext(kIpv6ExtAh, len_bytes, static_cast<uint8_t>(len_bytes / 4 - 2));
  Put32(layers_.back().bytes.data() + 4, 0x1000);  // SPI
  return *this;
}

PacketBuilder& PacketBuilder::Ipv6Fragment(bool more_fragments,
                                           uint16_t offset_units, uint32_t id) {
  Ipv6Ext(kIpv6ExtFragment, 8, 0);
  uint8_t* p = layers_.back().bytes.data();
  Put16(p + 2,
        static_cast<uint16_t>((offset_units << 3) | (more_fragments ? 1 : 0)));
  Put32(p + 4, id);
  return *this;
}

PacketBuilder& PacketBuilder::IpProto(uint8_t proto) {
  Last({Kind::kIpv4, Kind::kIpv6, Kind::kIpv6Ext})->next_override = proto;
  return *this;
}

PacketBuilder& PacketBuilder::Tcp(uint16_t sport, uint16_t dport,
                                  uint16_t flags, size_t options_bytes) {
  Require(options_bytes % 4 == 0 && options_bytes <= 40, "size out of range");
  Add(Kind::kTcp, 20 + options_bytes);
  uint8_t* p = layers_.back().bytes.data();
  Put16(p, sport);
  Put16(p + 2, dport);
  Put32(p + 4, 1000);  // seq
  Put32(p + 8, (flags & kTcpAck) ? 2000 : 0);
  const size_t doff = (20 + options_bytes) / 4;
  Put16(p + 12, static_cast<uint16_t>(doff << 12 | (flags & 0x0fff)));
  Put16(p + 14, 65535);                                   // window
  std::fill(p + 20, p + 20 + options_bytes, uint8_t{1});  // NOP
  return *this;
}

PacketBuilder& PacketBuilder::Udp(uint16_t sport, uint16_t dport) {
  Add(Kind::kUdp, 8);
  Put16(layers_.back().bytes.data(), sport);
  Put16(layers_.back().bytes.data() + 2, dport);
  return *this;
}

PacketBuilder& PacketBuilder::Sctp(uint16_t sport, uint16_t dport) {
  Add(Kind::kSctp, 12);
  uint8_t* p = layers_.back().bytes.data();
  Put16(p, sport);
  Put16(p + 2, dport);
  Put32(p + 4, 0xcafe);  // verification tag
  return *this;
}

PacketBuilder& PacketBuilder::Icmp(uint8_t type, uint8_t code) {
  Add(Kind::kIcmp, 8);
  layers_.back().bytes[0] = type;
  layers_.back().bytes[1] = code;
  return *this;
}

PacketBuilder& PacketBuilder::Icmpv6(uint8_t type, uint8_t code) {
  Add(Kind::kIcmpv6, 8);
  layers_.back().bytes[0] = type;
  layers_.back().bytes[1] = code;
  return *this;
}

PacketBuilder& PacketBuilder::Arp(uint16_t op, uint64_t sha, uint32_t spa,
                                  uint64_t tha, uint32_t tpa) {
  Add(Kind::kArp, 28);
  uint8_t* p = layers_.back().bytes.data();
  Put16(p, 1);  // Ethernet
  Put16(p + 2, kEthTypeIpv4);
  p[4] = 6;
  p[5] = 4;
  Put16(p + 6, op);
  Put48(p + 8, sha);
  Put32(p + 14, spa);
  Put48(p + 18, tha);
  Put32(p + 24, tpa);
  return *this;
}

PacketBuilder& PacketBuilder::Payload(size_t n) {
  Add(Kind::kPayload, n);
  for (size_t i = 0; i < n; ++i)
    layers_.back().bytes[i] = static_cast<uint8_t>(i);
  return *this;
}

PacketBuilder& PacketBuilder::Raw(std::span<const uint8_t> bytes) {
  Add(Kind::kPayload, 0);
  layers_.back().bytes.assign(bytes.begin(), bytes.end());
  return *this;
}

PacketBuilder& PacketBuilder::PadTo(size_t min_len) {
  min_len_ = min_len;
  return *this;
}

size_t PacketBuilder::OffsetOfFirst(std::initializer_list<Kind> kinds) const {
  size_t off = 0;
  for (const Layer& l : layers_) {
    if (std::find(kinds.begin(), kinds.end(), l.kind) != kinds.end())
      return off;
    off += l.bytes.size();
  }
  return kNoOffset;
}

size_t PacketBuilder::L3Offset() const {
  return OffsetOfFirst({Kind::kIpv4, Kind::kIpv6, Kind::kArp});
}

size_t PacketBuilder::L4Offset() const {
  return OffsetOfFirst(
      {Kind::kTcp, Kind::kUdp, Kind::kSctp, Kind::kIcmp, Kind::kIcmpv6});
}

std::vector<uint8_t> PacketBuilder::Build() const {
  std::vector<size_t> offs;
  std::vector<uint8_t> out;
  for (const Layer& l : layers_) {
    offs.push_back(out.size());
    out.insert(out.end(), l.bytes.begin(), l.bytes.end());
  }
  const size_t total = out.size();
  const int n = static_cast<int>(layers_.size());

  auto eth_type_of = [&](int i) -> uint16_t {
    if (i >= n)
      return 0x88b5;  // IEEE local experimental: "nothing known follows"
    switch (layers_[i].kind) {
      case Kind::kVlan:
        return layers_[i].type;
      case Kind::kIpv4:
        return kEthTypeIpv4;
      case Kind::kIpv6:
        return kEthTypeIpv6;
      case Kind::kArp:
        return kEthTypeArp;
      default:
        return 0x88b5;
    }
  };
  auto proto_of = [&](int i, bool ipv6) -> uint8_t {
    const Kind k = i < n ? layers_[i].kind : Kind::kPayload;
    switch (k) {
      case Kind::kIpv4:
        return 4;
      case Kind::kIpv6:
        return 41;
      case Kind::kIpv6Ext:
        return static_cast<uint8_t>(layers_[i].type);
      case Kind::kTcp:
        return kIpProtoTcp;
      case Kind::kUdp:
        return kIpProtoUdp;
      case Kind::kSctp:
        return kIpProtoSctp;
      case Kind::kIcmp:
        return kIpProtoIcmp;
      case Kind::kIcmpv6:
        return kIpProtoIcmpv6;
      default:
        return ipv6 ? kIpProtoNoNext : 0xff;
    }
  };

  // Innermost-first, so that checksums see final lengths of inner layers.
  bool in_v6 = false;  // whether layer i sits inside an IPv6 header
  std::vector<bool> v6(n, false);
  for (int i = 0; i < n; ++i) {
    if (layers_[i].kind == Kind::kIpv6) in_v6 = true;
    if (layers_[i].kind == Kind::kIpv4) in_v6 = false;
    v6[i] = in_v6;
  }
  for (int i = n - 1; i >= 0; --i) {
    const Layer& l = layers_[i];
    uint8_t* p = out.data() + offs[i];
    const size_t rest = total - offs[i];
    switch (l.kind) {
      case Kind::kEth:
      case Kind::kVlan: {
        const uint16_t type = l.next_override >= 0
                                  ? static_cast<uint16_t>(l.next_override)
                                  : eth_type_of(i + 1);
        Put16(p + (l.kind == Kind::kEth ? 12 : 2), type);
        break;
      }
      case Kind::kIpv4: {
        p[9] = l.next_override >= 0 ? static_cast<uint8_t>(l.next_override)
                                    : proto_of(i + 1, /*ipv6=*/false);
        Put16(p + 2, static_cast<uint16_t>(rest));
        Put16(p + 10, 0);
        Put16(p + 10, FoldChecksum(SumBytes(p, l.bytes.size())));
        break;
      }
      case Kind::kIpv6:
        p[6] = l.next_override >= 0 ? static_cast<uint8_t>(l.next_override)
                                    : proto_of(i + 1, /*ipv6=*/true);
        Put16(p + 4, static_cast<uint16_t>(rest - 40));
        break;
      case Kind::kIpv6Ext:
        p[0] = l.next_override >= 0 ? static_cast<uint8_t>(l.next_override)
                                    : proto_of(i + 1, /*ipv6=*/true);
        break;
      case Kind::kTcp:
      case Kind::kUdp:
      case Kind::kIcmp:
      case Kind::kIcmpv6: {
        if (l.kind == Kind::kUdp) Put16(p + 4, static_cast<uint16_t>(rest));
        const size_t csum_at =
            l.kind == Kind::kTcp ? 16 : (l.kind == Kind::kUdp ? 6 : 2);
        // Find the enclosing IP header; no checksum for fragments.
        int ip = i - 1;
        bool fragmented = false;
        for (; ip >= 0; --ip) {
          const Layer& u = layers_[ip];
          if (u.kind == Kind::kIpv6Ext && u.type == kIpv6ExtFragment)
            fragmented = true;
          if (u.kind == Kind::kIpv4 || u.kind == Kind::kIpv6) break;
        }
        if (ip < 0) break;
        const uint8_t* iph = out.data() + offs[ip];
        if (layers_[ip].kind == Kind::kIpv4 && (Get16(iph + 6) & 0x3fff))
          fragmented = true;
        if (fragmented) break;
        uint32_t sum = 0;
        if (l.kind != Kind::kIcmp) {  // pseudo-header
          const uint8_t proto = proto_of(i, v6[i]);
          if (layers_[ip].kind == Kind::kIpv4) {
            sum = SumBytes(iph + 12, 8);
          } else {
            sum = SumBytes(iph + 8, 32);
          }
          sum += static_cast<uint32_t>(rest >> 16) +
                 static_cast<uint32_t>(rest & 0xffff) + proto;
        }
        Put16(p + csum_at, 0);
        uint16_t c = FoldChecksum(SumBytes(p, rest, sum));
        if (l.kind == Kind::kUdp && c == 0) c = 0xffff;
        Put16(p + csum_at, c);
        break;
      }
      default:
        break;
    }
  }
  if (out.size() < min_len_) out.resize(min_len_, 0);
  return out;
}

namespace {

bool IsIpv6ExtType(uint64_t proto) {
  return proto == kIpv6ExtHopByHop || proto == kIpv6ExtRouting ||
         proto == kIpv6ExtFragment || proto == kIpv6ExtAh ||
         proto == kIpv6ExtDestOpts;
}

// Whether the parser reads an L4 header for (proto, ipv6).
bool HasL4(uint64_t proto, bool ipv6) {
  return proto == kIpProtoTcp || proto == kIpProtoUdp ||
         proto == kIpProtoSctp || (!ipv6 && proto == kIpProtoIcmp) ||
         (ipv6 && proto == kIpProtoIcmpv6);
}

}  // namespace

bool CanBuildFrameFromFlow(const Flow& f) {
  const uint64_t vlan0 = f.Get(Field::kVlan0Tci),
                 vlan1 = f.Get(Field::kVlan1Tci);
  if (vlan0 != 0 && !(vlan0 & kVlanPresent)) return false;
  if (vlan1 != 0 && !(vlan1 & kVlanPresent)) return false;
  if (vlan1 != 0 && vlan0 == 0) return false;
  const uint64_t type = f.Get(Field::kEthType);
  if ((type == kEthTypeVlan || type == kEthTypeQinQ) && vlan1 == 0)
    return false;
  const bool v4 = type == kEthTypeIpv4, v6 = type == kEthTypeIpv6;
  const bool has_v4 = f.w[kWordIpv4] != 0;
  const bool has_v6 = f.w[kWordIpv6SrcHi] | f.w[kWordIpv6SrcLo] |
                      f.w[kWordIpv6DstHi] | f.w[kWordIpv6DstLo];
  if (has_v4 && !v4) return false;
  if (has_v6 && !v6) return false;
  if (!v4 && !v6) return f.w[kWordL4] == 0 && f.Get(Field::kTcpFlags) == 0;
  const uint64_t frag = f.Get(Field::kNwFrag);
  if (frag != 0 && frag != kFragAny && frag != (kFragAny | kFragLater))
    return false;
  const uint64_t proto = f.Get(Field::kNwProto);
  // An IPv6 later fragment parses as nw_proto 44 (what it carries is not
  // visible), and only as that.
  if (v6 && (frag & kFragLater) && proto != kIpv6ExtFragment) return false;
  if (v6 && !(frag & kFragLater) && IsIpv6ExtType(proto)) return false;
  const bool l4 = HasL4(proto, v6) && !(frag & kFragLater);
  if (!l4 && (f.Get(Field::kTpSrc) || f.Get(Field::kTpDst))) return false;
  if ((!l4 || proto != kIpProtoTcp) && f.Get(Field::kTcpFlags)) return false;
  if (l4 && (proto == kIpProtoIcmp || proto == kIpProtoIcmpv6) &&
      (f.Get(Field::kTpSrc) > 0xff || f.Get(Field::kTpDst) > 0xff))
    return false;
  return true;
}

std::vector<uint8_t> BuildFrameFromFlow(const Flow& f, size_t min_len) {
  PacketBuilder b;
  b.Eth(f.Get(Field::kEthSrc), f.Get(Field::kEthDst));
  const uint64_t type = f.Get(Field::kEthType);
  const uint16_t tci0 = static_cast<uint16_t>(f.Get(Field::kVlan0Tci));
  const uint16_t tci1 = static_cast<uint16_t>(f.Get(Field::kVlan1Tci));
  auto tag = [&b](uint16_t tci, uint16_t tpid) {
    b.Vlan(tci & kVlanVidMask, static_cast<uint8_t>(tci >> kVlanPcpShift),
           tpid);
  };
  if (tci0 & kVlanPresent) {
    const bool two = tci1 & kVlanPresent;
    tag(tci0, two ? kEthTypeQinQ : kEthTypeVlan);
    if (two) tag(tci1, kEthTypeVlan);
    if (two && (type == kEthTypeVlan || type == kEthTypeQinQ))
      tag(0, static_cast<uint16_t>(type));
  }
  b.EthType(static_cast<uint16_t>(type));

  const uint8_t proto = static_cast<uint8_t>(f.Get(Field::kNwProto));
  const uint8_t frag = static_cast<uint8_t>(f.Get(Field::kNwFrag));
  const uint16_t sport = static_cast<uint16_t>(f.Get(Field::kTpSrc));
  const uint16_t dport = static_cast<uint16_t>(f.Get(Field::kTpDst));
  constexpr uint16_t kLaterOffset =
      185;  // 1480 bytes: the second fragment of 1500
  bool v6 = false;
  if (type == kEthTypeIpv4) {
    b.Ipv4(static_cast<uint32_t>(f.Get(Field::kIpv4Src)),
           static_cast<uint32_t>(f.Get(Field::kIpv4Dst)),
           static_cast<uint8_t>(f.Get(Field::kNwTtl)),
           static_cast<uint8_t>(f.Get(Field::kNwTos)));
    if (frag & kFragAny)
      b.Ipv4Fragment(/*more_fragments=*/true,
                     (frag & kFragLater) ? kLaterOffset : 0);
  } else if (type == kEthTypeIpv6) {
    v6 = true;
    b.Ipv6(f.Ipv6Src(), f.Ipv6Dst(), static_cast<uint8_t>(f.Get(Field::kNwTtl)),
           static_cast<uint8_t>(f.Get(Field::kNwTos)));
    if (frag & kFragAny)
      b.Ipv6Fragment(/*more_fragments=*/true,
                     (frag & kFragLater) ? kLaterOffset : 0);
  } else if (type == kEthTypeArp) {
    b.Arp(/*op=*/1, 0, 0, 0, 0);
    return b.PadTo(min_len).Build();
  } else {
    return b.PadTo(min_len).Build();
  }
  b.IpProto(proto);
  if (frag & kFragLater) {
    b.Payload(8);
  } else if (HasL4(proto, v6)) {
    switch (proto) {
      case kIpProtoTcp:
        b.Tcp(sport, dport, static_cast<uint16_t>(f.Get(Field::kTcpFlags)));
        break;
      case kIpProtoUdp:
        b.Udp(sport, dport);
        break;
      case kIpProtoSctp:
        b.Sctp(sport, dport);
        break;
      case kIpProtoIcmp:
        b.Icmp(static_cast<uint8_t>(sport), static_cast<uint8_t>(dport));
        break;
      default:
        b.Icmpv6(static_cast<uint8_t>(sport), static_cast<uint8_t>(dport));
        break;
    }
  }
  return b.PadTo(min_len).Build();
}

}  // namespace flowclass
