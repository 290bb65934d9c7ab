#include "server/api/classifier_service.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/quote.h"
#include "common/version.h"
#include "dataplane/flow/packet_parser.h"
#include "dataplane/rules/rule_format.h"
#include "grpcpp/support/method_handler.h"
#include "proto/pmd_stats_convert.h"
#include "proto/rich_error.h"
#include "proto/rule_convert.h"
#include "server/api/apply_stream.h"
#include "server/api/grpc_auth.h"
#include "server/api/idle_watchdog.h"

namespace flowclass {
namespace {

// The identity a streaming call is counted under (classifier_service.h).
std::string StreamIdentity(grpc::ServerContext* ctx) {
  if (std::shared_ptr<const grpc::AuthContext> ac = ctx->auth_context()) {
    const std::vector<grpc::string_ref> v = ac->FindPropertyValues(kIdentityProperty);
    if (!v.empty()) return std::string(v.front().data(), v.front().size());
  }
  return absl::StrCat("connection ", ctx->peer());
}

// The status message of a stream closed by grpc.stream_idle_timeout_ms.
std::string IdleMessage(const char* what, uint32_t ms, const char* after) {
  return absl::StrCat("grpc.stream_idle_timeout_ms: ", what, " for ", ms,
                      " ms; the server closed the stream", after);
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
  out->set_subtable_count(static_cast<uint32_t>(snap.subtables));
  if (!include_subtables) return;
  for (const SubtableInfo& t : snap.subtable) {
    v1::SubtableStats* st = out->add_subtables();
    st->set_id(t.id);
    st->set_in_port(t.in_port);
    st->set_mask(t.mask.ToString());
    st->set_megaflows(t.megaflows);
    st->set_hits(t.hits);
    st->set_rank(static_cast<uint32_t>(t.rank));
    st->set_lookup_impl(t.lookup_fn);
  }
}

// TraceResult.layer ("emc", ..., "slow_path") as the API's enum, whose
// values are those names, upper case, after LAYER_ (the inverse of what
// flowclassctl prints); LAYER_UNSPECIFIED for a name the enum lacks.
v1::Layer LayerToProto(absl::string_view layer) {
  v1::Layer out = v1::LAYER_UNSPECIFIED;
  if (!v1::Layer_Parse(absl::StrCat("LAYER_", absl::AsciiStrToUpper(layer)), &out))
    return v1::LAYER_UNSPECIFIED;
  return out;
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

v1::CacheMode CacheModeOf(CacheMode m) {
  switch (m) {
    case CacheMode::kOn:
      return v1::CACHE_MODE_ON;
    case CacheMode::kOff:
      return v1::CACHE_MODE_OFF;
    case CacheMode::kAuto:
      return v1::CACHE_MODE_AUTO;
  }
  return v1::CACHE_MODE_UNSPECIFIED;
}

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

void ClassifierService::SetInstance(const ServerInstanceInfo& in) {
  server_.set_boot_id(in.boot_id);
  server_.set_restored_generation(in.restored_generation);
  server_.set_restored_rules(in.restored_rules);
  server_.set_durable(in.durable);
  server_.set_store_path(in.store_path);
  server_.set_version(kFlowclassVersion);
}

grpc::Status ClassifierService::Restoring() const {
  if (!restoring_.load(std::memory_order_acquire)) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("flowclassd is ", config_.restoring,
                                   " from its store; try again once health says SERVING"));
}

void ClassifierService::Restored(const ServerInstanceInfo& instance) {
  if (!restoring_.load(std::memory_order_relaxed)) return;
  // No call reads server_ while restoring_ is set (each checks it first);
  // the release store publishes the new value to the calls after it.
  SetInstance(instance);
  restoring_.store(false, std::memory_order_release);
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

ClassifierService::ClassifierService(Dataplane* dp, const GrpcServerConfig& config)
    : dp_(dp), config_(config), restoring_(!config.restoring.empty()) {
  SetInstance(config.instance);
  // ApplyRules is served on raw ByteBuffers, parsed by ApplyRulesRaw.  The
  // generated service numbers its methods in .proto order, as the
  // descriptor does: find ApplyRules' index there (it is in the service
  // this class is generated from), so a reordered .proto still marks it.
  const google::protobuf::ServiceDescriptor* service =
      v1::ApplyRulesRequest::descriptor()->file()->FindServiceByName("ClassifierService");
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

v1::BatchAck ClassifierService::ApplyOne(const v1::ApplyRulesRequest& batch) {
  const v1::ApplyRulesRequest* one[] = {&batch};
  return std::move(ApplyGroup(one, config_.max_batch_ops).front());
}

std::vector<v1::BatchAck> ClassifierService::ApplyGroup(
    absl::Span<const v1::ApplyRulesRequest* const> batches, uint64_t max_ops) {
  std::vector<GroupBatch> group(batches.size());
  for (size_t b = 0; b < batches.size(); ++b) group[b].msg = batches[b];
  return ApplyGroup(group, max_ops);
}

std::vector<v1::BatchAck> ClassifierService::ApplyGroup(absl::Span<const GroupBatch> batches,
                                                        uint64_t max_ops) {
  return CommitGroup(dp_, batches, max_ops, &server_);
}

ClassifierService::StreamSlot::StreamSlot(ClassifierService* service,
                                          grpc::ServerContext* ctx)
    : service_(service) {
  const uint32_t limit = service->config_.max_concurrent_streams;
  const uint32_t share = StreamsPerIdentity(service->config_);
  std::string key = StreamIdentity(ctx);
  absl::MutexLock lock(&service->streams_mu_);
  if (service->open_streams_ >= limit) {
    status_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           absl::StrCat("grpc.max_concurrent_streams: ", limit,
                                        " streaming calls are already open"));
    return;
  }
  uint32_t& mine = service->identity_streams_[key];
  if (mine >= share) {
    status_ = grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("grpc.max_streams_per_identity: ", QuoteForMessage(key, '"'),
                     " already has ", mine, " streaming calls open (its share of the ", limit,
                     " of grpc.max_concurrent_streams)"));
    return;
  }
  ++mine;
  ++service->open_streams_;
  key_ = std::move(key);
}

ClassifierService::StreamSlot::~StreamSlot() {
  if (!status_.ok()) return;
  absl::MutexLock lock(&service_->streams_mu_);
  --service_->open_streams_;
  auto it = service_->identity_streams_.find(key_);
  if (--it->second == 0) service_->identity_streams_.erase(it);
}

grpc::Status ClassifierService::ApplyRulesRaw(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  if (grpc::Status s = Restoring(); !s.ok()) return s;
  StreamSlot slot(this, ctx);
  if (!slot.status().ok()) return slot.status();
  return ServeApplyStream(dp_, config_.max_batch_ops, ctx, stream, &server_,
                          std::chrono::milliseconds(config_.stream_idle_timeout_ms));
}

namespace {

// Where a ListRules page ended: the rules after it in (priority desc, id
// asc) order come next.
struct ListPosition {
  uint32_t priority = 0;
  uint64_t id = 0;
};

// ListRules' page tokens: the position of the last rule of a page (priority,
// id) and the filters it was listed under, as web-safe base64 of
// "v1.PRIORITY.ID.COOKIE.MIN.MAX" (absent filters "-").  Opaque to clients.
std::string FilterText(const v1::ListRulesRequest& req) {
  auto opt = [](bool has, uint64_t v) { return has ? absl::StrCat(v) : std::string("-"); };
  return absl::StrCat(opt(req.has_cookie(), req.cookie()), ".",
                      opt(req.has_min_priority(), req.min_priority()), ".",
                      opt(req.has_max_priority(), req.max_priority()));
}

std::string PageToken(const v1::ListRulesRequest& req, const v1::Rule& last) {
  return absl::WebSafeBase64Escape(
      absl::StrCat("v1.", last.priority(), ".", last.id(), ".", FilterText(req)));
}

// The position *page_token resumes after, or an error naming the field.
grpc::Status ParsePageToken(const v1::ListRulesRequest& req, std::optional<ListPosition>* at) {
  at->reset();
  if (req.page_token().empty()) return grpc::Status::OK;
  std::string text;
  ListPosition pos;
  const std::vector<absl::string_view> parts =
      absl::WebSafeBase64Unescape(req.page_token(), &text)
          ? absl::StrSplit(text, absl::MaxSplits('.', 3))
          : std::vector<absl::string_view>{};
  FieldViolation v;
  v.path = "page_token";
  v.field = "page_token";
  v.reason = "INVALID_PAGE_TOKEN";
  if (parts.size() != 4 || parts[0] != "v1" || !absl::SimpleAtoi(parts[1], &pos.priority) ||
      !absl::SimpleAtoi(parts[2], &pos.id)) {
    v.description = "page_token: not a token of ListRules (use a next_page_token as it came)";
    return RichGrpcStatus(grpc::StatusCode::INVALID_ARGUMENT, v.description, v);
  }
  if (parts[3] != FilterText(req)) {
    v.description =
        "page_token: issued for other filters (cookie, min_priority, max_priority must be those "
        "of the call that returned it)";
    return RichGrpcStatus(grpc::StatusCode::INVALID_ARGUMENT, v.description, v);
  }
  *at = pos;
  return grpc::Status::OK;
}

}  // namespace

// `what` names the call in errors; emit(v1::Rule&) may take the message
// (it is rebuilt for the next rule) and returns false when the client went
// away.  *more: the listing stopped at `limit` with a rule still to list.
template <typename Emit>
grpc::Status ClassifierService::ForEachListed(grpc::ServerContext* ctx,
                                              const v1::ListRulesRequest& req,
                                              absl::string_view what, Emit&& emit, bool* more) {
  *more = false;
  if (req.has_min_priority() && req.has_max_priority() &&
      req.min_priority() > req.max_priority())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("min_priority: ", req.min_priority(),
                                     " is above max_priority ", req.max_priority()));
  std::optional<ListPosition> after;
  if (grpc::Status st = ParsePageToken(req, &after); !st.ok()) return st;
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
    // (priority desc, id asc): skip up to and including the token's rule.
    if (after.has_value() &&
        (r.priority > after->priority || (r.priority == after->priority && r.id <= after->id)))
      continue;
    if (req.has_cookie() && r.cookie != req.cookie()) continue;
    if (req.has_min_priority() && r.priority < req.min_priority()) continue;
    if (req.has_max_priority() && r.priority > req.max_priority()) continue;
    if (req.limit() && sent >= req.limit()) {
      *more = true;
      break;
    }
    RuleToProto(r, &out);
    if (auto it = hits.find(r.id); it != hits.end()) out.set_hits(it->second);
    if (!emit(out)) return grpc::Status::OK;
    ++sent;
  }
  return grpc::Status::OK;
}

