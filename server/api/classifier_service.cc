#include "server/api/classifier_service.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dataplane/flow/packet_parser.h"
#include "dataplane/rules/rule_error.h"
#include "dataplane/rules/rule_format.h"
#include "google/protobuf/arena.h"
#include "grpcpp/support/method_handler.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/pmd_stats_convert.h"
#include "proto/rule_convert.h"

namespace flowclass {
namespace {

// Counts an open streaming call; refuses one past the limit.
class StreamSlot {
 public:
  StreamSlot(std::atomic<uint32_t>* open, uint32_t limit) : open_(open) {
    ok_ = open_->fetch_add(1) < limit;
  }
  ~StreamSlot() { open_->fetch_sub(1); }
  bool ok() const { return ok_; }

 private:
  std::atomic<uint32_t>* open_;
  bool ok_;
};

grpc::Status TooManyStreams(uint32_t limit) {
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat("grpc.max_concurrent_streams: ", limit,
                                   " streaming calls are already open"));
}

// OK, or why the call must not change anything any more.
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

// The API's code for an error of kind `kind`: the one place that says it.
absl::StatusCode ApiCode(RuleErrorKind kind) {
  switch (kind) {
    case RuleErrorKind::kInvalid: return absl::StatusCode::kInvalidArgument;
    case RuleErrorKind::kAlreadyExists: return absl::StatusCode::kAlreadyExists;
    case RuleErrorKind::kNotFound: return absl::StatusCode::kNotFound;
    case RuleErrorKind::kLimit: return absl::StatusCode::kResourceExhausted;
    case RuleErrorKind::kCount: break;  // never decoded
  }
  return absl::StatusCode::kInternal;
}

// The API's code for a conversion or dataplane error: that of its
// RuleOpError's kind, its own code when it carries none (never from its
// message).
absl::StatusCode ApiCode(const absl::Status& s) {
  const std::optional<RuleOpError> e = GetRuleOpError(s);
  return e.has_value() ? ApiCode(e->kind) : s.code();
}

// The counts and generation of an applied batch.
void FillAck(const BatchResult& r, v1::BatchAck* ack) {
  ack->set_generation(r.generation);
  ack->set_inserted(static_cast<uint32_t>(r.inserted));
  ack->set_replaced(static_cast<uint32_t>(r.replaced));
  ack->set_deleted(static_cast<uint32_t>(r.deleted));
  ack->set_rules(r.rules);
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

uint64_t OpRuleId(const v1::RuleOp& op) {
  const v1::Rule* rule = nullptr;
  switch (op.op_case()) {
    case v1::RuleOp::kInsert: rule = &op.insert(); break;
    case v1::RuleOp::kReplace: rule = &op.replace(); break;
    case v1::RuleOp::kDeleteId: return op.delete_id();
    default: return 0;
  }
  if (const uint64_t from_text = TextRuleId(rule->text()); from_text != 0) return from_text;
  return rule->id();
}

// Rejects the batch of `ack` for the error of one operation, `e`: its
// kind's code, `message`, and the OpError (index, rule id, `field`).
void RejectOp(v1::BatchAck* ack, const RuleOpError& e, std::string message,
              absl::string_view field) {
  const absl::StatusCode code = ApiCode(e.kind);
  ack->set_status_code(static_cast<int>(code));
  ack->set_status_message(message);
  v1::OpError* oe = ack->add_errors();
  oe->set_op_index(e.index);
  oe->set_rule_id(e.rule_id);
  oe->set_field(std::string(field));
  oe->set_message(std::move(message));
  oe->set_code(static_cast<int>(code));
}

// Rejects the batch of `ack` for `s`, a conversion or dataplane error, read
// from its RuleOpError `e` (GetRuleOpError(s)).  The error of one operation
// gets an OpError; its field is named in v1's names when `v1_names` (the
// message too: a table error names the native one), in the native ones
// otherwise.  Any other error (no RuleOpError, or one of no operation) is
// told by code and message only.
void Reject(v1::BatchAck* ack, const absl::Status& s, const std::optional<RuleOpError>& e,
            bool v1_names) {
  if (!e.has_value() || !e->has_op) {
    ack->set_status_code(static_cast<int>(ApiCode(s)));
    ack->set_status_message(std::string(s.message()));
    return;
  }
  if (!v1_names) {
    RejectOp(ack, *e, std::string(s.message()), NativeName(e->field));
    return;
  }
  const absl::string_view field = ProtoName(e->field);
  RejectOp(ack, *e, RenameErrorField(s.message(), *e, field), field);
}

// What only the PMD itself can read (cache occupancy, CD state, the
// megaflow classifier's subtables): present when the PMD answered the
// snapshot request of this Stats() call (see DataplaneStats).
void FillPmdSnapshot(const PipelineSnapshot& snap, bool include_subtables,
                     v1::PmdStats* out) {
  out->set_cd_enabled(snap.cd_enabled);
  out->set_emc_occupancy(snap.emc_occupancy);
  out->set_emc_entries(snap.emc_entries);
  out->set_smc_occupancy(snap.smc_occupancy);
  out->set_smc_entries(snap.smc_entries);
  out->set_megaflows(snap.megaflows);
  out->set_subtables(static_cast<uint32_t>(snap.subtables));
  if (!include_subtables) return;
  for (const SubtableInfo& t : snap.subtable) {
    v1::SubtableStats* st = out->add_subtable();
    st->set_id(t.id);
    st->set_in_port(t.in_port);
    st->set_mask(t.mask.ToString());
    st->set_megaflows(t.megaflows);
    st->set_hits(t.hits);
    st->set_rank(static_cast<uint32_t>(t.rank));
    st->set_lookup_impl(t.lookup_fn);
  }
}

void FillPmd(const PmdCounters& p, v1::PmdStats* out) {
  out->set_pmd(p.pmd);
  out->set_lcore(p.lcore);
  PmdCountersToProto(p.pipeline, out);  // the counter table's rpc entries
  // The PMD loop's counters (its own counts of packets and no_match, where
  // it keeps them, replace the pipeline's).
  PmdLoopCountersToProto(p, out);
  out->set_avg_subtable_lookups_per_hit(p.pipeline.AvgSubtableLookupsPerHit());
  out->set_avg_cycles_per_packet(p.CyclesPerPacket());
}

v1::CacheMode CacheModeOf(CdMode m) {
  switch (m) {
    case CdMode::kOn:
      return v1::CACHE_MODE_ON;
    case CdMode::kOff:
      return v1::CACHE_MODE_OFF;
    case CdMode::kAuto:
      return v1::CACHE_MODE_AUTO;
  }
  return v1::CACHE_MODE_UNSPECIFIED;
}

v1::CacheMode CacheModeOf(bool on) { return on ? v1::CACHE_MODE_ON : v1::CACHE_MODE_OFF; }

// Every key as text in `values`; the run-time settings among them, read with
// the dataplanes' own parser, in the named fields too (a key that is no
// setting, or a value the parser refuses, is in `values` only).
void ConfigFromMap(const std::map<std::string, std::string>& m, v1::Config* out) {
  RuntimeSettingsUpdate u;
  for (const auto& [k, v] : m) {
    (*out->mutable_values())[k] = v;
    (void)ParseRuntimeSetting(k, v, &u);
  }
  if (u.emc_insert_inv_prob) out->set_emc_insert_inv_prob(*u.emc_insert_inv_prob);
  if (u.ranking_interval_ms) out->set_ranking_interval_ms(*u.ranking_interval_ms);
  if (u.smc) out->set_smc(CacheModeOf(*u.smc));
  if (u.cd) out->set_cd(CacheModeOf(*u.cd));
  if (u.force_scalar) out->set_force_scalar(*u.force_scalar);
  // The implementations in the order of their keys (by name).
  std::array<int, kLookupImplCount> by_name;
  for (int i = 0; i < kLookupImplCount; ++i) by_name[i] = i;
  auto name = [](int i) { return std::string_view(LookupImplName(static_cast<LookupImplId>(i))); };
  std::sort(by_name.begin(), by_name.end(), [&](int a, int b) { return name(a) < name(b); });
  for (int i : by_name) {
    if (!u.lookup_prio[i]) continue;
    v1::LookupImpl* li = out->add_lookup_impls();
    li->set_name(std::string(name(i)));
    li->set_priority(static_cast<uint32_t>(*u.lookup_prio[i]));
    li->set_available(u.lookup_available[i].value_or(true));
  }
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

ClassifierService::ClassifierService(Dataplane* dp, const GrpcServerConfig& config)
    : dp_(dp), config_(config) {
  // ApplyRules is served on raw ByteBuffers, parsed by ApplyRulesRaw.  The
  // generated service numbers its methods in .proto order, as the
  // descriptor does: find ApplyRules' index there (it is in the service
  // this class is generated from), so a reordered .proto still marks it.
  const google::protobuf::ServiceDescriptor* service =
      v1::RuleBatch::descriptor()->file()->FindServiceByName("Classifier");
  int apply_rules = 0;
  while (service->method(apply_rules)->name() != "ApplyRules") ++apply_rules;
  MarkMethodStreamed(
      apply_rules, new grpc::internal::BidiStreamingHandler<ClassifierService, grpc::ByteBuffer,
                                                   grpc::ByteBuffer>(
             [](ClassifierService* s, grpc::ServerContext* ctx,
                grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
               return s->ApplyRulesRaw(ctx, stream);
             },
             this));
}

v1::BatchAck ClassifierService::ApplyOne(const v1::RuleBatch& batch) {
  const v1::RuleBatch* one[] = {&batch};
  return std::move(ApplyGroup(one, config_.max_batch_ops).front());
}

std::vector<v1::BatchAck> ClassifierService::ApplyGroup(
    absl::Span<const v1::RuleBatch* const> batches, uint64_t max_ops) {
  std::vector<GroupBatch> group(batches.size());
  for (size_t b = 0; b < batches.size(); ++b) group[b].msg = batches[b];
  return ApplyGroup(group, max_ops);
}

std::vector<v1::BatchAck> ClassifierService::ApplyGroup(absl::Span<const GroupBatch> batches,
                                                        uint64_t max_ops) {
  const size_t n = batches.size();
  std::vector<v1::BatchAck> acks(n);
  std::vector<std::vector<RuleOp>> ops(n);
  std::vector<bool> rejected(n, false);  // before reaching the dataplane
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
               ProtoName(e.field));
      rejected[b] = true;
      continue;
    }
    if (!g.msg) {  // already converted
      ops[b] = std::move(*g.ops);
      continue;
    }
    const v1::RuleBatch& batch = *g.msg;
    ops[b].resize(static_cast<size_t>(batch.ops_size()));
    for (int i = 0; i < batch.ops_size(); ++i) {
      const absl::Status s = RuleOpFromProto(batch.ops(i), &ops[b][static_cast<size_t>(i)]);
      if (!s.ok()) {
        // Told in v1's names, as the conversion's message already is.
        const absl::Status at = AtOperation(s, static_cast<uint32_t>(i), OpRuleId(batch.ops(i)));
        Reject(&ack, at, GetRuleOpError(at), /*v1_names=*/true);
        rejected[b] = true;
        ops[b].clear();
        break;
      }
    }
  }
  std::vector<absl::Span<const RuleOp>> spans;  // the batches not rejected
  for (size_t b = 0; b < n; ++b)
    if (!rejected[b]) spans.emplace_back(ops[b]);
  const uint64_t gen_before = dp_->generation();
  std::vector<absl::StatusOr<BatchResult>> results;
  if (!spans.empty()) results = dp_->ApplyBatches(spans);
  // A rejected batch reports the generation it was judged against: that of
  // the last accepted batch before it in the group, else the one before.
  uint64_t gen = gen_before;
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
      if (e.has_value() && e->has_op) {
        const uint32_t index = e->index;
        if (const v1::RuleBatch* batch = batches[b].msg; batch == nullptr) {
          v1_names = index < ops[b].size() && (ops[b][index].kind == RuleOp::Kind::kInsert ||
                                               ops[b][index].kind == RuleOp::Kind::kReplace);
        } else if (index < static_cast<uint32_t>(batch->ops_size())) {
          const v1::RuleOp& op = batch->ops(static_cast<int>(index));
          const v1::Rule* rule = op.has_insert()    ? &op.insert()
                                 : op.has_replace() ? &op.replace()
                                                    : nullptr;
          v1_names = rule != nullptr && rule->text().empty();
        }
      }
      Reject(&ack, r.status(), e, v1_names);
      ack.set_generation(gen);
      continue;
    }
    gen = r->generation;
    FillAck(*r, &ack);
  }
  return acks;
}

