// End-to-end tests of the real flowclassd process on net_pcap vdevs: a pcap
// of known flows in, pcaps out, every packet accounted for and sent where a
// linear-scan reference classifier says.  Each daemon gets its own
// --file-prefix and is stopped by its PID.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "server/metrics/test_http.h"
#include "tests/common/packet_builder.h"
#include "tests/common/e2e_util.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using Frame = std::vector<uint8_t>;
// Frames by length, then bytes.  Not std::less<Frame>: at -O3 GCC 12 inlines
// its memcmp-based three-way compare into the multiset and warns
// -Wstringop-overread on a path it cannot rule out (a known false positive of
// GCC 12 and 13 on std::vector<unsigned char> ordering).
struct FrameLess {
  bool operator()(const Frame& a, const Frame& b) const {
    if (a.size() != b.size()) return a.size() < b.size();
    return !a.empty() && std::memcmp(a.data(), b.data(), a.size()) < 0;
  }
};
using FrameSet = std::multiset<Frame, FrameLess>;

const char* const kDaemon = FLOWCLASS_BINARY_DIR "/server/flowclassd";

// ---- the reference classifier and the native rule text ----
std::string Ip(uint32_t a) {
  return absl::StrCat(a >> 24, ".", (a >> 16) & 255, ".", (a >> 8) & 255, ".", a & 255);
}

struct TestRule {
  Rule rule;
  std::string text;  // native format line
};

TestRule MakeRule(uint64_t id, uint32_t prio, uint8_t proto, uint32_t dst, int dst_len,
                  PortRange tp_dst, Action a) {
  TestRule t;
  Rule& r = t.rule;
  r.id = id;
  r.priority = prio;
  r.match.SetExact(Field::kInPort, 1);
  r.match.SetExact(Field::kEthType, kEthTypeIpv4);
  std::string text = absl::StrCat("priority=", prio, ",in_port=1,");
  if (proto) {
    r.match.SetExact(Field::kNwProto, proto);
    text += proto == kIpProtoUdp ? "udp" : "tcp";
  } else {
    text += "ip";
  }
  const uint32_t m = Prefix32(dst_len);
  r.match.SetMasked(Field::kIpv4Dst, dst & m, m);
  absl::StrAppend(&text, ",nw_dst=", Ip(dst & m), "/", dst_len);
  if (!tp_dst.IsFull()) {
    r.match.tp_dst = tp_dst;
    absl::StrAppend(&text, ",tp_dst=", tp_dst.lo, "-", tp_dst.hi);
  }
  r.action = a;
  absl::StrAppend(&text, ",actions=", a.kind == Action::Kind::kDrop ? "drop"
                                                                    : absl::StrCat("output:", a.port));
  t.text = text;
  return t;
}

int Expected(const std::vector<TestRule>& rules, Flow f) {
  f.Set(Field::kInPort, 1);
  const Rule* best = nullptr;
  for (const TestRule& t : rules)
    if (t.rule.match.Matches(f) && (!best || RuleBeats(t.rule, *best))) best = &t.rule;
  if (!best) return 0;                                  // no match
  if (best->action.kind == Action::Kind::kDrop) return -1;  // rule drop
  return static_cast<int>(best->action.port);
}

std::vector<TestRule> SampleRules() {
  return {
      MakeRule(1, 500, kIpProtoUdp, 0x0a000000, 16, {1000, 2000}, Action::Output(2)),
      MakeRule(2, 400, kIpProtoUdp, 0x0a000000, 16, {}, Action::Output(3)),
      MakeRule(3, 300, kIpProtoTcp, 0x0a010000, 16, {443, 443}, Action::Output(2)),
      MakeRule(4, 250, 0, 0x0a010000, 16, {}, Action::Drop()),
      MakeRule(5, 200, kIpProtoTcp, 0x0a000000, 8, {0, 1023}, Action::Output(3)),
      MakeRule(6, 100, 0, 0x0a020000, 15, {}, Action::Output(2)),
      // 10.8.0.0/13 and everything outside 10/8: no match.
  };
}

