// auth_policy.h — who may call which flowclass.v1 method (grpc.auth.* in
// the YAML config), without any gRPC dependency so that --check-config can
// load and check it.
//
// Contract
// --------
// Two roles.  `reader` may call the methods that only look (kMethodRoles
// below: GetStats, GetConfig, ListRules, GetRule, Trace,
// health and reflection); `admin` may call everything.  kMethodRoles is the
// one place that says which method needs which role; a method that is not
// in it needs admin (deny by default), so a new RPC is refused to readers
// until someone lists it.
//
// Identities:
//   * a client certificate (mutual TLS): its SAN URIs, its SAN DNS names and
//     its subject CN are compared, exactly, with grpc.auth.admin and
//     grpc.auth.reader; the first list that names one of them gives the role
//     (admin before reader);
//   * a bearer token (`authorization: Bearer TOKEN` metadata) from
//     grpc.auth.token_file: lines `ROLE TOKEN [NAME]` or `ROLE sha256:HEX
//     [NAME]` (HEX = the SHA-256 of TOKEN, 64 hex digits), `#` comments and
//     blank lines; NAME is what the audit log shows (default "token:LINE").
//     Tokens are kept only as SHA-256 digests and compared in constant time
//     (OpenSSL's CRYPTO_memcmp over every entry, no early exit).
// A presented token that matches no line is refused (UNAUTHENTICATED) even
// when the certificate alone would pass: a revoked token must not fall back.
//
// Plain values; Decide/MatchToken from any thread on a const policy.
#ifndef FLOWCLASS_SERVER_API_AUTH_POLICY_H_
#define FLOWCLASS_SERVER_API_AUTH_POLICY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace flowclass {

struct GrpcServerConfig;

enum class Role { kNone = 0, kReader = 1, kAdmin = 2 };
const char* RoleName(Role r);  // "none", "reader", "admin"

// The method -> role table.  `method` is the gRPC path
// ("/flowclass.v1.ClassifierService/GetStats"); a whole service is written
// "/grpc.health.v1.Health/*".  Anything not listed: kAdmin.
struct MethodRole {
  const char* method;
  Role role;
};
absl::Span<const MethodRole> MethodRoles();
Role RequiredRole(absl::string_view method);

struct TokenEntry {
  Role role = Role::kNone;
  std::array<uint8_t, 32> sha256{};
  std::string name;  // for the audit log, never the token
};

// Parses a token file's text; errors name `what` (the config key), the file
// and the line.
absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view what,
                                                       const std::string& path,
                                                       absl::string_view text);

std::array<uint8_t, 32> Sha256(absl::string_view data);

struct Identity {
  Role role = Role::kNone;
  std::string name;  // "cert:spiffe://…", "token:ci-bot"
};

// The verdict for one call.
struct AuthDecision {
  enum Code { kAllow, kUnauthenticated, kPermissionDenied };
  Code code = kUnauthenticated;
  Identity identity;
  std::string message;  // why it was refused
};

class AuthPolicy {
 public:
  // From a config ValidateGrpcServerConfig accepted; reads grpc.auth.token_file.
  // NOT_FOUND (unreadable) / INVALID_ARGUMENT naming the key and line.
  static absl::StatusOr<std::shared_ptr<const AuthPolicy>> Load(const GrpcServerConfig& c);
  // Everyone is admin (grpc.auth.disabled, or plaintext on loopback with no
  // grpc.auth keys: see grpc_config.h).
  static std::shared_ptr<const AuthPolicy> AllowAll();

  bool enabled() const { return enabled_; }
  size_t token_count() const { return tokens_.size(); }

  // `bearer`: the token from the metadata, nullopt when none was sent.
  // `cert_names`: the client certificate's SAN URIs, SAN DNS names and CN.
  AuthDecision Decide(absl::string_view method, std::optional<absl::string_view> bearer,
                      absl::Span<const std::string> cert_names) const;

 private:
  AuthPolicy() = default;
  std::optional<Identity> MatchToken(absl::string_view token) const;

  bool enabled_ = false;
  std::vector<std::string> admin_, reader_;
  std::vector<TokenEntry> tokens_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_API_AUTH_POLICY_H_
