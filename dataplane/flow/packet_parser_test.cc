#include "dataplane/flow/packet_parser.h"

#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "dataplane/rules/rule.h"
#include "gtest/gtest.h"
#include "tests/common/packet_builder.h"

namespace flowclass {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int kRandomIterations = 3000;
#else
constexpr int kRandomIterations = 30000;
#endif

constexpr uint32_t kPort = 7;
constexpr uint64_t kMacA = 0x020000000001;
constexpr uint64_t kMacB = 0x0a1b2c3d4e5f;
constexpr uint32_t kIpA = 0x0a000001;  // 10.0.0.1
constexpr uint32_t kIpB = 0xc0a80102;  // 192.168.1.2
const absl::uint128 kIp6A = absl::MakeUint128(0x20010db800000000, 0x1);
const absl::uint128 kIp6B =
    absl::MakeUint128(0x20010db8ffff0000, 0x00000000cafe0002);

// Flow::ToString lives elsewhere (flow.cc owner); tests format flows here so
// that this binary does not depend on it.
std::string Describe(const Flow& f) {
  std::string s;
  for (int i = 0; i < kFieldCount; ++i) {
    const uint64_t v = f.Get(static_cast<Field>(i));
    if (v != 0) absl::StrAppendFormat(&s, "%s=%#x ", kFieldInfo[i].name, v);
  }
  return s.empty() ? "<empty>" : s;
}

::testing::AssertionResult SameFlow(const Flow& got, const Flow& want) {
  if (got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\n  got:  " << Describe(got) << "\n  want: " << Describe(want);
}

Flow MakeFlow(std::initializer_list<std::pair<Field, uint64_t>> fields) {
  Flow f;
  for (const auto& [field, value] : fields) f.Set(field, value);
  return f;
}

uint16_t Tci(uint16_t vid, uint8_t pcp) {
  return static_cast<uint16_t>((pcp << kVlanPcpShift) | kVlanPresent | vid);
}

// Parses from an exactly sized heap copy so that ASan flags any read past the
// end of the frame.
Flow ParseExact(const std::vector<uint8_t>& frame, size_t len, uint8_t* flags) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[len]);
  if (len > 0) std::memcpy(copy.get(), frame.data(), len);
  const FlowKey key = ParsePacket(copy.get(), len, kPort);
  const Flow flow = ParsePacketToFlow(copy.get(), len, kPort, flags);
  // The sparse key is exactly the finalized packing of the dense flow.
  const FlowKey want = FlowKey::FromFlow(flow, *flags);
  EXPECT_EQ(key.map, want.map);
  EXPECT_EQ(key.n_words, want.n_words);
  EXPECT_EQ(key.flags, want.flags);
  EXPECT_EQ(key.words, want.words);
  EXPECT_EQ(key.hash, want.hash);
  // ParseBurst (one frame) gives the same key.
  const uint8_t* ptr = copy.get();
  const uint16_t len16 = static_cast<uint16_t>(len);
  FlowKey burst_key;
  ParseBurst(&ptr, &len16, 1, kPort, &burst_key);
  EXPECT_EQ(burst_key.map, want.map);
  EXPECT_EQ(burst_key.flags, want.flags);
  EXPECT_EQ(burst_key.words, want.words);
  EXPECT_EQ(burst_key.hash, want.hash);
  return flow;
}

// ---------------------------------------------------------------------------
// Table-driven cases over every protocol the parser knows.

struct Case {
  std::string name;
  std::vector<uint8_t> frame;
  Flow want;
  uint8_t flags = 0;
};
// Name only: gtest's default dump of the frame bytes is unreadable.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

PacketBuilder EthAB() { return PacketBuilder().Eth(kMacA, kMacB); }

// Fields every Ethernet case shares.
Flow EthFlow(uint16_t eth_type) {
  return MakeFlow({{Field::kInPort, kPort},
                   {Field::kEthSrc, kMacA},
                   {Field::kEthDst, kMacB},
                   {Field::kEthType, eth_type}});
}

Flow Ipv4Flow(uint8_t proto, uint8_t tos = 0, uint8_t ttl = 64,
              uint8_t frag = 0) {
  Flow f = EthFlow(kEthTypeIpv4);
  f.Set(Field::kIpv4Src, kIpA);
  f.Set(Field::kIpv4Dst, kIpB);
  f.Set(Field::kNwProto, proto);
  f.Set(Field::kNwTos, tos);
  f.Set(Field::kNwTtl, ttl);
  f.Set(Field::kNwFrag, frag);
  return f;
}

Flow Ipv6Flow(uint8_t proto, uint8_t tclass = 0, uint8_t hlim = 64,
              uint8_t frag = 0) {
  Flow f = EthFlow(kEthTypeIpv6);
  f.SetIpv6Src(kIp6A);
  f.SetIpv6Dst(kIp6B);
  f.Set(Field::kNwProto, proto);
  f.Set(Field::kNwTos, tclass);
  f.Set(Field::kNwTtl, hlim);
  f.Set(Field::kNwFrag, frag);
  return f;
}

Flow With(Flow f, std::initializer_list<std::pair<Field, uint64_t>> fields) {
  for (const auto& [field, value] : fields) f.Set(field, value);
  return f;
}

std::vector<uint8_t> Poke(std::vector<uint8_t> frame, size_t offset,
                          uint8_t value) {
  frame.at(offset) = value;
  return frame;
}

