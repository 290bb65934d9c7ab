#include "server/api/apply_stream.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dataplane/rules/rule_error.h"
#include "dataplane/rules/rule_format.h"
#include "google/protobuf/arena.h"
#include "grpc/grpc.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/rich_error.h"
#include "proto/rule_convert.h"
#include "proto/rule_wire.h"
#include "server/api/idle_watchdog.h"

namespace flowclass {
namespace {

// The API's code for an error of kind `kind`: the one place that says it.
absl::StatusCode KindCode(RuleErrorKind kind) {
  switch (kind) {
    case RuleErrorKind::kInvalid: return absl::StatusCode::kInvalidArgument;
    case RuleErrorKind::kAlreadyExists: return absl::StatusCode::kAlreadyExists;
    case RuleErrorKind::kNotFound: return absl::StatusCode::kNotFound;
    case RuleErrorKind::kLimit: return absl::StatusCode::kResourceExhausted;
    case RuleErrorKind::kCount: break;  // never decoded
  }
  return absl::StatusCode::kInternal;
}

// The id a rule sent as text gives itself ("id=77,..."; the text's id wins
// over the field), or 0.
uint64_t TextRuleId(absl::string_view text) {
  for (absl::string_view kv : absl::StrSplit(text, ',')) {
    kv = absl::StripAsciiWhitespace(kv);
    uint64_t id = 0;
    if (absl::ConsumePrefix(&kv, "id=") &&
        ParseNativeNumber(std::string_view(kv.data(), kv.size()), &id))
      return id;
  }
  return 0;
}

// The rule an insert or replace carries; null for the other operations.
const v1::Rule* OpRule(const v1::RuleOp& op) {
  return op.has_insert() ? &op.insert() : op.has_replace() ? &op.replace() : nullptr;
}

uint64_t OpRuleId(const v1::RuleOp& op) {
  if (op.has_delete_id()) return op.delete_id();
  const v1::Rule* rule = OpRule(op);
  if (rule == nullptr) return 0;
  if (const uint64_t from_text = TextRuleId(rule->text()); from_text != 0) return from_text;
  return rule->id();
}

// v1.RuleOp's oneof name of an operation.
absl::string_view OpOneof(const v1::RuleOp& op) {
  switch (op.op_case()) {
    case v1::RuleOp::kInsert: return "insert";
    case v1::RuleOp::kReplace: return "replace";
    case v1::RuleOp::kDeleteId: return "delete_id";
    case v1::RuleOp::kDeleteCookie: return "delete_cookie";
    default: return "";
  }
}
absl::string_view OpOneof(const RuleOp& op) {
  switch (op.kind) {
    case RuleOp::Kind::kInsert: return "insert";
    case RuleOp::Kind::kReplace: return "replace";
    case RuleOp::Kind::kDelete: return "delete_id";
    case RuleOp::Kind::kDeleteByCookie: return "delete_cookie";
  }
  return "";
}
bool IsTextRule(const v1::RuleOp& op) {
  const v1::Rule* rule = OpRule(op);
  return rule != nullptr && !rule->text().empty();
}

// Where an operation's error points: its oneof and whether its rule is text.
struct OpWhere {
  absl::string_view oneof;
  bool text_rule = false;
};

// Rejects the batch of `ack` for the error of one operation, `e`: its
// kind's code, `message`, and the BadRequest / ErrorInfo details (the field
// path in the request, the index, rule id and `field`).
void RejectOp(v1::BatchAck* ack, const RuleOpError& e, std::string message,
              absl::string_view field, OpWhere where) {
  const FieldViolation v = OpViolation(e, where.oneof, where.text_rule, field, message);
  SetRichStatus(KindCode(e.kind), message, &v, ack->mutable_status());
}

// Rejects the batch of `ack` for `s`, a conversion or dataplane error, read
// from its RuleOpError `e` (GetRuleOpError(s)).  The error of one operation
// gets a field violation; its field is named in v1's names when `v1_names`
// (the message too: a table error names the native one), in the native ones
// otherwise.  Any other error (no RuleOpError, or one of no operation) is
// told by code and message only.
void Reject(v1::BatchAck* ack, const absl::Status& s, const std::optional<RuleOpError>& e,
            bool v1_names, OpWhere where) {
  if (!e.has_value() || !e->has_op) {
    SetRichStatus(ApiCode(s), s.message(), nullptr, ack->mutable_status());
    return;
  }
  if (!v1_names) {
    RejectOp(ack, *e, std::string(s.message()), NativeName(e->field), where);
    return;
  }
  const absl::string_view field = ProtoName(e->field);
  RejectOp(ack, *e, RenameErrorField(s.message(), *e, field), field, where);
}

}  // namespace

grpc::Status CheckAlive(grpc::ServerContext* ctx, absl::string_view what) {
  if (ctx->deadline() <= std::chrono::system_clock::now())
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrCat("deadline passed before ", what,
                                     "; nothing was applied"));
  if (ctx->IsCancelled())
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        absl::StrCat("call cancelled before ", what,
                                     "; nothing was applied"));
  return grpc::Status::OK;
}

