// packet_builder.h — a fluent builder of Ethernet frames for tests, the
// dataplane's end-to-end runs and benchmarks (in the style of Katran's
// PacketBuilder), plus BuildFrameFromFlow, the inverse of the packet parser.
//
// Contract
// --------
// Test-only code: allocates freely, not for the per-packet path.  A
// PacketBuilder is a plain value owned by one thread; Build() is const and may
// be called any number of times.
//
// Layers are appended in wire order.  Every value argument is host order
// (flow.h conventions: MAC 00:11:22:33:44:55 is 0x001122334455, IPv4 10.0.0.1
// is 0x0a000001).  Build() fills in what depends on later layers:
//   - each Ethernet / VLAN type field from the next layer (VLAN -> its TPID,
//     IPv4, IPv6, ARP) unless EthType() set it;
//   - each IPv4 protocol / IPv6 next-header / extension next-header from the
//     next layer (TCP 6, UDP 17, SCTP 132, ICMP 1, ICMPv6 58, an extension
//     header its type; nothing follows: IPv4 0xff, IPv6 59) unless IpProto()
//     set it;
//   - IPv4 total length and header checksum, IPv6 payload length, UDP length;
//   - TCP, UDP, ICMP and ICMPv6 checksums when the datagram is not
//     fragmented (SCTP's CRC32c is left zero).
// Lengths cover every layer after the IP header (payload included) but not
// the zero padding added by PadTo().
//
// Example:
//   std::vector<uint8_t> frame = PacketBuilder()
//       .Eth(/*src=*/0x020000000001, /*dst=*/0x020000000002)
//       .Vlan(/*vid=*/100, /*pcp=*/3)
//       .Ipv4(/*src=*/0x0a000001, /*dst=*/0x0a000002)
//       .Ipv4Options(8)
//       .Tcp(/*sport=*/1234, /*dport=*/80, kTcpSyn)
//       .Payload(16)
//       .Build();
#ifndef FLOWCLASS_TESTS_COMMON_PACKET_BUILDER_H_
#define FLOWCLASS_TESTS_COMMON_PACKET_BUILDER_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "dataplane/flow/flow.h"

namespace flowclass {

// TCP flag bits as they appear in tcp_flags (flow.h).
inline constexpr uint16_t kTcpFin = 0x001;
inline constexpr uint16_t kTcpSyn = 0x002;
inline constexpr uint16_t kTcpRst = 0x004;
inline constexpr uint16_t kTcpPsh = 0x008;
inline constexpr uint16_t kTcpAck = 0x010;
inline constexpr uint16_t kTcpUrg = 0x020;
inline constexpr uint16_t kTcpEce = 0x040;
inline constexpr uint16_t kTcpCwr = 0x080;
inline constexpr uint16_t kTcpNs = 0x100;

// IPv6 extension header types the builder (and parser) know.
inline constexpr uint8_t kIpv6ExtHopByHop = 0;
inline constexpr uint8_t kIpv6ExtRouting = 43;
inline constexpr uint8_t kIpv6ExtFragment = 44;
inline constexpr uint8_t kIpv6ExtAh = 51;
inline constexpr uint8_t kIpv6ExtDestOpts = 60;
inline constexpr uint8_t kIpProtoNoNext = 59;

inline constexpr size_t kNoOffset = std::numeric_limits<size_t>::max();

class PacketBuilder {
 public:
  PacketBuilder() = default;

  // Ethernet header (dst, src, type).
  PacketBuilder& Eth(uint64_t src, uint64_t dst);
  // One 802.1Q / 802.1ad tag: TPID `tpid` and TCI (pcp, dei=0, vid).
  PacketBuilder& Vlan(uint16_t vid, uint8_t pcp = 0,
                      uint16_t tpid = kEthTypeVlan);
  // Two tags: outer 0x88a8, inner 0x8100.
  PacketBuilder& QinQ(uint16_t outer_vid, uint16_t inner_vid,
                      uint8_t outer_pcp = 0, uint8_t inner_pcp = 0);
  // Forces the type field of the last Ethernet/VLAN header.
  PacketBuilder& EthType(uint16_t type);

  PacketBuilder& Ipv4(uint32_t src, uint32_t dst, uint8_t ttl = 64,
                      uint8_t tos = 0);
  // Adds n_bytes (multiple of 4, <= 40) of options (NOPs ending with EOL) to
  // the last IPv4 header and updates its IHL.
  PacketBuilder& Ipv4Options(size_t n_bytes);
  // Sets MF and the fragment offset (8-byte units) of the last IPv4 header.
  PacketBuilder& Ipv4Fragment(bool more_fragments, uint16_t offset_units,
                              uint16_t id = 0x1234);

  PacketBuilder& Ipv6(absl::uint128 src, absl::uint128 dst,
                      uint8_t hop_limit = 64, uint8_t tclass = 0,
                      uint32_t flow_label = 0);
  // Extension headers; len_bytes is the whole header: a multiple of 8 (>= 8)
  // for hop-by-hop / routing / destination options, a multiple of 4 (>= 8)
  // for AH.
  PacketBuilder& Ipv6HopByHop(size_t len_bytes = 8);
  PacketBuilder& Ipv6Routing(size_t len_bytes = 24);
  PacketBuilder& Ipv6DestOpts(size_t len_bytes = 8);
  PacketBuilder& Ipv6Ah(size_t len_bytes = 24);
  PacketBuilder& Ipv6Fragment(bool more_fragments, uint16_t offset_units,
                              uint32_t id = 0x12345678);

