// The flowclass.v1 API over a FakeDataplane, through a real gRPC server on
// 127.0.0.1 (port 0) and the C++ client library: batch atomicity, ordering,
// generations, deletes by cookie, limits, deadlines, the bad-input table,
// stats, config and trace.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "client/rpc/flowclass_client.h"
#include "dataplane/rules/rule_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rule_convert.h"
#include "server/api/grpc_server.h"
#include "tests/common/fake_dataplane.h"
#include "tests/common/packet_builder.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

constexpr int kOk = 0;
constexpr int kInvalid = static_cast<int>(absl::StatusCode::kInvalidArgument);
constexpr int kNotFound = static_cast<int>(absl::StatusCode::kNotFound);
constexpr int kExists = static_cast<int>(absl::StatusCode::kAlreadyExists);
constexpr int kExhausted = static_cast<int>(absl::StatusCode::kResourceExhausted);

// A structured rule: udp from 10.0.<id>.0/24 to port `port`, output:1.
v1::Rule MakeRule(uint64_t id, uint32_t priority = 10, uint64_t cookie = 0,
                  uint32_t port = 53) {
  v1::Rule r;
  r.set_id(id);
  r.set_priority(priority);
  r.set_cookie(cookie);
  r.mutable_match()->set_ipv4_src(absl::StrCat("10.0.", id % 256, ".0/24"));
  r.mutable_match()->mutable_ip_proto()->set_value(17);
  r.mutable_match()->mutable_tp_dst()->set_exact(port);
  r.mutable_action()->set_output_port(1);
  return r;
}

v1::RuleBatch Batch(uint64_t id, std::vector<v1::RuleOp> ops) {
  v1::RuleBatch b;
  b.set_batch_id(id);
  for (v1::RuleOp& op : ops) *b.add_ops() = std::move(op);
  return b;
}
v1::RuleOp Insert(v1::Rule r) {
  v1::RuleOp op;
  *op.mutable_insert() = std::move(r);
  return op;
}
v1::RuleOp Replace(v1::Rule r) {
  v1::RuleOp op;
  *op.mutable_replace() = std::move(r);
  return op;
}
v1::RuleOp DeleteId(uint64_t id) {
  v1::RuleOp op;
  op.set_delete_id(id);
  return op;
}
v1::RuleOp DeleteCookie(uint64_t c) {
  v1::RuleOp op;
  op.set_delete_cookie(c);
  return op;
}

// Reads a stream's acks to the end: (batch id, generation) and status codes.
std::pair<std::vector<std::pair<uint64_t, uint64_t>>, std::vector<int>> ReadAcks(
    grpc::ClientReaderWriter<v1::RuleBatch, v1::BatchAck>* stream) {
  v1::BatchAck ack;
  std::vector<std::pair<uint64_t, uint64_t>> seen;
  std::vector<int> codes;
  while (stream->Read(&ack)) {
    seen.emplace_back(ack.batch_id(), ack.generation());
    codes.push_back(ack.status_code());
  }
  return {seen, codes};
}

