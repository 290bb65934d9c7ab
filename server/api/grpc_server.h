// grpc_server.h — starts and stops flowclassd's gRPC server.
//
// Contract
// --------
// StartGrpcServer(dp, config) validates `config` (grpc_config.h), reads the
// TLS files (or takes them already read), and starts a gRPC server with:
//   flowclass.v1.Classifier   (classifier_service.h) over `dp`
//   grpc.health.v1.Health     "" and "flowclass.v1.Classifier": SERVING;
//                             with a Readiness (server/readiness.h) SERVING
//                             exactly while it is ready, NOT_SERVING
//                             otherwise (it follows every change); without
//                             one NOT_SERVING during a restore window
//                             (config.restoring, until Restored())
//   server reflection         (grpcurl, grpc_cli can list and call methods)
// and the configured limits: max_message_bytes for receive and send,
// max_concurrent_streams open streaming calls server-wide (one more is
// refused with RESOURCE_EXHAUSTED; the HTTP/2 per-connection stream limit is
// set 16 above it so unary calls still pass), max_batch_ops per RuleBatch.  With port 0 the kernel picks a
// free port; port() tells which.  Errors: INVALID_ARGUMENT naming the config
// key; NOT_FOUND for a TLS file that cannot be read; UNAVAILABLE when the
// address cannot be bound.
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

#include "absl/status/statusor.h"
#include "dataplane/dataplane.h"
#include "server/api/grpc_config.h"

namespace grpc {
class Server;
}

namespace flowclass {

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

 private:
  friend absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(
      Dataplane*, const GrpcServerConfig&, const GrpcTlsPem&, Readiness*);
  GrpcServer() = default;
  void SetServing(bool serving);

  Readiness* readiness_ = nullptr;
  int readiness_sub_ = 0;

  GrpcServerConfig config_;
  std::unique_ptr<ClassifierService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(
    Dataplane* dp, const GrpcServerConfig& config);
// The same with the TLS files already read (LoadGrpcTlsFiles): the server
// uses `pem` and reads no file, so a daemon that checked its files before
// starting serves what it checked.  Ignored with plaintext.
// `readiness`, if given, drives health (and must outlive the server).
absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(
    Dataplane* dp, const GrpcServerConfig& config, const GrpcTlsPem& pem,
    Readiness* readiness = nullptr);

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_API_GRPC_SERVER_H_