std::vector<Case> AllCases() {
  std::vector<Case> c;
  // --- Ethernet, ARP, VLAN, QinQ
  c.push_back({"EthUnknownType", EthAB().EthType(0x1234).Payload(46).Build(),
               EthFlow(0x1234)});
  c.push_back({"Eth8023Length", EthAB().EthType(0x002e).Payload(46).Build(),
               EthFlow(0x002e)});
  c.push_back({"Arp", EthAB().Arp(1, kMacA, kIpA, 0, kIpB).PadTo(60).Build(),
               EthFlow(kEthTypeArp)});
  c.push_back({"VlanArp",
               EthAB().Vlan(5, 0).Arp(2, kMacA, kIpA, kMacB, kIpB).Build(),
               With(EthFlow(kEthTypeArp), {{Field::kVlan0Tci, Tci(5, 0)}})});
  c.push_back(
      {"VlanIpv4Udp",
       EthAB().Vlan(100, 3).Ipv4(kIpA, kIpB).Udp(53, 1053).Payload(10).Build(),
       With(Ipv4Flow(kIpProtoUdp), {{Field::kVlan0Tci, Tci(100, 3)},
                                    {Field::kTpSrc, 53},
                                    {Field::kTpDst, 1053}})});
  c.push_back({"PriorityTagVid0",
               EthAB().Vlan(0, 5).Ipv4(kIpA, kIpB).Udp(1, 2).Build(),
               With(Ipv4Flow(kIpProtoUdp), {{Field::kVlan0Tci, Tci(0, 5)},
                                            {Field::kTpSrc, 1},
                                            {Field::kTpDst, 2}})});
  c.push_back({"QinQIpv4Tcp",
               EthAB()
                   .QinQ(10, 4095, 1, 7)
                   .Ipv4(kIpA, kIpB)
                   .Tcp(1234, 80, kTcpSyn)
                   .Build(),
               With(Ipv4Flow(kIpProtoTcp), {{Field::kVlan0Tci, Tci(10, 1)},
                                            {Field::kVlan1Tci, Tci(4095, 7)},
                                            {Field::kTpSrc, 1234},
                                            {Field::kTpDst, 80},
                                            {Field::kTcpFlags, kTcpSyn}})});
  c.push_back({"DoubleDot1qIpv6",
               EthAB().Vlan(1).Vlan(2).Ipv6(kIp6A, kIp6B).Udp(9, 10).Build(),
               With(Ipv6Flow(kIpProtoUdp), {{Field::kVlan0Tci, Tci(1, 0)},
                                            {Field::kVlan1Tci, Tci(2, 0)},
                                            {Field::kTpSrc, 9},
                                            {Field::kTpDst, 10}})});
  c.push_back({"ThirdTagLeftUnparsed",
               EthAB().QinQ(1, 2).Vlan(3).Ipv4(kIpA, kIpB).Udp(1, 2).Build(),
               With(EthFlow(kEthTypeVlan), {{Field::kVlan0Tci, Tci(1, 0)},
                                            {Field::kVlan1Tci, Tci(2, 0)}})});
  c.push_back({"ThirdTag88a8LeftUnparsed",
               EthAB()
                   .Vlan(1)
                   .Vlan(2)
                   .Vlan(3, 0, kEthTypeQinQ)
                   .Ipv4(kIpA, kIpB)
                   .Build(),
               With(EthFlow(kEthTypeQinQ), {{Field::kVlan0Tci, Tci(1, 0)},
                                            {Field::kVlan1Tci, Tci(2, 0)}})});

  // --- IPv4
  c.push_back(
      {"Ipv4TcpFlagsTosTtl",
       EthAB()
           .Ipv4(kIpA, kIpB, /*ttl=*/17, /*tos=*/0xb9)
           .Tcp(40000, 443, kTcpSyn | kTcpAck | kTcpNs | kTcpCwr)
           .Payload(100)
           .Build(),
       With(Ipv4Flow(kIpProtoTcp, 0xb9, 17),
            {{Field::kTpSrc, 40000},
             {Field::kTpDst, 443},
             {Field::kTcpFlags, kTcpSyn | kTcpAck | kTcpNs | kTcpCwr}})});
  c.push_back(
      {"Ipv4OptionsTcp",
       EthAB().Ipv4(kIpA, kIpB).Ipv4Options(12).Tcp(1, 2, kTcpFin, 8).Build(),
       With(Ipv4Flow(kIpProtoTcp), {{Field::kTpSrc, 1},
                                    {Field::kTpDst, 2},
                                    {Field::kTcpFlags, kTcpFin}})});
  c.push_back(
      {"Ipv4MaxOptionsUdp",
       EthAB().Ipv4(kIpA, kIpB).Ipv4Options(40).Udp(0xffff, 0xfffe).Build(),
       With(Ipv4Flow(kIpProtoUdp),
            {{Field::kTpSrc, 0xffff}, {Field::kTpDst, 0xfffe}})});
  c.push_back({"Ipv4Sctp", EthAB().Ipv4(kIpA, kIpB).Sctp(3868, 2905).Build(),
               With(Ipv4Flow(kIpProtoSctp),
                    {{Field::kTpSrc, 3868}, {Field::kTpDst, 2905}})});
  c.push_back(
      {"Ipv4IcmpEcho", EthAB().Ipv4(kIpA, kIpB).Icmp(8, 0).Payload(56).Build(),
       With(Ipv4Flow(kIpProtoIcmp), {{Field::kTpSrc, 8}, {Field::kTpDst, 0}})});
  c.push_back({"Ipv4IcmpUnreachable",
               EthAB().Ipv4(kIpA, kIpB).Icmp(3, 13).Build(),
               With(Ipv4Flow(kIpProtoIcmp),
                    {{Field::kTpSrc, 3}, {Field::kTpDst, 13}})});
  c.push_back({"Ipv4Icmpv6ProtoNotParsed",
               EthAB().Ipv4(kIpA, kIpB).Icmpv6(128, 0).Build(),
               Ipv4Flow(kIpProtoIcmpv6)});
  c.push_back({"Ipv4Gre",
               EthAB().Ipv4(kIpA, kIpB).IpProto(47).Payload(30).Build(),
               Ipv4Flow(47)});
  c.push_back(
      {"Ipv4DontFragmentIsNotFragment",
       Poke(EthAB().Ipv4(kIpA, kIpB).Udp(5, 6).Build(), 14 + 6, 0x40),
       With(Ipv4Flow(kIpProtoUdp), {{Field::kTpSrc, 5}, {Field::kTpDst, 6}})});
  c.push_back({"Ipv4FirstFragment",
               EthAB()
                   .Ipv4(kIpA, kIpB)
                   .Ipv4Fragment(true, 0)
                   .Tcp(5, 6, kTcpAck)
                   .Payload(64)
                   .Build(),
               With(Ipv4Flow(kIpProtoTcp, 0, 64, kFragAny),
                    {{Field::kTpSrc, 5},
                     {Field::kTpDst, 6},
                     {Field::kTcpFlags, kTcpAck}})});
  c.push_back({"Ipv4MiddleFragmentSkipsL4",
               EthAB()
                   .Ipv4(kIpA, kIpB)
                   .Ipv4Fragment(true, 100)
                   .Tcp(5, 6)
                   .Payload(64)
                   .Build(),
               Ipv4Flow(kIpProtoTcp, 0, 64, kFragAny | kFragLater)});
  c.push_back(
      {"Ipv4LastFragmentSkipsL4",
       EthAB().Ipv4(kIpA, kIpB).Ipv4Fragment(false, 1).Udp(5, 6).Build(),
       Ipv4Flow(kIpProtoUdp, 0, 64, kFragAny | kFragLater)});
  // Ethernet padding after a datagram that is too short for its L4 header
  // is not parsed as that header.
  c.push_back(
      {"Ipv4PaddingIsNotL4",
       Poke(EthAB().Ipv4(kIpA, kIpB).IpProto(kIpProtoUdp).PadTo(64).Build(), 40,
            0x77),
       Ipv4Flow(kIpProtoUdp), kKeyTruncated});

  // --- IPv6
  c.push_back(
      {"Ipv6Tcp",
       EthAB()
           .Ipv6(kIp6A, kIp6B, /*hop_limit=*/255, /*tclass=*/0xe3, 0xabcde)
           .Tcp(22, 50000, kTcpPsh | kTcpAck)
           .Payload(20)
           .Build(),
       With(Ipv6Flow(kIpProtoTcp, 0xe3, 255),
            {{Field::kTpSrc, 22},
             {Field::kTpDst, 50000},
             {Field::kTcpFlags, kTcpPsh | kTcpAck}})});
  c.push_back({"Ipv6Udp", EthAB().Ipv6(kIp6A, kIp6B).Udp(546, 547).Build(),
               With(Ipv6Flow(kIpProtoUdp),
                    {{Field::kTpSrc, 546}, {Field::kTpDst, 547}})});
  c.push_back(
      {"Ipv6Sctp", EthAB().Ipv6(kIp6A, kIp6B).Sctp(7, 8).Build(),
       With(Ipv6Flow(kIpProtoSctp), {{Field::kTpSrc, 7}, {Field::kTpDst, 8}})});
  c.push_back({"Ipv6Icmpv6NeighborSolicit",
               EthAB().Ipv6(kIp6A, kIp6B).Icmpv6(135, 0).Build(),
               With(Ipv6Flow(kIpProtoIcmpv6),
                    {{Field::kTpSrc, 135}, {Field::kTpDst, 0}})});
  c.push_back({"Ipv6IcmpProtoNotParsed",
               EthAB().Ipv6(kIp6A, kIp6B).Icmp(8, 0).Build(),
               Ipv6Flow(kIpProtoIcmp)});
  c.push_back({"Ipv6HopRoutingDestOpts",
               EthAB()
                   .Ipv6(kIp6A, kIp6B)
                   .Ipv6HopByHop()
                   .Ipv6Routing(24)
                   .Ipv6DestOpts(16)
                   .Tcp(1000, 2000, kTcpRst)
                   .Build(),
               With(Ipv6Flow(kIpProtoTcp), {{Field::kTpSrc, 1000},
                                            {Field::kTpDst, 2000},
                                            {Field::kTcpFlags, kTcpRst}})});
  c.push_back(
      {"Ipv6LongHopByHop",
       EthAB().Ipv6(kIp6A, kIp6B).Ipv6HopByHop(64).Udp(1, 2).Build(),
       With(Ipv6Flow(kIpProtoUdp), {{Field::kTpSrc, 1}, {Field::kTpDst, 2}})});
  c.push_back({"Ipv6AhUdp",
               EthAB().Ipv6(kIp6A, kIp6B).Ipv6Ah(20).Udp(500, 4500).Build(),
               With(Ipv6Flow(kIpProtoUdp),
                    {{Field::kTpSrc, 500}, {Field::kTpDst, 4500}})});
  c.push_back({"Ipv6FirstFragment",
               EthAB()
                   .Ipv6(kIp6A, kIp6B)
                   .Ipv6Fragment(true, 0)
                   .Udp(11, 12)
                   .Payload(100)
                   .Build(),
               With(Ipv6Flow(kIpProtoUdp, 0, 64, kFragAny),
                    {{Field::kTpSrc, 11}, {Field::kTpDst, 12}})});
  // Offset 0 and M=0 (RFC 6946's atomic fragment): not a fragment, as in OVS.
  c.push_back(
      {"Ipv6AtomicFragment",
       EthAB().Ipv6(kIp6A, kIp6B).Ipv6Fragment(false, 0).Tcp(11, 12).Build(),
       With(Ipv6Flow(kIpProtoTcp, 0, 64, 0),
            {{Field::kTpSrc, 11},
             {Field::kTpDst, 12},
             {Field::kTcpFlags, kTcpAck}})});
  c.push_back({"Ipv6LaterFragmentSkipsL4",
               EthAB()
                   .Ipv6(kIp6A, kIp6B)
                   .Ipv6HopByHop()
                   .Ipv6Fragment(false, 185)
                   .Udp(11, 12)
                   .Build(),
               Ipv6Flow(kIpv6ExtFragment, 0, 64, kFragAny | kFragLater)});
  // A later fragment's nw_proto is the fragment header's own number, 44, as
  // in OVS: what follows is not a header of this fragment, whatever the
  // fragment header names (here destination options).
  c.push_back({"Ipv6LaterFragmentOfDestOpts",
               EthAB()
                   .Ipv6(kIp6A, kIp6B)
                   .Ipv6Fragment(true, 3)
                   .IpProto(60)
                   .Payload(16)
                   .Build(),
               Ipv6Flow(kIpv6ExtFragment, 0, 64, kFragAny | kFragLater)});
  c.push_back({"Ipv6NoNextHeader",
               EthAB().Ipv6(kIp6A, kIp6B).Ipv6DestOpts().Build(),
               Ipv6Flow(kIpProtoNoNext)});
  c.push_back({"Ipv6Esp",
               EthAB().Ipv6(kIp6A, kIp6B).IpProto(50).Payload(40).Build(),
               Ipv6Flow(50)});
  c.push_back({"Ipv6VlanIcmpv6",
               EthAB().Vlan(42, 6).Ipv6(kIp6A, kIp6B).Icmpv6(1, 4).Build(),
               With(Ipv6Flow(kIpProtoIcmpv6), {{Field::kVlan0Tci, Tci(42, 6)},
                                               {Field::kTpSrc, 1},
                                               {Field::kTpDst, 4}})});
  {
    // Payload length 0 (jumbogram style): no room for the hop-by-hop header,
    // so the addresses only (as OVS: no class, hop limit or protocol).
    std::vector<uint8_t> f =
        EthAB().Ipv6(kIp6A, kIp6B).Ipv6HopByHop().Udp(1, 2).Build();
    f[14 + 4] = 0;
    f[14 + 5] = 0;
    Flow addresses = EthFlow(kEthTypeIpv6);
    addresses.SetIpv6Src(kIp6A);
    addresses.SetIpv6Dst(kIp6B);
    c.push_back({"Ipv6ZeroPayloadLength", f, addresses, kKeyTruncated});
  }

  // --- Malformed headers keep what came before them.
  const std::vector<uint8_t> v4tcp =
      EthAB().Ipv4(kIpA, kIpB).Tcp(1, 2, kTcpSyn).Build();
  c.push_back({"Ipv4Version6", Poke(v4tcp, 14, 0x65), EthFlow(kEthTypeIpv4),
               kKeyMalformed});
  c.push_back({"Ipv4IhlFour", Poke(v4tcp, 14, 0x44), EthFlow(kEthTypeIpv4),
               kKeyMalformed});
  c.push_back({"Ipv4IhlZero", Poke(v4tcp, 14, 0x40), EthFlow(kEthTypeIpv4),
               kKeyMalformed});
  {
    std::vector<uint8_t> f = v4tcp;
    f[14 + 2] = 0;
    f[14 + 3] = 19;  // total length < 20
    c.push_back({"Ipv4TotalLengthBelowHeader", f, EthFlow(kEthTypeIpv4),
                 kKeyMalformed});
    f = EthAB().Ipv4(kIpA, kIpB).Ipv4Options(8).Udp(1, 2).Build();
    f[14 + 2] = 0;
    f[14 + 3] = 24;  // IHL says 28
    c.push_back(
        {"Ipv4TotalLengthBelowIhl", f, EthFlow(kEthTypeIpv4), kKeyMalformed});
  }
  c.push_back({"Ipv6Version4",
               Poke(EthAB().Ipv6(kIp6A, kIp6B).Udp(1, 2).Build(), 14, 0x40),
               EthFlow(kEthTypeIpv6), kKeyMalformed});
  c.push_back(
      {"VlanIpv6Version0",
       Poke(EthAB().Vlan(9).Ipv6(kIp6A, kIp6B).Udp(1, 2).Build(), 18, 0x00),
       With(EthFlow(kEthTypeIpv6), {{Field::kVlan0Tci, Tci(9, 0)}}),
       kKeyMalformed});
  c.push_back({"TcpDataOffsetFour", Poke(v4tcp, 14 + 20 + 12, 0x40),
               Ipv4Flow(kIpProtoTcp), kKeyMalformed});
  c.push_back(
      {"Ipv6TcpDataOffsetZero",
       Poke(EthAB().Ipv6(kIp6A, kIp6B).Tcp(1, 2).Build(), 14 + 40 + 12, 0x00),
       Ipv6Flow(kIpProtoTcp), kKeyMalformed});

  // --- Truncation inside a header that the datagram length cuts.
  {
    // TCP options beyond the frame: ports and flags kept.
    std::vector<uint8_t> f =
        EthAB().Ipv4(kIpA, kIpB).Tcp(1, 2, kTcpSyn, 12).Build();
    f.resize(14 + 20 + 24);
    // The frame ends before the datagram does: no L3 fields (as OVS).
    c.push_back({"TcpOptionsCut", f, EthFlow(kEthTypeIpv4), kKeyTruncated});
    // The datagram (total length) ends inside the TCP options: the header
    // claims more than the datagram holds, so no ports or flags (as OVS).
    f[14 + 2] = 0;
    f[14 + 3] = 20 + 24;
    c.push_back({"TcpOptionsPastDatagram", f, Ipv4Flow(kIpProtoTcp), kKeyTruncated});
    // IPv6 payload length ends inside the routing header.
    f = EthAB().Ipv6(kIp6A, kIp6B).Ipv6Routing(24).Udp(1, 2).PadTo(200).Build();
    f[14 + 4] = 0;
    f[14 + 5] = 16;
    // (the addresses only, as OVS)
    Flow v6_addresses = EthFlow(kEthTypeIpv6);
    v6_addresses.SetIpv6Src(kIp6A);
    v6_addresses.SetIpv6Dst(kIp6B);
    c.push_back({"Ipv6PayloadLengthCutsRouting", f, v6_addresses, kKeyTruncated});
  }
  return c;
}

class ParserCaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(ParserCaseTest, ParsesExpectedFields) {
  const Case& c = GetParam();
  uint8_t flags = 0xff;
  const Flow got = ParseExact(c.frame, c.frame.size(), &flags);
  EXPECT_TRUE(SameFlow(got, c.want));
  EXPECT_EQ(flags, c.flags);
}

// Every prefix of every case: no read past the end (ASan), and a prefix
// either is flagged truncated or already parses like the whole frame (it was
// cut in the payload).
TEST_P(ParserCaseTest, EveryPrefixIsTruncatedOrComplete) {
  const Case& c = GetParam();
  uint8_t full_flags = 0;
  const Flow full = ParseExact(c.frame, c.frame.size(), &full_flags);
  int truncated = 0;
  for (size_t len = 0; len < c.frame.size(); ++len) {
    uint8_t flags = 0;
    const Flow got = ParseExact(c.frame, len, &flags);
    ASSERT_EQ(got.Get(Field::kInPort), kPort);
    if (flags & kKeyTruncated) {
      ++truncated;
    } else {
      ASSERT_TRUE(SameFlow(got, full)) << "prefix " << len;
      ASSERT_EQ(flags, full_flags) << "prefix " << len;
    }
  }
  EXPECT_GE(truncated, 12);  // at least the Ethernet addresses can be cut
}