class ApiTest : public ::testing::Test {
 protected:
  void Start(GrpcServerConfig cfg = {}, RuleTableLimits limits = {},
             Dataplane* dp = nullptr) {
    fake_ = std::make_unique<FakeDataplane>(limits);
    cfg.address = "127.0.0.1";
    cfg.port = 0;
    cfg.plaintext = true;
    absl::StatusOr<std::unique_ptr<GrpcServer>> s =
        StartGrpcServer(dp ? dp : fake_.get(), cfg);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    ASSERT_GT(server_->port(), 0);
    client_ = Connect();
  }
  std::unique_ptr<FlowclassClient> Connect(std::chrono::milliseconds timeout =
                                               std::chrono::milliseconds(10000)) {
    ClientOptions o;
    o.target = server_->target();
    o.plaintext = true;
    o.timeout = timeout;
    auto c = FlowclassClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  v1::BatchAck Apply(v1::RuleBatch b) {
    absl::StatusOr<v1::BatchAck> ack = client_->ApplyBatch(b);
    EXPECT_TRUE(ack.ok()) << ack.status();
    return ack.ok() ? *ack : v1::BatchAck();
  }
  std::vector<uint64_t> RuleIds() {
    std::vector<uint64_t> ids;
    for (const Rule& r : fake_->ListRules()) ids.push_back(r.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  std::unique_ptr<FakeDataplane> fake_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<FlowclassClient> client_;
};

TEST_F(ApiTest, HealthServing) {
  Start();
  EXPECT_EQ(client_->Healthy("").value_or(false), true);
  EXPECT_EQ(client_->Healthy("flowclass.v1.Classifier").value_or(false), true);
  server_->Shutdown(std::chrono::milliseconds(100));
  auto c = Connect(std::chrono::milliseconds(500));
  EXPECT_FALSE(c->Healthy("").ok());
}

TEST_F(ApiTest, BatchWithOneBadRuleChangesNothingAndNamesIt) {
  Start();
  ASSERT_EQ(Apply(Batch(1, {Insert(MakeRule(1))})).status_code(), kOk);
  v1::Rule bad = MakeRule(3);
  bad.mutable_match()->set_ipv4_dst("10.0.0.256");
  const v1::BatchAck ack =
      Apply(Batch(2, {Insert(MakeRule(2)), Insert(bad), Insert(MakeRule(4))}));
  EXPECT_EQ(ack.batch_id(), 2u);
  EXPECT_EQ(ack.status_code(), kInvalid);
  ASSERT_EQ(ack.errors_size(), 1);
  EXPECT_EQ(ack.errors(0).op_index(), 1u);
  EXPECT_EQ(ack.errors(0).rule_id(), 3u);
  EXPECT_EQ(ack.errors(0).field(), "ipv4_dst");
  EXPECT_THAT(ack.status_message(), HasSubstr("operation 1 (rule id 3): ipv4_dst:"));
  EXPECT_EQ(ack.generation(), 1u);
  EXPECT_EQ(RuleIds(), std::vector<uint64_t>({1}));

  // A semantic error found by ValidateRule in the table: an IPv4 field on an
  // ARP rule.  (Address bits outside the mask are no such error: the address
  // syntax clears them, as ovs-ofctl does.)
  v1::Rule on_arp = MakeRule(5);
  on_arp.mutable_match()->set_eth_type(0x0806);
  const v1::BatchAck ack2 = Apply(Batch(3, {Insert(MakeRule(6)), Insert(on_arp)}));
  EXPECT_EQ(ack2.status_code(), kInvalid);
  ASSERT_EQ(ack2.errors_size(), 1);
  EXPECT_EQ(ack2.errors(0).op_index(), 1u);
  EXPECT_EQ(ack2.errors(0).rule_id(), 5u);
  EXPECT_EQ(ack2.errors(0).field(), "ipv4_src");
  EXPECT_EQ(fake_->generation(), 1u);
  EXPECT_EQ(RuleIds(), std::vector<uint64_t>({1}));
}

TEST_F(ApiTest, StreamAcksInOrderWithGenerations) {
  Start();
  std::vector<RuleOp> ops;
  for (uint64_t id = 1; id <= 250; ++id) {
    v1::Rule p = MakeRule(id, static_cast<uint32_t>(id % 7), id % 3);
    ASSERT_TRUE(RuleOpFromProto(Insert(p), &ops.emplace_back()).ok());
  }
  ops.push_back(RuleOp::Delete(17));
  ApplyOptions o;
  o.batch_size = 10;
  o.window = 4;
  o.first_batch_id = 100;
  std::vector<size_t> progress;
  o.progress = [&](size_t done, size_t total) {
    EXPECT_EQ(total, 251u);
    progress.push_back(done);
  };
  absl::StatusOr<ApplyResult> r = client_->ApplyOps(ops, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->first_error.has_value());
  EXPECT_EQ(r->batches_acked, 26u);
  EXPECT_EQ(r->ops_applied, 251u);
  EXPECT_EQ(r->generation, 26u);  // one generation per batch
  ASSERT_EQ(progress.size(), 26u);
  for (size_t i = 1; i < progress.size(); ++i) EXPECT_GT(progress[i], progress[i - 1]);
  EXPECT_EQ(progress.back(), 251u);
  // Applied in stream order: batch k of the fake holds ids 10k+1..10k+10.
  const auto batches = fake_->applied_batches();
  ASSERT_EQ(batches.size(), 26u);
  for (size_t k = 0; k < 25; ++k) EXPECT_EQ(batches[k][0].rule.id, 10 * k + 1);
  EXPECT_EQ(batches[25][0].kind, RuleOp::Kind::kDelete);
  EXPECT_EQ(fake_->ListRules().size(), 249u);

  // Acks of one hand-driven stream: ids echoed, generations +1, a rejected
  // batch keeps the generation, an empty batch is OK with the current one.
  grpc::ClientContext ctx;
  auto stream = client_->stub()->ApplyRules(&ctx);
  ASSERT_TRUE(stream->Write(Batch(7, {Insert(MakeRule(300))})));
  ASSERT_TRUE(stream->Write(Batch(5, {Insert(MakeRule(300))})));  // duplicate
  ASSERT_TRUE(stream->Write(Batch(9, {})));
  ASSERT_TRUE(stream->Write(Batch(1, {DeleteId(300)})));
  stream->WritesDone();
  const auto [seen, codes] = ReadAcks(stream.get());
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, uint64_t>>{{7, 27}, {5, 27}, {9, 27}, {1, 28}}));
  EXPECT_EQ(codes, (std::vector<int>{kOk, kExists, kOk, kOk}));
}

TEST_F(ApiTest, DeleteByCookieAndListFilters) {
  Start();
  const v1::BatchAck first = Apply(Batch(1, {Insert(MakeRule(1, 5, 7)), Insert(MakeRule(2, 6, 8)),
                                             Insert(MakeRule(3, 7, 7)), Insert(MakeRule(4, 8, 9))}));
  ASSERT_EQ(first.status_code(), kOk);
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
  EXPECT_EQ(ack.status_code(), kOk);
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

TEST_F(ApiTest, ListRulePagesSendsListRulesRulesInBoundedPages) {
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
    ASSERT_EQ(Apply(Batch(b + 1, ops)).status_code(), kOk);
  }
  auto singles = [&](const v1::ListRulesRequest& req) {
    grpc::ClientContext ctx;
    auto reader = client_->stub()->ListRules(&ctx, req);
    std::vector<std::string> out;
    v1::Rule r;
    while (reader->Read(&r)) out.push_back(r.SerializeAsString());
    EXPECT_TRUE(reader->Finish().ok());
    return out;
  };
  auto paged = [&](const v1::ListRulesRequest& req, std::vector<size_t>* sizes) {
    grpc::ClientContext ctx;
    auto reader = client_->stub()->ListRulePages(&ctx, req);
    std::vector<std::string> out;
    v1::RulePage page;
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
  auto reader = client_->stub()->ListRulePages(&ctx, bad);
  v1::RulePage page;
  EXPECT_FALSE(reader->Read(&page));
  const grpc::Status st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("min_priority"));
}

TEST_F(ApiTest, LimitsBatchOpsRulesStreamsMessageSize) {
  GrpcServerConfig cfg;
  cfg.max_batch_ops = 10;
  cfg.max_concurrent_streams = 2;
  cfg.max_message_bytes = 64 * 1024;
  RuleTableLimits limits;
  limits.max_rules = 12;
  Start(cfg, limits);

  // Batch ops: RESOURCE_EXHAUSTED ack, nothing applied, the stream goes on.
  std::vector<v1::RuleOp> eleven;
  for (uint64_t id = 1; id <= 11; ++id) eleven.push_back(Insert(MakeRule(id)));
  grpc::ClientContext ctx;
  auto stream = client_->stub()->ApplyRules(&ctx);
  ASSERT_TRUE(stream->Write(Batch(1, eleven)));
  v1::BatchAck ack;
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.status_code(), kExhausted);
  EXPECT_THAT(ack.status_message(), HasSubstr("grpc.max_batch_ops"));
  EXPECT_EQ(fake_->generation(), 0u);
  eleven.pop_back();
  ASSERT_TRUE(stream->Write(Batch(2, eleven)));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.status_code(), kOk);
  // Table limit: 10 + 3 > 12.
  ASSERT_TRUE(stream->Write(Batch(3, {Insert(MakeRule(20)), Insert(MakeRule(21)),
                                      Insert(MakeRule(22))})));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.status_code(), kExhausted);
  ASSERT_EQ(ack.errors_size(), 1);
  EXPECT_EQ(ack.errors(0).op_index(), 2u);
  EXPECT_EQ(ack.errors(0).field(), "max_rules");
  EXPECT_EQ(fake_->ListRules().size(), 10u);

  // Streams: this one is open; one more is fine, a third is refused.
  grpc::ClientContext ctx2, ctx3;
  auto s2 = client_->stub()->ApplyRules(&ctx2);
  ASSERT_TRUE(s2->Write(Batch(1, {})));
  ASSERT_TRUE(s2->Read(&ack));  // s2 is now surely open on the server
  auto s3 = client_->stub()->ApplyRules(&ctx3);
  s3->Write(Batch(1, {}));
  EXPECT_FALSE(s3->Read(&ack));
  const grpc::Status st3 = s3->Finish();
  EXPECT_EQ(st3.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st3.error_message(), HasSubstr("grpc.max_concurrent_streams"));
  s2->WritesDone();
  EXPECT_TRUE(s2->Finish().ok());

  // Message size: a batch over 64 KiB ends the stream, nothing applied.
  v1::RuleBatch big;
  for (uint64_t id = 100; id < 110; ++id) {
    v1::Rule r = MakeRule(id);
    r.set_text(std::string(8000, ' '));  // padding
    *big.add_ops()->mutable_insert() = r;
  }
  ASSERT_GT(big.ByteSizeLong(), 64u * 1024);
  stream->Write(big);
  EXPECT_FALSE(stream->Read(&ack));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(fake_->ListRules().size(), 10u);
}

