#include "dataplane/rules/rule_format.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/classbench_data.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

const std::string kClassBenchDir = ClassBenchDir();

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

uint32_t Ip(int a, int b, int c, int d) {
  return (uint32_t(a) << 24) | (uint32_t(b) << 16) | (uint32_t(c) << 8) |
         uint32_t(d);
}

// ------------------------------------------------------------ ClassBench

std::vector<std::string> ClassBenchRuleFiles() {
  std::vector<std::string> files;
  for (const char* sub : {"hypersplit", "neurocuts"}) {
    for (const auto& e :
         std::filesystem::directory_iterator(kClassBenchDir + "/" + sub)) {
      const std::string p = e.path().string();
      if (p.ends_with("_trace")) continue;
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ClassBenchTest, EveryWorkloadFileParses) {
  const std::vector<std::string> files = ClassBenchRuleFiles();
  ASSERT_GE(files.size(), 30u) << "workload set incomplete in " << kClassBenchDir;
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const std::string text = ReadAll(path);
    size_t at_lines = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '@' && (i == 0 || text[i - 1] == '\n')) ++at_lines;
    }
    absl::StatusOr<std::vector<Rule>> rules =
        LoadRuleFile(path, RuleFormat::kAuto);
    ASSERT_TRUE(rules.ok()) << rules.status();
    ASSERT_EQ(rules->size(), at_lines);
    const size_t n = rules->size();
    for (size_t i = 0; i < n; ++i) {
      const Rule& r = (*rules)[i];
      ASSERT_EQ(r.id, i + 1);
      ASSERT_EQ(r.priority, n - i);
      ASSERT_EQ(r.cookie, 0u);
      ASSERT_EQ(r.action, Action::Output(1));
      ASSERT_EQ(r.match.mask.Get(Field::kEthType), 0xffffu);
      ASSERT_EQ(r.match.value.Get(Field::kEthType), kEthTypeIpv4);
      // Every value lies inside its mask, and ranges replace masks.
      ASSERT_EQ(r.match.value & r.match.mask, r.match.value);
      ASSERT_LE(r.match.tp_src.lo, r.match.tp_src.hi);
      ASSERT_LE(r.match.tp_dst.lo, r.match.tp_dst.hi);
      ASSERT_EQ(r.match.mask.Get(Field::kTpSrc), 0u);
      ASSERT_EQ(r.match.mask.Get(Field::kTpDst), 0u);
    }
  }
}

TEST(ClassBenchTest, SpaceFormSpotChecks) {
  absl::StatusOr<std::vector<Rule>> rules =
      LoadRuleFile(kClassBenchDir + "/hypersplit/acl1_100");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 99u);
  // @64.91.107.21/32 128.222.130.81/32 0 : 65535 1221 : 1221 0x06/0xFF
  const Rule& r1 = (*rules)[0];
  EXPECT_EQ(r1.id, 1u);
  EXPECT_EQ(r1.priority, 99u);
  EXPECT_EQ(r1.match.value.Get(Field::kIpv4Src), Ip(64, 91, 107, 21));
  EXPECT_EQ(r1.match.mask.Get(Field::kIpv4Src), 0xffffffffu);
  EXPECT_EQ(r1.match.value.Get(Field::kIpv4Dst), Ip(128, 222, 130, 81));
  EXPECT_TRUE(r1.match.tp_src.IsFull());
  EXPECT_EQ(r1.match.tp_dst, (PortRange{1221, 1221}));
  EXPECT_EQ(r1.match.value.Get(Field::kNwProto), 6u);
  EXPECT_EQ(r1.match.mask.Get(Field::kNwProto), 0xffu);
  EXPECT_EQ(r1.match.mask.Get(Field::kTcpFlags), 0u);
  EXPECT_EQ(r1.match.mask.Get(Field::kInPort), 0u);

  absl::StatusOr<std::vector<Rule>> fw =
      LoadRuleFile(kClassBenchDir + "/hypersplit/fw1_100");
  ASSERT_TRUE(fw.ok()) << fw.status();
  // line 87: @198.238.184.72/30 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00
  const Rule& r87 = (*fw)[86];
  EXPECT_EQ(r87.id, 87u);
  EXPECT_EQ(r87.priority, 93u - 87 + 1);
  EXPECT_EQ(r87.match.value.Get(Field::kIpv4Src), Ip(198, 238, 184, 72));
  EXPECT_EQ(r87.match.mask.Get(Field::kIpv4Src), 0xfffffffcu);
  EXPECT_EQ(r87.match.mask.Get(Field::kIpv4Dst), 0u);
  EXPECT_EQ(r87.match.mask.Get(Field::kNwProto), 0u);
  EXPECT_TRUE(r87.match.tp_src.IsFull());
  EXPECT_TRUE(r87.match.tp_dst.IsFull());

  absl::StatusOr<std::vector<Rule>> ipc =
      LoadRuleFile(kClassBenchDir + "/hypersplit/ipc1_100");
  ASSERT_TRUE(ipc.ok()) << ipc.status();
  // line 43: @0.0.0.0/0 93.208.53.90/32 25 : 25 0 : 65535 0x06/0xFF
  const Rule& r43 = (*ipc)[42];
  EXPECT_EQ(r43.match.mask.Get(Field::kIpv4Src), 0u);
  EXPECT_EQ(r43.match.tp_src, (PortRange{25, 25}));
  EXPECT_TRUE(r43.match.tp_dst.IsFull());
}