grpc::Status ClassifierService::ListRules(grpc::ServerContext* ctx,
                                          const v1::ListRulesRequest* req,
                                          grpc::ServerWriter<v1::ListRulesResponse>* writer) {
  if (grpc::Status s = Restoring(); !s.ok()) return s;
  StreamSlot slot(this, ctx);
  if (!slot.status().ok()) return slot.status();
  IdleWatchdog watchdog(ctx, std::chrono::milliseconds(config_.stream_idle_timeout_ms),
                        IdleMessage("the client read nothing", config_.stream_idle_timeout_ms,
                                    ""));
  watchdog.Pause();  // until the listing is built
  const size_t max_rules = req->page_size() ? req->page_size() : 1024;
  const size_t max_bytes = std::min<size_t>(config_.max_message_bytes / 2, 1u << 20);
  // A page is sent when the next rule does not fit it: every page but the
  // last then knows a rule follows, and carries the token that resumes
  // after it.
  v1::ListRulesResponse page;
  size_t bytes = 0;
  bool open = true;  // the client still reads
  auto flush = [&](bool last_page) {
    if (!last_page)
      page.set_next_page_token(PageToken(*req, page.rules(page.rules_size() - 1)));
    watchdog.Kick();
    open = writer->Write(page);
    watchdog.Pause();
    page.Clear();
    bytes = 0;
    return open;
  };
  bool more = false;
  grpc::Status st = ForEachListed(
      ctx, *req, "ListRules",
      [&](v1::Rule& r) {
        // A rule's share of the page: its bytes and its tag and length.
        const size_t size = r.ByteSizeLong() + 6;
        if (page.rules_size() > 0 &&
            (static_cast<size_t>(page.rules_size()) >= max_rules || bytes + size > max_bytes) &&
            !flush(/*last_page=*/false))
          return false;
        page.mutable_rules()->Add(std::move(r));  // moved, not copied
        bytes += size;
        return true;
      },
      &more);
  if (st.ok() && open && page.rules_size() > 0) flush(/*last_page=*/!more);
  return watchdog.fired() ? watchdog.status() : st;
}

