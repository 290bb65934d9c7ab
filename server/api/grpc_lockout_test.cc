// No lockout by one client (issue 26 item 4), through a real gRPC server on
// 127.0.0.1 over a FakeDataplane: a port another process holds with
// SO_REUSEPORT is refused, not shared; one identity holding its share of
// the streaming slots leaves the others theirs; an idle ApplyRules stream is
// closed with a status that says why, and so is a stream whose client
// reads nothing (a listing, acks) or a ReplaceRules that sends nothing; a
// peer that vanished (behind a proxy that stops forwarding) loses its
// connection and so its slots; a client
// that pings too often is sent away; idle connections and connections that
// never finish their set-up are closed.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rule_convert.h"
#include "server/api/api_test_fixture.h"
#include "tests/common/ack_reader.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

// A TCP socket listening on 127.0.0.1:<free port> with SO_REUSEPORT (and
// SO_REUSEADDR), as a second flowclassd or any other process could hold it.
class ReusePortHolder {
 public:
  ReusePortHolder() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::listen(fd_, 8) == 0;
    socklen_t len = sizeof(a);
    ok_ = ok_ && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    port_ = ntohs(a.sin_port);
  }
  ~ReusePortHolder() { ::close(fd_); }
  bool ok() const { return ok_; }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
  int port_ = 0;
};

TEST(GrpcLockoutTest, PortHeldWithReusePortIsRefused) {
  ReusePortHolder holder;
  ASSERT_TRUE(holder.ok());
  FakeDataplane fake;
  GrpcServerConfig cfg;
  cfg.address = "127.0.0.1";
  cfg.port = static_cast<uint32_t>(holder.port());
  cfg.plaintext = true;
  absl::StatusOr<std::unique_ptr<GrpcServer>> s = StartGrpcServer(&fake, cfg);
  ASSERT_FALSE(s.ok()) << "started on a port another socket holds with SO_REUSEPORT";
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.status().message(),
              HasSubstr(absl::StrCat("grpc.address/port: cannot listen on 127.0.0.1:",
                                     holder.port())));
  EXPECT_THAT(s.status().message(), HasSubstr("SO_REUSEPORT"));
}

using Clock = std::chrono::steady_clock;

