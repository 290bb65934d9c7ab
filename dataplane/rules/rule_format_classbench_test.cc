// The ClassBench format against the sets in tests/data/classbench: every
// workload file parses, spot checks of both column forms, the traces agree
// with a linear scan, and the sets survive a round trip through native files.
// These tests read the data directory (tests/common/classbench_data.h): a
// missing file fails them (classbench_missing_data_test checks it).
#include "dataplane/rules/rule_format.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_format_testing.h"
#include "gtest/gtest.h"
#include "tests/common/classbench_data.h"

namespace flowclass {
namespace {

const std::string kClassBenchDir = ClassBenchDir();

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// ------------------------------------------------------------ ClassBench

std::vector<std::string> ClassBenchRuleFiles() {
  std::vector<std::string> files;
  for (const char* sub : {"hypersplit", "neurocuts"}) {
    for (const auto& e :
         std::filesystem::directory_iterator(kClassBenchDir + "/" + sub)) {
      const std::string p = e.path().string();
      if (p.ends_with("_trace")) continue;
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ClassBenchTest, EveryWorkloadFileParses) {
  const std::vector<std::string> files = ClassBenchRuleFiles();
  ASSERT_GE(files.size(), 30u) << "workload set incomplete in " << kClassBenchDir;
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const std::string text = ReadAll(path);
    size_t at_lines = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '@' && (i == 0 || text[i - 1] == '\n')) ++at_lines;
    }
    absl::StatusOr<std::vector<Rule>> rules =
        LoadRuleFile(path, RuleFormat::kAuto);
    ASSERT_TRUE(rules.ok()) << rules.status();
    ASSERT_EQ(rules->size(), at_lines);
    const size_t n = rules->size();
    for (size_t i = 0; i < n; ++i) {
      const Rule& r = (*rules)[i];
      ASSERT_EQ(r.id, i + 1);
      ASSERT_EQ(r.priority, n - i);
      ASSERT_EQ(r.cookie, 0u);
      ASSERT_EQ(r.action, Action::Output(1));
      ASSERT_EQ(r.match.mask.Get(Field::kEthType), 0xffffu);
      ASSERT_EQ(r.match.value.Get(Field::kEthType), kEthTypeIpv4);
      // Every value lies inside its mask, and ranges replace masks.
      ASSERT_EQ(r.match.value & r.match.mask, r.match.value);
      ASSERT_LE(r.match.tp_src.lo, r.match.tp_src.hi);
      ASSERT_LE(r.match.tp_dst.lo, r.match.tp_dst.hi);
      ASSERT_EQ(r.match.mask.Get(Field::kTpSrc), 0u);
      ASSERT_EQ(r.match.mask.Get(Field::kTpDst), 0u);
    }
  }
}

TEST(ClassBenchTest, SpaceFormSpotChecks) {
  absl::StatusOr<std::vector<Rule>> rules =
      LoadRuleFile(kClassBenchDir + "/hypersplit/acl1_100");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 99u);
  // @64.91.107.21/32 128.222.130.81/32 0 : 65535 1221 : 1221 0x06/0xFF
  const Rule& r1 = (*rules)[0];
  EXPECT_EQ(r1.id, 1u);
  EXPECT_EQ(r1.priority, 99u);
  EXPECT_EQ(r1.match.value.Get(Field::kIpv4Src), Ip(64, 91, 107, 21));
  EXPECT_EQ(r1.match.mask.Get(Field::kIpv4Src), 0xffffffffu);
  EXPECT_EQ(r1.match.value.Get(Field::kIpv4Dst), Ip(128, 222, 130, 81));
  EXPECT_TRUE(r1.match.tp_src.IsFull());
  EXPECT_EQ(r1.match.tp_dst, (PortRange{1221, 1221}));
  EXPECT_EQ(r1.match.value.Get(Field::kNwProto), 6u);
  EXPECT_EQ(r1.match.mask.Get(Field::kNwProto), 0xffu);
  EXPECT_EQ(r1.match.mask.Get(Field::kTcpFlags), 0u);
  EXPECT_EQ(r1.match.mask.Get(Field::kInPort), 0u);

