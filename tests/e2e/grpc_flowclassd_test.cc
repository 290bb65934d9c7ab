// The full path: a real flowclassd (net_pcap vdevs, traffic looping from a
// pcap) with its gRPC server on 127.0.0.1:0, driven by the real flowclassctl
// binary and the C++ client library.  Checks add-rules/dump-rules/trace/
// del-rules/config/stats end to end, that PMDs report the acked generation,
// that a rejected file changes nothing, and that every packet is accounted
// for at exit.  Each daemon gets its own --file-prefix and is stopped by PID.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/rpc/flowclass_client.h"
#include "dataplane/flow/packet_parser.h"
#include "dataplane/rules/rule_format.h"
#include "proto/rule_convert.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/common/packet_builder.h"
#include "tests/common/e2e_util.h"
#include "tests/common/reference_classifier.h"
#include "yaml-cpp/yaml.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char* const kDaemon = FLOWCLASS_BINARY_DIR "/server/flowclassd";
const char* const kCtl = FLOWCLASS_BINARY_DIR "/client/flowclassctl";

// flowclassctl `args`; out has stdout and stderr.
CmdResult Ctl(const std::string& args) {
  return RunCommand(absl::StrCat("timeout 120 ", kCtl, " ", args, " 2>&1"));
}

class Daemon : public EalDaemonProcess {
 public:
  // `name` tells apart the daemons of one test (EAL prefix, output file).
  Daemon(const TempDir& dir, const std::vector<std::string>& args, const std::string& name = "")
      : EalDaemonProcess(kDaemon, args, absl::StrCat("fcgrpc_", getpid(), name),
                         dir.File(name + "stdout.txt")) {}
  // "127.0.0.1:PORT" once the daemon printed it, "" after `seconds`.
  std::string WaitForGrpc(double seconds) {
    return WaitForOutputAfter(*this, "flowclassd: grpc listening on ", seconds);
  }
};

// The C++ client library on the daemon's plaintext port.
absl::StatusOr<std::unique_ptr<FlowclassClient>> PlaintextClient(const std::string& target) {
  ClientOptions co;
  co.target = target;
  co.plaintext = true;
  return FlowclassClient::Connect(co);
}

std::string DaemonConfig(const TempDir& dir, const std::string& grpc_extra) {
  return absl::StrCat(R"(
eal:
  hugepages: false
  memory_mb: 256
  pci: false
  lcore_map: "0@0,1@1"
  log_level: error
pmd:
  lcores: [1]
  idle_sleep_us: 50
mempool:
  mbufs: 8191
ports:
  - number: 1
    device: net_pcap0
    args: "rx_pcap=)", dir.File("in.pcap"), R"(,infinite_rx=1"
  - number: 2
    device: net_pcap1
    args: "tx_pcap=/dev/null"
    poll: false
stats:
  interval_ms: 0
  final: false
grpc:
  address: 127.0.0.1
  port: 0
  plaintext: true
)", grpc_extra);
}

// Rules: id i, udp to 10.<i/256>.<i%256>.0/24, tp_dst ranges, two cookies.
std::string RuleFile(int n, int first_id) {
  std::string s = "# grpc e2e rules\n";
  for (int i = first_id; i < first_id + n; ++i)
    absl::StrAppend(&s, "id=", i, ",priority=", 100 + i % 7, ",cookie=", 1 + i % 2,
                    ",udp,nw_dst=10.", (i / 256) % 256, ".", i % 256, ".0/24,tp_dst=",
                    1000 + i % 50, "-", 2000 + i % 300, ",actions=",
                    i % 5 == 0 ? "drop" : "output:2", "\n");
  return s;
}

