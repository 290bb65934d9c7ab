// MetricsExporter over real HTTP: /metrics serves the collector's families
// and the apply-latency histogram, passes `promtool check metrics` with no
// lint finding, survives concurrent scrapes, and reports option and bind
// errors naming the metrics.* key.
#include "server/metrics/metrics_exporter.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/test_http.h"
#include "server/testing/fake_dataplane.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

DataplaneStats SomeStats(uint64_t packets) {
  DataplaneStats s;
  s.tsc_hz = 1000000000;
  PmdCounters p;
  p.rx_packets = packets;
  p.pipeline.packets = packets;
  p.pipeline.emc_hits = packets / 2;
  p.pipeline.upcall_ok = packets - packets / 2;
  p.rx_queues = {{1, 0, packets, 0}};
  p.tx_queues = {{2, 0, packets, 0}};
  p.has_snapshot = true;
  p.snapshot.emc_entries = 8192;
  SubtableInfo t;
  t.id = 3;
  t.in_port = 1;
  t.hits = packets;
  p.snapshot.subtable = {t, t};
  p.snapshot.subtable[1].id = 4;
  s.pmds.push_back(p);
  PortCounters port;
  port.number = 1;
  port.device = "net_ring0";
  s.ports.push_back(port);
  return s;
}

MetricsOptions Local() {
  MetricsOptions o;
  o.enabled = true;
  o.address = "127.0.0.1:0";
  o.top_subtables = 1;
  return o;
}

// Runs `promtool check metrics` on `text`; returns its exit code and output.
std::pair<int, std::string> PromtoolCheckMetrics(const std::string& text) {
  const std::string in = ::testing::TempDir() + "/metrics_exporter_test.prom";
  std::ofstream(in) << text;
  const std::string cmd =
      absl::StrCat(FLOWCLASS_PROMTOOL, " check metrics < ", in, " 2>&1");
  const CmdResult r = RunCommand(cmd);
  return {r.code, r.out};
}

TEST(MetricsExporterTest, ServesCollectorAndApplyLatencyAndPassesPromtool) {
  FakeDataplane fake;
  fake.SetStats(SomeStats(1000));
  ApplyLatencyMetrics latency;
  ObservedDataplane observed(&fake, &latency);
  auto exporter = MetricsExporter::Start(Local(), &fake, &latency);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const int port = (*exporter)->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ((*exporter)->url(), absl::StrCat("http://127.0.0.1:", port, "/metrics"));

  // One good batch, one bad one (deleting a rule that does not exist).
  Rule r;
  r.id = 1;
  r.priority = 1;
  r.action = Action::Output(2);
  ASSERT_TRUE(observed.ApplyBatch({RuleOp::Insert(r)}).ok());
  ASSERT_FALSE(observed.ApplyBatch({RuleOp::Delete(99)}).ok());
  ASSERT_TRUE(observed.ApplyBatch({RuleOp::Delete(1)}).ok());
  // DeleteAll reaches the dataplane's own DeleteAll (not a list and a batch
  // of deletes made by the wrapper) and is observed as one batch.
  ASSERT_TRUE(observed.ApplyBatch({RuleOp::Insert(r)}).ok());
  ASSERT_TRUE(observed.DeleteAll().ok());
  EXPECT_EQ(fake.delete_all_calls(), 1);
  EXPECT_TRUE(fake.ListRules().empty());

  HttpResponse h = HttpGet("127.0.0.1", port, "/metrics");
  ASSERT_EQ(h.status, 200);
  EXPECT_THAT(h.body, HasSubstr("# TYPE flowclass_pmd_packets_total counter"));
  EXPECT_THAT(h.body, HasSubstr("flowclass_pmd_packets_total{pmd=\"0\",layer=\"emc\"} 500"));
  EXPECT_THAT(h.body, HasSubstr("flowclass_rule_generation 4"));
  EXPECT_THAT(h.body, HasSubstr(
      "flowclass_subtable_hits_total{pmd=\"0\",port=\"1\",subtable=\"other\"} 1000"));
  EXPECT_THAT(h.body, HasSubstr("# TYPE flowclass_rule_batch_apply_duration_seconds histogram"));
  EXPECT_THAT(h.body, HasSubstr(
      "flowclass_rule_batch_apply_duration_seconds_count{result=\"ok\"} 4"));
  EXPECT_THAT(h.body, HasSubstr(
      "flowclass_rule_batch_apply_duration_seconds_count{result=\"error\"} 1"));
  EXPECT_THAT(h.body, HasSubstr(
      "flowclass_rule_batch_apply_duration_seconds_bucket{result=\"ok\",le=\"10\"} 4"));

  // Counters follow the dataplane between scrapes.
  fake.SetStats(SomeStats(3000));
  h = HttpGet("127.0.0.1", port, "/metrics");
  EXPECT_THAT(h.body, HasSubstr("flowclass_pmd_packets_total{pmd=\"0\",layer=\"emc\"} 1500"));

  // promtool: valid exposition and no lint warning (it prints nothing).
  if (std::string(FLOWCLASS_PROMTOOL).empty()) GTEST_FAIL() << "promtool not installed (make test installs Debian package prometheus)";
  auto [rc, out] = PromtoolCheckMetrics(h.body);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "") << out;
}

