// TLS and mutual TLS from config files.  The certificates are made in the
// test with the `openssl` CLI (a throw-away CA, a server certificate for
// "localhost"/127.0.0.1 and a client certificate); the test is skipped when
// openssl is missing.  Servers listen on 127.0.0.1 port 0.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/rpc/flowclass_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/grpc_server.h"
#include "tests/common/fake_dataplane.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system("openssl version > /dev/null 2>&1") != 0) return;
    char tmpl[] = "/tmp/flowclass_tls_XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    const std::string d = *dir_;
    const std::string cmd = absl::StrCat(
        "cd ", d, " && set -e && exec > openssl.log 2>&1 && ",
        // CA
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "-subj /CN=flowclass-test-ca && ",
        // server, SAN localhost + 127.0.0.1
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
        "-subj /CN=localhost && ",
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext && ",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out server.pem -days 2 -extfile san.ext && ",
        // client
        "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr "
        "-subj /CN=flowclass-controller && ",
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out client.pem -days 2 && ",
        // an unrelated CA (a client that trusts the wrong CA)
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem "
        "-days 2 -subj /CN=other-ca");
    made_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    if (dir_) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!dir_) GTEST_FAIL() << "openssl CLI not installed (make test installs it)";
    ASSERT_TRUE(made_) << "openssl failed, see " << *dir_ << "/openssl.log";
  }
  static std::string F(const std::string& name) { return *dir_ + "/" + name; }

  std::unique_ptr<GrpcServer> Start(bool mutual) {
    GrpcServerConfig c;
    c.port = 0;
    c.tls_cert_file = F("server.pem");
    c.tls_key_file = F("server.key");
    if (mutual) {
      c.tls_ca_file = F("ca.pem");
      c.require_client_cert = true;
    }
    auto s = StartGrpcServer(&fake_, c);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  absl::StatusOr<v1::Stats> Call(const GrpcServer& s, ClientOptions o) {
    o.target = s.target();
    o.timeout = std::chrono::milliseconds(3000);
    auto c = FlowclassClient::Connect(o);
    if (!c.ok()) return c.status();
    return (*c)->GetStats();
  }

  FakeDataplane fake_;
  static std::string* dir_;
  static bool made_;
};
std::string* TlsTest::dir_ = nullptr;
bool TlsTest::made_ = false;

TEST_F(TlsTest, ServerTlsClientVerifiesTheServer) {
  auto s = Start(/*mutual=*/false);
  ASSERT_TRUE(s);
  ClientOptions ok;
  ok.ca_file = F("ca.pem");
  ok.server_name = "localhost";
  EXPECT_TRUE(Call(*s, ok).ok()) << Call(*s, ok).status();
  // Trusting another CA: the handshake fails, nothing reaches the service.
  ClientOptions wrong_ca = ok;
  wrong_ca.ca_file = F("other.pem");
  EXPECT_EQ(Call(*s, wrong_ca).status().code(), absl::StatusCode::kUnavailable);
  // Plaintext against a TLS port fails too.
  ClientOptions plain;
  plain.plaintext = true;
  EXPECT_EQ(Call(*s, plain).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  auto s = Start(/*mutual=*/true);
  ASSERT_TRUE(s);
  ClientOptions with_cert;
  with_cert.ca_file = F("ca.pem");
  with_cert.server_name = "localhost";
  with_cert.cert_file = F("client.pem");
  with_cert.key_file = F("client.key");
  EXPECT_TRUE(Call(*s, with_cert).ok()) << Call(*s, with_cert).status();
  ClientOptions no_cert = with_cert;
  no_cert.cert_file.clear();
  no_cert.key_file.clear();
  EXPECT_EQ(Call(*s, no_cert).status().code(), absl::StatusCode::kUnavailable);
  ClientOptions self_signed = with_cert;  // a certificate the CA did not sign
  self_signed.cert_file = F("other.pem");
  self_signed.key_file = F("other.key");
  EXPECT_EQ(Call(*s, self_signed).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, BadFilesAreConfigErrorsNamingTheKey) {
  GrpcServerConfig c;
  c.port = 0;
  c.tls_cert_file = F("missing.pem");
  c.tls_key_file = F("server.key");
  auto s = StartGrpcServer(&fake_, c);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("grpc.tls_cert_file"));
  c.tls_cert_file = F("openssl.log");  // not PEM
  s = StartGrpcServer(&fake_, c);
  EXPECT_THAT(s.status().message(), HasSubstr("grpc.tls_cert_file"));
  EXPECT_THAT(s.status().message(), HasSubstr("not a PEM file"));
}

}  // namespace
}  // namespace flowclass
