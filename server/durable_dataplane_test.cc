// The rule store in the daemon's control plane, over the FakeDataplane:
// durable before ack (DurableDataplane), a timed-out publication stored like
// any applied batch, a failed append (DATA_LOSS, then
// every change refused), ReplaceRules as one generation, the server instance
// on acks and answers, and the start-up restore (rule_restore.h).
#include "server/durable_dataplane.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/rpc/flowclass_client.h"
#include "dataplane/forwarding_dataplane.h"
#include "dataplane/rules/rule_format.h"
#include "proto/rich_error.h"
#include "proto/rule_convert.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/grpc_server.h"
#include "server/log.h"
#include "server/rule_restore.h"
#include "server/testing/fake_dataplane.h"
#include "spdlog/sinks/ostream_sink.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

constexpr int kDataLoss = static_cast<int>(absl::StatusCode::kDataLoss);
constexpr int kUnavailable = static_cast<int>(absl::StatusCode::kUnavailable);

Rule R(uint64_t id, uint32_t port = 53) {
  absl::StatusOr<Rule> r = ParseNativeRule(
      absl::StrCat("id=", id, ",priority=10,udp,nw_src=10.0.", id % 256, ".0/24,tp_dst=", port,
                   ",actions=output:1"),
      1);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

std::vector<RuleOp> Inserts(uint64_t from, uint64_t to) {
  std::vector<RuleOp> ops;
  for (uint64_t id = from; id <= to; ++id) ops.push_back(RuleOp::Insert(R(id)));
  return ops;
}

std::vector<std::string> Texts(std::vector<Rule> rules) {
  std::sort(rules.begin(), rules.end(), [](const Rule& a, const Rule& b) { return a.id < b.id; });
  std::vector<std::string> out;
  for (const Rule& r : rules) out.push_back(r.ToString());
  return out;
}

std::unique_ptr<RuleStore> OpenStore(const std::string& dir, RuleStoreState* state) {
  absl::StatusOr<std::unique_ptr<RuleStore>> s = RuleStore::Open(dir);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  absl::StatusOr<RuleStoreState> st = (*s)->Load();
  EXPECT_TRUE(st.ok()) << st.status();
  if (st.ok()) *state = *std::move(st);
  return *std::move(s);
}

v1::ApplyRulesRequest V1Batch(uint64_t id, const std::vector<RuleOp>& ops) {
  v1::ApplyRulesRequest b;
  b.set_batch_id(id);
  for (const RuleOp& op : ops) {
    v1::RuleOp* o = b.add_ops();
    if (op.kind == RuleOp::Kind::kDelete) {
      o->set_delete_id(op.id);
    } else {
      RuleToProto(op.rule, o->mutable_insert());
    }
  }
  return b;
}

// Generation of rules.db alone (a copy without its -wal); 0 when the copy
// does not load (taken while a checkpoint writes it).
uint64_t CheckpointedGeneration(const std::string& dir, const std::string& copy_dir) {
  std::error_code ec;
  for (const char* f : {"/rules.db", "/rules.db-wal"}) std::filesystem::remove(copy_dir + f, ec);
  std::filesystem::copy_file(dir + "/rules.db", copy_dir + "/rules.db", ec);
  if (ec) return 0;
  absl::StatusOr<std::unique_ptr<RuleStore>> st = RuleStore::Open(copy_dir, {});
  if (!st.ok()) return 0;
  absl::StatusOr<RuleStoreState> loaded = (*st)->Load();
  return loaded.ok() ? loaded->generation : 0;
}

// A DurableDataplane over a FakeDataplane, with a store in a new directory.
class DurableFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    RuleStoreState st;
    store_ = OpenStore(dir_.path(), &st);
    ASSERT_NE(store_, nullptr);
    durable_ = std::make_unique<DurableDataplane>(&fake_, store_.get());
  }
  // Stops the DurableDataplane (its last commits and settle done), closes
  // the store and loads it again.
  RuleStoreState ReloadStore() {
    durable_.reset();
    store_.reset();
    RuleStoreState st;
    store_ = OpenStore(dir_.path(), &st);
    return st;
  }

  TempDir dir_{"durable_test"};
  FakeDataplane fake_;
  std::unique_ptr<RuleStore> store_;
  std::unique_ptr<DurableDataplane> durable_;
};