absl::StatusCode ApiCode(const absl::Status& s) {
  const std::optional<RuleOpError> e = GetRuleOpError(s);
  return e.has_value() ? KindCode(e->kind) : s.code();
}

void FillAck(const BatchResult& r, v1::BatchAck* ack) {
  ack->set_generation(r.generation);
  ack->set_inserted(static_cast<uint32_t>(r.inserted));
  ack->set_replaced(static_cast<uint32_t>(r.replaced));
  ack->set_deleted(static_cast<uint32_t>(r.deleted));
  ack->set_rules(r.rules);
}

StartedGroup StartGroup(Dataplane* dp, absl::Span<const GroupBatch> batches, uint64_t max_ops) {
  const size_t n = batches.size();
  StartedGroup started;
  std::vector<v1::BatchAck>& acks = started.acks;
  std::vector<std::vector<RuleOp>>& ops = started.ops;
  std::vector<bool>& rejected = started.rejected;  // before reaching the dataplane
  acks.resize(n);
  ops.resize(n);
  rejected.assign(n, false);
  for (size_t b = 0; b < n; ++b) {
    const GroupBatch& g = batches[b];
    const uint64_t batch_id = g.msg ? g.msg->batch_id() : g.batch_id;
    const size_t n_ops = g.msg ? static_cast<size_t>(g.msg->ops_size()) : g.ops->size();
    v1::BatchAck& ack = acks[b];
    ack.set_batch_id(batch_id);
    if (n_ops > max_ops) {
      // The OpError names the first operation past the limit.
      uint64_t id = 0;
      if (g.msg) {
        id = OpRuleId(g.msg->ops(static_cast<int>(max_ops)));
      } else {  // read directly: no text rules
        const RuleOp& op = (*g.ops)[max_ops];
        id = op.kind == RuleOp::Kind::kDelete            ? op.id
             : op.kind == RuleOp::Kind::kDeleteByCookie ? 0
                                                         : op.rule.id;
      }
      const RuleOpError e{RuleErrorKind::kLimit, RuleField::kOps, /*has_op=*/true,
                          static_cast<uint32_t>(max_ops), id};
      RejectOp(&ack, e,
               absl::StrCat("grpc.max_batch_ops: batch ", batch_id, " has ", n_ops,
                            " operations, limit ", max_ops),
               ProtoName(e.field), OpWhere{});
      rejected[b] = true;
      continue;
    }
    if (!g.msg) {  // already converted
      ops[b] = std::move(*g.ops);
      continue;
    }
    const v1::ApplyRulesRequest& batch = *g.msg;
    ops[b].resize(static_cast<size_t>(batch.ops_size()));
    for (int i = 0; i < batch.ops_size(); ++i) {
      const absl::Status s = RuleOpFromProto(batch.ops(i), &ops[b][static_cast<size_t>(i)]);
      if (!s.ok()) {
        // Told in v1's names, as the conversion's message already is.
        const absl::Status at = AtOperation(s, static_cast<uint32_t>(i), OpRuleId(batch.ops(i)));
        Reject(&ack, at, GetRuleOpError(at), /*v1_names=*/true,
               OpWhere{OpOneof(batch.ops(i)), IsTextRule(batch.ops(i))});
        rejected[b] = true;
        ops[b].clear();
        break;
      }
    }
  }
  std::vector<absl::Span<const RuleOp>> spans;  // the batches not rejected
  for (size_t b = 0; b < n; ++b)
    if (!rejected[b]) spans.emplace_back(ops[b]);
  started.gen_before = dp->generation();
  if (!spans.empty()) started.applied = dp->ApplyBatchesDeferred(spans);
  return started;
}

