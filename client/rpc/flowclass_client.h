// flowclass_client.h — a small C++ client of the flowclass.v1 API.
//
// Contract
// --------
// FlowclassClient wraps one gRPC channel to one flowclassd.  Every method
// returns absl::Status(Or): the server's gRPC status is passed through with
// its code and message; transport problems come back as UNAVAILABLE /
// DEADLINE_EXCEEDED / UNAUTHENTICATED as gRPC reports them.  Unary calls get
// the deadline `ClientOptions::timeout`; streams get it per batch window
// (see ApplyOps).
//
// ApplyOps streams operations in batches of `batch_size` on one ApplyRules
// stream, keeping up to `window` batches in flight (a writer thread sends,
// the calling thread reads acks), so that the network round trip is not
// paid per batch.  It stops sending at the first rejected batch; batches
// already sent behind it (at most window - 1) are still processed by the
// server and their acks are counted.  Each batch is atomic on the server;
// the whole call is not.
//
// Threads: a FlowclassClient may be used from several threads at once (gRPC
// stubs are thread-safe); ApplyOps uses one extra thread for its duration.
#ifndef FLOWCLASS_CLIENT_RPC_FLOWCLASS_CLIENT_H_
#define FLOWCLASS_CLIENT_RPC_FLOWCLASS_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/rules/rule_table.h"
#include "flowclass/v1/flowclass.grpc.pb.h"

namespace grpc {
class Channel;
class Status;
}  // namespace grpc

namespace flowclass {

// For an UNAVAILABLE status from a call: what gRPC's connection error
// usually means here ("\n  (TLS to a server that speaks plaintext: ...)"),
// or "" (flowclassctl prints it after the error).
std::string ConnectionHint(const absl::Status& s);

struct ClientOptions {
  std::string target = "127.0.0.1:50051";  // host:port
  bool plaintext = false;     // no TLS (the server must be configured so)
  std::string ca_file;        // PEM CA that signed the server certificate
  std::string cert_file;      // PEM client certificate (mutual TLS)
  std::string key_file;       // PEM client key (mutual TLS)
  std::string server_name;    // TLS name to check instead of the target host
  // Bearer token sent on every call (`authorization: Bearer …`); "" = none.
  // ReadTokenFile reads one from a file.
  std::string token;
  std::chrono::milliseconds timeout{30000};  // per call; 0 = none
  int max_message_bytes = 64 << 20;          // receive limit on the client side
};

// The token in `path`: its first non-blank line without a leading "#",
// trimmed (a bare token, as Kubernetes Secrets hold them).  `what` names the
// option in messages ("--token-file").  NOT_FOUND when it cannot be read,
// INVALID_ARGUMENT when it holds no token or the token has spaces.
absl::StatusOr<std::string> ReadTokenFile(absl::string_view what, const std::string& path);

struct ApplyOptions {
  size_t batch_size = 1000;   // operations per batch (ApplyRulesRequest) (>= 1)
  // Batches in flight (>= 1): the most one group commit can take, so with a
  // rule store (one fsync per group) it decides the fsyncs per rule.
  size_t window = 32;
  uint64_t first_batch_id = 1;
  // Called on the calling thread after each ack: ops acknowledged so far.
  std::function<void(size_t acked_ops, size_t total_ops)> progress;
};

struct ApplyResult {
  uint64_t batches_acked = 0;    // acks received (OK or not)
  uint64_t ops_applied = 0;      // operations in OK acks
  uint64_t generation = 0;       // of the last OK ack (no ops: the server's)
  double seconds = 0;            // first send to last ack
  std::optional<v1::BatchAck> first_error;  // the first rejected batch
  // Batches (0-based, in the order of `ops`) acknowledged OK.  After a
  // rejection no further batch is sent, but batches already in flight behind
  // the rejected one are applied or rejected on their own.
  std::vector<size_t> ok_batches;
  // Batches written to the stream (the first batches_sent of `ops`).  When
  // the stream fails, those sent but not acknowledged may or may not have
  // been applied.
  uint64_t batches_sent = 0;
};

class FlowclassClient {
 public:
  static absl::StatusOr<std::unique_ptr<FlowclassClient>> Connect(
      const ClientOptions& options);