// A gRPC server over DurableDataplane over a FakeDataplane, with a store.
class DurableTest : public DurableFixture {
 protected:
  void SetUp() override {
    DurableFixture::SetUp();
    if (HasFatalFailure()) return;
    GrpcServerConfig cfg;
    cfg.address = "127.0.0.1";
    cfg.port = 0;
    cfg.plaintext = true;
    cfg.instance.boot_id = 0x1234abcd5678ef01u;
    cfg.instance.restored_generation = 0;
    cfg.instance.durable = true;
    cfg.instance.store_path = store_->path();
    auto s = StartGrpcServer(durable_.get(), cfg);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    ClientOptions o;
    o.target = server_->target();
    o.plaintext = true;
    auto c = FlowclassClient::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }
  // Stops the server, closes the store and loads it again.
  RuleStoreState Reload() {
    client_.reset();
    server_.reset();
    return ReloadStore();
  }

  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<FlowclassClient> client_;
};

TEST_F(DurableTest, EveryAckIsDurableWhenWritten) {
  ApplyOptions ao;
  ao.batch_size = 7;
  ao.window = 4;
  std::vector<RuleOp> ops = Inserts(1, 200);
  absl::StatusOr<ApplyResult> r = client_->ApplyOps(ops, ao);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->first_error.has_value());
  // Each ack, when it is written, is in the store: one at a time, the store
  // is at the ack's generation when the client reads it.
  for (uint64_t id = 201; id <= 210; ++id) {
    absl::StatusOr<v1::BatchAck> ack =
        client_->ApplyBatch(V1Batch(id, {RuleOp::Insert(R(id))}));
    ASSERT_TRUE(ack.ok()) << ack.status();
    ASSERT_EQ(ack->status().code(), 0) << ack->status().message();
    EXPECT_EQ(store_->generation(), ack->generation());
    EXPECT_EQ(ack->server().boot_id(), 0x1234abcd5678ef01u);
    EXPECT_TRUE(ack->server().durable());
    EXPECT_EQ(ack->server().store_path(), store_->path());
  }
  // A rejected batch (duplicate id) is not stored and changes no generation.
  const uint64_t gen = fake_.generation();
  absl::StatusOr<v1::BatchAck> dup = client_->ApplyBatch(V1Batch(999, {RuleOp::Insert(R(5))}));
  ASSERT_TRUE(dup.ok());
  EXPECT_NE(dup->status().code(), 0);
  EXPECT_EQ(store_->generation(), gen);
  // Deletes and DeleteAll are stored too.
  ASSERT_EQ(client_->ApplyBatch(V1Batch(1000, {RuleOp::Delete(3)}))->status().code(), 0);
  const std::vector<std::string> before_delete_all = Texts(fake_.ListRules());
  absl::StatusOr<v1::BatchAck> all = client_->DeleteAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->server().boot_id(), 0x1234abcd5678ef01u);
  EXPECT_EQ(store_->generation(), all->generation());
  ASSERT_EQ(client_->ApplyBatch(V1Batch(1001, Inserts(500, 510)))->status().code(), 0);
  const uint64_t final_gen = fake_.generation();
  const std::vector<std::string> final_rules = Texts(fake_.ListRules());
  RuleStoreState st = Reload();
  EXPECT_EQ(st.generation, final_gen);
  EXPECT_EQ(Texts(st.rules), final_rules);
  EXPECT_EQ(final_rules.size(), 11u);
  EXPECT_EQ(before_delete_all.size(), 209u);
}

// The checkpoint into rules.db runs once the store thread has been idle for
// kSettleWhenIdle: then rules.db alone (without its -wal) holds the group.
TEST_F(DurableTest, AnIdleStoreCheckpointsTheLastGroupIntoRulesDb) {
  ASSERT_EQ(client_->ApplyBatch(V1Batch(1, Inserts(1, 20)))->status().code(), 0);
  const uint64_t gen = fake_.generation();
  TempDir copy{"durable_test_copy"};
  uint64_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen != gen && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    seen = CheckpointedGeneration(dir_.path(), copy.path());
  }
  EXPECT_EQ(seen, gen) << "rules.db was not checkpointed within 10 s of an idle store";
}

TEST_F(DurableTest, StatsAndConfigTellWhichStart) {
  absl::StatusOr<v1::GetStatsResponse> s = client_->GetStats();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->server().boot_id(), 0x1234abcd5678ef01u);
  EXPECT_TRUE(s->server().durable());
  absl::StatusOr<v1::Config> c = client_->GetConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server().boot_id(), 0x1234abcd5678ef01u);
  EXPECT_EQ(c->server().restored_generation(), 0u);
}