std::vector<v1::BatchAck> FinishGroup(StartedGroup* started, absl::Span<const GroupBatch> batches,
                                      const v1::ServerInstance* server) {
  const size_t n = batches.size();
  std::vector<v1::BatchAck>& acks = started->acks;
  const std::vector<std::vector<RuleOp>>& ops = started->ops;
  const std::vector<bool>& rejected = started->rejected;
  const std::vector<absl::StatusOr<BatchResult>>& results = started->applied.Finish();
  // A rejected batch reports the generation it was judged against: that of
  // the last accepted batch before it in the group, else the one before.
  uint64_t gen = started->gen_before;
  size_t k = 0;  // next of `results`
  for (size_t b = 0; b < n; ++b) {
    v1::BatchAck& ack = acks[b];
    if (rejected[b]) {
      ack.set_generation(gen);
      continue;
    }
    const absl::StatusOr<BatchResult>& r = results[k++];
    if (!r.ok()) {
      const std::optional<RuleOpError> e = GetRuleOpError(r.status());
      // A rule sent as a structured match is told in v1.Match's names; one
      // sent as native text keeps the native ones it was written with.
      // (Batches read directly hold structured rules only.)
      bool v1_names = false;
      OpWhere where;
      if (e.has_value() && e->has_op) {
        const uint32_t index = e->index;
        if (const v1::ApplyRulesRequest* batch = batches[b].msg; batch == nullptr) {
          if (index < ops[b].size()) {
            where.oneof = OpOneof(ops[b][index]);
            v1_names = ops[b][index].kind == RuleOp::Kind::kInsert ||
                       ops[b][index].kind == RuleOp::Kind::kReplace;
          }
        } else if (index < static_cast<uint32_t>(batch->ops_size())) {
          const v1::RuleOp& op = batch->ops(static_cast<int>(index));
          where = OpWhere{OpOneof(op), IsTextRule(op)};
          v1_names = (op.has_insert() || op.has_replace()) && !where.text_rule;
        }
      }
      Reject(&ack, r.status(), e, v1_names, where);
      ack.set_generation(gen);
      continue;
    }
    gen = r->generation;
    FillAck(*r, &ack);
  }
  if (server != nullptr)
    for (v1::BatchAck& ack : acks) *ack.mutable_server() = *server;
  return std::move(acks);
}

std::vector<v1::BatchAck> CommitGroup(Dataplane* dp, absl::Span<const GroupBatch> batches,
                                      uint64_t max_ops, const v1::ServerInstance* server) {
  StartedGroup started = StartGroup(dp, batches, max_ops);
  return FinishGroup(&started, batches, server);
}

