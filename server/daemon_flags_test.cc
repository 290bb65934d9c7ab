// server/daemon_flags.h: flowclassd's command line through CLI11, the exit
// codes docs/flowclassd.md states, errors that name the flag.
#include "server/daemon_flags.h"

#include <string>
#include <vector>

#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

ParsedFlags Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "flowclassd");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseDaemonFlags(static_cast<int>(argv.size()), argv.data());
}

TEST(DaemonFlagsTest, OverridesKeepTheCommandLineOrder) {
  const ParsedFlags r =
      Parse({"-c", "d.yaml", "--set", "rules.file=a", "--rules", "b", "--lcores", "1,2",
             "--file-prefix", "fp", "--stats-interval-ms", "5", "--duration-s", "3", "--store",
             "/s", "--recover-to-last-consistent", "--log-level", "warn", "--log-format",
             "json", "--set=pmd.burst=8"});
  ASSERT_TRUE(r.run) << r.err;
  EXPECT_EQ(r.flags.config_path, "d.yaml");
  EXPECT_FALSE(r.flags.check_only);
  EXPECT_THAT(r.flags.overrides,
              ElementsAre("rules.file=a", "rules.file=b", "pmd.lcores=[1,2]",
                          "eal.file_prefix=fp", "stats.interval_ms=5", "run.duration_s=3",
                          "store.path=/s", "store.recover_to_last_consistent=true",
                          "log.level=warn", "log.format=json", "pmd.burst=8"));
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, IsEmpty());
}

TEST(DaemonFlagsTest, CheckConfig) {
  const ParsedFlags r = Parse({"--check-config", "d.yaml", "--set", "a.b=1"});
  ASSERT_TRUE(r.run) << r.err;
  EXPECT_TRUE(r.flags.check_only);
  EXPECT_EQ(r.flags.config_path, "d.yaml");
  EXPECT_THAT(r.flags.overrides, ElementsAre("a.b=1"));
}

TEST(DaemonFlagsTest, HelpAndVersionExitZeroOnStdout) {
  ParsedFlags r = Parse({"--help"});
  EXPECT_FALSE(r.run);
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_EQ(r.out, HelpText());
  EXPECT_THAT(r.err, IsEmpty());
  // Every flag is in the help, and the exit codes.
  for (const char* flag :
       {"-c,--config", "--check-config", "--set", "--rules", "--lcores", "--file-prefix",
        "--stats-interval-ms", "--duration-s", "--store", "--recover-to-last-consistent",
        "--log-level", "--log-format", "-h,--help", "--version", "10 store"})
    EXPECT_THAT(r.out, HasSubstr(flag));
  EXPECT_THAT(r.out, HasSubstr("{debug,info,warn,error}"));
  EXPECT_THAT(r.out, HasSubstr("{text,json}"));
  r = Parse({"-h"});
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_EQ(r.out, HelpText());
  r = Parse({"--version"});
  EXPECT_FALSE(r.run);
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_EQ(r.out, std::string("flowclassd ") + kFlowclassVersion + "\n");
}

// A bad command line: exit 2, "flowclassd: " and what was wrong naming the
// flag first on stderr, then the help text; nothing on stdout.
void ExpectUsageError(const std::vector<std::string>& args, const std::string& message) {
  const ParsedFlags r = Parse(args);
  EXPECT_FALSE(r.run) << ::testing::PrintToString(args);
  EXPECT_EQ(r.exit_code, kExitUsage) << ::testing::PrintToString(args);
  EXPECT_THAT(r.err, StartsWith("flowclassd: " + message + "\n")) << r.err;
  EXPECT_THAT(r.err, HasSubstr(HelpText()));
  EXPECT_THAT(r.out, IsEmpty());
}

TEST(DaemonFlagsTest, BadValuesNameTheFlagAndExitTwo) {
  ExpectUsageError({"-c", "d.yaml", "--log-level", "loud"},
                   "--log-level: loud not in {debug,info,warn,error}");
  ExpectUsageError({"-c", "d.yaml", "--log-level", "warning"},
                   "--log-level: warning not in {debug,info,warn,error}");
  ExpectUsageError({"-c", "d.yaml", "--log-format", "yaml"},
                   "--log-format: yaml not in {text,json}");
  ExpectUsageError({"-c", "d.yaml", "--set", "x"}, "--set: needs KEY=VALUE, got \"x\"");
  ExpectUsageError({"-c", "d.yaml", "--set", "=1"}, "--set: needs KEY=VALUE, got \"=1\"");
  ExpectUsageError({"-c", "d.yaml", "--rules"}, "--rules: 1 required FILE missing");
  ExpectUsageError({"-c"}, "--config: 1 required FILE missing");
  ExpectUsageError({"-c", "d.yaml", "--foo"}, "The following argument was not expected: --foo");
  ExpectUsageError({"-c", "d.yaml", "extra"}, "The following argument was not expected: extra");
  ExpectUsageError({"-c", "a.yaml", "--check-config", "b.yaml"},
                   "--config excludes --check-config");
  ExpectUsageError({}, "no config file (-c FILE)");
  ExpectUsageError({"--set", "a=1"}, "no config file (-c FILE)");
}

TEST(DaemonFlagsTest, LogOptionsFromOverridesTakesTheLastValidValue) {
  LogOptions o = LogOptionsFromOverrides({});
  EXPECT_EQ(o.level, LogLevel::kInfo);
  EXPECT_EQ(o.format, LogFormat::kText);
  o = LogOptionsFromOverrides(
      {"log.level=debug", "log.format=json", "log.level=error", "log.format=bogus"});
  EXPECT_EQ(o.level, LogLevel::kError);
  EXPECT_EQ(o.format, LogFormat::kJson);  // the bogus one is the config parser's to refuse
}

}  // namespace
}  // namespace flowclass
