// Round trips Rule -> proto -> Rule over random rule sets, and the error
// messages of every malformed input the structured form can carry.
#include "proto/rule_convert.h"

#include <arpa/inet.h>

#include <bit>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dataplane/rules/rule_error.h"
#include "dataplane/rules/rule_format.h"
#include "tests/common/random_rules.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

// The field of a conversion error, in the proto's names, from its typed
// payload ("" without one).  The conversion knows no operation index.
std::string FieldOf(const absl::Status& s) {
  const std::optional<RuleOpError> e = GetRuleOpError(s);
  if (!e.has_value()) return "";
  EXPECT_EQ(e->kind, RuleErrorKind::kInvalid) << s;
  EXPECT_FALSE(e->has_op) << s;
  return std::string(ProtoName(e->field));
}

TEST(RuleConvertTest, RandomRulesRoundTrip) {
  RandomRuleGen gen(7);
  int structured = 0;
  for (const Rule& r : gen.NextRules(kRandomRuleCount)) {
    v1::Rule p;
    RuleToProto(r, &p);
    structured += p.text().empty();
    // The wire form too.
    v1::Rule wire;
    ASSERT_TRUE(wire.ParseFromString(p.SerializeAsString()));
    Rule back;
    ASSERT_TRUE(RuleFromProto(wire, &back).ok()) << r.ToString() << "\n" << p.DebugString();
    ASSERT_EQ(back, r) << r.ToString() << "\n" << p.DebugString() << "\n" << back.ToString();
  }
  // Random rules use arbitrary masks on in_port/eth_type rarely: most must
  // travel in the structured form.
  EXPECT_GT(structured, kRandomRuleCount * 8 / 10);
}

TEST(RuleConvertTest, StructuredFieldsMapToFlowFields) {
  v1::Rule p;
  p.set_id(9);
  p.set_priority(100);
  p.set_cookie(0xabc);
  v1::Match* m = p.mutable_match();
  m->set_in_port(3);
  m->set_ipv4_src("10.1.0.0/16");
  m->set_ipv4_dst("192.168.0.1/255.255.0.255");
  m->mutable_ip_proto()->set_value(17);
  m->mutable_tp_dst()->mutable_range()->set_lo(1000);
  m->mutable_tp_dst()->mutable_range()->set_hi(2000);
  m->mutable_tp_src()->set_exact(53);
  m->mutable_vlan()->set_vid(100);
  m->set_ip_frag(v1::FRAG_NO);
  p.mutable_action()->set_output_port(2);
  Rule r;
  ASSERT_TRUE(RuleFromProto(p, &r).ok());
  EXPECT_EQ(r.id, 9u);
  EXPECT_EQ(r.priority, 100u);
  EXPECT_EQ(r.cookie, 0xabcu);
  EXPECT_EQ(r.match.value.Get(Field::kEthType), kEthTypeIpv4);  // implied
  EXPECT_EQ(r.match.mask.Get(Field::kIpv4Src), 0xffff0000u);
  EXPECT_EQ(r.match.value.Get(Field::kIpv4Src), 0x0a010000u);
  EXPECT_EQ(r.match.mask.Get(Field::kIpv4Dst), 0xffff00ffu);
  EXPECT_EQ(r.match.tp_dst, (PortRange{1000, 2000}));
  EXPECT_EQ(r.match.value.Get(Field::kTpSrc), 53u);
  EXPECT_EQ(r.match.value.Get(Field::kVlan0Tci), kVlanPresent | 100u);
  EXPECT_EQ(r.match.mask.Get(Field::kNwFrag), kFragAny);
  EXPECT_EQ(r.action, Action::Output(2));
  EXPECT_TRUE(ValidateRule(r).ok()) << ValidateRule(r);
}

TEST(RuleConvertTest, TextFormFillsInFromFields) {
  v1::Rule p;
  p.set_id(4);
  p.set_cookie(7);
  p.set_text("priority=5,udp,nw_src=10.0.0.0/8,tp_dst=1000-2000,actions=output:2");
  Rule r;
  ASSERT_TRUE(RuleFromProto(p, &r).ok());
  EXPECT_EQ(r.id, 4u);
  EXPECT_EQ(r.priority, 5u);
  EXPECT_EQ(r.cookie, 7u);
  EXPECT_EQ(r.match.tp_dst, (PortRange{1000, 2000}));
  // A client that always fills match and action leaves them empty: fine.
  p.mutable_match();
  p.mutable_action();
  Rule e;
  ASSERT_TRUE(RuleFromProto(p, &e).ok());
  EXPECT_EQ(e, r);
}

struct BadCase {
  const char* name;
  void (*fill)(v1::Rule*);
  const char* field;
  const char* text;
};