TEST(GrpcFlowclassdTest, FlowclassctlAgainstARealDaemon) {
  TempDir dir("flowclass_grpc_e2e");
  std::vector<std::vector<uint8_t>> frames;
  std::mt19937 rng(1);
  for (int i = 0; i < 512; ++i) {
    const uint32_t dst = 0x0a000000 | ((rng() % 8) << 8) | (rng() & 0xff);
    frames.push_back(PacketBuilder()
                         .Eth(0x020000000001, 0x020000000002)
                         .Ipv4(0xc0a80001, dst)
                         .Udp(static_cast<uint16_t>(1024 + rng() % 1000),
                              static_cast<uint16_t>(900 + rng() % 1500))
                         .PadTo(64)
                         .Build());
  }
  WritePcap(dir.File("in.pcap"), frames);
  WriteFile(dir.File("d.yaml"), DaemonConfig(dir, ""));
  // A pipeline setting's start value from the command line (config get below).
  Daemon d(dir, {"-c", dir.File("d.yaml"), "--set", "pipeline.emc_insert_inv_prob=5"});
  const std::string target = d.WaitForGrpc(30);
  ASSERT_FALSE(target.empty()) << d.Output();
  const std::string conn = absl::StrCat("--plaintext --server ", target);

  // add-rules: 2000 rules in batches of 100 -> generation 20.
  WriteFile(dir.File("rules.txt"), RuleFile(2000, 1));
  CmdResult r = Ctl(absl::StrCat("add-rules ", conn, " --batch-size 100 --progress off ",
                                 dir.File("rules.txt")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("add-rules: rules=2000 batches=20 generation=20 "));

  // After the ack, every PMD classifies with generation 20, and traffic flows.
  auto client = PlaintextClient(target);
  ASSERT_TRUE(client.ok()) << client.status();
  auto st = (*client)->GetStats();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->generation(), 20u);
  EXPECT_EQ(st->rules(), 2000u);
  ASSERT_EQ(st->pmds_size(), 1);
  EXPECT_EQ(st->pmds(0).generation(), 20u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto st2 = (*client)->GetStats();
  ASSERT_TRUE(st2.ok());
  EXPECT_GT(st2->total().packets(), st->total().packets());
  // The total carries the PMDs' cache figures too (one PMD: the same).
  EXPECT_GT(st2->pmds(0).emc_entries(), 0u);
  EXPECT_EQ(st2->total().emc_entries(), st2->pmds(0).emc_entries());
  EXPECT_EQ(st2->total().emc_occupancy(), st2->pmds(0).emc_occupancy());
  EXPECT_EQ(st2->total().smc_entries(), st2->pmds(0).smc_entries());
  EXPECT_EQ(st2->total().megaflows(), st2->pmds(0).megaflows());
  EXPECT_EQ(st2->total().cd_enabled(), st2->pmds(0).cd_enabled());
  // Where the packets went adds up to what was received, give or take the
  // burst the PMD is in the middle of (its counters are updated at its end).
  {
    const v1::PmdStats& p = st2->pmds(0);
    const int64_t went = static_cast<int64_t>(p.tx_packets() + p.tx_dropped() + p.rule_drops() +
                                              p.no_match() + p.bad_port());
    EXPECT_GT(p.tx_packets(), 0u);
    EXPECT_GT(p.iterations(), 0u);
    EXPECT_LE(std::abs(static_cast<int64_t>(p.packets()) - went), 2 * 32)
        << "packets " << p.packets() << " tx " << p.tx_packets() << " tx_dropped "
        << p.tx_dropped() << " rule_drops " << p.rule_drops() << " no_match " << p.no_match()
        << " bad_port " << p.bad_port();
    EXPECT_EQ(st2->total().tx_packets(), p.tx_packets());
  }
  EXPECT_EQ((*client)->Healthy("flowclass.v1.ClassifierService").value_or(false), true);
  // Server reflection describes every service the daemon serves, the health
  // service included (a tool such as grpcurl finds its methods).
  {
    const std::string modules = std::string(FLOWCLASS_BINARY_DIR) + "/node-client/node_modules";
    ASSERT_TRUE(std::filesystem::exists(modules + "/@grpc/grpc-js"))
        << "run tests/node/setup.sh " << FLOWCLASS_BINARY_DIR << " first (make test does)";
    const CmdResult refl = RunCommand(absl::StrCat(
        "NODE_PATH=", modules, " timeout 60 node ", FLOWCLASS_SOURCE_DIR, "/tests/node/reflect.js ",
        target, " flowclass.v1.ClassifierService grpc.health.v1.Health grpc.health.v1.HealthCheckRequest",
        " no.such.Service 2>&1"));
    ASSERT_EQ(refl.code, 0) << refl.out;
    EXPECT_THAT(refl.out, HasSubstr("{\"flowclass.v1.ClassifierService\":\"found\","
                                    "\"grpc.health.v1.Health\":\"found\","
                                    "\"grpc.health.v1.HealthCheckRequest\":\"found\","
                                    "\"no.such.Service\":\"error\"}"));
  }

  // dump-rules gives back exactly the file's rules.
  r = Ctl("dump-rules " + conn);
  ASSERT_EQ(r.code, 0) << r.out.substr(0, 500);
  auto dumped = ParseNativeRules(r.out);
  auto want = ParseNativeRules(RuleFile(2000, 1));
  ASSERT_TRUE(dumped.ok()) << dumped.status();
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(dumped->size(), 2000u);
  std::map<uint64_t, Rule> by_id;
  for (const Rule& x : *want) by_id[x.id] = x;
  for (const Rule& x : *dumped) EXPECT_EQ(x, by_id[x.id]) << x.ToString();

  // trace agrees with a linear scan over the rules.
  const std::string flow = "in_port=1,udp,nw_src=192.168.0.1,nw_dst=10.3.7.9,tp_src=5,tp_dst=1500";
  r = Ctl(absl::StrCat("trace ", conn, " ", flow));
  ASSERT_EQ(r.code, 0) << r.out;
  auto key = ParseNativeRule(flow + ",actions=drop", 1);
  ASSERT_TRUE(key.ok());
  const ReferenceClassifier reference(*want);
  const Rule* best = reference.Lookup(key->match.value);
  ASSERT_NE(best, nullptr);
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("rule: id=", best->id, ",")));
  // No frame of the traffic goes to 10.3.x.x: the PMD has nothing cached.
  EXPECT_THAT(r.out, HasSubstr("layer: upcall\npmd: 0\n"));
  EXPECT_THAT(r.out, HasSubstr("generation: 20"));
  // A frame of the looping traffic is cached on the PMD by now: a cache
  // layer answers, with the rule the linear scan gives.
  std::string hex;
  for (uint8_t b : frames[0]) absl::StrAppend(&hex, absl::Hex(b, absl::kZeroPad2));
  r = Ctl(absl::StrCat("trace ", conn, " --in-port 1 --packet-hex ", hex));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("layer: (emc|smc|cd|megaflow)\npmd: 0\n"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("parse:")));
  const FlowKey k0 = ParsePacket(frames[0].data(), frames[0].size(), 1);
  best = reference.Lookup(k0);
  if (best) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("rule: id=", best->id, ",")));
  } else {
    EXPECT_THAT(r.out, HasSubstr("action: drop"));
  }
  // A frame cut inside its IPv4 header: the trace says so.
  r = Ctl(absl::StrCat("trace ", conn, " --in-port 1 --packet-hex ", hex.substr(0, 2 * 20)));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\nparse: truncated (the frame ends inside a header)\nlayer: "));
  EXPECT_EQ(Ctl(absl::StrCat("trace ", conn, " --in-port 1 --packet-hex ''")).code, 2);

  // A file that parses but the server rejects (an IPv4 field on an ARP
  // rule): exit 4, names the field and the rule, nothing changes.
  WriteFile(dir.File("bad.txt"),
            "# a comment line: rule #2 is on line 3\n"
            "id=5000,priority=1,udp,nw_dst=10.0.0.0/8,actions=drop\n"
            "id=5001,priority=1,dl_type=0x0806,nw_src=10.0.0.1,actions=drop\n");
  r = Ctl(absl::StrCat("add-rules ", conn, " --progress off ", dir.File("bad.txt")));
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ipv4_src"));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("rule #2 of ", dir.File("bad.txt"),
                                            " (line 3, field ipv4_src)")));
  st = (*client)->GetStats();
  EXPECT_EQ(st->generation(), 20u);
  EXPECT_EQ(st->rules(), 2000u);

  // del-rules by cookie and by id; an unknown id rejects the whole batch.
  r = Ctl(absl::StrCat("del-rules ", conn, " --cookie 2"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("deleted=1000 generation=21"));
  // (odd ids had cookie 2 and are gone; a cookie no rule carries changes
  // nothing, so the generation stays)
  r = Ctl(absl::StrCat("del-rules ", conn, " --cookie 0x77"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("deleted=0 generation=21"));
  r = Ctl(absl::StrCat("del-rules ", conn, " 2 3"));
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("NOT_FOUND"));
  r = Ctl(absl::StrCat("del-rules ", conn, " 2 4"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("deleted=2 generation=22"));
  r = Ctl("dump-rules " + conn + " --cookie 1 --limit 5");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5);
  // Cookies as dump-rules prints them (hex) are taken back.
  const CmdResult hex_cookie = Ctl("dump-rules " + conn + " --cookie 0x1 --limit 5");
  EXPECT_EQ(hex_cookie.code, 0) << hex_cookie.out;
  EXPECT_EQ(hex_cookie.out, r.out);

  // config: a runtime key, a start-up key, an unknown key.
  r = Ctl("config get " + conn + " pmd.tx_retries");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "4\n");
  r = Ctl("config set " + conn + " pmd.tx_retries=2");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(Ctl("config get " + conn + " pmd.tx_retries").out, "2\n");
  r = Ctl("config set " + conn + " pmd.burst=8");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("FAILED_PRECONDITION"));
  r = Ctl("config set " + conn + " no.such.key=1");
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(Ctl("config get " + conn + " pipeline.emc_insert_inv_prob").out, "5\n");
  // The config file's range holds over the API too.
  r = Ctl("config set " + conn + " pipeline.emc_insert_inv_prob=4294967295");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("0..1073741824"));
  EXPECT_EQ(Ctl("config get " + conn + " pipeline.emc_insert_inv_prob").out, "5\n");
  r = Ctl("config set " + conn + " dpcls.lookup_available.generic=false");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("read-only"));
  r = Ctl("stats " + conn);
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("pmd thread 0 (lcore 1)"));
  EXPECT_THAT(r.out, HasSubstr("miss with success upcall"));

  // A rejected batch in the middle of a stream of one-rule batches: the
  // summary counts the rules before it, and names the ones of batches already
  // in flight behind it that were applied too (which depends on timing, so
  // it is checked against the rules the daemon holds).
  WriteFile(dir.File("bad2.txt"),
            "id=6000,priority=1,udp,nw_dst=10.0.0.0/8,actions=drop\n"
            "id=6001,priority=1,dl_type=0x0806,nw_src=10.0.0.1,actions=drop\n"
            "id=6002,priority=1,udp,nw_dst=11.0.0.0/8,actions=drop\n"
            "id=6003,priority=1,udp,nw_dst=12.0.0.0/8,actions=drop\n");
  r = Ctl(absl::StrCat("add-rules ", conn, " --progress off --batch-size 1 ", dir.File("bad2.txt")));
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("rule #2 of"));
  const bool has3 = (*client)->GetRule(6002).ok(), has4 = (*client)->GetRule(6003).ok();
  EXPECT_TRUE((*client)->GetRule(6000).ok());
  EXPECT_FALSE((*client)->GetRule(6001).ok());
  const std::string after = has3 && has4 ? "; also applied, from batches already in flight after it: 2 (#3-#4)"
                            : has3       ? "; also applied, from batches already in flight after it: 1 (#3-#3)"
                            : has4       ? "; also applied, from batches already in flight after it: 1 (#4-#4)"
                                         : "; none after it";
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("1 of 4 rules applied before it (#1-#1)", after, "\n")));

  // A stream that ends early (its deadline passes part way): exit 5, and the
  // last line says which rules are in, which were sent without an answer
  // (applied or not) and which were never sent; the daemon holds at least
  // the first and at most the first two.
  {
    const uint64_t rules_before_stream = (*client)->GetStats()->rules();
    WriteFile(dir.File("many.txt"), RuleFile(60000, 100000));
    r = Ctl(absl::StrCat("add-rules ", conn, " --progress off --timeout-ms 3 ",
                         dir.File("many.txt")));
    EXPECT_EQ(r.code, 5) << r.out;
    EXPECT_THAT(r.out, HasSubstr("DEADLINE_EXCEEDED"));
    std::smatch m;
    const std::regex report(
        "the stream ended early: ([0-9]+) of 60000 rules applied[^;]*; ([0-9]+) sent without "
        "an answer, applied or not[^;]*; ([0-9]+) not sent");
    ASSERT_TRUE(std::regex_search(r.out, m, report)) << r.out;
    const uint64_t applied = std::stoull(m[1]), unanswered = std::stoull(m[2]),
                   unsent = std::stoull(m[3]);
    EXPECT_EQ(applied + unanswered + unsent, 60000u) << r.out;
    EXPECT_GT(unsent + unanswered, 0u) << r.out;
    // The server may still be applying what it read: wait for it to settle.
    uint64_t held = 0;
    for (int i = 0; i < 50; ++i) {
      held = (*client)->GetStats()->rules() - rules_before_stream;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if ((*client)->GetStats()->rules() - rules_before_stream == held) break;
    }
    EXPECT_GE(held, applied) << r.out;
    EXPECT_LE(held, applied + unanswered) << r.out;
    for (uint64_t id = 100000; id < 160000; id += 997) {
      if (id < 100000 + applied) {
        EXPECT_TRUE((*client)->GetRule(id).ok()) << id;
      } else if (id >= 100000 + applied + unanswered) {
        EXPECT_FALSE((*client)->GetRule(id).ok()) << id;
      }
    }
    // Remove them again, in one batch of deletes.
    auto listed = (*client)->ListRules();
    ASSERT_TRUE(listed.ok());
    v1::ApplyRulesRequest dels;
    for (const v1::Rule& x : *listed)
      if (x.id() >= 100000) dels.add_ops()->set_delete_id(x.id());
    auto ack = (*client)->ApplyBatch(dels);
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->status().code(), 0) << ack->status().message();
    EXPECT_EQ((*client)->GetStats()->rules(), rules_before_stream);
  }

  // A file with no rules sends nothing and reports the daemon's generation.
  WriteFile(dir.File("empty.txt"), "# nothing yet\n");
  const uint64_t gen_now = (*client)->GetStats()->generation();
  r = Ctl(absl::StrCat("add-rules ", conn, " --progress off ", dir.File("empty.txt")));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("rules=0 batches=0 generation=", gen_now, " ")));
  // Arguments a command does not use are usage errors, not ignored.
  EXPECT_EQ(Ctl("stats " + conn + " extra").code, 2);
  EXPECT_EQ(Ctl("stats " + conn + " --count 2").code, 2);
  EXPECT_EQ(Ctl("trace " + conn + " --in-port 1 in_port=2,udp").code, 2);

  // del-rules --all: one batch (one generation) deleting every rule, which
  // the PMD has installed at the ack; the ids are free again after it.
  st = (*client)->GetStats();
  ASSERT_TRUE(st.ok()) << st.status();
  const uint64_t rules_before = st->rules(), gen_before = st->generation();
  // 999 to 1001 rules: how many of bad2.txt's in-flight batches applied
  // depends on timing (see above).
  ASSERT_GE(rules_before, 999u);
  r = Ctl("del-rules " + conn + " --all");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("deleted=", rules_before, " generation=",
                                            gen_before + 1)));
  st = (*client)->GetStats();
  EXPECT_EQ(st->rules(), 0u);
  EXPECT_EQ(st->generation(), gen_before + 1);
  EXPECT_EQ(st->pmds(0).generation(), gen_before + 1);
  EXPECT_EQ(Ctl("dump-rules " + conn).out, "");
  r = Ctl(absl::StrCat("add-rules ", conn, " --progress off ", dir.File("bad.txt")));
  EXPECT_EQ(r.code, 4) << r.out;  // still names its bad rule
  WriteFile(dir.File("again.txt"), "id=6000,priority=1,udp,nw_dst=10.0.0.0/8,actions=drop\n");
  r = Ctl(absl::StrCat("add-rules ", conn, " --progress off ", dir.File("again.txt")));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE((*client)->GetRule(6000).ok());

  // Stop: every packet received is accounted for.
  ASSERT_EQ(d.Stop(30), 0) << d.Output();
  const std::string out = d.Output();
  // (flowclassd prints one "final total" line.)
  std::map<std::string, uint64_t> f = OutputFields(out, "final total ");
  ASSERT_GT(f["rx"], 0u) << out;
  EXPECT_EQ(f["rx"], f["tx"] + f["tx_dropped"] + f["rule_drops"] + f["no_match"] + f["bad_port"])
      << out;
}

