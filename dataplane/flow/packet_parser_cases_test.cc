// The packet parser over a table of frames of every protocol it knows: the
// fields each one parses to, and every prefix of each either flagged
// truncated or parsed like the whole frame.
#include "dataplane/flow/packet_parser.h"

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "dataplane/flow/flow.h"
#include "dataplane/flow/packet_parser_testing.h"
#include "gtest/gtest.h"
#include "tests/common/packet_builder.h"

namespace flowclass {
namespace {

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

}  // namespace
}  // namespace flowclass