TEST(MetricsExporterTest, PromtoolCatchesALintProblem) {
  // The check above is only worth something if promtool does complain about
  // a convention breach: a counter without _total.
  if (std::string(FLOWCLASS_PROMTOOL).empty()) GTEST_FAIL() << "promtool not installed (make test installs Debian package prometheus)";
  auto [rc, out] = PromtoolCheckMetrics(
      "# HELP flowclass_bad a counter\n# TYPE flowclass_bad counter\nflowclass_bad 1\n");
  EXPECT_NE(rc, 0);
  EXPECT_THAT(out, HasSubstr("_total"));
}

TEST(MetricsExporterTest, ConcurrentScrapesWhileStatsChange) {
  FakeDataplane fake;
  fake.SetStats(SomeStats(1));
  MetricsOptions o = Local();
  o.threads = 4;
  auto exporter = MetricsExporter::Start(o, &fake, nullptr);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const int port = (*exporter)->port();
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t i = 2; !stop.load(); ++i) fake.SetStats(SomeStats(i));
  });
  std::vector<std::thread> scrapers;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    scrapers.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        HttpResponse h = HttpGet("127.0.0.1", port, "/metrics");
        if (h.status == 200 && h.body.find("flowclass_pmd_rx_packets_total") != std::string::npos)
          ok.fetch_add(1);
      }
    });
  for (auto& t : scrapers) t.join();
  stop.store(true);
  writer.join();
  EXPECT_EQ(ok.load(), 100);
  // No latency registry: no histogram.
  EXPECT_THAT(HttpGet("127.0.0.1", port, "/metrics").body,
              Not(HasSubstr("apply_duration_seconds")));
}

TEST(MetricsExporterTest, StopsServingWhenDestroyed) {
  FakeDataplane fake;
  auto exporter = MetricsExporter::Start(Local(), &fake, nullptr);
  ASSERT_TRUE(exporter.ok());
  const int port = (*exporter)->port();
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/metrics").status, 200);
  exporter->reset();
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/metrics", 1000).status, -1);
}