// `-o json` on the commands that read, parsed back with protobuf's own JSON
// parser into the API's messages and compared with the text output and the
// client library; `--version` of both binaries and GetConfig's version agree.
TEST(GrpcFlowclassdTest, JsonOutputAndVersion) {
  TempDir dir("flowclass_grpc_json");
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 64; ++i)
    frames.push_back(PacketBuilder()
                         .Eth(0x020000000001, 0x020000000002)
                         .Ipv4(0xc0a80001, 0x0a000000 | static_cast<uint32_t>(i))
                         .Udp(1024, static_cast<uint16_t>(1000 + i))
                         .PadTo(64)
                         .Build());
  WritePcap(dir.File("in.pcap"), frames);
  WriteFile(dir.File("d.yaml"), DaemonConfig(dir, ""));
  Daemon d(dir, {"-c", dir.File("d.yaml")});
  const std::string target = d.WaitForGrpc(30);
  ASSERT_FALSE(target.empty()) << d.Output();
  const std::string conn = absl::StrCat("--plaintext --server ", target);
  WriteFile(dir.File("rules.txt"), RuleFile(50, 1));
  CmdResult r = Ctl(absl::StrCat("add-rules ", conn, " --batch-size 10 --progress off ",
                                 dir.File("rules.txt")));
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_THAT(r.out, HasSubstr("generation=5 "));
  auto parse = [](const std::string& json, google::protobuf::Message* m) {
    google::protobuf::util::JsonParseOptions o;
    o.ignore_unknown_fields = false;  // every field printed is one of the message's
    return google::protobuf::util::JsonStringToMessage(json, m, o);
  };

  // Versions: both binaries and the running daemon say the same.
  const CmdResult cv = Ctl("--version"), dv = RunCommand(absl::StrCat(kDaemon, " --version"));
  ASSERT_EQ(cv.code, 0) << cv.out;
  ASSERT_EQ(dv.code, 0) << dv.out;
  ASSERT_TRUE(absl::StartsWith(cv.out, "flowclassctl ")) << cv.out;
  const std::string version(absl::StripAsciiWhitespace(cv.out.substr(13)));
  EXPECT_THAT(version, ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
  EXPECT_EQ(dv.out, absl::StrCat("flowclassd ", version, "\n"));
  EXPECT_THAT(d.Output(), HasSubstr(absl::StrCat("; version ", version, "\n")));

  // dump-rules: one ListRulesResponse, the same rules as the text, hits included.
  r = Ctl("dump-rules -o json " + conn);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one line";
  v1::ListRulesResponse page;
  ASSERT_TRUE(parse(r.out, &page).ok()) << r.out.substr(0, 300);
  ASSERT_EQ(page.rules_size(), 50);
  EXPECT_THAT(r.out, HasSubstr("\"hits\":"));  // zero values are printed
  const CmdResult text = Ctl("dump-rules " + conn);
  ASSERT_EQ(text.code, 0);
  std::string from_json;
  for (const v1::Rule& p : page.rules()) {
    Rule x;
    ASSERT_TRUE(RuleFromProto(p, &x).ok());
    absl::StrAppend(&from_json, x.ToString(), "\n");
  }
  EXPECT_EQ(from_json, text.out);

  // stats: a Stats at the acked generation; --watch gives one line a report.
  r = Ctl("stats --output=json " + conn);
  ASSERT_EQ(r.code, 0) << r.out;
  v1::GetStatsResponse st;
  ASSERT_TRUE(parse(r.out, &st).ok()) << r.out.substr(0, 300);
  EXPECT_EQ(st.generation(), 5u);
  EXPECT_EQ(st.rules(), 50u);
  ASSERT_EQ(st.pmds_size(), 1);
  EXPECT_EQ(st.server().version(), version);
  r = Ctl("stats -ojson --watch 0.05 --count 3 " + conn);
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << r.out.substr(0, 300);
  uint64_t last = 0;
  for (const std::string& l : lines) {
    v1::GetStatsResponse s;
    ASSERT_TRUE(parse(l, &s).ok()) << l.substr(0, 300);
    EXPECT_GE(s.total().packets(), last);
    last = s.total().packets();
  }
  EXPECT_GT(last, 0u) << "traffic loops from the pcap";
  // Text --watch: a UTC timestamp on each report, rates from the second on.
  r = Ctl("stats --watch 0.2 --count 3 " + conn);
  ASSERT_EQ(r.code, 0) << r.out;
  std::smatch m;
  const std::string watched = r.out;
  int times = 0, rates = 0;
  const std::regex time_line("time: 20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9.]+Z");
  for (absl::string_view l : absl::StrSplit(watched, '\n')) {
    times += std::regex_match(std::string(l), time_line);
    rates += absl::StartsWith(l, "rates over ");
  }
  EXPECT_EQ(times, 3) << watched;
  EXPECT_EQ(rates, 2) << watched;
  ASSERT_TRUE(std::regex_search(watched, m,
                                std::regex("rates over ([0-9.]+) s: rx_pps=([0-9]+) tx_pps=")))
      << watched;
  EXPECT_GT(std::stod(m[1].str()), 0.1);
  EXPECT_GT(std::stoull(m[2].str()), 0u) << "the looping pcap gives a packet rate";
  // $FLOWCLASS_OUTPUT picks the format too; a flag wins over it.
  r = RunCommand(absl::StrCat("FLOWCLASS_OUTPUT=json ", kCtl, " stats ", conn, " 2>&1"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(parse(r.out, &st).ok()) << r.out.substr(0, 300);
  r = RunCommand(absl::StrCat("FLOWCLASS_OUTPUT=json ", kCtl, " stats -o text ", conn, " 2>&1"));
  EXPECT_THAT(r.out, HasSubstr("pmd thread 0 (lcore 1)"));

  // config: all keys, one key, and the version in the server field.
  r = Ctl("config get -o json " + conn);
  ASSERT_EQ(r.code, 0) << r.out;
  v1::Config cfg;
  ASSERT_TRUE(parse(r.out, &cfg).ok()) << r.out.substr(0, 300);
  EXPECT_EQ(cfg.server().version(), version);
  ASSERT_TRUE(cfg.values().count("pmd.tx_retries"));
  EXPECT_EQ(Ctl("config get " + conn + " pmd.tx_retries").out,
            cfg.values().at("pmd.tx_retries") + "\n");
  r = Ctl("config get -o json " + conn + " pmd.tx_retries");
  ASSERT_EQ(r.code, 0) << r.out;
  v1::Config one;
  ASSERT_TRUE(parse(r.out, &one).ok()) << r.out;
  EXPECT_EQ(one.values_size(), 1);
  EXPECT_EQ(one.values().at("pmd.tx_retries"), cfg.values().at("pmd.tx_retries"));

  // trace: the TraceResponse, the same rule and layer as the text.
  const std::string flow = "in_port=1,udp,nw_src=192.168.0.1,nw_dst=10.0.3.9,tp_src=5,tp_dst=1500";
  r = Ctl(absl::StrCat("trace -o json ", conn, " ", flow));
  ASSERT_EQ(r.code, 0) << r.out;
  v1::TraceResponse tr;
  ASSERT_TRUE(parse(r.out, &tr).ok()) << r.out;
  const CmdResult ttext = Ctl(absl::StrCat("trace ", conn, " ", flow));
  ASSERT_EQ(ttext.code, 0) << ttext.out;
  // The text says the enum's name without its prefix: LAYER_UPCALL is "upcall".
  EXPECT_THAT(ttext.out,
              HasSubstr(absl::StrCat(
                  "layer: ",
                  absl::AsciiStrToLower(absl::StripPrefix(v1::Layer_Name(tr.layer()), "LAYER_")),
                  "\n")));
  EXPECT_NE(tr.layer(), v1::LAYER_UNSPECIFIED);
  EXPECT_THAT(ttext.out, HasSubstr(absl::StrCat("rule: id=", tr.rule_id(), ",")));
  EXPECT_EQ(tr.rule_id(), 3u);  // 10.0.3.0/24 is rule 3's only destination

  // dump-megaflows and lookup-impl: their messages.
  r = Ctl("dump-megaflows -o json " + conn);
  ASSERT_EQ(r.code, 0) << r.out;
  v1::DumpMegaflowsResponse mfs;
  ASSERT_TRUE(parse(r.out, &mfs).ok()) << r.out.substr(0, 300);
  EXPECT_GT(mfs.megaflows_size(), 0) << "the looping traffic installed megaflows";
  r = Ctl("lookup-impl get -o json " + conn);
  ASSERT_EQ(r.code, 0) << r.out;
  v1::Config impls;
  ASSERT_TRUE(parse(r.out, &impls).ok()) << r.out;
  EXPECT_GT(impls.lookup_impls_size(), 0);

  // Refused, not ignored: an unknown format, json on a command that only
  // prints a summary.  Nothing changes.
  r = Ctl("stats -o xml " + conn);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--output \"xml\": expected text, json or yaml"));
  r = Ctl(absl::StrCat("add-rules -o json ", conn, " --progress off ", dir.File("rules.txt")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("-o json: this command prints a one-line summary only"));
  r = Ctl("stats -o json " + conn);
  ASSERT_TRUE(parse(r.out, &st).ok());
  EXPECT_EQ(st.generation(), 5u);
  EXPECT_EQ(d.Stop(30), 0) << d.Output();
}

// add-rules / replace-rules read `-` (stdin) and --rule TEXT as well as a
// FILE: `dump-rules | replace-rules -` resynchronises as one generation.
TEST(GrpcFlowclassdTest, RulesFromStdinAndCommandLine) {
  TempDir dir("flowclass_grpc_stdin");
  WritePcap(dir.File("in.pcap"), {PacketBuilder()
                                      .Eth(0x020000000001, 0x020000000002)
                                      .Ipv4(0xc0a80001, 0x0a000001)
                                      .Udp(1024, 1000)
                                      .PadTo(64)
                                      .Build()});
  WriteFile(dir.File("d.yaml"), DaemonConfig(dir, ""));
  Daemon d(dir, {"-c", dir.File("d.yaml")});
  const std::string target = d.WaitForGrpc(30);
  ASSERT_FALSE(target.empty()) << d.Output();
  const std::string conn = absl::StrCat("--plaintext --server ", target);
  auto client = PlaintextClient(target);
  ASSERT_TRUE(client.ok()) << client.status();

  WriteFile(dir.File("rules.txt"), RuleFile(30, 1));
  CmdResult r = Ctl(absl::StrCat("add-rules ", conn, " --progress off --batch-size 10 - < ",
                                 dir.File("rules.txt")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("add-rules: rules=30 batches=3 generation=3 "));
  r = Ctl(absl::StrCat("add-rules ", conn, " --progress off",
                       " --rule 'id=900,priority=5,udp,nw_dst=10.9.9.0/24,actions=drop'",
                       " --rule 'id=901,priority=6,tcp,tp_dst=22,actions=output:2'"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("add-rules: rules=2 batches=1 generation=4 "));
  auto g900 = (*client)->GetRule(900);
  ASSERT_TRUE(g900.ok()) << g900.status();
  EXPECT_EQ(g900->priority(), 5u);
  EXPECT_TRUE((*client)->GetRule(901).ok());
  auto st = (*client)->GetStats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->rules(), 32u);

  // A bad --rule is bad input naming it; --rule with a FILE is a usage error;
  // nothing changes.
  r = Ctl(absl::StrCat("add-rules ", conn, " --progress off --rule 'udp,nw_dst=300.1.1.1'"));
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--rule"));
  r = Ctl(absl::StrCat("add-rules ", conn, " --rule 'udp,actions=drop' ", dir.File("rules.txt")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("not both"));
  r = Ctl(absl::StrCat("add-rules ", conn, " --progress off - < /dev/null"));
  EXPECT_EQ(r.code, 0) << r.out;  // an empty input adds nothing
  st = (*client)->GetStats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->generation(), 4u);

  // dump-rules | replace-rules -: the same set, one generation, nothing deleted.
  r = RunCommand(absl::StrCat("timeout 60 ", kCtl, " dump-rules ", conn, " | timeout 60 ", kCtl,
                              " replace-rules ", conn, " - 2>&1"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("replace-rules: rules=", st->rules(),
                                            " inserted=0 replaced=", st->rules(),
                                            " deleted=0 generation=5")));
  EXPECT_EQ(d.Stop(30), 0) << d.Output();
}

TEST(GrpcFlowclassdTest, UnreachableServerAndPlaintextRemoteConfig) {
  // Nothing listens on port 1 of loopback: exit 5.
  CmdResult r = Ctl("stats --plaintext --server 127.0.0.1:1 --timeout-ms 2000");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_THAT(r.out, HasSubstr("(nothing listens there: is flowclassd running"));
  // Usage errors, found before dialing: an on/off option given a value
  // ("--all=no" once meant --all), --watch that would never sleep.
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"del-rules --all=no", "--all takes no value (got '--all=no')"},
           {"stats --plaintext=yes", "--plaintext takes no value"},
           {"add-rules --replace=false x.txt", "--replace takes no value"},
           {"stats --watch nan", "--watch needs a number of seconds from 0.001 to 86400"},
           {"stats --watch inf", "--watch needs a number of seconds"},
           {"stats --watch 1 --count 0", "--count needs a number of reports >= 1"},
           // an unknown option is one, with a value too
           {"dump-rules --bogus=1", "unknown option '--bogus'"},
           // one value would silently win
           {"dump-rules --limit 1 --limit 3", "--limit is given more than once"},
           {"dump-rules --cookie 1 --cookie 2", "--cookie is given more than once"},
           {"stats --timeout-ms 5 --timeout-ms 9", "--timeout-ms is given more than once"},
           {"stats --plaintext --plaintext", "--plaintext is given more than once"},
           {"config set pmd.tx_retries=3 pmd.tx_retries=5", "pmd.tx_retries is set more than once"},
           {"add-rules --classbench-ports 70000 x.txt", "--classbench-ports: 70000 is outside 1..65535"},
           {"del-rules 12z", "ID '12z' is not a number (decimal, or hex with 0x)"}}) {
    r = Ctl(args + " --server 127.0.0.1:1 --timeout-ms 2000");
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(want)) << args;
  }
  // An option at the end without its value names it (the command line is CLI11's).
  r = Ctl("dump-rules --server 127.0.0.1:1 --limit");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("flowclassctl dump-rules: --limit: 1 required"));
  // A --server (or $FLOWCLASS_SERVER) that is not HOST:PORT is a usage error,
  // not a connection failure (exit 5) or gRPC's log lines.
  for (const char* target : {"127.0.0.1", "''", "::1:50051", "127.0.0.1:0", "127.0.0.1:99999"}) {
    r = Ctl(absl::StrCat("stats --plaintext --server ", target));
    EXPECT_EQ(r.code, 2) << target << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr("expected HOST:PORT")) << target;
  }
  r = RunCommand(absl::StrCat("FLOWCLASS_SERVER=nohostport ", kCtl, " stats --plaintext 2>&1"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("$FLOWCLASS_SERVER 'nohostport': expected HOST:PORT"));
  // --classbench-ports on a native file would be ignored: refused.
  {
    TempDir cb("flowclass_ctl_cb");
    WriteFile(cb.File("native.txt"), "id=1,priority=1,udp,actions=drop\n");
    r = Ctl(absl::StrCat("add-rules --plaintext --server 127.0.0.1:1 --classbench-ports 3 ",
                         cb.File("native.txt")));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_THAT(r.out, HasSubstr("is a native rule file"));
  }
  // replay takes the ranges flowclassd's pipeline settings take.
  r = Ctl("replay --emc-insert-inv-prob 4294967295 x y");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--emc-insert-inv-prob: 4294967295 is outside 0..1073741824"));
  r = Ctl("replay --ranking-interval-ms 3600001 x y");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--ranking-interval-ms: 3600001 is outside 0..3600000"));
  // Plaintext on a non-loopback address needs allow_plaintext_remote.
  TempDir dir("flowclass_grpc_e2e");
  WriteFile(dir.File("in.pcap"), "");
  std::string cfg = DaemonConfig(dir, "");
  cfg.replace(cfg.find("address: 127.0.0.1"), 18, "address: 0.0.0.0");
  WriteFile(dir.File("d.yaml"), cfg);
  const CmdResult check =
      RunCommand(absl::StrCat(kDaemon, " --check-config ", dir.File("d.yaml"), " 2>&1"));
  ASSERT_NE(check.code, -1) << kDaemon << " could not run or did not exit";
  EXPECT_EQ(check.code, 3) << check.out;
  EXPECT_THAT(check.out, HasSubstr("grpc.allow_plaintext_remote"));

  // --check-config leaves the TLS files alone (secrets mounted only where the
  // daemon runs: the chart test checks rendered configs without them); the
  // start reads them: a missing one is a configuration error (3), named.
  WritePcap(dir.File("in.pcap"), {PacketBuilder()
                                      .Eth(0x020000000001, 0x020000000002)
                                      .Ipv4(0xc0a80001, 0x0a000001)
                                      .Udp(1000, 2000)
                                      .PadTo(64)
                                      .Build()});
  WriteFile(dir.File("d.yaml"), DaemonConfig(dir, ""));
  const std::string prefix = absl::StrCat("fcgrpc_tls_", getpid());
  const std::string tls = absl::StrCat(" ", dir.File("d.yaml"),
                                       " --set grpc.plaintext=false"
                                       " --set grpc.require_client_cert=false"
                                       " --set grpc.auth.disabled=true --set grpc.tls_key_file=",
                                       dir.File("missing.key"), " --set grpc.tls_cert_file=",
                                       dir.File("missing.pem"), " 2>&1");
  EXPECT_EQ(RunCommand(absl::StrCat(kDaemon, " --check-config", tls)).code, 0);
  const CmdResult start = RunCommand(
      absl::StrCat(kDaemon, " --file-prefix ", prefix, " --set run.duration_s=5 -c", tls));
  RemoveEalRuntimeDir(prefix);
  EXPECT_EQ(start.code, 3) << start.out;
  EXPECT_THAT(start.out, HasSubstr("grpc.tls_cert_file: cannot read"));
  // Files that are there but wrong are refused the same way, before EAL
  // starts (no "cannot listen" after the ports are up): a certificate given
  // as the key.
  const CmdResult made = RunCommand(absl::StrCat(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ",
      dir.File("cert.key"), " -out ", dir.File("cert.pem"), " -days 2 -subj /CN=t 2>&1"));
  ASSERT_EQ(made.code, 0) << "openssl (make test installs it): " << made.out;
  const CmdResult wrong = RunCommand(absl::StrCat(
      kDaemon, " --file-prefix ", prefix, " --set run.duration_s=5 -c ", dir.File("d.yaml"),
      " --set grpc.plaintext=false --set grpc.require_client_cert=false"
      " --set grpc.auth.disabled=true --set grpc.tls_key_file=", dir.File("cert.pem"),
      " --set grpc.tls_cert_file=", dir.File("cert.pem"), " 2>&1"));
  RemoveEalRuntimeDir(prefix);
  EXPECT_EQ(wrong.code, 3) << wrong.out;
  EXPECT_THAT(wrong.out, HasSubstr("grpc.tls_key_file: \"" + dir.File("cert.pem") +
                                   "\" holds no PEM private key"));
  EXPECT_THAT(wrong.out, Not(HasSubstr("flowclassd: running")));
}