grpc::Status ClassifierService::ApplyRulesRaw(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  StreamSlot slot(&open_streams_, config_.max_concurrent_streams);
  if (!slot.ok()) return TooManyStreams(config_.max_concurrent_streams);
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
    v1::RuleBatch* batch = nullptr;  // on `arena`; null when read directly
    uint64_t batch_id = 0;
    std::vector<RuleOp> ops;  // read directly
    size_t size() const { return batch ? static_cast<size_t>(batch->ops_size()) : ops.size(); }
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Received> queue;
  bool closed = false;  // the reader is done (half-close, error, or told to)
  bool stop = false;    // tells the reader to stop taking batches
  // A message that did not parse as a RuleBatch: its position in the
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
        next.batch = google::protobuf::Arena::CreateMessage<v1::RuleBatch>(next.arena.get());
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
  for (;;) {
    std::vector<Received> group;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !queue.empty() || closed; });
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
      if (group[i].batch != nullptr) {
        batches[i].msg = group[i].batch;
      } else {
        batches[i].batch_id = group[i].batch_id;
        batches[i].ops = &group[i].ops;
      }
    }
    const uint64_t first_id =
        group.front().batch ? group.front().batch->batch_id() : group.front().batch_id;
    status = CheckAlive(ctx, absl::StrCat("batch ", first_id, " was applied"));
    if (!status.ok()) break;
    bool written = true;
    for (const v1::BatchAck& ack : ApplyGroup(batches, config_.max_batch_ops)) {
      grpc::ByteBuffer out;
      bool own = false;
      if (!grpc::SerializationTraits<v1::BatchAck>::Serialize(ack, &out, &own).ok() ||
          !stream->Write(out)) {  // client went away
        written = false;
        break;
      }
    }
    if (!written) break;
  }
  if (!drained) {
    // Leaving early: the reader may be blocked in Read() on a live stream.
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      cv.notify_all();
    }
    ctx->TryCancel();
  }
  reader.join();
  if (!status.ok()) return status;
  if (drained && bad_message != 0)
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("message ", bad_message,
                     " of the stream does not parse as a RuleBatch (e.g. truncated, or a "
                     "string field that is not UTF-8): it and the messages after it were not "
                     "applied; every batch before it was acknowledged"));
  // Read() fails at the client's half-close, or when the transport gave up
  // (deadline, cancellation, a message over the size limit).
  if (!drained || ctx->IsCancelled())
    return grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled");
  return grpc::Status::OK;
}