INSTANTIATE_TEST_SUITE_P(AllProtocols, ParserCaseTest,
                         ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// ---------------------------------------------------------------------------
// Every prefix of a frame: what was parsed so far, and the truncated flag.

// The parse state after each header unit, built by hand from the wire layout
// (independently of the parser).
class Progress {
 public:
  // The Ethernet header: addresses complete at 12 bytes, the type field
  // (`eth_type`) at 14.
  explicit Progress(uint16_t eth_type) {
    cur_.Set(Field::kInPort, kPort);
    At(0);
    Set(Field::kEthDst, kMacB).Set(Field::kEthSrc, kMacA).At(12);
    Set(Field::kEthType, eth_type).At(14);
  }
  Progress& Set(Field f, uint64_t v) {
    cur_.Set(f, v);
    return *this;
  }
  // The fields of an IPv4 header kIpA -> kIpB (Ipv4Flow's).
  Progress& Ipv4Fields(uint8_t proto, uint8_t tos = 0, uint8_t ttl = 64,
                       uint8_t frag = 0) {
    return Set(Field::kIpv4Src, kIpA)
        .Set(Field::kIpv4Dst, kIpB)
        .Set(Field::kNwProto, proto)
        .Set(Field::kNwTos, tos)
        .Set(Field::kNwTtl, ttl)
        .Set(Field::kNwFrag, frag);
  }
  // The fields of an IPv6 header kIp6A -> kIp6B (Ipv6Flow's).
  Progress& Ipv6Fields(uint8_t proto, uint8_t tclass = 0, uint8_t hlim = 64) {
    cur_.SetIpv6Src(kIp6A);
    cur_.SetIpv6Dst(kIp6B);
    return Set(Field::kNwProto, proto)
        .Set(Field::kNwTos, tclass)
        .Set(Field::kNwTtl, hlim);
  }
  // The fields of a TCP/UDP/SCTP/ICMP header.
  Progress& L4Fields(uint16_t src, uint16_t dst, uint16_t tcp_flags = 0) {
    return Set(Field::kTpSrc, src)
        .Set(Field::kTpDst, dst)
        .Set(Field::kTcpFlags, tcp_flags);
  }
  // The unit ending at `end` is complete: the current state holds from there.
  Progress& At(size_t end) {
    steps_.push_back({end, cur_});
    return *this;
  }
  // Expected result for a frame cut to `len` bytes.
  Flow Expected(size_t len, uint8_t* flags) const {
    Flow f;
    for (const auto& [end, flow] : steps_)
      if (end <= len) f = flow;
    *flags = len < steps_.back().first ? kKeyTruncated : 0;
    return f;
  }

 private:
  Flow cur_;
  std::vector<std::pair<size_t, Flow>> steps_;
};

void CheckAllPrefixes(const std::vector<uint8_t>& frame, const Progress& p) {
  for (size_t len = 0; len <= frame.size(); ++len) {
    SCOPED_TRACE(absl::StrFormat("prefix of %d bytes", len));
    uint8_t flags = 0xff, want_flags = 0xff;
    const Flow got = ParseExact(frame, len, &flags);
    const Flow want = p.Expected(len, &want_flags);
    ASSERT_TRUE(SameFlow(got, want));
    ASSERT_EQ(flags, want_flags);
  }
}

TEST(ParserPrefixTest, QinQIpv4OptionsTcpOptions) {
  PacketBuilder b = EthAB();
  b.QinQ(300, 400, 2, 5)
      .Ipv4(kIpA, kIpB, 9, 0x10)
      .Ipv4Options(8)
      .Tcp(4321, 8080, kTcpSyn | kTcpEce, 12)
      .Payload(7);
  const std::vector<uint8_t> frame = b.Build();
  ASSERT_EQ(b.L3Offset(), 22u);
  ASSERT_EQ(b.L4Offset(), 22u + 28);
  Progress p(kEthTypeQinQ);
  p.Set(Field::kVlan0Tci, Tci(300, 2))
      .At(16)
      .Set(Field::kEthType, kEthTypeVlan)
      .At(18)
      .Set(Field::kVlan1Tci, Tci(400, 5))
      .At(20)
      .Set(Field::kEthType, kEthTypeIpv4)
      .At(22)
      // The IPv4 and TCP fields only with the whole datagram (as OVS: a
      // datagram longer than the frame has no L3 fields).
      .Ipv4Fields(kIpProtoTcp, /*tos=*/0x10, /*ttl=*/9)
      .L4Fields(4321, 8080, kTcpSyn | kTcpEce)
      .At(frame.size());
  CheckAllPrefixes(frame, p);
}

TEST(ParserPrefixTest, Ipv6ExtensionChainUdp) {
  PacketBuilder b = EthAB();
  b.Ipv6(kIp6A, kIp6B, 3, 0x2c)
      .Ipv6HopByHop(16)
      .Ipv6Ah(12)
      .Ipv6DestOpts(8)
      .Udp(67, 68)
      .Payload(5);
  const std::vector<uint8_t> frame = b.Build();
  Progress p(kEthTypeIpv6);
  p.Ipv6Fields(kIpProtoUdp, /*tclass=*/0x2c, /*hlim=*/3)
      .L4Fields(67, 68)
      .At(frame.size());  // only with the whole datagram
  CheckAllPrefixes(frame, p);
}

TEST(ParserPrefixTest, VlanIpv6FirstFragmentTcp) {
  const std::vector<uint8_t> frame = EthAB()
                                         .Vlan(7)
                                         .Ipv6(kIp6A, kIp6B)
                                         .Ipv6Fragment(true, 0)
                                         .Tcp(1, 2, kTcpFin, 4)
                                         .PadTo(150)
                                         .Build();
  Progress p(kEthTypeVlan);
  p.Set(Field::kVlan0Tci, Tci(7, 0))
      .At(16)
      .Set(Field::kEthType, kEthTypeIpv6)
      .At(18)
      .Ipv6Fields(kIpProtoTcp)
      .Set(Field::kNwFrag, kFragAny)
      .L4Fields(1, 2, kTcpFin)
      .At(90);  // the datagram's end (the frame is padded to 150)
  CheckAllPrefixes(frame, p);
}

TEST(ParserPrefixTest, Ipv4LaterFragmentStopsAtIpHeader) {
  const std::vector<uint8_t> frame = EthAB()
                                         .Ipv4(kIpA, kIpB)
                                         .Ipv4Fragment(true, 64)
                                         .Udp(1, 2)
                                         .Payload(30)
                                         .Build();
  Progress p(kEthTypeIpv4);
  p.Ipv4Fields(kIpProtoUdp, 0, 64, kFragAny | kFragLater).At(frame.size());
  CheckAllPrefixes(frame, p);
}

TEST(ParserPrefixTest, Ipv4IcmpSctpAndArp) {
  {
    SCOPED_TRACE("icmp");
    const std::vector<uint8_t> frame =
        EthAB().Ipv4(kIpA, kIpB).Icmp(0, 0).Payload(3).Build();
    Progress p(kEthTypeIpv4);
    p.Ipv4Fields(kIpProtoIcmp).At(frame.size());  // echo reply: type 0, code 0
    CheckAllPrefixes(frame, p);
  }
  {
    SCOPED_TRACE("sctp");
    const std::vector<uint8_t> frame =
        EthAB().Ipv4(kIpA, kIpB).Sctp(9, 10).Build();
    Progress p(kEthTypeIpv4);
    p.Ipv4Fields(kIpProtoSctp).L4Fields(9, 10).At(frame.size());
    CheckAllPrefixes(frame, p);
  }
  {
    SCOPED_TRACE("arp");
    const std::vector<uint8_t> frame =
        EthAB().Arp(1, kMacA, kIpA, 0, kIpB).Build();
    CheckAllPrefixes(frame, Progress(kEthTypeArp));
  }
  {
    SCOPED_TRACE("icmpv6");
    const std::vector<uint8_t> frame =
        EthAB().Ipv6(kIp6A, kIp6B).Icmpv6(2, 0).Build();
    Progress p(kEthTypeIpv6);
    p.Ipv6Fields(kIpProtoIcmpv6).L4Fields(2, 0).At(frame.size());
    CheckAllPrefixes(frame, p);
  }
}

// ---------------------------------------------------------------------------
// Round trip: random Flow -> BuildFrameFromFlow -> ParsePacket.

uint64_t RandomValue(std::mt19937_64& rng, int bits) {
  // A quarter of the values are zero, so absent words are exercised too.
  if (rng() % 4 == 0) return 0;
  return bits == 64 ? rng() : rng() & ((uint64_t{1} << bits) - 1);
}

Flow RandomBuildableFlow(std::mt19937_64& rng) {
  Flow f;
  f.Set(Field::kInPort, RandomValue(rng, 32));
  f.Set(Field::kEthSrc, RandomValue(rng, 48));
  f.Set(Field::kEthDst, RandomValue(rng, 48));
  const int tags = static_cast<int>(rng() % 3);
  if (tags >= 1) f.Set(Field::kVlan0Tci, RandomValue(rng, 16) | kVlanPresent);
  if (tags >= 2) f.Set(Field::kVlan1Tci, RandomValue(rng, 16) | kVlanPresent);

  const int kind = static_cast<int>(rng() % 10);
  if (kind == 0) {
    f.Set(Field::kEthType, kEthTypeArp);
    return f;
  }
  if (kind == 1) {
    uint16_t t = static_cast<uint16_t>(rng());
    if (t == kEthTypeIpv4 || t == kEthTypeIpv6) t = 0x88cc;  // LLDP
    if (t == kEthTypeVlan || t == kEthTypeQinQ) t = tags == 2 ? t : 0x88cc;
    f.Set(Field::kEthType, t);
    return f;
  }
  const bool v6 = kind >= 6;
  f.Set(Field::kEthType, v6 ? kEthTypeIpv6 : kEthTypeIpv4);
  if (v6) {
    f.SetIpv6Src(absl::MakeUint128(RandomValue(rng, 64), RandomValue(rng, 64)));
    f.SetIpv6Dst(absl::MakeUint128(RandomValue(rng, 64), RandomValue(rng, 64)));
  } else {
    f.Set(Field::kIpv4Src, RandomValue(rng, 32));
    f.Set(Field::kIpv4Dst, RandomValue(rng, 32));
  }
  static constexpr uint8_t kProtos[] = {
      kIpProtoTcp,  kIpProtoTcp,    kIpProtoUdp, kIpProtoUdp,    kIpProtoSctp,
      kIpProtoIcmp, kIpProtoIcmpv6, 47,          kIpProtoNoNext, 50};
  uint8_t proto = kProtos[rng() % std::size(kProtos)];
  if (rng() % 8 == 0) proto = static_cast<uint8_t>(rng());
  if (v6 &&
      (proto == 0 || proto == 43 || proto == 44 || proto == 51 || proto == 60))
    proto = 6;
  f.Set(Field::kNwProto, proto);
  f.Set(Field::kNwTos, RandomValue(rng, 8));
  f.Set(Field::kNwTtl, RandomValue(rng, 8));
  static constexpr uint8_t kFrags[] = {0, 0, 0, kFragAny,
                                       kFragAny | kFragLater};
  const uint8_t frag = kFrags[rng() % std::size(kFrags)];
  f.Set(Field::kNwFrag, frag);
  // An IPv6 later fragment parses as nw_proto 44 whatever it carries (OVS).
  if (v6 && (frag & kFragLater)) f.Set(Field::kNwProto, kIpv6ExtFragment);
  if (frag & kFragLater) return f;
  const bool icmp =
      (!v6 && proto == kIpProtoIcmp) || (v6 && proto == kIpProtoIcmpv6);
  if (proto == kIpProtoTcp || proto == kIpProtoUdp || proto == kIpProtoSctp ||
      icmp) {
    f.Set(Field::kTpSrc, RandomValue(rng, icmp ? 8 : 16));
    f.Set(Field::kTpDst, RandomValue(rng, icmp ? 8 : 16));
  }
  if (proto == kIpProtoTcp) f.Set(Field::kTcpFlags, RandomValue(rng, 12));
  return f;
}

TEST(ParserRoundTripTest, RandomFlowsSurviveBuildAndParse) {
  std::mt19937_64 rng(20261130);
  for (int i = 0; i < kRandomIterations; ++i) {
    const Flow f = RandomBuildableFlow(rng);
    ASSERT_TRUE(CanBuildFrameFromFlow(f)) << Describe(f);
    const size_t min_len = (i % 2) ? 64 : 0;
    const std::vector<uint8_t> frame = BuildFrameFromFlow(f, min_len);
    ASSERT_GE(frame.size(), min_len);
    const uint32_t in_port = static_cast<uint32_t>(f.Get(Field::kInPort));
    const FlowKey got = ParsePacket(frame.data(), frame.size(), in_port);
    const FlowKey want = FlowKey::FromFlow(f);
    ASSERT_TRUE(SameFlow(got.ToFlow(), f)) << "iteration " << i;
    ASSERT_EQ(got.flags, 0) << Describe(f);
    ASSERT_EQ(got.map, want.map);
    ASSERT_EQ(got.words, want.words);  // including the zeroed unused slots
    ASSERT_EQ(got.hash, want.hash);
  }
}

TEST(ParserRoundTripTest, CanBuildRejectsInexpressibleFlows) {
  const Flow tcp = With(Ipv4Flow(kIpProtoTcp), {{Field::kTpSrc, 1}});
  EXPECT_TRUE(CanBuildFrameFromFlow(tcp));
  EXPECT_FALSE(CanBuildFrameFromFlow(
      With(tcp, {{Field::kVlan0Tci, 5}})));  // no present bit
  EXPECT_FALSE(
      CanBuildFrameFromFlow(With(tcp, {{Field::kVlan1Tci, Tci(1, 0)}})));
  EXPECT_FALSE(
      CanBuildFrameFromFlow(With(tcp, {{Field::kNwFrag, kFragLater}})));
  EXPECT_FALSE(CanBuildFrameFromFlow(
      With(tcp, {{Field::kNwFrag, kFragAny | kFragLater}})));
  EXPECT_FALSE(
      CanBuildFrameFromFlow(With(tcp, {{Field::kEthType, kEthTypeArp}})));
  EXPECT_FALSE(CanBuildFrameFromFlow(With(Ipv4Flow(47), {{Field::kTpDst, 1}})));
  EXPECT_FALSE(CanBuildFrameFromFlow(
      With(Ipv4Flow(kIpProtoUdp), {{Field::kTcpFlags, 1}})));
  EXPECT_FALSE(CanBuildFrameFromFlow(
      With(Ipv4Flow(kIpProtoIcmp), {{Field::kTpSrc, 256}})));
  EXPECT_FALSE(CanBuildFrameFromFlow(Ipv6Flow(kIpv6ExtRouting)));
  EXPECT_FALSE(CanBuildFrameFromFlow(EthFlow(kEthTypeVlan)));
  Flow v6 = Ipv6Flow(kIpProtoUdp);
  v6.Set(Field::kIpv4Src, 1);
  EXPECT_FALSE(CanBuildFrameFromFlow(v6));
}

// ---------------------------------------------------------------------------
// Mutated frames: whatever the bytes, the key is consistent and no byte past
// the end is read (ASan).

TEST(ParserMutationTest, RandomBytesKeepKeysConsistent) {
  std::mt19937_64 rng(7);
  const std::vector<std::vector<uint8_t>> seeds = {
      EthAB()
          .QinQ(1, 2)
          .Ipv4(kIpA, kIpB)
          .Ipv4Options(8)
          .Tcp(1, 2, kTcpSyn, 8)
          .Build(),
      EthAB()
          .Ipv6(kIp6A, kIp6B)
          .Ipv6HopByHop()
          .Ipv6Fragment(true, 0)
          .Ipv6Ah(16)
          .Udp(3, 4)
          .Build(),
      EthAB().Vlan(3).Ipv6(kIp6A, kIp6B).Ipv6Routing(16).Icmpv6(1, 1).Build(),
      EthAB().Ipv4(kIpA, kIpB).Icmp(8, 0).Build(),
      // The parser's IPv4 TCP/UDP fast path: mutations of the version/IHL,
      // fragment, protocol, length and data-offset bytes must fall back to
      // the general path with the same result.
      EthAB().Ipv4(kIpA, kIpB).Tcp(1, 2, kTcpAck).Payload(8).Build(),
      EthAB().Ipv4(kIpA, kIpB).Udp(3, 4).Payload(8).Build(),
  };
  int flagged = 0;
  for (int i = 0; i < kRandomIterations; ++i) {
    std::vector<uint8_t> frame = seeds[i % seeds.size()];
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations; ++m)
      frame[rng() % frame.size()] = static_cast<uint8_t>(rng());
    const size_t len = rng() % (frame.size() + 1);
    uint8_t flags = 0;
    const Flow f =
        ParseExact(frame, len, &flags);  // checks key == FromFlow(flow)
    ASSERT_EQ(f.Get(Field::kInPort), kPort);
    ASSERT_EQ(flags & ~(kKeyTruncated | kKeyMalformed), 0);
    flagged += flags != 0;
  }
  EXPECT_GT(flagged, 0);
}

