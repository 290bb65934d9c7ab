// Tests for the typed rule / operation error: names, payload encoding, the
// constructors, and that only the payload classifies an error.
#include "dataplane/rules/rule_error.h"

#include <cstdint>
#include <iterator>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {

void PrintTo(const RuleOpError& e, std::ostream* os) {
  *os << "{kind " << static_cast<int>(e.kind) << ", field " << NativeName(e.field)
      << (e.has_op ? absl::StrCat(", op ", e.index, ", rule id ", e.rule_id) : "") << "}";
}

namespace {

constexpr int kFields = static_cast<int>(RuleField::kCount);
constexpr int kKinds = static_cast<int>(RuleErrorKind::kCount);

TEST(RuleErrorTest, EveryFieldHasTwoNamesEachUnique) {
  EXPECT_EQ(NativeName(RuleField::kNone), "");
  EXPECT_EQ(ProtoName(RuleField::kNone), "");
  std::set<std::string> native, proto;
  for (int i = 1; i < kFields; ++i) {
    const RuleField f = static_cast<RuleField>(i);
    SCOPED_TRACE(i);
    EXPECT_FALSE(NativeName(f).empty());
    EXPECT_FALSE(ProtoName(f).empty());
    EXPECT_TRUE(native.insert(std::string(NativeName(f))).second) << NativeName(f);
    EXPECT_TRUE(proto.insert(std::string(ProtoName(f))).second) << ProtoName(f);
  }
  // Out of range: no name.
  EXPECT_EQ(NativeName(RuleField::kCount), "");
  EXPECT_EQ(ProtoName(static_cast<RuleField>(200)), "");
}

TEST(RuleErrorTest, MatchFieldsAreNamedAsInTheFlowAndInV1Match) {
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    SCOPED_TRACE(InfoOf(f).name);
    std::string want = InfoOf(f).name;
    if (want.rfind("ipv6_", 0) == 0) want = want.substr(0, want.rfind('_'));  // the address
    EXPECT_EQ(NativeName(RuleFieldOf(f)), want);
  }
  EXPECT_EQ(RuleFieldOf(Field::kIpv6SrcHi), RuleField::kIpv6Src);
  EXPECT_EQ(RuleFieldOf(Field::kIpv6SrcLo), RuleField::kIpv6Src);
  EXPECT_EQ(RuleFieldOf(Field::kIpv6DstHi), RuleField::kIpv6Dst);
  EXPECT_EQ(RuleFieldOf(Field::kIpv6DstLo), RuleField::kIpv6Dst);
  // The fields v1.Match names otherwise; every other one has one name.
  const std::pair<RuleField, const char*> renamed[] = {
      {RuleField::kNwProto, "ip_proto"}, {RuleField::kNwTos, "ip_tos"},
      {RuleField::kNwTtl, "ip_ttl"},     {RuleField::kNwFrag, "ip_frag"},
      {RuleField::kVlan0Tci, "vlan"},    {RuleField::kVlan1Tci, "inner_vlan"}};
  int differ = 0;
  for (int i = 0; i < kFields; ++i)
    differ += NativeName(static_cast<RuleField>(i)) != ProtoName(static_cast<RuleField>(i));
  EXPECT_EQ(differ, static_cast<int>(std::size(renamed)));
  for (const auto& [f, name] : renamed) EXPECT_EQ(ProtoName(f), name);
}

TEST(RuleErrorTest, PayloadRoundTrips) {
  for (int k = 0; k < kKinds; ++k) {
    for (int f = 0; f < kFields; ++f) {
      for (const auto& [index, id] : {std::pair<uint32_t, uint64_t>{0, 0},
                                      {1, 1},
                                      {0x01020304, 0x0102030405060708},
                                      {~uint32_t{0}, ~uint64_t{0}}}) {
        for (bool has_op : {false, true}) {
          const RuleOpError e{static_cast<RuleErrorKind>(k), static_cast<RuleField>(f), has_op,
                              index, id};
          const std::optional<RuleOpError> d = DecodeRuleOpError(EncodeRuleOpError(e));
          ASSERT_TRUE(d.has_value());
          EXPECT_EQ(*d, e);
        }
      }
    }
  }
}

