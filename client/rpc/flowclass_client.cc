#include "client/rpc/flowclass_client.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/text_file.h"
#include "common/tls_pem.h"
#include "dataplane/pmd_counters.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "proto/pmd_stats_convert.h"
#include "proto/rich_error.h"
#include "proto/rule_convert.h"
#include "proto/rule_wire.h"

namespace flowclass {

absl::Status FromGrpcStatus(const grpc::Status& s) { return FromGrpcStatusWithDetails(s); }

std::string ConnectionHint(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kUnavailable) return "";
  // gRPC's words for the cause (first match wins), and what they mean here.
  static constexpr struct {
    const char* says;
    const char* means;
  } kHints[] = {
      {"wrong version number",
       "TLS to a server that speaks plaintext: add --plaintext if the server has "
       "grpc.plaintext: true"},
      {"certificate verify failed",
       "the server's certificate is not signed by the CA this client trusts: give --ca FILE, "
       "and --server-name NAME when the certificate does not name HOST"},
      {"andshake",
       "TLS handshake failed: check --ca, --server-name, and --cert/--key when the server "
       "requires client certificates"},
      {"Socket closed",
       "the server closed the connection: plaintext to a TLS server? drop --plaintext and "
       "give --ca"},
      {"Connection refused",
       "nothing listens there: is flowclassd running with grpc: enabled, on this --server "
       "address?"},
  };
  for (const auto& h : kHints)
    if (absl::StrContains(s.message(), h.says)) return absl::StrCat("\n  (", h.means, ")");
  return "";
}

absl::Status AckStatus(const v1::BatchAck& ack) {
  if (ack.status().code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(ack.status().code()),
                      absl::StrCat("batch ", ack.batch_id(), ": ", ack.status().message()));
}

absl::StatusOr<std::unique_ptr<FlowclassClient>> FlowclassClient::Connect(
    const ClientOptions& o) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (o.plaintext) {
    if (!o.ca_file.empty() || !o.cert_file.empty() || !o.key_file.empty())
      return absl::InvalidArgumentError("--plaintext: cannot be combined with --ca/--cert/--key");
    creds = grpc::InsecureChannelCredentials();
  } else {
    // The files are checked here (PEM certificates, a key that is the
    // certificate's): gRPC would only fail the handshake, as UNAVAILABLE.
    grpc::SslCredentialsOptions ssl;
    if (!o.ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadCertificatesPem("--ca", o.ca_file);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (o.cert_file.empty() != o.key_file.empty())
      return absl::InvalidArgumentError("--cert and --key: give both or neither");
    if (!o.cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadCertificatesPem("--cert", o.cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadPrivateKeyPem("--key", o.key_file);
      if (!key.ok()) return key.status();
      if (absl::Status s = CheckKeyMatchesCertificate("--key", o.key_file, *key, "--cert",
                                                      o.cert_file, *cert);
          !s.ok())
        return s;
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(o.max_message_bytes);
  args.SetMaxSendMessageSize(o.max_message_bytes);
  if (!o.server_name.empty()) args.SetSslTargetNameOverride(o.server_name);
  auto c = std::unique_ptr<FlowclassClient>(new FlowclassClient());
  c->options_ = o;
  c->channel_ = grpc::CreateCustomChannel(o.target, creds, args);
  if (!c->channel_) return absl::InvalidArgumentError(absl::StrCat("bad target ", o.target));
  c->stub_ = v1::ClassifierService::NewStub(c->channel_);
  // The method's name lives as long as the program (RpcMethod keeps the
  // pointer).
  static const std::string* const kApplyRules =
      new std::string(absl::StrCat("/", v1::ClassifierService::service_full_name(), "/ApplyRules"));
  c->apply_rules_raw_ = std::make_unique<grpc::internal::RpcMethod>(
      kApplyRules->c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, c->channel_);
  return c;
}

void FlowclassClient::SetDeadline(grpc::ClientContext* ctx) const {
  if (options_.timeout.count() > 0)
    ctx->set_deadline(std::chrono::system_clock::now() + options_.timeout);
  AddToken(ctx);
}

void FlowclassClient::AddToken(grpc::ClientContext* ctx) const {
  // Metadata rather than call credentials: gRPC refuses call credentials on
  // a plaintext channel, and a loopback plaintext server takes tokens.
  if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
}

absl::StatusOr<std::string> ReadTokenFile(absl::string_view what, const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok())
    return absl::Status(text.status().code(), absl::StrCat(what, ": ", text.status().message()));
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    if (line.find_first_of(" \t") != absl::string_view::npos)
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": \"", path, "\": the token line has spaces (write the bare token, not "
          "the server's ROLE TOKEN line)"));
    return std::string(line);
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": \"", path, "\" holds no token"));
}

