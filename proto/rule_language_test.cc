// One input language: the same address texts, through every way a rule
// comes in — a native rule line (ParseNativeRule: rule files, `flowclassctl
// replay`), a ClassBench filter, a v1.Rule with the match as structured
// fields, the same v1.Rule as `text`, and the bulk wire reader — give the
// same rule, or the same rejection naming the same field.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/flow/addr_text.h"
#include "dataplane/internal/cat.h"
#include "dataplane/rules/rule_error.h"
#include "dataplane/rules/rule_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rule_convert.h"
#include "proto/rule_wire.h"

namespace flowclass {
namespace {

using internal::Cat;

struct Case {
  const char* field;  // a v1.Match field, also a native key
  std::string_view value;
  // The parsed field formatted back (addr_text.h), or, for a rejection,
  // what the error says after "FIELD: ".
  std::string_view want;
  bool ok;
};

constexpr bool kOk = true, kBad = false;

const Case kCases[] = {
    // ---- IPv4: exact, prefix, mask.
    {"ipv4_src", "10.0.0.1", "10.0.0.1", kOk},
    {"ipv4_src", "10.0.0.0/8", "10.0.0.0/8", kOk},
    {"ipv4_dst", "10.0.0.0/255.0.0.0", "10.0.0.0/8", kOk},
    {"ipv4_dst", "192.168.0.1/255.255.0.255", "192.168.0.1/255.255.0.255", kOk},
    {"ipv4_src", "1.2.3.4/32", "1.2.3.4", kOk},
    {"ipv4_src", "0.0.0.0/0", "0.0.0.0/0", kOk},
    {"ipv4_src", "10.0.0.0/08", "10.0.0.0/8", kOk},
    // Bits outside the mask: cleared, as ovs-ofctl does.
    {"ipv4_src", "10.1.2.3/8", "10.0.0.0/8", kOk},
    {"ipv4_dst", "10.0.0.1/255.0.255.0", "10.0.0.0/255.0.255.0", kOk},
    // Leading zeros: refused (inet_aton reads 010 as octal 8).
    {"ipv4_src", "010.0.0.1",
     "bad IPv4 address '010.0.0.1': octet '010' has a leading zero (octets are decimal without "
     "leading zeros; inet_aton would read it as octal)",
     kBad},
    {"ipv4_dst", "10.0.0.0/255.255.255.000",
     "bad IPv4 mask '255.255.255.000': octet '000' has a leading zero (octets are decimal "
     "without leading zeros; inet_aton would read it as octal)",
     kBad},
    {"ipv4_src", "1.2.3", "bad IPv4 address '1.2.3'", kBad},
    {"ipv4_src", "1.2.3.4.5", "bad IPv4 address '1.2.3.4.5'", kBad},
    {"ipv4_src", "10.0.0.256", "bad IPv4 address '10.0.0.256'", kBad},
    {"ipv4_src", "10.0.0.0/255.0.300.0", "bad IPv4 mask '255.0.300.0'", kBad},
    // Bad lengths: digits only, no sign.
    {"ipv4_src", "10.0.0.0/33", "prefix length 33 exceeds 32", kBad},
    {"ipv4_dst", "10.0.0.0/", "bad prefix length ''", kBad},
    {"ipv4_src", "10.0.0.0/+8", "bad prefix length '+8'", kBad},
    {"ipv4_src", "10.0.0.0/-0", "bad prefix length '-0'", kBad},
    {"ipv4_src", "10.0.0.0/1a", "bad prefix length '1a'", kBad},
    // ---- IPv6
    {"ipv6_src", "2001:db8::/32", "2001:db8::/32", kOk},
    {"ipv6_dst", "fe80::/10", "fe80::/10", kOk},
    {"ipv6_src", "2001:db8::/ffff:ffff::", "2001:db8::/32", kOk},
    {"ipv6_src", "2001:db8::1/ffff::ff", "2001::1/ffff::ff", kOk},
    {"ipv6_dst", "2001:DB8:0:0:0:0:0:1", "2001:db8::1", kOk},
    {"ipv6_src", "::ffff:10.0.0.1/128", "::ffff:10.0.0.1", kOk},
    {"ipv6_src", "2001:db8::1/32", "2001:db8::/32", kOk},  // outside the mask: cleared
    {"ipv6_src", "1:::2", "bad IPv6 address '1:::2'", kBad},
    {"ipv6_dst", "2001:db8::g", "bad IPv6 address '2001:db8::g'", kBad},
    {"ipv6_src", "::ffff:010.0.0.1", "bad IPv6 address '::ffff:010.0.0.1'", kBad},
    {"ipv6_dst", "::/129", "prefix length 129 exceeds 128", kBad},
    {"ipv6_src", "::/+64", "bad prefix length '+64'", kBad},
    {"ipv6_src", "::/1.2.3.4", "bad prefix length '1.2.3.4'", kBad},
    {"ipv6_src", "::/ffff::g", "bad IPv6 mask 'ffff::g'", kBad},
    // ---- Ethernet
    {"eth_src", "aa:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee:ff", kOk},
    {"eth_dst", "01:00:5e:00:00:00/ff:ff:ff:80:00:00", "01:00:5e:00:00:00/ff:ff:ff:80:00:00",
     kOk},
    {"eth_src", "aa:bb:cc:dd:ee:ff/ff:ff:ff:00:00:00", "aa:bb:cc:00:00:00/ff:ff:ff:00:00:00",
     kOk},
    {"eth_src", "A:B:C:D:E:F", "0a:0b:0c:0d:0e:0f", kOk},
    {"eth_dst", "aa:bb:cc:dd:ee:ff/24", "aa:bb:cc:00:00:00/ff:ff:ff:00:00:00", kOk},
    {"eth_dst", "aa:bb:cc:dd:ee", "bad Ethernet address 'aa:bb:cc:dd:ee'", kBad},
    {"eth_src", "aa:bb:cc:dd:ee:ff:00", "bad Ethernet address 'aa:bb:cc:dd:ee:ff:00'", kBad},
    {"eth_src", "aa-bb-cc-dd-ee-ff", "bad Ethernet address 'aa-bb-cc-dd-ee-ff'", kBad},
    {"eth_dst", "aa:bb:cc:dd:ee:ff/ff:ff", "bad Ethernet mask 'ff:ff'", kBad},
    {"eth_dst", "aa:bb:cc:dd:ee:ff/49", "prefix length 49 exceeds 48", kBad},
    // ---- Blanks.  In a native line a blank separates keys, so there the
    // value ends before it ("empty value", or "bad prefix length ''"); a
    // structured field takes the blank as part of the value.  The field
    // named is the same.
    {"ipv4_src", " 10.0.0.1", "", kBad},
    {"ipv4_src", "10.0.0.0/ 8", "", kBad},
    {"ipv6_dst", "\t::1", "", kBad},
    {"ipv6_dst", "::/\t64", "", kBad},
    {"eth_src", " aa:bb:cc:dd:ee:ff", "", kBad},
};

bool HasBlank(std::string_view s) { return s.find_first_of(" \t") != std::string_view::npos; }

constexpr uint64_t kId = 7;

// The native line for one case: the protocol keyword its field needs, the
// field, an action.
std::string NativeLine(const Case& c) {
  const std::string_view f = c.field;
  const char* keyword = f.starts_with("ipv4") ? "ip," : f.starts_with("ipv6") ? "ipv6," : "";
  return Cat(keyword, c.field, "=", c.value, ",actions=drop");
}

v1::Rule Structured(const Case& c) {
  v1::Rule p;
  p.set_id(kId);
  p.set_priority(kDefaultNativePriority);
  v1::Match* m = p.mutable_match();
  const std::string v(c.value);
  const std::string_view f = c.field;
  if (f == "ipv4_src") m->set_ipv4_src(v);
  if (f == "ipv4_dst") m->set_ipv4_dst(v);
  if (f == "ipv6_src") m->set_ipv6_src(v);
  if (f == "ipv6_dst") m->set_ipv6_dst(v);
  if (f == "eth_src") m->set_eth_src(v);
  if (f == "eth_dst") m->set_eth_dst(v);
  p.mutable_action()->mutable_drop();
  return p;
}

// The field's value/mask in a parsed rule, formatted by the codec.
std::string Formatted(const Rule& r, std::string_view field) {
  const Match& m = r.match;
  auto v4 = [&](Field f) {
    return FormatIpv4Masked(static_cast<uint32_t>(m.value.Get(f)),
                            static_cast<uint32_t>(m.mask.Get(f)));
  };
  auto mac = [&](Field f) { return FormatMacMasked(m.value.Get(f), m.mask.Get(f)); };
  if (field == "ipv4_src") return v4(Field::kIpv4Src);
  if (field == "ipv4_dst") return v4(Field::kIpv4Dst);
  if (field == "ipv6_src") return FormatIpv6Masked(m.value.Ipv6Src(), m.mask.Ipv6Src());
  if (field == "ipv6_dst") return FormatIpv6Masked(m.value.Ipv6Dst(), m.mask.Ipv6Dst());
  if (field == "eth_src") return mac(Field::kEthSrc);
  return mac(Field::kEthDst);
}

// "column C: FIELD: problem" -> {FIELD, problem}.
std::pair<std::string, std::string> SplitNative(std::string_view message) {
  const size_t a = message.find(": ");
  const size_t b = message.find(": ", a + 2);
  if (!message.starts_with("column ") || a == std::string_view::npos ||
      b == std::string_view::npos)
    return {"(not a native error)", std::string(message)};
  return {std::string(message.substr(a + 2, b - a - 2)), std::string(message.substr(b + 2))};
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

TEST(RuleLanguageTest, EveryEntryPointAcceptsAndRejectsTheSame) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(Cat(c.field, "='", c.value, "'"));
    const std::string line = NativeLine(c);
    const absl::StatusOr<Rule> native = ParseNativeRule(line, kId);

    const v1::Rule structured = Structured(c);
    Rule from_fields;
    const absl::Status fields_status = RuleFromProto(structured, &from_fields);

    v1::Rule as_text;
    as_text.set_id(kId);
    as_text.set_priority(kDefaultNativePriority);  // what the line leaves to the message
    as_text.set_text(line);
    Rule from_text;
    const absl::Status text_status = RuleFromProto(as_text, &from_text);

    // The bulk reader answers for IPv4 rules only; it must then agree (and
    // it declines every rejection, leaving it to the path above).
    std::vector<RuleOp> wire_ops;
    bool wire_read = false;
    if (std::string_view(c.field).starts_with("ipv4")) {
      v1::ApplyRulesRequest batch;
      *batch.add_ops()->mutable_insert() = structured;
      uint64_t batch_id = 0;
      wire_read = ReadRuleBatchWire(batch.SerializeAsString(), &batch_id, &wire_ops);
    }

    if (c.ok) {
      ASSERT_TRUE(native.ok()) << line << ": " << native.status();
      ASSERT_TRUE(fields_status.ok()) << fields_status;
      ASSERT_TRUE(text_status.ok()) << text_status;
      EXPECT_EQ(Formatted(*native, c.field), c.want);
      EXPECT_EQ(from_fields, *native) << from_fields.ToString() << "\n" << native->ToString();
      EXPECT_EQ(from_text, *native) << from_text.ToString() << "\n" << native->ToString();
      if (std::string_view(c.field).starts_with("ipv4")) {
        ASSERT_TRUE(wire_read);
        ASSERT_EQ(wire_ops.size(), 1u);
        EXPECT_EQ(wire_ops[0].rule, *native);
      }
      // Printed and read back: the same rule (Rule::ToString uses the codec too).
      const absl::StatusOr<Rule> again = ParseNativeRule(native->ToString(), 0);
      ASSERT_TRUE(again.ok()) << native->ToString() << ": " << again.status();
      EXPECT_EQ(*again, *native);
      continue;
    }
    ASSERT_FALSE(native.ok()) << line;
    ASSERT_FALSE(fields_status.ok()) << "accepted: " << from_fields.ToString();
    ASSERT_FALSE(text_status.ok()) << "accepted: " << from_text.ToString();
    EXPECT_FALSE(wire_read);
    const auto [native_field, native_problem] = SplitNative(Msg(native.status()));
    EXPECT_EQ(native_field, c.field) << native.status();
    const std::optional<RuleOpError> typed = GetRuleOpError(fields_status);
    ASSERT_TRUE(typed.has_value()) << fields_status;
    EXPECT_EQ(ProtoName(typed->field), c.field) << fields_status;
    // `text` is the native line: its error is the native one, behind "text: ".
    EXPECT_EQ(Msg(text_status), Cat("text: ", Msg(native.status())));
    if (HasBlank(c.value)) continue;  // the native line ends the value at the blank
    EXPECT_EQ(native_problem, c.want) << native.status();
    EXPECT_EQ(Msg(fields_status), Cat(c.field, ": ", c.want));
  }
}

// ClassBench filters read their two addresses with the same codec: the
// IPv4 cases above (those without blanks, which separate ClassBench
// columns) as a filter's source and destination.
TEST(RuleLanguageTest, ClassBenchAddressesAreTheSameLanguage) {
  int checked = 0;
  for (const Case& c : kCases) {
    if (!std::string_view(c.field).starts_with("ipv4") || HasBlank(c.value)) continue;
    SCOPED_TRACE(Cat(c.field, "='", c.value, "'"));
    const bool src = std::string_view(c.field) == "ipv4_src";
    const std::string filter = Cat("@", src ? c.value : "0.0.0.0/0", " ",
                                            src ? "0.0.0.0/0" : c.value,
                                            " 0 : 65535 0 : 65535 0x00/0x00\n");
    const absl::StatusOr<std::vector<Rule>> rules = ParseClassBench(filter);
    const absl::StatusOr<Rule> native = ParseNativeRule(NativeLine(c), kId);
    ++checked;
    if (c.ok) {
      ASSERT_TRUE(rules.ok()) << filter << rules.status();
      EXPECT_EQ(Formatted((*rules)[0], c.field), Formatted(*native, c.field));
      continue;
    }
    ASSERT_FALSE(rules.ok()) << filter;
    // "line 1, column C: FIELD: problem", as a native line's error.
    const std::string m = Msg(rules.status());
    ASSERT_TRUE(m.starts_with("line 1, ")) << m;
    const auto [field, problem] = SplitNative(std::string_view(m).substr(8));
    EXPECT_EQ(field, c.field);
    EXPECT_EQ(problem, c.want);
  }
  EXPECT_GT(checked, 15);
}

}  // namespace
}  // namespace flowclass