TEST_F(DurableTest, AFailedAppendIsDataLossThenEveryChangeIsRefused) {
  ASSERT_EQ(client_->ApplyBatch(V1Batch(1, Inserts(1, 5)))->status().code(), 0);
  // A change behind the store's back: the next generation does not continue
  // the store's, so its append fails.
  ASSERT_TRUE(fake_.ApplyBatch(Inserts(100, 100)).ok());
  absl::StatusOr<v1::BatchAck> ack = client_->ApplyBatch(V1Batch(2, Inserts(6, 6)));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->status().code(), kDataLoss);
  EXPECT_THAT(ack->status().message(), HasSubstr("applied to the dataplane but is not durable"));
  EXPECT_THAT(ack->status().message(), HasSubstr("refuses rule changes until it is restarted"));
  EXPECT_TRUE(fake_.GetRule(6).ok());  // applied, not durable
  const uint64_t gen = fake_.generation();
  const size_t applied = fake_.applied_batches().size();
  ack = client_->ApplyBatch(V1Batch(3, Inserts(7, 7)));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->status().code(), kUnavailable);
  EXPECT_THAT(ack->status().message(), HasSubstr("refuses rule changes until it is restarted"));
  absl::StatusOr<v1::BatchAck> all = client_->DeleteAll();
  EXPECT_EQ(all.status().code(), absl::StatusCode::kUnavailable);
  absl::StatusOr<v1::BatchAck> rep = client_->ReplaceRules({R(1)});
  EXPECT_EQ(rep.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fake_.generation(), gen);
  EXPECT_EQ(fake_.applied_batches().size(), applied);
  EXPECT_FALSE(durable_->failure().ok());
  // Reads still work; the store holds the last durable generation.
  EXPECT_TRUE(client_->GetStats().ok());
  RuleStoreState st = Reload();
  EXPECT_EQ(st.generation, 1u);
  EXPECT_EQ(st.rules.size(), 5u);
}

// A dataplane whose publication waits (up to 10 s) for `wal` to hold
// `needle`: the commit of the group it is publishing.  It reports whether
// the commit came while it published.
class PublishingDataplane final : public ForwardingDataplane {
 public:
  PublishingDataplane(FakeDataplane* inner, std::string wal, std::string needle)
      : ForwardingDataplane(inner), wal_(std::move(wal)), needle_(std::move(needle)) {}
  std::vector<absl::StatusOr<BatchResult>> ApplyBatchesNotifying(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) override {
    std::vector<absl::StatusOr<BatchResult>> r = inner_->ApplyBatches(batches);
    decided(r);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!(committed_while_publishing_ = WalHolds()) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return r;
  }
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override {
    return ApplyBatchesNotifying(batches, [](absl::Span<const absl::StatusOr<BatchResult>>) {});
  }
  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override {
    const absl::Span<const RuleOp> one[] = {ops};
    return std::move(ApplyBatches(one).front());
  }

  bool committed_while_publishing() const { return committed_while_publishing_; }

 private:
  bool WalHolds() const {
    std::ifstream f(wal_, std::ios::binary);
    const std::string data((std::istreambuf_iterator<char>(f)), {});
    return data.find(needle_) != std::string::npos;
  }
  const std::string wal_, needle_;
  bool committed_while_publishing_ = false;
};

// The store commits a group while the dataplane publishes it, and the call
// returns once both are done; a commit that fails meanwhile is still
// DATA_LOSS for the published group, then every change is refused.
TEST(DurableOverlapTest, TheCommitOverlapsThePublication) {
  TempDir dir{"durable_overlap"};
  RuleStoreState st;
  std::unique_ptr<RuleStore> store = OpenStore(dir.path(), &st);
  ASSERT_NE(store, nullptr);
  constexpr uint64_t kMarker = 0x5eed5eed5eedull;  // the cookie, as the record stores it
  std::string needle;
  for (uint64_t c = kMarker; ; c >>= 7) {
    if (c < 0x80) {
      needle.push_back(static_cast<char>(c));
      break;
    }
    needle.push_back(static_cast<char>((c & 0x7f) | 0x80));
  }
  FakeDataplane fake;
  PublishingDataplane pub(&fake, dir.path() + "/rules.db-wal", needle);
  absl::StatusOr<BatchResult> r;
  {
    DurableDataplane durable(&pub, store.get());
    std::vector<RuleOp> ops = Inserts(1, 20);
    ops[7].rule.cookie = kMarker;
    r = durable.ApplyBatch(ops);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->generation, 1u);
    EXPECT_TRUE(pub.committed_while_publishing());

    ASSERT_TRUE(fake.ApplyBatch(Inserts(100, 100)).ok());  // behind the store's back
    r = durable.ApplyBatch(Inserts(30, 30));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("applied to the dataplane but is not durable"));
    EXPECT_TRUE(fake.GetRule(30).ok());
    r = durable.ApplyBatch(Inserts(31, 31));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_FALSE(fake.GetRule(31).ok());
  }
  store.reset();
  std::unique_ptr<RuleStore> again = OpenStore(dir.path(), &st);
  EXPECT_EQ(st.generation, 1u);
  EXPECT_EQ(st.rules.size(), 20u);
}

