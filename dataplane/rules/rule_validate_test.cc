// Tests for ValidateRule: every accepted shape and every rejection, with the
// message checked for the field name and the numbers.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_error.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A valid IPv4 rule: eth_type=0x0800, ipv4_src=10.0.0.0/8, output:1.
Rule BaseV4() { return Ipv4SrcRule(1, 10, 0x0a000000, 8, Action::Output(1)); }

Rule BaseL2() {
  Rule r;
  r.id = 2;
  r.match.SetExact(Field::kEthDst, 0x001122334455);
  return r;
}

struct Case {
  std::string name;
  std::function<Rule()> make;
  std::string want_prefix;  // empty: must be OK
  std::string want_substr = "";
};

std::vector<Case> Cases() {
  return {
      {"base_v4", [] { return BaseV4(); }, ""},
      {"base_l2", [] { return BaseL2(); }, ""},
      {"match_all",
       [] {
         Rule r;
         r.id = 7;
         return r;
       },
       ""},
      {"port_range_without_nw_proto",
       [] {
         Rule r = BaseV4();
         r.match.tp_src = {1024, 65535};
         r.match.tp_dst = {80, 80};
         return r;
       },
       ""},
      {"port_mask_without_nw_proto",
       [] {
         Rule r = BaseV4();
         r.match.SetMasked(Field::kTpDst, 0x1000, 0xf000);
         return r;
       },
       ""},
      {"non_contiguous_ip_mask",
       [] {
         Rule r = BaseV4();
         r.match.SetMasked(Field::kIpv4Dst, 0x00ff0001, 0x00ff00ff);
         return r;
       },
       ""},
      {"full_range_with_mask_is_fine",
       [] {
         Rule r = BaseV4();
         r.match.tp_src = {0, 65535};
         r.match.SetExact(Field::kTpSrc, 53);
         return r;
       },
       ""},
      {"ipv6",
       [] {
         Rule r;
         r.id = 3;
         r.match.SetExact(Field::kEthType, kEthTypeIpv6);
         r.match.SetMasked(Field::kIpv6SrcHi, 0x20010db800000000,
                           0xffffffff00000000);
         r.match.SetExact(Field::kNwProto, kIpProtoIcmpv6);
         r.match.SetExact(Field::kTpSrc, 128);
         return r;
       },
       ""},
      {"vlan_no_tag",
       [] {
         Rule r = BaseL2();
         r.match.SetMasked(Field::kVlan0Tci, 0, kVlanPresent);
         return r;
       },
       ""},
      {"vlan_vid",
       [] {
         Rule r = BaseL2();
         r.match.SetMasked(Field::kVlan0Tci, kVlanPresent | 10, 0x1fff);
         return r;
       },
       ""},
      {"vlan_tci_zero_is_untagged",  // OVS's vlan_tci=0: no tag, so no vid/pcp
       [] {
         Rule r = BaseL2();
         r.match.SetMasked(Field::kVlan0Tci, 0, 0xffff);
         return r;
       },
       ""},
      {"output_max_port",
       [] {
         Rule r = BaseV4();
         r.action = Action::Output(kMaxPortNumber);
         return r;
       },
       ""},
      {"drop",
       [] {
         Rule r = BaseV4();
         r.action = Action::Drop();
         return r;
       },
       ""},
      // Rejections.
      {"id_zero",
       [] {
         Rule r = BaseV4();
         r.id = 0;
         return r;
       },
       "id: ", "non-zero"},
      {"value_outside_mask",
       [] {
         Rule r = BaseV4();
         r.match.value.Set(Field::kIpv4Src, 0x0a000001);
         return r;
       },
       "ipv4_src: value 0x0a000001 has bits outside mask 0xff000000"},
      {"value_outside_mask_tp_dst",
       [] {
         Rule r = BaseV4();
         r.match.SetMasked(Field::kTpDst, 0, 0xff00);
         r.match.value.Set(Field::kTpDst, 0x0101);
         return r;
       },
       "tp_dst: value 0x0101 has bits outside mask 0xff00"},
      {"value_outside_mask_ipv6",  // one address, though two 64-bit fields
       [] {
         Rule r;
         r.id = 3;
         r.match.SetExact(Field::kEthType, 0x86dd);
         r.match.value.SetIpv6Src(absl::MakeUint128(0x20010db800000000ULL, 1));
         r.match.mask.SetIpv6Src(absl::MakeUint128(0xffffffff00000000ULL, 0));
         return r;
       },
       "ipv6_src: value 2001:db8::1 has bits outside mask ffff:ffff::"},
      {"stray_bits",
       [] {
         Rule r = BaseV4();
         r.match.mask.w[kWordMeta] |= uint64_t{1} << 63;
         return r;
       },
       "match: word 0 has bits outside every field"},
      {"range_lo_gt_hi",
       [] {
         Rule r = BaseV4();
         r.match.tp_src = {100, 50};
         return r;
       },
       "tp_src: range lo 100 is greater than hi 50"},
      {"range_with_mask",
       [] {
         Rule r = BaseV4();
         r.match.tp_dst = {10, 20};
         r.match.SetExact(Field::kTpDst, 15);
         return r;
       },
       "tp_dst: range 10-20 combined with mask 0xffff"},
      {"ipv4_without_eth_type",
       [] {
         Rule r;
         r.id = 4;
         r.match.SetMasked(Field::kIpv4Dst, 0xc0a80000, 0xffff0000);
         return r;
       },
       "ipv4_dst: requires eth_type=0x0800", "eth_type is not matched"},
      {"ipv4_with_ipv6_eth_type",
       [] {
         Rule r = BaseV4();
         r.match.SetExact(Field::kEthType, kEthTypeIpv6);
         return r;
       },
       "ipv4_src: requires eth_type=0x0800", "eth_type is 0x86dd"},
      {"ipv4_with_masked_eth_type",
       [] {
         Rule r = BaseV4();
         r.match.SetMasked(Field::kEthType, 0x0800, 0xff00);
         return r;
       },
       "ipv4_src: requires eth_type=0x0800", "not exact"},
      {"ipv6_with_ipv4_eth_type",
       [] {
         Rule r = BaseV4();
         r.match.SetExact(Field::kIpv6DstLo, 1);
         return r;
       },
       "ipv6_dst: requires eth_type=0x86dd", "eth_type is 0x0800"},
      {"ipv6_src_with_ipv4_eth_type",
       [] {
         Rule r = BaseV4();
         r.match.SetExact(Field::kIpv6SrcHi, 0x2001000000000000);
         return r;
       },
       "ipv6_src: requires eth_type=0x86dd", "eth_type is 0x0800"},
      {"ipv6_without_eth_type",
       [] {
         Rule r;
         r.id = 5;
         r.match.SetMasked(Field::kIpv6SrcHi, 0x2001000000000000,
                           0xffff000000000000);
         return r;
       },
       "ipv6_src: requires eth_type=0x86dd"},
      {"nw_proto_without_ip",
       [] {
         Rule r = BaseL2();
         r.match.SetExact(Field::kNwProto, kIpProtoTcp);
         return r;
       },
       "nw_proto: requires an IP eth_type"},
      {"nw_proto_with_arp",
       [] {
         Rule r = BaseL2();
         r.match.SetExact(Field::kEthType, kEthTypeArp);
         r.match.SetExact(Field::kNwTtl, 3);
         return r;
       },
       "nw_ttl: requires an IP eth_type", "eth_type is 0x0806"},
      {"tp_range_without_ip",
       [] {
         Rule r = BaseL2();
         r.match.tp_dst = {0, 1023};
         return r;
       },
       "tp_dst: requires an IP eth_type"},
      {"tp_mask_without_ip",
       [] {
         Rule r = BaseL2();
         r.match.SetExact(Field::kTpSrc, 80);
         return r;
       },
       "tp_src: requires an IP eth_type"},
      {"nw_frag_without_ip",
       [] {
         Rule r = BaseL2();
         r.match.SetMasked(Field::kNwFrag, kFragAny, kFragAny);
         return r;
       },
       "nw_frag: requires an IP eth_type"},
      {"tcp_flags_without_ip",
       [] {
         Rule r = BaseL2();
         r.match.SetMasked(Field::kTcpFlags, 0x002, 0x012);
         return r;
       },
       "tcp_flags: requires an IP eth_type"},
      {"vlan_vid_without_present",
       [] {
         Rule r = BaseL2();
         r.match.SetMasked(Field::kVlan0Tci, 10, 0x1fff);
         return r;
       },
       "vlan0_tci: matches vid/pcp", "0x1000"},
      {"vlan_vid_zero_present_unmatched",  // vid 0 of a tag, or no tag: unclear
       [] {
         Rule r = BaseL2();
         r.match.SetMasked(Field::kVlan0Tci, 0, 0x0fff);
         return r;
       },
       "vlan0_tci: matches vid/pcp"},
      {"vlan1_pcp_without_present",
       [] {
         Rule r = BaseL2();
         r.match.SetMasked(Field::kVlan1Tci, 0x6000, 0xe000);
         return r;
       },
       "vlan1_tci: matches vid/pcp"},
      {"inner_tag_under_no_outer_tag",  // could never match
       [] {
         Rule r = BaseL2();
         r.match.SetMasked(Field::kVlan0Tci, 0, 0x1000);
         r.match.SetMasked(Field::kVlan1Tci, 0x1003, 0x1fff);
         return r;
       },
       "vlan1_tci: matches an inner tag", "outer tag is matched as absent"},
      {"unknown_action",
       [] {
         Rule r = BaseV4();
         r.action.kind = static_cast<Action::Kind>(7);
         return r;
       },
       "action: unknown action kind 7"},
      {"output_port_too_big",
       [] {
         Rule r = BaseV4();
         r.action = Action::Output(kMaxPortNumber + 1);
         return r;
       },
       "action: output port 65536 is greater than the maximum 65535"},
  };
}

