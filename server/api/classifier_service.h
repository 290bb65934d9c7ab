// classifier_service.h — flowclass.v1.ClassifierService over a `Dataplane`.
//
// Contract
// --------
// The service only translates: proto messages in, dataplane calls, proto
// messages out (rule_convert.h does the rule model).  Every semantic rule
// lives in the Dataplane / RuleTable; the service adds the API's own limits:
//   * max_batch_ops operations per batch (ApplyRulesRequest) (RESOURCE_EXHAUSTED ack, nothing
//     applied, the stream goes on);
//   * max_concurrent_streams open streaming calls (ApplyRules, ReplaceRules,
//     ListRules, DumpMegaflows) server-wide, and
//     StreamsPerIdentity of them per identity (the AuthContext's
//     kIdentityProperty with authorization on; without it, the connection,
//     told by ServerContext::peer): one more is refused with
//     RESOURCE_EXHAUSTED naming the key (and the identity), so one client
//     holding its share leaves the others theirs;
//   * stream_idle_timeout_ms: a streaming call that makes no progress for
//     that long is closed with DEADLINE_EXCEEDED "grpc.stream_idle_timeout_ms:
//     ..." (idle_watchdog.h): ApplyRules and ReplaceRules that send nothing,
//     any stream whose client reads nothing (acks, rules, megaflows);
//   * deadlines: a batch or a mutating unary call whose deadline has passed
//     (or whose call was cancelled) is not applied; the call ends with
//     DEADLINE_EXCEEDED (CANCELLED).
// Message size limits are the server's (grpc_server.h).
//
// ApplyRules is apply_stream.h's ServeApplyStream (a reader thread queues
// the stream's batches, the call's thread group-commits them and writes the
// acks): convert each batch (first bad operation -> INVALID_ARGUMENT ack
// naming index, id and field), Dataplane::ApplyBatches (each batch atomic;
// its errors are mapped to ALREADY_EXISTS for a duplicate id, NOT_FOUND for
// an unknown id, else kept), write the acks.  Acks are therefore in batch
// order; across streams, batches are applied in the order the Dataplane
// serialises them.
//
// Restore window: with GrpcServerConfig::restoring set (flowclassd starts its
// server before it restores the rule store), every Classifier call answers
// UNAVAILABLE "flowclassd is restoring N rules ..." until Restored(); health
// is the server's (grpc_server.h).
//
// Threads: gRPC calls the methods from its thread pool, concurrently.  The
// service's own state is atomics; the Dataplane serialises the rest.
#ifndef FLOWCLASS_SERVER_API_CLASSIFIER_SERVICE_H_
#define FLOWCLASS_SERVER_API_CLASSIFIER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"
#include "dataplane/dataplane.h"
#include "flowclass/v1/flowclass.grpc.pb.h"
#include "server/api/apply_stream.h"
#include "server/api/grpc_config.h"

namespace flowclass {

class ClassifierService final : public v1::ClassifierService::Service {
 public:
  // `dp` must outlive the service.
  ClassifierService(Dataplane* dp, const GrpcServerConfig& config);

  // ApplyRules is served by ApplyRulesRaw (the constructor installs it).
  grpc::Status ListRules(grpc::ServerContext* ctx, const v1::ListRulesRequest* req,
                         grpc::ServerWriter<v1::ListRulesResponse>* writer) override;
  grpc::Status GetRule(grpc::ServerContext* ctx, const v1::GetRuleRequest* req,
                       v1::GetRuleResponse* resp) override;
  grpc::Status DeleteAll(grpc::ServerContext* ctx, const v1::DeleteAllRequest* req,
                         v1::DeleteAllResponse* resp) override;
  // ReplaceRules: every insert of the stream, then ReplaceAllByListing (one
  // batch, one generation).  Counts as an open stream.
  grpc::Status ReplaceRules(grpc::ServerContext* ctx,
                            grpc::ServerReader<v1::ReplaceRulesRequest>* reader,
                            v1::ReplaceRulesResponse* resp) override;
  grpc::Status GetStats(grpc::ServerContext* ctx, const v1::GetStatsRequest* req,
                        v1::GetStatsResponse* resp) override;
  grpc::Status GetConfig(grpc::ServerContext* ctx, const v1::GetConfigRequest* req,
                         v1::GetConfigResponse* resp) override;
  grpc::Status SetConfig(grpc::ServerContext* ctx, const v1::SetConfigRequest* req,
                         v1::SetConfigResponse* resp) override;
  grpc::Status Trace(grpc::ServerContext* ctx, const v1::TraceRequest* req,
                     v1::TraceResponse* resp) override;
  // Dataplane::DumpMegaflows, written in pages.  Counts as an open stream.
  grpc::Status DumpMegaflows(grpc::ServerContext* ctx, const v1::DumpMegaflowsRequest* req,
                             grpc::ServerWriter<v1::DumpMegaflowsResponse>* writer) override;
  // Takes a Stats() (and RuleHits()) as the baseline GetStats subtracts
  // from then on (SubtractStatsBaseline; rule hits per id): the dataplane's
  // counters, and so /metrics, stay monotonic.
  grpc::Status ClearStats(grpc::ServerContext* ctx, const v1::ClearStatsRequest* req,
                          v1::ClearStatsResponse* resp) override;