// Holds `durable`'s store thread, as a slow fsync would, until *released
// or 3 s have passed (so that code that waits for a commit where it should
// not fails its test instead of hanging it).
void HoldStoreThread(DurableDataplane& durable, const std::atomic<bool>* released) {
  durable.PostStoreJobForTesting([released] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!released->load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
}

// Finish()es `d` on another thread; true if that took at least 100 ms (it
// waited for something), then joins it.
bool FinishWaits(Dataplane::Deferred& d, std::atomic<bool>* released) {
  std::atomic<bool> finished{false};
  std::thread finisher([&] {
    d.Finish();
    finished = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const bool waited = !finished.load();
  *released = true;
  finisher.join();
  return waited;
}

// A DurableDataplane over a FakeDataplane and a new store, its store thread
// held (HoldStoreThread) until released_.
class DurableDeferredTest : public DurableFixture {
 protected:
  void SetUp() override {
    DurableFixture::SetUp();
    if (HasFatalFailure()) return;
    HoldStoreThread(*durable_, &released_);
  }
  // Releases the store thread, then ReloadStore().
  RuleStoreState Reload() {
    released_ = true;
    return ReloadStore();
  }

  std::atomic<bool> released_{false};
};

// ApplyBatchesDeferred returns once the group is applied and published,
// its commit still to come: the next group is applied while the store
// thread is held (as by a slow fsync), and each group's Finish() returns
// once its commit is done, in order.
TEST_F(DurableDeferredTest, TheNextGroupIsAppliedWhileTheCommitRuns) {
  const std::vector<RuleOp> one = Inserts(1, 10), two = Inserts(11, 20), three = Inserts(21, 21);
  const absl::Span<const RuleOp> g1[] = {one};
  const absl::Span<const RuleOp> g2[] = {two, three};
  Dataplane::Deferred d1 = durable_->ApplyBatchesDeferred(g1);
  EXPECT_FALSE(d1.finished());
  EXPECT_EQ(fake_.generation(), 1u);  // applied, its commit held
  Dataplane::Deferred d2 = durable_->ApplyBatchesDeferred(g2);
  EXPECT_EQ(fake_.generation(), 3u);  // the next group too
  EXPECT_TRUE(FinishWaits(d1, &released_)) << "finished before its commit ran";
  ASSERT_EQ(d1.Finish().size(), 1u);
  ASSERT_TRUE(d1.Finish()[0].ok()) << d1.Finish()[0].status();
  EXPECT_EQ(d1.Finish()[0]->generation, 1u);
  const std::vector<absl::StatusOr<BatchResult>>& r2 = d2.Finish();
  ASSERT_EQ(r2.size(), 2u);
  ASSERT_TRUE(r2[0].ok() && r2[1].ok());
  EXPECT_EQ(r2[1]->generation, 3u);
  EXPECT_TRUE(durable_->failure().ok()) << durable_->failure();
  const RuleStoreState st = Reload();
  EXPECT_EQ(st.generation, 3u);
  EXPECT_EQ(st.rules.size(), 21u);
}

// A group that changes nothing (an empty batch, a delete_cookie matching
// no rule) commits nothing, but its OK names the generation of the group
// before it: its Finish() waits for that group's commit.
TEST_F(DurableDeferredTest, AGroupThatChangesNothingWaitsForTheCommitBeforeIt) {
  const std::vector<RuleOp> one = Inserts(1, 3);
  const absl::Span<const RuleOp> g1[] = {one};
  const std::vector<RuleOp> by_cookie = {RuleOp::DeleteByCookie(0xdead)};  // matches no rule
  const absl::Span<const RuleOp> g2[] = {absl::Span<const RuleOp>(), by_cookie};
  Dataplane::Deferred d1 = durable_->ApplyBatchesDeferred(g1);
  Dataplane::Deferred d2 = durable_->ApplyBatchesDeferred(g2);
  EXPECT_FALSE(d2.finished());
  EXPECT_TRUE(FinishWaits(d2, &released_)) << "an OK for generation 1 before it is durable";
  for (const absl::StatusOr<BatchResult>& r : d2.Finish()) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->generation, 1u);
  }
  ASSERT_TRUE(d1.Finish()[0].ok());
}

// A group applied while an earlier group's commit was still running, and
// failed: both are DATA_LOSS (applied, not durable), the later one's commit
// refused, and so is a group that changed nothing after them; then every
// change is refused and nothing of it applied.
TEST_F(DurableDeferredTest, AGroupAppliedBeforeAnEarlierCommitFailedIsDataLossToo) {
  released_ = true;
  ASSERT_TRUE(durable_->ApplyBatch(Inserts(1, 5)).ok());
  ASSERT_TRUE(fake_.ApplyBatch(Inserts(100, 100)).ok());  // behind the store's back
  released_ = false;
  HoldStoreThread(*durable_, &released_);
  const std::vector<RuleOp> one = Inserts(6, 6), two = Inserts(7, 7);
  const absl::Span<const RuleOp> g1[] = {one};
  const absl::Span<const RuleOp> g2[] = {two};
  const absl::Span<const RuleOp> nothing[] = {absl::Span<const RuleOp>()};
  Dataplane::Deferred d1 = durable_->ApplyBatchesDeferred(g1);  // its commit will fail
  Dataplane::Deferred d2 = durable_->ApplyBatchesDeferred(g2);  // applied before that is known
  Dataplane::Deferred d3 = durable_->ApplyBatchesDeferred(nothing);  // OK at generation 4, if...
  released_ = true;
  const absl::StatusOr<BatchResult> r1 = d1.Finish()[0];
  const absl::StatusOr<BatchResult> r2 = d2.Finish()[0];
  const absl::StatusOr<BatchResult> r3 = d3.Finish()[0];
  EXPECT_EQ(r1.status().code(), absl::StatusCode::kDataLoss) << r1.status();
  EXPECT_THAT(r1.status().message(),
              HasSubstr("generation 3 was applied to the dataplane but is not durable"));
  EXPECT_THAT(r1.status().message(), HasSubstr("a restart restores generation 1"));
  EXPECT_EQ(r2.status().code(), absl::StatusCode::kDataLoss) << r2.status();
  EXPECT_THAT(r2.status().message(),
              HasSubstr("generation 4 was applied to the dataplane but is not durable"));
  EXPECT_THAT(r2.status().message(),
              HasSubstr("not committed: the rule store failed before it, at generation 3"));
  EXPECT_EQ(r3.status().code(), absl::StatusCode::kDataLoss) << r3.status();
  EXPECT_THAT(r3.status().message(),
              HasSubstr("generation 4 was applied to the dataplane but is not durable"));
  EXPECT_TRUE(fake_.GetRule(7).ok());
  absl::StatusOr<BatchResult> r4 = durable_->ApplyBatch(Inserts(8, 8));
  EXPECT_EQ(r4.status().code(), absl::StatusCode::kUnavailable) << r4.status();
  EXPECT_THAT(r4.status().message(), HasSubstr("failed at generation 3"));
  EXPECT_FALSE(fake_.GetRule(8).ok());
  EXPECT_FALSE(durable_->failure().ok());
  const RuleStoreState st = Reload();
  EXPECT_EQ(st.generation, 1u);
  EXPECT_EQ(st.rules.size(), 5u);
}

TEST_F(DurableTest, ReplaceRulesIsOneGenerationAllOrNothing) {
  ASSERT_EQ(client_->ApplyBatch(V1Batch(1, Inserts(1, 5)))->status().code(), 0);
  const uint64_t gen = fake_.generation();
  const size_t applied = fake_.applied_batches().size();
  std::vector<Rule> next;
  for (uint64_t id = 4; id <= 8; ++id) next.push_back(R(id, 80));
  absl::StatusOr<v1::BatchAck> ack = client_->ReplaceRules(next, /*per_message=*/2);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->generation(), gen + 1);
  EXPECT_EQ(ack->inserted(), 3u);
  EXPECT_EQ(ack->replaced(), 2u);
  EXPECT_EQ(ack->deleted(), 3u);
  EXPECT_EQ(ack->rules(), 5u);
  EXPECT_EQ(ack->server().boot_id(), 0x1234abcd5678ef01u);
  EXPECT_EQ(fake_.applied_batches().size(), applied + 1);  // one batch
  EXPECT_EQ(Texts(fake_.ListRules()), Texts(next));
  // A duplicate id, or a bad rule last: nothing changes.
  std::vector<Rule> dup = next;
  dup.push_back(R(4));
  absl::StatusOr<v1::BatchAck> bad = client_->ReplaceRules(dup);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("duplicate id"));
  std::vector<Rule> invalid = {R(20), R(21)};
  invalid[1].match.tp_dst = PortRange{100, 50};  // not ordered
  bad = client_->ReplaceRules(invalid);
  EXPECT_FALSE(bad.ok());
  // The client library keeps the call's google.rpc.Status: the bad field's
  // path in the request.
  const std::optional<FieldViolation> v = GetFieldViolation(bad.status());
  ASSERT_TRUE(v.has_value()) << bad.status();
  // (A range the structured form cannot say goes as native text.)
  EXPECT_EQ(v->path, "ops[1].insert.text");
  EXPECT_EQ(v->reason, "INVALID_RULE");
  EXPECT_EQ(v->op_index, 1u);
  EXPECT_EQ(fake_.generation(), gen + 1);
  EXPECT_EQ(Texts(fake_.ListRules()), Texts(next));
  // Only inserts may be streamed.
  {
    grpc::ClientContext ctx;
    v1::ReplaceRulesResponse a;
    auto w = client_->stub()->ReplaceRules(&ctx, &a);
    v1::ReplaceRulesRequest b;
    b.add_ops()->set_delete_id(4);
    w->Write(b);
    w->WritesDone();
    const grpc::Status st = w->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("message 1 operation 0: ReplaceRules takes inserts"));
    const std::optional<FieldViolation> op = GetFieldViolation(st);
    ASSERT_TRUE(op.has_value());
    EXPECT_EQ(op->path, "ops[0]");
  }
  // Empty: every rule deleted, one generation; durable.
  ack = client_->ReplaceRules({});
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->deleted(), 5u);
  EXPECT_EQ(ack->generation(), gen + 2);
  ASSERT_TRUE(client_->ReplaceRules(next).ok());
  RuleStoreState st = Reload();
  EXPECT_EQ(st.generation, gen + 3);
  EXPECT_EQ(Texts(st.rules), Texts(next));
}

