// The flowclass.v1 rule calls over a FakeDataplane, through a real gRPC
// server on 127.0.0.1 (port 0) and the C++ client library: health, batch
// atomicity, deletes by cookie, listing (ListRules in pages, page tokens, GetRule,
// DeleteAll), the bad-input table and errors classified by their payload.
// Streaming and group commit: grpc_apply_stream_test.cc; stats, config and
// trace: grpc_config_stats_test.cc.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/rules/rule_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/api_test_fixture.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

TEST_F(ApiTest, HealthServing) {
  Start();
  EXPECT_EQ(client_->Healthy("").value_or(false), true);
  EXPECT_EQ(client_->Healthy("flowclass.v1.ClassifierService").value_or(false), true);
  server_->Shutdown(std::chrono::milliseconds(100));
  auto c = Connect(std::chrono::milliseconds(500));
  EXPECT_FALSE(c->Healthy("").ok());
}

TEST_F(ApiTest, BatchWithOneBadRuleChangesNothingAndNamesIt) {
  Start();
  ASSERT_EQ(Apply(Batch(1, {Insert(MakeRule(1))})).status().code(), kOk);
  v1::Rule bad = MakeRule(3);
  bad.mutable_match()->set_ipv4_dst("10.0.0.256");
  const v1::BatchAck ack =
      Apply(Batch(2, {Insert(MakeRule(2)), Insert(bad), Insert(MakeRule(4))}));
  EXPECT_EQ(ack.batch_id(), 2u);
  EXPECT_EQ(ack.status().code(), kInvalid);
  ASSERT_EQ(ViolationCount(ack), 1);
  EXPECT_EQ(Violation(ack).op_index.value_or(~0u), 1u);
  EXPECT_EQ(Violation(ack).rule_id, 3u);
  EXPECT_EQ(Violation(ack).field, "ipv4_dst");
  // google.rpc.BadRequest: the field's path in the request, and the message.
  EXPECT_EQ(Violation(ack).path, "ops[1].insert.match.ipv4_dst");
  EXPECT_EQ(Violation(ack).description, ack.status().message());
  EXPECT_EQ(Violation(ack).reason, "INVALID_RULE");
  EXPECT_THAT(ack.status().message(), HasSubstr("operation 1 (rule id 3): ipv4_dst:"));
  EXPECT_EQ(ack.generation(), 1u);
  EXPECT_EQ(RuleIds(), std::vector<uint64_t>({1}));

  // A semantic error found by ValidateRule in the table: an IPv4 field on an
  // ARP rule.  (Address bits outside the mask are no such error: the address
  // syntax clears them, as ovs-ofctl does.)
  v1::Rule on_arp = MakeRule(5);
  on_arp.mutable_match()->set_eth_type(0x0806);
  const v1::BatchAck ack2 = Apply(Batch(3, {Insert(MakeRule(6)), Insert(on_arp)}));
  EXPECT_EQ(ack2.status().code(), kInvalid);
  ASSERT_EQ(ViolationCount(ack2), 1);
  EXPECT_EQ(Violation(ack2).op_index.value_or(~0u), 1u);
  EXPECT_EQ(Violation(ack2).rule_id, 5u);
  EXPECT_EQ(Violation(ack2).field, "ipv4_src");
  EXPECT_EQ(fake_->generation(), 1u);
  EXPECT_EQ(RuleIds(), std::vector<uint64_t>({1}));
}

TEST_F(ApiTest, DeleteByCookieAndListFilters) {
  Start();
  const v1::BatchAck first = Apply(Batch(1, {Insert(MakeRule(1, 5, 7)), Insert(MakeRule(2, 6, 8)),
                                             Insert(MakeRule(3, 7, 7)), Insert(MakeRule(4, 8, 9))}));
  ASSERT_EQ(first.status().code(), kOk);
  EXPECT_EQ(first.rules(), 4u);  // in the table after the batch
  v1::ListRulesRequest req;
  req.set_cookie(7);
  auto listed = client_->ListRules(req);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id(), 3u);  // priority desc
  EXPECT_EQ((*listed)[1].id(), 1u);
  req.Clear();
  req.set_min_priority(6);
  req.set_max_priority(7);
  listed = client_->ListRules(req);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id(), 3u);
  EXPECT_EQ((*listed)[1].id(), 2u);
  // What comes back is what went in.
  EXPECT_EQ((*listed)[1].match().ipv4_src(), "10.0.2.0/24");
  EXPECT_EQ((*listed)[1].match().tp_dst().exact(), 53u);

  const v1::BatchAck ack = Apply(Batch(2, {DeleteCookie(7), DeleteCookie(12345)}));
  EXPECT_EQ(ack.status().code(), kOk);
  EXPECT_EQ(ack.deleted(), 2u);
  EXPECT_EQ(ack.rules(), 2u);
  EXPECT_EQ(RuleIds(), std::vector<uint64_t>({2, 4}));

  auto one = client_->GetRule(4);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->cookie(), 9u);
  EXPECT_EQ(client_->GetRule(1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->GetRule(0).status().code(), absl::StatusCode::kInvalidArgument);

  auto all = client_->DeleteAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->deleted(), 2u);
  EXPECT_EQ(all->generation(), 3u);
  EXPECT_TRUE(fake_->ListRules().empty());
}