// `what` names the call in errors; emit(v1::Rule&) may take the message
// (it is rebuilt for the next rule) and returns false when the client went
// away.
template <typename Emit>
grpc::Status ClassifierService::ForEachListed(grpc::ServerContext* ctx,
                                              const v1::ListRulesRequest& req,
                                              absl::string_view what, Emit&& emit) {
  if (req.has_min_priority() && req.has_max_priority() &&
      req.min_priority() > req.max_priority())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("min_priority: ", req.min_priority(),
                                     " is above max_priority ", req.max_priority()));
  absl::flat_hash_map<uint64_t, uint64_t> hits;
  if (absl::StatusOr<std::vector<RuleHit>> h = dp_->RuleHits(); h.ok())
    for (const RuleHit& rh : *h) hits[rh.id] = rh.hits;
  const std::vector<Rule> rules = dp_->ListRules();
  uint64_t sent = 0;
  v1::Rule out;
  for (size_t i = 0; i < rules.size(); ++i) {
    // Every 1024 rules: on the synchronous server IsCancelled plucks the
    // completion queue (clock reads, locks, a futex), and once per rule it
    // was most of a 1M-rule listing's time (about 10 of 14 s).
    if (i % 1024 == 0 && ctx->IsCancelled())
      return grpc::Status(grpc::StatusCode::CANCELLED, absl::StrCat(what, " cancelled"));
    const Rule& r = rules[i];
    if (req.has_cookie() && r.cookie != req.cookie()) continue;
    if (req.has_min_priority() && r.priority < req.min_priority()) continue;
    if (req.has_max_priority() && r.priority > req.max_priority()) continue;
    if (req.limit() && sent >= req.limit()) break;
    RuleToProto(r, &out);
    if (auto it = hits.find(r.id); it != hits.end()) out.set_hits(it->second);
    if (!emit(out)) return grpc::Status::OK;
    ++sent;
  }
  return grpc::Status::OK;
}