// Another process holds the gRPC port with SO_REUSEPORT (as a second
// flowclassd on the same node would): flowclassd must not share it (gRPC
// sets SO_REUSEPORT by default, and it started and shared the connections)
// but exit 3 saying it cannot listen there.
TEST(GrpcFlowclassdTest, PortHeldWithReusePortIsAConfigError) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int one = 1;
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);

  TempDir dir("flowclass_grpc_reuseport");
  WritePcap(dir.File("in.pcap"), {PacketBuilder()
                                      .Eth(0x020000000001, 0x020000000002)
                                      .Ipv4(0xc0a80001, 0x0a000001)
                                      .Udp(1000, 2000)
                                      .PadTo(64)
                                      .Build()});
  WriteFile(dir.File("d.yaml"), DaemonConfig(dir, ""));
  const std::string prefix = absl::StrCat("fcgrpc_reuse_", getpid());
  const CmdResult r = RunCommand(absl::StrCat(
      "timeout 60 ", kDaemon, " --file-prefix ", prefix, " -c ", dir.File("d.yaml"),
      " --set run.duration_s=5 --set grpc.port=", port, " 2>&1"));
  RemoveEalRuntimeDir(prefix);
  ::close(fd);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("grpc.address/port: cannot listen on 127.0.0.1:",
                                            port, " (in use, also by a process that holds it "
                                                  "with SO_REUSEPORT")));
  EXPECT_THAT(r.out, Not(HasSubstr("grpc open on")));
}