TEST(ClassBenchTest, TabFormWithTcpFlagsSpotChecks) {
  absl::StatusOr<std::vector<Rule>> rules =
      LoadRuleFile(kClassBenchDir + "/neurocuts/fw1_1k");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 857u);
  // line 6: @37.184.89.213/32 39.150.226.137/32 0 : 65535 110 : 110
  //         0x06/0xFF 0x0200/0x1200  -> flags masked to 12 bits: 0x200/0x200
  const Rule& r6 = (*rules)[5];
  EXPECT_EQ(r6.id, 6u);
  EXPECT_EQ(r6.priority, 857u - 6 + 1);
  EXPECT_EQ(r6.match.value.Get(Field::kIpv4Dst), Ip(39, 150, 226, 137));
  EXPECT_EQ(r6.match.tp_dst, (PortRange{110, 110}));
  EXPECT_EQ(r6.match.value.Get(Field::kTcpFlags), 0x200u);
  EXPECT_EQ(r6.match.mask.Get(Field::kTcpFlags), 0x200u);

  absl::StatusOr<std::vector<Rule>> acl =
      LoadRuleFile(kClassBenchDir + "/neurocuts/acl1_1k");
  ASSERT_TRUE(acl.ok()) << acl.status();
  // line 2: ... 0x1000/0x1000: only bit 12, outside our 12-bit field -> any.
  EXPECT_EQ((*acl)[1].match.mask.Get(Field::kTcpFlags), 0u);
  EXPECT_EQ((*acl)[1].match.value.Get(Field::kIpv4Src), Ip(176, 19, 181, 52));

  absl::StatusOr<std::vector<Rule>> acl2 =
      LoadRuleFile(kClassBenchDir + "/neurocuts/acl2_10k");
  ASSERT_TRUE(acl2.ok()) << acl2.status();
  // line 1355: @16.232.142.121/32 40.23.203.124/31 ... 0x01/0xFF 0x0303/0xffff
  const Rule& r = (*acl2)[1354];
  EXPECT_EQ(r.match.value.Get(Field::kIpv4Dst), Ip(40, 23, 203, 124));
  EXPECT_EQ(r.match.mask.Get(Field::kIpv4Dst), 0xfffffffeu);
  EXPECT_EQ(r.match.value.Get(Field::kNwProto), 1u);
  EXPECT_EQ(r.match.value.Get(Field::kTcpFlags), 0x303u);
  EXPECT_EQ(r.match.mask.Get(Field::kTcpFlags), 0xfffu);
}