grpc::Status ClassifierService::ListRules(grpc::ServerContext* ctx,
                                          const v1::ListRulesRequest* req,
                                          grpc::ServerWriter<v1::Rule>* writer) {
  StreamSlot slot(&open_streams_, config_.max_concurrent_streams);
  if (!slot.ok()) return TooManyStreams(config_.max_concurrent_streams);
  return ForEachListed(ctx, *req, "ListRules",
                       [writer](v1::Rule& r) { return writer->Write(r); });
}

grpc::Status ClassifierService::ListRulePages(grpc::ServerContext* ctx,
                                              const v1::ListRulesRequest* req,
                                              grpc::ServerWriter<v1::RulePage>* writer) {
  StreamSlot slot(&open_streams_, config_.max_concurrent_streams);
  if (!slot.ok()) return TooManyStreams(config_.max_concurrent_streams);
  const size_t max_rules = req->page_size() ? req->page_size() : 1024;
  const size_t max_bytes = std::min<size_t>(config_.max_message_bytes / 2, 1u << 20);
  v1::RulePage page;
  size_t bytes = 0;
  bool open = true;  // the client still reads
  auto flush = [&] {
    open = writer->Write(page);
    page.clear_rules();
    bytes = 0;
    return open;
  };
  grpc::Status st = ForEachListed(ctx, *req, "ListRulePages", [&](v1::Rule& r) {
    // A rule's share of the page: its bytes and its tag and length.
    const size_t size = r.ByteSizeLong() + 6;
    if (page.rules_size() > 0 &&
        (static_cast<size_t>(page.rules_size()) >= max_rules || bytes + size > max_bytes) &&
        !flush())
      return false;
    page.mutable_rules()->Add(std::move(r));  // moved, not copied
    bytes += size;
    return true;
  });
  if (st.ok() && open && page.rules_size() > 0) flush();
  return st;
}

