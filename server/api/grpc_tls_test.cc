// TLS and mutual TLS from config files.  The certificates are made in the
// test with the `openssl` CLI (a throw-away CA, a server certificate for
// "localhost"/127.0.0.1 and a client certificate); the test is skipped when
// openssl is missing.  Servers listen on 127.0.0.1 port 0.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "client/rpc/flowclass_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/grpc_server.h"
#include "server/testing/fake_dataplane.h"
#include "tests/common/ack_reader.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

// TLS without client certificates (now spelled out) and nobody to check:
// these tests are about the transport (grpc_auth_test.cc is about roles).
GrpcServerConfig ServerOnlyTls() {
  GrpcServerConfig c;
  c.port = 0;
  c.require_client_cert = false;
  c.auth.disabled = true;
  return c;
}

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
        // the server's next certificate (rotation), another CN
        "openssl req -newkey rsa:2048 -nodes -keyout server2.key -out server2.csr "
        "-subj /CN=localhost-2 && ",
        "openssl x509 -req -in server2.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out server2.pem -days 2 -extfile san.ext && ",
        // client
        "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr "
        "-subj /CN=flowclass-controller && ",
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out client.pem -days 2 && ",
        // an unrelated CA (a client that trusts the wrong CA)
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem "
        "-days 2 -subj /CN=other-ca && ",
        // the server key with a passphrase; a CA bundle of two; a cut-off one
        "openssl pkey -in server.key -aes256 -passout pass:secret -out encrypted.key && ",
        "cat ca.pem other.pem > bundle.pem && ",
        "(cat ca.pem; head -c 300 other.pem) > broken_bundle.pem && ",
        "(head -c 300 ca.pem; printf '\\n-----END CERTIFICATE-----\\n') > broken_first.pem");
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
    GrpcServerConfig c = ServerOnlyTls();
    c.tls_cert_file = F("server.pem");
    c.tls_key_file = F("server.key");
    if (mutual) {
      c.tls_ca_file = F("ca.pem");
      c.require_client_cert = true;
      c.auth.disabled = false;
      c.auth.admin = {"flowclass-controller"};
    }
    auto s = StartGrpcServer(&fake_, c);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  absl::StatusOr<v1::GetStatsResponse> Call(const GrpcServer& s, ClientOptions o) {
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
  const absl::Status bad_ca = Call(*s, wrong_ca).status();
  EXPECT_EQ(bad_ca.code(), absl::StatusCode::kUnavailable);
  // flowclassctl adds what it probably means.
  EXPECT_THAT(ConnectionHint(bad_ca), HasSubstr("not signed by the CA this client trusts"));
  // Plaintext against a TLS port fails too.
  ClientOptions plain;
  plain.plaintext = true;
  const absl::Status plain_to_tls = Call(*s, plain).status();
  EXPECT_EQ(plain_to_tls.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(ConnectionHint(plain_to_tls), HasSubstr("plaintext to a TLS server?"));
}

// Given the PEM already read, the server reads no file: it starts and
// serves TLS with config paths that do not exist.
TEST_F(TlsTest, ServerGivenThePemReadsNoFile) {
  GrpcServerConfig c = ServerOnlyTls();
  c.tls_cert_file = F("server.pem");
  c.tls_key_file = F("server.key");
  absl::StatusOr<GrpcTlsPem> pem = LoadGrpcTlsFiles(c);
  ASSERT_TRUE(pem.ok()) << pem.status();
  c.tls_cert_file = F("gone.pem");
  c.tls_key_file = F("gone.key");
  EXPECT_EQ(StartGrpcServer(&fake_, c).status().code(), absl::StatusCode::kNotFound);
  // Without the PEM it says so (not "cannot listen").
  EXPECT_THAT(StartGrpcServer(&fake_, c, GrpcTlsPem{}).status().message(),
              HasSubstr("no certificate and key were given"));
  auto s = StartGrpcServer(&fake_, c, *pem);
  ASSERT_TRUE(s.ok()) << s.status();
  ClientOptions ok;
  ok.ca_file = F("ca.pem");
  ok.server_name = "localhost";
  EXPECT_TRUE(Call(**s, ok).ok()) << Call(**s, ok).status();
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

// The CN of the certificate a new connection is served (a fresh
// connection each time: no shared subchannel), or the error.
std::string ServedCn(const GrpcServer& s, const std::string& dir) {
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = read(dir + "/ca.pem");
  o.pem_cert_chain = read(dir + "/client.pem");
  o.pem_private_key = read(dir + "/client.key");
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto ch = grpc::CreateCustomChannel(s.target(), grpc::SslCredentials(o), args);
  auto stub = v1::ClassifierService::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  v1::GetStatsResponse out;
  grpc::Status st = stub->GetStats(&ctx, v1::GetStatsRequest(), &out);
  if (!st.ok()) return absl::StrCat("error ", st.error_code(), ": ", st.error_message());
  auto v = ctx.auth_context()->FindPropertyValues("x509_common_name");
  return v.empty() ? "no CN" : std::string(v.front().data(), v.front().size());
}

// ReloadTls (what SIGHUP runs): new connections get the new certificate, a
// running stream goes on, and a bad new file keeps what is served.
TEST_F(TlsTest, ReloadServesTheNewCertificateAndKeepsStreams) {
  std::filesystem::copy_file(F("server.pem"), F("rot.pem"),
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(F("server.key"), F("rot.key"),
                             std::filesystem::copy_options::overwrite_existing);
  GrpcServerConfig c = ServerOnlyTls();
  c.tls_cert_file = F("rot.pem");
  c.tls_key_file = F("rot.key");
  c.tls_ca_file = F("ca.pem");
  c.require_client_cert = true;
  c.auth.disabled = false;
  c.auth.admin = {"flowclass-controller"};
  auto started = StartGrpcServer(&fake_, c);
  ASSERT_TRUE(started.ok()) << started.status();
  GrpcServer& s = **started;
  EXPECT_EQ(ServedCn(s, *dir_), "localhost");

  ClientOptions o;
  o.target = s.target();
  o.ca_file = F("ca.pem");
  o.server_name = "localhost";
  o.cert_file = F("client.pem");
  o.key_file = F("client.key");
  auto client = FlowclassClient::Connect(o);
  ASSERT_TRUE(client.ok());
  grpc::ClientContext ctx;
  auto stream = (*client)->stub()->ApplyRules(&ctx);
  v1::ApplyRulesRequest b;
  b.set_batch_id(1);
  ASSERT_TRUE(stream->Write(b));
  v1::BatchAck ack;
  ASSERT_TRUE(ReadAck(stream.get(), &ack));

  std::filesystem::copy_file(F("server2.pem"), F("rot.pem"),
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(F("server2.key"), F("rot.key"),
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_TRUE(s.ReloadTls(c).ok());
  std::string cn;
  for (int i = 0; i < 50 && (cn = ServedCn(s, *dir_)) != "localhost-2"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(cn, "localhost-2");
  b.set_batch_id(2);
  ASSERT_TRUE(stream->Write(b));  // the stream opened before goes on
  ASSERT_TRUE(ReadAck(stream.get(), &ack));
  EXPECT_EQ(ack.batch_id(), 2u);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  // A damaged certificate: refused, naming the key; the served one stays.
  {
    std::ofstream(F("rot.pem"), std::ios::trunc) << "-----BEGIN CERTIFICATE-----\nAAAA\n";
  }
  absl::Status bad = s.ReloadTls(c);
  EXPECT_THAT(bad.message(), HasSubstr("grpc.tls_cert_file"));
  const std::vector<std::string> lines = s.Reload(c);
  ASSERT_EQ(lines.size(), 2u);  // the tokens (none here), then TLS
  EXPECT_EQ(lines[0], "grpc.auth: reloaded (0 tokens)");
  EXPECT_THAT(lines[1], HasSubstr("grpc TLS: kept the previous certificate: grpc.tls_cert_file"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past a poll
  EXPECT_EQ(ServedCn(s, *dir_), "localhost-2");
}

// TLS to a plaintext server: the hint says so.
TEST_F(TlsTest, TlsClientToPlaintextServerGetsAHint) {
  GrpcServerConfig c = ServerOnlyTls();
  c.plaintext = true;
  auto s = StartGrpcServer(&fake_, c);
  ASSERT_TRUE(s.ok()) << s.status();
  ClientOptions tls;
  tls.ca_file = F("ca.pem");
  const absl::Status st = Call(**s, tls).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(ConnectionHint(st), HasSubstr("add --plaintext")) << st;
  EXPECT_EQ(ConnectionHint(absl::NotFoundError("x")), "");
}

TEST_F(TlsTest, BadFilesAreConfigErrorsNamingTheKey) {
  GrpcServerConfig c = ServerOnlyTls();
  c.tls_cert_file = F("missing.pem");
  c.tls_key_file = F("server.key");
  auto s = StartGrpcServer(&fake_, c);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("grpc.tls_cert_file"));
  c.tls_cert_file = F("openssl.log");  // not PEM
  s = StartGrpcServer(&fake_, c);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("grpc.tls_cert_file"));
  EXPECT_THAT(s.status().message(), HasSubstr("holds no PEM certificate"));
}

// What gRPC would only report as "cannot listen" (or a failed handshake
// later) is refused before the server starts, naming the key and the file.
TEST_F(TlsTest, WrongTlsFileContentsAreConfigErrors) {
  auto start = [&](const std::string& cert, const std::string& key, const std::string& ca) {
    GrpcServerConfig c = ServerOnlyTls();
    c.tls_cert_file = F(cert);
    c.tls_key_file = F(key);
    if (!ca.empty()) {
      c.tls_ca_file = F(ca);
      c.require_client_cert = true;
      c.auth.disabled = false;
      c.auth.admin = {"flowclass-controller"};
    }
    // LoadGrpcTlsFiles (what --check-config runs) and StartGrpcServer agree.
    absl::Status checked = LoadGrpcTlsFiles(c).status();
    absl::Status started = StartGrpcServer(&fake_, c).status();
    EXPECT_EQ(checked, started);
    return started;
  };
  absl::Status s = start("server.pem", "other.key", "");  // another certificate's key
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("grpc.tls_key_file: the private key in \"" + F("other.key") +
                                     "\" does not belong to the certificate in "
                                     "grpc.tls_cert_file \"" + F("server.pem") + "\""));
  s = start("server.key", "server.key", "");  // a key where the certificate goes
  EXPECT_THAT(s.message(), HasSubstr("grpc.tls_cert_file"));
  EXPECT_THAT(s.message(), HasSubstr("holds no PEM certificate"));
  s = start("server.pem", "server.pem", "");  // a certificate where the key goes
  EXPECT_THAT(s.message(), HasSubstr("grpc.tls_key_file"));
  EXPECT_THAT(s.message(), HasSubstr("holds no PEM private key"));
  s = start("server.pem", "encrypted.key", "");
  EXPECT_THAT(s.message(), HasSubstr("grpc.tls_key_file"));
  EXPECT_THAT(s.message(), HasSubstr("encrypted private key"));
  s = start("server.pem", "server.key", "server.key");  // a key where the CA goes
  EXPECT_THAT(s.message(), HasSubstr("grpc.tls_ca_file"));
  s = start("server.pem", "server.key", "broken_bundle.pem");
  EXPECT_THAT(s.message(), HasSubstr("grpc.tls_ca_file"));
  EXPECT_THAT(s.message(), HasSubstr("certificate 2 of the file cannot be parsed"));
  s = start("server.pem", "server.key", "broken_first.pem");  // one damaged block
  EXPECT_THAT(s.message(), HasSubstr("certificate 1 of the file cannot be parsed"));
  // A bundle of CAs is fine, and so is the right pair.
  EXPECT_TRUE(start("server.pem", "server.key", "bundle.pem").ok());
  EXPECT_TRUE(start("server.pem", "server.key", "").ok());
}

// The client library checks its files the same way: a usage error
// (INVALID_ARGUMENT, flowclassctl exit 2) instead of UNAVAILABLE at the
// first call.
TEST_F(TlsTest, ClientRefusesWrongFilesBeforeConnecting) {
  auto connect = [&](const std::string& ca, const std::string& cert, const std::string& key) {
    ClientOptions o;
    o.target = "127.0.0.1:1";  // never dialled: the checks come first
    o.ca_file = ca.empty() ? "" : F(ca);
    o.cert_file = cert.empty() ? "" : F(cert);
    o.key_file = key.empty() ? "" : F(key);
    return FlowclassClient::Connect(o).status();
  };
  absl::Status s = connect("server.key", "", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--ca: \"" + F("server.key") + "\" holds no PEM certificate"));
  s = connect("ca.pem", "client.pem", "other.key");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--key: the private key in"));
  EXPECT_THAT(s.message(), HasSubstr("certificate in --cert"));
  s = connect("ca.pem", "client.key", "client.key");
  EXPECT_THAT(s.message(), HasSubstr("--cert: "));
  s = connect("missing.pem", "", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("--ca: cannot read"));
  EXPECT_TRUE(connect("bundle.pem", "client.pem", "client.key").ok());
}

}  // namespace
}  // namespace flowclass
