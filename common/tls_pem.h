// tls_pem.h — reading and checking the PEM files of TLS and mutual TLS, for
// flowclassd (grpc.tls_*_file) and the client library (--ca, --cert, --key).
//
// gRPC takes PEM text and only finds out at handshake (client) or at
// BuildAndStart (server) that a file is not a certificate or that a key does
// not belong to its certificate, and then says "cannot connect" / "cannot
// listen".  These checks run first and name the option and the file.
//
// Every function returns the file's text on success.  NOT_FOUND: the file
// cannot be read; INVALID_ARGUMENT: its contents are wrong.  `what` names the
// option in messages ("grpc.tls_cert_file", "--ca").
#ifndef FLOWCLASS_COMMON_TLS_PEM_H_
#define FLOWCLASS_COMMON_TLS_PEM_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flowclass {

// One or more PEM certificates (a chain, or a CA bundle), each parseable.
absl::StatusOr<std::string> ReadCertificatesPem(absl::string_view what, const std::string& path);

// One unencrypted PEM private key (PKCS#8, RSA or EC).
absl::StatusOr<std::string> ReadPrivateKeyPem(absl::string_view what, const std::string& path);

// OK when `key_pem` is the private key of the first certificate of
// `cert_pem` (both already read by the functions above); otherwise
// INVALID_ARGUMENT naming both options and files.
absl::Status CheckKeyMatchesCertificate(absl::string_view key_what, const std::string& key_path,
                                        const std::string& key_pem,
                                        absl::string_view cert_what,
                                        const std::string& cert_path,
                                        const std::string& cert_pem);

}  // namespace flowclass

#endif  // FLOWCLASS_COMMON_TLS_PEM_H_
