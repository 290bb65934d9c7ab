// Readiness (server/readiness.h) on fabricated heartbeats and a test clock,
// and what it drives: /readyz and /healthz on a real /metrics listener
// (127.0.0.1:0) and grpc.health.v1 on a real gRPC server (127.0.0.1:0),
// both over a FakeDataplane.  The DPDK side (a real stalled PMD) is
// dataplane/dpdk/dpdk_dataplane_stall_test.
#include "server/readiness.h"

#include <chrono>
#include <string>
#include <vector>

#include "client/rpc/flowclass_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/grpc_server.h"
#include "server/metrics/metrics_exporter.h"
#include "server/metrics/test_http.h"
#include "server/testing/fake_dataplane.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using Ms = std::chrono::milliseconds;

DataplaneHeartbeat Beat(uint64_t gen, std::vector<PmdHeartbeat> pmds) {
  DataplaneHeartbeat h;
  h.generation = gen;
  h.pmds = std::move(pmds);
  return h;
}
PmdHeartbeat Pmd(uint32_t i, uint64_t iterations, uint64_t gen, bool running = true) {
  PmdHeartbeat p;
  p.pmd = i;
  p.lcore = i + 1;
  p.running = running;
  p.iterations = iterations;
  p.generation = gen;
  return p;
}

TEST(ReadinessTest, StartUpStallLagAndRecovery) {
  Readiness r(ReadinessOptions{Ms(1000), Ms(100)});
  std::vector<bool> seen;
  const int sub = r.Subscribe([&](bool ready) { seen.push_back(ready); });
  EXPECT_EQ(seen, std::vector<bool>{false});
  const auto t0 = Readiness::Clock::now();
  EXPECT_FALSE(r.ready());
  EXPECT_THAT(r.Get().reason, HasSubstr("rules not restored yet"));
  EXPECT_THAT(r.Get().reason, HasSubstr("PMDs not observed yet"));

  // PMDs not started yet.
  r.Observe(Beat(1, {Pmd(0, 0, 0, false), Pmd(1, 0, 0, false)}), t0);
  EXPECT_THAT(r.Get().reason, HasSubstr("pmd 0 (lcore 1): not running"));
  // Running, but the start-up rule load is not done: not ready, live.
  r.Observe(Beat(1, {Pmd(0, 5, 1), Pmd(1, 5, 1)}), t0 + Ms(100));
  EXPECT_FALSE(r.ready());
  EXPECT_EQ(r.Get().reason, "rules not restored yet");
  EXPECT_TRUE(r.Get().live);
  r.SetRulesRestored(true);
  EXPECT_TRUE(r.ready()) << r.Get().reason;
  EXPECT_EQ(r.Get().reason, "ready");

  // PMD 1 stops iterating: ready until stall_timeout, then not ready and not live.
  r.Observe(Beat(1, {Pmd(0, 9, 1), Pmd(1, 5, 1)}), t0 + Ms(900));
  EXPECT_TRUE(r.ready()) << r.Get().reason;
  r.Observe(Beat(1, {Pmd(0, 12, 1), Pmd(1, 5, 1)}), t0 + Ms(1200));
  EXPECT_FALSE(r.ready());
  EXPECT_FALSE(r.Get().live);
  EXPECT_THAT(r.Get().reason,
              HasSubstr("pmd 1 (lcore 2): no loop iteration for 1100 ms (stalled"));
  EXPECT_EQ(r.Get().stalled_pmds, std::vector<uint32_t>{1});

  // It resumes; generation 2 is first seen published now: it has one
  // interval to install it, then it lags.
  r.Observe(Beat(2, {Pmd(0, 13, 2), Pmd(1, 6, 1)}), t0 + Ms(1300));
  EXPECT_TRUE(r.Get().live);
  EXPECT_TRUE(r.ready()) << r.Get().reason;
  r.Observe(Beat(2, {Pmd(0, 14, 2), Pmd(1, 7, 1)}), t0 + Ms(1400));
  EXPECT_FALSE(r.ready());
  EXPECT_THAT(r.Get().reason, HasSubstr("pmd 1 (lcore 2): runs rule generation 1, published 2"));
  r.Observe(Beat(2, {Pmd(0, 15, 2), Pmd(1, 8, 2)}), t0 + Ms(1500));
  EXPECT_TRUE(r.ready()) << r.Get().reason;

  // A publication that timed out is owed: lagging at once, whatever the sampling.
  DataplaneHeartbeat owed = Beat(3, {Pmd(0, 16, 3), Pmd(1, 9, 2)});
  owed.owed_generation = 3;
  owed.publish_timeouts = 1;
  r.Observe(owed, t0 + Ms(1600));
  EXPECT_FALSE(r.ready());
  EXPECT_EQ(r.Get().publish_timeouts, 1u);
  EXPECT_EQ(seen, (std::vector<bool>{false, true, false, true, false, true, false}));
  r.Unsubscribe(sub);
  r.Observe(Beat(3, {Pmd(0, 17, 3), Pmd(1, 10, 3)}), t0 + Ms(1700));
  EXPECT_TRUE(r.ready());
  EXPECT_EQ(seen.size(), 7u);  // unsubscribed
}