// Forwards everything to `inner`, but groups and DeleteAll through this
// ApplyBatch; the test dataplanes below override the apply path only.
class ForwardingDataplane : public Dataplane {
 public:
  explicit ForwardingDataplane(Dataplane* inner) : inner_(inner) {}
  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override {
    return inner_->ApplyBatch(ops);
  }
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override {
    return ApplyBatchesOneByOne(*this, batches);
  }
  absl::StatusOr<BatchResult> DeleteAll() override { return DeleteAllByListing(*this); }
  absl::StatusOr<Rule> GetRule(uint64_t id) const override { return inner_->GetRule(id); }
  absl::StatusOr<TraceResult> Trace(const FlowKey& key) const override {
    return inner_->Trace(key);
  }
  absl::StatusOr<std::vector<RuleHit>> RuleHits() const override {
    return inner_->RuleHits();
  }
  uint64_t generation() const override { return inner_->generation(); }
  std::vector<Rule> ListRules() const override { return inner_->ListRules(); }
  DataplaneStats Stats() const override { return inner_->Stats(); }
  std::map<std::string, std::string> GetConfig() const override {
    return inner_->GetConfig();
  }
  absl::StatusOr<std::string> GetConfig(absl::string_view k) const override {
    return inner_->GetConfig(k);
  }
  absl::Status ApplySettings(absl::Span<const ConfigValue> values) override {
    return inner_->ApplySettings(values);
  }

 protected:
  Dataplane* inner_;
};

// A dataplane whose ApplyBatch takes `delay`.
class SlowDataplane final : public ForwardingDataplane {
 public:
  SlowDataplane(Dataplane* inner, std::chrono::milliseconds delay)
      : ForwardingDataplane(inner), delay_(delay) {}
  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override {
    entered.fetch_add(1);
    std::this_thread::sleep_for(delay_);
    return inner_->ApplyBatch(ops);
  }
  std::atomic<int> entered{0};  // ApplyBatch calls started

 private:
  std::chrono::milliseconds delay_;
};

