#include "server/api/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>


#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "server/api/classifier_service.h"
#include "server/readiness.h"

namespace flowclass {
namespace {

constexpr int kUnaryStreamHeadroom = 16;

}  // namespace

GrpcServer::~GrpcServer() { Shutdown(); }

std::string GrpcServer::target() const {
  GrpcServerConfig c = config_;
  c.port = static_cast<uint32_t>(port_);
  return GrpcListenAddress(c);
}

void GrpcServer::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_ || !server_) return;
  shut_down_ = true;
  if (readiness_) readiness_->Unsubscribe(readiness_sub_);  // no change past here
  if (auto* h = server_->GetHealthCheckService()) h->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
}

void GrpcServer::Restored(const ServerInstanceInfo& instance) {
  service_->Restored(instance);
  if (!readiness_ && !shut_down_) SetServing(true);
}

absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(
    Dataplane* dp, const GrpcServerConfig& config) {
  if (absl::Status s = ValidateGrpcServerConfig(config); !s.ok()) return s;
  absl::StatusOr<GrpcTlsPem> pem = LoadGrpcTlsFiles(config);
  if (!pem.ok()) return pem.status();
  return StartGrpcServer(dp, config, *pem);
}

void GrpcServer::SetServing(bool serving) {
  if (auto* h = server_->GetHealthCheckService()) {
    h->SetServingStatus("", serving);
    h->SetServingStatus("flowclass.v1.Classifier", serving);
  }
}

absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(
    Dataplane* dp, const GrpcServerConfig& config, const GrpcTlsPem& tls,
    Readiness* readiness) {
  if (absl::Status s = ValidateGrpcServerConfig(config); !s.ok()) return s;
  if (!config.plaintext && (tls.cert.empty() || tls.key.empty()))
    return absl::InvalidArgumentError(
        "grpc: TLS is configured but no certificate and key were given (LoadGrpcTlsFiles)");
  if (!config.plaintext && config.require_client_cert && tls.ca.empty())
    return absl::InvalidArgumentError(
        "grpc: require_client_cert is set but no CA certificates were given (LoadGrpcTlsFiles)");
  const GrpcTlsPem* pem = &tls;
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (config.plaintext) {
    creds = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions opts(
        config.require_client_cert
            ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
            : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    opts.pem_root_certs = pem->ca;
    opts.pem_key_cert_pairs.push_back({pem->key, pem->cert});
    creds = grpc::SslServerCredentials(opts);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // gRPC's built-in health service carries no descriptors: reflection lists
  // grpc.health.v1.Health but could not describe it.  Referencing our
  // generated health.proto links it in, which registers its descriptors in
  // the pool reflection answers from.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();

  auto server = std::unique_ptr<GrpcServer>(new GrpcServer());
  server->config_ = config;
  server->service_ = std::make_unique<ClassifierService>(dp, config);

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(GrpcListenAddress(config), creds, &port);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  // The HTTP/2 limit queues streams past it silently; keep it above ours
  // (which refuses with RESOURCE_EXHAUSTED) so that unary calls still get
  // through while every streaming slot is taken.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(config.max_concurrent_streams) +
                                 kUnaryStreamHeadroom);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || port == 0)
    return absl::UnavailableError(absl::StrCat(
        "grpc.address/port: cannot listen on ", GrpcListenAddress(config),
        " (in use, or not an address of this host)"));
  server->port_ = port;
  if (readiness) {
    server->readiness_ = readiness;
    GrpcServer* g = server.get();
    server->readiness_sub_ = readiness->Subscribe([g](bool ready) { g->SetServing(ready); });
  } else {
    server->SetServing(config.restoring.empty());
  }
  return server;
}

}  // namespace flowclass