TEST_F(ApiTest, ListRulesSendsTheRulesInBoundedPages) {
  // The pages hold exactly the stream of single rules (same filters, limit,
  // order, hits), at most page_size rules each, and under half the server's
  // message limit (64 KiB here: pages of at most 32 KiB).
  GrpcServerConfig cfg;
  cfg.max_message_bytes = 64 * 1024;
  cfg.max_batch_ops = 10000;
  Start(cfg);
  for (uint64_t b = 0; b < 5; ++b) {  // batches under the message limit
    std::vector<v1::RuleOp> ops;
    for (uint64_t id = 1 + 500 * b; id <= 500 * (b + 1); ++id)
      ops.push_back(Insert(MakeRule(id, static_cast<uint32_t>(id % 97), id % 3)));
    ASSERT_EQ(Apply(Batch(b + 1, ops)).status().code(), kOk);
  }
  // One rule a page: the listing in its plainest form.
  auto singles = [&](v1::ListRulesRequest req) {
    req.set_page_size(1);
    grpc::ClientContext ctx;
    auto reader = client_->stub()->ListRules(&ctx, req);
    std::vector<std::string> out;
    v1::ListRulesResponse r;
    while (reader->Read(&r)) {
      EXPECT_EQ(r.rules_size(), 1);
      for (const v1::Rule& rule : r.rules()) out.push_back(rule.SerializeAsString());
    }
    EXPECT_TRUE(reader->Finish().ok());
    return out;
  };
  auto paged = [&](const v1::ListRulesRequest& req, std::vector<size_t>* sizes) {
    grpc::ClientContext ctx;
    auto reader = client_->stub()->ListRules(&ctx, req);
    std::vector<std::string> out;
    v1::ListRulesResponse page;
    while (reader->Read(&page)) {
      EXPECT_GT(page.rules_size(), 0);
      EXPECT_LE(page.ByteSizeLong(), 32u * 1024);
      sizes->push_back(static_cast<size_t>(page.rules_size()));
      for (const v1::Rule& r : page.rules()) out.push_back(r.SerializeAsString());
    }
    EXPECT_TRUE(reader->Finish().ok());
    return out;
  };
  struct Case {
    const char* name;
    v1::ListRulesRequest req;
  };
  std::vector<Case> cases(4);
  cases[0].name = "all, default pages";
  cases[1].name = "page_size 100";
  cases[1].req.set_page_size(100);
  cases[2].name = "cookie 1, limit 333, page_size 50";
  cases[2].req.set_cookie(1);
  cases[2].req.set_limit(333);
  cases[2].req.set_page_size(50);
  cases[3].name = "priorities 10..20, page_size 1";
  cases[3].req.set_min_priority(10);
  cases[3].req.set_max_priority(20);
  cases[3].req.set_page_size(1);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<size_t> sizes;
    const std::vector<std::string> want = singles(c.req);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(paged(c.req, &sizes), want);
    const size_t cap = c.req.page_size() ? c.req.page_size() : 1024;
    for (size_t n : sizes) EXPECT_LE(n, cap);
    // Every page but the last is full by count or by bytes.
    EXPECT_LE(sizes.size(), want.size() / std::min<size_t>(cap, 32 * 1024 / 64) + 2);
  }
  // The client library reads pages: the same rules as the stream of singles.
  absl::StatusOr<std::vector<v1::Rule>> listed = client_->ListRules();
  ASSERT_TRUE(listed.ok());
  std::vector<std::string> got;
  for (const v1::Rule& r : *listed) got.push_back(r.SerializeAsString());
  EXPECT_EQ(got, singles({}));
  // The filters' errors are ListRules'.
  v1::ListRulesRequest bad;
  bad.set_min_priority(5);
  bad.set_max_priority(4);
  grpc::ClientContext ctx;
  auto reader = client_->stub()->ListRules(&ctx, bad);
  v1::ListRulesResponse page;
  EXPECT_FALSE(reader->Read(&page));
  const grpc::Status st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("min_priority"));
}

