#include "common/tls_pem.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/text_file.h"

namespace flowclass {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

BioPtr MemBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The passphrase callback of PEM_read_bio_PrivateKey: refuse (an encrypted
// key cannot be used unattended) instead of prompting on the terminal.
int NoPassphrase(char*, int, int, void*) { return -1; }

absl::StatusOr<std::string> Read(absl::string_view what, const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok())
    return absl::NotFoundError(absl::StrCat(what, ": cannot read ", text.status().message()));
  return text;
}

X509Ptr FirstCertificate(const std::string& pem) {
  BioPtr bio = MemBio(pem);
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

KeyPtr PrivateKey(const std::string& pem) {
  BioPtr bio = MemBio(pem);
  return KeyPtr(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr)
                    : nullptr);
}

}  // namespace

absl::StatusOr<std::string> ReadCertificatesPem(absl::string_view what, const std::string& path) {
  absl::StatusOr<std::string> pem = Read(what, path);
  if (!pem.ok()) return pem;
  BioPtr bio = MemBio(*pem);
  int n = 0;
  while (bio) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!cert) break;
    ++n;
  }
  // The loop ends on "no more PEM blocks" or on a block it cannot parse;
  // only the first is the normal end of the file.
  const unsigned long err = ERR_peek_last_error();
  const bool clean_end =
      ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE;
  ERR_clear_error();
  if (!clean_end)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": \"", path, "\": certificate ", n + 1, " of the file cannot be parsed"));
  if (n == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": \"", path,
        "\" holds no PEM certificate (a block starting -----BEGIN CERTIFICATE-----)"));
  return pem;
}

absl::StatusOr<std::string> ReadPrivateKeyPem(absl::string_view what, const std::string& path) {
  absl::StatusOr<std::string> pem = Read(what, path);
  if (!pem.ok()) return pem;
  KeyPtr key = PrivateKey(*pem);
  ERR_clear_error();
  if (!key) {
    const bool encrypted = pem->find("ENCRYPTED") != std::string::npos;
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": \"", path, "\" ",
        encrypted ? "holds an encrypted private key: give the key without a passphrase"
                  : "holds no PEM private key (a block starting -----BEGIN PRIVATE KEY-----, "
                    "-----BEGIN RSA PRIVATE KEY----- or -----BEGIN EC PRIVATE KEY-----)"));
  }
  return pem;
}

absl::Status CheckKeyMatchesCertificate(absl::string_view key_what, const std::string& key_path,
                                        const std::string& key_pem,
                                        absl::string_view cert_what,
                                        const std::string& cert_path,
                                        const std::string& cert_pem) {
  X509Ptr cert = FirstCertificate(cert_pem);
  KeyPtr key = PrivateKey(key_pem);
  const bool match = cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  if (match) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      key_what, ": the private key in \"", key_path, "\" does not belong to the certificate in ",
      cert_what, " \"", cert_path, "\""));
}

}  // namespace flowclass
