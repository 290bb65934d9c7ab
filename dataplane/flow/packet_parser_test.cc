// The packet parser frame by frame: the fields parsed after each header of a
// frame cut short, random flows through the frame builder and back, mutated
// frames, bursts, VLAN TCI zero, and the builder's own lengths and checksums.
#include "dataplane/flow/packet_parser.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "dataplane/flow/flow.h"
#include "dataplane/flow/packet_parser_testing.h"
#include "dataplane/rules/rule.h"
#include "gtest/gtest.h"
#include "tests/common/packet_builder.h"
#include "tests/common/sanitizer.h"

namespace flowclass {
namespace {

constexpr int kRandomIterations = kSanitized ? 3000 : 30000;

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