// A logger whose lines (every level) collect in `lines`.
struct CapturedLog {
  std::ostringstream lines;
  std::shared_ptr<spdlog::logger> logger = NewLogger(
      LogOptions{LogLevel::kDebug}, std::make_shared<spdlog::sinks::ostream_sink_mt>(lines),
      std::make_shared<spdlog::sinks::ostream_sink_mt>(lines));
};

TEST(RuleRestoreTest, RestoresTheExactSetAndGenerationAndIgnoresTheSeed) {
  TempDir dir("rule_restore");
  {
    RuleStoreState st;
    auto store = OpenStore(dir.path(), &st);
    FakeDataplane fake;
    DurableDataplane d(&fake, store.get());
    ASSERT_TRUE(d.ApplyBatch(Inserts(1, 50)).ok());
    ASSERT_TRUE(d.ApplyBatch({RuleOp::Delete(7), RuleOp::Replace(R(8, 99))}).ok());
    ASSERT_TRUE(d.DeleteAll().ok());
    ASSERT_TRUE(d.ApplyBatch(Inserts(60, 64)).ok());
    ASSERT_EQ(fake.generation(), 4u);
  }
  CapturedLog captured;
  spdlog::logger& log = *captured.logger;
  StoreConfig cfg;
  cfg.path = dir.path();
  absl::StatusOr<StartupStore> s = OpenRuleStore(cfg, log);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state.generation, 4u);
  FakeDataplane fake;
  DurableDataplane d(&fake, s->store.get());
  const std::vector<RuleOp> seed = Inserts(1000, 1002);
  ASSERT_TRUE(RestoreRules(
                  &*s, seed, [&](absl::Span<const Rule> r, uint64_t g) { return fake.Restore(r, g); },
                  &d, log)
                  .ok());
  EXPECT_EQ(fake.generation(), 4u);
  EXPECT_EQ(fake.ListRules().size(), 5u);
  EXPECT_FALSE(fake.GetRule(1000).ok());
  EXPECT_TRUE(fake.GetRule(64).ok());
  EXPECT_EQ(s->instance.restored_generation, 4u);
  EXPECT_EQ(s->instance.restored_rules, 5u);
  EXPECT_TRUE(s->instance.durable);
  EXPECT_NE(s->instance.boot_id, 0u);
  // The next batch continues the store's generation.
  absl::StatusOr<BatchResult> r = d.ApplyBatch(Inserts(70, 70));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generation, 5u);
  EXPECT_EQ(s->store->generation(), 5u);
  const std::string text = captured.lines.str();
  EXPECT_THAT(text, HasSubstr("rules.file ignored: the store holds generation 4"));
  EXPECT_THAT(text, HasSubstr("started at generation 4 (5 rules)"));
  EXPECT_NE(NewBootId(), NewBootId());
}