TEST(ClassBenchTest, PrefixValueIsMaskedAndOptionsSpreadPorts) {
  const std::string text =
      "@10.1.2.3/8 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00\n"
      "\n"
      "# comment lines do not count as rules\n"
      "@10.1.2.3/32 1.2.3.4/24 1 : 2 3 : 4 0x11/0xFF\n"
      "@1.1.1.1/32 1.1.1.1/32 0 : 65535 0 : 65535 0x06/0xFF\n";
  absl::StatusOr<std::vector<Rule>> rules =
      ParseClassBench(text, ClassBenchOptions{.num_ports = 2});
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 3u);
  EXPECT_EQ((*rules)[0].match.value.Get(Field::kIpv4Src), Ip(10, 0, 0, 0));
  EXPECT_EQ((*rules)[0].match.mask.Get(Field::kIpv4Src), 0xff000000u);
  EXPECT_EQ((*rules)[1].id, 2u);
  EXPECT_EQ((*rules)[1].priority, 2u);
  EXPECT_EQ((*rules)[1].match.value.Get(Field::kIpv4Dst), Ip(1, 2, 3, 0));
  EXPECT_EQ((*rules)[1].match.tp_src, (PortRange{1, 2}));
  EXPECT_EQ((*rules)[1].match.tp_dst, (PortRange{3, 4}));
  EXPECT_EQ((*rules)[0].action, Action::Output(1));
  EXPECT_EQ((*rules)[1].action, Action::Output(2));
  EXPECT_EQ((*rules)[2].action, Action::Output(1));

  absl::StatusOr<std::vector<Rule>> dropped =
      ParseClassBench(text, ClassBenchOptions{.action = Action::Drop()});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ((*dropped)[2].action, Action::Drop());
}

// The traces shipped with the HyperSplit sets name, for every packet, the
// 1-based line of the first filter that matches it.  A linear scan over our
// parsed rules (highest priority wins) must find exactly that rule: this
// checks addresses, prefixes, ranges and protocol masks all at once.
TEST(ClassBenchTest, TracesAgreeWithLinearScanOfParsedRules) {
  for (const char* set :
       {"acl1_100", "fw1_100", "ipc1_100", "acl1_1K", "fw1_1K", "ipc1_1K"}) {
    SCOPED_TRACE(set);
    const std::string base = kClassBenchDir + "/hypersplit/" + set;
    absl::StatusOr<std::vector<Rule>> rules = LoadRuleFile(base);
    ASSERT_TRUE(rules.ok()) << rules.status();
    absl::StatusOr<std::vector<TraceEntry>> trace =
        LoadTraceFile(base + "_trace");
    ASSERT_TRUE(trace.ok()) << trace.status();
    ASSERT_GT(trace->size(), 900u);
    for (size_t t = 0; t < trace->size(); ++t) {
      const Flow key = (*trace)[t].key.ToFlow();
      const Rule* best = nullptr;
      for (const Rule& r : *rules) {
        if (r.match.Matches(key) && (best == nullptr || RuleBeats(r, *best))) {
          best = &r;
        }
      }
      ASSERT_NE(best, nullptr) << "trace line " << t + 1;
      ASSERT_EQ(best->id, (*trace)[t].expected) << "trace line " << t + 1;
    }
  }
}

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

TEST(NativeTest, ClassBenchSetsRoundTripThroughNativeFiles) {
  for (const char* set : {"/hypersplit/fw1_1K", "/neurocuts/acl2_1k"}) {
    absl::StatusOr<std::vector<Rule>> rules =
        LoadRuleFile(kClassBenchDir + set, RuleFormat::kClassBench,
                     ClassBenchOptions{.num_ports = 4});
    ASSERT_TRUE(rules.ok()) << rules.status();
    const std::string text =
        absl::StrCat("# converted from ", set, "\n", FormatNativeRules(*rules));
    absl::StatusOr<std::vector<Rule>> back = ParseNativeRules(text);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, *rules) << set;
  }
}

// ------------------------------------------------------------- Bad inputs

enum class Input { kClassBench, kNative, kTrace };

struct BadCase {
  Input input;
  const char* text;
  const char* message;
};

absl::Status ParseAny(Input in, std::string_view text) {
  switch (in) {
    case Input::kClassBench:
      return ParseClassBench(text).status();
    case Input::kNative:
      return ParseNativeRules(text).status();
    case Input::kTrace:
      return ParseTrace(text).status();
  }
  return absl::InternalError("bad input kind");
}

constexpr const char* kCbOk = "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF";