absl::Status FlowclassClient::WaitForReady(std::chrono::milliseconds timeout) {
  if (channel_->WaitForConnected(std::chrono::system_clock::now() + timeout))
    return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", options_.target, " within ", timeout.count(), " ms"));
}

absl::StatusOr<ApplyResult> FlowclassClient::ApplyOps(absl::Span<const RuleOp> ops,
                                                      const ApplyOptions& o,
                                                      ApplyResult* partial) {
  if (o.batch_size == 0 || o.window == 0)
    return absl::InvalidArgumentError("batch_size and window must be at least 1");
  const size_t n_batches = (ops.size() + o.batch_size - 1) / o.batch_size;
  ApplyResult result;
  if (n_batches == 0) {  // nothing to send: the generation as it stands
    absl::StatusOr<v1::GetStatsResponse> st = GetStats(false, false);
    if (!st.ok()) return st.status();
    result.generation = st->generation();
    return result;
  }

  grpc::ClientContext ctx;
  AddToken(&ctx);
  // A stream has no natural deadline: one of `timeout` x (1 + batches/window).
  if (options_.timeout.count() > 0)
    ctx.set_deadline(std::chrono::system_clock::now() +
                     options_.timeout * static_cast<int64_t>(1 + n_batches / o.window));
  // ApplyRules with batches written as bytes (AppendRuleBatchWire), not
  // built as messages: the server reads the same v1.ApplyRulesRequest.
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, v1::ApplyRulesResponse>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, v1::ApplyRulesResponse>::Create(
          channel_.get(), *apply_rules_raw_, &ctx));

  std::mutex mu;
  std::condition_variable cv;
  size_t in_flight = 0;
  size_t sent = 0;
  bool stop = false;
  const auto start = std::chrono::steady_clock::now();
  std::thread writer([&] {
    // Each batch is encoded straight from the ops into one buffer (the
    // bytes protobuf would write for the ApplyRulesRequest RuleOpToProto builds):
    // building and serializing the messages was most of the client's time
    // in a streamed load, on the CPU the server shares with it.
    std::string wire;
    for (size_t b = 0; b < n_batches; ++b) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || in_flight < o.window; });
        if (stop) break;
        ++in_flight;
      }
      const size_t lo = b * o.batch_size;
      const size_t hi = std::min(ops.size(), lo + o.batch_size);
      wire.clear();
      AppendRuleBatchWire(o.first_batch_id + b, ops.subspan(lo, hi - lo), &wire);
      grpc::Slice slice(wire);
      if (!stream->Write(grpc::ByteBuffer(&slice, 1))) break;  // the stream ended; Finish says why
      std::lock_guard<std::mutex> lock(mu);
      ++sent;
    }
    stream->WritesDone();
  });

  v1::ApplyRulesResponse resp;
  size_t acked_ops = 0;
  while (stream->Read(&resp)) {
    const v1::BatchAck& ack = resp.ack();
    ++result.batches_acked;
    const uint64_t b = ack.batch_id() - o.first_batch_id;
    const size_t batch_ops =
        b < n_batches ? std::min(ops.size(), (b + 1) * o.batch_size) - b * o.batch_size : 0;
    if (ack.status().code() == 0) {
      result.ops_applied += batch_ops;
      result.generation = ack.generation();
      if (b < n_batches) result.ok_batches.push_back(static_cast<size_t>(b));
    } else if (!result.first_error.has_value()) {
      result.first_error = ack;
    }
    acked_ops += batch_ops;
    {
      std::lock_guard<std::mutex> lock(mu);
      --in_flight;
      if (ack.status().code() != 0) stop = true;
    }
    cv.notify_all();
    if (o.progress) o.progress(acked_ops, ops.size());
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  writer.join();
  const grpc::Status st = stream->Finish();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.batches_sent = sent;
  if (!st.ok()) {
    if (partial != nullptr) *partial = std::move(result);
    return FromGrpcStatus(st);
  }
  return result;
}

absl::StatusOr<v1::BatchAck> FlowclassClient::ApplyBatch(const v1::ApplyRulesRequest& batch) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto stream = stub_->ApplyRules(&ctx);
  stream->Write(batch);
  stream->WritesDone();
  v1::ApplyRulesResponse resp;
  const bool got = stream->Read(&resp);
  const grpc::Status st = stream->Finish();
  if (!st.ok()) return FromGrpcStatus(st);
  if (!got) return absl::InternalError("ApplyRules: the stream ended without an ack");
  return std::move(*resp.mutable_ack());
}

