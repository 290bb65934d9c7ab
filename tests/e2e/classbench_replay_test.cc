// Replays every hypersplit ClassBench set (acl1, fw1, ipc1 at ~100 and ~1K
// rules) through the pipeline and requires mismatches=0; also runs the real
// flowclassctl binary to check the summary line and exit codes.
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/replay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/classbench_data.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

const std::string kDir = ClassBenchDir() + "/hypersplit/";
const std::string kCtl = std::string(FLOWCLASS_BINARY_DIR) + "/client/flowclassctl";

struct CacheSetup {
  const char* name;
  bool emc;
  bool smc;
  CdMode cd;
};
constexpr CacheSetup kSetups[] = {
    {"defaults", true, false, CdMode::kAuto},
    {"allOn", true, true, CdMode::kOn},
    {"allOff", false, false, CdMode::kOff},
    {"cdOnly", false, false, CdMode::kOn},
};

class ClassBenchReplay
    : public ::testing::TestWithParam<std::tuple<std::string, CacheSetup>> {};

TEST_P(ClassBenchReplay, NoMismatches) {
  const auto& [set, setup] = GetParam();
  ReplayOptions opts;
  opts.rules_path = kDir + set;
  opts.trace_path = kDir + set + "_trace";
  opts.repeat = 3;  // later passes run with what the first one cached
  opts.pipeline.emc = setup.emc;
  opts.pipeline.emc_config.insert_inv_prob = 1;  // the EMC serves pass 2+
  opts.pipeline.smc = setup.smc ? CacheMode::kOn : CacheMode::kOff;
  opts.pipeline.cd.mode = setup.cd;
  std::ostringstream out;
  absl::StatusOr<ReplayResult> r = RunReplay(opts, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mismatches, 0u) << out.str();
  EXPECT_GT(r->packets, 0u);
  const PmdStats& s = r->stats;
  EXPECT_EQ(s.packets, r->packets);
  EXPECT_EQ(s.packets, s.emc_hits + s.smc_hits + s.megaflow_hits + s.upcall_ok +
                           s.upcall_failed);
  // Each enabled layer actually served packets on the warm passes.
  if (setup.emc) {
    EXPECT_GT(s.emc_hits, 0u);
  }
  if (setup.smc && !setup.emc) {
    EXPECT_GT(s.smc_hits, 0u);
  }
  if (setup.cd == CdMode::kOn && !setup.emc && !setup.smc) {
    EXPECT_GT(s.cd_hits, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Hypersplit, ClassBenchReplay,
    ::testing::Combine(::testing::Values("acl1_100", "acl1_1K", "fw1_100",
                                         "fw1_1K", "ipc1_100", "ipc1_1K"),
                       ::testing::ValuesIn(kSetups)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param).name;
    });

// --megaflows off: every packet of every pass is a slow-path lookup and
// nothing is cached, with the verdicts of the default pipeline (both agree
// with the trace on every line).
class MegaflowsOff : public ::testing::TestWithParam<std::string> {};

TEST_P(MegaflowsOff, EveryPacketIsASlowPathLookup) {
  ReplayOptions opts;
  opts.rules_path = kDir + GetParam();
  opts.trace_path = kDir + GetParam() + "_trace";
  opts.repeat = 2;
  opts.pipeline.emc_config.insert_inv_prob = 1;
  std::ostringstream on_out;
  absl::StatusOr<ReplayResult> on = RunReplay(opts, on_out);
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->mismatches, 0u) << on_out.str();
  EXPECT_LT(on->stats.upcall_ok, on->packets);  // the default pipeline cached

  opts.pipeline.megaflows = false;
  opts.pipeline.smc = CacheMode::kOn;  // ignored with megaflows off
  opts.pipeline.cd.mode = CdMode::kOn;
  std::ostringstream out;
  absl::StatusOr<ReplayResult> r = RunReplay(opts, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mismatches, 0u) << out.str();
  EXPECT_EQ(r->packets, on->packets);
  const PmdStats& s = r->stats;
  EXPECT_EQ(s.packets, r->packets);
  EXPECT_EQ(s.upcall_ok, r->packets);
  EXPECT_EQ(s.emc_hits + s.smc_hits + s.megaflow_hits + s.cd_hits + s.upcall_failed, 0u);
  EXPECT_EQ(s.no_match, on->stats.no_match);
  EXPECT_THAT(out.str(), ::testing::HasSubstr("  megaflows: 0 in 0 subtables\n"));
  EXPECT_THAT(out.str(), ::testing::HasSubstr("  emc occupancy: 0/"));
}