  // Ends the restore window (GrpcServerConfig::restoring): `instance` is
  // what every answer carries from now on, and the calls are served.
  void Restored(const ServerInstanceInfo& instance);

  // Processes one batch as ApplyRules does (exposed for tests).
  v1::BatchAck ApplyOne(const v1::ApplyRulesRequest& batch);

  // Processes batches received back to back on one stream as one group
  // commit (Dataplane::ApplyBatches): acks, one per batch and in order, are
  // exactly those of ApplyOne called for each batch in turn.
  std::vector<v1::BatchAck> ApplyGroup(absl::Span<const v1::ApplyRulesRequest* const> batches,
                                       uint64_t max_ops);

  // A batch of a group (apply_stream.h): CommitGroup on this service's
  // dataplane.
  using GroupBatch = ::flowclass::GroupBatch;
  std::vector<v1::BatchAck> ApplyGroup(absl::Span<const GroupBatch> batches, uint64_t max_ops);

 private:
  // ApplyRules on the raw messages.  gRPC's typed Read() returns false both at
  // the client's half-close and for a message it cannot parse (truncated, or
  // a string field that is not UTF-8): the stream then ended with OK and the
  // batches after it were dropped unacknowledged.  Parsing here tells them
  // apart: a message that is not an ApplyRulesRequest ends the stream with
  // INVALID_ARGUMENT naming it, after the acks of the batches before it.
  // The usual batches (structured rules, deletes) are read straight into
  // operations (ReadRuleBatchWire); any other is parsed as a message.
  grpc::Status ApplyRulesRaw(grpc::ServerContext* ctx,
                             grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream);
  // ListRules' rules: emit(v1::Rule&) for each that
  // passes the request's filters, up to its limit, until emit returns false
  // (emit may move the message away: it is rebuilt for the next rule).
  template <typename Emit>
  grpc::Status ForEachListed(grpc::ServerContext* ctx, const v1::ListRulesRequest& req,
                             absl::string_view what, Emit&& emit, bool* more);

  // UNAVAILABLE "flowclassd is restoring N rules ..." during the restore
  // window; every Classifier call answers it before anything else.
  grpc::Status Restoring() const;
  void SetInstance(const ServerInstanceInfo& instance);

  // One open streaming call, counted server-wide and for its identity while
  // it lives; status() is the refusal when it is one too many.
  class StreamSlot {
   public:
    StreamSlot(ClassifierService* service, grpc::ServerContext* ctx);
    ~StreamSlot();
    StreamSlot(const StreamSlot&) = delete;
    StreamSlot& operator=(const StreamSlot&) = delete;
    const grpc::Status& status() const { return status_; }

   private:
    ClassifierService* service_;
    std::string key_;  // "" when refused (nothing to give back)
    grpc::Status status_;
  };

  Dataplane* dp_;
  GrpcServerConfig config_;
  std::atomic<bool> restoring_;  // set until Restored()
  v1::ServerInstance server_;  // config_.instance, on every ack and answer
  absl::Mutex streams_mu_;
  uint32_t open_streams_ ABSL_GUARDED_BY(streams_mu_) = 0;
  // Open streaming calls per identity (entries at 0 are removed).
  absl::flat_hash_map<std::string, uint32_t> identity_streams_ ABSL_GUARDED_BY(streams_mu_);
  // ClearStats' baseline (none before the first).
  absl::Mutex baseline_mu_;
  std::optional<DataplaneStats> baseline_ ABSL_GUARDED_BY(baseline_mu_);
  std::map<uint64_t, uint64_t> baseline_hits_ ABSL_GUARDED_BY(baseline_mu_);
};

// absl::Status -> grpc::Status (same code, same message).
grpc::Status ToGrpcStatus(const absl::Status& s);

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_API_CLASSIFIER_SERVICE_H_