// A listing that broke resumes from the last page's token: the pages read
// before plus the listing resumed are the whole listing, with no rule twice.
// A token of other filters, or none of ours, is INVALID_ARGUMENT naming
// page_token in a BadRequest.
TEST_F(ApiTest, ListRulesResumesFromAPageToken) {
  Start();
  std::vector<v1::RuleOp> ops;
  for (uint64_t id = 1; id <= 700; ++id)
    ops.push_back(Insert(MakeRule(id, static_cast<uint32_t>(id % 7), id % 2)));
  ASSERT_EQ(Apply(Batch(1, ops)).status().code(), kOk);
  v1::ListRulesRequest req;
  req.set_cookie(1);
  req.set_page_size(100);
  std::vector<uint64_t> whole;
  std::vector<std::string> tokens;
  {
    grpc::ClientContext ctx;
    auto reader = client_->stub()->ListRules(&ctx, req);
    for (v1::ListRulesResponse page; reader->Read(&page);) {
      for (const v1::Rule& r : page.rules()) whole.push_back(r.id());
      tokens.push_back(page.next_page_token());
    }
    ASSERT_TRUE(reader->Finish().ok());
  }
  ASSERT_EQ(whole.size(), 350u);
  ASSERT_EQ(tokens.size(), 4u);
  EXPECT_TRUE(tokens.back().empty()) << "the last page has no token";
  for (size_t i = 0; i + 1 < tokens.size(); ++i) EXPECT_FALSE(tokens[i].empty()) << i;
  // Resume after page 2 (a break after reading 200 rules): the rest.
  v1::ListRulesRequest resume = req;
  resume.set_page_token(tokens[1]);
  std::vector<uint64_t> rest;
  {
    grpc::ClientContext ctx;
    auto reader = client_->stub()->ListRules(&ctx, resume);
    for (v1::ListRulesResponse page; reader->Read(&page);)
      for (const v1::Rule& r : page.rules()) rest.push_back(r.id());
    ASSERT_TRUE(reader->Finish().ok());
  }
  EXPECT_EQ(rest, std::vector<uint64_t>(whole.begin() + 200, whole.end()));
  // `limit` cut the listing: its last page still resumes.
  v1::ListRulesRequest limited = req;
  limited.set_limit(150);
  {
    grpc::ClientContext ctx;
    auto reader = client_->stub()->ListRules(&ctx, limited);
    std::string last;
    size_t n = 0;
    for (v1::ListRulesResponse page; reader->Read(&page);) {
      n += static_cast<size_t>(page.rules_size());
      last = page.next_page_token();
    }
    ASSERT_TRUE(reader->Finish().ok());
    EXPECT_EQ(n, 150u);
    EXPECT_FALSE(last.empty()) << "rules are left after the limit";
  }
  for (const auto& [token, cookie] : std::vector<std::pair<std::string, uint64_t>>{
           {tokens[1], 0},     // another cookie filter
           {"not-a-token", 1},  // not ours
       }) {
    v1::ListRulesRequest bad = req;
    bad.set_cookie(cookie);
    bad.set_page_token(token);
    grpc::ClientContext ctx;
    auto reader = client_->stub()->ListRules(&ctx, bad);
    v1::ListRulesResponse page;
    EXPECT_FALSE(reader->Read(&page));
    const grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << token;
    const std::optional<FieldViolation> v = GetFieldViolation(st);
    ASSERT_TRUE(v.has_value()) << "a BadRequest in grpc-status-details-bin";
    EXPECT_EQ(v->path, "page_token");
    EXPECT_THAT(v->description, HasSubstr("page_token: "));
  }
}

struct BadInput {
  const char* name;
  std::vector<v1::RuleOp> ops;
  int code;
  int op_index;       // -1: no per-op error
  const char* field;
};

