// dump-megaflows and stats-clear through a real flowclassd (two polled
// net_pcap ports, one PMD each, gRPC and /metrics on free 127.0.0.1 ports),
// driven by the flowclassctl binary and the C++ client library:
// 1. the megaflows the traffic installed are listed with their PMD, in_port,
//    rule id and packet counts (summing, per rule, to the packets sent to
//    it and to GetStats' rule hits); --in-port, --rule-id, --pmd, --match
//    and --limit select what they say;
// 2. stats-clear zeroes what GetStats (and `flowclassctl stats`) report while
//    the rules, the generation and the megaflows stay, and /metrics stays
//    monotonic.
// Each net_pcap rx file is read once at start (no infinite_rx), and
// megaflows never expire here (pipeline.megaflow_max_idle_ms: 0), so the
// counts are exact.  Bounded: every wait has a deadline (~5 s).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/rpc/flowclass_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/test_http.h"
#include "tests/common/e2e_util.h"
#include "tests/common/packet_builder.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

const char* const kDaemon = FLOWCLASS_BINARY_DIR "/server/flowclassd";
const char* const kCtl = FLOWCLASS_BINARY_DIR "/client/flowclassctl";

// Packets per kind of flow (see the frames below).
constexpr int kRule1Packets = 30;   // port 1, udp to 10.1.0.0/16: rule 1, output:2
constexpr int kNoMatchPackets = 5;  // port 1, udp to 192.168.9.9: no rule
constexpr int kRule2Packets = 20;   // port 3, tcp: rule 2, drop
constexpr int kAllPackets = kRule1Packets + kNoMatchPackets + kRule2Packets;

CmdResult Ctl(const std::string& args) {
  return RunCommand(absl::StrCat("timeout 60 ", kCtl, " ", args, " 2>&1"));
}

std::vector<std::string> Lines(const std::string& out) {
  std::vector<std::string> v;
  for (absl::string_view l : absl::StrSplit(out, '\n', absl::SkipEmpty())) v.emplace_back(l);
  return v;
}

// The value of the first /metrics sample `name` whose line has `label`.
std::optional<double> Sample(const std::string& text, const std::string& name,
                             const std::string& label) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, name) || !absl::StrContains(line, label)) continue;
    double v;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) return v;
  }
  return std::nullopt;
}

std::string Config(const TempDir& dir, int grpc_port, int metrics_port) {
  auto two_tx = [&](const std::string& p) {  // one tx queue per PMD
    return absl::StrCat("tx_pcap=", dir.File(p + "a.pcap"), ",tx_pcap=", dir.File(p + "b.pcap"));
  };
  return absl::StrCat(R"(
eal: {hugepages: false, memory_mb: 256, pci: false, lcore_map: "0@0,1@1,2@1", log_level: error}
pmd: {lcores: [1, 2], idle_sleep_us: 200}
mempool: {mbufs: 8191}
pipeline: {megaflow_max_idle_ms: 0}
ports:
  - {number: 1, device: net_pcap0, args: "rx_pcap=)", dir.File("in1.pcap"), ",", two_tx("o1"), R"("}
  - {number: 2, device: net_pcap1, args: ")", two_tx("o2"), R"(", poll: false}
  - {number: 3, device: net_pcap2, args: "rx_pcap=)", dir.File("in3.pcap"), ",", two_tx("o3"), R"("}
stats: {interval_ms: 0, final: false}
metrics: {enabled: true, address: "127.0.0.1:)", metrics_port, R"("}
grpc: {address: 127.0.0.1, port: )", grpc_port, R"(, plaintext: true}
)");
}

// Sum of `packets` of the megaflows, by rule id.
std::map<uint64_t, uint64_t> PacketsByRule(const std::vector<v1::MegaflowEntry>& mfs) {
  std::map<uint64_t, uint64_t> m;
  for (const v1::MegaflowEntry& e : mfs) m[e.rule_id()] += e.packets();
  return m;
}

