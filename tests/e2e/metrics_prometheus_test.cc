// End to end: a real Prometheus server (Debian's `prometheus`, 1 s scrape
// interval, our alert rules loaded) scrapes a real flowclassd passing traffic
// on net_pcap vdevs, and what its HTTP API answers agrees with the daemon's
// own counters.
//
// The reference is the daemon's final stats dump ("final pmd=N ..." and
// "final port=N ..." lines, printed from DpdkDataplane::Stats() after the
// PMDs stopped); the gRPC GetStats of the API issue exposes the same
// DataplaneStats.  Two PMDs: PMD 0 polls port 1, fed a finite pcap, so once
// its traffic is done every one of its counters is final and must match
// Prometheus exactly; PMD 1 polls port 4, fed forever (net_pcap
// infinite_rx), so it shows traffic passing during the scrapes, and its
// last scraped counters must trail the final ones by at most what it
// forwards in the time between the last scrape and the stop.
//
// Every address is 127.0.0.1; both processes are stopped by PID.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dataplane/flow/flow.h"
#include "server/metrics/test_http.h"
#include "server/metrics/test_json.h"
#include "tests/common/packet_builder.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

const char* const kDaemon = FLOWCLASS_BINARY_DIR "/server/flowclassd";

// Prometheus HTTP API client.
class Prom {
 public:
  explicit Prom(int port) : port_(port) {}
  // The JSON answer of /api/v1/query (nullopt if unreachable / not JSON).
  std::optional<Json> Raw(const std::string& expr) const {
    HttpResponse r = HttpGet("127.0.0.1", port_, "/api/v1/query?query=" + UrlEncode(expr));
    if (r.status < 0) return std::nullopt;
    return ParseJson(r.body);
  }
  // The value of a query that yields one series or a scalar.
  std::optional<double> Value(const std::string& expr) const {
    auto j = Raw(expr);
    if (!j || (*j)["status"].str != "success") return std::nullopt;
    const Json& data = (*j)["data"];
    const Json* v = nullptr;
    if (data["resultType"].str == "scalar") v = &data["result"];
    else if (data["result"].array.size() == 1) v = &data["result"][0]["value"];
    if (!v) return std::nullopt;
    double d;
    if (!absl::SimpleAtod((*v)[1].str, &d)) return std::nullopt;
    return d;
  }
  // Polls `expr` until pred(value) or the timeout.
  template <typename Pred>
  std::optional<double> WaitFor(const std::string& expr, Pred pred, double seconds) const {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    std::optional<double> v;
    while (Clock::now() < end) {
      v = Value(expr);
      if (v && pred(*v)) return v;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return v;
  }
  std::string Get(const std::string& path) const { return HttpGet("127.0.0.1", port_, path).body; }

 private:
  int port_;
};

std::vector<std::vector<uint8_t>> Frames(int n, uint32_t seed, uint32_t dst_base) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < n; ++i) {
    Flow f;
    f.Set(Field::kEthDst, 0x020000000002);
    f.Set(Field::kEthSrc, 0x020000000001);
    f.Set(Field::kEthType, kEthTypeIpv4);
    f.Set(Field::kIpv4Src, 0xc0a80000 | (rng() % 64));
    f.Set(Field::kIpv4Dst, dst_base | (rng() % 64));
    f.Set(Field::kNwProto, rng() % 3 ? kIpProtoUdp : kIpProtoTcp);
    f.Set(Field::kNwTtl, 64);
    f.Set(Field::kTpSrc, 1024 + rng() % 16);
    f.Set(Field::kTpDst, 53);
    frames.push_back(BuildFrameFromFlow(f, 64));
  }
  return frames;
}