grpc::Status ClassifierService::GetRule(grpc::ServerContext*,
                                        const v1::GetRuleRequest* req,
                                        v1::Rule* resp) {
  if (req->id() == 0)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "id: rule id 0 is never valid");
  absl::StatusOr<Rule> r = dp_->GetRule(req->id());
  if (!r.ok()) return ToGrpcStatus(r.status());
  RuleToProto(*r, resp);
  if (absl::StatusOr<std::vector<RuleHit>> h = dp_->RuleHits(); h.ok())
    for (const RuleHit& rh : *h)
      if (rh.id == req->id()) resp->set_hits(rh.hits);
  return grpc::Status::OK;
}

grpc::Status ClassifierService::DeleteAll(grpc::ServerContext* ctx,
                                          const v1::DeleteAllRequest*,
                                          v1::BatchAck* resp) {
  if (grpc::Status s = CheckAlive(ctx, "DeleteAll was applied"); !s.ok()) return s;
  absl::StatusOr<BatchResult> r = dp_->DeleteAll();
  if (!r.ok())  // NOT_FOUND, as for a batch, when the rules kept changing
    return grpc::Status(static_cast<grpc::StatusCode>(ApiCode(r.status())),
                        std::string(r.status().message()));
  FillAck(*r, resp);
  return grpc::Status::OK;
}