TEST(ValidateRuleTest, Table) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const absl::Status s = ValidateRule(c.make());
    if (c.want_prefix.empty()) {
      EXPECT_TRUE(s.ok()) << s;
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), StartsWith(c.want_prefix));
    // The typed field is the one the message starts with; no operation yet.
    const std::optional<RuleOpError> e = GetRuleOpError(s);
    ASSERT_TRUE(e.has_value()) << s;
    EXPECT_EQ(e->kind, RuleErrorKind::kInvalid);
    EXPECT_NE(e->field, RuleField::kNone);
    EXPECT_THAT(c.want_prefix, StartsWith(absl::StrCat(NativeName(e->field), ": ")));
    EXPECT_FALSE(e->has_op);
    if (!c.want_substr.empty()) {
      EXPECT_THAT(std::string(s.message()), HasSubstr(c.want_substr));
    }
  }
}

// Each field's bits-outside-mask check names that field (the two halves of
// an IPv6 address by the address: ipv6_src, ipv6_dst).
TEST(ValidateRuleTest, EveryFieldNamedForValueOutsideMask) {
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    const FieldInfo& info = InfoOf(f);
    SCOPED_TRACE(info.name);
    Rule r;
    r.id = 1;
    // Mask all but the lowest bit of the field, then set that bit in value.
    const uint64_t full = info.Mask() >> info.shift;
    r.match.mask.Set(f, full & ~uint64_t{1});
    r.match.value.Set(f, 1);
    const absl::Status s = ValidateRule(r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    std::string name = info.name;
    if (absl::StartsWith(name, "ipv6_")) name = name.substr(0, name.rfind('_'));
    EXPECT_THAT(std::string(s.message()), StartsWith(name + ": value "));
    const std::optional<RuleOpError> e = GetRuleOpError(s);
    ASSERT_TRUE(e.has_value()) << s;
    EXPECT_EQ(e->field, RuleFieldOf(f));
    EXPECT_EQ(NativeName(e->field), name);
  }
}

}  // namespace
}  // namespace flowclass