// The config of a daemon the CLI tests program and read: one pcap frame read
// once (no traffic loop to keep the PMD busy; three of them share 2 cores).
std::string QuietDaemonConfig(TempDir& dir) {
  // Written once: the daemons of a test share it.
  if (!std::filesystem::exists(dir.File("in.pcap")))
    WritePcap(dir.File("in.pcap"), {PacketBuilder()
                                        .Eth(0x020000000001, 0x020000000002)
                                        .Ipv4(0xc0a80001, 0x0a000001)
                                        .Udp(1024, 1000)
                                        .PadTo(64)
                                        .Build()});
  std::string cfg = DaemonConfig(dir, "");
  const std::string loop = ",infinite_rx=1";
  cfg.erase(cfg.find(loop), loop.size());
  return cfg;
}

// A daemon of QuietDaemonConfig (`name`.yaml, `extra` arguments after it),
// up: its address and flowclassctl's connection options for it.
class CliDaemon : public Daemon {
 public:
  CliDaemon(TempDir& dir, const std::vector<std::string>& extra, const std::string& name = "")
      : Daemon(dir, Args(dir, extra, name), name),
        target(WaitForGrpc(60)),
        conn(absl::StrCat("--plaintext --server ", target)) {}
  const std::string target;
  const std::string conn;