grpc::Status ServeApplyStream(
    Dataplane* dp, uint64_t max_batch_ops, grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
    const v1::ServerInstance* server, std::chrono::milliseconds idle_timeout) {
  // Group commit.  A reader thread takes batches off the stream while this
  // thread applies the ones already received; whatever has queued up when
  // the dataplane is free again is applied as one group (one publication,
  // one grace period, one revalidation per PMD for all of it).  A client
  // that waits for each ack gets groups of one; one that keeps a window of
  // batches in flight (flowclassctl does) gets its window per publication.
  // Acks are written one per batch, in order.  gRPC allows one Read and one
  // Write in flight at a time on a stream, from different threads.
  // Each batch is parsed into an arena of its own: its thousands of
  // submessages and address strings are one allocation to free, not one each
  // (a million-rule stream spent a few percent of the server in protobuf
  // allocation and destruction).
  constexpr size_t kMaxQueued = 64;          // read-ahead, in batches
  constexpr uint64_t kMaxGroupOps = 1 << 16;  // bounds the time to the first ack
  // A batch is first read straight into operations (ReadRuleBatchWire: the
  // usual structured rules, a third of the server's time in a streamed load
  // went to parsing messages and converting them); anything else, errors
  // included, is parsed as a message as before.
  struct Received {
    std::unique_ptr<google::protobuf::Arena> arena;  // only for a parsed message
    v1::ApplyRulesRequest* batch = nullptr;  // on `arena`; null when read directly
    uint64_t batch_id = 0;
    std::vector<RuleOp> ops;  // read directly
    size_t size() const { return batch ? static_cast<size_t>(batch->ops_size()) : ops.size(); }
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Received> queue;
  bool closed = false;  // the reader is done (half-close, error, or told to)
  bool stop = false;    // tells the reader to stop taking batches
  // A message that did not parse as an ApplyRulesRequest: its position in the
  // stream (1-based; 0: none).  Set under mu with `closed`.
  uint64_t bad_message = 0;
  std::thread reader([&] {
    Received next;
    uint64_t n_read = 0;
    uint64_t bad = 0;
    std::vector<grpc::Slice> slices;
    std::string flat;  // a message in several slices, joined
    for (grpc::ByteBuffer raw; stream->Read(&raw);) {
      ++n_read;
      absl::string_view wire;
      if (raw.Dump(&slices).ok() && !slices.empty()) {
        if (slices.size() == 1) {
          wire = absl::string_view(reinterpret_cast<const char*>(slices[0].begin()),
                                   slices[0].size());
        } else {
          flat.clear();
          for (const grpc::Slice& sl : slices)
            flat.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
          wire = flat;
        }
      }
      if (wire.empty() || !ReadRuleBatchWire(wire, &next.batch_id, &next.ops)) {
        // A message, on an arena only such a batch needs.
        std::vector<RuleOp>().swap(next.ops);  // what the direct read left
        next.arena = std::make_unique<google::protobuf::Arena>();
        next.batch = google::protobuf::Arena::CreateMessage<v1::ApplyRulesRequest>(next.arena.get());
        grpc::ProtoBufferReader in(&raw);
        if (!next.batch->ParseFromZeroCopyStream(&in) || !in.status().ok()) {
          bad = n_read;
          break;
        }
      }
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return queue.size() < kMaxQueued || stop; });
      if (stop) break;
      queue.push_back(std::move(next));
      next = Received{};
      cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu);
    bad_message = bad;
    closed = true;
    cv.notify_all();
  });
  grpc::Status status = grpc::Status::OK;
  bool drained = false;
  bool idle = false;  // closed by idle_timeout
  // The other side of idleness: a client that sends batches but reads no
  // ack blocks our Write once the flow-control window is full.
  IdleWatchdog unread(ctx, idle_timeout,
                      absl::StrCat("grpc.stream_idle_timeout_ms: the client read no ack for ",
                                   idle_timeout.count(), " ms; the server closed the stream"));
  unread.Pause();
  // A group applied whose acks are not written yet (its Finish() may still
  // wait for the store's fsync): written once the next group is applied, or
  // before this thread waits for batches.
  struct InFlight {
    InFlight(std::vector<Received> g, std::vector<GroupBatch> b, StartedGroup s)
        : group(std::move(g)), batches(std::move(b)), started(std::move(s)) {}
    InFlight& operator=(InFlight&&) = delete;  // see StartedGroup
    std::vector<Received> group;
    std::vector<GroupBatch> batches;  // refers to `group` (its elements do not move)
    StartedGroup started;             // last: finished before `group` goes
  };
  std::optional<InFlight> pending;
  // Finishes `pending` and writes its acks; false when the client went away
  // or read nothing for idle_timeout.
  auto write_pending = [&]() -> bool {
    if (!pending.has_value()) return true;
    std::vector<v1::BatchAck> acks = FinishGroup(&pending->started, pending->batches, server);
    bool sent = true;
    for (v1::BatchAck& ack : acks) {
      grpc::ByteBuffer out;
      bool own = false;
      v1::ApplyRulesResponse resp;
      resp.mutable_ack()->Swap(&ack);
      unread.Kick();
      sent = grpc::SerializationTraits<v1::ApplyRulesResponse>::Serialize(resp, &out, &own).ok() &&
             stream->Write(out);
      unread.Pause();
      if (!sent) break;
    }
    pending.reset();
    return sent;
  };
  for (;;) {
    bool more = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      more = !queue.empty();
    }
    // Nothing to apply behind the pending group: acknowledge it now.
    if (!more && !write_pending()) break;
    std::vector<Received> group;
    {
      std::unique_lock<std::mutex> lock(mu);
      auto ready = [&] { return !queue.empty() || closed; };
      // Waiting here, every batch received so far is acknowledged unless
      // one came since the check above (then the wait is none).
      if (idle_timeout.count() <= 0) {
        cv.wait(lock, ready);
      } else if (!cv.wait_for(lock, idle_timeout, ready)) {
        idle = true;
        status = grpc::Status(
            grpc::StatusCode::DEADLINE_EXCEEDED,
            absl::StrCat("grpc.stream_idle_timeout_ms: no batch for ", idle_timeout.count(),
                         " ms; the server closed the stream (every batch before was "
                         "acknowledged)"));
        break;
      }
      if (queue.empty()) {
        drained = true;
        break;
      }
      uint64_t group_ops = 0;
      while (!queue.empty() &&
             (group.empty() || group_ops + queue.front().size() <= kMaxGroupOps)) {
        group_ops += queue.front().size();
        group.push_back(std::move(queue.front()));
        queue.pop_front();
      }
      cv.notify_all();
    }
    std::vector<GroupBatch> batches(group.size());
    for (size_t i = 0; i < group.size(); ++i) {
      Received& r = group[i];
      if (r.batch != nullptr) {
        batches[i].msg = r.batch;
      } else {
        batches[i].batch_id = r.batch_id;
        batches[i].ops = &r.ops;
      }
    }
    const Received& first = group.front();
    status = CheckAlive(ctx, absl::StrCat("batch ", first.batch ? first.batch->batch_id()
                                                                : first.batch_id,
                                          " was applied"));
    if (!status.ok()) {
      write_pending();  // the group before is applied: its acks, if the call still takes them
      break;
    }
    StartedGroup started = StartGroup(dp, batches, max_batch_ops);
    // This group is applied and published; now the one before it is
    // acknowledged (its commit has had this group's apply to finish).
    bool sent = write_pending();
    pending.emplace(std::move(group), std::move(batches), std::move(started));
    // A group with nothing left to wait for (no store, or nothing to commit)
    // is acknowledged at once.
    if (sent && pending->started.applied.finished()) sent = write_pending();
    if (!sent) break;  // `pending` is finished below, not acknowledged
  }
  // Leaving with a group applied and not acknowledged (a write failed: the
  // client is gone): it is finished all the same, before its batches go.
  pending.reset();
  if (!drained) {
    // Leaving early: the reader may be blocked in Read() on a live stream.
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      cv.notify_all();
    }
    if (idle) {
      // The client gets this status (TryCancel would say only CANCELLED);
      // cancelling also ends the reader's Read().
      grpc_call_cancel_with_status(ctx->c_call(), GRPC_STATUS_DEADLINE_EXCEEDED,
                                   status.error_message().c_str(), nullptr);
    } else {
      ctx->TryCancel();
    }
  }
  reader.join();
  if (!status.ok()) return status;
  if (unread.fired()) return unread.status();
  if (drained && bad_message != 0)
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("message ", bad_message,
                     " of the stream does not parse as an ApplyRulesRequest (e.g. truncated, or a "
                     "string field that is not UTF-8): it and the messages after it were not "
                     "applied; every batch before it was acknowledged"));
  // Read() fails at the client's half-close, or when the transport gave up
  // (deadline, cancellation, a message over the size limit).
  if (!drained || ctx->IsCancelled())
    return grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled");
  return grpc::Status::OK;
}

}  // namespace flowclass