grpc::Status ClassifierService::GetStats(grpc::ServerContext*,
                                         const v1::GetStatsRequest* req,
                                         v1::Stats* resp) {
  const DataplaneStats s = dp_->Stats();
  resp->set_generation(s.generation);
  resp->set_rules(s.rules.rules);
  // The snapshot figures of the PMDs that answered, summed for `total`
  // (cd_enabled: any PMD has the CD on).
  PipelineSnapshot sum;
  bool any_snapshot = false;
  for (const PmdCounters& p : s.pmds) {
    v1::PmdStats* out = resp->add_pmd();
    FillPmd(p, out);
    if (p.has_snapshot) {
      FillPmdSnapshot(p.snapshot, req->include_subtables(), out);
      sum.megaflows += p.snapshot.megaflows;
      sum.subtables += p.snapshot.subtables;
      sum.emc_occupancy += p.snapshot.emc_occupancy;
      sum.emc_entries += p.snapshot.emc_entries;
      sum.smc_occupancy += p.snapshot.smc_occupancy;
      sum.smc_entries += p.snapshot.smc_entries;
      sum.cd_enabled = sum.cd_enabled || p.snapshot.cd_enabled;
      any_snapshot = true;
    }
  }
  FillPmd(s.Total(), resp->mutable_total());  // Total() sums every pipeline counter
  if (any_snapshot) FillPmdSnapshot(sum, /*include_subtables=*/false, resp->mutable_total());
  for (const PortCounters& p : s.ports) {
    v1::PortStats* ps = resp->add_port();
    ps->set_port(p.number);
    ps->set_name(p.device);
    ps->set_rx_packets(p.dev_ipackets);
    ps->set_tx_packets(p.tx_packets);
    ps->set_tx_dropped(p.tx_dropped);
    ps->set_rx_errors(p.dev_ierrors);
    ps->set_rx_missed(p.dev_imissed);
  }
  if (req->include_rule_hits()) {
    absl::StatusOr<std::vector<RuleHit>> h = dp_->RuleHits();
    if (!h.ok() && h.status().code() != absl::StatusCode::kUnimplemented)
      return ToGrpcStatus(h.status());
    if (h.ok())
      for (const RuleHit& rh : *h) {
        v1::RuleHits* out = resp->add_rule_hits();
        out->set_id(rh.id);
        out->set_hits(rh.hits);
      }
  }
  return grpc::Status::OK;
}

grpc::Status ClassifierService::GetConfig(grpc::ServerContext*,
                                          const v1::GetConfigRequest*,
                                          v1::Config* resp) {
  ConfigFromMap(dp_->GetConfig(), resp);
  return grpc::Status::OK;
}