  // Forces the protocol / next-header field of the last IPv4, IPv6 or
  // extension header.
  PacketBuilder& IpProto(uint8_t proto);

  // TCP with data offset 5 + options_bytes/4 (options_bytes multiple of 4,
  // <= 40; NOP-filled).  `flags` is the 12-bit tcp_flags value.
  PacketBuilder& Tcp(uint16_t sport, uint16_t dport, uint16_t flags = kTcpAck,
                     size_t options_bytes = 0);
  PacketBuilder& Udp(uint16_t sport, uint16_t dport);
  PacketBuilder& Sctp(uint16_t sport, uint16_t dport);
  PacketBuilder& Icmp(uint8_t type, uint8_t code);    // 8-byte header
  PacketBuilder& Icmpv6(uint8_t type, uint8_t code);  // 8-byte header
  // ARP for Ethernet/IPv4 (28 bytes).
  PacketBuilder& Arp(uint16_t op, uint64_t sha, uint32_t spa, uint64_t tha,
                     uint32_t tpa);

  // n bytes of a recognisable pattern (0x00, 0x01, ...).
  PacketBuilder& Payload(size_t n);
  // Arbitrary bytes, counted as payload (e.g. a hand-made header).
  PacketBuilder& Raw(std::span<const uint8_t> bytes);
  // Pads the frame with zeros to at least min_len bytes.
  PacketBuilder& PadTo(size_t min_len);

  std::vector<uint8_t> Build() const;

  // Offsets into Build()'s output, kNoOffset when there is no such layer:
  // the first IPv4/IPv6/ARP header, and the first TCP/UDP/SCTP/ICMP/ICMPv6
  // header.
  size_t L3Offset() const;
  size_t L4Offset() const;

 private:
  enum class Kind : uint8_t {
    kEth,
    kVlan,
    kIpv4,
    kIpv6,
    kIpv6Ext,
    kTcp,
    kUdp,
    kSctp,
    kIcmp,
    kIcmpv6,
    kArp,
    kPayload,
  };
  struct Layer {
    Kind kind;
    uint16_t type = 0;       // kVlan: TPID; kIpv6Ext: extension type
    int next_override = -1;  // EthType() / IpProto() value
    std::vector<uint8_t> bytes;
  };
  PacketBuilder& Add(Kind kind, size_t size, uint16_t type = 0);
  PacketBuilder& Ipv6Ext(uint8_t type, size_t len_bytes, uint8_t len_field);
  Layer* Last(std::initializer_list<Kind> kinds);
  size_t OffsetOfFirst(std::initializer_list<Kind> kinds) const;

  std::vector<Layer> layers_;
  size_t min_len_ = 0;
};

// True when BuildFrameFromFlow(f) parses back to exactly f (given in_port
// f.Get(Field::kInPort)) with no outcome flags.  That holds when:
//   - vlan0_tci / vlan1_tci are 0 or have kVlanPresent, and vlan1 implies
//     vlan0;
//   - eth_type 0x8100/0x88a8 only with two tags (a third tag is emitted);
//   - IP words and the L4 word are zero unless eth_type is IPv4 (IPv6 words
//     zero) or IPv6 (IPv4 word zero);
//   - nw_frag is 0, kFragAny or kFragAny|kFragLater;
//   - for IPv6, nw_proto is not an extension header type (0, 43, 44, 51, 60),
//     but a later fragment's is 44 (as the parser reports it);
//   - tp_src / tp_dst are zero unless the L4 header is parsed (TCP, UDP,
//     SCTP, ICMP under IPv4, ICMPv6 under IPv6, not a later fragment), and
//     ICMP type/code fit 8 bits; tcp_flags is zero unless such a TCP header.
bool CanBuildFrameFromFlow(const Flow& f);

// The frame the parser would turn into `f` (see CanBuildFrameFromFlow for
// which flows round-trip; other fields are expressed as well as possible),
// zero-padded to min_len bytes.  Later fragments carry 8 bytes of payload
// instead of an L4 header; ARP frames carry a zeroed ARP request body.
std::vector<uint8_t> BuildFrameFromFlow(const Flow& f, size_t min_len = 64);

// Frames with the pointer and length arrays ParseBurst takes (benchmarks).
struct FrameArrays {
  explicit FrameArrays(std::vector<std::vector<uint8_t>> f) : frames(std::move(f)) {
    for (const auto& frame : frames) {
      ptrs.push_back(frame.data());
      lens.push_back(static_cast<uint16_t>(frame.size()));
    }
  }
  std::vector<std::vector<uint8_t>> frames;
  std::vector<const uint8_t*> ptrs;
  std::vector<uint16_t> lens;
};

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_PACKET_BUILDER_H_