  absl::StatusOr<std::vector<Rule>> fw =
      LoadRuleFile(kClassBenchDir + "/hypersplit/fw1_100");
  ASSERT_TRUE(fw.ok()) << fw.status();
  // line 87: @198.238.184.72/30 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00
  const Rule& r87 = (*fw)[86];
  EXPECT_EQ(r87.id, 87u);
  EXPECT_EQ(r87.priority, 93u - 87 + 1);
  EXPECT_EQ(r87.match.value.Get(Field::kIpv4Src), Ip(198, 238, 184, 72));
  EXPECT_EQ(r87.match.mask.Get(Field::kIpv4Src), 0xfffffffcu);
  EXPECT_EQ(r87.match.mask.Get(Field::kIpv4Dst), 0u);
  EXPECT_EQ(r87.match.mask.Get(Field::kNwProto), 0u);
  EXPECT_TRUE(r87.match.tp_src.IsFull());
  EXPECT_TRUE(r87.match.tp_dst.IsFull());

  absl::StatusOr<std::vector<Rule>> ipc =
      LoadRuleFile(kClassBenchDir + "/hypersplit/ipc1_100");
  ASSERT_TRUE(ipc.ok()) << ipc.status();
  // line 43: @0.0.0.0/0 93.208.53.90/32 25 : 25 0 : 65535 0x06/0xFF
  const Rule& r43 = (*ipc)[42];
  EXPECT_EQ(r43.match.mask.Get(Field::kIpv4Src), 0u);
  EXPECT_EQ(r43.match.tp_src, (PortRange{25, 25}));
  EXPECT_TRUE(r43.match.tp_dst.IsFull());
}

TEST(ClassBenchTest, TabFormWithTcpFlagsSpotChecks) {
  absl::StatusOr<std::vector<Rule>> rules =
      LoadRuleFile(kClassBenchDir + "/neurocuts/fw1_1k");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 857u);
  // line 6: @37.184.89.213/32 39.150.226.137/32 0 : 65535 110 : 110
  //         0x06/0xFF 0x0200/0x1200  -> flags masked to 12 bits: 0x200/0x200
  const Rule& r6 = (*rules)[5];
  EXPECT_EQ(r6.id, 6u);
  EXPECT_EQ(r6.priority, 857u - 6 + 1);
  EXPECT_EQ(r6.match.value.Get(Field::kIpv4Dst), Ip(39, 150, 226, 137));
  EXPECT_EQ(r6.match.tp_dst, (PortRange{110, 110}));
  EXPECT_EQ(r6.match.value.Get(Field::kTcpFlags), 0x200u);
  EXPECT_EQ(r6.match.mask.Get(Field::kTcpFlags), 0x200u);

  absl::StatusOr<std::vector<Rule>> acl =
      LoadRuleFile(kClassBenchDir + "/neurocuts/acl1_1k");
  ASSERT_TRUE(acl.ok()) << acl.status();
  // line 2: ... 0x1000/0x1000: only bit 12, outside our 12-bit field -> any.
  EXPECT_EQ((*acl)[1].match.mask.Get(Field::kTcpFlags), 0u);
  EXPECT_EQ((*acl)[1].match.value.Get(Field::kIpv4Src), Ip(176, 19, 181, 52));

  absl::StatusOr<std::vector<Rule>> acl2 =
      LoadRuleFile(kClassBenchDir + "/neurocuts/acl2_10k");
  ASSERT_TRUE(acl2.ok()) << acl2.status();
  // line 1355: @16.232.142.121/32 40.23.203.124/31 ... 0x01/0xFF 0x0303/0xffff
  const Rule& r = (*acl2)[1354];
  EXPECT_EQ(r.match.value.Get(Field::kIpv4Dst), Ip(40, 23, 203, 124));
  EXPECT_EQ(r.match.mask.Get(Field::kIpv4Dst), 0xfffffffeu);
  EXPECT_EQ(r.match.value.Get(Field::kNwProto), 1u);
  EXPECT_EQ(r.match.value.Get(Field::kTcpFlags), 0x303u);
  EXPECT_EQ(r.match.mask.Get(Field::kTcpFlags), 0xfffu);
}

