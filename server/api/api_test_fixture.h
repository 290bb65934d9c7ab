// api_test_fixture.h — what the gRPC API tests of server/api share: a real
// gRPC server on 127.0.0.1 (port 0, plaintext) over a FakeDataplane (or a
// dataplane the test wraps around one), the C++ client library connected to
// it, builders of v1 rules and batches, and InstrumentedDataplane, the base
// of the tests' instrumented dataplanes.  Header-only; each test binary is one
// translation unit.
#ifndef FLOWCLASS_SERVER_API_API_TEST_FIXTURE_H_
#define FLOWCLASS_SERVER_API_API_TEST_FIXTURE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "client/rpc/flowclass_client.h"
#include "dataplane/dataplane.h"
#include "dataplane/forwarding_dataplane.h"
#include "gtest/gtest.h"
#include "proto/rich_error.h"
#include "server/api/grpc_server.h"
#include "server/testing/fake_dataplane.h"
#include "tests/common/ack_reader.h"

namespace flowclass {

constexpr int kOk = 0;
constexpr int kInvalid = static_cast<int>(absl::StatusCode::kInvalidArgument);
constexpr int kNotFound = static_cast<int>(absl::StatusCode::kNotFound);
constexpr int kExists = static_cast<int>(absl::StatusCode::kAlreadyExists);
constexpr int kExhausted = static_cast<int>(absl::StatusCode::kResourceExhausted);

// A structured rule: udp from 10.0.<id>.0/24 to port `port`, output:1.
inline v1::Rule MakeRule(uint64_t id, uint32_t priority = 10, uint64_t cookie = 0,
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

inline v1::ApplyRulesRequest Batch(uint64_t id, std::vector<v1::RuleOp> ops) {
  v1::ApplyRulesRequest b;
  b.set_batch_id(id);
  for (v1::RuleOp& op : ops) *b.add_ops() = std::move(op);
  return b;
}
inline v1::RuleOp Insert(v1::Rule r) {
  v1::RuleOp op;
  *op.mutable_insert() = std::move(r);
  return op;
}
inline v1::RuleOp Replace(v1::Rule r) {
  v1::RuleOp op;
  *op.mutable_replace() = std::move(r);
  return op;
}
inline v1::RuleOp DeleteId(uint64_t id) {
  v1::RuleOp op;
  op.set_delete_id(id);
  return op;
}
inline v1::RuleOp DeleteCookie(uint64_t c) {
  v1::RuleOp op;
  op.set_delete_cookie(c);
  return op;
}

// The violation an ack's google.rpc.Status carries (GetFieldViolation):
// how many (0 or 1), and it (empty when none).
inline int ViolationCount(const v1::BatchAck& ack) {
  return GetFieldViolation(ack.status()).has_value() ? 1 : 0;
}
inline FieldViolation Violation(const v1::BatchAck& ack) {
  return GetFieldViolation(ack.status()).value_or(FieldViolation{});
}
// The google.rpc.Code an ErrorInfo reason goes with (-1: none known).
inline int ReasonCode(const std::string& reason) {
  if (reason == "INVALID_RULE") return static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT);
  if (reason == "RULE_EXISTS") return static_cast<int>(grpc::StatusCode::ALREADY_EXISTS);
  if (reason == "RULE_NOT_FOUND") return static_cast<int>(grpc::StatusCode::NOT_FOUND);
  if (reason == "LIMIT") return static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED);
  return -1;
}

// Reads a stream's acks to the end: (batch id, generation) and status codes.
inline std::pair<std::vector<std::pair<uint64_t, uint64_t>>, std::vector<int>> ReadAcks(
    grpc::ClientReaderWriter<v1::ApplyRulesRequest, v1::ApplyRulesResponse>* stream) {
  v1::BatchAck ack;
  std::vector<std::pair<uint64_t, uint64_t>> seen;
  std::vector<int> codes;
  while (ReadAck(stream, &ack)) {
    seen.emplace_back(ack.batch_id(), ack.generation());
    codes.push_back(ack.status().code());
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
  v1::BatchAck Apply(v1::ApplyRulesRequest b) {
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

// Forwards everything to `inner` (ForwardingDataplane), but groups (also
// ApplyBatchesNotifying's) and DeleteAll through this ApplyBatch; the test
// dataplanes below override the apply path only.
class InstrumentedDataplane : public ForwardingDataplane {
 public:
  using ForwardingDataplane::ForwardingDataplane;
  std::vector<absl::StatusOr<BatchResult>> ApplyBatches(
      absl::Span<const absl::Span<const RuleOp>> batches) override {
    return ApplyBatchesOneByOne(*this, batches);
  }
  // Dataplane's default: this ApplyBatches, then `decided`.
  std::vector<absl::StatusOr<BatchResult>> ApplyBatchesNotifying(
      absl::Span<const absl::Span<const RuleOp>> batches, DecidedFn decided) override {
    return Dataplane::ApplyBatchesNotifying(batches, decided);
  }
  absl::StatusOr<BatchResult> DeleteAll() override { return DeleteAllByListing(*this); }
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_API_API_TEST_FIXTURE_H_
