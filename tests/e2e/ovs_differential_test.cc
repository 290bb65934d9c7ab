// Differential test against Open vSwitch, the classifier this project's
// pipeline is modelled on: the same ClassBench rules are loaded into our
// RuleTable and into a private ovs-vswitchd (userspace datapath, its own
// database and sockets in a temporary directory, in a network namespace of
// its own), and for TCP/UDP packets of the set's trace the rule OVS's
// `ofproto/trace` picks (its cookie is our rule id) must be the rule our
// RuleTable picks, or no rule in both.
//
// What OVS cannot express is translated or left out, never guessed:
//   * port ranges become their prefixes (RangeToPrefixes), one flow each;
//   * ports under any protocol (ClassBench) become a tcp and a udp flow, and
//     only TCP and UDP packets are traced (OVS reads ICMP type/code into the
//     port fields, where our key has none);
//   * a rule with ports on another protocol matches no traced packet in
//     either classifier and is left out of OVS.
// ClassBench rules have distinct priorities (first match), so the winner is
// defined in both.  Needs ovs-vswitchd (Debian openvswitch-switch-dpdk, which
// make test installs) and root for the network namespace.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/rules/rule_format.h"
#include "dataplane/rules/rule_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/classbench_data.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

std::string Dotted(uint32_t a) {
  return absl::StrFormat("%d.%d.%d.%d", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

// The (value, mask) prefixes of one port match: the range, or the masked
// value when the rule has no range there.
std::vector<std::pair<uint16_t, uint16_t>> PortPrefixes(const Rule& r, Field f,
                                                        const PortRange& range) {
  if (!range.IsFull()) return RangeToPrefixes(range.lo, range.hi);
  return {{static_cast<uint16_t>(r.match.value.Get(f)), static_cast<uint16_t>(r.match.mask.Get(f))}};
}

// OVS flows (ovs-ofctl add-flows lines) for one ClassBench rule.
std::vector<std::string> OvsFlows(const Rule& r) {
  const uint64_t proto_mask = r.match.mask.Get(Field::kNwProto);
  const uint64_t proto = r.match.value.Get(Field::kNwProto);
  EXPECT_TRUE(proto_mask == 0 || proto_mask == 0xff) << r.ToString();
  std::string l3 = absl::StrCat(
      "priority=", r.priority, ",cookie=", absl::StrFormat("%#x", r.id), ",ip,nw_src=",
      Dotted(static_cast<uint32_t>(r.match.value.Get(Field::kIpv4Src))), "/",
      Dotted(static_cast<uint32_t>(r.match.mask.Get(Field::kIpv4Src))), ",nw_dst=",
      Dotted(static_cast<uint32_t>(r.match.value.Get(Field::kIpv4Dst))), "/",
      Dotted(static_cast<uint32_t>(r.match.mask.Get(Field::kIpv4Dst))));
  const auto src = PortPrefixes(r, Field::kTpSrc, r.match.tp_src);
  const auto dst = PortPrefixes(r, Field::kTpDst, r.match.tp_dst);
  const bool any_ports = !(src.size() == 1 && src[0].second == 0 && dst.size() == 1 &&
                           dst[0].second == 0);
  if (!any_ports)
    return {proto_mask ? absl::StrCat(l3, ",nw_proto=", proto, ",actions=drop")
                       : absl::StrCat(l3, ",actions=drop")};
  std::vector<std::string> protos;
  if (proto_mask == 0) protos = {"tcp", "udp"};
  else if (proto == 6) protos = {"tcp"};
  else if (proto == 17) protos = {"udp"};
  else return {};  // ports on another protocol: no traced packet matches
  std::vector<std::string> flows;
  for (const std::string& p : protos)
    for (const auto& [sv, sm] : src)
      for (const auto& [dv, dm] : dst)
        flows.push_back(absl::StrFormat("%s,nw_proto=%d,tp_src=%#x/%#x,tp_dst=%#x/%#x,actions=drop",
                                        l3, p == "tcp" ? 6 : 17, sv, sm, dv, dm));
  return flows;
}

// A private OVS: ovsdb-server and ovs-vswitchd with every file in `dir`,
// stopped by PID when destroyed.
class PrivateOvs {
 public:
  explicit PrivateOvs(const TempDir& dir) : dir_(dir) {
    setenv("OVS_RUNDIR", dir.path().c_str(), 1);
    setenv("OVS_LOGDIR", dir.path().c_str(), 1);
    setenv("OVS_DBDIR", dir.path().c_str(), 1);
    db_ = "unix:" + dir.File("db.sock");
    const CmdResult made = RunCommand(absl::StrCat(
        "ovsdb-tool create ", dir.File("conf.db"),
        " /usr/share/openvswitch/vswitch.ovsschema 2>&1"));
    if (made.code != 0) {
      error_ = "ovsdb-tool: " + made.out;
      return;
    }
    ovsdb_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/ovsdb-server", dir.File("conf.db"),
                                 "--remote=punix:" + dir.File("db.sock"),
                                 "--unixctl=" + dir.File("ovsdb.ctl"),
                                 "--log-file=" + dir.File("ovsdb.log")},
        dir.File("ovsdb.out"));
    if (!WaitForFile(dir.File("db.sock"))) {
      error_ = "ovsdb-server did not create its socket";
      return;
    }
    if (CmdResult r = Vsctl("--no-wait init"); r.code != 0) {
      error_ = "ovs-vsctl init: " + r.out;
      return;
    }
    // Its own network namespace: the bridge's internal port is a tap device.
    vswitchd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/bin/unshare", "-n", "/usr/sbin/ovs-vswitchd", db_,
                                 "--disable-system", "--unixctl=" + dir.File("vswitchd.ctl"),
                                 "--log-file=" + dir.File("vswitchd.log")},
        dir.File("vswitchd.out"));
    if (CmdResult r = Vsctl("add-br br0 -- set bridge br0 datapath_type=netdev"); r.code != 0) {
      error_ = "ovs-vsctl add-br: " + r.out;
      return;
    }
    if (!WaitForFile(dir.File("br0.mgmt"))) error_ = "ovs-vswitchd did not open br0.mgmt";
  }
  // ChildProcess kills by PID at destruction: vswitchd first.
  ~PrivateOvs() {
    vswitchd_.reset();
    ovsdb_.reset();
  }
  const std::string& error() const { return error_; }
  CmdResult Vsctl(const std::string& args) {
    return RunCommand(absl::StrCat("timeout 20 ovs-vsctl --db=", db_, " ", args, " 2>&1"));
  }
  CmdResult Ofctl(const std::string& args) {
    return RunCommand(absl::StrCat("timeout 60 ovs-ofctl ", args, " 2>&1"));
  }
  std::string Mgmt() const { return "unix:" + dir_.File("br0.mgmt"); }
  CmdResult Trace(const std::string& flow) {
    return RunCommand(absl::StrCat("timeout 20 ovs-appctl -t ", dir_.File("vswitchd.ctl"),
                                   " ofproto/trace br0 '", flow, "' 2>&1"));
  }

 private:
  static bool WaitForFile(const std::string& path) {
    for (int i = 0; i < 200; ++i) {
      struct stat st;
      if (stat(path.c_str(), &st) == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  const TempDir& dir_;
  std::string db_, error_;
  std::unique_ptr<ChildProcess> ovsdb_, vswitchd_;
};

void CompareWithOvs(const std::string& set, size_t max_packets) {
  const std::string base = ClassBenchDir() + "/" + set;
  absl::StatusOr<std::vector<Rule>> rules = LoadRuleFile(base, RuleFormat::kClassBench);
  ASSERT_TRUE(rules.ok()) << rules.status();
  absl::StatusOr<std::vector<TraceEntry>> trace = LoadTraceFile(base + "_trace");
  ASSERT_TRUE(trace.ok()) << trace.status();

  RuleTable table;
  std::vector<RuleOp> ops;
  std::set<uint32_t> priorities;
  for (const Rule& r : *rules) {
    ops.push_back(RuleOp::Insert(r));
    priorities.insert(r.priority);
  }
  ASSERT_TRUE(table.ApplyBatch(ops).ok());
  ASSERT_EQ(priorities.size(), rules->size()) << "first-match sets have distinct priorities";
  ASSERT_LE(*priorities.rbegin(), 65535u) << "OVS priorities are 16 bits";

  TempDir dir("flowclass_ovs");
  PrivateOvs ovs(dir);
  ASSERT_TRUE(ovs.error().empty()) << ovs.error() << " (logs in " << dir.path() << ")";
  std::ofstream flows(dir.File("flows.txt"));
  size_t n_flows = 0;
  for (const Rule& r : *rules)
    for (const std::string& f : OvsFlows(r)) {
      flows << f << "\n";
      ++n_flows;
    }
  flows.close();
  ASSERT_EQ(ovs.Ofctl("del-flows " + ovs.Mgmt()).code, 0);  // the default NORMAL flow
  const CmdResult added = ovs.Ofctl(absl::StrCat("add-flows ", ovs.Mgmt(), " ", dir.File("flows.txt")));
  ASSERT_EQ(added.code, 0) << added.out;

  const std::regex winner(R"(\n *0\. [^\n]*, cookie (0x[0-9a-f]+))");
  size_t traced = 0, matched = 0;
  for (const TraceEntry& e : *trace) {
    const FlowKey& k = e.key;
    const uint64_t proto = k.Get(Field::kNwProto);
    if (proto != 6 && proto != 17) continue;
    const char* l4 = proto == 6 ? "tcp" : "udp";
    const std::string flow = absl::StrCat(
        "in_port=1,", l4, ",nw_src=", Dotted(static_cast<uint32_t>(k.Get(Field::kIpv4Src))),
        ",nw_dst=", Dotted(static_cast<uint32_t>(k.Get(Field::kIpv4Dst))), ",", l4,
        "_src=", k.Get(Field::kTpSrc), ",", l4, "_dst=", k.Get(Field::kTpDst));
    const CmdResult t = ovs.Trace(flow);
    ASSERT_EQ(t.code, 0) << flow << "\n" << t.out;
    std::smatch m;
    const uint64_t ovs_id =
        std::regex_search(t.out, m, winner) ? std::stoull(m[1].str(), nullptr, 16) : 0;
    Flow wc;
    const Rule* ours = table.Lookup(k, &wc);
    EXPECT_EQ(ours ? ours->id : 0, ovs_id) << set << ": " << flow << "\n" << t.out;
    matched += ovs_id != 0;
    if (++traced == max_packets) break;
  }
  // The comparison must have had something to compare.
  EXPECT_GE(traced, max_packets / 2) << set;
  EXPECT_GE(matched, traced / 2) << set;
  std::printf("%s: %zu rules as %zu OVS flows, %zu packets traced, %zu matched a rule\n",
              set.c_str(), rules->size(), n_flows, traced, matched);
}

void RequireOvs() {
  if (RunCommand("command -v ovs-vswitchd ovs-vsctl ovs-ofctl ovs-appctl ovsdb-tool >/dev/null 2>&1")
          .code != 0)
    GTEST_FAIL() << "Open vSwitch is not installed (make test installs openvswitch-switch-dpdk)";
  if (geteuid() != 0) GTEST_FAIL() << "needs root (a network namespace for ovs-vswitchd)";
}

TEST(OvsDifferentialTest, Acl1RulesAgreeWithOvs) {
  ASSERT_NO_FATAL_FAILURE(RequireOvs());
  CompareWithOvs("hypersplit/acl1_100", 150);
}

TEST(OvsDifferentialTest, Fw1RulesAgreeWithOvs) {
  ASSERT_NO_FATAL_FAILURE(RequireOvs());
  CompareWithOvs("hypersplit/fw1_100", 150);
}

TEST(OvsDifferentialTest, Ipc1RulesAgreeWithOvs) {
  ASSERT_NO_FATAL_FAILURE(RequireOvs());
  CompareWithOvs("hypersplit/ipc1_100", 150);
}

// The 1K sets: more overlap, longer port-range expansions.
TEST(OvsDifferentialTest, ThousandRuleSetsAgreeWithOvs) {
  ASSERT_NO_FATAL_FAILURE(RequireOvs());
  for (const char* set : {"hypersplit/acl1_1K", "hypersplit/fw1_1K", "hypersplit/ipc1_1K"})
    CompareWithOvs(set, 250);
}

}  // namespace
}  // namespace flowclass
