// A real flowclassd with pipeline.kind acl (net_pcap vdevs, traffic looping
// from a pcap, a rule store, gRPC and /metrics on 127.0.0.1 with free
// ports), driven by the real flowclassctl: rules added in batches are acked
// at their generation once live (the PMD reports it, the traffic follows
// them: acl hits, packets sent), flowclassctl stats / trace and /metrics show
// the acl counters, a rejected batch changes nothing, and a restart restores
// the stored rules through an acl build.  Each daemon gets its own
// --file-prefix and is stopped by PID.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <random>
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

CmdResult Ctl(const std::string& args) {
  return RunCommand(absl::StrCat("timeout 120 ", kCtl, " ", args, " 2>&1"));
}

class Daemon : public EalDaemonProcess {
 public:
  Daemon(const TempDir& dir, const std::string& name, const std::vector<std::string>& args)
      : EalDaemonProcess(kDaemon, args, absl::StrCat("fcacl_", name, "_", getpid()),
                         dir.File(name + ".txt")) {}
};

std::string Config(const TempDir& dir) {
  return absl::StrCat(R"(
eal:
  hugepages: false
  memory_mb: 512
  pci: false
  lcore_map: "0@0,1@1"
  log_level: error
pmd:
  lcores: [1]
  idle_sleep_us: 50
mempool:
  mbufs: 8191
pipeline:
  kind: acl
  acl_algorithm: scalar
ports:
  - number: 1
    device: net_pcap0
    args: "rx_pcap=)", dir.File("in.pcap"), R"(,infinite_rx=1"
  - number: 2
    device: net_pcap1
    args: "tx_pcap=/dev/null"
    poll: false
store:
  path: )", dir.File("store"), R"(
stats:
  interval_ms: 0
  final: false
metrics: {enabled: true, address: "127.0.0.1:0"}
grpc:
  address: 127.0.0.1
  port: 0
  plaintext: true
)");
}

// id i: udp to 10.0.<i%8>.0/24 with tp_dst ranges; every 5th drops.
std::string RuleFile(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i)
    absl::StrAppend(&s, "id=", i, ",priority=", 100 + i % 7, ",udp,nw_dst=10.0.", i % 8,
                    ".0/24,tp_dst=", 900 + (i / 8) * 50, "-", 949 + (i / 8) * 50,
                    ",actions=", i % 5 == 0 ? "drop" : "output:2", "\n");
  return s;
}

// The value of the first series `name{...}` or `name ` in a scrape (-1: none).
double Scraped(const std::string& body, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (!absl::StartsWith(line, series)) continue;
    double v = -1;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) return v;
  }
  return -1;
}

