// ApplyRules streams over a FakeDataplane, through a real gRPC server on
// 127.0.0.1 (port 0) and the C++ client library: acks in order with their
// generations, the API's limits (batch ops, table size, open streams,
// message size), deadlines, and group commit of queued batches
// (apply_stream.h).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rich_error.h"
#include "proto/rule_convert.h"
#include "server/api/api_test_fixture.h"
#include "tests/common/ack_reader.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

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

TEST_F(ApiTest, LimitsBatchOpsRulesStreamsMessageSize) {
  GrpcServerConfig cfg;
  cfg.max_batch_ops = 10;
  cfg.max_concurrent_streams = 2;
  cfg.max_streams_per_identity = 2;  // one connection may take both
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
  ASSERT_TRUE(ReadAck(stream.get(), &ack));
  EXPECT_EQ(ack.status().code(), kExhausted);
  EXPECT_THAT(ack.status().message(), HasSubstr("grpc.max_batch_ops"));
  EXPECT_EQ(fake_->generation(), 0u);
  eleven.pop_back();
  ASSERT_TRUE(stream->Write(Batch(2, eleven)));
  ASSERT_TRUE(ReadAck(stream.get(), &ack));
  EXPECT_EQ(ack.status().code(), kOk);
  // Table limit: 10 + 3 > 12.
  ASSERT_TRUE(stream->Write(Batch(3, {Insert(MakeRule(20)), Insert(MakeRule(21)),
                                      Insert(MakeRule(22))})));
  ASSERT_TRUE(ReadAck(stream.get(), &ack));
  EXPECT_EQ(ack.status().code(), kExhausted);
  const std::optional<FieldViolation> v = GetFieldViolation(ack.status());
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->op_index, 2u);
  EXPECT_EQ(v->field, "max_rules");
  EXPECT_EQ(v->path, "ops[2].insert");
  EXPECT_EQ(v->reason, "LIMIT");
  EXPECT_EQ(fake_->ListRules().size(), 10u);

  // Streams: this one is open; one more is fine, a third is refused.
  grpc::ClientContext ctx2, ctx3;
  auto s2 = client_->stub()->ApplyRules(&ctx2);
  ASSERT_TRUE(s2->Write(Batch(1, {})));
  ASSERT_TRUE(ReadAck(s2.get(), &ack));  // s2 is now surely open on the server
  auto s3 = client_->stub()->ApplyRules(&ctx3);
  s3->Write(Batch(1, {}));
  EXPECT_FALSE(ReadAck(s3.get(), &ack));
  const grpc::Status st3 = s3->Finish();
  EXPECT_EQ(st3.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st3.error_message(), HasSubstr("grpc.max_concurrent_streams"));
  s2->WritesDone();
  EXPECT_TRUE(s2->Finish().ok());

  // Message size: a batch over 64 KiB ends the stream, nothing applied.
  v1::ApplyRulesRequest big;
  for (uint64_t id = 100; id < 110; ++id) {
    v1::Rule r = MakeRule(id);
    r.set_text(std::string(8000, ' '));  // padding
    *big.add_ops()->mutable_insert() = r;
  }
  ASSERT_GT(big.ByteSizeLong(), 64u * 1024);
  stream->Write(big);
  EXPECT_FALSE(ReadAck(stream.get(), &ack));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(fake_->ListRules().size(), 10u);
}

// A dataplane whose ApplyBatch takes `delay`.
class SlowDataplane final : public InstrumentedDataplane {
 public:
  SlowDataplane(Dataplane* inner, std::chrono::milliseconds delay)
      : InstrumentedDataplane(inner), delay_(delay) {}
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
  while (ReadAck(stream.get(), &ack)) {
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
class GateDataplane final : public InstrumentedDataplane {
 public:
  explicit GateDataplane(Dataplane* inner) : InstrumentedDataplane(inner) {}
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

// A dataplane whose groups are applied at once but finished only when the
// test releases them (as flowclassd's durable dataplane finishes a group
// once its commit is synced); the first group's apply waits until `open`.
// Records the applies and finishes in the order they happen.
class DeferringDataplane final : public InstrumentedDataplane {
 public:
  explicit DeferringDataplane(Dataplane* inner) : InstrumentedDataplane(inner) {}
  Deferred ApplyBatchesDeferred(absl::Span<const absl::Span<const RuleOp>> batches) override {
    int g = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      g = applies_++;
    }
    ++entered;
    if (g == 0)
      while (!open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<absl::StatusOr<BatchResult>> results = inner_->ApplyBatches(batches);
    Log(absl::StrCat("apply ", g, " of ", batches.size()));
    return Deferred(std::move(results), [this, g](std::vector<absl::StatusOr<BatchResult>>*) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (released.load() <= g && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      Log(absl::StrCat("finish ", g));
    });
  }
  std::vector<std::string> Events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::atomic<bool> open{false};
  std::atomic<int> entered{0};   // applies started
  std::atomic<int> released{0};  // groups 0 .. released-1 may finish

 private:
  void Log(std::string e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  std::mutex mu_;
  int applies_ = 0;
  std::vector<std::string> events_;
};

// The stream applies the next group while the one before it is still
// finishing (its fsync, in flowclassd), and writes each group's acks after
// its own finish, in batch order.
TEST_F(ApiTest, TheNextGroupIsAppliedWhileTheGroupBeforeFinishes) {
  FakeDataplane inner;
  DeferringDataplane dp(&inner);
  Start({}, {}, &dp);
  grpc::ClientContext ctx;
  auto stream = client_->stub()->ApplyRules(&ctx);
  ASSERT_TRUE(stream->Write(Batch(1, {Insert(MakeRule(1))})));
  // Batches 2 and 3 queue while batch 1's group is held in its apply.
  while (dp.entered.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(stream->Write(Batch(2, {Insert(MakeRule(2))})));
  ASSERT_TRUE(stream->Write(Batch(3, {Insert(MakeRule(3))})));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the reader queues them
  dp.open = true;
  // Group 2 is applied while group 1 is not finished (nothing released).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (dp.Events().size() < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(dp.Events(), (std::vector<std::string>{"apply 0 of 1", "apply 1 of 2"}));
  dp.released = 2;
  stream->WritesDone();
  const auto [seen, codes] = ReadAcks(stream.get());
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, uint64_t>>{{1, 1}, {2, 2}, {3, 3}}));
  EXPECT_EQ(codes, (std::vector<int>{kOk, kOk, kOk}));
  EXPECT_EQ(dp.Events(),
            (std::vector<std::string>{"apply 0 of 1", "apply 1 of 2", "finish 0", "finish 1"}));
}

}  // namespace
}  // namespace flowclass
