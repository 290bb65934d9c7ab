// Tests for RuleTable::ApplyBatch on bad batches: the right error, typed
// (RuleOpError), and nothing changed.
#include "dataplane/rules/rule_table.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/random_rules.h"
#include "tests/common/rule_table_testing.h"

namespace flowclass {
namespace {

using ::testing::StartsWith;

struct BadCase {
  std::string name;
  std::vector<RuleOp> tail;  // appended after the valid prelude
  absl::StatusCode code;
  std::string prefix;  // "operation <i> (rule id <id>): <field>..."
  // The typed error (its index and rule id: those of `prefix`).
  RuleErrorKind kind;
  RuleField field;
};

class BadBatchTest : public ::testing::Test {
 protected:
  static constexpr size_t kInitial = 30;
  BadBatchTest() : table_(RuleTableLimits{40, 400}), gen_(7) {
    RandomRuleOptions o;
    o.range_fraction = 0.05;  // keep entries well under max_entries
    RandomRuleGen small(7, o);
    std::vector<RuleOp> ops;
    for (uint64_t id = 1; id <= kInitial; ++id) {
      Rule r = small.NextRule(id);
      r.match.tp_src = {};
      r.match.tp_dst = {};
      initial_.push_back(r);
      ops.push_back(RuleOp::Insert(r));
    }
    Rule c = Good(100);
    c.cookie = 99;
    initial_.push_back(c);
    ops.push_back(RuleOp::Insert(c));
    EXPECT_TRUE(table_.ApplyBatch(ops).ok());
  }

  static Rule Good(uint64_t id) {
    Rule r = V4Rule(id, 3);
    r.match.SetMasked(Field::kIpv4Dst, 0x0a000000, 0xff000000);
    return r;
  }
  // Three valid operations that would change the table.
  std::vector<RuleOp> Prelude() {
    Rule replaced = Good(2);
    replaced.priority = 1000;
    return {RuleOp::Insert(Good(500)), RuleOp::Delete(1),
            RuleOp::Replace(replaced)};
  }

