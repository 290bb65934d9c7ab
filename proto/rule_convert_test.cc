// Round trips Rule -> proto -> Rule over random rule sets, and the error
// messages of every malformed input the structured form can carry.
#include "proto/rule_convert.h"

#include <arpa/inet.h>

#include <bit>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dataplane/rule_error.h"
#include "dataplane/rule_format.h"
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

#ifdef __SANITIZE_ADDRESS__
constexpr int kRandomRules = 3000;
#else
constexpr int kRandomRules = 20000;
#endif

TEST(RuleConvertTest, RandomRulesRoundTrip) {
  RandomRuleGen gen(7);
  int structured = 0;
  for (int i = 1; i <= kRandomRules; ++i) {
    const Rule r = gen.NextRule(static_cast<uint64_t>(i));
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
  EXPECT_GT(structured, kRandomRules * 8 / 10);
}

// The direct encoder writes exactly the bytes protobuf's serializer writes
// for the RuleBatch RuleOpToProto builds: random rules (every field kind,
// text-form ones included, so both of its paths), ClassBench-like five
// tuples, deletes, and ids, priorities, cookies and ports of every width.
TEST(RuleConvertTest, RuleBatchWireIsProtobufsSerialization) {
  RandomRuleGen gen(9);
  std::mt19937_64 rng(3);
  std::vector<RuleOp> ops;
  for (int i = 1; i <= kRandomRules; ++i) {
    Rule r = gen.NextRule(static_cast<uint64_t>(i));
    switch (i % 7) {
      case 0: ops.push_back(RuleOp::Delete(rng() >> (rng() % 64))); break;
      case 1: ops.push_back(RuleOp::DeleteByCookie(i % 2 ? 0 : rng())); break;
      case 2: ops.push_back(RuleOp::Replace(r)); break;
      default: ops.push_back(RuleOp::Insert(r)); break;
    }
  }
  for (int i = 0; i < 2000; ++i) {  // the bulk load's shape
    Rule r;
    r.id = rng() >> (rng() % 64);
    r.priority = static_cast<uint32_t>(rng() >> (32 + rng() % 32));
    r.cookie = i % 3 ? 0 : rng();
    r.match.SetExact(Field::kInPort, rng() % 70000);
    r.match.SetExact(Field::kEthType, kEthTypeIpv4);
    const int sl = static_cast<int>(rng() % 33), dl = static_cast<int>(rng() % 33);
    const uint32_t sm = sl ? ~uint32_t{0} << (32 - sl) : 0, dm = dl ? ~uint32_t{0} << (32 - dl) : 0;
    if (sm) r.match.SetMasked(Field::kIpv4Src, rng() & sm, sm);
    if (dm) r.match.SetMasked(Field::kIpv4Dst, rng() & dm, dm);
    if (i % 4) r.match.SetExact(Field::kNwProto, i % 4 == 1 ? 6 : i % 4 == 2 ? 17 : 0);
    const uint16_t lo = static_cast<uint16_t>(rng()), hi = static_cast<uint16_t>(lo + rng() % 3000);
    if (i % 5 == 0) r.match.tp_dst = PortRange{lo, std::max(lo, hi)};
    if (i % 5 == 1) r.match.SetExact(Field::kTpSrc, lo);
    if (i % 5 == 2) r.match.SetMasked(Field::kTpSrc, lo & 0xff00, 0xff00);
    if (i % 5 == 3) r.match.tp_src = PortRange{0, lo};
    r.action = i % 6 ? Action::Output(static_cast<uint32_t>(rng() % 70000)) : Action::Drop();
    ops.push_back(RuleOp::Insert(r));
  }
  int text_form = 0;
  size_t direct = 0;
  for (size_t lo = 0; lo < ops.size(); lo += 97) {
    const absl::Span<const RuleOp> batch = absl::MakeConstSpan(ops).subspan(lo, 97);
    v1::RuleBatch p;
    p.set_batch_id(lo == 0 ? 0 : rng() >> (rng() % 64));
    for (const RuleOp& op : batch) {
      RuleOpToProto(op, p.add_ops());
      const v1::RuleOp& last = p.ops(p.ops_size() - 1);
      text_form += (last.has_insert() && !last.insert().text().empty());
    }
    std::string wire;
    direct += AppendRuleBatchWire(p.batch_id(), batch, &wire);
    ASSERT_EQ(wire, p.SerializeAsString()) << "batch from op " << lo;
  }
  EXPECT_GT(text_form, 0);  // the fallback path ran
  // The bulk-load rules and the deletes all went the direct way, and many
  // of the random ones.
  EXPECT_GE(direct, 2000u + kRandomRules * 2 / 7);
  EXPECT_LT(direct, ops.size());
  std::string empty;
  AppendRuleBatchWire(0, {}, &empty);
  EXPECT_EQ(empty, "");
}

// What the slow path makes of a wire batch: parse, then RuleOpFromProto;
// false when either fails.
bool SlowRead(const std::string& wire, uint64_t* batch_id, std::vector<RuleOp>* ops) {
  v1::RuleBatch p;
  if (!p.ParseFromString(wire)) return false;
  *batch_id = p.batch_id();
  ops->assign(static_cast<size_t>(p.ops_size()), RuleOp{});
  for (int i = 0; i < p.ops_size(); ++i)
    if (!RuleOpFromProto(p.ops(i), &(*ops)[static_cast<size_t>(i)]).ok()) return false;
  return true;
}

bool SameOps(const std::vector<RuleOp>& a, const std::vector<RuleOp>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || !(a[i].rule == b[i].rule) || a[i].id != b[i].id ||
        a[i].cookie != b[i].cookie)
      return false;
  return true;
}

