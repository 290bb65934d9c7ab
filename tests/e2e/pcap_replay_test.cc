// `flowclassctl replay RULES --pcap FILE`: the frames of a capture written
// here with libpcap go through the PMD's parser and both pipelines; the
// per-rule hits, the counts of what was read, the refusals (not Ethernet,
// no frame, no file) and the real binary's output and exit codes.
#include <pcap/pcap.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "client/replay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/e2e_util.h"
#include "tests/common/packet_builder.h"

namespace flowclass {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

const std::string kCtl = std::string(FLOWCLASS_BINARY_DIR) + "/client/flowclassctl";

constexpr char kRules[] =
    "id=1,priority=300,udp,tp_dst=53,actions=output:2\n"
    "id=2,priority=200,tcp,tp_dst=443,actions=drop\n"
    "id=3,priority=100,in_port=7,ip,actions=output:1\n";

struct Frame {
  std::vector<uint8_t> bytes;
  uint32_t caplen;  // what the capture keeps of it
};

// Writes `frames` as a pcap of link type `link`.
void WritePcap(const std::string& path, const std::vector<Frame>& frames,
               int link = DLT_EN10MB) {
  pcap_t* dead = pcap_open_dead(link, 65535);
  ASSERT_NE(dead, nullptr);
  pcap_dumper_t* d = pcap_dump_open(dead, path.c_str());
  ASSERT_NE(d, nullptr) << pcap_geterr(dead);
  for (const Frame& f : frames) {
    pcap_pkthdr h{};
    h.caplen = f.caplen;
    h.len = static_cast<uint32_t>(f.bytes.size());
    pcap_dump(reinterpret_cast<u_char*>(d), &h, f.bytes.data());
  }
  pcap_dump_close(d);
  pcap_close(dead);
}

Frame Whole(std::vector<uint8_t> b) {
  const uint32_t n = static_cast<uint32_t>(b.size());
  return {std::move(b), n};
}

// 7 DNS frames (rule 1), 5 HTTPS frames (rule 2), 3 SSH frames (rule 3 on
// in_port 7, else none), 1 frame captured short inside its Ethernet header
// (no eth_type: no rule anywhere).
std::vector<Frame> Traffic() {
  auto ip = [](uint32_t src, uint32_t dst) {
    PacketBuilder b;
    b.Eth(0x020000000001, 0x020000000002).Ipv4(src, dst);
    return b;
  };
  std::vector<Frame> f;
  for (uint16_t i = 0; i < 7; ++i)
    f.push_back(Whole(ip(0x0a000005, 0x0a000101 + i).Udp(40000 + i, 53).PadTo(64).Build()));
  for (uint16_t i = 0; i < 5; ++i)
    f.push_back(
        Whole(ip(0x0a000006, 0x0a000201).Tcp(50000 + i, 443, kTcpSyn).PadTo(64).Build()));
  for (uint16_t i = 0; i < 3; ++i)
    f.push_back(Whole(ip(0x0a090909, 0x0a000301).Tcp(1000 + i, 22, kTcpAck).PadTo(64).Build()));
  Frame cut = Whole(ip(0x0a000007, 0x0a000401).Udp(9, 53).PadTo(64).Build());
  cut.caplen = 10;
  f.push_back(std::move(cut));
  return f;
}

class PcapReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.File("rules.txt")) << kRules;
    WritePcap(dir_.File("t.pcap"), Traffic());
    opts_.rules_path = dir_.File("rules.txt");
    opts_.pcap_path = dir_.File("t.pcap");
    opts_.top_rules = 10;
  }
  TempDir dir_{"pcap_replay"};
  ReplayOptions opts_;
};

TEST_F(PcapReplay, EveryFrameParsedAndCountedPerRule) {
  opts_.repeat = 3;
  opts_.pipeline.emc_config.insert_inv_prob = 1;  // later passes hit the EMC
  std::ostringstream out;
  absl::StatusOr<ReplayResult> r = RunReplay(opts_, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mismatches, 0u) << out.str();
  EXPECT_EQ(r->packets, 16u * 3);
  EXPECT_THAT(r->rule_hits, ElementsAre(Pair(1u, 21u), Pair(2u, 15u), Pair(0u, 12u)))
      << "most hits first";
  EXPECT_THAT(out.str(), HasSubstr("rules: 3  pcap frames: 16 (in_port 0; 1 captured short, "
                                   "1 truncated or malformed)  passes: 3\n"));
  EXPECT_THAT(out.str(), HasSubstr("rule hits (all passes; top 3 of 3):\n  rule 1: 21\n"
                                   "  rule 2: 15\n  no rule: 12\n"));
  EXPECT_GT(r->stats.emc_hits, 0u);
}

