// grpc_server.h — starts and stops flowclassd's gRPC server.
//
// Contract
// --------
// StartGrpcServer(dp, config) validates `config` (grpc_config.h), reads the
// TLS files (or takes them already read), and starts a gRPC server with:
//   flowclass.v1.ClassifierService   (classifier_service.h) over `dp`
//   grpc.health.v1.Health     "" and "flowclass.v1.ClassifierService": SERVING;
//                             with a Readiness (server/readiness.h) SERVING
//                             exactly while it is ready, NOT_SERVING
//                             otherwise (it follows every change); without
//                             one NOT_SERVING during a restore window
//                             (config.restoring, until Restored())
//   server reflection         (grpcurl, grpc_cli can list and call methods)
// and the configured limits: max_message_bytes for receive and send,
// max_concurrent_streams open streaming calls server-wide (one more is
// refused with RESOURCE_EXHAUSTED; the HTTP/2 per-connection stream limit is
// set 16 above it so unary calls still pass), max_streams_per_identity of
// them per identity and stream_idle_timeout_ms (classifier_service.h),
// max_batch_ops per batch (ApplyRulesRequest); per connection handshake_timeout_ms,
// keepalive_time_ms / keepalive_timeout_ms (the server's pings),
// min_client_ping_interval_ms (GOAWAY for clients pinging more often) and
// max_connection_idle_ms.  SO_REUSEPORT is off: a port another process
// holds, with SO_REUSEPORT or not, is UNAVAILABLE, never shared.  With port
// 0 the kernel picks a free port; port() tells which.  Errors: INVALID_ARGUMENT naming the config
// key; NOT_FOUND for a TLS file that cannot be read; UNAVAILABLE when the
// address cannot be bound.
//
// With authorization on (grpc_config.h, GrpcAuthEnabled), every call of
// every service is checked first (grpc_auth.h; roles in auth_policy.h);
// admin calls are audited either way.  TLS is served from private copies of
// the checked PEM that gRPC's file watcher polls, so ReloadTls can rotate
// the certificate without a restart.
//
// Threads: gRPC's own pool serves calls; Start/Shutdown/the destructor from
// one control thread.  `dp` must outlive the server.  Shutdown() stops
// accepting calls, lets running calls finish for up to `grace`, then cancels
// them; health turns NOT_SERVING first.
#ifndef FLOWCLASS_SERVER_API_GRPC_SERVER_H_
#define FLOWCLASS_SERVER_API_GRPC_SERVER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/dataplane.h"
#include "server/api/grpc_config.h"

namespace grpc {
class Server;
}

namespace flowclass {

class AuthProcessor;
class ClassifierService;
class Readiness;

class GrpcServer {
 public:
  ~GrpcServer();  // Shutdown() with the default grace
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  int port() const { return port_; }
  // "127.0.0.1:43121": what a client dials.
  std::string target() const;
  void Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  // Ends the restore window of config.restoring (ClassifierService::Restored).
  void Restored(const ServerInstanceInfo& instance);

  // Re-reads grpc.auth.token_file (the lists come from `config` too): new
  // calls see the new tokens.  On an error the old policy stays and the
  // error says why.  Turning authorization on or off needs a restart.
  absl::Status ReloadAuth(const GrpcServerConfig& config);
  // Re-reads and checks the TLS files (LoadGrpcTlsFiles): new connections
  // get the new certificate (and CA) within about two seconds; open
  // connections and streams keep theirs.  On an error the served material
  // stays and the error says why.  OK with nothing to do for plaintext.
  absl::Status ReloadTls(const GrpcServerConfig& config);
  // What flowclassd runs on SIGHUP: ReloadAuth and ReloadTls; one line per
  // part saying what it loaded, or why it kept the old material.
  std::vector<std::string> Reload(const GrpcServerConfig& config);

 private:
  friend absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(
      Dataplane*, const GrpcServerConfig&, const GrpcTlsPem&, Readiness*);
  GrpcServer() = default;
  void SetServing(bool serving);

  Readiness* readiness_ = nullptr;
  int readiness_sub_ = 0;

  GrpcServerConfig config_;
  std::unique_ptr<ClassifierService> service_;
  std::shared_ptr<AuthProcessor> auth_;  // null: authorization off
  std::string tls_dir_;  // private copies of the served PEM ("" plaintext)
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(
    Dataplane* dp, const GrpcServerConfig& config);
// The private copies the server serves TLS from (mode 0600, under $TMPDIR or
// /tmp, removed with the server).
absl::Status WriteTlsCopies(const std::string& dir, const GrpcTlsPem& pem);
void RemoveTlsCopies(const std::string& dir);
// The same with the TLS files already read (LoadGrpcTlsFiles): the server
// uses `pem` and reads no file, so a daemon that checked its files before
// starting serves what it checked.  Ignored with plaintext.
// `readiness`, if given, drives health (and must outlive the server).
absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(
    Dataplane* dp, const GrpcServerConfig& config, const GrpcTlsPem& pem,
    Readiness* readiness = nullptr);

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_API_GRPC_SERVER_H_