TEST_F(ApiTest, BadInputTable) {
  GrpcServerConfig cfg;
  cfg.max_batch_ops = 4;
  Start(cfg);
  ASSERT_EQ(Apply(Batch(1, {Insert(MakeRule(1, 10, 5)), Insert(MakeRule(2, 10, 5))}))
                .status().code(),
            kOk);
  v1::Rule frag = MakeRule(10);
  frag.mutable_match()->set_ip_frag(static_cast<v1::Frag>(42));
  v1::Rule v6 = MakeRule(11);
  v6.mutable_match()->clear_ipv4_src();
  v6.mutable_match()->set_ipv6_dst("2001:db8:::1");
  v1::Rule mac = MakeRule(12);
  mac.mutable_match()->set_eth_src("00:11:22:33:44:5g");
  v1::Rule mask = MakeRule(13);
  mask.mutable_match()->set_ipv4_src("10.0.0.0/255.0.300.0");
  v1::Rule out_port = MakeRule(14);
  out_port.mutable_action()->set_output_port(70000);
  v1::Rule no_action = MakeRule(15);
  no_action.clear_action();
  v1::Rule zero = MakeRule(0);
  v1::Rule bad_text;
  bad_text.set_id(16);
  bad_text.set_text("priority=1,udp,nw_src=10.0.0.0/33,actions=drop");
  v1::Rule bad_text_id;  // the id only in the text: the OpError names it
  bad_text_id.set_text("id=77,priority=1,udp,nw_src=10.0.0.0/33,actions=drop");
  v1::Rule bad_text_hex_id;  // ids are native numbers: hex too
  bad_text_hex_id.set_text("id=0x4d,priority=1,udp,nw_src=10.0.0.0/33,actions=drop");
  // Errors found by the rule table's validation, in v1.Match's names for a
  // structured rule (the table calls them nw_proto, nw_tos, ipv6_src_lo).
  v1::Rule proto_mask = MakeRule(17);
  proto_mask.mutable_match()->mutable_ip_proto()->set_value(6);
  proto_mask.mutable_match()->mutable_ip_proto()->set_mask(1);
  v1::Rule tos_mask = MakeRule(18);
  tos_mask.mutable_match()->mutable_ip_tos()->set_value(3);
  tos_mask.mutable_match()->mutable_ip_tos()->set_mask(0xfc);
  v1::Rule v6_on_ipv4 = MakeRule(19);
  v6_on_ipv4.mutable_match()->clear_ipv4_src();
  v6_on_ipv4.mutable_match()->set_ipv6_src("2001:db8::1/128");
  v6_on_ipv4.mutable_match()->set_eth_type(0x0800);
  // The same mistake written as native text keeps the native name.
  v1::Rule text_proto;
  text_proto.set_id(20);
  text_proto.set_text("priority=1,nw_proto=6,actions=drop");  // no eth_type
  // What a newer client might send: a oneof case this server does not know
  // (unknown fields to it).
  v1::RuleOp unknown_op;
  unknown_op.GetReflection()->MutableUnknownFields(&unknown_op)->AddVarint(15, 1);
  v1::Rule unknown_action = MakeRule(21);
  unknown_action.mutable_action()->Clear();
  unknown_action.mutable_action()->GetReflection()
      ->MutableUnknownFields(unknown_action.mutable_action())->AddVarint(15, 1);
  const BadInput cases[] = {
      {"oversized batch",
       {Insert(MakeRule(3)), Insert(MakeRule(4)), Insert(MakeRule(5)), Insert(MakeRule(6)),
        Insert(MakeRule(7))},
       kExhausted, 4, "ops"},  // the first operation past max_batch_ops (4)
      {"op of an unknown kind", {Insert(MakeRule(3)), unknown_op}, kInvalid, 1, "op"},
      {"action of an unknown kind", {Insert(unknown_action)}, kInvalid, 0, "action"},
      {"unknown enum value", {Insert(MakeRule(3)), Insert(frag)}, kInvalid, 1, "ip_frag"},
      {"op not set", {Insert(MakeRule(3)), v1::RuleOp()}, kInvalid, 1, "op"},
      {"duplicate ids in batch", {Insert(MakeRule(3)), Insert(MakeRule(3))}, kExists, 1, "id"},
      {"insert of existing id", {Insert(MakeRule(3)), Insert(MakeRule(2))}, kExists, 1, "id"},
      {"delete of unknown id", {Insert(MakeRule(3)), DeleteId(99)}, kNotFound, 1, "id"},
      {"replace of unknown id", {Replace(MakeRule(98))}, kNotFound, 0, "id"},
      {"delete id 0", {DeleteId(0)}, kInvalid, 0, "delete_id"},
      {"rule id 0", {Insert(zero)}, kInvalid, 0, "id"},
      {"malformed ipv6", {Insert(MakeRule(3)), Insert(v6)}, kInvalid, 1, "ipv6_dst"},
      {"malformed mac", {Insert(mac)}, kInvalid, 0, "eth_src"},
      {"malformed ipv4 mask", {Insert(mask)}, kInvalid, 0, "ipv4_src"},
      {"output port too big", {Insert(out_port)}, kInvalid, 0, "action"},
      {"no action", {Insert(no_action)}, kInvalid, 0, "action"},
      {"bad native text", {Insert(bad_text)}, kInvalid, 0, "text"},
      {"bad native text with its own id", {Insert(bad_text_id)}, kInvalid, 0, "text"},
      {"bad native text with its own hex id", {Insert(bad_text_hex_id)}, kInvalid, 0, "text"},
      {"ip_proto value outside its mask", {Insert(proto_mask)}, kInvalid, 0, "ip_proto"},
      {"ip_tos value outside its mask", {Insert(tos_mask)}, kInvalid, 0, "ip_tos"},
      {"ipv6_src on an IPv4 rule", {Insert(v6_on_ipv4)}, kInvalid, 0, "ipv6_src"},
      {"native text: native name", {Insert(text_proto)}, kInvalid, 0, "nw_proto"},
  };
  uint64_t batch_id = 10;
  for (const BadInput& c : cases) {
    const v1::BatchAck ack = Apply(Batch(batch_id, c.ops));
    EXPECT_EQ(ack.batch_id(), batch_id) << c.name;
    ++batch_id;
    EXPECT_EQ(ack.status().code(), c.code) << c.name << ": " << ack.status().message();
    if (c.op_index < 0) {
      EXPECT_EQ(ViolationCount(ack), 0) << c.name;
    } else {
      ASSERT_EQ(ViolationCount(ack), 1) << c.name;
      EXPECT_EQ(Violation(ack).op_index.value_or(~0u), static_cast<uint32_t>(c.op_index)) << c.name;
      EXPECT_EQ(Violation(ack).field, c.field) << c.name << ": " << ack.status().message();
      EXPECT_EQ(ReasonCode(Violation(ack).reason), c.code) << c.name;
      // The message names the same field as `field` (when it names one).
      if (*c.field != 0 && c.op_index >= 0 && c.code == kInvalid) {
        EXPECT_THAT(ack.status().message(), HasSubstr(absl::StrCat(c.field, ": "))) << c.name;
      }
    }
    if (std::string(c.name).rfind("bad native text with its own", 0) == 0) {
      EXPECT_EQ(Violation(ack).rule_id, 77u) << ack.status().message();
    }
    if (std::string(c.name).find("unknown kind") != std::string::npos) {
      EXPECT_THAT(ack.status().message(), HasSubstr("a kind this server does not know")) << c.name;
    }
    EXPECT_EQ(ack.generation(), 1u) << c.name;
    EXPECT_EQ(fake_->generation(), 1u) << c.name;
    EXPECT_EQ(RuleIds(), std::vector<uint64_t>({1, 2})) << c.name;
  }
  // Empty batch: OK, nothing changes.
  const v1::BatchAck empty = Apply(Batch(1000, {}));
  EXPECT_EQ(empty.status().code(), kOk);
  EXPECT_EQ(empty.generation(), 1u);
  EXPECT_EQ(fake_->applied_batches().size(), 1u);
}

