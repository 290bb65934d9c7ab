// The native (OVS-like) rule format: every key, defaults, numbers, comments,
// the printer, flow dumps, the parse/print round trip over random rules, and
// packets written as match keys.
#include "dataplane/rules/rule_format.h"

#include <algorithm>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_format_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/sanitizer.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

// ----------------------------------------------------------- Native format

TEST(NativeTest, ParsesEveryKey) {
  absl::StatusOr<Rule> r = ParseNativeRule(
      "id=7,priority=100,cookie=0x1f,in_port=3,tcp,dl_src=00:11:22:33:44:55,"
      "eth_dst=aa:bb:cc:00:00:00/ff:ff:ff:00:00:00,dl_vlan=10,dl_vlan_pcp=5,"
      "vlan1_tci=0x1064/0x1fff,nw_src=10.0.0.0/8,nw_dst=192.168.1.0/255.255.255.0,"
      "ip_dscp=46,ip_ecn=1,nw_ttl=64,ip_frag=first,tp_src=1000-2000,"
      "tp_dst=0x50/0xfff0,tcp_flags=+syn-ack,actions=output:2",
      /*default_id=*/99);
  ASSERT_TRUE(r.ok()) << r.status();
  const Match& m = r->match;
  EXPECT_EQ(r->id, 7u);
  EXPECT_EQ(r->priority, 100u);
  EXPECT_EQ(r->cookie, 0x1fu);
  EXPECT_EQ(r->action, Action::Output(2));
  EXPECT_EQ(m.value.Get(Field::kInPort), 3u);
  EXPECT_EQ(m.mask.Get(Field::kInPort), 0xffffffffu);
  EXPECT_EQ(m.value.Get(Field::kEthType), kEthTypeIpv4);
  EXPECT_EQ(m.value.Get(Field::kNwProto), kIpProtoTcp);
  EXPECT_EQ(m.value.Get(Field::kEthSrc), 0x001122334455u);
  EXPECT_EQ(m.value.Get(Field::kEthDst), 0xaabbcc000000u);
  EXPECT_EQ(m.mask.Get(Field::kEthDst), 0xffffff000000u);
  EXPECT_EQ(m.value.Get(Field::kVlan0Tci), (5u << 13) | kVlanPresent | 10u);
  EXPECT_EQ(m.mask.Get(Field::kVlan0Tci), 0xffffu);
  EXPECT_EQ(m.value.Get(Field::kVlan1Tci), 0x1064u);
  EXPECT_EQ(m.mask.Get(Field::kVlan1Tci), 0x1fffu);
  EXPECT_EQ(m.value.Get(Field::kIpv4Src), Ip(10, 0, 0, 0));
  EXPECT_EQ(m.mask.Get(Field::kIpv4Src), 0xff000000u);
  EXPECT_EQ(m.value.Get(Field::kIpv4Dst), Ip(192, 168, 1, 0));
  EXPECT_EQ(m.mask.Get(Field::kIpv4Dst), 0xffffff00u);
  EXPECT_EQ(m.value.Get(Field::kNwTos), (46u << 2) | 1u);
  EXPECT_EQ(m.mask.Get(Field::kNwTos), 0xffu);
  EXPECT_EQ(m.value.Get(Field::kNwTtl), 64u);
  EXPECT_EQ(m.value.Get(Field::kNwFrag), kFragAny);
  EXPECT_EQ(m.mask.Get(Field::kNwFrag), kFragMask);
  EXPECT_EQ(m.tp_src, (PortRange{1000, 2000}));
  EXPECT_EQ(m.mask.Get(Field::kTpSrc), 0u);
  EXPECT_TRUE(m.tp_dst.IsFull());
  EXPECT_EQ(m.value.Get(Field::kTpDst), 0x50u);
  EXPECT_EQ(m.mask.Get(Field::kTpDst), 0xfff0u);
  EXPECT_EQ(m.value.Get(Field::kTcpFlags), 0x002u);
  EXPECT_EQ(m.mask.Get(Field::kTcpFlags), 0x012u);
}