TEST(RuleRestoreTest, AnEmptyStoreIsSeededDurably) {
  TempDir dir("rule_restore");
  StoreConfig cfg;
  cfg.path = dir.path() + "/sub";
  CapturedLog captured;
  spdlog::logger& log = *captured.logger;
  {
    absl::StatusOr<StartupStore> s = OpenRuleStore(cfg, log);
    ASSERT_TRUE(s.ok()) << s.status();
    FakeDataplane fake;
    DurableDataplane d(&fake, s->store.get());
    ASSERT_TRUE(RestoreRules(&*s, Inserts(1, 3),
                             [&](absl::Span<const Rule> r, uint64_t g) { return fake.Restore(r, g); },
                             &d, log)
                    .ok());
    EXPECT_EQ(fake.generation(), 1u);
    EXPECT_EQ(s->instance.restored_generation, 0u);
    EXPECT_EQ(s->store->generation(), 1u);
  }
  absl::StatusOr<StartupStore> again = OpenRuleStore(cfg, log);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state.generation, 1u);
  EXPECT_EQ(again->state.rules.size(), 3u);
}

TEST(RuleRestoreTest, InMemoryWarns) {
  CapturedLog captured;
  spdlog::logger& log = *captured.logger;
  absl::StatusOr<StartupStore> s = OpenRuleStore(StoreConfig{}, log);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->store, nullptr);
  FakeDataplane fake;
  DurableDataplane d(&fake, nullptr);
  ASSERT_TRUE(RestoreRules(&*s, Inserts(1, 2), nullptr, &d, log).ok());
  EXPECT_FALSE(s->instance.durable);
  EXPECT_EQ(fake.generation(), 1u);
  EXPECT_THAT(captured.lines.str(),
              HasSubstr("rules are kept in memory only and do not survive a restart"));
}

