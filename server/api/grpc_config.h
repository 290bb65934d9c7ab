// grpc_config.h — the settings of flowclassd's gRPC server (`grpc:` in the
// YAML config), without any gRPC dependency so that config parsing and
// `flowclassd --check-config` do not link gRPC.
//
// Contract
// --------
// Security is explicit: the server speaks TLS (tls_cert_file + tls_key_file)
// unless `plaintext: true` is written in the config.  Plaintext binds to
// loopback only; a plaintext listener on any other address (0.0.0.0, a
// node IP) also needs `allow_plaintext_remote: true`.  `require_client_cert`
// (mutual TLS) needs `tls_ca_file`, the CA that signs client certificates.
// `tls_ca_file` is only for client certificates: without require_client_cert
// (or with plaintext) it is refused rather than silently unused.
// ValidateGrpcServerConfig checks all of this without touching the files;
// every error names the key ("grpc.tls_key_file: required with tls_cert_file").
// With TLS, client certificates are required (mutual TLS) unless
// `require_client_cert: false` is written.
//
// Authorization (grpc.auth.*, auth_policy.h for the roles and the method
// table) is on whenever grpc.auth.admin, grpc.auth.reader or
// grpc.auth.token_file is set.  With none of them it must be turned off
// explicitly (`grpc.auth.disabled: true`), except for plaintext on a loopback
// address, where it is off by default (the daemon warns at start-up: anyone
// on the host may change the rules).  The lists name client certificates, so
// they need require_client_cert; tokens over plaintext are only accepted on
// loopback (elsewhere they would cross the network in clear).
// LoadGrpcTlsFiles then reads the files and checks that they are PEM
// certificates / an unencrypted key, and that the key is the certificate's
// (OpenSSL; still no gRPC).  Plain values: any thread.
#ifndef FLOWCLASS_SERVER_API_GRPC_CONFIG_H_
#define FLOWCLASS_SERVER_API_GRPC_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace flowclass {

// Which start of the daemon serves (v1.ServerInstance on every ack and in
// GetStats / GetConfig).  Filled by flowclassd at start-up (rule_restore.h),
// not from the YAML; a server started without it reports boot id 0, in memory.
struct ServerInstanceInfo {
  uint64_t boot_id = 0;              // random per start
  uint64_t restored_generation = 0;  // the generation the rule set started at
  uint64_t restored_rules = 0;
  bool durable = false;              // store.path set
  std::string store_path;            // its rules.db, "" in memory
};

struct GrpcAuthConfig {
  bool disabled = false;            // grpc.auth.disabled: everyone is admin
  std::vector<std::string> admin;   // certificate identities (SAN URI/DNS, CN)
  std::vector<std::string> reader;
  std::string token_file;           // ROLE TOKEN lines (auth_policy.h)
};

struct GrpcServerConfig {
  bool enabled = false;              // the daemon starts a server only if set
  std::string address = "127.0.0.1"; // IPv4/IPv6 literal or "localhost"
  uint32_t port = 50051;             // 0: a free port, read back from the server
  bool plaintext = false;            // must be explicit; loopback unless...
  bool allow_plaintext_remote = false;
  std::string tls_cert_file;         // PEM server certificate (chain)
  std::string tls_key_file;          // PEM private key
  std::string tls_ca_file;           // PEM CA for client certificates
  bool require_client_cert = true;   // mutual TLS (with TLS: the default)
  uint32_t max_message_bytes = 4u << 20;   // per message, both directions
  uint32_t max_batch_ops = 100000;         // operations per batch (ApplyRulesRequest)
  uint32_t max_concurrent_streams = 32;    // open streaming calls, server-wide
  // Open streaming calls of one identity (its AuthContext identity with
  // authorization on, else its connection); 0: max_concurrent_streams / 4,
  // at least 1 (StreamsPerIdentity).  At most max_concurrent_streams.
  uint32_t max_streams_per_identity = 0;
  // A streaming call without progress for this long (ApplyRules or
  // ReplaceRules sending nothing, a client reading nothing) is closed with
  // DEADLINE_EXCEEDED (classifier_service.h); 0: never.
  uint32_t stream_idle_timeout_ms = 60000;
  // A connection whose TLS / HTTP/2 set-up is not done by then is closed.
  uint32_t handshake_timeout_ms = 10000;
  // The server pings a connection idle for keepalive_time_ms and closes it
  // when no answer comes within keepalive_timeout_ms (a peer that vanished
  // frees its streams).
  uint32_t keepalive_time_ms = 60000;
  uint32_t keepalive_timeout_ms = 20000;
  // Keepalive enforcement: a client that pings more often than this without
  // sending data is answered GOAWAY (too_many_pings) after 2 such pings.
  uint32_t min_client_ping_interval_ms = 10000;
  // A connection with no call open for this long is closed (GOAWAY).
  uint32_t max_connection_idle_ms = 300000;
  GrpcAuthConfig auth;
  ServerInstanceInfo instance;             // not a YAML key (see above)
  // Not a YAML key: non-empty ("restoring 1000 rules"), the Classifier
  // answers UNAVAILABLE with it until GrpcServer::Restored (flowclassd's
  // restore window; health is NOT_SERVING meanwhile: its readiness).
  std::string restoring;
  // Not a YAML key: where the audit lines of admin calls go (grpc_auth.h);
  // unset = stdout.
  std::function<void(const std::string&)> audit_sink;
};

// grpc.max_streams_per_identity, or its default when 0 (see above).
uint32_t StreamsPerIdentity(const GrpcServerConfig& config);

// Whether calls are authenticated and role-checked (see above).
bool GrpcAuthEnabled(const GrpcServerConfig& config);
// The start-up warning for a server that checks nobody ("" when it does).
std::string GrpcAuthWarning(const GrpcServerConfig& config);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackAddress(absl::string_view address);

// INVALID_ARGUMENT naming the key (prefix "grpc.").
absl::Status ValidateGrpcServerConfig(const GrpcServerConfig& config);

// The PEM texts of a TLS config (empty for plaintext; ca empty unless mutual).
struct GrpcTlsPem {
  std::string cert, key, ca;
};

// Reads and checks the TLS files of a config that ValidateGrpcServerConfig
// accepted: NOT_FOUND (unreadable) or INVALID_ARGUMENT (not a certificate,
// not a key, an encrypted key, a key of another certificate), naming the key.
absl::StatusOr<GrpcTlsPem> LoadGrpcTlsFiles(const GrpcServerConfig& config);

// "127.0.0.1:50051", "[::1]:50051".
std::string GrpcListenAddress(const GrpcServerConfig& config);

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_API_GRPC_CONFIG_H_