TEST(NativeTest, Ipv6IcmpAndDefaults) {
  absl::StatusOr<Rule> r = ParseNativeRule(
      "icmp6 ipv6_src=2001:db8::/32 ipv6_dst=::1 icmp_type=135 icmp_code=0 "
      "actions=drop",
      /*default_id=*/42);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id, 42u);
  EXPECT_EQ(r->priority, kDefaultNativePriority);
  EXPECT_EQ(r->cookie, 0u);
  EXPECT_EQ(r->action, Action::Drop());
  const Match& m = r->match;
  EXPECT_EQ(m.value.Get(Field::kEthType), kEthTypeIpv6);
  EXPECT_EQ(m.value.Get(Field::kNwProto), kIpProtoIcmpv6);
  EXPECT_EQ(m.value.Ipv6Src(), absl::MakeUint128(0x20010db800000000ULL, 0));
  EXPECT_EQ(m.mask.Ipv6Src(), absl::MakeUint128(0xffffffff00000000ULL, 0));
  EXPECT_EQ(m.value.Ipv6Dst(), absl::uint128(1));
  EXPECT_EQ(m.mask.Ipv6Dst(), ~absl::uint128(0));
  EXPECT_EQ(m.value.Get(Field::kTpSrc), 135u);
  EXPECT_EQ(m.mask.Get(Field::kTpSrc), 0xffffu);
  EXPECT_EQ(m.value.Get(Field::kTpDst), 0u);
  EXPECT_EQ(m.mask.Get(Field::kTpDst), 0xffffu);

  // OVS spellings: actions=N, nw_tos as DSCP byte, ip_frag=later, arp.
  r = ParseNativeRule("arp,nw_tos=184,ip_frag=later,actions=5", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->action, Action::Output(5));
  EXPECT_EQ(r->match.value.Get(Field::kEthType), kEthTypeArp);
  EXPECT_EQ(r->match.mask.Get(Field::kNwProto), 0u);
  EXPECT_EQ(r->match.value.Get(Field::kNwTos), 184u);
  EXPECT_EQ(r->match.mask.Get(Field::kNwTos), 0xfcu);
  EXPECT_EQ(r->match.value.Get(Field::kNwFrag), kFragAny | kFragLater);
}

TEST(NativeTest, TrailingCommentIsIgnored) {
  absl::StatusOr<Rule> r = ParseNativeRule("id=4,udp,tp_dst=53,actions=output:3  # hits=12", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->action, Action::Output(3));
  EXPECT_EQ(r->match.value.Get(Field::kTpDst), 53u);
  r = ParseNativeRule("id=4,udp,actions=drop#no blank needed", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->action, Action::Drop());
  // A comment cannot hide the missing actions.
  EXPECT_FALSE(ParseNativeRule("id=4,udp  # actions=drop", 1).ok());
}

TEST(NativeTest, ParseNativeNumberReadsWhatTheFormatWrites) {
  uint64_t v = 0;
  EXPECT_TRUE(ParseNativeNumber("42", &v));
  EXPECT_EQ(v, 42u);
  EXPECT_TRUE(ParseNativeNumber("0x2A", &v));
  EXPECT_EQ(v, 42u);
  EXPECT_TRUE(ParseNativeNumber("0XFFFFFFFFFFFFFFFF", &v));
  EXPECT_EQ(v, ~uint64_t{0});
  for (const char* bad : {"", "0x", "-1", " 1", "1 ", "2a", "18446744073709551616"})
    EXPECT_FALSE(ParseNativeNumber(bad, &v)) << "'" << bad << "'";
}

TEST(NativeTest, NumbersUpTo64BitsExactly) {
  absl::StatusOr<Rule> r = ParseNativeRule(
      "id=18446744073709551615,cookie=0xffffffffffffffff,priority=4294967295,actions=drop", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id, ~uint64_t{0});
  EXPECT_EQ(r->cookie, ~uint64_t{0});
  EXPECT_EQ(r->priority, 0xffffffffu);
  r = ParseNativeRule("id=1844674407370955161,in_port=0x10,actions=drop", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id, 1844674407370955161u);
  EXPECT_EQ(r->match.value.Get(Field::kInPort), 16u);
}