INSTANTIATE_TEST_SUITE_P(Hypersplit, MegaflowsOff,
                         ::testing::Values("acl1_1K", "fw1_1K", "ipc1_1K"),
                         [](const auto& info) { return info.param; });

// Runs a shell command; out has its stdout and stderr.
CmdResult RunCmd(const std::string& cmd) { return RunCommand(cmd + " 2>&1"); }

TEST(FlowclassctlReplay, SummaryLineIsLastAndExitZero) {
  auto [code, out] = RunCmd(kCtl + " replay " + kDir + "fw1_100 " + kDir + "fw1_100_trace");
  EXPECT_EQ(code, 0) << out;
  // Exactly one summary line, and it is the last line.
  EXPECT_THAT(out, ::testing::ContainsRegex(
                       "\nreplay: packets=920 mismatches=0 mpps=[0-9]+\\.[0-9][0-9]\n$"));
  EXPECT_EQ(out.find("replay: "), out.rfind("replay: "));
}

TEST(FlowclassctlReplay, MismatchesGiveExitOne) {
  // A trace that expects the wrong rule for one line must be reported.
  const std::string trace = ::testing::TempDir() + "/wrong_trace";
  std::ifstream in(kDir + "acl1_100_trace");
  std::ofstream o(trace);
  std::string line;
  std::getline(in, line);  // "sip dip sport dport proto expected"
  std::istringstream f(line);
  uint64_t sip, dip, sp, dp, proto, expected;
  f >> sip >> dip >> sp >> dp >> proto >> expected;
  o << sip << ' ' << dip << ' ' << sp << ' ' << dp << ' ' << proto << ' '
    << (expected == 1 ? 2 : 1) << "\n";
  o.close();
  auto [code, out] = RunCmd(kCtl + " replay " + kDir + "acl1_100 " + trace);
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("mismatch: pass 1 trace line 1"));
  EXPECT_THAT(out, ::testing::HasSubstr("replay: packets=1 mismatches=1 "));
}

// A native rule file's ids are line numbers (comments and blank lines count)
// or id= values, which can exceed the number of rules: the trace's expected
// id is compared as it is, and only a value past every id means no match.
// Options also take "--opt=value".
TEST(FlowclassctlReplay, NativeRuleIdsBeyondTheRuleCount) {
  const std::string rules = ::testing::TempDir() + "/native_ids.rules";
  const std::string trace = ::testing::TempDir() + "/native_ids.trace";
  std::ofstream(rules) << "# two rules, on lines 2 and 4\n"
                          "id=7,priority=10,udp,actions=drop\n"
                          "\n"
                          "ip,nw_src=10.0.0.0/8,actions=output:2\n";
  // 11.0.0.1 udp -> id 7; 10.0.0.1 tcp -> the rule on line 4; 12.0.0.1 tcp
  // -> none (0, and 99: past every id).
  std::ofstream(trace) << "184549377 1 5 6 17 7\n"
                          "167772161 1 5 6 6 4\n"
                          "201326593 1 5 6 6 0\n"
                          "201326593 1 5 6 6 99\n";
  auto [code, out] = RunCmd(kCtl + " replay --repeat=2 --format=native " + rules + " " + trace);
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("replay: packets=8 mismatches=0 "));
  // And a wrong expectation there is still caught, with the trace's value.
  std::ofstream(trace) << "184549377 1 5 6 17 4\n";
  const CmdResult wrong = RunCmd(kCtl + " replay " + rules + " " + trace);
  EXPECT_EQ(wrong.code, 1) << wrong.out;
  EXPECT_THAT(wrong.out, ::testing::HasSubstr("expected rule 4 got 7"));
}