TEST(MetricsPrometheusTest, RealPrometheusAgreesWithFlowclassdStats) {
  if (std::string(FLOWCLASS_PROMETHEUS).empty()) GTEST_FAIL() << "prometheus not installed (make test installs it)";
  TempDir dir("flowclass_metrics_e2e");
  constexpr int kFinitePackets = 3000;
  WritePcap(dir.File("in1.pcap"), Frames(kFinitePackets, 1, 0x0a000000));
  WritePcap(dir.File("in4.pcap"), Frames(64, 2, 0x0b000000));
  WriteFile(dir.File("rules.txt"),
            "priority=100,in_port=1,udp,nw_dst=10.0.0.0/8,actions=output:2\n"
            "priority=50,in_port=1,tcp,actions=drop\n"
            "priority=10,in_port=4,ip,actions=output:3\n");
  // net_pcap needs one tx_pcap per PMD (one tx queue each).
  auto two_tx = [&](const std::string& p) {
    return absl::StrCat("tx_pcap=", dir.File(p + "a.pcap"), ",tx_pcap=", dir.File(p + "b.pcap"));
  };
  WriteFile(dir.File("d.yaml"), absl::StrCat(R"(
eal: {hugepages: false, memory_mb: 256, pci: false, lcore_map: "0@0,1@1,2@1", log_level: error}
pmd: {lcores: [1, 2], idle_sleep_us: 50}
mempool: {mbufs: 16383}
ports:
  - {number: 1, device: net_pcap0, args: "rx_pcap=)", dir.File("in1.pcap"), ",", two_tx("o1"), R"("}
  - {number: 2, device: net_pcap1, args: ")", two_tx("o2"), R"(", poll: false}
  - {number: 3, device: net_null0, poll: false}
  - {number: 4, device: net_pcap2, args: "rx_pcap=)", dir.File("in4.pcap"), ",infinite_rx=1,", two_tx("o4"), R"("}
rules: {file: )", dir.File("rules.txt"), R"(}
stats: {interval_ms: 0}
metrics: {enabled: true, address: "127.0.0.1:0", top_subtables: 2}
)"));

  const std::string prefix = absl::StrCat("fcmetrics_", getpid());
  EalDaemonProcess daemon(kDaemon, {"-c", dir.File("d.yaml")}, prefix, dir.File("daemon.txt"));
  int metrics_port = 0;
  for (auto end = Clock::now() + std::chrono::seconds(20); Clock::now() < end && !metrics_port;) {
    const std::string out = daemon.Output();
    const size_t at = out.find("metrics on http://127.0.0.1:");
    if (at != std::string::npos)
      (void)absl::SimpleAtoi(out.substr(at + 28, out.find('/', at + 28) - (at + 28)),
                             &metrics_port);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(metrics_port, 0) << daemon.Output();
  EXPECT_THAT(daemon.Output(), HasSubstr("pmd 0 on lcore 1 polls 1:0"));
  EXPECT_THAT(daemon.Output(), HasSubstr("pmd 1 on lcore 2 polls 4:0"));

  // A real scrape passes promtool's checks, lint included.
  if (!std::string(FLOWCLASS_PROMTOOL).empty()) {
    HttpResponse scrape = HttpGet("127.0.0.1", metrics_port, "/metrics");
    ASSERT_EQ(scrape.status, 200);
    WriteFile(dir.File("scrape.prom"), scrape.body);
    const std::string cmd = absl::StrCat(FLOWCLASS_PROMTOOL, " check metrics < ",
                                         dir.File("scrape.prom"), " > ",
                                         dir.File("promtool.txt"), " 2>&1");
    EXPECT_EQ(std::system(cmd.c_str()), 0) << ReadFile(dir.File("promtool.txt"));
    EXPECT_EQ(ReadFile(dir.File("promtool.txt")), "");
  }

  // The Prometheus server, scraping every second, with our alert rules.
  const int prom_port = FreePort();
  WriteFile(dir.File("prometheus.yml"), absl::StrCat(R"(
global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}
rule_files: [")", FLOWCLASS_SOURCE_DIR, R"(/deploy/prometheus/flowclass_alerts.yml"]
scrape_configs:
  - job_name: flowclassd
    static_configs: [{targets: ["127.0.0.1:)", metrics_port, R"("]}]
)"));
  ChildProcess prometheus({FLOWCLASS_PROMETHEUS, "--config.file=" + dir.File("prometheus.yml"),
                      "--storage.tsdb.path=" + dir.File("tsdb"),
                      absl::StrCat("--web.listen-address=127.0.0.1:", prom_port),
                      "--log.level=warn"},
                     dir.File("prometheus.txt"));
  Prom prom(prom_port);
  bool ready = false;
  for (auto end = Clock::now() + std::chrono::seconds(20); Clock::now() < end && !ready;) {
    ready = HttpGet("127.0.0.1", prom_port, "/-/ready", 500).status == 200;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(ready) << ReadFile(dir.File("prometheus.txt"));

  // PMD 0's finite traffic is all in a scrape; PMD 1's keeps flowing.
  auto done = prom.WaitFor(R"(flowclass_pmd_rx_packets_total{pmd="0"})",
                           [](double v) { return v == kFinitePackets; }, 20);
  ASSERT_EQ(done, kFinitePackets) << ReadFile(dir.File("prometheus.txt"));
  auto flowing = prom.WaitFor(R"(rate(flowclass_pmd_rx_packets_total{pmd="1"}[3s]))",
                              [](double v) { return v > 0; }, 10);
  ASSERT_TRUE(flowing.has_value());
  EXPECT_GT(*flowing, 0) << "no traffic on PMD 1 while scraped";
  const double pps_pmd1 = *flowing;
  EXPECT_EQ(prom.Value(R"(up{job="flowclassd"})"), 1);
  EXPECT_EQ(prom.Value("flowclass_rules"), 3);
  EXPECT_EQ(prom.Value("flowclass_rule_generation"), 1);
  EXPECT_EQ(prom.Value("max(flowclass_pmd_generation)"), 1);
  EXPECT_EQ(prom.Value(R"(flowclass_rule_batch_apply_duration_seconds_count{result="ok"})"), 1);
  EXPECT_EQ(prom.Value("flowclass_pmds"), 2);
  EXPECT_EQ(prom.Value(R"(flowclass_pmd_cache_capacity_entries{pmd="0",cache="emc"})"), 8192);
  EXPECT_GT(prom.Value(R"(flowclass_pmd_megaflows{pmd="0"})").value_or(0), 0);
  EXPECT_GT(prom.Value(R"(flowclass_subtables{pmd="1",port="4"})").value_or(0), 0);
  EXPECT_EQ(prom.Value("count(flowclass_build_info)"), 1);
  // Bounded subtable series: at most top_subtables + one "other" per port, per PMD.
  EXPECT_LE(prom.Value(R"(count(flowclass_subtable_hits_total{pmd="0"}))").value_or(99), 2 + 1);

  // Let at least two more scrapes happen with PMD 0 quiet, then compare
  // after the daemon has stopped.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));

  // Every dashboard query is valid PromQL on the real server; the panels the
  // issue asks for have data.
  {
    auto dash = ParseJson(ReadFile(FLOWCLASS_SOURCE_DIR "/deploy/grafana/flowclass.json"));
    ASSERT_TRUE(dash.has_value());
    int checked = 0;
    for (const Json& p : (*dash)["panels"].array) {
      for (const Json& t : p["targets"].array) {
        const std::string expr = absl::StrReplaceAll(
            t["expr"].str, {{"$__rate_interval", "4s"}, {"$instance", ".*"}, {"$pmd", ".*"}});
        auto j = prom.Raw(expr);
        ASSERT_TRUE(j.has_value()) << expr;
        EXPECT_EQ((*j)["status"].str, "success") << p["title"].str << ": " << expr << " -> "
                                                 << (*j)["error"].str;
        // Every query has data: this daemon ran traffic through every layer
        // and applied rule batches.  (A query can be valid and still never
        // match, e.g. a binary operator between series whose labels differ.)
        const bool has_data = !(*j)["data"]["result"].array.empty();
        EXPECT_TRUE(has_data) << p["title"].str << " (" << t["refId"].str << "): " << expr;
        ++checked;
      }
    }
    EXPECT_GE(checked, 20);
  }
  // The alert rules loaded and evaluate without error on real data.
  {
    auto rules = ParseJson(prom.Get("/api/v1/rules"));
    ASSERT_TRUE(rules.has_value());
    int n = 0;
    for (const Json& g : (*rules)["data"]["groups"].array)
      for (const Json& r : g["rules"].array) {
        ++n;
        EXPECT_NE(r["health"].str, "err") << r["name"].str << ": " << r["lastError"].str;
      }
    // Every rule of the file: its alerting and recording rules.
    std::ifstream alerts(std::string(FLOWCLASS_SOURCE_DIR) +
                         "/deploy/prometheus/flowclass_alerts.yml");
    int in_file = 0;
    for (std::string line; std::getline(alerts, line);) {
      const size_t dash = line.find_first_not_of(' ');
      if (dash != std::string::npos &&
          (line.compare(dash, 8, "- alert:") == 0 || line.compare(dash, 9, "- record:") == 0))
        ++in_file;
    }
    EXPECT_GE(in_file, 13);
    EXPECT_EQ(n, in_file);
    EXPECT_THAT(prom.Get("/api/v1/alerts"), Not(HasSubstr("\"state\":\"firing\"")));
  }

  const double before_stop =
      prom.Value(R"(flowclass_pmd_rx_packets_total{pmd="1"})").value_or(-1);
  daemon.Signal(SIGTERM);
  ASSERT_EQ(daemon.Wait(30), 0) << daemon.Output();
  const std::string out = daemon.Output();
  // The series are stale once the target is gone; read the last samples.
  auto last = [&](const std::string& sel) {
    return prom.Value("last_over_time(" + sel + "[1m])").value_or(-1);
  };

  // The PMDs left their last pipeline snapshot for the final dump.
  EXPECT_THAT(out, ::testing::ContainsRegex("megaflows: [1-9][0-9]* in [1-9][0-9]* subtables"));

  // PMD 0: every counter exactly as the daemon's final dump says.
  auto p0 = OutputFields(out, "final pmd=0");
  ASSERT_EQ(p0["rx"], kFinitePackets) << out;
  EXPECT_EQ(last(R"(flowclass_pmd_rx_packets_total{pmd="0"})"), p0["rx"]);
  EXPECT_EQ(last(R"(flowclass_pmd_tx_packets_total{pmd="0"})"), p0["tx"]);
  EXPECT_GT(p0["tx"], 0u);
  EXPECT_EQ(last(R"(flowclass_pmd_dropped_packets_total{pmd="0",reason="rule"})"), p0["rule_drops"]);
  EXPECT_GT(p0["rule_drops"], 0u);
  EXPECT_EQ(last(R"(flowclass_pmd_dropped_packets_total{pmd="0",reason="no_match"})"), p0["no_match"]);
  EXPECT_EQ(last(R"(flowclass_pmd_packets_total{pmd="0",layer="emc"})"), p0["emc_hits"]);
  EXPECT_EQ(last(R"(flowclass_pmd_packets_total{pmd="0",layer="smc"})"), p0["smc_hits"]);
  EXPECT_EQ(last(R"(flowclass_pmd_packets_total{pmd="0",layer="megaflow"})") +
                last(R"(flowclass_pmd_packets_total{pmd="0",layer="cd"})"),
            p0["megaflow_hits"]);
  EXPECT_EQ(last(R"(flowclass_pmd_packets_total{pmd="0",layer="upcall_ok"})"), p0["upcalls"]);
  EXPECT_EQ(prom.Value(R"(sum(last_over_time(flowclass_pmd_packets_total{pmd="0"}[1m])))"),
            kFinitePackets);  // the layers add up to every packet
  EXPECT_EQ(last(R"(flowclass_queue_packets_total{pmd="0",port="1",queue="0",direction="rx"})"),
            kFinitePackets);
  auto port1 = OutputFields(out, "final port=1");
  auto port2 = OutputFields(out, "final port=2");
  EXPECT_EQ(last(R"(flowclass_port_device_packets_total{port="1",direction="rx"})"),
            port1["dev_ipackets"]);
  EXPECT_EQ(last(R"(flowclass_port_tx_packets_total{port="2"})"), port2["tx"]);
  EXPECT_EQ(port2["tx"], p0["tx"]);  // only PMD 0 sends to port 2

  // PMD 1: the last scrape trails the final counters by what it forwarded
  // after that scrape: at most one scrape interval plus the exporter's
  // shutdown (< 3 s) at the rate Prometheus measured (x2 for jitter).
  auto p1 = OutputFields(out, "final pmd=1");
  const double scraped = last(R"(flowclass_pmd_rx_packets_total{pmd="1"})");
  EXPECT_GE(scraped, before_stop);
  EXPECT_LE(scraped, p1["rx"]);
  EXPECT_LE(p1["rx"] - scraped, 2 * pps_pmd1 * (1 + 3) + 64) << "scraped " << scraped;
  EXPECT_GT(p1["rx"], 0u);

  prometheus.Signal(SIGTERM);
  EXPECT_EQ(prometheus.Wait(20), 0) << ReadFile(dir.File("prometheus.txt"));
}

}  // namespace
}  // namespace flowclass