TEST(NativeTest, FileSkipsCommentsAndDefaultsIdToLineNumber) {
  const std::string text =
      "# a comment\n"
      "\n"
      "  priority=5,udp,tp_dst=53,actions=output:1\r\n"
      "id=100,ip,actions=drop\n"
      "   # indented comment\n"
      "tcp6,tp_src=80-80,actions=output:3";
  absl::StatusOr<std::vector<Rule>> rules = ParseNativeRules(text);
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 3u);
  EXPECT_EQ((*rules)[0].id, 3u);
  EXPECT_EQ((*rules)[0].priority, 5u);
  EXPECT_EQ((*rules)[0].action, Action::Output(1));
  EXPECT_EQ((*rules)[1].id, 100u);
  EXPECT_EQ((*rules)[2].id, 6u);
  EXPECT_EQ((*rules)[2].match.tp_src, (PortRange{80, 80}));
}

TEST(NativeTest, PrinterEmitsReadableNativeForm) {
  Rule r;
  r.id = 3;
  r.priority = 10;
  r.cookie = 1;
  r.match.SetExact(Field::kEthType, kEthTypeIpv4);
  r.match.SetExact(Field::kNwProto, kIpProtoUdp);
  r.match.SetExact(Field::kInPort, 1);
  r.match.SetMasked(Field::kIpv4Src, Ip(10, 1, 2, 3), 0xff000000);
  r.match.tp_dst = PortRange{1000, 2000};
  r.action = Action::Output(2);
  EXPECT_EQ(r.ToString(),
            "id=3,priority=10,cookie=0x1,udp,in_port=1,nw_src=10.0.0.0/8,"
            "tp_dst=1000-2000,actions=output:2");

  Rule v;
  v.id = 1;
  v.match.SetExact(Field::kEthType, kEthTypeIpv6);
  v.match.SetExact(Field::kNwProto, kIpProtoIcmpv6);
  v.match.SetMasked(Field::kVlan0Tci, kVlanPresent | 7, 0x1fff);
  v.match.SetExact(Field::kTpSrc, 128);
  v.match.SetMasked(Field::kNwFrag, 0, kFragAny);
  v.match.SetMasked(Field::kTcpFlags, 0x002, 0x006);
  EXPECT_EQ(v.ToString(),
            "id=1,priority=0,cookie=0x0,icmp6,dl_vlan=7,ip_frag=no,"
            "icmp_type=128,tcp_flags=+syn-rst,actions=drop");
  EXPECT_EQ(Action::Output(9).ToString(), "output:9");
  EXPECT_EQ(Action::Drop().ToString(), "drop");
}

TEST(FlowFormatTest, FlowDumps) {
  Flow f;
  f.Set(Field::kInPort, 1);
  f.Set(Field::kEthType, kEthTypeIpv4);
  f.Set(Field::kIpv4Src, Ip(10, 0, 0, 1));
  f.Set(Field::kEthDst, 0x001122334455);
  f.Set(Field::kTpDst, 80);
  EXPECT_EQ(f.ToString(),
            "in_port=1,eth_type=0x800,eth_dst=00:11:22:33:44:55,"
            "ipv4_src=10.0.0.1,tp_dst=80");
  Flow m;
  m.Set(Field::kEthType, 0xffff);
  m.Set(Field::kIpv4Src, 0xff000000);
  m.Set(Field::kTpDst, 0xfff0);
  EXPECT_EQ((f & m).ToString(m),
            "eth_type=0x800,ipv4_src=10.0.0.0/8,tp_dst=80/0xfff0");
  Flow v6;
  v6.SetIpv6Dst(absl::MakeUint128(0x20010db800000000ULL, 1));
  EXPECT_EQ(v6.ToString(), "ipv6_dst=2001:db8::1");
  EXPECT_EQ(Flow().ToString(), "");
  // The masked dump is itself a valid native match.
  absl::StatusOr<Rule> back =
      ParseNativeRule(absl::StrCat((f & m).ToString(m), ",actions=drop"), 1);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->match.value, f & m);
  EXPECT_EQ(back->match.mask, m);
}