TEST(FlowclassdAclTest, RulesAreAckedLiveStatsShowTheAclAndARestartRebuildsThem) {
  TempDir dir("flowclass_acl_e2e");
  std::vector<std::vector<uint8_t>> frames;
  std::mt19937 rng(3);
  for (int i = 0; i < 256; ++i)
    frames.push_back(PacketBuilder()
                         .Eth(0x020000000001, 0x020000000002)
                         .Ipv4(0xc0a80001, 0x0a000000 | ((rng() % 8) << 8) | (rng() & 0xff))
                         .Udp(static_cast<uint16_t>(1024 + rng() % 1000),
                              static_cast<uint16_t>(900 + rng() % 1600))
                         .PadTo(64)
                         .Build());
  WritePcap(dir.File("in.pcap"), frames);
  WriteFile(dir.File("d.yaml"), Config(dir));

  // --check-config shows the kind.
  const CmdResult check =
      RunCommand(absl::StrCat(kDaemon, " --check-config ", dir.File("d.yaml"), " 2>&1"));
  ASSERT_EQ(check.code, 0) << check.out;
  EXPECT_THAT(check.out, HasSubstr("pipeline.kind: acl\n"));
  EXPECT_THAT(check.out, HasSubstr("pipeline.acl_algorithm: scalar ("));

  uint64_t packets_before_rules = 0;
  {
    Daemon d(dir, "first", {"-c", dir.File("d.yaml")});
    const std::string target = WaitForOutputAfter(d, "flowclassd: grpc listening on ", 30);
    ASSERT_FALSE(target.empty()) << d.Output();
    int metrics_port = 0;
    ASSERT_TRUE(absl::SimpleAtoi(WaitForOutputAfter(d, "metrics on http://127.0.0.1:", 10, " /"),
                                 &metrics_port))
        << d.Output();
    const std::string conn = absl::StrCat("--plaintext --server ", target);
    ClientOptions co;
    co.target = target;
    co.plaintext = true;
    auto client = FlowclassClient::Connect(co);
    ASSERT_TRUE(client.ok()) << client.status();

    // No rule yet: every packet misses the ACL (and is dropped).
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto st = (*client)->GetStats();
    ASSERT_TRUE(st.ok()) << st.status();
    ASSERT_TRUE(st->has_acl());
    EXPECT_GT(st->total().acl_misses(), 0u);
    EXPECT_EQ(st->total().acl_hits(), 0u);
    EXPECT_EQ(st->total().tx_packets(), 0u);
    packets_before_rules = st->total().packets();

    // 400 rules in batches of 40 -> generation 10, acked once live.
    WriteFile(dir.File("rules.txt"), RuleFile(400));
    CmdResult r = Ctl(absl::StrCat("add-rules ", conn, " --batch-size 40 --progress off ",
                                   dir.File("rules.txt")));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("add-rules: rules=400 batches=10 generation=10 "));
    st = (*client)->GetStats();
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->generation(), 10u);
    EXPECT_EQ(st->rules(), 400u);
    ASSERT_EQ(st->pmds_size(), 1);
    EXPECT_EQ(st->pmds(0).generation(), 10u);  // the ack: live on the PMD
    EXPECT_EQ(st->acl().live_generation(), 10u);
    EXPECT_EQ(st->acl().batches(), 10u);
    EXPECT_GE(st->acl().builds(), 1u);
    EXPECT_LE(st->acl().builds(), 10u);
    EXPECT_EQ(st->acl().builds() + st->acl().coalesced_batches(), 10u);
    EXPECT_EQ(st->acl().last_build_rules(), 400u);
    EXPECT_EQ(st->acl().queue_depth(), 0u);
    EXPECT_GT(st->acl().build_ns(), 0u);
    // The traffic follows them: matched by the ACL (or its EMC), sent.
    const uint64_t tx0 = st->total().tx_packets();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto st2 = (*client)->GetStats();
    ASSERT_TRUE(st2.ok());
    EXPECT_GT(st2->total().acl_hits(), 0u);
    EXPECT_GT(st2->total().tx_packets(), tx0);
    EXPECT_GT(st2->total().rule_drops(), 0u);
    EXPECT_EQ(st2->total().megaflows(), 0u);

    // flowclassctl stats shows the acl counters and the builder.
    r = Ctl("stats " + conn);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("  acl hits: "));
    EXPECT_THAT(r.out, HasSubstr("  acl misses: "));
    EXPECT_THAT(r.out, HasSubstr("acl builder:\n"));
    EXPECT_THAT(r.out, HasSubstr("  live generation: 10\n"));
    EXPECT_THAT(r.out, HasSubstr(", 400 rules\n"));

    // trace: the live classifier's answer (rule 3: 10.0.3.0/24, tp_dst 900-949).
    r = Ctl(absl::StrCat("trace ", conn,
                         " in_port=1,udp,nw_src=192.168.0.1,nw_dst=10.0.3.9,tp_src=5,tp_dst=920"));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("rule: id=3,"));
    EXPECT_THAT(r.out, HasSubstr("layer: acl"));
    EXPECT_THAT(r.out, HasSubstr("generation: 10"));

    // /metrics: the builder's and the PMD's acl families.
    const HttpResponse scrape = HttpGet("127.0.0.1", metrics_port, "/metrics");
    ASSERT_EQ(scrape.status, 200);
    EXPECT_EQ(Scraped(scrape.body, "flowclass_acl_live_generation "), 10);
    EXPECT_EQ(Scraped(scrape.body, "flowclass_acl_batches_total "), 10);
    EXPECT_GE(Scraped(scrape.body, "flowclass_acl_builds_total "), 1);
    EXPECT_EQ(Scraped(scrape.body, "flowclass_acl_build_duration_seconds_count "),
              static_cast<double>(st->acl().builds()));
    EXPECT_GT(Scraped(scrape.body, "flowclass_pmd_acl_hits_total{"), 0);
    EXPECT_GT(Scraped(scrape.body, "flowclass_acl_context_bytes "), 0);
    EXPECT_THAT(scrape.body, HasSubstr("flowclass_acl_algorithm_info{algorithm=\"scalar\"} 1"));

    // pipeline.acl_algorithm at run time: the autovalidator on the traffic
    // (which keeps flowing) finds no difference; one this CPU (or EAL's
    // 256-bit SIMD default) lacks is refused and changes nothing.
    r = Ctl("config get " + conn + " pipeline.acl_algorithm");
    EXPECT_EQ(r.out, "scalar\n");
    r = Ctl("config set " + conn + " pipeline.acl_algorithm=autovalidator");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(Ctl("config get " + conn + " pipeline.acl_algorithm").out, "autovalidator\n");
    r = Ctl("config set " + conn + " pipeline.acl_algorithm=avx512x32");
    EXPECT_EQ(r.code, 4) << r.out;
    EXPECT_THAT(r.out, HasSubstr("pipeline.acl_algorithm: avx512x32 is not supported here"));
    EXPECT_EQ(Ctl("config get " + conn + " pipeline.acl_algorithm").out, "autovalidator\n");

    // A batch the table refuses (an IPv4 field on an ARP rule) changes
    // nothing and names its rule.
    WriteFile(dir.File("bad.txt"),
              "id=5000,priority=1,udp,nw_dst=10.0.0.0/8,actions=drop\n"
              "id=5001,priority=1,dl_type=0x0806,nw_src=10.0.0.1,actions=drop\n");
    r = Ctl(absl::StrCat("add-rules ", conn, " --progress off ", dir.File("bad.txt")));
    EXPECT_EQ(r.code, 4) << r.out;
    EXPECT_THAT(r.out, HasSubstr("rule #2 of "));
    st = (*client)->GetStats();
    EXPECT_EQ(st->generation(), 10u);
    EXPECT_EQ(st->rules(), 400u);

    // The ACL's lookups so far (the EMC holds the traffic's flows by now).
    auto acl_lookups = [&] {
      const auto t = (*client)->GetStats()->total();
      return t.acl_hits() + t.acl_misses();
    };
    const uint64_t lookups0 = acl_lookups();
    // del-rules: acked once the smaller rule set is live.
    r = Ctl(absl::StrCat("del-rules ", conn, " 1 2 3"));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("deleted=3 generation=11"));
    st = (*client)->GetStats();
    EXPECT_EQ(st->pmds(0).generation(), 11u);
    EXPECT_EQ(st->acl().last_build_rules(), 397u);
    // The rebuild emptied the EMC: the traffic's flows go through the ACL
    // again, each lookup autovalidated.  (Counted from before the del-rules:
    // the misses may all come between the ack and a read after it.)  The
    // total never falls from one read to the next.  (A failure of an older
    // form of this check, "acl_lookups() >= lookups0 + 1000, actual: 105422
    // vs 106326", was a rise of 96 short of 1000, not a fall of 904.)
    uint64_t last = lookups0;
    for (int i = 0; i < 200 && last <= lookups0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const uint64_t now = acl_lookups();
      EXPECT_GE(now, last) << "acl_hits + acl_misses fell between two GetStats";
      last = now;
    }
    EXPECT_GT(last, lookups0);
    r = Ctl("stats " + conn);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("  algorithm: autovalidator (autovalidator mismatches: 0)\n"));
    EXPECT_THAT(r.out, HasSubstr("  context memory: "));
    EXPECT_EQ((*client)->GetStats()->acl().autovalidator_mismatches(), 0u);
    EXPECT_GT((*client)->GetStats()->acl().context_bytes(), 0u);
    EXPECT_EQ(d.Stop(30), 0) << d.Output();
  }
  EXPECT_GT(packets_before_rules, 0u);

  // A restart restores generation 11 from the store through an acl build.
  {
    Daemon d(dir, "second", {"-c", dir.File("d.yaml")});
    const std::string target = WaitForOutputAfter(d, "flowclassd: grpc listening on ", 30);
    ASSERT_FALSE(target.empty()) << d.Output();
    ClientOptions co;
    co.target = target;
    co.plaintext = true;
    auto client = FlowclassClient::Connect(co);
    ASSERT_TRUE(client.ok());
    auto st = (*client)->GetStats();
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->generation(), 11u);
    EXPECT_EQ(st->rules(), 397u);
    EXPECT_EQ(st->pmds(0).generation(), 11u);
    EXPECT_EQ(st->acl().live_generation(), 11u);
    EXPECT_EQ(st->acl().last_build_rules(), 397u);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    st = (*client)->GetStats();
    EXPECT_GT(st->total().acl_hits(), 0u);
    EXPECT_GT(st->total().tx_packets(), 0u);
    EXPECT_EQ(d.Stop(30), 0) << d.Output();
  }
}

}  // namespace
}  // namespace flowclass
