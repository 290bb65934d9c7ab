// grpc_auth.h — the gRPC side of auth_policy.h: who is calling, may they,
// and the audit line of every admin call.
//
// Contract
// --------
// AuthProcessor is the server credentials' grpc::AuthMetadataProcessor: gRPC
// runs it for every call of every service (flowclass.v1, health,
// reflection) before any handler, with the call's path, its metadata and
// the connection's AuthContext (the verified client certificate).  It takes
// the bearer token from `authorization: Bearer TOKEN` (and removes that
// metadata from the call), the certificate's SAN URIs (peer_uri), SAN DNS
// names (peer_dns) and CN (x509_common_name), and asks the policy.  A
// refusal fails the call with UNAUTHENTICATED or PERMISSION_DENIED before
// its handler runs, so nothing changes.  An allowed call carries its
// identity in its AuthContext ("flowclass_identity", "flowclass_role").
// SetPolicy swaps the policy (SIGHUP reload): calls already decided keep
// their verdict, new calls see the new policy.
//
// AuditInterceptorFactory logs one line per call of a method that needs
// admin (RequiredRole), when the call ends:
//   audit: identity=token:ci method=/flowclass.v1.ClassifierService/DeleteAll
//          peer=ipv4:127.0.0.1:41234 batches=1 code=OK generation=7
// `batches` counts the messages the client sent (RuleBatches on a stream, 1
// for a unary call); `generation` is the dataplane's after the call.
//
// Threads: Process and the interceptors run on gRPC's threads, concurrently;
// SetPolicy from any thread.
#ifndef FLOWCLASS_SERVER_API_GRPC_AUTH_H_
#define FLOWCLASS_SERVER_API_GRPC_AUTH_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/support/server_interceptor.h>

#include "server/api/auth_policy.h"

namespace flowclass {

inline constexpr char kIdentityProperty[] = "flowclass_identity";
inline constexpr char kRoleProperty[] = "flowclass_role";

class AuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit AuthProcessor(std::shared_ptr<const AuthPolicy> policy) : policy_(std::move(policy)) {}

  void SetPolicy(std::shared_ptr<const AuthPolicy> policy);
  std::shared_ptr<const AuthPolicy> policy() const;

  // Hashing a token and comparing a few strings: run inline.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const AuthPolicy> policy_;
};

class AuditInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  AuditInterceptorFactory(std::function<uint64_t()> generation,
                          std::function<void(const std::string&)> sink)
      : generation_(std::move(generation)), sink_(std::move(sink)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  std::function<uint64_t()> generation_;
  std::function<void(const std::string&)> sink_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_API_GRPC_AUTH_H_