TEST(RuleConvertTest, MalformedInputNamesTheField) {
  const BadCase cases[] = {
      {"bad ipv4", [](v1::Rule* p) { p->mutable_match()->set_ipv4_src("10.0.0.300"); },
       "ipv4_src", "bad IPv4 address '10.0.0.300'"},
      {"ipv4 prefix 33", [](v1::Rule* p) { p->mutable_match()->set_ipv4_dst("10.0.0.0/33"); },
       "ipv4_dst", "prefix length 33 exceeds 32"},
      {"bad ipv6", [](v1::Rule* p) { p->mutable_match()->set_ipv6_src("2001:db8::g"); },
       "ipv6_src", "bad IPv6 address '2001:db8::g'"},
      {"bad mac", [](v1::Rule* p) { p->mutable_match()->set_eth_dst("aa:bb:cc"); },
       "eth_dst", "bad Ethernet address 'aa:bb:cc'"},
      {"eth_type wide", [](v1::Rule* p) { p->mutable_match()->set_eth_type(0x10000); },
       "eth_type", "16 bits"},
      {"proto wide", [](v1::Rule* p) { p->mutable_match()->mutable_ip_proto()->set_value(300); },
       "ip_proto", "8 bits"},
      {"unknown frag", [](v1::Rule* p) { p->mutable_match()->set_ip_frag(static_cast<v1::Frag>(42)); },
       "ip_frag", "unknown value 42"},
      {"frag unspecified",
       [](v1::Rule* p) { p->mutable_match()->set_ip_frag(v1::FRAG_UNSPECIFIED); }, "ip_frag",
       "FRAG_UNSPECIFIED"},
      {"empty port", [](v1::Rule* p) { p->mutable_match()->mutable_tp_dst(); }, "tp_dst",
       "empty PortMatch"},
      {"port range reversed",
       [](v1::Rule* p) {
         p->mutable_match()->mutable_tp_src()->mutable_range()->set_lo(9);
         p->mutable_match()->mutable_tp_src()->mutable_range()->set_hi(3);
       },
       "tp_src", "lo > hi"},
      {"vid wide", [](v1::Rule* p) { p->mutable_match()->mutable_vlan()->set_vid(5000); },
       "vlan", "exceeds 4095"},
      {"no action", [](v1::Rule* p) { p->clear_action(); }, "action", "required"},
      {"empty action", [](v1::Rule* p) { p->mutable_action()->Clear(); }, "action", "not set"},
      {"text and match",
       [](v1::Rule* p) { p->set_text("ip,actions=drop"); }, "text", "either text"},
  };
  for (const BadCase& c : cases) {
    v1::Rule p;
    p.set_id(1);
    p.mutable_action()->mutable_drop();
    p.mutable_match()->set_in_port(1);
    c.fill(&p);
    Rule r;
    const absl::Status s = RuleFromProto(p, &r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(FieldOf(s), c.field) << c.name << ": " << s;
    // The message names the same field.
    EXPECT_THAT(std::string(s.message()), ::testing::StartsWith(absl::StrCat(c.field, ": ")))
        << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.text)) << c.name;
  }
}

TEST(RuleConvertTest, OpsRoundTripAndEmptyOpIsRejected) {
  RuleOp in = RuleOp::DeleteByCookie(77);
  v1::RuleOp p;
  RuleOpToProto(in, &p);
  RuleOp out;
  ASSERT_TRUE(RuleOpFromProto(p, &out).ok());
  EXPECT_EQ(out.kind, RuleOp::Kind::kDeleteByCookie);
  EXPECT_EQ(out.cookie, 77u);
  const absl::Status s = RuleOpFromProto(v1::RuleOp(), &out);
  EXPECT_EQ(FieldOf(s), "op");
  p.Clear();
  p.set_delete_id(0);
  EXPECT_EQ(FieldOf(RuleOpFromProto(p, &out)), "delete_id");
}

TEST(RuleConvertTest, AddressFormatting) {
  EXPECT_EQ(FormatIpv4Masked(0x0a000000, 0xff000000), "10.0.0.0/8");
  EXPECT_EQ(FormatIpv4Masked(0x0a000001, 0xffffffff), "10.0.0.1");
  EXPECT_EQ(FormatIpv4Masked(0x0a000001, 0xff00ff00), "10.0.0.1/255.0.255.0");
  EXPECT_EQ(FormatIpv4Masked(0, 0), "0.0.0.0/0");
  EXPECT_EQ(FormatMacMasked(0x001122334455, 0xffffffffffff), "00:11:22:33:44:55");
  absl::uint128 v, m;
  ASSERT_TRUE(ParseIpv6Masked("2001:db8::/32", &v, &m).ok());
  EXPECT_EQ(FormatIpv6Masked(v, m), "2001:db8::/32");
  ASSERT_TRUE(ParseIpv6Masked("2001:db8::1/ffff::ff", &v, &m).ok());
  EXPECT_EQ(FormatIpv6Masked(v, m), "2001::1/ffff::ff");  // bits outside the mask cleared
}