grpc::Status ClassifierService::GetRule(grpc::ServerContext*,
                                        const v1::GetRuleRequest* req,
                                        v1::GetRuleResponse* answer) {
  v1::Rule* resp = answer->mutable_rule();
  if (grpc::Status s = Restoring(); !s.ok()) return s;
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
                                          v1::DeleteAllResponse* answer) {
  v1::BatchAck* resp = answer->mutable_ack();
  if (grpc::Status s = Restoring(); !s.ok()) return s;
  if (grpc::Status s = CheckAlive(ctx, "DeleteAll was applied"); !s.ok()) return s;
  absl::StatusOr<BatchResult> r = dp_->DeleteAll();
  if (!r.ok())  // NOT_FOUND, as for a batch, when the rules kept changing
    return grpc::Status(static_cast<grpc::StatusCode>(ApiCode(r.status())),
                        std::string(r.status().message()));
  FillAck(*r, resp);
  *resp->mutable_server() = server_;
  return grpc::Status::OK;
}

grpc::Status ClassifierService::ReplaceRules(grpc::ServerContext* ctx,
                                             grpc::ServerReader<v1::ReplaceRulesRequest>* reader,
                                             v1::ReplaceRulesResponse* answer) {
  v1::BatchAck* resp = answer->mutable_ack();
  if (grpc::Status s = Restoring(); !s.ok()) return s;
  StreamSlot slot(this, ctx);
  if (!slot.status().ok()) return slot.status();
  IdleWatchdog watchdog(ctx, std::chrono::milliseconds(config_.stream_idle_timeout_ms),
                        IdleMessage("no batch", config_.stream_idle_timeout_ms,
                                    "; nothing was replaced"));
  std::vector<Rule> rules;
  uint64_t n_msg = 0;
  for (v1::ReplaceRulesRequest batch; reader->Read(&batch);) {
    watchdog.Pause();  // converting is the server's time
    ++n_msg;
    for (int i = 0; i < batch.ops_size(); ++i) {
      const v1::RuleOp& op = batch.ops(i);
      if (!op.has_insert()) {
        const RuleOpError e{RuleErrorKind::kInvalid, RuleField::kOp, /*has_op=*/true,
                            static_cast<uint32_t>(i), 0};
        const FieldViolation v = OpViolation(
            e, "", false, ProtoName(e.field),
            absl::StrCat("message ", n_msg, " operation ", i,
                         ": ReplaceRules takes inserts only; nothing was replaced"));
        return RichGrpcStatus(grpc::StatusCode::INVALID_ARGUMENT, v.description, v);
      }
      RuleOp converted;
      if (absl::Status s = RuleOpFromProto(op, &converted); !s.ok()) {
        // The conversion's error, at this operation of this message.
        RuleOpError e = GetRuleOpError(s).value_or(RuleOpError{});
        e.has_op = true;
        e.index = static_cast<uint32_t>(i);
        e.rule_id = op.insert().id();
        const bool text = !op.insert().text().empty();
        const FieldViolation v = OpViolation(
            e, "insert", text, text ? NativeName(e.field) : ProtoName(e.field),
            absl::StrCat("message ", n_msg, " operation ", i, " (rule ", rules.size(),
                         "): ", s.message(), "; nothing was replaced"));
        return RichGrpcStatus(static_cast<grpc::StatusCode>(ApiCode(s)), v.description, v);
      }
      rules.push_back(std::move(converted.rule));
    }
    watchdog.Kick();
  }
  watchdog.Pause();
  if (watchdog.fired()) return watchdog.status();
  if (grpc::Status s = CheckAlive(ctx, "ReplaceRules was applied"); !s.ok()) return s;
  absl::StatusOr<BatchResult> r = ReplaceAllByListing(*dp_, rules);
  if (!r.ok())
    return grpc::Status(static_cast<grpc::StatusCode>(ApiCode(r.status())),
                        absl::StrCat(r.status().message(), "; nothing was replaced"));
  FillAck(*r, resp);
  *resp->mutable_server() = server_;
  return grpc::Status::OK;
}