TEST(RuleRestoreTest, ADamagedStoreRefusesUnlessRecoveryIsAskedFor) {
  TempDir dir("rule_restore");
  {
    RuleStoreState st;
    auto store = OpenStore(dir.path(), &st);
    FakeDataplane fake;
    DurableDataplane d(&fake, store.get());
    ASSERT_TRUE(d.ApplyBatch(Inserts(1, 5)).ok());
  }
  WriteFile(dir.File("rules.db"), "this is not a database");
  CapturedLog captured;
  spdlog::logger& log = *captured.logger;
  StoreConfig cfg;
  cfg.path = dir.path();
  absl::StatusOr<StartupStore> s = OpenRuleStore(cfg, log);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr(dir.File("rules.db")));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("recover_to_last_consistent"));
  EXPECT_EQ(ReadFile(dir.File("rules.db")), "this is not a database");  // left as it is
  cfg.recover_to_last_consistent = true;
  s = OpenRuleStore(cfg, log);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state.generation, 0u);
  EXPECT_TRUE(s->state.info.recovered);
  EXPECT_THAT(captured.lines.str(), HasSubstr("was damaged; recovered"));
}

// A dataplane whose publications time out while `time_out` is set, as
// DpdkDataplane's do behind a stalled PMD: the group is applied and its
// results are decided (with their generations) before the publication, and
// then every accepted batch answers DEADLINE_EXCEEDED.
class TimingOutDataplane final : public ForwardingDataplane {
 public:
  explicit TimingOutDataplane(Dataplane* inner) : ForwardingDataplane(inner) {}
  bool time_out = false;
  absl::StatusOr<BatchResult> ApplyBatch(absl::Span<const RuleOp> ops) override {
    const absl::Span<const RuleOp> one[] = {ops};
    return std::move(ApplyBatches(one).front());
  }
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override {
    return ApplyBatchesNotifying(batches, [](absl::Span<const absl::StatusOr<BatchResult>>) {});
  }
  std::vector<absl::StatusOr<BatchResult>> ApplyBatchesNotifying(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) override {
    std::vector<absl::StatusOr<BatchResult>> r = inner_->ApplyBatches(batches);
    decided(r);
    if (time_out)
      for (absl::StatusOr<BatchResult>& b : r)
        if (b.ok()) b = absl::DeadlineExceededError("pmd 1 (lcore 2) did not install it");
    return r;
  }
};