const BadCase kBadCases[] = {
    // ---- ClassBench
    {Input::kClassBench, "@1.2.3.4/33 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 10: ipv4_src: prefix length 33 exceeds 32"},
    {Input::kClassBench, "@1.2.3/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 2: ipv4_src: bad IPv4 address '1.2.3'"},
    {Input::kClassBench, "1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 1: ipv4_src: expected '@' at the start of a ClassBench rule"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.300.8/32 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 12: ipv4_dst: bad IPv4 address '5.6.300.8'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/x 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 20: ipv4_dst: bad prefix length 'x'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 100 : 50 80 : 80 0x06/0xFF",
     "line 1, column 23: tp_src: range 100 : 50 has lo > hi"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 70000 0x06/0xFF",
     "line 1, column 38: tp_dst: port 70000 does not fit 16 bits (max 65535)"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 65535 80 : 80 0x06/0xFF",
     "line 1, column 25: tp_src: expected ':' in port range 'lo : hi'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : x 80 : 80 0x06/0xFF",
     "line 1, column 27: tp_src: bad number 'x'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06",
     "line 1, column 41: nw_proto: expected hex value/mask like 0x06/0xFF, got "
     "'0x06'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x100/0xFF",
     "line 1, column 41: nw_proto: value '0x100' is 0x100 in hex, which does not fit 8 bits "
     "(max 0xff; this column is hex, e.g. 0x06/0xFF)"},
    // Without 0x the column is still hex: "255" is 0x255, and the message says so.
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 6/255",
     "line 1, column 43: nw_proto: mask '255' is 0x255 in hex, which does not fit 8 bits "
     "(max 0xff; this column is hex, e.g. 0x06/0xFF)"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80",
     "line 1, column 40: nw_proto: missing"},
    {Input::kClassBench,
     "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0200\t\n"
     "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t\n",
     "line 2, column 51: tcp_flags: missing; the first rule of this file has a "
     "TCP-flags field"},
    {Input::kClassBench,
     "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF\n"
     "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF 0x0000/0x0200\n",
     "line 2, column 51: tcp_flags: unexpected field '0x0000/0x0200'; the first "
     "rule of this file has no TCP-flags field"},
    {Input::kClassBench,
     "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x10000/0xFFFF\t",
     "line 1, column 51: tcp_flags: value '0x10000' is 0x10000 in hex, which does not fit 16 "
     "bits (max 0xffff; this column is hex, e.g. 0x06/0xFF)"},
    {Input::kClassBench,
     "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0/0x0\tjunk",
     "line 1, column 59: tcp_flags: unexpected text 'junk' after the last field"},
    {Input::kClassBench, "# header\n\n@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xZZ",
     "line 3, column 46: nw_proto: bad number '0xZZ'"},
    // ---- Native
    {Input::kNative, "priority=1,foo=3,actions=drop",
     "line 1, column 12: foo: unknown key"},
    {Input::kNative, "dl_src=00:00:00:00:00:01,eth_src=00:00:00:00:00:02,actions=drop",
     "line 1, column 26: eth_src: duplicate key (this field is already set on "
     "the line)"},
    {Input::kNative, "tcp,nw_proto=17,actions=drop",
     "line 1, column 5: nw_proto: duplicate key (this field is already set on "
     "the line)"},
    {Input::kNative, "ip,nw_src=10.0.0.0/33,actions=drop",
     "line 1, column 20: nw_src: prefix length 33 exceeds 32"},
    {Input::kNative, "ip,nw_dst=10.0.0.256,actions=drop",
     "line 1, column 11: nw_dst: bad IPv4 address '10.0.0.256'"},
    {Input::kNative, "ipv6,ipv6_src=1:::2,actions=drop",
     "line 1, column 15: ipv6_src: bad IPv6 address '1:::2'"},
    {Input::kNative, "ipv6,ipv6_dst=::/129,actions=drop",
     "line 1, column 18: ipv6_dst: prefix length 129 exceeds 128"},
    {Input::kNative, "udp,tp_dst=2000-1000,actions=drop",
     "line 1, column 12: tp_dst: range 2000-1000 has lo > hi"},
    {Input::kNative, "nw_proto=256,actions=drop",
     "line 1, column 10: nw_proto: value 256 does not fit 8 bits (max 255)"},
    {Input::kNative, "tp_src=1/0x10000,actions=drop",
     "line 1, column 10: tp_src: mask 0x10000 does not fit 16 bits (max 65535)"},
    {Input::kNative, "dl_vlan=4096,actions=drop",
     "line 1, column 9: dl_vlan: value 4096 does not fit 12 bits (max 4095)"},
    {Input::kNative, "priority=4294967296,actions=drop",
     "line 1, column 10: priority: value 4294967296 does not fit 32 bits (max "
     "4294967295)"},
    {Input::kNative, "priority=1,tcp",
     "line 1, column 15: actions: missing (every rule needs actions=output:N or "
     "actions=drop as its last key)"},
    {Input::kNative, "tcp,actions=normal",
     "line 1, column 13: actions: unknown action 'normal'"},
    {Input::kNative, "tcp,actions=output:70000",
     "line 1, column 20: actions: output port 70000 exceeds 65535"},
    {Input::kNative, "tcp,actions=output:1,output:2",
     "line 1, column 21: actions: only one action is supported"},
    {Input::kNative, "tcp,actions=drop,priority=5",
     "line 1, column 18: actions: must be the last key (everything after "
     "actions= is the action list)"},
    {Input::kNative, "tcp,actions=",
     "line 1, column 13: actions: missing action"},
    {Input::kNative, "tcp,tcp_flags=+syn-foo,actions=drop",
     "line 1, column 20: tcp_flags: unknown TCP flag 'foo'"},
    {Input::kNative, "ip,ip_frag=maybe,actions=drop",
     "line 1, column 12: ip_frag: unknown value 'maybe' (no, yes, first, later, "
     "not_later)"},
    {Input::kNative, "dl_dst=00:11:22:33:44,actions=drop",
     "line 1, column 8: dl_dst: bad Ethernet address '00:11:22:33:44'"},
    {Input::kNative, "ip,nw_tos=5,actions=drop",
     "line 1, column 11: nw_tos: value 5 has ECN bits set (use ip_ecn, or "
     "nw_tos=value/mask)"},
    {Input::kNative, "priority,actions=drop",
     "line 1, column 1: priority: missing value (priority=...)"},
    {Input::kNative, "tcp=1,actions=drop",
     "line 1, column 1: tcp: protocol keyword takes no value"},
    {Input::kNative, "cookie=0xzz,actions=drop",
     "line 1, column 8: cookie: bad number '0xzz'"},
    // One past 2^64 - 1, decimal and hex: overflow, not a wrapped value.
    {Input::kNative, "id=18446744073709551616,actions=drop",
     "line 1, column 4: id: bad number '18446744073709551616'"},
    {Input::kNative, "cookie=0x10000000000000000,actions=drop",
     "line 1, column 8: cookie: bad number '0x10000000000000000'"},
    {Input::kNative, "icmp,icmp_type=300,actions=drop",
     "line 1, column 16: icmp_type: value 300 does not fit 8 bits (max 255)"},
    {Input::kNative, "# ok\ntcp,actions=drop\n\n  udp,in_port=x,actions=drop",
     "line 4, column 15: in_port: bad number 'x'"},
    // ---- Traces
    {Input::kTrace, "1 2 3 4 5", "line 1, column 10: expected: missing"},
    {Input::kTrace, "1 2 70000 4 5 6",
     "line 1, column 5: tp_src: value 70000 does not fit 16 bits (max 65535)"},
    {Input::kTrace, "1\tx 3 4 5 6", "line 1, column 3: ipv4_dst: bad number 'x'"},
    {Input::kTrace, "4294967296 2 3 4 5 6",
     "line 1, column 1: ipv4_src: value 4294967296 does not fit 32 bits (max "
     "4294967295)"},
    {Input::kTrace, "1 2 3 4 5 6\n1 2 3 4 256 6",
     "line 2, column 9: nw_proto: value 256 does not fit 8 bits (max 255)"},
    {Input::kTrace, "1 2 3 -4 5 6", "line 1, column 7: tp_dst: bad number '-4'"},
};