// Random rules over everything the format can express: each field absent,
// exact, prefix-masked or arbitrarily masked; shapes that have their own
// spelling (protocol keywords, dl_vlan, ip_dscp, ip_frag names, ICMP,
// +flag) drawn often; port ranges where no port mask is set.
Rule RandomRule(std::mt19937_64& rng) {
  auto pick = [&rng](uint64_t n) { return rng() % n; };
  Rule r;
  r.id = pick(4) == 0 ? pick(100) : rng();
  r.priority = static_cast<uint32_t>(pick(3) == 0 ? pick(10) : rng());
  r.cookie = pick(2) ? 0 : rng();
  Match& m = r.match;
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    const int bits = InfoOf(f).bits;
    const uint64_t all = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    switch (pick(6)) {
      case 0:
        m.SetExact(f, rng());
        break;
      case 1: {
        const int len = static_cast<int>(pick(bits + 1));
        m.SetMasked(f, rng(), len == 0 ? 0 : (all << (bits - len)) & all);
        break;
      }
      case 2:
        m.SetMasked(f, rng(), rng() & all);
        break;
      default:
        break;
    }
  }
  if (pick(2)) {
    static constexpr uint16_t kTypes[] = {kEthTypeIpv4, kEthTypeIpv6, kEthTypeArp};
    static constexpr uint8_t kProtos[] = {1, 6, 17, 58, 132, 47};
    m.SetExact(Field::kEthType, kTypes[pick(3)]);
    if (pick(3)) m.SetExact(Field::kNwProto, kProtos[pick(6)]);
    else m.SetMasked(Field::kNwProto, 0, 0);
  }
  if (pick(3) == 0) {  // ICMP type/code shape
    m.SetExact(Field::kTpSrc, pick(256));
    if (pick(2)) m.SetExact(Field::kTpDst, pick(256));
  }
  if (pick(3) == 0) {  // dl_vlan / dl_vlan_pcp
    // Mostly all-or-nothing parts (dl_vlan, dl_vlan_pcp), sometimes partial
    // ones that must fall back to vlan_tci=value/mask.
    const uint64_t partial = rng();
    const uint64_t vid_m = pick(4) == 0 ? partial & kVlanVidMask
                                        : (pick(2) ? kVlanVidMask : 0);
    const uint64_t pcp_m = pick(4) == 0 ? partial & 0xe000
                                        : (pick(2) ? 0xe000 : 0);
    m.SetMasked(Field::kVlan0Tci, rng() | kVlanPresent,
                vid_m | pcp_m | kVlanPresent);
  }
  if (pick(3) == 0) {  // ip_dscp / ip_ecn
    const uint64_t dscp_m = pick(4) == 0 ? rng() & 0xfc : (pick(2) ? 0xfc : 0);
    const uint64_t ecn_m = pick(4) == 0 ? rng() & 3 : (pick(2) ? 3 : 0);
    m.SetMasked(Field::kNwTos, rng(), dscp_m | ecn_m);
  }
  if (pick(3) == 0) {
    const FragName& fn = kFragNames[pick(std::size(kFragNames))];
    m.SetMasked(Field::kNwFrag, fn.value, fn.mask);
  }
  if (pick(3) == 0) m.SetMasked(Field::kTcpFlags, rng(), rng() & 0x1ff);
  for (Field f : {Field::kTpSrc, Field::kTpDst}) {
    if (m.mask.Get(f) == 0 && pick(2)) {
      uint16_t a = static_cast<uint16_t>(rng()), b = static_cast<uint16_t>(rng());
      if (pick(4) == 0) b = a;
      PortRange pr{std::min(a, b), std::max(a, b)};
      (f == Field::kTpSrc ? m.tp_src : m.tp_dst) = pr;
    }
  }
  r.action = pick(3) == 0 ? Action::Drop()
                          : Action::Output(static_cast<uint32_t>(pick(65536)));
  return r;
}