TEST_F(ApiTest, DeadlinePassedBatchIsNotApplied) {
  FakeDataplane inner;
  SlowDataplane slow(&inner, std::chrono::milliseconds(600));
  Start({}, {}, &slow);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  auto stream = client_->stub()->ApplyRules(&ctx);
  // Batch 1 is read before the deadline and takes 600 ms to apply; batch 2,
  // sent once that apply has started (so it cannot join batch 1's group),
  // is looked at after the deadline and must not be applied.
  stream->Write(Batch(1, {Insert(MakeRule(1))}));
  while (slow.entered.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stream->Write(Batch(2, {Insert(MakeRule(2))}));
  stream->WritesDone();
  v1::BatchAck ack;
  while (stream->Read(&ack)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // let the server finish
  std::vector<uint64_t> ids;
  for (const Rule& r : inner.ListRules()) ids.push_back(r.id);
  EXPECT_EQ(ids, std::vector<uint64_t>({1}));
  EXPECT_EQ(inner.generation(), 1u);
}

// Records the groups ApplyRules hands to the dataplane; the first group
// waits until `open` is set.
class GateDataplane final : public ForwardingDataplane {
 public:
  explicit GateDataplane(Dataplane* inner) : ForwardingDataplane(inner) {}
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      groups.push_back(batches.size());
    }
    while (!open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return inner_->ApplyBatches(batches);
  }
  std::vector<size_t> Groups() {
    std::lock_guard<std::mutex> lock(mu);
    return groups;
  }
  std::atomic<bool> open{false};

 private:
  std::mutex mu;
  std::vector<size_t> groups;
};

// Batches that queue up on a stream while the dataplane is busy are applied
// as one group (one publication), with the acks of one batch at a time:
// in order, each with its own generation, a bad batch rejected alone.
TEST_F(ApiTest, QueuedBatchesAreAppliedAsOneGroupWithPerBatchAcks) {
  FakeDataplane inner;
  GateDataplane gate(&inner);
  Start({}, {}, &gate);
  grpc::ClientContext ctx;
  auto stream = client_->stub()->ApplyRules(&ctx);
  ASSERT_TRUE(stream->Write(Batch(1, {Insert(MakeRule(1))})));
  while (gate.Groups().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The dataplane is held inside batch 1's group; these queue up behind it.
  v1::Rule bad = MakeRule(4);
  bad.mutable_match()->set_ipv4_src("10.0.0.300/24");
  ASSERT_TRUE(stream->Write(Batch(2, {Insert(MakeRule(2))})));
  ASSERT_TRUE(stream->Write(Batch(3, {Insert(MakeRule(3))})));
  ASSERT_TRUE(stream->Write(Batch(4, {Insert(MakeRule(40)), Insert(bad)})));
  ASSERT_TRUE(stream->Write(Batch(5, {Insert(MakeRule(2))})));  // duplicate id
  ASSERT_TRUE(stream->Write(Batch(6, {DeleteId(1)})));
  stream->WritesDone();
  // Let the server's reader take them off the stream (synchronisation
  // only: the assertions below hold for any grouping except "one each").
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  gate.open = true;
  const auto [seen, codes] = ReadAcks(stream.get());
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, uint64_t>>{
                      {1, 1}, {2, 2}, {3, 3}, {4, 3}, {5, 3}, {6, 4}}));
  EXPECT_EQ(codes, (std::vector<int>{kOk, kOk, kOk, kInvalid, kExists, kOk}));
  // Batch 4 never reached the dataplane (its rule 40 is not there either).
  std::vector<uint64_t> ids;
  for (const Rule& r : inner.ListRules()) ids.push_back(r.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, std::vector<uint64_t>({2, 3}));
  // Two groups: batch 1, then the four valid batches that queued behind it.
  EXPECT_EQ(gate.Groups(), (std::vector<size_t>{1, 4}));
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
                .status_code(),
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
    EXPECT_EQ(ack.status_code(), c.code) << c.name << ": " << ack.status_message();
    if (c.op_index < 0) {
      EXPECT_EQ(ack.errors_size(), 0) << c.name;
    } else {
      ASSERT_EQ(ack.errors_size(), 1) << c.name;
      EXPECT_EQ(ack.errors(0).op_index(), static_cast<uint32_t>(c.op_index)) << c.name;
      EXPECT_EQ(ack.errors(0).field(), c.field) << c.name << ": " << ack.status_message();
      EXPECT_EQ(ack.errors(0).code(), c.code) << c.name;
      // The message names the same field as `field` (when it names one).
      if (*c.field != 0 && c.op_index >= 0 && c.code == kInvalid) {
        EXPECT_THAT(ack.status_message(), HasSubstr(absl::StrCat(c.field, ": "))) << c.name;
      }
    }
    if (std::string(c.name).rfind("bad native text with its own", 0) == 0) {
      EXPECT_EQ(ack.errors(0).rule_id(), 77u) << ack.status_message();
    }
    if (std::string(c.name).find("unknown kind") != std::string::npos) {
      EXPECT_THAT(ack.status_message(), HasSubstr("a kind this server does not know")) << c.name;
    }
    EXPECT_EQ(ack.generation(), 1u) << c.name;
    EXPECT_EQ(fake_->generation(), 1u) << c.name;
    EXPECT_EQ(RuleIds(), std::vector<uint64_t>({1, 2})) << c.name;
  }
  // Empty batch: OK, nothing changes.
  const v1::BatchAck empty = Apply(Batch(1000, {}));
  EXPECT_EQ(empty.status_code(), kOk);
  EXPECT_EQ(empty.generation(), 1u);
  EXPECT_EQ(fake_->applied_batches().size(), 1u);
}

