// The ApplyRulesRequest wire codec against protobuf's serializer and parser: the
// bytes it writes, and what it reads from intact and corrupted batches.
#include "proto/rule_wire.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "flowclass/v1/flowclass.pb.h"
#include "gtest/gtest.h"
#include "proto/rule_convert.h"
#include "tests/common/random_rules.h"

namespace flowclass {
namespace {

// The direct encoder writes exactly the bytes protobuf's serializer writes
// for the ApplyRulesRequest RuleOpToProto builds: random rules (every field kind,
// text-form ones included, so both of its paths), ClassBench-like five
// tuples, deletes, and ids, priorities, cookies and ports of every width.
TEST(RuleWireTest, RuleBatchWireIsProtobufsSerialization) {
  RandomRuleGen gen(9);
  std::mt19937_64 rng(3);
  std::vector<RuleOp> ops;
  const std::vector<Rule> random = gen.NextRules(kRandomRuleCount);
  for (int i = 1; i <= kRandomRuleCount; ++i) {
    const Rule& r = random[static_cast<size_t>(i - 1)];
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
    v1::ApplyRulesRequest p;
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
  EXPECT_GE(direct, 2000u + kRandomRuleCount * 2 / 7);
  EXPECT_LT(direct, ops.size());
  std::string empty;
  AppendRuleBatchWire(0, {}, &empty);
  EXPECT_EQ(empty, "");
}

// What the slow path makes of a wire batch: parse, then RuleOpFromProto;
// false when either fails.
bool SlowRead(const std::string& wire, uint64_t* batch_id, std::vector<RuleOp>* ops) {
  v1::ApplyRulesRequest p;
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
TEST(RuleWireTest, RuleBatchWireReadIsTheSlowPathsResult) {
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
    v1::ApplyRulesRequest p;
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
    v1::ApplyRulesRequest b;
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

}  // namespace
}  // namespace flowclass