  // Waits until the channel is connected (or `timeout` passes).
  absl::Status WaitForReady(std::chrono::milliseconds timeout);

  // An error when the stream itself fails (deadline, message over the size
  // limit, connection lost); `partial`, if not null, then receives what was
  // acknowledged and sent before (rejected batches are not stream errors:
  // they are in ApplyResult::first_error).
  absl::StatusOr<ApplyResult> ApplyOps(absl::Span<const RuleOp> ops,
                                       const ApplyOptions& options = {},
                                       ApplyResult* partial = nullptr);
  // One batch on its own stream.
  absl::StatusOr<v1::BatchAck> ApplyBatch(const v1::ApplyRulesRequest& batch);
  // The rules ListRules names, read page by page.
  absl::StatusOr<std::vector<v1::Rule>> ListRules(const v1::ListRulesRequest& req = {});
  absl::StatusOr<v1::Rule> GetRule(uint64_t id);
  absl::StatusOr<v1::BatchAck> DeleteAll();
  // ReplaceRules: the whole rule set becomes `rules`, as one generation
  // (streamed as inserts, `per_message` a message).
  absl::StatusOr<v1::BatchAck> ReplaceRules(absl::Span<const Rule> rules,
                                            size_t per_message = 1000);
  absl::StatusOr<v1::GetStatsResponse> GetStats(bool include_subtables = false,
                                     bool include_rule_hits = false);
  absl::StatusOr<v1::Config> GetConfig();
  absl::StatusOr<v1::Config> SetConfig(const v1::Config& config);
  absl::StatusOr<v1::TraceResponse> Trace(const v1::TraceRequest& req);
  // DumpMegaflows, every page read.
  absl::StatusOr<std::vector<v1::MegaflowEntry>> DumpMegaflows(
      const v1::DumpMegaflowsRequest& req = {});
  absl::StatusOr<v1::ClearStatsResponse> ClearStats();
  // grpc.health.v1 Check of `service` ("" = the whole server): true if SERVING.
  absl::StatusOr<bool> Healthy(const std::string& service = "");

  v1::ClassifierService::Stub* stub() { return stub_.get(); }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  FlowclassClient() = default;
  // Every call's context: the per-call deadline and the token (AddToken).
  void SetDeadline(grpc::ClientContext* ctx) const;
  void AddToken(grpc::ClientContext* ctx) const;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ClassifierService::Stub> stub_;
  // ApplyRules, for writing batches as bytes (ApplyOps).
  std::unique_ptr<grpc::internal::RpcMethod> apply_rules_raw_;
};

// grpc::Status -> absl::Status (same code and message; the call's
// google.rpc.Status, when it sent one, as a payload: GetFieldViolation in
// proto/rich_error.h reads the bad field's path from it).
absl::Status FromGrpcStatus(const grpc::Status& s);

// A BatchAck that failed, as a Status (OK for an OK ack).
absl::Status AckStatus(const v1::BatchAck& ack);

// `pmd-stats-show`-like text: one block per PMD (a line per counter of the
// table that GetStats carries, dataplane/pmd_counters.h, then the averages and
// the PMD loop's counts), then totals and ports.
std::string FormatStats(const v1::GetStatsResponse& stats);

// One megaflow as `flowclassctl dump-megaflows` prints it (like
// `ovs-appctl dpctl/dump-flows`), no newline:
// "pmd=0 in_port=1,udp,...,tp_dst=53, packets:12, used:0.120s, rule:7, actions:output:2".
std::string FormatMegaflow(const v1::MegaflowEntry& m);

}  // namespace flowclass

#endif  // FLOWCLASS_CLIENT_RPC_FLOWCLASS_CLIENT_H_