TEST(MetricsExporterTest, OptionErrorsNameTheKey) {
  FakeDataplane fake;
  struct Case {
    std::string address;
    uint32_t top, threads;
    std::string want;
  } cases[] = {
      {"127.0.0.1", 8, 2, "metrics.address: \"127.0.0.1\" is not host:port"},
      {"127.0.0.1:99999", 8, 2, "metrics.address"},
      {":9464", 8, 2, "metrics.address"},
      {"::1:9464", 8, 2, "metrics.address"},
      {"127.0.0.1:x", 8, 2, "metrics.address"},
      // .invalid never resolves (RFC 6761): refused when read, not at start.
      {"no-such-host.invalid:9464", 8, 2,
       "metrics.address: \"no-such-host.invalid:9464\": host \"no-such-host.invalid\" does "
       "not resolve to an IPv4 address"},
      {"127.0.0.1:0", 1001, 2, "metrics.top_subtables: 1001 is outside 0..1000"},
      {"127.0.0.1:0", 8, 0, "metrics.threads: 0 is outside 1..64"},
      {"127.0.0.1:0", 8, 2, "metrics.request_timeout_ms: 99 is outside 100..600000"},
  };
  for (const Case& c : cases) {
    MetricsOptions o;
    o.address = c.address;
    o.top_subtables = c.top;
    o.threads = c.threads;
    if (absl::StrContains(c.want, "request_timeout_ms")) o.request_timeout_ms = 99;
    auto e = MetricsExporter::Start(o, &fake, nullptr);
    ASSERT_FALSE(e.ok()) << c.address;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << c.address;
    EXPECT_THAT(std::string(e.status().message()), HasSubstr(c.want));
  }
  // IPv6 cannot be served (civetweb without IPv6): refused when the config is
  // read, naming the key, instead of failing at start-up.
  MetricsOptions v6;
  v6.address = "[::1]:9464";
  const absl::Status s6 = ValidateMetricsOptions(v6);
  EXPECT_EQ(s6.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s6.message()), HasSubstr("metrics.address: \"[::1]:9464\": IPv6"));
}

// A raw connection to 127.0.0.1:port that sent `bytes` (a request's start).
int HalfOpen(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// The lockout of the issue: as many half-open requests as there are server
// threads (one that stopped, one that trickles a byte every 100 ms) blinded
// /metrics for as long as they stayed open.  With metrics.request_timeout_ms
// they are closed, and a scrape is answered within the timeout.
TEST(MetricsExporterTest, HalfOpenRequestsDoNotBlindMetrics) {
  FakeDataplane fake;
  MetricsOptions o = Local();
  o.threads = 2;
  o.request_timeout_ms = 500;
  auto exporter = MetricsExporter::Start(o, &fake, nullptr);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const int port = (*exporter)->port();
  const int stalled = HalfOpen(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n");
  const int trickling = HalfOpen(port, "GET /metrics HTTP/1.1\r\n");
  ASSERT_GE(stalled, 0);
  ASSERT_GE(trickling, 0);
  std::atomic<bool> stop{false};
  std::thread loris([&] {
    while (!stop) {
      if (send(trickling, "X", 1, MSG_NOSIGNAL) != 1) return;  // closed by the server
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both hold a thread
  const auto t0 = std::chrono::steady_clock::now();
  const HttpResponse r = HttpGet("127.0.0.1", port, "/metrics", 10000);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.status, 200);
  EXPECT_LT(took, std::chrono::seconds(3));
  // The stalled one was closed by the server (EOF after any error answer).
  char buf[4096];
  timeval tv{5, 0};
  setsockopt(stalled, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ssize_t n = 0;
  while ((n = recv(stalled, buf, sizeof(buf), 0)) > 0) {
  }
  EXPECT_EQ(n, 0) << "the stalled connection is still open after 5 s";
  stop = true;
  loris.join();
  close(stalled);
  close(trickling);
}

TEST(MetricsExporterTest, BusyAddressIsUnavailable) {
  FakeDataplane fake;
  auto first = MetricsExporter::Start(Local(), &fake, nullptr);
  ASSERT_TRUE(first.ok());
  MetricsOptions o = Local();
  o.address = absl::StrCat("127.0.0.1:", (*first)->port());
  auto second = MetricsExporter::Start(o, &fake, nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("metrics.address: cannot listen on " + o.address));
}

}  // namespace
}  // namespace flowclass