// The API's code, OpError and field come from the error's typed payload
// (dataplane/rules/rule_error.h), never from its message: a reworded message
// changes none of them, and the old text without the payload classifies
// nothing.
TEST_F(ApiTest, ErrorsAreClassifiedByTheirPayloadNotTheirText) {
  Start();
  ASSERT_EQ(Apply(Batch(1, {Insert(MakeRule(1)), Insert(MakeRule(2))})).status_code(), kOk);
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
    EXPECT_EQ(ack.status_code(), c.code) << c.name;
    EXPECT_EQ(ack.status_message(), c.error.message()) << c.name;  // as the dataplane said it
    ASSERT_EQ(ack.errors_size(), 1) << c.name;
    EXPECT_EQ(ack.errors(0).op_index(), c.op_index) << c.name;
    EXPECT_EQ(ack.errors(0).rule_id(), c.rule_id) << c.name;
    EXPECT_EQ(ack.errors(0).field(), c.field) << c.name;
    EXPECT_EQ(ack.errors(0).code(), c.code) << c.name;
    EXPECT_EQ(ack.generation(), 1u) << c.name;
  }

  // Today's texts without the payload: the dataplane's code, no OpError.
  for (const char* text :
       {"operation 1 (rule id 99): id: delete of unknown rule id 99",
        "operation 1 (rule id 2): id: insert of rule id 2 which already exists",
        "operation 1 (rule id 3): max_rules: the table would hold 3 rules, limit 2"}) {
    fake_->FailNextApply(absl::InvalidArgumentError(text));
    const v1::BatchAck ack = Apply(Batch(batch_id++, {Insert(MakeRule(3)), DeleteId(99)}));
    EXPECT_EQ(ack.status_code(), kInvalid) << text;
    EXPECT_EQ(ack.status_message(), text);
    EXPECT_EQ(ack.errors_size(), 0) << text;
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

TEST_F(ApiTest, StatsTotalsAndRuleHits) {
  Start();
  DataplaneStats s;
  for (uint32_t i = 0; i < 2; ++i) {
    PmdCounters p;
    p.pmd = i;
    p.lcore = i + 1;
    p.rx_packets = 100 * (i + 1);
    p.busy_cycles = 1000 * (i + 1);
    p.idle_cycles = 50;
    p.pipeline.packets = 100 * (i + 1);
    p.pipeline.emc_hits = 10 * (i + 1);
    p.pipeline.megaflow_hits = 20;
    p.pipeline.subtable_lookups = 30;
    p.pipeline.upcall_ok = 5;
    p.pipeline.cd_hits = 3;
    // Where PMD i's packets went (distinct values, each field checked).
    p.tx_packets = 60 * (i + 1);
    p.tx_dropped = 1 + i;
    p.rule_drops = 20 + i;
    p.no_match = 7 + i;
    p.bad_port = 3 + i;
    p.parse_errors = 2 + i;
    p.iterations = 500 + i;
    p.pipeline.revalidation_cycles = 700 + i;
    p.pipeline.upcall_cycles = 800 + i;
    if (i == 1) {  // PMD 1 answered the snapshot request, PMD 0 did not
      p.has_snapshot = true;
      p.snapshot.cd_enabled = true;
      p.snapshot.emc_occupancy = 12;
      p.snapshot.emc_entries = 8192;
      p.snapshot.smc_entries = 1024;
      p.snapshot.megaflows = 9;
      p.snapshot.subtables = 2;
      SubtableInfo t;
      t.id = 4;
      t.in_port = 1;
      t.mask.Set(Field::kInPort, 0xffffffff);
      t.megaflows = 7;
      t.hits = 99;
      t.rank = 0;
      t.lookup_fn = "avx512";
      p.snapshot.subtable.push_back(t);
    }
    s.pmds.push_back(p);
  }
  PortCounters port;
  port.number = 1;
  port.device = "net_pcap0";
  port.tx_packets = 77;
  s.ports.push_back(port);
  fake_->SetStats(s);
  fake_->SetRuleHits({{1, 40}, {2, 2}});
  ASSERT_EQ(Apply(Batch(1, {Insert(MakeRule(1)), Insert(MakeRule(2))})).status_code(), kOk);
  auto st = client_->GetStats(/*include_subtables=*/true, /*include_rule_hits=*/true);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->generation(), 1u);
  EXPECT_EQ(st->rules(), 2u);
  ASSERT_EQ(st->pmd_size(), 2);
  EXPECT_EQ(st->pmd(1).lcore(), 2u);
  EXPECT_EQ(st->pmd(1).packets(), 200u);
  // The PMD snapshot: occupancy, CD state, megaflow-classifier subtables.
  EXPECT_TRUE(st->pmd(1).cd_enabled());
  EXPECT_EQ(st->pmd(1).emc_occupancy(), 12u);
  EXPECT_EQ(st->pmd(1).emc_entries(), 8192u);
  EXPECT_EQ(st->pmd(1).smc_entries(), 1024u);
  EXPECT_EQ(st->pmd(1).megaflows(), 9u);
  ASSERT_EQ(st->pmd(1).subtable_size(), 1);
  EXPECT_EQ(st->pmd(1).subtable(0).hits(), 99u);
  EXPECT_EQ(st->pmd(1).subtable(0).lookup_impl(), "avx512");
  EXPECT_EQ(st->pmd(1).subtable(0).mask(), "in_port=4294967295");
  EXPECT_EQ(st->pmd(0).emc_entries(), 0u);  // no snapshot from PMD 0
  EXPECT_EQ(st->total().megaflows(), 9u);
  EXPECT_EQ(st->total().subtables(), 2u);
  EXPECT_EQ(st->total().packets(), 300u);
  EXPECT_EQ(st->total().emc_hits(), 30u);
  EXPECT_EQ(st->total().megaflow_hits(), 40u);
  EXPECT_EQ(st->total().cd_hits(), 6u);
  EXPECT_DOUBLE_EQ(st->total().avg_subtable_lookups_per_hit(), 1.5);
  EXPECT_DOUBLE_EQ(st->total().avg_cycles_per_packet(), 10.0);
  EXPECT_EQ(st->pmd(1).tx_packets(), 120u);
  EXPECT_EQ(st->pmd(1).tx_dropped(), 2u);
  EXPECT_EQ(st->pmd(1).rule_drops(), 21u);
  EXPECT_EQ(st->pmd(1).no_match(), 8u);
  EXPECT_EQ(st->pmd(1).bad_port(), 4u);
  EXPECT_EQ(st->pmd(1).parse_errors(), 3u);
  EXPECT_EQ(st->pmd(1).iterations(), 501u);
  EXPECT_EQ(st->pmd(1).cycles_revalidation(), 701u);
  EXPECT_EQ(st->pmd(1).cycles_upcall(), 801u);
  EXPECT_EQ(st->total().cycles_revalidation(), 1401u);
  EXPECT_EQ(st->total().cycles_upcall(), 1601u);
  EXPECT_EQ(st->total().tx_packets(), 180u);
  EXPECT_EQ(st->total().tx_dropped(), 3u);
  EXPECT_EQ(st->total().rule_drops(), 41u);
  EXPECT_EQ(st->total().bad_port(), 7u);
  EXPECT_EQ(st->total().parse_errors(), 5u);
  EXPECT_EQ(st->total().iterations(), 1001u);
  ASSERT_EQ(st->port_size(), 1);
  EXPECT_EQ(st->port(0).tx_packets(), 77u);
  ASSERT_EQ(st->rule_hits_size(), 2);
  EXPECT_EQ(st->rule_hits(0).hits(), 40u);
  auto r1 = client_->GetRule(1);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->hits(), 40u);
  const std::string text = FormatStats(*st);
  EXPECT_THAT(text, HasSubstr("pmd thread 1 (lcore 2)"));
  EXPECT_THAT(text, HasSubstr("emc hits: 30"));
  EXPECT_THAT(text, HasSubstr("avg. subtable lookups per megaflow hit: 1.50"));
  EXPECT_THAT(text, HasSubstr("  dropped by a rule: 21\n"
                              "  output to an unknown port (dropped): 4\n"
                              "  sent: 120\n"
                              "  tx dropped (queue full): 2\n"
                              "  truncated or malformed headers: 3\n"));
}