MetricsOptions Local() {
  MetricsOptions o;
  o.enabled = true;
  o.address = "127.0.0.1:0";
  return o;
}

TEST(ReadinessTest, ReadyzHealthzAndMetrics) {
  FakeDataplane fake;
  Readiness r(ReadinessOptions{Ms(1000), Ms(100)});
  auto exporter = MetricsExporter::Start(Local(), &fake, nullptr, &r);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const int port = (*exporter)->port();
  // Starting: not ready (503, why), but live (a restore must not be killed).
  HttpResponse ready = HttpGet("127.0.0.1", port, "/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_THAT(ready.body, HasSubstr("not ready: rules not restored yet"));
  HttpResponse live = HttpGet("127.0.0.1", port, "/healthz");
  EXPECT_EQ(live.status, 200);
  EXPECT_EQ(live.body, "live\n");

  const auto t0 = Readiness::Clock::now();
  r.SetRulesRestored(true);
  r.Observe(Beat(1, {Pmd(0, 1, 1)}), t0);
  ready = HttpGet("127.0.0.1", port, "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ready\n");
  HttpResponse m = HttpGet("127.0.0.1", port, "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_THAT(m.body, HasSubstr("flowclass_ready 1"));
  EXPECT_THAT(m.body, HasSubstr("flowclass_pmd_stalled{lcore=\"1\",pmd=\"0\"} 0"));
  EXPECT_THAT(m.body, HasSubstr("flowclass_publish_timeouts_total 0"));

  // Stalled: both fail, the body names the PMD.
  DataplaneHeartbeat stuck = Beat(1, {Pmd(0, 1, 1)});
  stuck.publish_timeouts = 2;
  r.Observe(stuck, t0 + Ms(1500));
  ready = HttpGet("127.0.0.1", port, "/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_THAT(ready.body, HasSubstr("pmd 0 (lcore 1): no loop iteration"));
  live = HttpGet("127.0.0.1", port, "/healthz");
  EXPECT_EQ(live.status, 503);
  EXPECT_THAT(live.body, HasSubstr("not live: pmd 0 (lcore 1)"));
  m = HttpGet("127.0.0.1", port, "/metrics");
  EXPECT_THAT(m.body, HasSubstr("flowclass_ready 0"));
  EXPECT_THAT(m.body, HasSubstr("flowclass_live 0"));
  EXPECT_THAT(m.body, HasSubstr("flowclass_pmd_stalled{lcore=\"1\",pmd=\"0\"} 1"));
  EXPECT_THAT(m.body, HasSubstr("flowclass_publish_timeouts_total 2"));
  // Other paths are untouched.
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/nope").status, 404);
}

TEST(ReadinessTest, ExporterWithoutReadinessHasNoProbes) {
  FakeDataplane fake;
  auto exporter = MetricsExporter::Start(Local(), &fake, nullptr);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  EXPECT_EQ(HttpGet("127.0.0.1", (*exporter)->port(), "/readyz").status, 404);
  EXPECT_EQ(HttpGet("127.0.0.1", (*exporter)->port(), "/metrics").status, 200);
}

TEST(ReadinessTest, GrpcHealthFollowsReadiness) {
  FakeDataplane fake;
  Readiness r(ReadinessOptions{Ms(1000), Ms(100)});
  GrpcServerConfig cfg;
  cfg.address = "127.0.0.1";
  cfg.port = 0;
  cfg.plaintext = true;
  auto server = StartGrpcServer(&fake, cfg, GrpcTlsPem{}, &r);
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions o;
  o.target = (*server)->target();
  o.plaintext = true;
  o.timeout = Ms(10000);
  auto client = FlowclassClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto healthy = [&](const std::string& service) {
    absl::StatusOr<bool> h = (*client)->Healthy(service);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.value_or(true);
  };
  EXPECT_FALSE(healthy(""));
  EXPECT_FALSE(healthy("flowclass.v1.ClassifierService"));
  const auto t0 = Readiness::Clock::now();
  r.SetRulesRestored(true);
  r.Observe(Beat(0, {Pmd(0, 1, 0)}), t0);
  EXPECT_TRUE(healthy(""));
  EXPECT_TRUE(healthy("flowclass.v1.ClassifierService"));
  r.Observe(Beat(0, {Pmd(0, 1, 0)}), t0 + Ms(1500));  // stalled
  EXPECT_FALSE(healthy(""));
  EXPECT_FALSE(healthy("flowclass.v1.ClassifierService"));
  r.Observe(Beat(0, {Pmd(0, 2, 0)}), t0 + Ms(1600));  // resumed
  EXPECT_TRUE(healthy("flowclass.v1.ClassifierService"));
  (*server)->Shutdown();
  r.Observe(Beat(0, {Pmd(0, 3, 0)}), t0 + Ms(1700));  // no callback into a gone server
}

}  // namespace
}  // namespace flowclass