// 127.0.0.1:PORT for a listening socket.
int LocalPort(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

int ConnectLocal(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd` (EOF or reset) within `within`.
bool ClosedWithin(int fd, std::chrono::milliseconds within) {
  const auto end = Clock::now() + within;
  char buf[4096];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;  // the server's SETTINGS/GOAWAY bytes are read past
  }
  return false;
}

// A TCP proxy on 127.0.0.1 for one connection to `target_port`; Freeze()
// stops forwarding (and reading) without closing anything: to the server,
// the peer vanished, as after a cable pull or a partition.
class FreezableProxy {
 public:
  explicit FreezableProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(listen_fd_, 4);
    port_ = LocalPort(listen_fd_);
    thread_ = std::thread([this] { Run(); });
  }
  ~FreezableProxy() {
    done_ = true;
    thread_.join();
    for (int fd : {listen_fd_, client_fd_, server_fd_})
      if (fd >= 0) ::close(fd);
  }
  int port() const { return port_; }
  void Freeze() { frozen_ = true; }

 private:
  void Run() {
    while (!done_) {
      std::vector<pollfd> p;
      if (client_fd_ < 0) {
        p.push_back({listen_fd_, POLLIN, 0});
      } else if (!frozen_) {
        p.push_back({client_fd_, POLLIN, 0});
        p.push_back({server_fd_, POLLIN, 0});
      }
      if (p.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      if (::poll(p.data(), p.size(), 20) <= 0) continue;
      if (client_fd_ < 0) {
        client_fd_ = ::accept(listen_fd_, nullptr, nullptr);
        server_fd_ = ConnectLocal(target_port_);
        continue;
      }
      for (const pollfd& q : p) {
        if (!(q.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[16384];
        const ssize_t n = ::recv(q.fd, buf, sizeof(buf), 0);
        if (n <= 0) {
          done_ = true;
          return;
        }
        const int to = q.fd == client_fd_ ? server_fd_ : client_fd_;
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t w = ::send(to, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
          if (w <= 0) return;
          sent += w;
        }
      }
    }
  }

  int target_port_;
  int listen_fd_ = -1, client_fd_ = -1, server_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> done_{false}, frozen_{false};
  std::thread thread_;
};

class LockoutTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // A plaintext server on 127.0.0.1:0; with `tokens`, authorization by the
  // token file ("admin TOKEN NAME" lines).
  void Start(GrpcServerConfig cfg, const std::string& tokens = "") {
    cfg.address = "127.0.0.1";
    cfg.port = 0;
    cfg.plaintext = true;
    if (!tokens.empty()) {
      char tmpl[] = "/tmp/flowclass_lockout_XXXXXX";
      ASSERT_NE(::mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
      std::ofstream(dir_ + "/tokens") << tokens;
      cfg.auth.token_file = dir_ + "/tokens";
      cfg.audit_sink = [](const std::string&) {};
    }
    absl::StatusOr<std::unique_ptr<GrpcServer>> s = StartGrpcServer(&fake_, cfg);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  // A channel of its own (its own TCP connection: no shared subchannel).
  std::shared_ptr<grpc::Channel> Channel(grpc::ChannelArguments args = {}, int port = 0) {
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port ? port : server_->port()),
        grpc::InsecureChannelCredentials(), args);
  }
  // An ApplyRules stream with one batch acknowledged: open on the server.
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<v1::ApplyRulesRequest, v1::ApplyRulesResponse>> rw;
    bool acked = false;
  };
  std::unique_ptr<Stream> Open(v1::ClassifierService::Stub* stub, const std::string& token = "") {
    auto s = std::make_unique<Stream>();
    if (!token.empty()) s->ctx.AddMetadata("authorization", "Bearer " + token);
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    s->rw = stub->ApplyRules(&s->ctx);
    v1::BatchAck ack;
    s->acked = s->rw->Write(Batch(1, {})) && ReadAck(s->rw.get(), &ack) && ack.status().code() == kOk;
    return s;
  }
  // Another controller (`token`, its own connection through the client
  // library) adds rule `id`, lists it and deletes it: none of it is locked out.
  void ExpectControllerNotLockedOut(const std::string& token, uint64_t id) {
    ClientOptions o;
    o.target = server_->target();
    o.plaintext = true;
    o.token = token;
    auto c = FlowclassClient::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    std::vector<RuleOp> ops(1);
    ASSERT_TRUE(RuleOpFromProto(Insert(MakeRule(id)), &ops[0]).ok());
    absl::StatusOr<ApplyResult> r = (*c)->ApplyOps(ops, {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->first_error.has_value());
    absl::StatusOr<std::vector<v1::Rule>> listed = (*c)->ListRules();
    ASSERT_TRUE(listed.ok()) << listed.status();
    EXPECT_EQ(listed->size(), 1u);
    r = (*c)->ApplyOps({RuleOp::Delete(id)}, {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->first_error.has_value());
    EXPECT_TRUE(fake_.ListRules().empty());
  }
  // Open, retried for up to 2 s: the client may see a stream's end before
  // the server's handler has returned and given its slot back.
  std::unique_ptr<Stream> OpenSoon(v1::ClassifierService::Stub* stub, const std::string& token = "") {
    const auto end = Clock::now() + std::chrono::seconds(2);
    for (;;) {
      auto s = Open(stub, token);
      if (s->acked || Clock::now() > end) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // The status of a stream the server refused or ended.
  static grpc::Status Ended(Stream* s) {
    v1::BatchAck ack;
    while (ReadAck(s->rw.get(), &ack)) {
    }
    return s->rw->Finish();
  }
  // GetStats on `stub` (unary) as `token`.
  static grpc::Status Stats(v1::ClassifierService::Stub* stub, const std::string& token = "") {
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetStatsRequest req;
    v1::GetStatsResponse resp;
    return stub->GetStats(&ctx, req, &resp);
  }

  FakeDataplane fake_;
  std::unique_ptr<GrpcServer> server_;
  std::string dir_;
};

constexpr char kTokenA[] = "controller-a-0123456789abcdef";
constexpr char kTokenB[] = "controller-b-0123456789abcdef";

// The lockout of the issue: one client opens every streaming slot it may and
// leaves them idle.  Before the per-identity share, the others' add-rules,
// del-rules and dump-rules (ApplyRules, ListRules) were all refused.
TEST_F(LockoutTest, OneIdentityHoldingItsShareLeavesTheOthersTheirs) {
  GrpcServerConfig cfg;
  cfg.max_concurrent_streams = 4;
  cfg.max_streams_per_identity = 2;
  cfg.stream_idle_timeout_ms = 0;  // held for good: only the share protects
  Start(cfg, absl::StrCat("admin ", kTokenA, " ci-a\nadmin ", kTokenB, " ci-b\n"));
  auto ch = Channel();
  auto stub = v1::ClassifierService::NewStub(ch);
  std::vector<std::unique_ptr<Stream>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(Open(stub.get(), kTokenA));
    ASSERT_TRUE(held.back()->acked) << i;
  }
  // A's third: refused, naming the key and the identity.
  auto third = Open(stub.get(), kTokenA);
  EXPECT_FALSE(third->acked);
  const grpc::Status st = Ended(third.get());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(), HasSubstr("grpc.max_streams_per_identity: \""));
  EXPECT_THAT(st.error_message(), HasSubstr("ci-a"));
  EXPECT_THAT(st.error_message(), HasSubstr("already has 2 streaming calls open"));
  // B, on another connection: add-rules, dump-rules, del-rules pass.
  ExpectControllerNotLockedOut(kTokenB, 5);
  // A's slots come back when its streams end.
  held.front()->rw->WritesDone();
  EXPECT_TRUE(Ended(held.front().get()).ok());
  EXPECT_TRUE(OpenSoon(stub.get(), kTokenA)->acked);
  for (auto& h : held) h->ctx.TryCancel();
}

// The numbers, with the default limits: one controller opening 32
// idle ApplyRules streams (once every slot) gets its 8; another controller's
// add-rules, dump-rules and del-rules still pass.
TEST_F(LockoutTest, ThirtyTwoIdleStreamsOfOneControllerWithTheDefaults) {
  GrpcServerConfig cfg;  // 32 server-wide, 8 per identity
  cfg.stream_idle_timeout_ms = 0;
  Start(cfg, absl::StrCat("admin ", kTokenA, " ci-a\nadmin ", kTokenB, " ci-b\n"));
  auto stub = v1::ClassifierService::NewStub(Channel());
  std::vector<std::unique_ptr<Stream>> held;
  int open = 0;
  for (int i = 0; i < 32; ++i) {
    held.push_back(Open(stub.get(), kTokenA));
    open += held.back()->acked ? 1 : 0;
  }
  EXPECT_EQ(open, 8);
  ExpectControllerNotLockedOut(kTokenB, 9);
  for (auto& h : held) h->ctx.TryCancel();
}

// Without authorization, the share is per connection.
TEST_F(LockoutTest, WithoutAuthorizationTheShareIsPerConnection) {
  GrpcServerConfig cfg;
  cfg.max_concurrent_streams = 8;  // the share: 8 / 4 = 2
  cfg.stream_idle_timeout_ms = 0;
  Start(cfg);
  auto a = v1::ClassifierService::NewStub(Channel());
  auto b = v1::ClassifierService::NewStub(Channel());
  auto a1 = Open(a.get()), a2 = Open(a.get()), a3 = Open(a.get());
  EXPECT_TRUE(a1->acked && a2->acked);
  EXPECT_FALSE(a3->acked);
  const grpc::Status st = Ended(a3.get());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(), HasSubstr("\"connection ipv4:127.0.0.1:"));
  EXPECT_TRUE(Open(b.get())->acked);
  a1->ctx.TryCancel();
  a2->ctx.TryCancel();
}

TEST_F(LockoutTest, IdleApplyRulesStreamIsClosedWithAStatusSayingWhy) {
  GrpcServerConfig cfg;
  cfg.max_concurrent_streams = 1;
  cfg.max_streams_per_identity = 1;
  cfg.stream_idle_timeout_ms = 300;
  Start(cfg);
  auto stub = v1::ClassifierService::NewStub(Channel());
  // A stream that keeps sending is not idle: 8 batches 100 ms apart.
  auto busy = Open(stub.get());
  ASSERT_TRUE(busy->acked);
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    v1::BatchAck ack;
    ASSERT_TRUE(busy->rw->Write(Batch(2 + i, {})) && ReadAck(busy->rw.get(), &ack)) << i;
  }
  // Then it sends nothing: closed after about 300 ms, with the key named.
  const auto t0 = Clock::now();
  const grpc::Status st = Ended(busy.get());
  const auto waited = Clock::now() - t0;
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("grpc.stream_idle_timeout_ms: no batch for 300 ms"));
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  EXPECT_LT(waited, std::chrono::seconds(5));
  // Its slot is free again (the only one).
  EXPECT_TRUE(OpenSoon(stub.get())->acked);
}

TEST_F(LockoutTest, ReplaceRulesThatSendsNothingIsClosed) {
  GrpcServerConfig cfg;
  cfg.stream_idle_timeout_ms = 300;
  Start(cfg);
  auto stub = v1::ClassifierService::NewStub(Channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::ReplaceRulesResponse ack;
  auto w = stub->ReplaceRules(&ctx, &ack);
  v1::ReplaceRulesRequest one;
  *one.add_ops() = Insert(MakeRule(1));
  ASSERT_TRUE(w->Write(one));
  const auto t0 = Clock::now();
  const grpc::Status st = w->Finish();  // never half-closed: idle
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_THAT(st.error_message(),
              HasSubstr("grpc.stream_idle_timeout_ms: no batch for 300 ms; the server closed "
                        "the stream; nothing was replaced"));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  EXPECT_TRUE(fake_.ListRules().empty());
}

// A client that asks for the rules and reads none holds its stream (and a
// server thread) for as long as it stays connected: the server's Write
// waits on flow control.  Closed after stream_idle_timeout_ms.
TEST_F(LockoutTest, ListingThatTheClientDoesNotReadIsClosed) {
  GrpcServerConfig cfg;
  cfg.max_concurrent_streams = 1;
  cfg.max_streams_per_identity = 1;
  cfg.stream_idle_timeout_ms = 300;
  Start(cfg);
  constexpr int kRules = 20000;  // about 1 MB of rules: far past the window
  std::vector<RuleOp> ops(kRules);
  for (int i = 0; i < kRules; ++i)
    ASSERT_TRUE(RuleOpFromProto(Insert(MakeRule(static_cast<uint64_t>(i + 1))), &ops[i]).ok());
  ASSERT_TRUE(fake_.ApplyBatch(ops).ok());
  grpc::ChannelArguments small_window;  // keep HTTP/2's window at its 64 KiB
  small_window.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto stub = v1::ClassifierService::NewStub(Channel(small_window));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ListRulesRequest req;
  req.set_page_size(1);  // a message a rule: the window holds few
  auto reader = stub->ListRules(&ctx, req);
  v1::ListRulesResponse r;
  ASSERT_TRUE(reader->Read(&r));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // reads nothing
  int read = 1;
  while (reader->Read(&r)) ++read;
  const grpc::Status st = reader->Finish();
  EXPECT_LT(read, kRules);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_THAT(st.error_message(),
              HasSubstr("grpc.stream_idle_timeout_ms: the client read nothing for 300 ms"));
  // Its slot (the only one) is free again: a listing that is read passes.
  // (Retried for up to 2 s: the handler may not have returned yet.)
  grpc::Status again_st;
  const auto end = Clock::now() + std::chrono::seconds(2);
  do {
    grpc::ClientContext ctx2;
    ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto again = stub->ListRules(&ctx2, req);
    read = 0;
    while (again->Read(&r)) ++read;
    again_st = again->Finish();
  } while (again_st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
           Clock::now() < end);
  EXPECT_TRUE(again_st.ok()) << again_st.error_message();
  EXPECT_EQ(read, kRules);
}

// The same for ApplyRules: batches sent, acks never read.
TEST_F(LockoutTest, ApplyRulesWhoseAcksAreNotReadIsClosed) {
  GrpcServerConfig cfg;
  cfg.stream_idle_timeout_ms = 300;
  Start(cfg);
  grpc::ChannelArguments small_window;
  small_window.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto stub = v1::ClassifierService::NewStub(Channel(small_window));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto rw = stub->ApplyRules(&ctx);
  const auto t0 = Clock::now();
  int sent = 0;
  while (sent < 200000 && rw->Write(Batch(static_cast<uint64_t>(sent + 1), {}))) ++sent;
  v1::BatchAck ack;
  while (ReadAck(rw.get(), &ack)) {
  }
  const grpc::Status st = rw->Finish();
  EXPECT_LT(sent, 200000) << "the client could write on for ever";
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_THAT(st.error_message(),
              HasSubstr("grpc.stream_idle_timeout_ms: the client read no ack for 300 ms"));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(20));
}

// A client that vanished (no FIN, no RST: a partition) holding every slot:
// the server's keepalive ping gets no answer, the connection is closed and
// its streams end.  Before, the slots stayed taken for gRPC's 2 h keepalive.
TEST_F(LockoutTest, VanishedPeerLosesItsStreamsToKeepalive) {
  GrpcServerConfig cfg;
  cfg.max_concurrent_streams = 2;
  cfg.max_streams_per_identity = 2;
  cfg.stream_idle_timeout_ms = 0;
  cfg.keepalive_time_ms = 200;
  cfg.keepalive_timeout_ms = 300;
  Start(cfg);
  FreezableProxy proxy(server_->port());
  auto far = v1::ClassifierService::NewStub(Channel({}, proxy.port()));
  auto h1 = Open(far.get()), h2 = Open(far.get());
  ASSERT_TRUE(h1->acked && h2->acked);
  auto near = v1::ClassifierService::NewStub(Channel());
  auto refused = Open(near.get());
  EXPECT_FALSE(refused->acked);
  EXPECT_EQ(Ended(refused.get()).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  proxy.Freeze();
  const auto end = Clock::now() + std::chrono::seconds(10);
  bool opened = false;
  while (!opened && Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    opened = Open(near.get())->acked;
  }
  EXPECT_TRUE(opened) << "the vanished peer still holds the slots after 10 s";
  h1->ctx.TryCancel();
  h2->ctx.TryCancel();
}

// Keepalive enforcement: pings without data more often than
// min_client_ping_interval_ms get the connection GOAWAY (too_many_pings).
TEST_F(LockoutTest, ClientPingingTooOftenIsSentAway) {
  GrpcServerConfig cfg;
  cfg.min_client_ping_interval_ms = 5000;
  cfg.stream_idle_timeout_ms = 0;
  Start(cfg);
  grpc::ChannelArguments flood;
  flood.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 50);
  flood.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 1000);
  flood.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  flood.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  flood.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, 50);
  auto stub = v1::ClassifierService::NewStub(Channel(flood));
  auto s = Open(stub.get());
  ASSERT_TRUE(s->acked);
  const auto t0 = Clock::now();
  const grpc::Status st = Ended(s.get());  // the stream dies with its connection
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  // A client within the interval keeps its stream.
  auto calm = v1::ClassifierService::NewStub(Channel());
  auto c = Open(calm.get());
  ASSERT_TRUE(c->acked);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  v1::BatchAck ack;
  EXPECT_TRUE(c->rw->Write(Batch(2, {})) && ReadAck(c->rw.get(), &ack));
  c->rw->WritesDone();
  EXPECT_TRUE(Ended(c.get()).ok());
}

TEST_F(LockoutTest, IdleConnectionIsClosed) {
  GrpcServerConfig cfg;
  cfg.max_connection_idle_ms = 300;
  Start(cfg);
  auto ch = Channel();
  auto stub = v1::ClassifierService::NewStub(ch);
  ASSERT_TRUE(Stats(stub.get()).ok());
  EXPECT_EQ(ch->GetState(false), GRPC_CHANNEL_READY);
  const auto end = Clock::now() + std::chrono::seconds(5);
  while (ch->GetState(false) == GRPC_CHANNEL_READY && Clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(ch->GetState(false), GRPC_CHANNEL_READY) << "the idle connection is still open";
  EXPECT_TRUE(Stats(stub.get()).ok());  // a new call reconnects
}

// A connection that never sends its HTTP/2 preface (half-open, or a port
// scanner) is closed after handshake_timeout_ms; before, gRPC's 120 s.
TEST_F(LockoutTest, ConnectionThatNeverFinishesItsSetUpIsClosed) {
  GrpcServerConfig cfg;
  cfg.handshake_timeout_ms = 300;
  Start(cfg);
  const int fd = ConnectLocal(server_->port());
  ASSERT_GE(fd, 0);
  const auto t0 = Clock::now();
  EXPECT_TRUE(ClosedWithin(fd, std::chrono::seconds(5)));
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(250));
  ::close(fd);
}

}  // namespace
}  // namespace flowclass