// The address parser works in place; it must accept exactly what
// inet_pton(AF_INET) accepts, with the same value.
TEST(RuleConvertTest, Ipv4ParserAgreesWithInetPton) {
  std::vector<std::string> cases = {
      "1.2.3.4", "0.0.0.0", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3.04",
      "1.2.3.0", "1.2.3", "1.2.3.4.", ".1.2.3.4", "1..2.3", "1.2.3.4.5", "", "a.b.c.d",
      "1.2.3.4 ", " 1.2.3.4", "1.2.3.-4", "+1.2.3.4", "1.2.3.4a", "999.1.1.1",
      "1.2.3.1000", "00.0.0.0", "0.0.0.00", "10.20.30.40"};
  // Random near-addresses: 3 to 5 groups of 0 to 4 digits (leading zeros,
  // values over 255 and empty groups included), one in eight with a stray
  // character somewhere.
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string t;
    const int groups = 3 + static_cast<int>(rng() % 3);
    for (int g = 0; g < groups; ++g) {
      if (g) t += '.';
      const int digits = static_cast<int>(rng() % 5);
      for (int d = 0; d < digits; ++d) t += static_cast<char>('0' + rng() % (d ? 10 : 3));
    }
    if (rng() % 8 == 0) t.insert(rng() % (t.size() + 1), 1, " a-+:"[rng() % 5]);
    cases.push_back(t);
  }
  int accepted = 0;
  for (const std::string& addr : cases) {
    in_addr a{};
    const bool want = inet_pton(AF_INET, addr.c_str(), &a) == 1;
    uint32_t v = 0, m = 0;
    const absl::Status got = ParseIpv4Masked(addr, &v, &m);
    ASSERT_EQ(got.ok(), want) << "\"" << addr << "\": " << got;
    if (!want) continue;
    ++accepted;
    EXPECT_EQ(v, ntohl(a.s_addr)) << addr;
    EXPECT_EQ(m, 0xffffffffu) << addr;
    // As a mask after a prefix, the same grammar.
    const absl::Status with_mask = ParseIpv4Masked("10.0.0.0/" + addr, &v, &m);
    ASSERT_TRUE(with_mask.ok()) << addr << ": " << with_mask;
    EXPECT_EQ(m, ntohl(a.s_addr)) << addr;
  }
  EXPECT_GT(accepted, 100);  // the random strings include valid addresses
}

// The hand-written formatter against inet_ntop, and back through the parser,
// for every prefix length and for random non-prefix masks.
TEST(RuleConvertTest, Ipv4FormatterAgreesWithInetNtopAndRoundTrips) {
  auto ntop = [](uint32_t a) {
    in_addr x{htonl(a)};
    char buf[INET_ADDRSTRLEN];
    return std::string(inet_ntop(AF_INET, &x, buf, sizeof(buf)));
  };
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    // Octets drawn to cover one, two and three digits.
    uint32_t value = 0;
    for (int o = 0; o < 4; ++o) value = value << 8 | (rng() % 3 == 0 ? rng() % 10 : rng() % 256);
    const int len = i % 34;  // 0..32: a prefix; 33: a mask that is none
    uint32_t mask = len == 0 ? 0u : len >= 32 ? 0xffffffffu : ~uint32_t{0} << (32 - len);
    std::string want = ntop(value);
    // StrAppend, not `want += "/" + ...`: at -O3 GCC 12 warns -Wrestrict
    // inside std::string's operator+ of a one-character literal, a known
    // false positive (GCC bug 105329).
    if (len == 33) {
      do mask = static_cast<uint32_t>(rng()); while (std::countl_one(mask) + std::countr_zero(mask) >= 32);
      absl::StrAppend(&want, "/", ntop(mask));
    } else if (len < 32) {
      absl::StrAppend(&want, "/", len);
    }
    ASSERT_EQ(FormatIpv4Masked(value, mask), want);
    uint32_t v = 0, m = 0;
    ASSERT_TRUE(ParseIpv4Masked(want, &v, &m).ok()) << want;
    EXPECT_EQ(v, value & mask) << want;  // bits outside the mask cleared
    EXPECT_EQ(m, mask) << want;
  }
  uint32_t v = 0, m = 0;
  EXPECT_THAT(ParseIpv4Masked("10.0.0.0/33", &v, &m).message(),
              ::testing::HasSubstr("prefix length 33 exceeds 32"));
  EXPECT_THAT(ParseIpv4Masked("10.0.0.0/", &v, &m).message(),
              ::testing::HasSubstr("bad prefix length ''"));
  EXPECT_THAT(ParseIpv4Masked("10.0.0.0/1a", &v, &m).message(),
              ::testing::HasSubstr("bad prefix length '1a'"));
  ASSERT_TRUE(ParseIpv4Masked("10.0.0.0/08", &v, &m).ok());  // a length may have leading zeros
  EXPECT_EQ(m, 0xff000000u);
}

}  // namespace
}  // namespace flowclass