TEST(BadInputTest, EachBadLineNamesLineColumnFieldAndProblem) {
  ASSERT_GE(std::size(kBadCases), 25u);
  for (const BadCase& c : kBadCases) {
    SCOPED_TRACE(c.text);
    absl::Status s = ParseAny(c.input, c.text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(s.message()), c.message);
  }
  // Sanity: the good ClassBench line the cases are derived from parses.
  EXPECT_TRUE(ParseClassBench(kCbOk).ok());
}

// Mutated valid lines (a poor man's fuzzer, run under ASan in CI): every
// parser either accepts the line or reports "line 1, column C: " with C
// inside the line or just past its end, and never crashes.
TEST(BadInputTest, MutatedLinesFailCleanly) {
  const std::string seeds[] = {
      kCbOk,
      "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0200/0x1200\t",
      "id=3,priority=10,cookie=0x1,udp,in_port=1,nw_src=10.0.0.0/8,"
      "tp_dst=1000-2000,tcp_flags=+syn-ack,actions=output:2",
      "ipv6,ipv6_src=2001:db8::1/64,dl_vlan=5,ip_frag=later,nw_tos=4/0xff,"
      "dl_dst=00:11:22:33:44:55/ff:ff:ff:00:00:00,actions=drop",
      "1079733050 4225952233 0 65535 255 82",
  };
  const char kAlphabet[] = "0123456789abcdefx:./-+=, \t@#";
  std::mt19937_64 rng(7);
  const int n = kSanitized ? 3000 : 20000;
  int rejected = 0;
  for (int i = 0; i < n; ++i) {
    std::string line = seeds[rng() % std::size(seeds)];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
      const size_t pos = rng() % (line.size() + 1);
      const char c = kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
      switch (rng() % 3) {
        case 0:
          if (pos < line.size()) line[pos] = c;
          break;
        case 1:
          line.insert(pos, 1, c);
          break;
        default:
          if (pos < line.size()) line.erase(pos, 1 + rng() % 4);
          break;
      }
    }
    for (Input in : {Input::kClassBench, Input::kNative, Input::kTrace}) {
      const absl::Status s = ParseAny(in, line);
      if (s.ok()) continue;
      ++rejected;
      const std::string msg(s.message());
      ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << msg;
      size_t col = 0;
      ASSERT_EQ(std::sscanf(msg.c_str(), "line 1, column %zu: ", &col), 1)
          << line << " -> " << msg;
      ASSERT_GE(col, 1u) << msg;
      ASSERT_LE(col, line.size() + 1) << line << " -> " << msg;
    }
  }
  EXPECT_GT(rejected, n);  // most mutants are rejected by 2 of 3 parsers
}