grpc::Status ClassifierService::GetStats(grpc::ServerContext*,
                                         const v1::GetStatsRequest* req,
                                         v1::GetStatsResponse* resp) {
  if (grpc::Status s = Restoring(); !s.ok()) return s;
  DataplaneStats s = dp_->Stats();
  std::map<uint64_t, uint64_t> base_hits;
  {
    absl::MutexLock lock(&baseline_mu_);
    if (baseline_) SubtractStatsBaseline(*baseline_, &s);
    base_hits = baseline_hits_;
  }
  *resp->mutable_server() = server_;
  resp->set_generation(s.generation);
  resp->set_rules(s.rules.rules);
  // The snapshot figures of the PMDs that answered, summed for `total`
  // (cd_enabled: any PMD has the CD on).
  PipelineSnapshot sum;
  bool any_snapshot = false;
  for (const PmdCounters& p : s.pmds) {
    v1::PmdStats* out = resp->add_pmds();
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
  if (s.acl.enabled) {
    v1::AclBuilderStats* a = resp->mutable_acl();
    a->set_builds(s.acl.builds);
    a->set_build_failures(s.acl.build_failures);
    a->set_build_ns(s.acl.build_ns);
    a->set_last_build_ns(s.acl.last_build_ns);
    a->set_last_build_rules(s.acl.last_build_rules);
    a->set_rules_built(s.acl.rules_built);
    a->set_batches(s.acl.batches);
    a->set_coalesced_batches(s.acl.coalesced_batches);
    a->set_queue_depth(s.acl.queue_depth);
    a->set_live_generation(s.acl.live_generation);
    a->set_algorithm(AclAlgorithmName(s.acl.algorithm));
    a->set_autovalidator_mismatches(s.acl.autovalidator_mismatches);
    a->set_context_bytes(s.acl.context_bytes);
  }
  for (const PortCounters& p : s.ports) {
    v1::PortStats* ps = resp->add_ports();
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
        auto b = base_hits.find(rh.id);
        // Below its baseline: the rule was deleted and inserted again since.
        const uint64_t hits =
            b != base_hits.end() && rh.hits >= b->second ? rh.hits - b->second : rh.hits;
        if (hits == 0) continue;
        v1::RuleHits* out = resp->add_rule_hits();
        out->set_id(rh.id);
        out->set_hits(hits);
      }
  }
  return grpc::Status::OK;
}