TEST_F(ApiTest, ConfigGetSetAndRollback) {
  Start();
  fake_->DefineConfig("pipeline.emc_insert_inv_prob", "100", true);
  fake_->DefineConfig("dpcls.lookup_prio.generic", "1", true);
  fake_->DefineConfig("dpcls.lookup_prio.avx512", "0", true);
  auto c = client_->GetConfig();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->emc_insert_inv_prob(), 100u);
  EXPECT_EQ(c->values().at("pmd.tx_retries"), "4");
  EXPECT_EQ(c->lookup_impls_size(), 2);

  v1::Config set;
  set.set_emc_insert_inv_prob(7);
  v1::LookupImpl* li = set.add_lookup_impls();
  li->set_name("avx512");
  li->set_priority(5);
  (*set.mutable_values())["pmd.tx_retries"] = "9";
  auto after = client_->SetConfig(set);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->emc_insert_inv_prob(), 7u);
  EXPECT_EQ(*fake_->GetConfig("dpcls.lookup_prio.avx512"), "5");
  EXPECT_EQ(*fake_->GetConfig("pmd.tx_retries"), "9");

  // One bad key: nothing changes (the request is checked as a whole first).
  v1::Config bad;
  bad.set_emc_insert_inv_prob(11);
  (*bad.mutable_values())["pmd.burst"] = "8";  // start-up only
  EXPECT_EQ(client_->SetConfig(bad).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*fake_->GetConfig("pipeline.emc_insert_inv_prob"), "7");
  bad.clear_values();
  (*bad.mutable_values())["pmd.no_such_key"] = "1";
  EXPECT_EQ(client_->SetConfig(bad).status().code(), absl::StatusCode::kNotFound);
  bad.clear_values();
  (*bad.mutable_values())["pmd.tx_retries"] = "many";
  EXPECT_EQ(client_->SetConfig(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*fake_->GetConfig("pipeline.emc_insert_inv_prob"), "7");
  EXPECT_EQ(*fake_->GetConfig("pmd.tx_retries"), "9");
  // Unknown enum value for a cache mode.
  v1::Config mode;
  mode.set_smc(static_cast<v1::CacheMode>(9));
  auto m = client_->SetConfig(mode);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("smc"));
  mode.set_smc(v1::CACHE_MODE_AUTO);  // AUTO is for the CD only
  EXPECT_EQ(client_->SetConfig(mode).status().code(), absl::StatusCode::kInvalidArgument);
  // Read-modify-write: everything GetConfig returned, start-up-only keys
  // included, written back with one change: only that one changes.
  auto now = client_->GetConfig();
  ASSERT_TRUE(now.ok());
  ASSERT_TRUE(now->values().contains("pmd.burst"));
  v1::Config echo;
  *echo.mutable_values() = now->values();
  (*echo.mutable_values())["pmd.tx_retries"] = "3";
  auto echoed = client_->SetConfig(echo);
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*fake_->GetConfig("pmd.tx_retries"), "3");
  // The same key twice in one request (named field, then `values`): the
  // last one wins, even when it is the value the key had before.
  ASSERT_TRUE(fake_->SetConfig("pipeline.emc_insert_inv_prob", "7").ok());
  v1::Config twice;
  twice.set_emc_insert_inv_prob(50);
  (*twice.mutable_values())["pipeline.emc_insert_inv_prob"] = "7";
  ASSERT_TRUE(client_->SetConfig(twice).ok());
  EXPECT_EQ(*fake_->GetConfig("pipeline.emc_insert_inv_prob"), "7");
  // A start-up-only key with another value is still refused.
  (*echo.mutable_values())["pmd.burst"] = "7";
  EXPECT_EQ(client_->SetConfig(echo).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Counts the settings requests that reach the dataplane.
class CountingSettingsDataplane final : public ForwardingDataplane {
 public:
  using ForwardingDataplane::ForwardingDataplane;
  absl::Status ApplySettings(absl::Span<const ConfigValue> values) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.emplace_back(values.begin(), values.end());
    }
    return inner_->ApplySettings(values);
  }
  std::vector<std::vector<ConfigValue>> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::vector<ConfigValue>> requests_;
};