std::vector<Flow> SampleFlows(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Flow> flows;
  const uint16_t ports[] = {53, 443, 1000, 1500, 2000, 2001, 8080, 80};
  for (int i = 0; i < n; ++i) {
    Flow f;
    f.Set(Field::kEthDst, 0x020000000002);
    f.Set(Field::kEthSrc, 0x020000000001);
    f.Set(Field::kEthType, kEthTypeIpv4);
    f.Set(Field::kIpv4Src, 0xc0a80000 | (rng() & 0xffff));
    const uint32_t dst = rng() % 8 == 0 ? 0x0b000001 + (rng() & 0xff)
                                        : 0x0a000000 | ((rng() % 12) << 16) | (rng() & 0xffff);
    f.Set(Field::kIpv4Dst, dst);
    f.Set(Field::kNwProto, rng() % 2 ? kIpProtoUdp : kIpProtoTcp);
    f.Set(Field::kNwTtl, 64);
    f.Set(Field::kTpSrc, 1024 + rng() % 60000);
    f.Set(Field::kTpDst, ports[rng() % 8]);
    flows.push_back(f);
  }
  return flows;
}

// ---- running the daemon ----

// Wait(), Signal() and Output() are ChildProcess's.
class Daemon : public EalDaemonProcess {
 public:
  // `name` distinguishes the stdout files of daemons running at once.
  Daemon(const TempDir& dir, const std::vector<std::string>& args, const std::string& name = "d")
      : EalDaemonProcess(kDaemon, args, PrefixFor(args), dir.File(name + ".stdout.txt")) {}