TEST_F(PcapReplay, InPortReachesTheRules) {
  opts_.pcap_in_port = 7;
  std::ostringstream out;
  absl::StatusOr<ReplayResult> r = RunReplay(opts_, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mismatches, 0u) << out.str();
  EXPECT_THAT(r->rule_hits, ElementsAre(Pair(1u, 7u), Pair(2u, 5u), Pair(3u, 3u), Pair(0u, 1u)));
}

TEST_F(PcapReplay, CachesOffGiveTheSameHits) {
  opts_.pipeline.megaflows = false;
  std::ostringstream out;
  absl::StatusOr<ReplayResult> r = RunReplay(opts_, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stats.upcall_ok, 16u);
  EXPECT_THAT(r->rule_hits, ElementsAre(Pair(1u, 7u), Pair(2u, 5u), Pair(0u, 4u)));
}

#ifdef FLOWCLASS_TEST_ACL
TEST_F(PcapReplay, AclPipelineAgreesWithTheRuleTable) {
  opts_.kind = PipelineKind::kAcl;
  opts_.pcap_in_port = 7;
  std::ostringstream out;
  absl::StatusOr<ReplayResult> r = RunReplay(opts_, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mismatches, 0u) << out.str();
  EXPECT_THAT(r->rule_hits, ElementsAre(Pair(1u, 7u), Pair(2u, 5u), Pair(3u, 3u), Pair(0u, 1u)));
  EXPECT_THAT(out.str(), HasSubstr("pcap frames: 16 (in_port 7;"));
}
#endif

TEST_F(PcapReplay, RefusesWhatIsNotAnEthernetCapture) {
  WritePcap(dir_.File("raw.pcap"), {Whole(std::vector<uint8_t>(40, 0x45))}, DLT_RAW);
  opts_.pcap_path = dir_.File("raw.pcap");
  std::ostringstream out;
  absl::StatusOr<ReplayResult> r = RunReplay(opts_, out);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("raw.pcap: link type"));
  EXPECT_THAT(r.status().message(), HasSubstr("not Ethernet"));

  WritePcap(dir_.File("empty.pcap"), {});
  opts_.pcap_path = dir_.File("empty.pcap");
  r = RunReplay(opts_, out);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("empty.pcap: the capture holds no frame"));

  opts_.pcap_path = dir_.File("missing.pcap");
  r = RunReplay(opts_, out);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--pcap " + dir_.File("missing.pcap") + ": "));
}

CmdResult RunCmd(const std::string& cmd) { return RunCommand(cmd + " 2>&1"); }

TEST_F(PcapReplay, BinaryPrintsTopRulesAndTheSummaryLast) {
  auto [code, out] = RunCmd(kCtl + " replay --top-rules 2 " + opts_.rules_path + " --pcap " +
                            opts_.pcap_path);
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("rule hits (all passes; top 2 of 3):\n  rule 1: 7\n  rule 2: 5\n"
                             "replay: packets=16 mismatches=0 mpps="));
  EXPECT_THAT(out, ::testing::ContainsRegex("\nreplay: packets=16 mismatches=0 "
                                            "mpps=[0-9]+\\.[0-9][0-9]\n$"));

  // A trace and a pcap at once, --in-port without a pcap: usage errors.
  auto both = RunCmd(kCtl + " replay " + opts_.rules_path + " x_trace --pcap " + opts_.pcap_path);
  EXPECT_EQ(both.code, 2) << both.out;
  EXPECT_THAT(both.out, HasSubstr("with --pcap FILE: expected RULES only"));
  auto port = RunCmd(kCtl + " replay --in-port 3 " + opts_.rules_path + " x_trace");
  EXPECT_EQ(port.code, 2) << port.out;
  // A file that is no capture: bad input, named.
  auto bad = RunCmd(kCtl + " replay " + opts_.rules_path + " --pcap " + opts_.rules_path);
  EXPECT_EQ(bad.code, 3) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("flowclassctl replay: --pcap " + opts_.rules_path));
}

}  // namespace
}  // namespace flowclass
