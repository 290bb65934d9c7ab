// Who may call what: every method of every service the server offers ×
// {no identity, reader, admin, unknown certificate, unknown/revoked token},
// over mutual TLS (certificate identities) and over plaintext loopback
// (bearer tokens), with the code each must get and no change to the rule
// set or config when a call is refused.  Also the token file's format, its
// reload (a revoked token stops working, a running stream keeps going, a
// bad file keeps the old tokens) and the audit line of admin calls.
// Certificates are made with the `openssl` CLI; servers listen on
// 127.0.0.1 port 0.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_callback.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rule_convert.h"
#include "server/api/api_test_fixture.h"
#include "server/api/auth_policy.h"
#include "server/api/classifier_service.h"
#include "server/api/grpc_server.h"
#include "server/testing/fake_dataplane.h"
#include "tests/common/ack_reader.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

constexpr char kAdminToken[] = "admin-token-0123456789abcdef";
constexpr char kReaderToken[] = "reader-token-0123456789abcdef";
constexpr char kRevokedToken[] = "revoked-token-0123456789abcdef";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// Every method a client could call: the Classifier's (from its descriptor,
// so an RPC added later is in the table without editing this test), health
// and reflection.
std::vector<std::string> AllMethods() {
  std::vector<std::string> out;
  const auto* svc = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      "flowclass.v1.ClassifierService");
  for (int i = 0; svc && i < svc->method_count(); ++i)
    out.push_back(absl::StrCat("/flowclass.v1.ClassifierService/", svc->method(i)->name()));
  out.push_back("/grpc.health.v1.Health/Check");
  out.push_back("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo");
  return out;
}