TEST_F(ApiTest, SetConfigIsOneAllOrNothingRequest) {
  FakeDataplane inner;
  inner.DefineConfig("pipeline.emc_insert_inv_prob", "100", true);
  inner.DefineConfig("pipeline.smc", "off", true);
  CountingSettingsDataplane dp(&inner);
  Start({}, {}, &dp);
  const std::map<std::string, std::string> before = inner.GetConfig();

  // A good key and a bad one: nothing changes, the error names the bad key,
  // and nothing is put back afterwards (the dataplane got one request).
  v1::Config set;
  set.set_emc_insert_inv_prob(7);
  (*set.mutable_values())["pipeline.smc"] = "sometimes";
  auto r = client_->SetConfig(set);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "pipeline.smc: \"sometimes\" is not on or off");
  EXPECT_EQ(inner.GetConfig(), before);
  ASSERT_EQ(dp.requests().size(), 1u);
  EXPECT_EQ(dp.requests()[0], (std::vector<ConfigValue>{{"pipeline.emc_insert_inv_prob", "7"},
                                                        {"pipeline.smc", "sometimes"}}));
  // Bad last or first, and whatever the error: the same.
  (*set.mutable_values())["pipeline.smc"] = "on";
  (*set.mutable_values())["pmd.tx_retries"] = "-3";
  EXPECT_EQ(client_->SetConfig(set).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(inner.GetConfig(), before);
  (*set.mutable_values())["pmd.tx_retries"] = "3";
  (*set.mutable_values())["pmd.burst"] = "8";
  EXPECT_EQ(client_->SetConfig(set).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(inner.GetConfig(), before);
  set.mutable_values()->erase("pmd.burst");
  (*set.mutable_values())["no.such"] = "1";
  EXPECT_EQ(client_->SetConfig(set).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(inner.GetConfig(), before);
  EXPECT_EQ(dp.requests().size(), 4u);

  // All good: all of them, in one request.
  set.mutable_values()->erase("no.such");
  auto ok = client_->SetConfig(set);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->emc_insert_inv_prob(), 7u);
  EXPECT_EQ(ok->smc(), v1::CACHE_MODE_ON);
  EXPECT_EQ(*inner.GetConfig("pmd.tx_retries"), "3");
  ASSERT_EQ(dp.requests().size(), 5u);
  EXPECT_EQ(dp.requests().back().size(), 3u);
  // Nothing to change: nothing sent.
  ASSERT_TRUE(client_->SetConfig(set).ok());
  EXPECT_EQ(dp.requests().size(), 5u);
}

TEST_F(ApiTest, TraceFlowAndPacket) {
  Start();
  v1::Rule wide = MakeRule(1, 5);
  wide.mutable_match()->set_ipv4_src("10.0.0.0/8");
  v1::Rule narrow = MakeRule(2, 9);
  narrow.mutable_match()->set_ipv4_src("10.1.2.0/24");
  narrow.mutable_action()->mutable_drop();
  ASSERT_EQ(Apply(Batch(1, {Insert(wide), Insert(narrow)})).status_code(), kOk);

  v1::TraceRequest req;
  req.set_flow("in_port=3,udp,nw_src=10.1.2.3,nw_dst=1.2.3.4,tp_src=9,tp_dst=53");
  auto t = client_->Trace(req);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rule_id(), 2u);
  EXPECT_TRUE(t->action().has_drop());
  EXPECT_EQ(t->layer(), "slow_path");
  EXPECT_EQ(t->generation(), 1u);
  EXPECT_GE(t->rule_subtables_visited(), 1u);
  EXPECT_THAT(t->megaflow(), HasSubstr("in_port=3"));
  EXPECT_THAT(t->rule(), HasSubstr("id=2"));

  const std::vector<uint8_t> frame = PacketBuilder()
                                         .Eth(0x020000000001, 0x020000000002)
                                         .Ipv4(0x0a090000, 0x01020304)
                                         .Udp(1000, 53)
                                         .Build();
  req.Clear();
  req.set_packet(std::string(frame.begin(), frame.end()));
  req.set_in_port(1);
  t = client_->Trace(req);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rule_id(), 1u);
  EXPECT_EQ(t->action().output_port(), 1u);
  EXPECT_THAT(t->key(), HasSubstr("in_port=1"));

  req.Clear();
  req.set_flow("udp,nw_src=10.0.0.0/8");
  t = client_->Trace(req);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "flow: nw_src: a mask is not allowed in a trace (exact values only)");
  req.set_flow("udp,nw_src=1.2.3.4,tp_dst=10-20");
  EXPECT_EQ(client_->Trace(req).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Trace(req).status().message(),
            "flow: tp_dst: a range is not allowed in a trace (exact values only)");
  // A whole-address prefix is an exact value; a rule's own keys are not
  // packet fields; in_port goes with a packet only.
  req.set_flow("in_port=3,udp,nw_src=10.1.2.3/32,nw_dst=1.2.3.4,tp_src=9,tp_dst=53");
  t = client_->Trace(req);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rule_id(), 2u);
  req.set_flow("udp,nw_src=10.1.2.3/31");
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("flow: nw_src: a mask"));
  // Whole-field masks written other ways are exact too; a partial one is not.
  for (const char* flow : {"in_port=3,udp,nw_src=10.1.2.3/255.255.255.255,tp_dst=53",
                           "in_port=3,udp,nw_src=10.1.2.3,tp_dst=0x35/0xffff"}) {
    req.set_flow(flow);
    t = client_->Trace(req);
    ASSERT_TRUE(t.ok()) << flow << ": " << t.status();
    EXPECT_EQ(t->rule_id(), 2u) << flow;
  }
  req.set_flow("in_port=3,udp,nw_src=10.1.2.3,tp_dst=0x35/0xff");
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("flow: tp_dst: a mask"));
  req.set_flow("priority=9,udp,nw_src=10.1.2.3");
  EXPECT_EQ(client_->Trace(req).status().message(), "flow: priority: not a packet field");
  req.set_flow("udp,nw_src=10.1.2.3");
  req.set_in_port(3);
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("in_port: goes with packet"));
  req.clear_in_port();
  // A trace reports the action; it takes none, and not nothing.
  req.set_flow("in_port=1,udp,actions=drop");
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("flow: actions: "));
  req.set_flow(" ");
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("flow: empty"));
  // Keys that set part of a field are values, not masks: the packet has the
  // field's other bits 0.
  for (const char* flow : {"in_port=3,dl_vlan=5,udp,nw_src=10.1.2.3", "ip,nw_tos=4,nw_src=10.1.2.3",
                           "ip,ip_dscp=1,nw_src=10.1.2.3", "ip,ip_frag=first,nw_src=10.1.2.3",
                           "tcp,tcp_flags=+syn,nw_src=10.1.2.3"}) {
    req.set_flow(flow);
    t = client_->Trace(req);
    EXPECT_TRUE(t.ok()) << flow << ": " << t.status();
  }
  req.set_flow("in_port=3,dl_vlan=5,udp,nw_src=10.1.2.3");
  t = client_->Trace(req);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->key(), HasSubstr("vlan0_tci=0x1005"));
  req.Clear();
  EXPECT_EQ(client_->Trace(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_flow("udp,nw_src=1.2.3.4,tp_dst=99");
  t = client_->Trace(req);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rule_id(), 0u);
  EXPECT_TRUE(t->action().has_drop());
}