// The counters flowclassctl prints with --megaflows off say that every
// packet went through the slow path.
TEST(FlowclassctlReplay, MegaflowsOffCountersSaySlowPathOnly) {
  auto [code, out] = RunCmd(kCtl + " replay --megaflows off --repeat 3 " + kDir + "fw1_100 " +
                            kDir + "fw1_100_trace");
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("  packets received: 2760\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  miss with success upcall: 2760\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  emc hits: 0\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  megaflow hits: 0\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  megaflows: 0 in 0 subtables\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("replay: packets=2760 mismatches=0 "));
  const CmdResult bad = RunCmd(kCtl + " replay --megaflows maybe a b");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_THAT(bad.out, ::testing::StartsWith("flowclassctl replay: --megaflows takes on or off"));
}

// Against no rules every expected id reads as "no match", so any trace
// would pass: an empty rule file is refused unless asked for.
TEST(FlowclassctlReplay, EmptyRuleFileIsRefusedUnlessAsked) {
  const std::string empty = ::testing::TempDir() + "/empty.rules";
  std::ofstream(empty) << "# nothing but a comment\n\n";
  CmdResult r = RunCmd(kCtl + " replay " + empty + " " + kDir + "acl1_100_trace");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_THAT(r.out, ::testing::StartsWith("flowclassctl replay: " + empty + ": no rules"));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("replay: packets=")));
  r = RunCmd(kCtl + " replay --allow-empty-rules " + empty + " " + kDir + "acl1_100_trace");
  // Every id the trace expects is past the (no) rules: all 1000 are misses.
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("  no rule matched: 1000\n"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("replay: packets=1000 mismatches=0 "));
}

TEST(FlowclassctlReplay, BadInputsAreClearErrors) {
  CmdResult r = RunCmd(kCtl + " replay /nonexistent/rules " + kDir + "acl1_100_trace");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("/nonexistent/rules"));

  const std::string bad = ::testing::TempDir() + "/bad_rules";
  std::ofstream(bad) << "@10.0.0.0/8 0.0.0.0/0 0 : 65535 0 : 65535 0x06/0xFF\n"
                        "@10.0.0.0/33 0.0.0.0/0 0 : 65535 0 : 65535 0x06/0xFF\n";
  r = RunCmd(kCtl + " replay " + bad + " " + kDir + "acl1_100_trace");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("line 2"));

  r = RunCmd(kCtl + " replay --repeat 0 a b");
  EXPECT_EQ(r.code, 2) << r.out;
  // Errors read "flowclassctl <command>: <message>" (docs/flowclassctl.md).
  EXPECT_THAT(r.out, ::testing::StartsWith("flowclassctl replay: --repeat"));
  r = RunCmd(kCtl + " replay onlyone");
  EXPECT_EQ(r.code, 2) << r.out;
  // An unknown option is named; an option without its value is a usage error.
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"--bogus=1 a b", "unknown option '--bogus"}, {"a b --repeat", "--repeat"}}) {
    r = RunCmd(kCtl + " replay " + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_THAT(r.out, ::testing::StartsWith("flowclassctl replay: " + want)) << args;
  }
  r = RunCmd(kCtl + " frobnicate");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, ::testing::StartsWith("flowclassctl: unknown command"));
  r = RunCmd(kCtl + " replay --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("replay: packets=N mismatches=M mpps=X.XX"));
}

}  // namespace
}  // namespace flowclass