// A batch whose publication timed out is applied, so it is stored: the
// store keeps the dataplane's generations, the next batches are stored, and
// a reload has them all.
// Groups 20 ms apart never leave the store thread idle for 50 ms (here: an
// hour); it still checkpoints (and so compacts, when due) within
// kSettleAtLatest of the first group it has not checkpointed.
TEST(DurableSettleTest, ASteadyTrickleIsCheckpointedAtTheLatestDeadline) {
  TempDir dir("durable_settle_test");
  TempDir copy("durable_settle_copy");
  FakeDataplane fake;
  RuleStoreOptions o;
  o.checkpoint_groups = 100000;  // not the every-64-groups checkpoint
  absl::StatusOr<std::unique_ptr<RuleStore>> opened = RuleStore::Open(dir.path(), o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<RuleStore> store = *std::move(opened);
  ASSERT_TRUE(store->Load().ok());
  DurableDataplane durable(&fake, store.get(), absl::Hours(1));
  const auto start = std::chrono::steady_clock::now();
  const auto give_up = start + std::chrono::seconds(15);
  uint64_t id = 1, seen = 0;
  while (seen == 0 && std::chrono::steady_clock::now() < give_up) {
    ASSERT_TRUE(durable.ApplyBatch({RuleOp::Insert(R(id++))}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    seen = CheckpointedGeneration(dir.path(), copy.path());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(seen, 0u) << "no checkpoint within 15 s of a steady trickle";
  // Not before the deadline (the idle wait is an hour), and not much after it.
  EXPECT_GE(secs, absl::ToDoubleSeconds(DurableDataplane::kSettleAtLatest) - 0.1);
  EXPECT_LT(secs, absl::ToDoubleSeconds(DurableDataplane::kSettleAtLatest) + 5);
}

TEST(DurableTimeoutTest, ATimedOutBatchIsStoredAndLaterBatchesToo) {
  TempDir dir("durable_timeout_test");
  FakeDataplane fake;
  TimingOutDataplane inner(&fake);
  RuleStoreState st;
  std::unique_ptr<RuleStore> store = OpenStore(dir.path(), &st);
  ASSERT_NE(store, nullptr);
  {
    DurableDataplane durable(&inner, store.get());
    ASSERT_TRUE(durable.ApplyBatch(Inserts(1, 3)).ok());
    inner.time_out = true;
    const std::vector<RuleOp> a = Inserts(4, 4), b = Inserts(5, 6);
    const absl::Span<const RuleOp> group[] = {a, {}, b};  // an empty batch changes nothing
    std::vector<absl::StatusOr<BatchResult>> r = durable.ApplyBatches(group);
    EXPECT_TRUE(absl::IsDeadlineExceeded(r[0].status())) << r[0].status();
    EXPECT_TRUE(absl::IsDeadlineExceeded(r[2].status())) << r[2].status();
    EXPECT_EQ(fake.generation(), 3u);
    inner.time_out = false;
    absl::StatusOr<BatchResult> next = durable.ApplyBatch(Inserts(7, 7));
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(next->generation, 4u);
    EXPECT_TRUE(durable.failure().ok()) << durable.failure();
  }
  store.reset();
  store = OpenStore(dir.path(), &st);
  EXPECT_EQ(st.generation, 4u);
  EXPECT_EQ(Texts(st.rules), Texts(fake.ListRules()));
  EXPECT_EQ(st.rules.size(), 7u);
}

// A timed-out group with a batch that changed nothing (a delete by a
// cookie no rule has): the results were decided with their generations
// before the publication, so the store keeps exactly the batches that
// changed the rules, and later batches continue from there.
TEST(DurableTimeoutTest, ATimedOutGroupWithANoOpBatchIsStoredExactly) {
  TempDir dir("durable_timeout_test");
  FakeDataplane fake;
  TimingOutDataplane inner(&fake);
  RuleStoreState st;
  std::unique_ptr<RuleStore> store = OpenStore(dir.path(), &st);
  ASSERT_NE(store, nullptr);
  {
    DurableDataplane durable(&inner, store.get());
    ASSERT_TRUE(durable.ApplyBatch(Inserts(1, 3)).ok());
    inner.time_out = true;
    const std::vector<RuleOp> a = Inserts(4, 4), none = {RuleOp::DeleteByCookie(999)};
    const absl::Span<const RuleOp> group[] = {a, none};
    std::vector<absl::StatusOr<BatchResult>> r = durable.ApplyBatches(group);
    EXPECT_TRUE(absl::IsDeadlineExceeded(r[0].status())) << r[0].status();
    inner.time_out = false;
    EXPECT_TRUE(durable.failure().ok()) << durable.failure();
    absl::StatusOr<BatchResult> next = durable.ApplyBatch(Inserts(7, 7));
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(next->generation, 3u);
  }
  store.reset();
  store = OpenStore(dir.path(), &st);
  EXPECT_EQ(st.generation, 3u);
  EXPECT_EQ(Texts(st.rules), Texts(fake.ListRules()));
  EXPECT_EQ(st.rules.size(), 5u);
}

}  // namespace
}  // namespace flowclass
