// Replays every hypersplit ClassBench set (acl1, fw1, ipc1 at ~100 and ~1K
// rules) through the pipeline and requires mismatches=0; also runs the real
// flowclassctl binary to check the summary line and exit codes.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/replay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

const std::string kDir = std::string(FLOWCLASS_CLASSBENCH_DIR) + "/hypersplit/";
const std::string kCtl = std::string(FLOWCLASS_BINARY_DIR) + "/client/flowclassctl";

class ClassBenchReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(ClassBenchReplay, NoMismatches) {
  ReplayOptions opts;
  opts.rules_path = kDir + GetParam();
  opts.trace_path = kDir + GetParam() + "_trace";
  opts.repeat = 2;  // second pass runs with whatever the first one cached
  std::ostringstream out;
  absl::StatusOr<ReplayResult> r = RunReplay(opts, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mismatches, 0u) << out.str();
  EXPECT_GT(r->packets, 0u);
  EXPECT_EQ(r->stats.packets, r->packets);
}

INSTANTIATE_TEST_SUITE_P(Hypersplit, ClassBenchReplay,
                         ::testing::Values("acl1_100", "acl1_1K", "fw1_100",
                                           "fw1_1K", "ipc1_100", "ipc1_1K"));

// Runs a shell command, returns (exit status, stdout).
std::pair<int, std::string> RunCmd(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

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

TEST(FlowclassctlReplay, BadInputsAreClearErrors) {
  auto [code, out] = RunCmd(kCtl + " replay /nonexistent/rules " + kDir + "acl1_100_trace");
  EXPECT_EQ(code, 3) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("/nonexistent/rules"));

  const std::string bad = ::testing::TempDir() + "/bad_rules";
  std::ofstream(bad) << "@10.0.0.0/8 0.0.0.0/0 0 : 65535 0 : 65535 0x06/0xFF\n"
                        "@10.0.0.0/33 0.0.0.0/0 0 : 65535 0 : 65535 0x06/0xFF\n";
  std::tie(code, out) = RunCmd(kCtl + " replay " + bad + " " + kDir + "acl1_100_trace");
  EXPECT_EQ(code, 3) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("line 2"));

  std::tie(code, out) = RunCmd(kCtl + " replay --repeat 0 a b");
  EXPECT_EQ(code, 2) << out;
  std::tie(code, out) = RunCmd(kCtl + " replay onlyone");
  EXPECT_EQ(code, 2) << out;
  std::tie(code, out) = RunCmd(kCtl + " frobnicate");
  EXPECT_EQ(code, 2) << out;
  std::tie(code, out) = RunCmd(kCtl + " replay --help");
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("replay: packets=N mismatches=M mpps=X.XX"));
}

}  // namespace
}  // namespace flowclass