TEST(NativeTest, RoundTripProperty) {
  std::mt19937_64 rng(20240611);
  const int n = kSanitized ? 5000 : 20000;
  for (int i = 0; i < n; ++i) {
    const Rule r = RandomRule(rng);
    const std::string text = r.ToString();
    absl::StatusOr<Rule> back = ParseNativeRule(text, /*default_id=*/0);
    ASSERT_TRUE(back.ok()) << back.status() << "\n  text: " << text;
    ASSERT_EQ(*back, r) << "text: " << text << "\nback: " << back->ToString();
  }
}

// A packet's fields are a rule's match keys, each taken exactly: the value
// of the match ParseNativeRule reads from the same keys.
TEST(NativePacketTest, ReadsTheMatchKeysOfARuleExactly) {
  for (const char* text :
       {"in_port=3,udp,nw_src=10.1.2.3,nw_dst=1.2.3.4,tp_src=9,tp_dst=53",
        "in_port=3 udp nw_src=10.1.2.3/32 tp_dst=0x35/0xffff",  // blanks
                                                                // separate too
        "in_port=3,udp,nw_src=10.1.2.3/255.255.255.255,tp_dst=53",
        "ipv6,ipv6_src=2001:db8::1/128,dl_src=aa:bb:cc:dd:ee:ff/"
        "ff:ff:ff:ff:ff:ff",
        "in_port=3,dl_vlan=5,udp,nw_src=10.1.2.3",
        "ip,nw_tos=4,nw_src=10.1.2.3", "ip,nw_tos=16/0xfc",
        "ip,ip_dscp=1,ip_ecn=2", "ip,ip_frag=first", "tcp,tcp_flags=+syn-ack",
        "icmp,icmp_type=8,icmp_code=0", ",", ""}) {
    absl::StatusOr<Flow> f = ParseNativePacket(text);
    ASSERT_TRUE(f.ok()) << text << ": " << f.status();
    absl::StatusOr<Rule> r =
        ParseNativeRule(absl::StrCat(text, ",actions=drop"), 1);
    ASSERT_TRUE(r.ok()) << text;
    EXPECT_EQ(*f, r->match.value) << text;
  }
  EXPECT_EQ(ParseNativePacket("in_port=3,dl_vlan=5")->Get(Field::kVlan0Tci),
            0x1005u);
  EXPECT_EQ(*ParseNativePacket("udp # a comment"), *ParseNativePacket("udp"));
}

TEST(NativePacketTest, RefusesWhatAPacketCannotHaveNamingTheKey) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"udp,nw_src=10.0.0.0/8",
       "nw_src: a mask is not allowed in a trace (exact values only)"},
      {"udp,nw_src=10.1.2.3/31",
       "nw_src: a mask is not allowed in a trace (exact values only)"},
      {"udp,tp_dst=0x35/0xff",
       "tp_dst: a mask is not allowed in a trace (exact values only)"},
      {"ip,nw_tos=16/0xff",
       "nw_tos: a mask is not allowed in a trace (exact values only)"},
      {"udp,nw_src=1.2.3.4,tp_dst=10-20",
       "tp_dst: a range is not allowed in a trace (exact values only)"},
      {"udp,tp_src=1-2,tp_dst=10-20",
       "tp_src: a range is not allowed in a trace (exact values only)"},
      {"priority=9,udp,nw_src=10.1.2.3", "priority: not a packet field"},
      {"udp id=4", "id: not a packet field"},
      {"cookie=0x1,udp", "cookie: not a packet field"},
      {"in_port=1,udp,actions=drop",
       "actions: a trace takes match fields only (the rule's action is what it "
       "reports)"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Flow> f = ParseNativePacket(c.text);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(f.status().message(), c.message) << c.text;
  }
  // Syntax errors read as a rule's.
  EXPECT_EQ(
      ParseNativePacket("udp,nw_src=10.1.2").status().message(),
      ParseNativeRule("udp,nw_src=10.1.2,actions=drop", 1).status().message());
  EXPECT_THAT(std::string(ParseNativePacket("udp,bogus=1").status().message()),
              HasSubstr("column 5: bogus: unknown key"));
}

}  // namespace
}  // namespace flowclass