// The direct reader gives exactly what the slow path gives whenever it
// answers, answers for the bulk-load shape, and declines the rest: on
// batches of random rules (every field kind, text ones included), on the
// bulk shape, and on thousands of corrupted copies of them.
TEST(RuleConvertTest, RuleBatchWireReadIsTheSlowPathsResult) {
  RandomRuleGen gen(13);
  std::mt19937_64 rng(17);
  std::vector<std::string> wires;
  std::vector<RuleOp> bulk_ops;
  for (int i = 0; i < 1000; ++i) {
    Rule r;
    r.id = 1 + (rng() >> (rng() % 64));
    r.priority = static_cast<uint32_t>(rng());
    r.cookie = i % 3 ? 0 : rng();
    r.match.SetExact(Field::kInPort, 1 + rng() % 100);
    r.match.SetExact(Field::kEthType, kEthTypeIpv4);
    const int sl = static_cast<int>(rng() % 33);
    const uint32_t sm = sl ? ~uint32_t{0} << (32 - sl) : 0;
    if (sm) r.match.SetMasked(Field::kIpv4Src, rng() & sm, sm);
    r.match.SetExact(Field::kIpv4Dst, rng() & 0xffffffffu);
    if (i % 3) r.match.SetExact(Field::kNwProto, 6);
    if (i % 4 == 0) r.match.tp_dst = PortRange{80, static_cast<uint16_t>(80 + i)};
    if (i % 4 == 1) r.match.SetExact(Field::kTpSrc, static_cast<uint64_t>(i));
    r.action = i % 5 ? Action::Output(static_cast<uint32_t>(rng() % 100)) : Action::Drop();
    bulk_ops.push_back(i % 9 == 0 ? RuleOp::Delete(r.id) : RuleOp::Insert(r));
  }
  for (size_t lo = 0; lo < bulk_ops.size(); lo += 100) {
    std::string wire;
    AppendRuleBatchWire(lo, absl::MakeConstSpan(bulk_ops).subspan(lo, 100), &wire);
    uint64_t id = 0;
    std::vector<RuleOp> direct;
    ASSERT_TRUE(ReadRuleBatchWire(wire, &id, &direct)) << "bulk batch " << lo;
    uint64_t slow_id = 0;
    std::vector<RuleOp> slow;
    ASSERT_TRUE(SlowRead(wire, &slow_id, &slow));
    EXPECT_EQ(id, slow_id);
    ASSERT_TRUE(SameOps(direct, slow)) << "bulk batch " << lo;
    wires.push_back(wire);
  }
  int declined = 0;
  for (int b = 0; b < 40; ++b) {
    v1::RuleBatch p;
    p.set_batch_id(rng() % 1000);
    for (int i = 0; i < 50; ++i) {
      const Rule r = gen.NextRule(static_cast<uint64_t>(1 + b * 50 + i));
      RuleOpToProto(i % 6 ? RuleOp::Insert(r) : RuleOp::Replace(r), p.add_ops());
    }
    wires.push_back(p.SerializeAsString());
    uint64_t id = 0, slow_id = 0;
    std::vector<RuleOp> direct, slow;
    if (!ReadRuleBatchWire(wires.back(), &id, &direct)) {
      ++declined;
      continue;
    }
    ASSERT_TRUE(SlowRead(wires.back(), &slow_id, &slow));
    ASSERT_TRUE(SameOps(direct, slow) && id == slow_id) << "random batch " << b;
  }
  EXPECT_GT(declined, 0);  // random rules include fields the reader leaves alone
  // Corrupted copies: one to four bytes changed, or cut short.
  int answered = 0;
  for (int t = 0; t < 20000; ++t) {
    std::string w = wires[rng() % wires.size()];
    if (w.empty()) continue;
    if (t % 10 == 0) {
      w.resize(rng() % w.size());
    } else {
      for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k)
        w[rng() % w.size()] = static_cast<char>(rng() % 4 ? rng() : (rng() % 2 ? 0x80 : 0));
    }
    uint64_t id = 0, slow_id = 0;
    std::vector<RuleOp> direct, slow;
    if (!ReadRuleBatchWire(w, &id, &direct)) continue;
    ++answered;
    ASSERT_TRUE(SlowRead(w, &slow_id, &slow)) << "corrupted copy " << t;
    ASSERT_EQ(id, slow_id) << "corrupted copy " << t;
    ASSERT_TRUE(SameOps(direct, slow)) << "corrupted copy " << t;
  }
  EXPECT_GT(answered, 100);  // some corruptions stay valid (a changed address digit, a port)

  // Hand-made messages other clients may send: the reader either declines
  // them or reads what the slow path reads.
  auto one_op = [](const v1::RuleOp& op) {
    v1::RuleBatch b;
    *b.add_ops() = op;
    return b.SerializeAsString();
  };
  auto insert = [](const std::function<void(v1::Rule*)>& edit) {
    v1::RuleOp op;
    v1::Rule* r = op.mutable_insert();
    r->set_id(7);
    r->set_priority(5);
    r->mutable_action()->set_output_port(2);
    edit(r);
    return op;
  };
  std::vector<std::pair<std::string, std::string>> cases = {
      {"ipv4 without eth_type",
       one_op(insert([](v1::Rule* r) { r->mutable_match()->set_ipv4_src("10.0.0.0/8"); }))},
      {"ip_proto mask wider than the field", one_op(insert([](v1::Rule* r) {
         r->mutable_match()->set_eth_type(0x0800);
         r->mutable_match()->mutable_ip_proto()->set_value(6);
         r->mutable_match()->mutable_ip_proto()->set_mask(0x1ff);
       }))},
      {"ip_proto value wider than the field", one_op(insert([](v1::Rule* r) {
         r->mutable_match()->set_eth_type(0x0800);
         r->mutable_match()->mutable_ip_proto()->set_value(0x106);
       }))},
      {"tp_dst range lo > hi", one_op(insert([](v1::Rule* r) {
         r->mutable_match()->set_eth_type(0x0800);
         r->mutable_match()->mutable_tp_dst()->mutable_range()->set_lo(90);
         r->mutable_match()->mutable_tp_dst()->mutable_range()->set_hi(80);
       }))},
      {"eth_type over 16 bits",
       one_op(insert([](v1::Rule* r) { r->mutable_match()->set_eth_type(0x10800); }))},
      {"output port past the limit",
       one_op(insert([](v1::Rule* r) { r->mutable_action()->set_output_port(kMaxPortNumber + 1); }))},
      {"no action", one_op(insert([](v1::Rule* r) { r->clear_action(); }))},
      {"no match", one_op(insert([](v1::Rule*) {}))},
  };
  v1::RuleOp del0;
  del0.set_delete_id(0);
  cases.push_back({"delete_id 0", one_op(del0)});
  // Tags and lengths longer than protobuf takes (it refuses them).
  cases.push_back({"6-byte tag", std::string("\x88\x80\x80\x80\x80\x00\x05", 7)});
  cases.push_back({"6-byte length", std::string("\x12\x82\x80\x80\x80\x80\x00\x18\x01", 9)});
  cases.push_back({"5-byte tag", std::string("\x88\x80\x80\x80\x00\x05", 6)});
  int read_directly = 0;
  for (const auto& [name, w] : cases) {
    uint64_t id = 0, slow_id = 0;
    std::vector<RuleOp> direct, slow;
    if (!ReadRuleBatchWire(w, &id, &direct)) continue;
    ++read_directly;
    ASSERT_TRUE(SlowRead(w, &slow_id, &slow)) << name;
    ASSERT_TRUE(SameOps(direct, slow)) << name;
    ASSERT_EQ(id, slow_id) << name;
  }
  EXPECT_GE(read_directly, 3);  // the implied eth_type, the empty match, the 5-byte tag
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