  // Sum of rx= over the last "stats" line of every PMD.
  uint64_t LastRx(int pmds) const {
    std::map<std::string, uint64_t> last;
    for (absl::string_view line : absl::StrSplit(Output(), '\n')) {
      line = LogMessageFrom(line, "stats pmd=");
      if (line.empty()) continue;
      std::string pmd;
      uint64_t rx = 0;
      for (absl::string_view kv : absl::StrSplit(line, ' ')) {
        if (absl::StartsWith(kv, "pmd=")) pmd = std::string(kv.substr(4));
        if (absl::StartsWith(kv, "rx=")) (void)absl::SimpleAtoi(kv.substr(3), &rx);
      }
      last[pmd] = rx;
    }
    if (static_cast<int>(last.size()) < pmds) return 0;
    uint64_t sum = 0;
    for (auto& [p, rx] : last) sum += rx;
    return sum;
  }
  // Until LastRx(pmds) reaches `packets`, for 30 s at the most.
  void WaitForRx(int pmds, uint64_t packets) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (LastRx(pmds) < packets && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

 private:
  // A unique EAL file prefix, unless the test passes its own (two daemons
  // sharing one: the second must fail).
  static std::string PrefixFor(const std::vector<std::string>& args) {
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--file-prefix") return args[i + 1];
    static int seq = 0;
    return absl::StrCat("fce2e_", getpid(), "_", seq++);
  }
};

std::string Config(const std::string& lcores, const std::string& lcore_map,
                   const std::string& port1_args, int rx_queues,
                   const std::string& port2_args, const std::string& port3_args,
                   const std::string& rules) {
  return absl::StrCat(R"(
eal:
  hugepages: false
  memory_mb: 256
  pci: false
  lcore_map: ")", lcore_map, R"("
  log_level: error
pmd:
  lcores: [)", lcores, R"(]
  idle_sleep_us: 50
mempool:
  mbufs: 16383
ports:
  - number: 1
    device: net_pcap0
    args: ")", port1_args, R"("
    rx_queues: )", rx_queues, R"(
  - number: 2
    device: net_pcap1
    args: ")", port2_args, R"("
    poll: false
  - number: 3
    device: net_pcap2
    args: ")", port3_args, R"("
    poll: false
rules:
  file: )", rules, R"(
stats:
  interval_ms: 100
)");
}

void WriteRules(const std::string& path, const std::vector<TestRule>& rules) {
  std::string text = "# flowclassd e2e sample rules\n";
  for (const TestRule& r : rules) text += r.text + "\n";
  WriteFile(path, text);
}

TEST(FlowclassdPcapTest, OnePmdEveryPacketWhereTheReferenceSays) {
  TempDir dir("flowclassd_e2e");
  const std::vector<TestRule> rules = SampleRules();
  WriteRules(dir.File("rules.txt"), rules);
  const std::vector<Flow> flows = SampleFlows(300, 1);
  constexpr int kPackets = 4000;
  std::vector<Frame> in;
  std::map<int, std::vector<Frame>> want;  // port -> frames in order
  uint64_t want_drops = 0, want_nomatch = 0;
  std::mt19937 rng(3);
  for (int i = 0; i < kPackets; ++i) {
    const Flow& f = flows[rng() % flows.size()];
    Frame fr = BuildFrameFromFlow(f, 60 + rng() % 200);
    const int e = Expected(rules, f);
    if (e > 0) want[e].push_back(fr);
    else if (e < 0) ++want_drops;
    else ++want_nomatch;
    in.push_back(std::move(fr));
  }
  ASSERT_GT(want[2].size() * want[3].size() * want_drops * want_nomatch, 0u);
  WritePcap(dir.File("in.pcap"), in);
  WriteFile(dir.File("d.yaml"),
            Config("1", "0@0,1@1", "rx_pcap=" + dir.File("in.pcap"), 1,
                   "tx_pcap=" + dir.File("out2.pcap"), "tx_pcap=" + dir.File("out3.pcap"),
                   dir.File("rules.txt")));

  Daemon d(dir, {"-c", dir.File("d.yaml")});
  d.WaitForRx(1, kPackets);
  d.Signal(SIGTERM);
  ASSERT_EQ(d.Wait(30), 0) << d.Output();
  const std::string out = d.Output();
  EXPECT_THAT(out, HasSubstr("flowclassd: stopping (SIGTERM)"));
  EXPECT_THAT(out, HasSubstr("flowclassd: stopped"));

  auto total = OutputFields(out, "final total");
  EXPECT_EQ(total["rx"], static_cast<uint64_t>(kPackets)) << out;
  EXPECT_EQ(total["rx"], total["tx"] + total["tx_dropped"] + total["rule_drops"] +
                             total["no_match"] + total["bad_port"]);
  EXPECT_EQ(total["rule_drops"], want_drops);
  EXPECT_EQ(total["no_match"], want_nomatch);
  EXPECT_EQ(total["gen"], 1u);
  // The PMD line's layers add up to what it received.
  auto pmd = OutputFields(out, "final pmd=0");
  for (const char* k : {"emc_hits", "smc_hits", "megaflow_hits", "upcalls", "upcalls_failed"})
    EXPECT_EQ(pmd.count(k), 1u) << k << " missing:\n" << out;  // before operator[] adds it
  EXPECT_EQ(pmd["emc_hits"] + pmd["smc_hits"] + pmd["megaflow_hits"] + pmd["upcalls"] +
                pmd["upcalls_failed"],
            pmd["rx"])
      << out;
  // Output pcaps: exactly the reference's frames, in order.
  const std::vector<Frame> out2 = ReadPcap(dir.File("out2.pcap"));
  const std::vector<Frame> out3 = ReadPcap(dir.File("out3.pcap"));
  EXPECT_EQ(out2.size(), want[2].size());
  EXPECT_EQ(out3.size(), want[3].size());
  EXPECT_TRUE(out2 == want[2]) << "port 2 frames differ from the reference";
  EXPECT_TRUE(out3 == want[3]) << "port 3 frames differ from the reference";
  EXPECT_EQ(OutputFields(out, "final port=2")["tx"], want[2].size());
  EXPECT_EQ(OutputFields(out, "final port=3")["dev_opackets"], want[3].size());
}

TEST(FlowclassdPcapTest, TwoPmdsTwoQueuesCountersAddUp) {
  TempDir dir("flowclassd_e2e");
  const std::vector<TestRule> rules = SampleRules();
  WriteRules(dir.File("rules.txt"), rules);
  const std::vector<Flow> flows = SampleFlows(200, 2);
  std::vector<Frame> q[2];
  std::map<int, FrameSet> want;
  uint64_t want_not_sent = 0;
  for (int i = 0; i < 3000; ++i) {
    const Flow& f = flows[static_cast<size_t>(i) % flows.size()];
    Frame fr = BuildFrameFromFlow(f, 64 + i % 7);
    const int e = Expected(rules, f);
    if (e > 0) want[e].insert(fr);
    else ++want_not_sent;
    q[i % 3 == 0 ? 1 : 0].push_back(std::move(fr));  // uneven split
  }
  WritePcap(dir.File("in0.pcap"), q[0]);
  WritePcap(dir.File("in1.pcap"), q[1]);
  // net_pcap: one rx queue per rx_pcap, one tx queue per tx_pcap (one per PMD).
  WriteFile(dir.File("d.yaml"),
            Config("1,2", "0@0,1@1,2@1",
                   "rx_pcap=" + dir.File("in0.pcap") + ",rx_pcap=" + dir.File("in1.pcap") +
                       ",tx_pcap=" + dir.File("out1a.pcap") + ",tx_pcap=" + dir.File("out1b.pcap"),
                   2,
                   "tx_pcap=" + dir.File("out2a.pcap") + ",tx_pcap=" + dir.File("out2b.pcap"),
                   "tx_pcap=" + dir.File("out3a.pcap") + ",tx_pcap=" + dir.File("out3b.pcap"),
                   dir.File("rules.txt")));
  Daemon d(dir, {"-c", dir.File("d.yaml")});
  d.WaitForRx(2, 3000);
  d.Signal(SIGINT);
  ASSERT_EQ(d.Wait(30), 0) << d.Output();
  const std::string out = d.Output();
  EXPECT_THAT(out, HasSubstr("stopping (SIGINT)"));
  EXPECT_THAT(out, HasSubstr("pmd 0 on lcore 1 polls 1:0"));
  EXPECT_THAT(out, HasSubstr("pmd 1 on lcore 2 polls 1:1"));

  auto p0 = OutputFields(out, "final pmd=0");
  auto p1 = OutputFields(out, "final pmd=1");
  auto total = OutputFields(out, "final total");
  EXPECT_EQ(p0["rx"], q[0].size());
  EXPECT_EQ(p1["rx"], q[1].size());
  EXPECT_EQ(total["rx"], p0["rx"] + p1["rx"]);
  EXPECT_EQ(total["tx"], p0["tx"] + p1["tx"]);
  EXPECT_EQ(total["rx"], total["tx"] + total["tx_dropped"] + total["rule_drops"] +
                             total["no_match"] + total["bad_port"]);
  EXPECT_EQ(total["rule_drops"] + total["no_match"], want_not_sent);
  for (int port : {2, 3}) {
    FrameSet got;
    for (const char* suffix : {"a", "b"})
      for (Frame& f : ReadPcap(dir.File(absl::StrCat("out", port, suffix, ".pcap"))))
        got.insert(std::move(f));
    EXPECT_EQ(got.size(), want[port].size()) << "port " << port;
    EXPECT_TRUE(got == want[port]) << "port " << port;
  }
}

TEST(FlowclassdPcapTest, CheckConfigAndExitCodes) {
  TempDir dir("flowclassd_e2e");
  WriteRules(dir.File("rules.txt"), SampleRules());
  WritePcap(dir.File("in.pcap"), {BuildFrameFromFlow(SampleFlows(1, 1)[0], 64)});
  const std::string good = Config("1", "0@0,1@1", "rx_pcap=" + dir.File("in.pcap"), 1,
                                  "tx_pcap=" + dir.File("o2.pcap"),
                                  "tx_pcap=" + dir.File("o3.pcap"), dir.File("rules.txt"));
  WriteFile(dir.File("good.yaml"), good);
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  } cases[] = {
      {{"--check-config", dir.File("good.yaml")}, 0, "6 rules ok"},
      {{"--check-config", dir.File("good.yaml"), "--set", "pmd.burst=99"}, 3,
       "pmd.burst: 99 is outside 1..32"},
      {{"--check-config", dir.File("missing.yaml")}, 3,
       "config file " + dir.File("missing.yaml") + ": cannot open: No such file"},
      // A directory opens, but is never taken for an empty file.
      {{"--check-config", dir.path()}, 3, "config file " + dir.path() + ": cannot read: Is a directory"},
      {{"--check-config", dir.File("good.yaml"), "--rules", dir.path()}, 7,
       dir.path() + ": cannot read: Is a directory"},
      // The default cache (256) needs 384 mbufs: DPDK would refuse the pool.
      {{"--check-config", dir.File("good.yaml"), "--set", "mempool.mbufs=300"}, 3,
       "mempool.cache: a cache of 256 mbufs needs a pool of at least 384"},
      {{"--check-config", dir.File("good.yaml"), "--rules", dir.File("none.txt")}, 7,
       "rules error"},
      // The rule table's cap is the config's: 6 rules do not fit in 5.
      {{"--check-config", dir.File("good.yaml"), "--set", "rules.max_rules=5"}, 7,
       "the table would hold 6 rules, limit 5"},
      {{"--check-config", dir.File("good.yaml"), "--set", "rules.max_rules=6"}, 0, "6 rules ok"},
      // Bad command lines (CLI11: server/daemon_flags.h): the message names the flag.
      {{"--bogus"}, 2, "flowclassd: The following argument was not expected: --bogus\n"},
      {{"--check-config", dir.File("good.yaml"), "--set", "novalue"}, 2,
       "flowclassd: --set: needs KEY=VALUE, got \"novalue\"\n"},
      {{"-c", dir.File("good.yaml"), "--log-level", "verbose"}, 2,
       "flowclassd: --log-level: verbose not in {debug,info,warn,error}\n"},
      {{}, 2, "no config file"},
      // EAL cannot use an lcore the machine does not have (127, the highest
      // id DPDK takes: a host with 128 CPUs skips this case below).
      {{"-c", dir.File("good.yaml"), "--set", "eal.lcore_map=", "--lcores", "127"}, 4,
       "EAL error"},
      // Nor any lcore id past DPDK's RTE_MAX_LCORE: refused with the config.
      {{"-c", dir.File("good.yaml"), "--set", "eal.lcore_map=", "--lcores", "200"}, 3,
       "pmd.lcores[0]: \"200\" is not an integer in 0..127"},
      {{"-c", dir.File("good.yaml"), "--set", "ports.1.device=net_bogus0"}, 5,
       "cannot probe device \"net_bogus0"},
      {{"-c", dir.File("good.yaml"), "--set", "mempool.mbufs=50000000"}, 6,
       "mempool error: mempool.mbufs"},
  };
  for (const Case& c : cases) {
    if (c.code == 4 && std::thread::hardware_concurrency() >= 128) continue;  // lcore 127 exists
    Daemon d(dir, c.args);
    EXPECT_EQ(d.Wait(30), c.code) << absl::StrJoin(c.args, " ") << "\n" << d.Output();
    EXPECT_THAT(d.Output(), HasSubstr(c.message)) << absl::StrJoin(c.args, " ");
  }
  // A second daemon with the same --file-prefix (a primary process already
  // holds it): EAL refuses, exit 4, the first one is unaffected.
  {
    const std::string prefix = absl::StrCat("fce2e_", getpid(), "_shared");
    Daemon first(dir, {"-c", dir.File("good.yaml"), "--duration-s", "2", "--file-prefix", prefix},
                 "first");
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (first.Output().find("flowclassd: running") == std::string::npos &&
           std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_THAT(first.Output(), HasSubstr("flowclassd: running"));
    Daemon second(dir, {"-c", dir.File("good.yaml"), "--file-prefix", prefix}, "second");
    EXPECT_EQ(second.Wait(30), 4) << second.Output();
    EXPECT_THAT(second.Output(), HasSubstr("EAL error"));
    EXPECT_EQ(first.Wait(30), 0) << first.Output();
  }
  // run.duration_s: a clean exit on its own, counters flushed.
  Daemon d(dir, {"-c", dir.File("good.yaml"), "--duration-s", "1"});
  EXPECT_EQ(d.Wait(30), 0) << d.Output();
  EXPECT_THAT(d.Output(), HasSubstr("stopping (duration reached)"));
  EXPECT_EQ(OutputFields(d.Output(), "final total")["rx"], 1u);
}

// Start-up that ends early must end cleanly.  SIGTERM while a large rule set
// loads (a pod deleted during start): exit 0, EAL cleaned up, not death by
// the signal.  A gRPC port that cannot be bound while /metrics is scraped:
// exit 3 (the exporter, whose HTTP threads read the dataplane, is stopped
// before the dataplane is freed; it was not, and the daemon crashed).
TEST(FlowclassdPcapTest, StartUpEndsCleanlyOnSignalAndOnGrpcErrorWhileScraped) {
  TempDir dir("flowclassd_e2e");
  std::string big;
  for (int i = 0; i < 300000; ++i)
    absl::StrAppend(&big, "id=", i + 1, ",priority=", 300000 - i, ",in_port=1,ip,nw_dst=10.",
                    (i >> 16) & 255, ".", (i >> 8) & 255, ".", i & 255, ",actions=output:2\n");
  WriteFile(dir.File("big.txt"), big);
  WritePcap(dir.File("in.pcap"), {BuildFrameFromFlow(SampleFlows(1, 1)[0], 64)});
  WriteFile(dir.File("d.yaml"),
            Config("1", "0@0,1@1", "rx_pcap=" + dir.File("in.pcap"), 1,
                   "tx_pcap=" + dir.File("o2.pcap"), "tx_pcap=" + dir.File("o3.pcap"),
                   dir.File("big.txt")));
  {
    Daemon d(dir, {"-c", dir.File("d.yaml")}, "sig");
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!d.CatchesSignal(SIGTERM) && d.Running() && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(d.CatchesSignal(SIGTERM)) << d.Output();
    d.Signal(SIGTERM);
    EXPECT_EQ(d.Wait(60), 0) << d.Output();
    EXPECT_THAT(d.Output(), HasSubstr("stopping (SIGTERM) before start"));
    EXPECT_THAT(d.Output(), ::testing::Not(HasSubstr("flowclassd: running")));
  }
  {
    const int busy = socket(AF_INET, SOCK_STREAM, 0);  // holds the gRPC port
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ASSERT_EQ(bind(busy, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(listen(busy, 1), 0);
    ASSERT_EQ(getsockname(busy, reinterpret_cast<sockaddr*>(&a), &len), 0);
    const int grpc_port = ntohs(a.sin_port);
    const int metrics_port = FreePort();
    ASSERT_GT(metrics_port, 0);
    // The daemon waits before its gRPC start while this file exists (a test
    // hook), so the exporter is scraped before the bind fails, however
    // loaded the machine: without it the window is a millisecond.
    const std::string hold = dir.File("hold-grpc");
    WriteFile(hold, "");
    setenv("FLOWCLASS_TESTING_HOLD_GRPC_FILE", hold.c_str(), 1);
    Daemon d(dir,
             {"-c", dir.File("d.yaml"), "--set", "metrics.enabled=true", "--set",
              absl::StrCat("metrics.address=127.0.0.1:", metrics_port), "--set",
              "grpc.address=127.0.0.1", "--set", absl::StrCat("grpc.port=", grpc_port),
              "--set", "grpc.plaintext=true"},
             "grpc");
    unsetenv("FLOWCLASS_TESTING_HOLD_GRPC_FILE");
    std::atomic<bool> done{false};
    std::atomic<int> scrapes{0};
    std::thread scraper([&] {  // scrape as fast as it answers, as Prometheus may
      while (!done.load()) {
        if (HttpGet("127.0.0.1", metrics_port, "/metrics", 200).status == 200) ++scrapes;
      }
    });
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (scrapes.load() < 3 && d.Running() && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_THAT(d.Output(), HasSubstr("testing: grpc start held"));
    std::filesystem::remove(hold);  // the bind, and its failure, while scraped
    const int code = d.Wait(60);
    done = true;
    scraper.join();
    close(busy);
    EXPECT_EQ(code, 3) << d.Output();
    EXPECT_THAT(d.Output(), HasSubstr("cannot listen"));
    EXPECT_GT(scrapes.load(), 0) << "the exporter was never scraped: the test proves nothing";
  }
}

}  // namespace
}  // namespace flowclass