absl::StatusOr<std::vector<v1::Rule>> FlowclassClient::ListRules(
    const v1::ListRulesRequest& req) {
  std::vector<v1::Rule> out;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto reader = stub_->ListRules(&ctx, req);
  v1::ListRulesResponse page;
  while (reader->Read(&page))
    for (v1::Rule& r : *page.mutable_rules()) out.push_back(std::move(r));
  const grpc::Status st = reader->Finish();
  if (!st.ok()) return FromGrpcStatus(st);
  return out;
}

// The answer of a unary call; FC_UNARY_FIELD: its `field` (rule, ack,
// config).
#define FC_UNARY(method, req, resp_type)                   \
  grpc::ClientContext ctx;                                 \
  SetDeadline(&ctx);                                       \
  resp_type resp;                                          \
  const grpc::Status st = stub_->method(&ctx, req, &resp); \
  if (!st.ok()) return FromGrpcStatus(st);                 \
  return resp
#define FC_UNARY_FIELD(method, req, resp_type, field)                                   \
  absl::StatusOr<resp_type> answer = [&]() -> absl::StatusOr<resp_type> {               \
    FC_UNARY(method, req, resp_type);                                                   \
  }();                                                                                  \
  if (!answer.ok()) return answer.status();                                             \
  return std::move(*answer->mutable_##field())

absl::StatusOr<v1::Rule> FlowclassClient::GetRule(uint64_t id) {
  v1::GetRuleRequest req;
  req.set_id(id);
  FC_UNARY_FIELD(GetRule, req, v1::GetRuleResponse, rule);
}

absl::StatusOr<v1::BatchAck> FlowclassClient::DeleteAll() {
  v1::DeleteAllRequest req;
  FC_UNARY_FIELD(DeleteAll, req, v1::DeleteAllResponse, ack);
}

absl::StatusOr<v1::BatchAck> FlowclassClient::ReplaceRules(absl::Span<const Rule> rules,
                                                           size_t per_message) {
  if (per_message == 0) per_message = 1;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ReplaceRulesResponse resp;
  auto writer = stub_->ReplaceRules(&ctx, &resp);
  for (size_t i = 0; i < rules.size(); i += per_message) {
    v1::ReplaceRulesRequest b;
    for (size_t k = i; k < std::min(rules.size(), i + per_message); ++k)
      RuleToProto(rules[k], b.add_ops()->mutable_insert());
    if (!writer->Write(b)) break;  // the server ended the call: Finish says why
  }
  writer->WritesDone();
  const grpc::Status st = writer->Finish();
  if (!st.ok()) return FromGrpcStatus(st);
  return std::move(*resp.mutable_ack());
}

absl::StatusOr<v1::GetStatsResponse> FlowclassClient::GetStats(bool include_subtables,
                                                    bool include_rule_hits) {
  v1::GetStatsRequest req;
  req.set_include_subtables(include_subtables);
  req.set_include_rule_hits(include_rule_hits);
  FC_UNARY(GetStats, req, v1::GetStatsResponse);
}

absl::StatusOr<v1::Config> FlowclassClient::GetConfig() {
  v1::GetConfigRequest req;
  FC_UNARY_FIELD(GetConfig, req, v1::GetConfigResponse, config);
}

absl::StatusOr<v1::Config> FlowclassClient::SetConfig(const v1::Config& config) {
  v1::SetConfigRequest req;
  *req.mutable_config() = config;
  FC_UNARY_FIELD(SetConfig, req, v1::SetConfigResponse, config);
}

absl::StatusOr<v1::TraceResponse> FlowclassClient::Trace(const v1::TraceRequest& req) {
  FC_UNARY(Trace, req, v1::TraceResponse);
}

absl::StatusOr<v1::ClearStatsResponse> FlowclassClient::ClearStats() {
  v1::ClearStatsRequest req;
  FC_UNARY(ClearStats, req, v1::ClearStatsResponse);
}

#undef FC_UNARY
#undef FC_UNARY_FIELD

absl::StatusOr<std::vector<v1::MegaflowEntry>> FlowclassClient::DumpMegaflows(
    const v1::DumpMegaflowsRequest& req) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto reader = stub_->DumpMegaflows(&ctx, req);
  std::vector<v1::MegaflowEntry> out;
  v1::DumpMegaflowsResponse page;
  while (reader->Read(&page))
    for (v1::MegaflowEntry& m : *page.mutable_megaflows()) out.push_back(std::move(m));
  const grpc::Status st = reader->Finish();
  if (!st.ok()) return FromGrpcStatus(st);
  return out;
}