grpc::Status ClassifierService::SetConfig(grpc::ServerContext* ctx,
                                          const v1::SetConfigRequest* req,
                                          v1::Config* resp) {
  const v1::Config& c = req->config();
  // The named fields, typed, and spelt as keys by the settings' formatter.
  RuntimeSettingsUpdate named;
  auto mode = [](absl::string_view field, v1::CacheMode m,
                 bool allow_auto) -> absl::StatusOr<CdMode> {
    switch (m) {
      case v1::CACHE_MODE_ON:
        return CdMode::kOn;
      case v1::CACHE_MODE_OFF:
        return CdMode::kOff;
      case v1::CACHE_MODE_AUTO:
        if (allow_auto) return CdMode::kAuto;
        break;
      default:
        break;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", v1::CacheMode_Name(m).empty() ? absl::StrCat("unknown value ", m)
                                                   : v1::CacheMode_Name(m),
        " is not allowed here (", allow_auto ? "ON, OFF or AUTO" : "ON or OFF", ")"));
  };
  if (c.has_emc_insert_inv_prob()) named.emc_insert_inv_prob = c.emc_insert_inv_prob();
  if (c.has_smc()) {
    absl::StatusOr<CdMode> on = mode("smc", c.smc(), false);
    if (!on.ok()) return ToGrpcStatus(on.status());
    named.smc = *on == CdMode::kOn;
  }
  if (c.has_cd()) {
    absl::StatusOr<CdMode> cd = mode("cd", c.cd(), true);
    if (!cd.ok()) return ToGrpcStatus(cd.status());
    named.cd = *cd;
  }
  if (c.has_ranking_interval_ms()) named.ranking_interval_ms = c.ranking_interval_ms();
  if (c.has_force_scalar()) named.force_scalar = c.force_scalar();
  std::vector<ConfigValue> sets = FormatRuntimeSettings(named);
  // By name, so that an unknown name gets the dataplane's own answer.
  for (const v1::LookupImpl& li : c.lookup_impls()) {
    if (li.name().empty())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "lookup_impls.name: required");
    sets.emplace_back(kConfigLookupPrioPrefix + li.name(), absl::StrCat(li.priority()));
  }
  for (const auto& [k, val] :
       std::map<std::string, std::string>(c.values().begin(), c.values().end()))
    sets.emplace_back(k, val);

  if (grpc::Status s = CheckAlive(ctx, "SetConfig was applied"); !s.ok()) return s;
  // A key given twice (named field, then `values`) takes its last value.  A
  // key given the value it has is left alone: a controller that writes back
  // what GetConfig gave it (read-only keys included) changes only what it
  // edited.  The rest goes to the dataplane as one request: all or nothing.
  const std::map<std::string, std::string> now = dp_->GetConfig();
  std::vector<ConfigValue> changes;
  absl::flat_hash_map<std::string, size_t> index;  // key -> position in `changes`
  for (auto& [k, val] : sets) {
    auto [it, fresh] = index.try_emplace(k, changes.size());
    if (fresh) {
      changes.emplace_back(std::move(k), std::move(val));
    } else {
      changes[it->second].second = std::move(val);
    }
  }
  std::erase_if(changes, [&now](const ConfigValue& kv) {
    auto it = now.find(kv.first);
    return it != now.end() && it->second == kv.second;
  });
  if (!changes.empty()) {
    if (absl::Status s = dp_->ApplySettings(changes); !s.ok()) return ToGrpcStatus(s);
  }
  ConfigFromMap(dp_->GetConfig(), resp);
  return grpc::Status::OK;
}

grpc::Status ClassifierService::Trace(grpc::ServerContext*,
                                      const v1::TraceRequest* req,
                                      v1::TraceResponse* resp) {
  FlowKey key;
  switch (req->what_case()) {
    case v1::TraceRequest::kPacket:
      key = ParsePacket(reinterpret_cast<const uint8_t*>(req->packet().data()),
                        req->packet().size(), req->in_port());
      break;
    case v1::TraceRequest::kFlow: {
      if (req->in_port() != 0)
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "in_port: goes with packet; a flow names its port itself (in_port=N)");
      if (absl::StripAsciiWhitespace(req->flow()).empty())
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "flow: empty; give the packet's fields, e.g. in_port=1,udp,tp_dst=53");
      absl::StatusOr<Flow> flow = ParseNativePacket(req->flow());
      if (!flow.ok())
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("flow: ", flow.status().message()));
      key = FlowKey::FromFlow(*flow);
      break;
    }
    case v1::TraceRequest::WHAT_NOT_SET:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "what: set packet or flow");
  }
  absl::StatusOr<TraceResult> t = dp_->Trace(key);
  if (!t.ok()) return ToGrpcStatus(t.status());
  resp->set_key(key.ToString());
  resp->set_parse_flags(key.flags);
  resp->set_layer(t->layer);
  if (t->pmd >= 0) resp->set_pmd(static_cast<uint32_t>(t->pmd));
  if (t->has_megaflow) {
    resp->set_megaflow(t->megaflow_value.ToString(t->megaflow_mask));
  } else {
    Flow mask = t->megaflow_mask;
    mask.Set(Field::kInPort, 0xffffffffu);  // megaflows always match in_port exactly
    const Flow value = key.ToFlow() & mask;
    resp->set_megaflow(value.ToString(mask));
  }
  resp->set_generation(t->generation);
  resp->set_rule_subtables_visited(static_cast<uint32_t>(t->rule_subtables_visited));
  for (uint32_t s : t->megaflow_subtables_visited) resp->add_subtables_visited(s);
  if (t->matched) {
    resp->set_rule_id(t->rule.id);
    resp->set_rule(t->rule.ToString());
    ActionToProto(t->rule.action, resp->mutable_action());
  } else {
    resp->mutable_action()->mutable_drop();
  }
  return grpc::Status::OK;
}

}  // namespace flowclass