// The table, written out here rather than read from the code under
// test: readers look, admins change; anything else needs admin.
Role ExpectedRole(const std::string& method) {
  static const char* const kReader[] = {
      "/flowclass.v1.ClassifierService/GetStats",    "/flowclass.v1.ClassifierService/GetConfig",
      "/flowclass.v1.ClassifierService/ListRules",
      "/flowclass.v1.ClassifierService/GetRule",     "/flowclass.v1.ClassifierService/Trace",
      "/flowclass.v1.ClassifierService/DumpMegaflows",
      "/grpc.health.v1.Health/Check",
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"};
  for (const char* m : kReader)
    if (method == m) return Role::kReader;
  return Role::kAdmin;
}

// Calls `method` with one empty message (a valid message of every type) as
// a bidi stream, which serves unary and streaming methods alike.
grpc::Status CallRaw(const std::shared_ptr<grpc::Channel>& ch, const std::string& method,
                     const std::string& authorization) {
  grpc::internal::RpcMethod m(method.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> rw(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          ch.get(), m, &ctx));
  grpc::Slice empty("", 0);
  grpc::ByteBuffer req(&empty, 1);
  rw->Write(req);
  rw->WritesDone();
  for (grpc::ByteBuffer resp; rw->Read(&resp);) {
  }
  return rw->Finish();
}

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system("openssl version > /dev/null 2>&1") != 0) return;
    char tmpl[] = "/tmp/flowclass_auth_XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    auto client = [](const std::string& name, const std::string& subj, const std::string& san,
                     const std::string& ca) {
      return absl::StrCat(
          "openssl req -newkey rsa:2048 -nodes -keyout ", name, ".key -out ", name,
          ".csr -subj ", subj, " && ",
          san.empty() ? "printf 'basicConstraints=CA:FALSE\\n'"
                      : absl::StrCat("printf 'subjectAltName=", san, "\\n'"),
          " > ", name, ".ext && ", "openssl x509 -req -in ", name, ".csr -CA ", ca,
          ".pem -CAkey ", ca, ".key -CAcreateserial -out ", name, ".pem -days 2 -extfile ",
          name, ".ext && ");
    };
    const std::string cmd = absl::StrCat(
        "cd ", *dir_, " && set -e && exec > openssl.log 2>&1 && ",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "-subj /CN=flowclass-test-ca && ",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 2 "
        "-subj /CN=other-ca && ",
        client("server", "/CN=localhost", "DNS:localhost,IP:127.0.0.1", "ca"),
        // admin by CN; reader by SAN URI (its CN is listed nowhere)
        client("admin", "/CN=flowclass-admin", "", "ca"),
        client("reader", "/CN=some-reader", "URI:spiffe://flowclass.test/reader", "ca"),
        // signed by the CA but named in no list
        client("stranger", "/CN=stranger", "DNS:stranger.example", "ca"),
        // the admin's name, but from another CA
        client("forged", "/CN=flowclass-admin", "", "other"), "true");
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
    WriteFile(F("tokens"), absl::StrCat("# role token name\nadmin ", kAdminToken,
                                        " ci-admin\nreader sha256:", Hex(Sha256(kReaderToken)),
                                        " dashboards\n"));
  }
  static std::string F(const std::string& name) { return *dir_ + "/" + name; }
  static std::string Hex(const std::array<uint8_t, 32>& d) {
    std::string s;
    for (uint8_t b : d) absl::StrAppend(&s, absl::Hex(b, absl::kZeroPad2));
    return s;
  }

  GrpcServerConfig MutualConfig() {
    GrpcServerConfig c;
    c.port = 0;
    c.tls_cert_file = F("server.pem");
    c.tls_key_file = F("server.key");
    c.tls_ca_file = F("ca.pem");
    c.auth.admin = {"flowclass-admin"};
    c.auth.reader = {"spiffe://flowclass.test/reader"};
    c.audit_sink = [this](const std::string& l) {
      std::lock_guard<std::mutex> g(mu_);
      audit_.push_back(l);
    };
    return c;
  }
  GrpcServerConfig TokenConfig() {
    GrpcServerConfig c;
    c.port = 0;
    c.plaintext = true;
    c.auth.token_file = F("tokens");
    c.audit_sink = MutualConfig().audit_sink;
    return c;
  }
  std::unique_ptr<GrpcServer> Start(const GrpcServerConfig& c) {
    auto s = StartGrpcServer(&fake_, c);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  std::shared_ptr<grpc::Channel> Channel(const GrpcServer& s, const std::string& cert) {
    if (cert == "plaintext")
      return grpc::CreateChannel(s.target(), grpc::InsecureChannelCredentials());
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = Read(F("ca.pem"));
    if (!cert.empty()) {
      o.pem_cert_chain = Read(F(cert + ".pem"));
      o.pem_private_key = Read(F(cert + ".key"));
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    return grpc::CreateCustomChannel(s.target(), grpc::SslCredentials(o), args);
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // A rule set and a config to watch.
  void Seed() {
    if (fake_.ListRules().empty()) {
      v1::ApplyRulesRequest b = Batch(1, {Insert(MakeRule(7))});
      ClassifierService svc(&fake_, GrpcServerConfig{});
      ASSERT_EQ(svc.ApplyOne(b).status().code(), 0);
    }
  }
  struct State {
    uint64_t generation;
    size_t rules;
    std::map<std::string, std::string> config;
    bool operator==(const State&) const = default;
  };
  State Snapshot() const { return {fake_.generation(), fake_.ListRules().size(), fake_.GetConfig()}; }

  struct Who {
    std::string label;
    std::string cert;           // "" none, "plaintext" no TLS
    std::string authorization;  // metadata value
    Role role;                  // kNone: refused as UNAUTHENTICATED
    grpc::StatusCode refused_code = grpc::StatusCode::UNAUTHENTICATED;
  };
  // Every method × every caller: the code, and no change when refused.
  void CheckTable(const GrpcServer& s, const std::vector<Who>& callers) {
    const std::vector<std::string> methods = AllMethods();
    ASSERT_GE(methods.size(), 12u);
    for (const Who& w : callers) {
      auto ch = Channel(s, w.cert);
      for (const std::string& m : methods) {
        Seed();
        const State before = Snapshot();
        const grpc::Status st = CallRaw(ch, m, w.authorization);
        const Role need = ExpectedRole(m);
        const std::string where = absl::StrCat(w.label, " ", m, ": ", st.error_code(), " ",
                                               st.error_message());
        if (w.role == Role::kNone) {
          EXPECT_EQ(st.error_code(), w.refused_code) << where;
        } else if (w.role < need) {
          EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << where;
          EXPECT_THAT(st.error_message(), HasSubstr("needs role admin")) << where;
        } else {
          EXPECT_NE(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << where;
          EXPECT_NE(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << where;
          EXPECT_NE(st.error_code(), grpc::StatusCode::UNAVAILABLE) << where;
          continue;
        }
        EXPECT_TRUE(Snapshot() == before) << where << ": state changed on a refused call";
      }
    }
  }

  FakeDataplane fake_;
  std::mutex mu_;
  std::vector<std::string> audit_;
  static std::string* dir_;
  static bool made_;
};
std::string* AuthTest::dir_ = nullptr;
bool AuthTest::made_ = false;

TEST(AuthPolicyTest, MethodTableDeniesByDefault) {
  EXPECT_EQ(RequiredRole("/flowclass.v1.ClassifierService/GetStats"), Role::kReader);
  EXPECT_EQ(RequiredRole("/flowclass.v1.ClassifierService/Trace"), Role::kReader);
  EXPECT_EQ(RequiredRole("/grpc.health.v1.Health/Watch"), Role::kReader);
  EXPECT_EQ(RequiredRole("/flowclass.v1.ClassifierService/ApplyRules"), Role::kAdmin);
  EXPECT_EQ(RequiredRole("/flowclass.v1.ClassifierService/DeleteAll"), Role::kAdmin);
  EXPECT_EQ(RequiredRole("/flowclass.v1.ClassifierService/SetConfig"), Role::kAdmin);
  // Not listed: admin.
  EXPECT_EQ(RequiredRole("/flowclass.v1.ClassifierService/ClearStats"), Role::kAdmin);
  EXPECT_EQ(RequiredRole("/flowclass.v1.ClassifierService/GetStatsX"), Role::kAdmin);
  EXPECT_EQ(RequiredRole("/grpc.health.v1.Health/x/y"), Role::kAdmin);
  EXPECT_EQ(RequiredRole(""), Role::kAdmin);
}

TEST(AuthPolicyTest, TokenFileFormat) {
  auto t = ParseTokenFile("k", "f", absl::StrCat("\n# c\nadmin ", kAdminToken, "\n  reader  ",
                                                 kReaderToken, "  grafana\n"));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].role, Role::kAdmin);
  EXPECT_EQ((*t)[0].name, "line3");
  EXPECT_EQ((*t)[1].name, "grafana");
  EXPECT_EQ((*t)[1].sha256, Sha256(kReaderToken));
  auto err = [](const std::string& text) {
    return ParseTokenFile("grpc.auth.token_file", "/etc/t", text).status().message();
  };
  EXPECT_THAT(err("root 0123456789abcdef0123"), HasSubstr("\"/etc/t\" line 1: role must be"));
  EXPECT_THAT(err("admin short"), HasSubstr("shorter than 16"));
  EXPECT_THAT(err("admin short"), ::testing::Not(HasSubstr("short\"")));  // never echoed
  EXPECT_THAT(err("admin"), HasSubstr("expected ROLE TOKEN"));
  EXPECT_THAT(err("admin sha256:abc"), HasSubstr("64 hex digits"));
  EXPECT_THAT(err(absl::StrCat("admin ", kAdminToken, "\nreader ", kAdminToken)),
              HasSubstr("line 2: the same token as line1"));
}

TEST(AuthPolicyTest, ConfigNeedsIdentitiesOrAnExplicitOff) {
  GrpcServerConfig c;
  c.plaintext = true;  // loopback, no keys: allowed, off, with a warning
  EXPECT_TRUE(ValidateGrpcServerConfig(c).ok());
  EXPECT_FALSE(GrpcAuthEnabled(c));
  EXPECT_THAT(GrpcAuthWarning(c), HasSubstr("every local process is admin"));
  c.address = "0.0.0.0";
  c.allow_plaintext_remote = true;
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.auth: nobody is named"));
  c.auth.token_file = "t";
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(),
              HasSubstr("grpc.auth.token_file: tokens over plaintext"));
  c.auth.token_file.clear();
  c.auth.disabled = true;
  EXPECT_TRUE(ValidateGrpcServerConfig(c).ok());
  c.auth.admin = {"x"};
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.auth.disabled: true together"));
  GrpcServerConfig t;
  t.tls_cert_file = "s.pem";
  t.tls_key_file = "s.key";
  EXPECT_THAT(ValidateGrpcServerConfig(t).message(),
              HasSubstr("grpc.tls_ca_file: required: with TLS, client certificates are required"));
  t.tls_ca_file = "ca.pem";
  EXPECT_THAT(ValidateGrpcServerConfig(t).message(), HasSubstr("grpc.auth: nobody is named"));
  t.auth.reader = {"r"};
  EXPECT_TRUE(ValidateGrpcServerConfig(t).ok());
  EXPECT_TRUE(GrpcAuthEnabled(t));
  t.require_client_cert = false;
  t.tls_ca_file.clear();
  EXPECT_THAT(ValidateGrpcServerConfig(t).message(),
              HasSubstr("grpc.auth.reader: names client certificates, but require_client_cert is false"));
}

TEST_F(AuthTest, EveryMethodOverMutualTls) {
  auto s = Start(MutualConfig());
  ASSERT_TRUE(s);
  CheckTable(*s, {
      {"admin cert", "admin", "", Role::kAdmin},
      {"reader cert", "reader", "", Role::kReader},
      {"unknown cert", "stranger", "", Role::kNone},
      // No certificate, or one another CA signed: the handshake fails.
      {"no cert", "", "", Role::kNone, grpc::StatusCode::UNAVAILABLE},
      {"forged cert", "forged", "", Role::kNone, grpc::StatusCode::UNAVAILABLE},
  });
  // The refusal says who it saw and what was needed.
  auto reader = Channel(*s, "reader");
  grpc::Status st = CallRaw(reader, "/flowclass.v1.ClassifierService/DeleteAll", "");
  EXPECT_EQ(st.error_message(),
            "/flowclass.v1.ClassifierService/DeleteAll needs role admin; "
            "cert:spiffe://flowclass.test/reader is reader");
  st = CallRaw(Channel(*s, "stranger"), "/flowclass.v1.ClassifierService/GetStats", "");
  EXPECT_THAT(st.error_message(), HasSubstr("stranger.example, stranger) is in neither"));
}

TEST_F(AuthTest, EveryMethodOverTokens) {
  // Tokens on plaintext loopback, and over TLS with certificates and tokens.
  auto plain = Start(TokenConfig());
  ASSERT_TRUE(plain);
  CheckTable(*plain, {
      {"admin token", "plaintext", absl::StrCat("Bearer ", kAdminToken), Role::kAdmin},
      {"reader token (hashed)", "plaintext", absl::StrCat("bearer ", kReaderToken), Role::kReader},
      {"no token", "plaintext", "", Role::kNone},
      {"unknown token", "plaintext", absl::StrCat("Bearer ", kRevokedToken), Role::kNone},
      {"not bearer", "plaintext", absl::StrCat("Basic ", kAdminToken), Role::kNone},
  });
  GrpcServerConfig both = MutualConfig();
  both.auth.token_file = F("tokens");
  auto tls = Start(both);
  ASSERT_TRUE(tls);
  CheckTable(*tls, {
      // A token raises an unlisted certificate to its role...
      {"stranger cert + admin token", "stranger", absl::StrCat("Bearer ", kAdminToken),
       Role::kAdmin},
      // ...a listed admin certificate is not lowered by a reader token...
      {"admin cert + reader token", "admin", absl::StrCat("Bearer ", kReaderToken), Role::kAdmin},
      // ...and a bad token is refused even with a good certificate.
      {"admin cert + unknown token", "admin", absl::StrCat("Bearer ", kRevokedToken), Role::kNone},
  });
}

TEST_F(AuthTest, AdminCallsAreAudited) {
  auto s = Start(TokenConfig());
  ASSERT_TRUE(s);
  ClientOptions o;
  o.target = s->target();
  o.plaintext = true;
  o.token = kAdminToken;
  auto c = FlowclassClient::Connect(o);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->ApplyBatch(Batch(1, {Insert(MakeRule(1)), Insert(MakeRule(2))})).ok());
  // The streaming path of add-rules (ApplyOps) carries the token too.
  RuleOp op;
  ASSERT_TRUE(RuleOpFromProto(Insert(MakeRule(3)), &op).ok());
  auto applied = (*c)->ApplyOps({op}, ApplyOptions{});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->ops_applied, 1u);
  ASSERT_TRUE((*c)->GetStats().ok());  // a reader method: no audit line
  auto del = (*c)->DeleteAll();
  ASSERT_TRUE(del.ok()) << del.status();
  std::lock_guard<std::mutex> g(mu_);
  ASSERT_EQ(audit_.size(), 3u) << absl::StrJoin(audit_, "\n");
  EXPECT_THAT(audit_[0], HasSubstr("audit: identity=token:ci-admin "
                                   "method=/flowclass.v1.ClassifierService/ApplyRules peer=ipv4:127.0.0.1:"));
  EXPECT_THAT(audit_[0], HasSubstr(" batches=1 code=OK generation=1"));
  EXPECT_THAT(audit_[1], HasSubstr("method=/flowclass.v1.ClassifierService/ApplyRules"));
  EXPECT_THAT(audit_[1], HasSubstr(" batches=1 code=OK generation=2"));
  EXPECT_THAT(audit_[2], HasSubstr("method=/flowclass.v1.ClassifierService/DeleteAll"));
  EXPECT_THAT(audit_[2], HasSubstr(absl::StrCat(" code=OK generation=", del->generation())));
}