  RuleTable table_;
  RandomRuleGen gen_;
  std::vector<Rule> initial_;
};

TEST_F(BadBatchTest, EachErrorLeavesTheTableUnchanged) {
  auto with = [](std::function<void(Rule*)> f, uint64_t id = 501) {
    Rule r = Good(id);
    f(&r);
    return r;
  };
  // 31 rules after the prelude, limit 40: the tenth insert is one too many.
  std::vector<RuleOp> too_many;
  for (uint64_t id = 600; id < 611; ++id)
    too_many.push_back(RuleOp::Insert(Good(id)));
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  const std::vector<BadCase> cases = {
      {"id_zero",
       {RuleOp::Insert(with([](Rule* r) { r->id = 0; }))},
       kInvalid,
       "operation 3 (rule id 0): id: ",
       RuleErrorKind::kInvalid, RuleField::kId},
      {"value_outside_mask",
       {RuleOp::Insert(with(
           [](Rule* r) { r->match.value.Set(Field::kIpv4Dst, 0x0a000001); }))},
       kInvalid,
       "operation 3 (rule id 501): ipv4_dst: value 0x0a000001 has bits "
       "outside",
       RuleErrorKind::kInvalid, RuleField::kIpv4Dst},
      {"range_lo_gt_hi_in_replace",
       {RuleOp::Replace(with(
           [](Rule* r) {
             r->match.tp_src = {9, 8};
           },
           3))},
       kInvalid,
       "operation 3 (rule id 3): tp_src: range lo 9",
       RuleErrorKind::kInvalid, RuleField::kTpSrc},
      {"range_with_mask",
       {RuleOp::Insert(with([](Rule* r) {
         r->match.tp_dst = {1, 2};
         r->match.SetExact(Field::kTpDst, 1);
       }))},
       kInvalid,
       "operation 3 (rule id 501): tp_dst: range 1-2 combined",
       RuleErrorKind::kInvalid, RuleField::kTpDst},
      {"ipv4_without_eth_type",
       {RuleOp::Insert(with([](Rule* r) {
         r->match.mask.Set(Field::kEthType, 0);
         r->match.value.Set(Field::kEthType, 0);
       }))},
       kInvalid,
       "operation 3 (rule id 501): ipv4_dst: requires eth_type=0x0800",
       RuleErrorKind::kInvalid, RuleField::kIpv4Dst},
      {"ipv6_with_ipv4",
       {RuleOp::Insert(
           with([](Rule* r) { r->match.SetExact(Field::kIpv6SrcHi, 1); }))},
       kInvalid,
       "operation 3 (rule id 501): ipv6_src: requires eth_type=0x86dd",
       RuleErrorKind::kInvalid, RuleField::kIpv6Src},
      {"nw_proto_without_ip",
       {RuleOp::Insert([] {
         Rule r;
         r.id = 501;
         r.match.SetExact(Field::kNwProto, 6);
         return r;
       }())},
       kInvalid,
       "operation 3 (rule id 501): nw_proto: requires an IP eth_type",
       RuleErrorKind::kInvalid, RuleField::kNwProto},
      {"stray_bits",
       {RuleOp::Insert(with(
           [](Rule* r) { r->match.mask.w[kWordMeta] |= uint64_t{1} << 62; }))},
       kInvalid,
       "operation 3 (rule id 501): match: word 0 has bits outside",
       RuleErrorKind::kInvalid, RuleField::kMatch},
      {"ipv6_without_eth_type",
       {RuleOp::Insert([] {
         Rule r;
         r.id = 501;
         r.match.SetMasked(Field::kIpv6DstHi, 0x2001000000000000,
                           0xffff000000000000);
         return r;
       }())},
       kInvalid,
       "operation 3 (rule id 501): ipv6_dst: requires eth_type=0x86dd",
       RuleErrorKind::kInvalid, RuleField::kIpv6Dst},
      {"tp_range_without_ip",
       {RuleOp::Insert([] {
         Rule r;
         r.id = 501;
         r.match.SetExact(Field::kEthType, kEthTypeArp);
         r.match.tp_src = {0, 1023};
         return r;
       }())},
       kInvalid,
       "operation 3 (rule id 501): tp_src: requires an IP eth_type",
       RuleErrorKind::kInvalid, RuleField::kTpSrc},
      {"tcp_flags_without_ip",
       {RuleOp::Insert([] {
         Rule r;
         r.id = 501;
         r.match.SetMasked(Field::kTcpFlags, 2, 2);
         return r;
       }())},
       kInvalid,
       "operation 3 (rule id 501): tcp_flags: requires an IP eth_type",
       RuleErrorKind::kInvalid, RuleField::kTcpFlags},
      {"vlan1_pcp_without_present",
       {RuleOp::Insert(with([](Rule* r) {
         r->match.SetMasked(Field::kVlan1Tci, 0x2000, 0xe000);
       }))},
       kInvalid,
       "operation 3 (rule id 501): vlan1_tci: matches vid/pcp",
       RuleErrorKind::kInvalid, RuleField::kVlan1Tci},
      {"vlan_without_present",
       {RuleOp::Insert(with(
           [](Rule* r) { r->match.SetMasked(Field::kVlan0Tci, 5, 0x0fff); }))},
       kInvalid,
       "operation 3 (rule id 501): vlan0_tci: ",
       RuleErrorKind::kInvalid, RuleField::kVlan0Tci},
      {"unknown_action",
       {RuleOp::Insert(with(
           [](Rule* r) { r->action.kind = static_cast<Action::Kind>(9); }))},
       kInvalid,
       "operation 3 (rule id 501): action: unknown action kind 9",
       RuleErrorKind::kInvalid, RuleField::kAction},
      {"port_too_big",
       {RuleOp::Replace(
           with([](Rule* r) { r->action = Action::Output(70000); }, 4))},
       kInvalid,
       "operation 3 (rule id 4): action: output port 70000",
       RuleErrorKind::kInvalid, RuleField::kAction},
      {"delete_unknown",
       {RuleOp::Delete(9999)},
       kInvalid,
       "operation 3 (rule id 9999): id: delete of unknown rule id 9999",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"replace_unknown",
       {RuleOp::Replace(Good(9999))},
       kInvalid,
       "operation 3 (rule id 9999): id: replace of unknown rule id 9999",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"insert_existing",
       {RuleOp::Insert(Good(5))},
       kInvalid,
       "operation 3 (rule id 5): id: insert of rule id 5 which already exists",
       RuleErrorKind::kAlreadyExists, RuleField::kId},
      {"insert_twice_in_batch",
       {RuleOp::Insert(Good(500))},
       kInvalid,
       "operation 3 (rule id 500): id: insert of rule id 500 which already exists "
       "(operation 0 of this batch inserted it)",
       RuleErrorKind::kAlreadyExists, RuleField::kId},
      {"delete_twice_in_batch",
       {RuleOp::Delete(1)},
       kInvalid,
       "operation 3 (rule id 1): id: delete of unknown rule id 1 (operation 1 of this "
       "batch deleted it)",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"replace_after_delete_in_batch",
       {RuleOp::Replace(Good(1))},
       kInvalid,
       "operation 3 (rule id 1): id: replace of unknown rule id 1 (operation 1 of this "
       "batch deleted it)",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"replace_after_delete_by_cookie",
       {RuleOp::DeleteByCookie(99), RuleOp::Replace(Good(100))},
       kInvalid,
       "operation 4 (rule id 100): id: replace of unknown rule id 100 (operation 3 of "
       "this batch deleted it by its cookie)",
       RuleErrorKind::kNotFound, RuleField::kId},
      {"max_rules", too_many, absl::StatusCode::kResourceExhausted,
       "operation 12 (rule id 609): max_rules: the table would hold 41 rules, "
       "limit 40",
       RuleErrorKind::kLimit, RuleField::kMaxRules},
  };

  std::vector<Flow> keys;
  for (int i = 0; i < 500; ++i) keys.push_back(gen_.NextKeyNear(initial_));
  auto lookups = [&] {
    std::vector<uint64_t> out;
    for (const Flow& k : keys) {
      Flow wc;
      out.push_back(IdOf(table_.Lookup(k, &wc)));
    }
    return out;
  };
  const std::vector<Rule> rules_before = Snapshot(table_);
  const std::string debug_before = table_.DebugString();
  const uint64_t gen_before = table_.generation();
  const std::vector<uint64_t> lookups_before = lookups();
  ASSERT_GT(std::count_if(lookups_before.begin(), lookups_before.end(),
                          [](uint64_t id) { return id != 0; }),
            100);

  for (bool bad_first : {false, true}) {
    for (const BadCase& c : cases) {
      SCOPED_TRACE(c.name + (bad_first ? " (bad op first)" : ""));
      std::vector<RuleOp> ops = Prelude();
      ops.insert(ops.end(), c.tail.begin(), c.tail.end());
      std::string prefix = c.prefix;
      if (bad_first) {
        // The same bad op at index 0, then valid ones: only cases that do
        // not depend on the prelude.
        if (c.tail.size() != 1 ||
            c.name.find("in_batch") != std::string::npos ||
            c.name == "max_rules")
          continue;
        ops = {c.tail[0], RuleOp::Insert(Good(700))};
        prefix.replace(0, std::string("operation 3").size(), "operation 0");
      }
      const auto res = table_.ApplyBatch(ops);
      ASSERT_FALSE(res.ok());
      EXPECT_EQ(res.status().code(), c.code) << res.status();
      EXPECT_THAT(std::string(res.status().message()), StartsWith(prefix));
      // The payload says what the message says: index, rule id, field.
      const std::optional<RuleOpError> e = GetRuleOpError(res.status());
      ASSERT_TRUE(e.has_value()) << res.status();
      EXPECT_EQ(e->kind, c.kind);
      EXPECT_EQ(e->field, c.field);
      EXPECT_TRUE(e->has_op);
      EXPECT_THAT(prefix, StartsWith(absl::StrCat(OperationPrefix(e->index, e->rule_id),
                                                  NativeName(e->field), ": ")));
      EXPECT_EQ(Snapshot(table_), rules_before);
      EXPECT_EQ(table_.DebugString(), debug_before);
      EXPECT_EQ(table_.generation(), gen_before);
      EXPECT_EQ(lookups(), lookups_before);
    }
  }
  // The prelude itself is fine: the failures came from the bad operations.
  const auto res = table_.ApplyBatch(Prelude());
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_NE(table_.DebugString(), debug_before);
}


// max_entries (entries are rules: port ranges are not expanded) is checked
// like max_rules, before anything changes; a rule with two wide ranges is
// one entry.
TEST(RuleTableLimitsTest, MaxEntriesRejectsTheBatchWhole) {
  RuleTable t(RuleTableLimits{100, 5});
  std::vector<RuleOp> ops;
  for (uint64_t id = 1; id <= 4; ++id) {
    Rule r = V4Rule(id, 3);
    r.match.SetExact(Field::kIpv4Dst, 0x0a000000 + id);
    r.match.tp_src = {1, 65534};
    r.match.tp_dst = {1, 65534};
    ops.push_back(RuleOp::Insert(r));
  }
  ApplyOk(&t, ops);
  EXPECT_EQ(t.Stats().entries, 4u);
  const std::string before = t.DebugString();
  Rule r5 = V4Rule(5, 1), r6 = V4Rule(6, 1);
  r6.match.tp_dst = {80, 80};
  const auto res = t.ApplyBatch({RuleOp::Insert(r5), RuleOp::Insert(r6)});
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(res.status().message()),
              StartsWith("operation 1 (rule id 6): max_entries: the table would hold 6 "
                         "entries, limit 5"));
  const std::optional<RuleOpError> e = GetRuleOpError(res.status());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, RuleErrorKind::kLimit);
  EXPECT_EQ(e->field, RuleField::kMaxEntries);
  EXPECT_EQ(t.DebugString(), before);
  EXPECT_EQ(t.size(), 4u);
}

}  // namespace
}  // namespace flowclass
