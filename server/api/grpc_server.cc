#include "server/api/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>


#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "server/api/classifier_service.h"
#include "server/api/grpc_auth.h"
#include "server/readiness.h"
#include "spdlog/spdlog.h"

namespace flowclass {
namespace {

constexpr int kUnaryStreamHeadroom = 16;
// Pings without data closer than min_client_ping_interval_ms before GOAWAY
// (gRPC's own default).
constexpr int kMaxPingStrikes = 2;
// How often gRPC looks at the private TLS copies (its minimum is 1 s).
constexpr unsigned kTlsPollSeconds = 1;

// Writes `text` to dir/name through a temporary file and rename(), mode 0600.
absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             const std::string& text) {
  const std::string path = absl::StrCat(dir, "/", name), tmp = path + ".new";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::FailedPreconditionError(
        absl::StrCat("grpc: cannot write ", tmp, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("grpc: cannot write ", tmp, ": ", std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::FailedPreconditionError(
        absl::StrCat("grpc: cannot rename ", tmp, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteTlsCopies(const std::string& dir, const GrpcTlsPem& pem) {
  // CA first, then the pair: a poll between the two renames may read a new
  // key with the old certificate; gRPC's watcher then finds the files
  // changed again on its next poll, one second later.
  if (!pem.ca.empty())
    if (absl::Status s = WriteAtomically(dir, "ca.pem", pem.ca); !s.ok()) return s;
  if (absl::Status s = WriteAtomically(dir, "cert.pem", pem.cert); !s.ok()) return s;
  return WriteAtomically(dir, "key.pem", pem.key);
}

void RemoveTlsCopies(const std::string& dir) {
  if (dir.empty()) return;
  for (const char* f : {"key.pem", "cert.pem", "ca.pem", "key.pem.new", "cert.pem.new",
                        "ca.pem.new"})
    ::unlink(absl::StrCat(dir, "/", f).c_str());
  ::rmdir(dir.c_str());
}

GrpcServer::~GrpcServer() {
  Shutdown();
  RemoveTlsCopies(tls_dir_);
}

absl::Status GrpcServer::ReloadTls(const GrpcServerConfig& config) {
  if (tls_dir_.empty()) return absl::OkStatus();  // plaintext
  absl::StatusOr<GrpcTlsPem> pem = LoadGrpcTlsFiles(config);
  if (!pem.ok()) return pem.status();  // the served material stays
  return WriteTlsCopies(tls_dir_, *pem);
}

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

absl::Status GrpcServer::ReloadAuth(const GrpcServerConfig& config) {
  if (!auth_) return absl::OkStatus();  // nothing to reload: auth is off
  absl::StatusOr<std::shared_ptr<const AuthPolicy>> policy = AuthPolicy::Load(config);
  if (!policy.ok()) return policy.status();  // the old policy stays
  auth_->SetPolicy(*std::move(policy));
  return absl::OkStatus();
}

std::vector<std::string> GrpcServer::Reload(const GrpcServerConfig& config) {
  std::vector<std::string> out;
  if (auth_) {
    if (absl::Status s = ReloadAuth(config); s.ok())
      out.push_back(absl::StrCat("grpc.auth: reloaded (", auth_->policy()->token_count(),
                                 " tokens)"));
    else
      out.push_back(absl::StrCat("grpc.auth: kept the previous tokens: ", s.message()));
  }
  if (!tls_dir_.empty()) {
    if (absl::Status s = ReloadTls(config); s.ok())
      out.push_back(absl::StrCat("grpc TLS: reloaded ", config.tls_cert_file,
                                 config.require_client_cert ? " and " + config.tls_ca_file : "",
                                 " (served to new connections within ", kTlsPollSeconds + 1,
                                 " s)"));
    else
      out.push_back(absl::StrCat("grpc TLS: kept the previous certificate: ", s.message()));
  }
  return out;
}

void GrpcServer::SetServing(bool serving) {
  if (auto* h = server_->GetHealthCheckService()) {
    h->SetServingStatus("", serving);
    h->SetServingStatus("flowclass.v1.ClassifierService", serving);
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
  std::string tls_dir;
  std::shared_ptr<AuthProcessor> auth;
  if (GrpcAuthEnabled(config)) {
    absl::StatusOr<std::shared_ptr<const AuthPolicy>> policy = AuthPolicy::Load(config);
    if (!policy.ok()) return policy.status();
    auth = std::make_shared<AuthProcessor>(*std::move(policy));
  }
  const GrpcTlsPem* pem = &tls;
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (config.plaintext) {
    // gRPC runs an AuthMetadataProcessor only on secure credentials.  Local
    // TCP credentials are those of plaintext on loopback (no handshake
    // bytes: plaintext clients connect as before) and accept only loopback
    // peers, which is all a loopback listener has.
    creds = auth ? grpc::experimental::LocalServerCredentials(LOCAL_TCP)
                 : grpc::InsecureServerCredentials();
  } else {
    // The server is served from private copies of the checked PEM, which a
    // FileWatcherCertificateProvider polls: ReloadTls replaces the copies
    // only with material that passed the same checks, so a bad new file
    // never reaches gRPC (its watcher would serve whatever it reads).
    char tmpl[] = "/tmp/flowclassd-tls-XXXXXX";
    const char* tmpdir = std::getenv("TMPDIR");
    std::string dir_tmpl = tmpdir && *tmpdir ? absl::StrCat(tmpdir, "/flowclassd-tls-XXXXXX")
                                             : std::string(tmpl);
    if (!mkdtemp(dir_tmpl.data()))
      return absl::FailedPreconditionError(
          absl::StrCat("grpc: cannot create a private directory for the TLS material (",
                       dir_tmpl, "): ", std::strerror(errno)));
    tls_dir = dir_tmpl;
    if (absl::Status s = WriteTlsCopies(tls_dir, *pem); !s.ok()) {
      RemoveTlsCopies(tls_dir);
      return s;
    }
    auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls_dir + "/key.pem", tls_dir + "/cert.pem",
        config.require_client_cert ? tls_dir + "/ca.pem" : std::string(), kTlsPollSeconds);
    grpc::experimental::TlsServerCredentialsOptions opts(provider);
    opts.watch_identity_key_cert_pairs();
    if (config.require_client_cert) opts.watch_root_certs();
    opts.set_cert_request_type(config.require_client_cert
                                   ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                   : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    creds = grpc::experimental::TlsServerCredentials(opts);
  }
  if (auth) creds->SetAuthMetadataProcessor(auth);

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
  server->auth_ = auth;
  server->tls_dir_ = tls_dir;
  std::function<void(const std::string&)> sink = config.audit_sink;
  if (!sink)
    sink = [](const std::string& line) { spdlog::info("{}", line); };  // server/log.h
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> icpt;
  icpt.push_back(std::make_unique<AuditInterceptorFactory>(
      [dp] { return dp->generation(); }, std::move(sink)));

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
  // Connections: a set-up that never finishes, a peer that vanished (no
  // answer to the server's keepalive ping), a connection left without calls
  // are closed; a client pinging more often than min_client_ping_interval_ms
  // without data gets GOAWAY after kMaxPingStrikes such pings.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(config.handshake_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(config.keepalive_time_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(config.keepalive_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(config.min_client_ping_interval_ms));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, kMaxPingStrikes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(config.max_connection_idle_ms));
  // gRPC sets SO_REUSEPORT by default: a second process that holds the port
  // with it would share the connections with this one, and the daemon would
  // start as if it had the port alone.  Without it, bind fails (exit 3).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.experimental().SetInterceptorCreators(std::move(icpt));
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || port == 0) {
    server.reset();  // removes the TLS copies
  }
  if (!server)
    return absl::UnavailableError(absl::StrCat(
        "grpc.address/port: cannot listen on ", GrpcListenAddress(config),
        " (in use, also by a process that holds it with SO_REUSEPORT, or not an address "
        "of this host)"));
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