 private:
  static std::vector<std::string> Args(TempDir& dir, const std::vector<std::string>& extra,
                                       const std::string& name) {
    WriteFile(dir.File(name + ".yaml"), QuietDaemonConfig(dir));
    std::vector<std::string> args = {"-c", dir.File(name + ".yaml")};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
};

// The rules of a rule file (dump-rules output) by id, as text.
std::map<uint64_t, std::string> RulesById(const std::string& text) {
  std::map<uint64_t, std::string> out;
  auto rules = ParseNativeRules(text);
  EXPECT_TRUE(rules.ok()) << rules.status();
  if (rules.ok())
    for (const Rule& r : *rules) out[r.id] = r.ToString();
  return out;
}

// diff-rules shows what differs (exit 1) or nothing (exit 0); sync-rules
// makes the server's set equal the file's in one batch of exactly the
// deletes, inserts and replacements diff-rules shows, then is a no-op; bad
// input and a batch the server refuses change nothing.
TEST(GrpcFlowclassdTest, DiffAndSyncRules) {
  TempDir dir("flowclass_grpc_sync");
  // A batch of at most 12 operations: the sync below of 13 is refused whole.
  CliDaemon d(dir, {"--set", "grpc.max_batch_ops=12"});
  ASSERT_FALSE(d.target.empty()) << d.Output();
  const std::string& conn = d.conn;
  auto client = PlaintextClient(d.target);
  ASSERT_TRUE(client.ok()) << client.status();

  WriteFile(dir.File("a.txt"), RuleFile(50, 1));
  CmdResult r = Ctl(absl::StrCat("add-rules ", conn, " --progress off --batch-size 10 ",
                                 dir.File("a.txt")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("generation=5 "));
  r = Ctl(absl::StrCat("diff-rules ", conn, " ", dir.File("a.txt")));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "diff-rules: added=0 removed=0 changed=0 unchanged=50\n");

  // b.txt: ids 1-5 gone, 10-12 changed (priority), 100-102 new.
  std::string b = "# b\n";
  for (const auto& [id, text] : RulesById(RuleFile(50, 1))) {
    if (id <= 5) continue;
    b += id >= 10 && id <= 12 ? absl::StrCat("id=", id, ",priority=7,udp,tp_dst=", id,
                                              ",actions=drop\n")
                              : text + "\n";
  }
  for (int id = 100; id <= 102; ++id)
    absl::StrAppend(&b, "id=", id, ",priority=3,tcp,tp_dst=", id, ",actions=output:2\n");
  WriteFile(dir.File("b.txt"), b);
  const std::map<uint64_t, std::string> want = RulesById(b);
  ASSERT_EQ(want.size(), 48u);
  r = Ctl(absl::StrCat("diff-rules ", conn, " ", dir.File("b.txt")));
  EXPECT_EQ(r.code, 1) << r.out;
  const std::map<uint64_t, std::string> before = RulesById(ReadFile(dir.File("a.txt")));
  std::string want_diff;
  for (uint64_t id : {1, 2, 3, 4, 5}) absl::StrAppend(&want_diff, "- ", before.at(id), "\n");
  for (uint64_t id : {10, 11, 12})
    absl::StrAppend(&want_diff, "- ", before.at(id), "\n+ ", want.at(id), "\n");
  for (uint64_t id : {100, 101, 102}) absl::StrAppend(&want_diff, "+ ", want.at(id), "\n");
  EXPECT_EQ(r.out, want_diff + "diff-rules: added=3 removed=5 changed=3 unchanged=42\n");

  // Bad input changes nothing: a rule that does not parse, an id twice.
  WriteFile(dir.File("bad.txt"), b + "id=200,udp,nw_dst=300.0.0.1,actions=drop\n");
  WriteFile(dir.File("twice.txt"), b + "id=7,priority=1,udp,actions=drop\n");
  for (const char* f : {"bad.txt", "twice.txt"}) {
    r = Ctl(absl::StrCat("sync-rules ", conn, " ", dir.File(f)));
    EXPECT_EQ(r.code, 3) << f << ": " << r.out;
  }
  EXPECT_THAT(r.out, HasSubstr("rule id 7 twice (rules #2 and #49)"));
  // 13 operations against grpc.max_batch_ops 12: the one batch is refused
  // whole (exit 4) and the server's set is still a.txt's.
  WriteFile(dir.File("c.txt"), b + "id=103,priority=3,tcp,tp_dst=103,actions=drop\n"
                                   "id=104,priority=3,tcp,tp_dst=104,actions=drop\n");
  r = Ctl(absl::StrCat("sync-rules ", conn, " ", dir.File("c.txt")));
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("RESOURCE_EXHAUSTED: batch 1: grpc.max_batch_ops: batch 1 has 13 "
                               "operations, limit 12"));
  auto st = (*client)->GetStats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->generation(), 5u);
  r = Ctl("dump-rules " + conn);
  EXPECT_EQ(RulesById(r.out), before);

  // From stdin: 11 operations in one batch, one generation.
  r = RunCommand(absl::StrCat("timeout 60 ", kCtl, " sync-rules ", conn, " - < ",
                              dir.File("b.txt"), " 2>&1"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "sync-rules: inserted=3 replaced=3 deleted=5 unchanged=42 generation=6\n");
  r = Ctl("dump-rules " + conn);
  EXPECT_EQ(RulesById(r.out), want);
  // Already equal: nothing sent, the generation stays; diff agrees.
  r = Ctl(absl::StrCat("sync-rules ", conn, " ", dir.File("b.txt")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "sync-rules: in sync, nothing sent: rules=48 generation=6\n");
  st = (*client)->GetStats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->generation(), 6u);
  r = Ctl(absl::StrCat("diff-rules ", conn, " ", dir.File("b.txt")));
  EXPECT_EQ(r.code, 0) << r.out;
  // --rule TEXT as the file: rule 9 changed, every other one removed.
  r = Ctl(absl::StrCat("diff-rules ", conn, " --rule 'id=9,priority=1,udp,actions=drop'"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\n+ id=9,priority=1,cookie=0x0,udp,actions=drop\n- id=10,"));
  EXPECT_THAT(r.out, HasSubstr("\ndiff-rules: added=0 removed=47 changed=1 unchanged=0\n"));
  EXPECT_EQ(d.Stop(30), 0) << d.Output();
}

// `json` and `yaml` hold the same tree: the same keys, lists and scalars (a
// JSON document is YAML too, so both load with yaml-cpp).
// `values` false: the scalars' types only (counters of two reports differ).
void ExpectSameTree(const YAML::Node& j, const YAML::Node& y, const std::string& at,
                    bool values) {
  ASSERT_EQ(j.Type(), y.Type()) << at;
  if (j.IsScalar()) {
    if (values) {
      EXPECT_EQ(j.Scalar(), y.Scalar()) << at;
    }
    // A JSON string (a 64-bit number too) stays a quoted string.
    EXPECT_EQ(j.Tag() == "!", y.Tag() == "!") << at << " " << j.Scalar();
  } else if (j.IsSequence()) {
    ASSERT_EQ(j.size(), y.size()) << at;
    for (size_t i = 0; i < j.size(); ++i)
      ExpectSameTree(j[i], y[i], absl::StrCat(at, "[", i, "]"), values);
  } else if (j.IsMap()) {
    ASSERT_EQ(j.size(), y.size()) << at;
    for (const auto& kv : j) {
      const std::string key = kv.first.Scalar();
      ASSERT_TRUE(y[key]) << at << "." << key << " missing from the YAML";
      ExpectSameTree(kv.second, y[key], at + "." + key, values);
    }
  }
}

// -o yaml on every reading command prints -o json's document as YAML; every
// connection option has its environment variable.
TEST(GrpcFlowclassdTest, YamlOutputAndEnvironment) {
  TempDir dir("flowclass_grpc_yaml");
  CliDaemon d(dir, {});
  ASSERT_FALSE(d.target.empty()) << d.Output();
  const std::string &target = d.target, &conn = d.conn;
  WriteFile(dir.File("rules.txt"), RuleFile(20, 1));
  CmdResult r = Ctl(absl::StrCat("add-rules ", conn, " --progress off ", dir.File("rules.txt")));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const std::string cmd :
       {"dump-rules", "stats", "config get", "config get pmd.tx_retries", "lookup-impl get",
        "dump-megaflows",
        "trace in_port=1,udp,nw_src=1.1.1.1,nw_dst=10.0.0.5,tp_src=1,tp_dst=1500"}) {
    const CmdResult j = RunCommand(absl::StrCat(kCtl, " ", cmd, " -o json ", conn));
    const CmdResult y = RunCommand(absl::StrCat(kCtl, " ", cmd, " -o yaml ", conn));
    ASSERT_EQ(j.code, 0) << cmd << ": " << j.out;
    ASSERT_EQ(y.code, 0) << cmd << ": " << y.out;
    EXPECT_TRUE(absl::StartsWith(y.out, "---\n")) << cmd << ": " << y.out;
    EXPECT_NE(y.out.find(":\n"), std::string::npos) << cmd << ": not block YAML: " << y.out;
    ExpectSameTree(YAML::Load(j.out), YAML::Load(y.out), cmd, cmd != "stats");
  }
  r = Ctl("stats -o yaml " + conn);
  EXPECT_EQ(YAML::Load(r.out)["rules"].as<std::string>(), "20") << r.out;

  // Every connection option from the environment; an option wins.
  const std::string env =
      absl::StrCat("FLOWCLASS_SERVER=", target, " FLOWCLASS_PLAINTEXT=yes FLOWCLASS_OUTPUT=yaml",
                   " FLOWCLASS_TIMEOUT_MS=20000 ");
  r = RunCommand(absl::StrCat(env, kCtl, " stats 2>&1"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(YAML::Load(r.out)["rules"].as<std::string>(), "20") << r.out;
  r = RunCommand(absl::StrCat(env, kCtl, " stats -o text 2>&1"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(absl::StartsWith(r.out, "---")) << r.out;
  // Without FLOWCLASS_PLAINTEXT the client speaks TLS to a plaintext port.
  r = RunCommand(absl::StrCat("FLOWCLASS_SERVER=", target, " FLOWCLASS_TIMEOUT_MS=3000 ", kCtl,
                              " stats 2>&1"));
  EXPECT_EQ(r.code, 5) << r.out;
  // A timeout of 1 ms from the environment is one.
  for (const auto& [vars, want] : std::vector<std::pair<std::string, std::string>>{
           {"FLOWCLASS_PLAINTEXT=maybe", "$FLOWCLASS_PLAINTEXT \"maybe\": expected 1, true"},
           {"FLOWCLASS_TIMEOUT_MS=soon", "$FLOWCLASS_TIMEOUT_MS needs a whole number >= 0"},
           {"FLOWCLASS_OUTPUT=xml", "$FLOWCLASS_OUTPUT \"xml\": expected text, json or yaml"},
           {"FLOWCLASS_SERVERS=a:1 FLOWCLASS_DISCOVER=dns:b",
            "$FLOWCLASS_SERVERS and $FLOWCLASS_DISCOVER are both set"},
           {"FLOWCLASS_ROLLOUT=sometimes FLOWCLASS_SERVERS=a:1",
            "$FLOWCLASS_ROLLOUT \"sometimes\": expected all-at-once or one-at-a-time"}}) {
    r = RunCommand(absl::StrCat(vars, " ", kCtl, " stats 2>&1"));
    EXPECT_EQ(r.code, 2) << vars << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(want)) << vars;
  }
  // A one-server command with only a fleet in the environment is refused.
  r = RunCommand(absl::StrCat("env -u FLOWCLASS_SERVER FLOWCLASS_SERVERS=", target, " ", kCtl,
                              " dump-rules --plaintext 2>&1"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("dump-rules talks to one server"));
  EXPECT_EQ(d.Stop(30), 0) << d.Output();
}

// The addresses of `name` as HOST:PORT (IPv6 bracketed), from
// `getent ahosts` (the C library's resolver, apart from flowclassctl's).
std::set<std::string> Resolve(const std::string& name, int port) {
  std::set<std::string> out;
  for (absl::string_view line :
       absl::StrSplit(RunCommand("getent ahosts " + name).out, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 2 || f[1] != "STREAM") continue;
    out.insert(f[0].find(':') == std::string::npos ? absl::StrCat(f[0], ":", port)
                                                   : absl::StrCat("[", f[0], "]:", port));
  }
  return out;
}

// The row of `node` in a fleet table ("" when there is none).
std::string Row(const std::string& table, const std::string& node) {
  for (absl::string_view line : absl::StrSplit(table, '\n'))
    if (absl::StartsWith(line, node + " ")) return std::string(line);
  return "";
}

// One command to a fleet of three daemons, one of them stopped: the same
// batches to every node, a table of result / generation / ack / error, an
// exit code and the failed nodes named; one-at-a-time stops at the first
// failure and names the nodes it did not touch; --discover dns:NAME.
TEST(GrpcFlowclassdTest, FleetOfThreeDaemons) {
  TempDir dir("flowclass_grpc_fleet");
  const int port1 = FreePort();
  CliDaemon d1(dir, {"--set", absl::StrCat("grpc.port=", port1)}, "n1");
  CliDaemon d2(dir, {}, "n2");
  CliDaemon d3(dir, {}, "n3");
  const std::string &n1 = d1.target, &n2 = d2.target, &n3 = d3.target;
  ASSERT_EQ(n1, absl::StrCat("127.0.0.1:", port1)) << d1.Output();
  ASSERT_FALSE(n2.empty()) << d2.Output();
  ASSERT_FALSE(n3.empty()) << d3.Output();
  WriteFile(dir.File("rules.txt"), RuleFile(30, 1));

  // All three up: every node takes the 3 batches, generation 3.
  CmdResult r = Ctl(absl::StrCat("add-rules --plaintext --servers ", n1, ",", n2, ",", n3,
                                 " --batch-size 10 ", dir.File("rules.txt")));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const std::string& n : {n1, n2, n3})
    EXPECT_THAT(Row(r.out, n), ::testing::MatchesRegex(n + " +ok +3 +rules=30 batches=3 +-"))
        << r.out;
  EXPECT_THAT(r.out, HasSubstr("fleet: nodes=3 ok=3 failed=0 not_touched=0\n"));

  ASSERT_EQ(d3.Stop(30), 0) << d3.Output();
  // all-at-once: n1 and n2 delete, n3 fails; exit 5, n3 named.
  r = Ctl(absl::StrCat("del-rules --plaintext --timeout-ms 5000 --servers ", n1, ",", n3, ",", n2,
                       " 1 2"));
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_THAT(Row(r.out, n1), ::testing::MatchesRegex(n1 + " +ok +4 +deleted=2 +-")) << r.out;
  EXPECT_THAT(Row(r.out, n2), ::testing::MatchesRegex(n2 + " +ok +4 +deleted=2 +-")) << r.out;
  EXPECT_THAT(Row(r.out, n3), ::testing::MatchesRegex(n3 + " +failed +- +- +UNAVAILABLE: .*"))
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("fleet: nodes=3 ok=2 failed=1 not_touched=0\n"));
  EXPECT_THAT(r.out, HasSubstr("flowclassctl del-rules: failed on 1 of 3 nodes: " + n3 + "\n"));

  // one-at-a-time from the environment: n1 syncs, n3 fails, n2 is not
  // touched (still without rules 1 and 2 but with 3).
  WriteFile(dir.File("one.txt"), "id=1,priority=1,udp,actions=drop\n");
  r = RunCommand(absl::StrCat("FLOWCLASS_PLAINTEXT=1 FLOWCLASS_TIMEOUT_MS=5000 FLOWCLASS_SERVERS=",
                              n1, ",", n3, ",", n2, " FLOWCLASS_ROLLOUT=one-at-a-time ", kCtl,
                              " sync-rules ", dir.File("one.txt"), " 2>&1"));
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_THAT(Row(r.out, n1),
              ::testing::MatchesRegex(n1 +
                                      " +ok +5 +inserted=1 replaced=0 deleted=28 unchanged=0 +-"))
      << r.out;
  EXPECT_THAT(Row(r.out, n3), ::testing::MatchesRegex(n3 + " +failed .*UNAVAILABLE.*")) << r.out;
  EXPECT_THAT(Row(r.out, n2), ::testing::MatchesRegex(n2 + " +not-touched +- +- +-")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("fleet: nodes=3 ok=1 failed=1 not_touched=1\n"));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("flowclassctl sync-rules: one-at-a-time stopped at ",
                                            n3, "; not touched: ", n2, "\n")));
  auto c2 = PlaintextClient(n2);
  ASSERT_TRUE(c2.ok());
  auto st2 = (*c2)->GetStats();
  ASSERT_TRUE(st2.ok());
  EXPECT_EQ(st2->rules(), 28u);
  EXPECT_EQ(st2->generation(), 4u);

  // config set and stats on the two that run; stats as JSON: one document
  // with every node's Stats.
  r = Ctl(absl::StrCat("config set --plaintext --servers ", n1, ",", n2,
                       " pipeline.emc_insert_inv_prob=7"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(Row(r.out, n2),
              ::testing::MatchesRegex(n2 + " +ok +- +pipeline.emc_insert_inv_prob=7 +-"))
      << r.out;
  r = RunCommand(absl::StrCat(kCtl, " stats --plaintext --timeout-ms 5000 -o json --servers ", n1,
                              ",", n2, ",", n3));
  EXPECT_EQ(r.code, 5) << r.out;
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &doc).ok()) << r.out;
  const auto& nodes = doc.fields().at("nodes").list_value();
  ASSERT_EQ(nodes.values_size(), 3) << r.out;
  const auto node = [&](int i, const std::string& key) -> const google::protobuf::Value& {
    return nodes.values(i).struct_value().fields().at(key);
  };
  EXPECT_EQ(node(0, "node").string_value(), n1);
  EXPECT_EQ(node(0, "result").string_value(), "ok");
  EXPECT_EQ(node(0, "generation").string_value(), "5");
  EXPECT_EQ(node(0, "response").struct_value().fields().at("rules").string_value(), "1");
  EXPECT_EQ(node(1, "response").struct_value().fields().at("rules").string_value(), "28");
  EXPECT_EQ(node(2, "result").string_value(), "failed");
  EXPECT_THAT(node(2, "error").string_value(), HasSubstr("UNAVAILABLE"));
  EXPECT_EQ(doc.fields().at("failed").number_value(), 1);

  // --discover dns:localhost:PORT1: every address localhost has (127.0.0.1,
  // maybe ::1 where nothing listens: that row fails).
  const std::set<std::string> addrs = Resolve("localhost", port1);
  ASSERT_TRUE(addrs.count(n1)) << "localhost does not resolve to 127.0.0.1 here";
  r = Ctl(absl::StrCat("stats --plaintext --timeout-ms 5000 --discover dns:localhost:", port1));
  EXPECT_EQ(r.code, addrs.size() == 1 ? 0 : 5) << r.out;
  EXPECT_THAT(Row(r.out, n1), ::testing::MatchesRegex(n1 + " +ok +5 +rules=1 pmds=1 packets=.*"))
      << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("fleet: nodes=", addrs.size(), " ok=1 ")));
  r = Ctl("stats --plaintext --discover dns:no-such-node.invalid:50051");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_THAT(r.out, HasSubstr("no-such-node.invalid does not resolve"));
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"stats --discover dns:", "expected dns:NAME or dns:NAME:PORT"},
           {"stats --discover dns:h:0", "PORT '0' is not in 1..65535"},
           {"stats --discover dns:::1:5", "an IPv6 address needs [brackets]"},
           {"stats --servers a:1,a:1", "'a:1' is listed twice"},
           {"stats --servers a:1,nohostport", "'nohostport' is not HOST:PORT"},
           {"stats --server a:1 --servers b:1", "give one of --server, --servers and --discover"},
           {"stats --rollout one-at-a-time", "--rollout goes with --servers or --discover"},
           {"stats --servers a:1 --watch 1", "--watch reads one server, not --servers"},
           {"config get --servers a:1", "config get reads one server, not --servers"},
           {"dump-rules --servers a:1", "dump-rules talks to one server"}}) {
    r = Ctl(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(want)) << args;
  }
  EXPECT_EQ(d1.Stop(30), 0) << d1.Output();
  EXPECT_EQ(d2.Stop(30), 0) << d2.Output();
}