// ---------------------------------------------------------------------------
// Bursts.

TEST(ParseBurstTest, EverySizeMatchesSingleParseAndWritesNoFurther) {
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < kMaxBurst; ++i) {
    PacketBuilder b = EthAB();
    switch (i % 4) {
      case 0:
        b.Ipv4(kIpA + i, kIpB).Tcp(static_cast<uint16_t>(i), 80, kTcpAck);
        break;
      case 1:
        b.Vlan(static_cast<uint16_t>(i))
            .Ipv4(kIpA, kIpB)
            .Udp(53, static_cast<uint16_t>(i));
        break;
      case 2:
        b.Ipv6(kIp6A + i, kIp6B).Ipv6HopByHop().Tcp(1, 2);
        break;
      default:
        b.Ipv4(kIpA, kIpB);
        break;
    }
    frames.push_back(b.Build());
    if (i % 4 == 3) frames.back().resize(20);  // truncated
  }
  std::vector<const uint8_t*> ptrs;
  std::vector<uint16_t> lens;
  for (const auto& f : frames) {
    ptrs.push_back(f.data());
    lens.push_back(static_cast<uint16_t>(f.size()));
  }
  FlowKey marker;
  marker.hash = 0xdeadbeef;
  marker.flags = 0xee;
  for (int n = 0; n <= kMaxBurst; ++n) {
    std::vector<FlowKey> keys(kMaxBurst + 1, marker);
    ParseBurst(ptrs.data(), lens.data(), n, /*in_port=*/3, keys.data());
    for (int i = 0; i < n; ++i) {
      const FlowKey want = ParsePacket(ptrs[i], lens[i], 3);
      ASSERT_TRUE(keys[i].SameFlow(want)) << "n=" << n << " i=" << i;
      ASSERT_EQ(keys[i].hash, want.hash);
      ASSERT_EQ(keys[i].flags, want.flags);
      ASSERT_EQ(keys[i].words, want.words);
    }
    for (int i = n; i <= kMaxBurst; ++i) {
      ASSERT_EQ(keys[i].hash, marker.hash)
          << "overrun at " << i << " for n=" << n;
      ASSERT_EQ(keys[i].flags, marker.flags);
    }
  }
  // The truncated ones are flagged, the others are not, and the count of
  // flagged keys is returned.
  std::vector<FlowKey> keys(kMaxBurst);
  EXPECT_EQ(ParseBurst(ptrs.data(), lens.data(), kMaxBurst, 3, keys.data()), kMaxBurst / 4);
  for (int i = 0; i < kMaxBurst; ++i)
    EXPECT_EQ(keys[i].flags, i % 4 == 3 ? kKeyTruncated : 0) << i;
}