TEST(BadInputTest, SingleLineApiHasNoLinePrefix) {
  absl::StatusOr<Rule> r = ParseNativeRule("ip,nw_src=1.2.3.4/40,actions=drop", 1);
  EXPECT_EQ(std::string(r.status().message()),
            "column 19: nw_src: prefix length 40 exceeds 32");
}

// ---------------------------------------------------------------- Traces

TEST(TraceTest, ParsesColumnsAndIgnoresExtras) {
  absl::StatusOr<std::vector<TraceEntry>> t = ParseTrace(
      "1079733050 4225952233 0 65535 255 82\n"
      "\n"
      "167772161\t167772162\t1234\t80\t6\t7\textra columns 9 9\r\n");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_TRUE((*t)[0].key.SameFlow(
      MakeFiveTupleKey(1079733050u, 4225952233u, 0, 65535, 255)));
  EXPECT_EQ((*t)[0].expected, 82u);
  EXPECT_EQ((*t)[1].key.Get(Field::kIpv4Src), Ip(10, 0, 0, 1));
  EXPECT_EQ((*t)[1].key.Get(Field::kTpSrc), 1234u);
  EXPECT_EQ((*t)[1].key.Get(Field::kNwProto), 6u);
  EXPECT_EQ((*t)[1].key.Get(Field::kEthType), kEthTypeIpv4);
  EXPECT_EQ((*t)[1].key.Get(Field::kInPort), 0u);
  EXPECT_EQ((*t)[1].key.hash, MakeFiveTupleKey(Ip(10, 0, 0, 1), Ip(10, 0, 0, 2),
                                                1234, 80, 6).hash);
  EXPECT_EQ((*t)[1].expected, 7u);
}

// ------------------------------------------------------------------ Files

class FileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path =
        (std::filesystem::temp_directory_path() /
         absl::StrCat("rule_format_test_", ::getpid(), "_", name))
            .string();
    std::ofstream(path, std::ios::binary) << text;
    paths_.push_back(path);
    return path;
  }
  ~FileTest() override {
    for (const std::string& p : paths_) std::filesystem::remove(p);
  }
  std::vector<std::string> paths_;
};

TEST_F(FileTest, AutoDetectsFormatAndPrefixesPathToErrors) {
  const std::string cb = Write("cb", std::string("# c\n\n") + kCbOk + "\n");
  absl::StatusOr<std::vector<Rule>> r = LoadRuleFile(cb);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].match.value.Get(Field::kIpv4Dst), Ip(5, 6, 7, 8));
  // Forcing the other format fails on the same text.
  EXPECT_FALSE(LoadRuleFile(cb, RuleFormat::kNative).ok());

  const std::string nat = Write("native", "# c\ntcp,actions=output:3\n");
  std::vector<size_t> lines;
  r = LoadRuleFile(nat, RuleFormat::kAuto, {}, &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_THAT(lines, ::testing::ElementsAre(2));
  r = LoadRuleFile(cb, RuleFormat::kAuto, {}, &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(lines, ::testing::ElementsAre(3));  // after a comment and a blank line
  r = LoadRuleFile(nat);
  EXPECT_EQ((*r)[0].id, 2u);
  EXPECT_EQ((*r)[0].action, Action::Output(3));

  // A UTF-8 byte-order mark is not part of the first rule, and does not hide
  // a ClassBench file from the detection; `used` says what the file was read as.
  RuleFormat used = RuleFormat::kAuto;
  r = LoadRuleFile(Write("bom_native", "\xEF\xBB\xBFid=7,udp,actions=drop\n"), RuleFormat::kAuto,
                   {}, nullptr, &used);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].id, 7u);
  EXPECT_EQ(used, RuleFormat::kNative);
  r = LoadRuleFile(Write("bom_cb", std::string("\xEF\xBB\xBF") + kCbOk + "\n"),
                   RuleFormat::kAuto, {}, nullptr, &used);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(used, RuleFormat::kClassBench);
  absl::StatusOr<std::vector<TraceEntry>> bom_trace =
      LoadTraceFile(Write("bom_trace", "\xEF\xBB\xBF" "1 2 3 4 5 1\n"));
  ASSERT_TRUE(bom_trace.ok()) << bom_trace.status();
  EXPECT_EQ(bom_trace->size(), 1u);

  const std::string bad = Write("bad", "tcp,actions=output:3\nudp,bogus=1,actions=drop\n");
  r = LoadRuleFile(bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(r.status().message()),
            absl::StrCat(bad, ": line 2, column 5: bogus: unknown key"));

  const std::string bad_trace = Write("trace", "1 2 3 4 5 x\n");
  absl::StatusOr<std::vector<TraceEntry>> t = LoadTraceFile(bad_trace);
  EXPECT_EQ(std::string(t.status().message()),
            absl::StrCat(bad_trace, ": line 1, column 11: expected: bad number 'x'"));

  r = LoadRuleFile("/nonexistent/rules.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/nonexistent/rules.txt"));
  EXPECT_EQ(LoadTraceFile("/nonexistent/t").status().code(),
            absl::StatusCode::kNotFound);

  const std::string empty = Write("empty", "");
  r = LoadRuleFile(empty);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());

  // A directory opens but cannot be read: an error, never an empty rule set
  // (or an empty trace that a replay would pass).
  const std::string dir = std::filesystem::temp_directory_path().string();
  r = LoadRuleFile(dir);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(r.status().message()), dir + ": cannot read: Is a directory");
  EXPECT_EQ(LoadTraceFile(dir).status().code(), absl::StatusCode::kFailedPrecondition);
  // Not only regular files: a pipe (`add-rules <(generate)`) is read to its end.
  const std::string fifo = dir + "/" + absl::StrCat("rule_format_test_", ::getpid(), "_fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  paths_.push_back(fifo);
  std::thread writer([&] {
    std::ofstream(fifo) << "tcp,actions=output:3\nudp,actions=drop\n";
  });
  r = LoadRuleFile(fifo);
  writer.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 2u);
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