grpc::Status ClassifierService::GetConfig(grpc::ServerContext*,
                                          const v1::GetConfigRequest*,
                                          v1::GetConfigResponse* answer) {
  v1::Config* resp = answer->mutable_config();
  if (grpc::Status s = Restoring(); !s.ok()) return s;
  ConfigFromMap(dp_->GetConfig(), resp);
  *resp->mutable_server() = server_;
  return grpc::Status::OK;
}

grpc::Status ClassifierService::SetConfig(grpc::ServerContext* ctx,
                                          const v1::SetConfigRequest* req,
                                          v1::SetConfigResponse* answer) {
  v1::Config* resp = answer->mutable_config();
  if (grpc::Status s = Restoring(); !s.ok()) return s;
  const v1::Config& c = req->config();
  // The named fields, typed, and spelt as keys by the settings' formatter.
  RuntimeSettingsUpdate named;
  auto mode = [](absl::string_view field, v1::CacheMode m) -> absl::StatusOr<CacheMode> {
    switch (m) {
      case v1::CACHE_MODE_ON:
        return CacheMode::kOn;
      case v1::CACHE_MODE_OFF:
        return CacheMode::kOff;
      case v1::CACHE_MODE_AUTO:
        return CacheMode::kAuto;
      default:
        break;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", v1::CacheMode_Name(m).empty() ? absl::StrCat("unknown value ", m)
                                                   : v1::CacheMode_Name(m),
        " is not allowed here (ON, OFF or AUTO)"));
  };
  if (c.has_emc_insert_inv_prob()) named.emc_insert_inv_prob = c.emc_insert_inv_prob();
  if (c.has_smc()) {
    absl::StatusOr<CacheMode> smc = mode("smc", c.smc());
    if (!smc.ok()) return ToGrpcStatus(smc.status());
    named.smc = *smc;
  }
  if (c.has_cd()) {
    absl::StatusOr<CacheMode> cd = mode("cd", c.cd());
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
    if (absl::Status s = dp_->ApplySettings(changes); !s.ok()) {
      // The key the dataplane refused, when its message names it first.
      for (const ConfigValue& kv : changes) {
        if (!absl::StartsWith(s.message(), absl::StrCat(kv.first, ":"))) continue;
        FieldViolation v;
        v.path = absl::StrCat("config.values[", kv.first, "]");
        v.field = kv.first;
        v.reason = "INVALID_CONFIG";
        v.description = std::string(s.message());
        return RichGrpcStatus(static_cast<grpc::StatusCode>(s.code()), s.message(), v);
      }
      return ToGrpcStatus(s);
    }
  }
  ConfigFromMap(dp_->GetConfig(), resp);
  *resp->mutable_server() = server_;
  return grpc::Status::OK;
}

