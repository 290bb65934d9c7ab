// apply_stream.h — ApplyRules: a stream of batches (ApplyRulesRequest), group-committed to a
// `Dataplane`, one BatchAck (in an ApplyRulesResponse) per batch.
//
// Contract
// --------
// CommitGroup(dp, batches, max_ops) converts each batch (first bad operation
// -> INVALID_ARGUMENT ack naming index, id and field; more than `max_ops`
// operations -> RESOURCE_EXHAUSTED ack naming the first one past the limit,
// nothing of that batch applied) and hands the rest to dp->ApplyBatches as
// one group.  A dataplane error keeps its kind's code (rule_error.h:
// ALREADY_EXISTS for a duplicate id, NOT_FOUND for an unknown id, ...) and
// names the field in v1's names for a structured rule, in the native ones for
// a rule sent as text.  The acks, one per batch and in batch order, are
// exactly those that applying the batches one by one would give; a rejected
// batch changes nothing, does not stop the ones after it, and reports the
// generation it was judged against.
//
// ServeApplyStream serves one ApplyRules call on raw messages:
//   * Who enqueues: a reader thread of its own, one per call, takes messages
//     off the stream and queues them (at most 64 batches read ahead; it waits
//     when the queue is full).  The usual batches (structured rules, deletes)
//     are read straight into operations (ReadRuleBatchWire); any other is
//     parsed as a v1.ApplyRulesRequest, on an arena of its own.  A message that is not
//     an ApplyRulesRequest stops the reader.
//   * Who commits: the calling thread (gRPC's handler thread of the call).
//     Whatever has queued up when the dataplane is free again is one group
//     (at most 65536 operations, or one batch larger than that): one
//     CommitGroup, one publication, one grace period for all of it.  A client
//     that waits for each ack gets groups of one; one that keeps a window of
//     batches in flight (flowclassctl does) gets its window per publication.
//   * Pipelined: a group is applied with Dataplane::ApplyBatchesDeferred,
//     which returns once the group is published (flowclassd: with its
//     commit to the store still running).  If more batches have queued by
//     then, the next group is applied before this one's acks are written,
//     so one group's fsync overlaps the next group's apply and publication;
//     otherwise (or when nothing is left to wait for: no store) this group
//     is finished and acknowledged at once.  At most
//     one group waits for its acks; so when the stream breaks (an ack that
//     cannot be written), up to two groups may have been applied whose acks
//     the client never reads (a controller reconciles by generation).
//   * What an ack means: it is written after the group's Finish() (the
//     deferred ApplyBatches) has returned, so an OK ack with generation G
//     means what Dataplane::ApplyBatch promises (every PMD classifies by rule
//     set G from then on) and, in flowclassd with a store
//     (server/durable_dataplane.h), that G is durable; an error ack means
//     that batch changed nothing, except DATA_LOSS: applied but not durable
//     (the store failed).  Acks are written in batch order.
//   * How it ends: OK after the client's half-close once every batch is
//     acknowledged; INVALID_ARGUMENT naming the message (1-based) that did not
//     parse, after the acks of the batches before it; DEADLINE_EXCEEDED or
//     CANCELLED, with nothing more applied, when the call's deadline passes or
//     it is cancelled before a group is committed; CANCELLED when the client
//     goes away or the transport gives up; with an `idle_timeout`, when no
//     batch has come for that long while every one before was acknowledged,
//     DEADLINE_EXCEEDED "grpc.stream_idle_timeout_ms: ..." (the client gets
//     that status: the call is cancelled with it), and the same when an ack
//     could not be written for that long (the client reads none).  On every path the reader thread
//     has been joined before it returns.
// gRPC allows one Read and one Write in flight at a time on a stream, from
// different threads: the reader only reads, the calling thread only writes.
//
// Threads: CommitGroup and ServeApplyStream may be called from any number of
// threads at once (each call's state is its own; `dp` serialises batches).
#ifndef FLOWCLASS_SERVER_API_APPLY_STREAM_H_
#define FLOWCLASS_SERVER_API_APPLY_STREAM_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dataplane/dataplane.h"
#include "flowclass/v1/flowclass.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"

namespace flowclass {

// A batch of a group: the parsed message, or (msg null) the batch id and
// operations ReadRuleBatchWire read straight from the wire (moved from).
struct GroupBatch {
  const v1::ApplyRulesRequest* msg = nullptr;
  uint64_t batch_id = 0;
  std::vector<RuleOp>* ops = nullptr;
};

// The acks of `batches` committed as one group to `dp` (see above); each
// carries `server` (which start of the daemon answered) when given.
std::vector<v1::BatchAck> CommitGroup(Dataplane* dp, absl::Span<const GroupBatch> batches,
                                      uint64_t max_ops,
                                      const v1::ServerInstance* server = nullptr);

// CommitGroup in two steps (ServeApplyStream's pipeline): StartGroup
// converts the batches and hands the good ones to dp->ApplyBatchesDeferred,
// returning once the group is applied and published; FinishGroup waits for
// what is left (flowclassd: the group's commit to its store) and makes the
// acks.  `batches` must be the same, and alive, in both calls.
struct StartedGroup {
  StartedGroup() = default;
  StartedGroup(StartedGroup&&) = default;
  // No assignment: it would free `ops` before finishing the group `applied`
  // holds (members are assigned in order), while the dataplane may still
  // read them (flowclassd: the store thread's commit).
  StartedGroup& operator=(StartedGroup&&) = delete;

  std::vector<v1::BatchAck> acks;  // the rejected batches' already filled
  std::vector<std::vector<RuleOp>> ops;  // converted; what `applied` refers to
  std::vector<bool> rejected;      // before reaching the dataplane
  uint64_t gen_before = 0;         // dp's generation before the group
  Dataplane::Deferred applied;     // last: finished (destroyed) before `ops` goes
};
StartedGroup StartGroup(Dataplane* dp, absl::Span<const GroupBatch> batches, uint64_t max_ops);
std::vector<v1::BatchAck> FinishGroup(StartedGroup* started, absl::Span<const GroupBatch> batches,
                                      const v1::ServerInstance* server = nullptr);

// Serves one ApplyRules call (see above); `max_batch_ops` is the API's limit
// of operations per batch; `server` goes on every ack when given;
// `idle_timeout` 0: an idle stream stays open.
grpc::Status ServeApplyStream(
    Dataplane* dp, uint64_t max_batch_ops, grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
    const v1::ServerInstance* server = nullptr,
    std::chrono::milliseconds idle_timeout = std::chrono::milliseconds(0));

// ---- shared with the other mutating calls of the service ----

// OK, or why the call must not change anything any more: DEADLINE_EXCEEDED
// (its deadline has passed) or CANCELLED, "... before <what>; nothing was
// applied".
grpc::Status CheckAlive(grpc::ServerContext* ctx, absl::string_view what);

// The API's code for a conversion or dataplane error: that of its
// RuleOpError's kind, its own code when it carries none (never from its
// message).
absl::StatusCode ApiCode(const absl::Status& s);

// The counts and generation of an applied batch.
void FillAck(const BatchResult& r, v1::BatchAck* ack);

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_API_APPLY_STREAM_H_