// A revoked token stops working after ReloadAuth (what SIGHUP runs); a stream
// opened with it before keeps going; a bad file keeps the old tokens.
TEST_F(AuthTest, TokenFileReload) {
  GrpcServerConfig cfg = TokenConfig();
  auto s = Start(cfg);
  ASSERT_TRUE(s);
  auto client = [&](const std::string& token) {
    ClientOptions o;
    o.target = s->target();
    o.plaintext = true;
    o.token = token;
    return *FlowclassClient::Connect(o);
  };
  auto admin = client(kAdminToken);
  ASSERT_TRUE(admin->GetStats().ok());
  // A stream opened with the token that is about to be revoked.
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kAdminToken));
  auto stream = admin->stub()->ApplyRules(&ctx);
  ASSERT_TRUE(stream->Write(Batch(1, {Insert(MakeRule(1))})));
  v1::BatchAck ack;
  ASSERT_TRUE(ReadAck(stream.get(), &ack));
  EXPECT_EQ(ack.status().code(), 0);

  const std::string fresh = "fresh-admin-token-0123456789";
  WriteFile(F("tokens"), absl::StrCat("admin ", fresh, "\n"));
  ASSERT_TRUE(s->ReloadAuth(cfg).ok());
  EXPECT_EQ(admin->GetStats().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(admin->GetStats().status().message(), HasSubstr("unknown or revoked"));
  EXPECT_TRUE(client(fresh)->GetStats().ok());
  // The running stream was let in before: it goes on.
  ASSERT_TRUE(stream->Write(Batch(2, {Insert(MakeRule(2))})));
  ASSERT_TRUE(ReadAck(stream.get(), &ack));
  EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  // A bad new file: the error names the line, the old tokens stay.
  WriteFile(F("tokens"), "admin\n");
  absl::Status bad = s->ReloadAuth(cfg);
  EXPECT_THAT(bad.message(), HasSubstr("grpc.auth.token_file: \"" + F("tokens") + "\" line 1"));
  EXPECT_TRUE(client(fresh)->GetStats().ok());
  std::filesystem::remove(F("tokens"));
  EXPECT_EQ(s->ReloadAuth(cfg).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client(fresh)->GetStats().ok());
}

// The client library: a token file holds the bare token.
TEST_F(AuthTest, ClientReadsTokenFile) {
  WriteFile(F("client_token"), absl::StrCat("# for ci\n\n  ", kAdminToken, "  \n"));
  auto t = ReadTokenFile("--token-file", F("client_token"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, kAdminToken);
  WriteFile(F("client_token"), absl::StrCat("admin ", kAdminToken, "\n"));
  EXPECT_THAT(ReadTokenFile("--token-file", F("client_token")).status().message(),
              HasSubstr("--token-file: \"" + F("client_token") + "\": the token line has spaces"));
  WriteFile(F("client_token"), "# nothing\n");
  EXPECT_THAT(ReadTokenFile("--token-file", F("client_token")).status().message(),
              HasSubstr("holds no token"));
  EXPECT_EQ(ReadTokenFile("--token-file", F("missing")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace flowclass