grpc::Status ClassifierService::Trace(grpc::ServerContext*,
                                      const v1::TraceRequest* req,
                                      v1::TraceResponse* resp) {
  if (grpc::Status s = Restoring(); !s.ok()) return s;
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
  if (key.flags & kKeyTruncated) resp->add_parse_flags(v1::PARSE_FLAG_TRUNCATED);
  if (key.flags & kKeyMalformed) resp->add_parse_flags(v1::PARSE_FLAG_MALFORMED);
  resp->set_layer(LayerToProto(t->layer));
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

grpc::Status ClassifierService::DumpMegaflows(
    grpc::ServerContext* ctx, const v1::DumpMegaflowsRequest* req,
    grpc::ServerWriter<v1::DumpMegaflowsResponse>* writer) {
  if (grpc::Status s = Restoring(); !s.ok()) return s;
  StreamSlot slot(this, ctx);
  if (!slot.status().ok()) return slot.status();
  MegaflowDumpRequest q;
  if (req->has_in_port()) q.filter.in_port = req->in_port();
  if (req->has_rule_id()) q.filter.rule_id = req->rule_id();
  if (req->has_pmd()) q.pmd = req->pmd();
  q.match = req->match();
  q.limit = req->limit();
  absl::StatusOr<std::vector<MegaflowEntry>> dump = dp_->DumpMegaflows(q);
  if (!dump.ok()) return ToGrpcStatus(dump.status());
  constexpr int kPage = 1024;
  v1::DumpMegaflowsResponse page;
  IdleWatchdog watchdog(ctx, std::chrono::milliseconds(config_.stream_idle_timeout_ms),
                        IdleMessage("the client read nothing", config_.stream_idle_timeout_ms,
                                    ""));
  watchdog.Pause();
  auto flush = [&] {
    *page.mutable_server() = server_;
    watchdog.Kick();
    const bool ok = writer->Write(page);
    watchdog.Pause();
    page.Clear();
    return ok;
  };
  for (const MegaflowEntry& e : *dump) {
    if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    v1::MegaflowEntry* m = page.add_megaflows();
    m->set_pmd(e.pmd);
    m->set_in_port(static_cast<uint32_t>(e.value.Get(Field::kInPort)));
    m->set_match(MegaflowText(e));
    m->set_rule_id(e.verdict.rule_id);
    if (e.verdict.rule_id != 0) {
      ActionToProto(e.verdict.action, m->mutable_action());
    } else {
      m->mutable_action()->mutable_drop();
    }
    m->set_packets(e.packets);
    m->set_idle_ms(e.idle_ms);
    m->set_subtable(e.subtable);
    if (page.megaflows_size() == kPage && !flush())  // client gone, or idle
      return watchdog.fired() ? watchdog.status() : grpc::Status::OK;
  }
  if (page.megaflows_size() > 0 || dump->empty()) flush();
  return watchdog.fired() ? watchdog.status() : grpc::Status::OK;
}

grpc::Status ClassifierService::ClearStats(grpc::ServerContext*, const v1::ClearStatsRequest*,
                                           v1::ClearStatsResponse* resp) {
  if (grpc::Status s = Restoring(); !s.ok()) return s;
  DataplaneStats s = dp_->Stats();
  std::map<uint64_t, uint64_t> hits;
  absl::StatusOr<std::vector<RuleHit>> h = dp_->RuleHits();
  if (!h.ok() && h.status().code() != absl::StatusCode::kUnimplemented)
    return ToGrpcStatus(h.status());
  if (h.ok())
    for (const RuleHit& rh : *h) hits[rh.id] = rh.hits;
  resp->set_generation(s.generation);
  {
    absl::MutexLock lock(&baseline_mu_);
    baseline_ = std::move(s);
    baseline_hits_ = std::move(hits);
  }
  *resp->mutable_server() = server_;
  return grpc::Status::OK;
}

}  // namespace flowclass
