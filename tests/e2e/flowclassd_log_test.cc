// The real flowclassd's log (server/log.h, docs/flowclassd.md "Log"): with
// --log-format json every line it prints parses as a JSON object with ts,
// level and msg; --log-level warn drops the info lines; text lines carry a
// timestamp and level before "flowclassd: " and the message's words; bad
// --log-* values are a bad command line (2), a bad log.* key a config error
// (3).  Each daemon runs on net_pcap vdevs for a second (run.duration_s),
// with its own --file-prefix.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char* const kDaemon = FLOWCLASS_BINARY_DIR "/server/flowclassd";

// One PMD on a pcap of 8 frames, looped; no store (a warning), no rules.
std::string WriteConfig(const TempDir& dir) {
  WritePcap(dir.File("in.pcap"), std::vector<std::vector<uint8_t>>(8, std::vector<uint8_t>(60)));
  const std::string path = dir.File("d.yaml");
  WriteFile(path, absl::StrCat(R"(
eal: {hugepages: false, memory_mb: 256, pci: false, lcore_map: "0@0,1@1", log_level: error}
pmd: {lcores: [1], idle_sleep_us: 100}
ports:
  - {number: 1, device: net_pcap0, args: "rx_pcap=)", dir.File("in.pcap"), R"(,tx_pcap=)",
                               dir.File("out.pcap"), R"("}
stats: {interval_ms: 100, final: true}
run: {duration_s: 1}
)"));
  return path;
}

// Runs flowclassd with `args` to its end; its stdout and stderr.
std::string RunDaemon(const TempDir& dir, const std::vector<std::string>& args,
                      const std::string& name, int* code) {
  std::vector<std::string> argv = {"-c", WriteConfig(dir)};
  argv.insert(argv.end(), args.begin(), args.end());
  EalDaemonProcess d(kDaemon, argv, absl::StrCat("fclog_", name, "_", getpid()),
                     dir.File(name + ".out"));
  *code = d.Wait(60);
  return d.Output();
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(FlowclassdLogTest, JsonFormatPrintsOneJsonObjectALine) {
  TempDir dir("fclog");
  int code = -1;
  const std::string out = RunDaemon(dir, {"--log-format", "json"}, "json", &code);
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> lines = Lines(out);
  std::vector<std::string> msgs;
  bool warned = false;
  for (const std::string& line : lines) {
    google::protobuf::Struct s;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &s).ok()) << line << "\n" << out;
    ASSERT_EQ(s.fields().size(), 3u) << line;
    const std::string ts = s.fields().at("ts").string_value();
    const std::string level = s.fields().at("level").string_value();
    const std::string msg = s.fields().at("msg").string_value();
    EXPECT_TRUE(std::regex_match(ts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
        << line;
    EXPECT_THAT((std::vector<std::string>{"info", "warn"}), ::testing::Contains(level)) << line;
    warned |= level == "warn" && absl::StartsWith(msg, "warning: no store.path");
    msgs.push_back(msg);
  }
  EXPECT_TRUE(warned) << out;
  // The start, the periodic and final counters, the full dump, the stop.
  auto any = [&](const std::string& prefix) {
    for (const std::string& m : msgs)
      if (absl::StartsWith(m, prefix)) return true;
    return false;
  };
  for (const char* p : {"running, 1 PMD(s), 1 port(s)", "pmd 0 on lcore 1 polls 1:0",
                        "stats pmd=0 lcore=1 ", "final pmd=0 ", "final total gen=",
                        "stopping (duration reached)", "stopped"})
    EXPECT_TRUE(any(p)) << p << "\n" << out;
}

TEST(FlowclassdLogTest, LevelWarnDropsInfoAndDebugShowsTheConfig) {
  TempDir dir("fclog");
  int code = -1;
  const std::string warn = RunDaemon(dir, {"--log-level", "warn"}, "warn", &code);
  ASSERT_EQ(code, 0) << warn;
  const std::string ts = R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)";
  ASSERT_FALSE(Lines(warn).empty());
  for (const std::string& line : Lines(warn))
    EXPECT_TRUE(std::regex_match(line, std::regex(ts + " warn flowclassd: .*"))) << line;
  EXPECT_THAT(warn, HasSubstr(" warn flowclassd: warning: no store.path: "));

  // The default (info): text lines, the counters found by their words.
  const std::string info = RunDaemon(dir, {}, "info", &code);
  ASSERT_EQ(code, 0) << info;
  for (const std::string& line : Lines(info))
    EXPECT_TRUE(std::regex_match(line, std::regex(ts + " (info|warn) flowclassd: .*"))) << line;
  EXPECT_GT(OutputFields(info, "final total ")["rx"], 0u) << info;
  EXPECT_GT(OutputFields(info, "stats pmd=0 ")["rx"], 0u) << info;
  EXPECT_THAT(info, Not(HasSubstr("eal args:")));

  // debug adds the configuration summary, as --check-config prints it.
  const std::string debug = RunDaemon(dir, {"--set", "log.level=debug"}, "debug", &code);
  ASSERT_EQ(code, 0) << debug;
  EXPECT_TRUE(std::regex_search(debug, std::regex(ts + " debug flowclassd: eal args: ")))
      << debug;
  EXPECT_TRUE(std::regex_search(debug, std::regex(ts + " debug flowclassd: log: level debug "
                                                       "format text\n")))
      << debug;
}

TEST(FlowclassdLogTest, BadLogValuesAreUsageOrConfigErrors) {
  TempDir dir("fclog");
  const std::string cfg = WriteConfig(dir);
  CmdResult r = RunCommand(absl::StrCat(kDaemon, " -c ", cfg, " --log-level loud 2>&1"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, ::testing::StartsWith(
                         "flowclassd: --log-level: loud not in {debug,info,warn,error}\n"));
  r = RunCommand(absl::StrCat(kDaemon, " -c ", cfg, " --log-format=xml 2>&1"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, ::testing::StartsWith("flowclassd: --log-format: xml not in {text,json}\n"));
  // Through --set or the file, the config parser names the key: exit 3.
  r = RunCommand(absl::StrCat(kDaemon, " --check-config ", cfg, " --set log.format=xml 2>&1"));
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("flowclassd: config error: " + cfg +
                               ": log.format: \"xml\" is not text or json"));
  r = RunCommand(absl::StrCat(kDaemon, " --check-config ", cfg, " --set log.level=trace 2>&1"));
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr(": log.level: \"trace\" is not debug, info, warn or error"));
  // --check-config prints its summary as output, not as log lines.
  r = RunCommand(absl::StrCat(kDaemon, " --check-config ", cfg, " --log-format json"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\nlog: level info format json\n"));
  EXPECT_THAT(r.out, ::testing::EndsWith("\nconfig ok\n"));
}

}  // namespace
}  // namespace flowclass
