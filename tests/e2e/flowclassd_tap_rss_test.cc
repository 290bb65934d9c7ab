// End-to-end test of RSS with two PMDs: the real flowclassd on a net_tap
// port with two rx queues (RSS configured on it), fed by the kernel from a
// network namespace of the test's own, so the traffic never leaves this
// machine.  The kernel's multi-queue tap picks the rx queue of a packet from
// its flow hash, which is what RSS does on a NIC: every flow stays on one
// queue, hence on one PMD.  The test checks that
//   * flowclassd reports RSS on for the port and one queue per PMD,
//   * both PMDs receive traffic, and every flow was handled by one PMD only
//     (each PMD transmits on its own tx queue: one output pcap per PMD),
//   * the counters add up across PMDs: per-PMD rx sum to the total, which is
//     what the device received, which is what the kernel sent into the tap,
//     and rx = tx + drops.
// flowclassd itself runs inside the namespace, so the tap never appears
// outside it.  It needs root, /dev/net/tun and `ip netns`; without them it is
// skipped with the reason (the pcap tests cover two PMDs on two queues
// without RSS).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using Frame = std::vector<uint8_t>;

const char* const kDaemon = FLOWCLASS_BINARY_DIR "/server/flowclassd";
constexpr int kFlows = 64;           // UDP source ports 20000..20063
constexpr int kPacketsPerFlow = 40;  // sent in rounds: one per flow per round
constexpr uint16_t kDstPort = 9000;

// The UDP source port of an untagged IPv4/UDP frame to kDstPort, or -1.
int TestFlowOf(const Frame& f) {
  if (f.size() < 14 + 20 + 8 || f[12] != 0x08 || f[13] != 0x00 || f[23] != 17) return -1;
  const size_t l4 = 14 + static_cast<size_t>(f[14] & 0x0f) * 4;
  if (f.size() < l4 + 8) return -1;
  const int sport = f[l4] << 8 | f[l4 + 1];
  const int dport = f[l4 + 2] << 8 | f[l4 + 3];
  return dport == kDstPort ? sport : -1;
}

// A network namespace, deleted (with the interfaces in it) at destruction.
class NetNs {
 public:
  explicit NetNs(std::string name) : name_(std::move(name)) {
    RunCommand("ip netns del " + name_ + " >/dev/null 2>&1");  // a killed earlier run's
    ok_ = RunCommand("ip netns add " + name_ + " 2>&1").code == 0;
  }
  const std::string& name() const { return name_; }
  ~NetNs() {
    if (ok_) RunCommand("ip netns del " + name_ + " 2>&1");
  }
  bool ok() const { return ok_; }
  CmdResult Exec(const std::string& cmd) const {
    return RunCommand("ip netns exec " + name_ + " " + cmd + " 2>&1");
  }

 private:
  std::string name_;
  bool ok_ = false;
};

uint64_t KernelCounter(const NetNs& ns, const std::string& dev, const std::string& name) {
  uint64_t v = 0;
  const CmdResult r = ns.Exec("cat /sys/class/net/" + dev + "/statistics/" + name);
  EXPECT_TRUE(r.code == 0 && absl::SimpleAtoi(absl::StripAsciiWhitespace(r.out), &v))
      << name << ": " << r.out;
  return v;
}