TEST(GrpcConfigTest, PlaintextNeedsLoopbackOrExplicitRemote) {
  GrpcServerConfig c;
  c.plaintext = true;
  EXPECT_TRUE(ValidateGrpcServerConfig(c).ok());
  c.address = "0.0.0.0";
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.allow_plaintext_remote"));
  c.allow_plaintext_remote = true;
  EXPECT_TRUE(ValidateGrpcServerConfig(c).ok());
  c = GrpcServerConfig();
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.tls_cert_file: required"));
  c.tls_cert_file = "a.pem";
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.tls_key_file"));
  c.tls_key_file = "k.pem";
  c.require_client_cert = true;
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.tls_ca_file"));
  c.tls_ca_file = "ca.pem";
  EXPECT_TRUE(ValidateGrpcServerConfig(c).ok());
  // A CA without mutual TLS would be silently unused: refused.
  c.require_client_cert = false;
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(),
              HasSubstr("grpc.tls_ca_file: only verifies client certificates"));
  GrpcServerConfig p;
  p.plaintext = true;
  p.tls_ca_file = "ca.pem";
  EXPECT_THAT(ValidateGrpcServerConfig(p).message(), HasSubstr("grpc.tls_ca_file: set, but plaintext"));
  c.address = "not an address";
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.address"));
  EXPECT_TRUE(IsLoopbackAddress("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]"));
  EXPECT_FALSE(IsLoopbackAddress("::"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
}

}  // namespace
}  // namespace flowclass