TEST(FlowclassdMegaflowsTest, DumpMegaflowsAndStatsClear) {
  TempDir dir("flowclass_megaflows");
  std::vector<std::vector<uint8_t>> port1, port3;
  for (int i = 0; i < kRule1Packets; ++i)  // three hosts of 10.1.0.0/16
    port1.push_back(PacketBuilder()
                        .Eth(0x020000000001, 0x020000000002)
                        .Ipv4(0xc0a80001, 0x0a010001 + i % 3)
                        .Udp(1000, 53)
                        .PadTo(64)
                        .Build());
  for (int i = 0; i < kNoMatchPackets; ++i)
    port1.push_back(PacketBuilder()
                        .Eth(0x020000000001, 0x020000000002)
                        .Ipv4(0xc0a80001, 0xc0a80909)
                        .Udp(1000, 53)
                        .PadTo(64)
                        .Build());
  for (int i = 0; i < kRule2Packets; ++i)
    port3.push_back(PacketBuilder()
                        .Eth(0x020000000003, 0x020000000004)
                        .Ipv4(0x0a030001, 0x0a030002)
                        .Tcp(2000, 80)
                        .PadTo(64)
                        .Build());
  WritePcap(dir.File("in1.pcap"), port1);
  WritePcap(dir.File("in3.pcap"), port3);
  WriteFile(dir.File("rules.txt"),
            "id=1,priority=10,in_port=1,udp,nw_dst=10.1.0.0/16,actions=output:2\n"
            "id=2,priority=10,in_port=3,tcp,actions=drop\n"
            "id=3,priority=5,in_port=3,udp,actions=output:2\n");
  const int grpc_port = FreePort(), metrics_port = FreePort();
  WriteFile(dir.File("d.yaml"), Config(dir, grpc_port, metrics_port));
  EalDaemonProcess d(kDaemon, {"-c", dir.File("d.yaml"), "--rules", dir.File("rules.txt")},
                     absl::StrCat("fcmega_", getpid()), dir.File("daemon.txt"));
  const std::string target = absl::StrCat("127.0.0.1:", grpc_port);
  const std::string conn = absl::StrCat("--plaintext --server ", target);
  ClientOptions o;
  o.target = target;
  o.plaintext = true;
  o.timeout = std::chrono::milliseconds(10000);
  std::unique_ptr<FlowclassClient> client;
  // Every packet received (the pcaps are read once, at start).
  absl::StatusOr<v1::GetStatsResponse> st;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < end && d.Running();
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    if (!absl::StrContains(d.Output(), "flowclassd: grpc listening on ")) continue;
    if (!client) {
      auto c = FlowclassClient::Connect(o);
      ASSERT_TRUE(c.ok()) << c.status();
      client = *std::move(c);
    }
    st = client->GetStats(false, true);
    if (st.ok() && st->total().packets() == kAllPackets) break;
  }
  ASSERT_NE(client, nullptr) << d.Output();
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(st->total().packets(), static_cast<uint64_t>(kAllPackets)) << d.Output();

  // ---- 1. the dump ----
  absl::StatusOr<std::vector<v1::MegaflowEntry>> all = client->DumpMegaflows();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_FALSE(all->empty());
  EXPECT_EQ(all->size(), st->total().megaflows()) << "every megaflow of every PMD";
  std::map<uint64_t, uint64_t> by_rule = PacketsByRule(*all);
  EXPECT_EQ(by_rule[1], static_cast<uint64_t>(kRule1Packets));
  EXPECT_EQ(by_rule[2], static_cast<uint64_t>(kRule2Packets));
  EXPECT_EQ(by_rule[0], static_cast<uint64_t>(kNoMatchPackets));
  EXPECT_EQ(by_rule.count(3), 0u) << "no packet matched rule 3";
  std::map<uint64_t, uint64_t> hits;
  for (const v1::RuleHits& h : st->rule_hits()) hits[h.id()] = h.hits();
  EXPECT_EQ(hits[1], by_rule[1]);
  EXPECT_EQ(hits[2], by_rule[2]);
  for (const v1::MegaflowEntry& e : *all) {
    SCOPED_TRACE(FormatMegaflow(e));
    // Port 1's queue is PMD 0's, port 3's PMD 1's (round-robin by port).
    EXPECT_EQ(e.pmd(), e.in_port() == 1 ? 0u : 1u);
    EXPECT_THAT(e.match(), HasSubstr(absl::StrCat("in_port=", e.in_port(), ",")));
    EXPECT_EQ(e.rule_id() == 0 || e.rule_id() == 2, e.action().has_drop());
    if (e.rule_id() == 1) {
      EXPECT_EQ(e.action().output_port(), 2u);
    }
    EXPECT_GT(e.packets(), 0u);
  }

  // The same through flowclassctl: one line per megaflow.
  CmdResult r = Ctl(absl::StrCat("dump-megaflows ", conn));
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<std::string> lines = Lines(r.out);
  EXPECT_EQ(lines.size(), all->size()) << r.out;
  for (const v1::MegaflowEntry& e : *all)
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("pmd=", e.pmd(), " ", e.match(),
                                              ", packets:", e.packets(), ", used:")));
  EXPECT_THAT(r.out, HasSubstr(", rule:1, actions:output:2\n"));
  EXPECT_THAT(r.out, HasSubstr(", rule:2, actions:drop\n"));
  EXPECT_THAT(r.out, HasSubstr(", rule:none, actions:drop\n"));

  // Filters: each keeps exactly the megaflows it names.
  auto count_if = [&](auto pred) {
    size_t n = 0;
    for (const v1::MegaflowEntry& e : *all) n += pred(e) ? 1 : 0;
    return n;
  };
  struct Case {
    std::string flags;
    size_t want;
    std::string each;  // every line contains it
  };
  const std::vector<Case> cases = {
      {"--in-port 3", count_if([](const auto& e) { return e.in_port() == 3; }), " in_port=3,"},
      {"--in-port 1", count_if([](const auto& e) { return e.in_port() == 1; }), " in_port=1,"},
      {"--rule-id 1", count_if([](const auto& e) { return e.rule_id() == 1; }), ", rule:1,"},
      {"--rule-id 0", count_if([](const auto& e) { return e.rule_id() == 0; }), ", rule:none,"},
      {"--rule-id 3", 0, ""},
      {"--pmd 1", count_if([](const auto& e) { return e.pmd() == 1; }), "pmd=1 "},
      {"--match in_port=3,", count_if([](const auto& e) { return e.in_port() == 3; }), "in_port=3,"},
      {"--match no-such-text", 0, ""},
      {"--in-port 1 --rule-id 2", 0, ""},
      {"--limit 1", 1, ""},
      {"--limit 0", all->size(), ""},
      {"--in-port 1 --limit 1", 1, " in_port=1,"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    r = Ctl(absl::StrCat("dump-megaflows ", conn, " ", c.flags));
    ASSERT_EQ(r.code, 0) << r.out;
    lines = Lines(r.out);
    EXPECT_EQ(lines.size(), c.want) << r.out;
    for (const std::string& l : lines) EXPECT_THAT(l, HasSubstr(c.each));
  }
  EXPECT_GE(count_if([](const auto& e) { return e.in_port() == 1; }), 2u)
      << "rule 1 and no-match megaflows on port 1";
  r = Ctl(absl::StrCat("dump-megaflows ", conn, " --in-port x"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--in-port needs a whole number"));

  // ---- 2. stats-clear ----
  const std::string metrics_before = HttpGet("127.0.0.1", metrics_port, "/metrics").body;
  EXPECT_EQ(Sample(metrics_before, "flowclass_pmd_rx_packets_total", "pmd=\"0\""),
            kRule1Packets + kNoMatchPackets);
  r = Ctl(absl::StrCat("stats-clear ", conn));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, absl::StrCat("stats-clear: cleared at generation ", st->generation(), "\n"));
  absl::StatusOr<v1::GetStatsResponse> cleared = client->GetStats(false, true);
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(cleared->generation(), st->generation()) << "the rule set is unchanged";
  EXPECT_EQ(cleared->rules(), 3u);
  EXPECT_EQ(cleared->total().megaflows(), st->total().megaflows()) << "a gauge: not cleared";
  EXPECT_EQ(cleared->rule_hits_size(), 0);
  ASSERT_EQ(cleared->pmds_size(), 2);
  for (const v1::PmdStats* p : {&cleared->total(), &cleared->pmds(0), &cleared->pmds(1)}) {
    SCOPED_TRACE(p->pmd());
    EXPECT_EQ(p->packets(), 0u);
    EXPECT_EQ(p->emc_hits(), 0u);
    EXPECT_EQ(p->upcall_ok(), 0u);
    EXPECT_EQ(p->no_match(), 0u);
    EXPECT_EQ(p->tx_packets(), 0u);
    EXPECT_EQ(p->rule_drops(), 0u);
    EXPECT_EQ(p->generation(), st->generation());
  }
  for (const v1::PortStats& p : cleared->ports()) EXPECT_EQ(p.tx_packets(), 0u) << p.port();
  ASSERT_EQ(client->ListRules()->size(), 3u);
  r = Ctl(absl::StrCat("stats ", conn));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("packets received: 0\n"));
  // The dump is not cleared (the megaflows' own counts), nor are /metrics.
  absl::StatusOr<std::vector<v1::MegaflowEntry>> again = client->DumpMegaflows();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(PacketsByRule(*again), by_rule);
  const std::string metrics_after = HttpGet("127.0.0.1", metrics_port, "/metrics").body;
  EXPECT_EQ(Sample(metrics_after, "flowclass_pmd_rx_packets_total", "pmd=\"0\""),
            kRule1Packets + kNoMatchPackets);
  EXPECT_EQ(Sample(metrics_after, "flowclass_pmd_rx_packets_total", "pmd=\"1\""),
            kRule2Packets);

  d.Signal(SIGTERM);
  EXPECT_EQ(d.Wait(30), 0) << d.Output();
}

}  // namespace
}  // namespace flowclass