std::string FormatMegaflow(const v1::MegaflowEntry& m) {
  return absl::StrFormat(
      "pmd=%u %s, packets:%u, used:%.3fs, rule:%s, actions:%s", m.pmd(), m.match(), m.packets(),
      static_cast<double>(m.idle_ms()) / 1000.0,
      m.rule_id() ? absl::StrCat(m.rule_id()) : std::string("none"),
      m.action().has_output_port() ? absl::StrCat("output:", m.action().output_port())
                                   : std::string("drop"));
}

absl::StatusOr<bool> FlowclassClient::Healthy(const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  const grpc::Status st = stub->Check(&ctx, req, &resp);
  if (!st.ok()) return FromGrpcStatus(st);
  return resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

std::string FormatStats(const v1::GetStatsResponse& s) {
  std::string out = absl::StrFormat("generation %d, %d rules\n", s.generation(), s.rules());
  auto block = [&](const std::string& title, const v1::PmdStats& p) {
    const uint64_t total_cycles = p.cycles_busy() + p.cycles_idle();
    absl::StrAppendFormat(&out, "%s:\n", title);
    for (const PmdCounterInfo& c : kPmdCounters)
      if (c.rpc) AppendPmdCounterLine(&out, c, PmdCounterFromProto(p, c.id));
    absl::StrAppendFormat(
        &out,
        "  avg. subtable lookups per megaflow hit: %.2f\n"
        "  cd state: %s\n"
        "  dropped by a rule: %d\n"
        "  output to an unknown port (dropped): %d\n"
        "  sent: %d\n"
        "  tx dropped (queue full): %d\n"
        "  truncated or malformed headers: %d\n"
        "  idle cycles: %d (%.2f%%)\n"
        "  processing cycles: %d (%.2f%%)\n"
        "  avg cycles per packet: %.2f\n"
        "  rule set generation: %d\n",
        p.avg_subtable_lookups_per_hit(), p.cd_enabled() ? "on" : "off", p.rule_drops(),
        p.bad_port(), p.tx_packets(), p.tx_dropped(), p.parse_errors(), p.cycles_idle(),
        total_cycles ? 100.0 * static_cast<double>(p.cycles_idle()) / total_cycles : 0.0,
        p.cycles_busy(),
        total_cycles ? 100.0 * static_cast<double>(p.cycles_busy()) / total_cycles : 0.0,
        p.avg_cycles_per_packet(), p.generation());
    if (p.emc_entries() || p.smc_entries())
      absl::StrAppendFormat(&out, "  emc occupancy: %d/%d  smc occupancy: %d/%d\n",
                            p.emc_occupancy(), p.emc_entries(), p.smc_occupancy(),
                            p.smc_entries());
    for (const v1::SubtableStats& st : p.subtables())
      absl::StrAppendFormat(&out, "  subtable %d port %d rank %d hits %d megaflows %d %s %s\n",
                            st.id(), st.in_port(), st.rank(), st.hits(), st.megaflows(),
                            st.lookup_impl(), st.mask());
  };
  for (const v1::PmdStats& p : s.pmds())
    block(absl::StrFormat("pmd thread %d (lcore %d)", p.pmd(), p.lcore()), p);
  block("total", s.total());
  for (const v1::PortStats& p : s.ports())
    absl::StrAppendFormat(&out,
                          "port %d (%s): rx %d tx %d tx_dropped %d rx_errors %d rx_missed %d\n",
                          p.port(), p.name(), p.rx_packets(), p.tx_packets(),
                          p.tx_dropped(), p.rx_errors(), p.rx_missed());
  for (const v1::RuleHits& h : s.rule_hits())
    absl::StrAppendFormat(&out, "rule %d: %d hits\n", h.id(), h.hits());
  if (s.has_acl()) {
    const v1::AclBuilderStats& a = s.acl();
    absl::StrAppendFormat(
        &out,
        "acl builder:\n"
        "  builds: %d (failed: %d)\n"
        "  last build: %.3f ms, %d rules\n"
        "  avg build: %.3f ms, %.1f rules\n"
        "  batches built: %d (coalesced: %d)\n"
        "  build queue depth: %d\n"
        "  live generation: %d\n"
        "  context memory: %d bytes\n"
        "  algorithm: %s (autovalidator mismatches: %d)\n",
        a.builds(), a.build_failures(), static_cast<double>(a.last_build_ns()) / 1e6,
        a.last_build_rules(),
        a.builds() ? static_cast<double>(a.build_ns()) / 1e6 / static_cast<double>(a.builds())
                   : 0.0,
        a.builds() ? static_cast<double>(a.rules_built()) / static_cast<double>(a.builds())
                   : 0.0,
        a.batches(), a.coalesced_batches(), a.queue_depth(), a.live_generation(),
        a.context_bytes(), a.algorithm(), a.autovalidator_mismatches());
  }
  return out;
}

}  // namespace flowclass