TEST(FlowclassdTapRssTest, TwoPmdsRssEveryFlowOnOnePmdCountersAddUp) {
  if (geteuid() != 0 || access("/dev/net/tun", R_OK | W_OK) != 0)
    GTEST_SKIP() << "needs root and /dev/net/tun for a net_tap port";
  const std::string tag = absl::StrCat("fcrss", getpid() % 100000);  // <= 15 chars
  NetNs ns(tag);
  if (!ns.ok()) GTEST_SKIP() << "cannot create a network namespace (ip netns add)";

  TempDir dir("flowclassd_rss");
  WriteFile(dir.File("rules.txt"),
            "priority=10,in_port=1,ip,nw_proto=17,nw_dst=10.199.0.2,tp_dst=9000,"
            "actions=output:2\n"
            "priority=1,in_port=1,actions=drop\n");
  // Port 2: one tx queue (and output pcap) per PMD, so the pcaps say which
  // PMD handled a frame.
  WriteFile(dir.File("d.yaml"), absl::StrCat(R"(
eal:
  hugepages: false
  memory_mb: 256
  pci: false
  lcore_map: "0@0,1@1,2@1"
  log_level: error
pmd:
  lcores: [1, 2]
  idle_sleep_us: 0
mempool:
  mbufs: 8191
ports:
  - number: 1
    device: net_tap0
    args: "iface=)", tag, R"("
    rx_queues: 2
  - number: 2
    device: net_pcap0
    args: "tx_pcap=)", dir.File("pmd0.pcap"), ",tx_pcap=", dir.File("pmd1.pcap"), R"("
    poll: false
rules:
  file: )", dir.File("rules.txt"), R"(
stats:
  interval_ms: 100
)"));
  // No IPv6 in the namespace, set before the tap exists (interfaces take the
  // "default" settings): no neighbour discovery or MLD in the tap, so the
  // kernel sends it exactly the test's datagrams.  A kernel without IPv6 has
  // nothing to switch off.
  if (access("/proc/sys/net/ipv6", F_OK) == 0) {
    const CmdResult r = ns.Exec(
        "sh -c 'echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 && "
        "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6'");
    ASSERT_EQ(r.code, 0) << r.out;
  }
  // flowclassd runs inside the namespace (`ip netns exec` execs it: the PID
  // is the daemon's), so the tap is created there and never seen outside.
  const CmdResult ip = RunCommand("command -v ip");
  ASSERT_EQ(ip.code, 0);
  EalDaemonProcess d(std::string(absl::StripAsciiWhitespace(ip.out)),
                     {"netns", "exec", ns.name(), kDaemon, "-c", dir.File("d.yaml")},
                     absl::StrCat("fcrss_", getpid()), dir.File("d.stdout.txt"));
  // The tap interface exists once the daemon runs.
  bool up = false;
  for (int i = 0; i < 300 && !up && d.Running(); ++i) {
    up = absl::StrContains(d.Output(), "flowclassd: running") &&
         ns.Exec("ip link show " + tag).code == 0;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!up && !d.Running() && absl::StrContains(d.Output(), "flowclassd: port error:") &&
      absl::StrContains(d.Output(), "net_tap0"))
    GTEST_SKIP() << "this machine cannot create the tap device:\n" << d.Output();
  ASSERT_TRUE(up) << d.Output();
  const std::string startup = d.Output();
  EXPECT_THAT(startup, HasSubstr("flowclassd: pmd 0 on lcore 1 polls 1:0"));
  EXPECT_THAT(startup, HasSubstr("flowclassd: pmd 1 on lcore 2 polls 1:1"));
  EXPECT_THAT(startup, HasSubstr("flowclassd: port 1 (net_tap0): 2 rx queues, RSS on"));

  // An address and a static neighbour: the datagrams go straight out.
  for (const std::string& cmd :
       {absl::StrCat("ip addr add 10.199.0.1/24 dev ", tag),
        absl::StrCat("ip link set ", tag, " up"),
        absl::StrCat("ip neigh replace 10.199.0.2 lladdr 02:00:00:00:00:02 dev ", tag)}) {
    const CmdResult r = ns.Exec(cmd);
    ASSERT_EQ(r.code, 0) << cmd << ": " << r.out;
  }
  const CmdResult sent = ns.Exec(absl::StrCat(
      "python3 -c \"import socket, time\n"
      "socks = []\n"
      "for i in range(", kFlows, "):\n"
      "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "    s.bind(('10.199.0.1', 20000 + i))\n"
      "    socks.append(s)\n"
      "for r in range(", kPacketsPerFlow, "):\n"
      "    for s in socks:\n"
      "        s.sendto(b'flowclass rss test', ('10.199.0.2', ", kDstPort, "))\n"
      "    time.sleep(0.002)\n"
      "print('sent')\""));
  ASSERT_EQ(sent.code, 0) << sent.out;
  // The tap counts a frame as sent when the PMD reads it: wait until the
  // kernel's counters cover every datagram, the PMDs' stats lines have
  // counted as many, and nothing has moved for 300 ms.
  auto last_rx = [&] {
    std::map<std::string, uint64_t> last;
    for (absl::string_view line : absl::StrSplit(d.Output(), '\n')) {
      line = LogMessageFrom(line, "stats pmd=");
      if (line.empty()) continue;
      std::map<std::string, uint64_t> f = OutputFields(std::string(line), "stats pmd=");
      last[std::string(line.substr(0, line.find(' ', 10)))] = f["rx"];
    }
    uint64_t sum = 0;
    for (const auto& [pmd, rx] : last) sum += rx;
    return sum;
  };
  uint64_t kernel_tx = 0, kernel_dropped = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto stable_since = std::chrono::steady_clock::now();
  uint64_t seen = ~uint64_t{0};
  while (std::chrono::steady_clock::now() < deadline) {
    kernel_tx = KernelCounter(ns, tag, "tx_packets");
    kernel_dropped = KernelCounter(ns, tag, "tx_dropped");
    const uint64_t rx = last_rx();
    const uint64_t now = kernel_tx + kernel_dropped + rx;
    if (now != seen) {
      seen = now;
      stable_since = std::chrono::steady_clock::now();
    }
    if (kernel_tx + kernel_dropped >= static_cast<uint64_t>(kFlows * kPacketsPerFlow) &&
        rx == kernel_tx &&
        std::chrono::steady_clock::now() - stable_since >= std::chrono::milliseconds(300))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(kernel_tx + kernel_dropped, static_cast<uint64_t>(kFlows * kPacketsPerFlow));
  d.Signal(SIGTERM);
  ASSERT_EQ(d.Wait(30), 0) << d.Output();
  const std::string out = d.Output();

  auto p0 = OutputFields(out, "final pmd=0");
  auto p1 = OutputFields(out, "final pmd=1");
  auto total = OutputFields(out, "final total");
  auto port1 = OutputFields(out, "final port=1");
  // RSS spread the flows: both PMDs got some (64 flows all hashed to one
  // queue would be a 2^-63 event).
  EXPECT_GT(p0["rx"], 0u) << out;
  EXPECT_GT(p1["rx"], 0u) << out;
  // Counters add up across PMDs, and with the device and the kernel.
  EXPECT_EQ(total["rx"], p0["rx"] + p1["rx"]);
  EXPECT_EQ(total["tx"], p0["tx"] + p1["tx"]);
  EXPECT_EQ(total["rule_drops"], p0["rule_drops"] + p1["rule_drops"]);
  EXPECT_EQ(total["rx"], total["tx"] + total["tx_dropped"] + total["rule_drops"] +
                             total["no_match"] + total["bad_port"]);
  EXPECT_EQ(port1["dev_ipackets"], total["rx"]) << out;
  EXPECT_EQ(total["rx"], kernel_tx) << "the kernel sent " << kernel_tx << " frames into the tap";
  EXPECT_EQ(total["no_match"], 0u);

  // Every flow on one PMD only; every datagram the kernel sent came out.
  std::map<int, std::set<int>> pmds_of_flow;
  std::map<int, int> frames_of_flow;
  uint64_t test_frames = 0;
  for (int pmd : {0, 1}) {
    uint64_t n = 0;
    for (const Frame& f : ReadPcap(dir.File(absl::StrCat("pmd", pmd, ".pcap")))) {
      ++n;
      const int flow = TestFlowOf(f);
      ASSERT_GE(flow, 0) << "a forwarded frame is not one of the test's flows";
      pmds_of_flow[flow].insert(pmd);
      ++frames_of_flow[flow];
      ++test_frames;
    }
    EXPECT_EQ(n, (pmd == 0 ? p0 : p1)["tx"]) << "pmd " << pmd;
  }
  int flows_on[2] = {0, 0};
  for (const auto& [flow, pmds] : pmds_of_flow) ++flows_on[*pmds.begin()];
  std::printf("rss: kernel sent %llu frames (%llu dropped); pmd 0: rx %llu, %d flows; "
              "pmd 1: rx %llu, %d flows\n",
              static_cast<unsigned long long>(kernel_tx),
              static_cast<unsigned long long>(kernel_dropped),
              static_cast<unsigned long long>(p0["rx"]), flows_on[0],
              static_cast<unsigned long long>(p1["rx"]), flows_on[1]);
  EXPECT_EQ(pmds_of_flow.size(), static_cast<size_t>(kFlows));
  for (const auto& [flow, pmds] : pmds_of_flow)
    EXPECT_EQ(pmds.size(), 1u) << "flow from port " << flow << " went through both PMDs";
  EXPECT_EQ(test_frames + kernel_dropped, static_cast<uint64_t>(kFlows * kPacketsPerFlow));
  if (kernel_dropped == 0) {
    for (const auto& [flow, n] : frames_of_flow)
      EXPECT_EQ(n, kPacketsPerFlow) << "flow from port " << flow;
  }
}

}  // namespace
}  // namespace flowclass
