#include "server/api/grpc_config.h"

#include <arpa/inet.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "common/tls_pem.h"

namespace flowclass {

bool IsLoopbackAddress(absl::string_view address) {
  std::string a(address);
  if (a == "localhost") return true;
  if (a.size() > 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  in_addr v4{};
  if (inet_pton(AF_INET, a.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, a.c_str(), &v6) == 1) {
    for (int i = 0; i < 15; ++i)
      if (v6.s6_addr[i] != 0) return false;
    return v6.s6_addr[15] == 1;
  }
  return false;
}

namespace {

bool HasAuthKeys(const GrpcServerConfig& c) {
  return !c.auth.admin.empty() || !c.auth.reader.empty() || !c.auth.token_file.empty();
}

absl::Status ValidateGrpcAuth(const GrpcServerConfig& c) {
  auto bad = [](absl::string_view key, absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat("grpc.auth.", key, ": ", problem));
  };
  const bool mutual = !c.plaintext && c.require_client_cert;
  const bool loopback = IsLoopbackAddress(c.address);
  if (c.auth.disabled) {
    if (HasAuthKeys(c))
      return bad("disabled", "true together with admin/reader/token_file: remove one of them");
    return absl::OkStatus();
  }
  for (const auto* list : {&c.auth.admin, &c.auth.reader}) {
    const char* key = list == &c.auth.admin ? "admin" : "reader";
    for (const std::string& n : *list)
      if (n.empty()) return bad(key, "an empty identity");
    if (!list->empty() && !mutual)
      return bad(key, c.plaintext ? "names client certificates, which need TLS (plaintext is true)"
                                  : "names client certificates, but require_client_cert is false");
  }
  if (!HasAuthKeys(c)) {
    if (c.plaintext && loopback) return absl::OkStatus();  // off, with a warning
    return absl::InvalidArgumentError(absl::StrCat(
        "grpc.auth: nobody is named who may call the API: set grpc.auth.admin / "
        "grpc.auth.reader (client certificates) or grpc.auth.token_file, or write "
        "grpc.auth.disabled: true to let every client that reaches ",
        GrpcListenAddress(c), " change the rules"));
  }
  if (c.plaintext && !loopback)
    return bad("token_file",
               absl::StrCat("tokens over plaintext on the non-loopback address ", c.address,
                            " would cross the network in clear: use TLS, or "
                            "grpc.auth.disabled: true if something else secures the link"));
  return absl::OkStatus();
}

}  // namespace

bool GrpcAuthEnabled(const GrpcServerConfig& c) { return !c.auth.disabled && HasAuthKeys(c); }

std::string GrpcAuthWarning(const GrpcServerConfig& c) {
  if (GrpcAuthEnabled(c)) return "";
  if (c.auth.disabled)
    return absl::StrCat("grpc.auth.disabled: true: every client that reaches ",
                        GrpcListenAddress(c), " is admin (may change rules and config)");
  return absl::StrCat("no grpc.auth keys on plaintext ", GrpcListenAddress(c),
                      ": every local process is admin (may change rules and config)");
}

absl::Status ValidateGrpcServerConfig(const GrpcServerConfig& c) {
  auto bad = [](absl::string_view key, absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat("grpc.", key, ": ", problem));
  };
  if (c.address.empty()) return bad("address", "required");
  {
    std::string a = c.address;
    if (a.size() > 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
    in_addr v4{};
    in6_addr v6{};
    if (a != "localhost" && inet_pton(AF_INET, a.c_str(), &v4) != 1 &&
        inet_pton(AF_INET6, a.c_str(), &v6) != 1)
      return bad("address", absl::StrCat(QuoteForMessage(c.address, '"'),
                                         " is not an IP address or localhost"));
  }
  if (c.port > 65535) return bad("port", absl::StrCat(c.port, " is outside 0..65535"));
  if (c.plaintext) {
    // require_client_cert (true by default) means nothing without TLS; the
    // YAML reader refuses `require_client_cert: true` written with plaintext.
    if (!c.tls_cert_file.empty() || !c.tls_key_file.empty())
      return bad("plaintext", "true together with tls_cert_file/tls_key_file");
    if (!c.tls_ca_file.empty())
      return bad("tls_ca_file", "set, but plaintext is true (no TLS): remove one of them");
    if (!IsLoopbackAddress(c.address) && !c.allow_plaintext_remote)
      return bad("allow_plaintext_remote",
                 absl::StrCat("plaintext on non-loopback address ", c.address,
                              " needs allow_plaintext_remote: true"));
  } else {
    if (c.tls_cert_file.empty())
      return bad("tls_cert_file", "required unless plaintext: true");
    if (c.tls_key_file.empty()) return bad("tls_key_file", "required with tls_cert_file");
    if (c.require_client_cert && c.tls_ca_file.empty())
      return bad("tls_ca_file",
                 "required: with TLS, client certificates are required (mutual TLS) unless "
                 "require_client_cert: false");
    if (!c.require_client_cert && !c.tls_ca_file.empty())
      return bad("tls_ca_file",
                 "only verifies client certificates: set require_client_cert: true "
                 "(mutual TLS) or remove tls_ca_file");
  }
  if (absl::Status s = ValidateGrpcAuth(c); !s.ok()) return s;
  if (c.max_message_bytes < 1024)
    return bad("max_message_bytes", absl::StrCat(c.max_message_bytes, " is below 1024"));
  if (c.max_batch_ops < 1) return bad("max_batch_ops", "must be at least 1");
  if (c.max_concurrent_streams < 1)
    return bad("max_concurrent_streams", "must be at least 1");
  if (c.max_streams_per_identity > c.max_concurrent_streams)
    return bad("max_streams_per_identity",
               absl::StrCat(c.max_streams_per_identity, " is above max_concurrent_streams (",
                            c.max_concurrent_streams, "): one identity could hold every slot"));
  if (c.handshake_timeout_ms < 1) return bad("handshake_timeout_ms", "must be at least 1");
  if (c.keepalive_time_ms < 1) return bad("keepalive_time_ms", "must be at least 1");
  if (c.keepalive_timeout_ms < 1) return bad("keepalive_timeout_ms", "must be at least 1");
  if (c.max_connection_idle_ms < 1) return bad("max_connection_idle_ms", "must be at least 1");
  return absl::OkStatus();
}

uint32_t StreamsPerIdentity(const GrpcServerConfig& c) {
  if (c.max_streams_per_identity != 0) return c.max_streams_per_identity;
  return c.max_concurrent_streams / 4 > 0 ? c.max_concurrent_streams / 4 : 1;
}

absl::StatusOr<GrpcTlsPem> LoadGrpcTlsFiles(const GrpcServerConfig& c) {
  GrpcTlsPem pem;
  if (c.plaintext) return pem;
  absl::StatusOr<std::string> cert = ReadCertificatesPem("grpc.tls_cert_file", c.tls_cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPrivateKeyPem("grpc.tls_key_file", c.tls_key_file);
  if (!key.ok()) return key.status();
  if (absl::Status s = CheckKeyMatchesCertificate("grpc.tls_key_file", c.tls_key_file, *key,
                                                  "grpc.tls_cert_file", c.tls_cert_file, *cert);
      !s.ok())
    return s;
  pem.cert = *std::move(cert);
  pem.key = *std::move(key);
  if (!c.tls_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadCertificatesPem("grpc.tls_ca_file", c.tls_ca_file);
    if (!ca.ok()) return ca.status();
    pem.ca = *std::move(ca);
  }
  return pem;
}

std::string GrpcListenAddress(const GrpcServerConfig& c) {
  const bool v6 = absl::StrContains(c.address, ':') && c.address.front() != '[';
  return v6 ? absl::StrCat("[", c.address, "]:", c.port)
            : absl::StrCat(c.address, ":", c.port);
}

}  // namespace flowclass