// ---------------------------------------------------------------------------
// The builder itself: lengths and checksums are what real stacks expect.

uint16_t InternetChecksum(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += (p[i] << 8) | p[i + 1];
  if (n & 1) sum += p[n - 1] << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// OVS's vlan_tci=0 (the whole TCI, present bit included, matched as zero)
// selects untagged frames only: the parser leaves an untagged frame's TCI at
// zero and sets the present bit on every tag, priority tags (vid 0) too.
TEST(ParserVlanTest, TciZeroMatchesUntaggedOnly) {
  Match m;
  m.SetMasked(Field::kVlan0Tci, 0, 0xffff);
  auto parse = [](const std::vector<uint8_t>& f) {
    uint8_t flags = 0;
    return ParsePacketToFlow(f.data(), f.size(), 1, &flags);
  };
  const auto untagged = EthAB().Ipv4(0x0a000001, 0x0a000002).Udp(1, 2).Build();
  const auto priority_tag = EthAB().Vlan(0, 0).Ipv4(0x0a000001, 0x0a000002).Udp(1, 2).Build();
  const auto tagged = EthAB().Vlan(10, 3).Ipv4(0x0a000001, 0x0a000002).Udp(1, 2).Build();
  EXPECT_TRUE(m.Matches(parse(untagged)));
  EXPECT_FALSE(m.Matches(parse(priority_tag)));
  EXPECT_FALSE(m.Matches(parse(tagged)));
}

TEST(PacketBuilderTest, Ipv4LengthsAndChecksums) {
  PacketBuilder b = EthAB();
  b.Vlan(1).Ipv4(kIpA, kIpB).Ipv4Options(4).Udp(1, 2).Payload(11).PadTo(128);
  const std::vector<uint8_t> f = b.Build();
  ASSERT_EQ(f.size(), 128u);
  const uint8_t* ip = f.data() + b.L3Offset();
  EXPECT_EQ(ip[0], 0x46);
  EXPECT_EQ((ip[2] << 8) | ip[3], 24 + 8 + 11);
  EXPECT_EQ(InternetChecksum(ip, 24), 0);
  const uint8_t* udp = f.data() + b.L4Offset();
  EXPECT_EQ((udp[4] << 8) | udp[5], 8 + 11);
  uint32_t pseudo = 0;
  for (int i = 12; i < 20; i += 2) pseudo += (ip[i] << 8) | ip[i + 1];
  pseudo += kIpProtoUdp + 19;
  EXPECT_EQ(InternetChecksum(udp, 19, pseudo), 0);
}

TEST(PacketBuilderTest, Ipv6PayloadLengthAndTcpChecksum) {
  PacketBuilder b = EthAB();
  b.Ipv6(kIp6A, kIp6B).Ipv6HopByHop().Tcp(1, 2, kTcpSyn, 4).Payload(9);
  const std::vector<uint8_t> f = b.Build();
  const uint8_t* ip = f.data() + b.L3Offset();
  EXPECT_EQ((ip[4] << 8) | ip[5], 8 + 24 + 9);
  EXPECT_EQ(ip[6], kIpv6ExtHopByHop);
  EXPECT_EQ(ip[40], kIpProtoTcp);
  const uint8_t* tcp = f.data() + b.L4Offset();
  uint32_t pseudo = 0;
  for (int i = 8; i < 40; i += 2) pseudo += (ip[i] << 8) | ip[i + 1];
  pseudo += kIpProtoTcp + 33;
  EXPECT_EQ(InternetChecksum(tcp, 33, pseudo), 0);
  EXPECT_EQ(tcp[12] >> 4, 6);
}

}  // namespace
}  // namespace flowclass