// `completion bash`: a script bash accepts that completes command names,
// options, an option's values and a command's first word.
TEST(GrpcFlowclassdTest, BashCompletion) {
  TempDir dir("flowclass_completion");
  CmdResult r = RunCommand(absl::StrCat(kCtl, " completion bash > ", dir.File("c.bash")));
  ASSERT_EQ(r.code, 0);
  r = RunCommand(absl::StrCat("bash -n ", dir.File("c.bash"), " 2>&1"));
  EXPECT_EQ(r.code, 0) << r.out;
  const auto complete = [&](const std::string& words) {
    return RunCommand(absl::StrCat("bash -c 'source ", dir.File("c.bash"),
                                   "; COMP_WORDS=(", words,
                                   "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _flowclassctl;"
                                   " echo \"${COMPREPLY[*]}\"' 2>&1"))
        .out;
  };
  EXPECT_EQ(complete("flowclassctl sync"), "sync-rules\n");
  EXPECT_EQ(complete("flowclassctl d"), "del-rules dump-rules diff-rules dump-megaflows\n");
  EXPECT_EQ(complete("flowclassctl add-rules --roll"), "--rollout\n");
  EXPECT_EQ(complete("flowclassctl dump-rules --roll"), "\n");  // no fleet there
  EXPECT_EQ(complete("flowclassctl stats -o y"), "yaml\n");
  EXPECT_EQ(complete("flowclassctl sync-rules --format n"), "native\n");
  EXPECT_EQ(complete("flowclassctl config s"), "set\n");
  EXPECT_EQ(complete("flowclassctl replay --pipe"), "--pipeline\n");
  EXPECT_EQ(complete("flowclassctl replay --pipeline a"), "acl\n");
  // Every command of the main help is completed.
  const std::string help = RunCommand(absl::StrCat(kCtl, " --help")).out;
  const std::string all = absl::StrReplaceAll(complete("flowclassctl \"\""), {{"\n", " "}});
  for (const std::string cmd : {"replay", "add-rules", "del-rules", "dump-rules", "replace-rules",
                                "diff-rules", "sync-rules", "stats", "config", "trace",
                                "dump-megaflows", "stats-clear", "lookup-impl", "completion",
                                "version"}) {
    EXPECT_THAT(help, HasSubstr("  " + cmd + " ")) << cmd;
    EXPECT_THAT(" " + all, HasSubstr(" " + cmd + " ")) << cmd << ": " << all;
  }
  r = RunCommand(absl::StrCat(kCtl, " completion zsh 2>&1"));
  EXPECT_EQ(r.code, 2) << r.out;
}

}  // namespace
}  // namespace flowclass