TEST(RuleErrorTest, BytesOfAnotherFormAreNoPayload) {
  const absl::Cord good = EncodeRuleOpError({RuleErrorKind::kNotFound, RuleField::kId, true, 3, 17});
  ASSERT_TRUE(DecodeRuleOpError(good).has_value());
  const std::string bytes(good);
  auto with = [&](size_t at, char c) {
    std::string b = bytes;
    b[at] = c;
    return absl::Cord(b);
  };
  EXPECT_FALSE(DecodeRuleOpError(absl::Cord()).has_value());
  EXPECT_FALSE(DecodeRuleOpError(absl::Cord(bytes.substr(1))).has_value());
  EXPECT_FALSE(DecodeRuleOpError(absl::Cord(bytes + "x")).has_value());
  EXPECT_FALSE(DecodeRuleOpError(with(0, 2)).has_value());                    // version
  EXPECT_FALSE(DecodeRuleOpError(with(1, static_cast<char>(kKinds))).has_value());
  EXPECT_FALSE(DecodeRuleOpError(with(2, static_cast<char>(kFields))).has_value());
  EXPECT_FALSE(DecodeRuleOpError(with(3, 2)).has_value());                    // has_op

  absl::Status s = absl::InvalidArgumentError("x");
  s.SetPayload(kRuleOpErrorTypeUrl, absl::Cord("not ours"));
  EXPECT_FALSE(GetRuleOpError(s).has_value());
  // An OK status takes no payload.
  absl::Status ok;
  SetRuleOpError(&ok, {RuleErrorKind::kNotFound, RuleField::kId, true, 3, 17});
  EXPECT_FALSE(GetRuleOpError(ok).has_value());
}

TEST(RuleErrorTest, RuleErrorAndAtOperationKeepTheMessageForm) {
  const absl::Status s = RuleError(RuleErrorKind::kInvalid, RuleField::kNwProto, "requires IP");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "nw_proto: requires IP");
  EXPECT_EQ(GetRuleOpError(s),
            (RuleOpError{RuleErrorKind::kInvalid, RuleField::kNwProto, false, 0, 0}));
  const absl::Status p =
      RuleError(RuleErrorKind::kInvalid, RuleField::kNwProto, ProtoName(RuleField::kNwProto), "x");
  EXPECT_EQ(p.message(), "ip_proto: x");
  EXPECT_EQ(RuleError(RuleErrorKind::kLimit, RuleField::kMaxRules, "y").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(RuleError(RuleErrorKind::kNotFound, RuleField::kId, "y").code(),
            absl::StatusCode::kInvalidArgument);

  absl::Status with_other = s;
  with_other.SetPayload("type.example/other", absl::Cord("kept"));
  const absl::Status at = AtOperation(with_other, 3, 17);
  EXPECT_EQ(at.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(at.message(), "operation 3 (rule id 17): nw_proto: requires IP");
  EXPECT_EQ(GetRuleOpError(at),
            (RuleOpError{RuleErrorKind::kInvalid, RuleField::kNwProto, true, 3, 17}));
  EXPECT_EQ(at.GetPayload("type.example/other"), absl::Cord("kept"));
  // A status without the payload: the operation is known, nothing else.
  const absl::Status plain = AtOperation(absl::InvalidArgumentError("nw_proto: z"), 1, 2);
  EXPECT_EQ(plain.message(), "operation 1 (rule id 2): nw_proto: z");
  EXPECT_EQ(GetRuleOpError(plain),
            (RuleOpError{RuleErrorKind::kInvalid, RuleField::kNone, true, 1, 2}));
}

TEST(RuleErrorTest, RenameTouchesOnlyTheFieldAfterThePrefix) {
  const absl::Status at =
      AtOperation(RuleError(RuleErrorKind::kInvalid, RuleField::kNwProto, "nw_proto: again"), 4, 9);
  const RuleOpError e = *GetRuleOpError(at);
  EXPECT_EQ(RenameErrorField(at.message(), e, "ip_proto"),
            "operation 4 (rule id 9): ip_proto: nw_proto: again");
  // A message in another form is left as it is (only the message: the
  // payload still gives the field).
  EXPECT_EQ(RenameErrorField("reworded: nw_proto: bad", e, "ip_proto"), "reworded: nw_proto: bad");
  RuleOpError none = e;
  none.field = RuleField::kNone;
  EXPECT_EQ(RenameErrorField(at.message(), none, "x"), at.message());
}

// The rule table's errors carry the payload; what classifies them is the
// payload alone.
TEST(RuleErrorTest, TableErrorsAreClassifiedByPayloadNotText) {
  RuleTable t;
  Rule r;
  r.id = 5;
  ASSERT_TRUE(t.ApplyBatch({RuleOp::Insert(r)}).ok());
  Rule six = r;
  six.id = 6;
  const absl::Status missing = t.ApplyBatch({RuleOp::Insert(six), RuleOp::Delete(7)}).status();
  EXPECT_EQ(missing.message(), "operation 1 (rule id 7): id: delete of unknown rule id 7");
  EXPECT_EQ(GetRuleOpError(missing),
            (RuleOpError{RuleErrorKind::kNotFound, RuleField::kId, true, 1, 7}));
  const absl::Status exists = t.ApplyBatch({RuleOp::Insert(r)}).status();
  EXPECT_EQ(GetRuleOpError(exists),
            (RuleOpError{RuleErrorKind::kAlreadyExists, RuleField::kId, true, 0, 5}));
  // The same text without the payload is no typed error at all.
  EXPECT_FALSE(GetRuleOpError(absl::InvalidArgumentError(missing.message())).has_value());
}

}  // namespace
}  // namespace flowclass