// The API's code, OpError and field come from the error's typed payload
// (dataplane/rules/rule_error.h), never from its message: a reworded message
// changes none of them, and the old text without the payload classifies
// nothing.
TEST_F(ApiTest, ErrorsAreClassifiedByTheirPayloadNotTheirText) {
  Start();
  ASSERT_EQ(Apply(Batch(1, {Insert(MakeRule(1)), Insert(MakeRule(2))})).status().code(), kOk);
  auto typed = [](RuleErrorKind kind, RuleField field, uint32_t index, uint64_t id,
                  const char* message) {
    absl::Status s = absl::InvalidArgumentError(message);
    SetRuleOpError(&s, RuleOpError{kind, field, /*has_op=*/true, index, id});
    return s;
  };
  v1::RuleOp text_rule;  // sent as native text: told in native names
  text_rule.mutable_insert()->set_text("id=4,priority=1,udp,actions=drop");
  struct Case {
    const char* name;
    absl::Status error;  // what the dataplane answers
    std::vector<v1::RuleOp> ops;
    int code;
    uint32_t op_index;
    uint64_t rule_id;
    const char* field;
  };
  const Case cases[] = {
      {"unknown id, reworded",
       typed(RuleErrorKind::kNotFound, RuleField::kId, 1, 99, "a wholly new wording"),
       {Insert(MakeRule(3)), DeleteId(99)}, kNotFound, 1, 99, "id"},
      {"existing id, reworded", typed(RuleErrorKind::kAlreadyExists, RuleField::kId, 0, 2, "taken"),
       {Insert(MakeRule(2))}, kExists, 0, 2, "id"},
      {"limit, reworded", typed(RuleErrorKind::kLimit, RuleField::kMaxEntries, 0, 3, "too big"),
       {Insert(MakeRule(3))}, kExhausted, 0, 3, "max_entries"},
      {"structured rule: v1 name",
       typed(RuleErrorKind::kInvalid, RuleField::kNwProto, 0, 3, "bad protocol"),
       {Insert(MakeRule(3))}, kInvalid, 0, 3, "ip_proto"},
      {"text rule: native name",
       typed(RuleErrorKind::kInvalid, RuleField::kNwProto, 1, 4, "bad protocol"),
       {Insert(MakeRule(3)), text_rule}, kInvalid, 1, 4, "nw_proto"},
  };
  uint64_t batch_id = 2;
  for (const Case& c : cases) {
    fake_->FailNextApply(c.error);
    const v1::BatchAck ack = Apply(Batch(batch_id++, c.ops));
    EXPECT_EQ(ack.status().code(), c.code) << c.name;
    EXPECT_EQ(ack.status().message(), c.error.message()) << c.name;  // as the dataplane said it
    ASSERT_EQ(ViolationCount(ack), 1) << c.name;
    EXPECT_EQ(Violation(ack).op_index.value_or(~0u), c.op_index) << c.name;
    EXPECT_EQ(Violation(ack).rule_id, c.rule_id) << c.name;
    EXPECT_EQ(Violation(ack).field, c.field) << c.name;
    EXPECT_EQ(ReasonCode(Violation(ack).reason), c.code) << c.name;
    EXPECT_EQ(ack.generation(), 1u) << c.name;
  }

  // Today's texts without the payload: the dataplane's code, no OpError.
  for (const char* text :
       {"operation 1 (rule id 99): id: delete of unknown rule id 99",
        "operation 1 (rule id 2): id: insert of rule id 2 which already exists",
        "operation 1 (rule id 3): max_rules: the table would hold 3 rules, limit 2"}) {
    fake_->FailNextApply(absl::InvalidArgumentError(text));
    const v1::BatchAck ack = Apply(Batch(batch_id++, {Insert(MakeRule(3)), DeleteId(99)}));
    EXPECT_EQ(ack.status().code(), kInvalid) << text;
    EXPECT_EQ(ack.status().message(), text);
    EXPECT_EQ(ViolationCount(ack), 0) << text;
  }
  EXPECT_EQ(RuleIds(), std::vector<uint64_t>({1, 2}));

  // DeleteAll lists the rules again only for a typed unknown id: the old
  // text alone is an error as it is (not retried, not NOT_FOUND) ...
  fake_->FailNextApply(
      absl::InvalidArgumentError("operation 0 (rule id 1): id: delete of unknown rule id 1"));
  absl::StatusOr<v1::BatchAck> all = client_->DeleteAll();
  EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument) << all.status();
  EXPECT_EQ(RuleIds(), std::vector<uint64_t>({1, 2}));
  // ... while the payload, whatever the message, is retried.
  fake_->FailNextApply(typed(RuleErrorKind::kNotFound, RuleField::kId, 0, 1, "gone meanwhile"));
  all = client_->DeleteAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->deleted(), 2u);
  EXPECT_TRUE(RuleIds().empty());
}

}  // namespace
}  // namespace flowclass