TEST(ClassBenchTest, PrefixValueIsMaskedAndOptionsSpreadPorts) {
  const std::string text =
      "@10.1.2.3/8 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00\n"
      "\n"
      "# comment lines do not count as rules\n"
      "@10.1.2.3/32 1.2.3.4/24 1 : 2 3 : 4 0x11/0xFF\n"
      "@1.1.1.1/32 1.1.1.1/32 0 : 65535 0 : 65535 0x06/0xFF\n";
  absl::StatusOr<std::vector<Rule>> rules =
      ParseClassBench(text, ClassBenchOptions{.num_ports = 2});
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 3u);
  EXPECT_EQ((*rules)[0].match.value.Get(Field::kIpv4Src), Ip(10, 0, 0, 0));
  EXPECT_EQ((*rules)[0].match.mask.Get(Field::kIpv4Src), 0xff000000u);
  EXPECT_EQ((*rules)[1].id, 2u);
  EXPECT_EQ((*rules)[1].priority, 2u);
  EXPECT_EQ((*rules)[1].match.value.Get(Field::kIpv4Dst), Ip(1, 2, 3, 0));
  EXPECT_EQ((*rules)[1].match.tp_src, (PortRange{1, 2}));
  EXPECT_EQ((*rules)[1].match.tp_dst, (PortRange{3, 4}));
  EXPECT_EQ((*rules)[0].action, Action::Output(1));
  EXPECT_EQ((*rules)[1].action, Action::Output(2));
  EXPECT_EQ((*rules)[2].action, Action::Output(1));

  absl::StatusOr<std::vector<Rule>> dropped =
      ParseClassBench(text, ClassBenchOptions{.action = Action::Drop()});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ((*dropped)[2].action, Action::Drop());
}

// The traces shipped with the HyperSplit sets name, for every packet, the
// 1-based line of the first filter that matches it.  A linear scan over our
// parsed rules (highest priority wins) must find exactly that rule: this
// checks addresses, prefixes, ranges and protocol masks all at once.
TEST(ClassBenchTest, TracesAgreeWithLinearScanOfParsedRules) {
  for (const char* set :
       {"acl1_100", "fw1_100", "ipc1_100", "acl1_1K", "fw1_1K", "ipc1_1K"}) {
    SCOPED_TRACE(set);
    const std::string base = kClassBenchDir + "/hypersplit/" + set;
    absl::StatusOr<std::vector<Rule>> rules = LoadRuleFile(base);
    ASSERT_TRUE(rules.ok()) << rules.status();
    absl::StatusOr<std::vector<TraceEntry>> trace =
        LoadTraceFile(base + "_trace");
    ASSERT_TRUE(trace.ok()) << trace.status();
    ASSERT_GT(trace->size(), 900u);
    for (size_t t = 0; t < trace->size(); ++t) {
      const Flow key = (*trace)[t].key.ToFlow();
      const Rule* best = nullptr;
      for (const Rule& r : *rules) {
        if (r.match.Matches(key) && (best == nullptr || RuleBeats(r, *best))) {
          best = &r;
        }
      }
      ASSERT_NE(best, nullptr) << "trace line " << t + 1;
      ASSERT_EQ(best->id, (*trace)[t].expected) << "trace line " << t + 1;
    }
  }
}

TEST(NativeTest, ClassBenchSetsRoundTripThroughNativeFiles) {
  for (const char* set : {"/hypersplit/fw1_1K", "/neurocuts/acl2_1k"}) {
    absl::StatusOr<std::vector<Rule>> rules =
        LoadRuleFile(kClassBenchDir + set, RuleFormat::kClassBench,
                     ClassBenchOptions{.num_ports = 4});
    ASSERT_TRUE(rules.ok()) << rules.status();
    const std::string text =
        absl::StrCat("# converted from ", set, "\n", FormatNativeRules(*rules));
    absl::StatusOr<std::vector<Rule>> back = ParseNativeRules(text);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, *rules) << set;
  }
}

}  // namespace
}  // namespace flowclass
