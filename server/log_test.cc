// server/log.h: levels filter, text lines carry a timestamp and level before
// the message's own words, JSON lines are one JSON object with ts, level and
// msg whatever the message holds.  JSON is read back by protobuf's parser
// (google.protobuf.Struct), not by string matching.
#include "server/log.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"

namespace flowclass {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

struct Captured {
  std::ostringstream out, err;
  std::shared_ptr<spdlog::logger> logger;
  explicit Captured(LogOptions o)
      : logger(NewLogger(o, std::make_shared<spdlog::sinks::ostream_sink_mt>(out),
                         std::make_shared<spdlog::sinks::ostream_sink_mt>(err))) {}
};

std::vector<std::string> Lines(const std::ostringstream& s) {
  std::vector<std::string> v = absl::StrSplit(s.str(), '\n', absl::SkipEmpty());
  return v;
}

// Every level once, in the order debug, info, warn, error.
void LogEachLevel(spdlog::logger& log) {
  log.debug("d {}", 1);
  log.info("i {}", 2);
  log.warn("w {}", 3);
  log.error("e {}", 4);
}

constexpr const char* kTimestamp = R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)";

TEST(LogTest, TextLinesHaveTimestampLevelAndTheMessagesWords) {
  Captured c(LogOptions{LogLevel::kDebug, LogFormat::kText});
  LogEachLevel(*c.logger);
  // debug and info on `out` (stdout), warn and error on `err` (stderr).
  const std::vector<std::string> out = Lines(c.out), err = Lines(c.err);
  ASSERT_THAT(out, SizeIs(2));
  ASSERT_THAT(err, SizeIs(2));
  const std::string t = kTimestamp;
  EXPECT_TRUE(std::regex_match(out[0], std::regex(t + " debug flowclassd: d 1"))) << out[0];
  EXPECT_TRUE(std::regex_match(out[1], std::regex(t + " info flowclassd: i 2"))) << out[1];
  EXPECT_TRUE(std::regex_match(err[0], std::regex(t + " warn flowclassd: w 3"))) << err[0];
  EXPECT_TRUE(std::regex_match(err[1], std::regex(t + " error flowclassd: e 4"))) << err[1];
}

TEST(LogTest, TheLevelFiltersWhatIsLessSevere) {
  Captured info(LogOptions{LogLevel::kInfo});  // the default
  LogEachLevel(*info.logger);
  EXPECT_THAT(Lines(info.out), ElementsAre(::testing::EndsWith(" info flowclassd: i 2")));
  EXPECT_THAT(Lines(info.err), SizeIs(2));

  Captured warn(LogOptions{LogLevel::kWarn});
  LogEachLevel(*warn.logger);
  EXPECT_THAT(Lines(warn.out), IsEmpty());
  EXPECT_THAT(Lines(warn.err), ElementsAre(::testing::EndsWith(" warn flowclassd: w 3"),
                                           ::testing::EndsWith(" error flowclassd: e 4")));

  Captured error(LogOptions{LogLevel::kError});
  LogEachLevel(*error.logger);
  EXPECT_THAT(Lines(error.out), IsEmpty());
  EXPECT_THAT(Lines(error.err), ElementsAre(::testing::EndsWith(" error flowclassd: e 4")));
}

google::protobuf::Struct ParseJson(const std::string& line) {
  google::protobuf::Struct s;
  const auto st = google::protobuf::util::JsonStringToMessage(line, &s);
  EXPECT_TRUE(st.ok()) << st.ToString() << ": " << line;
  return s;
}

std::string Field(const google::protobuf::Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? "(absent)" : it->second.string_value();
}

TEST(LogTest, JsonLinesAreObjectsWithTsLevelAndMsg) {
  Captured c(LogOptions{LogLevel::kDebug, LogFormat::kJson});
  LogEachLevel(*c.logger);
  // Whatever a message holds: quotes, backslashes, control characters,
  // UTF-8, and bytes that are not UTF-8 (a file name may hold any).
  const std::string nasty = "a \"quoted\" C:\\path\ttab\x01 caf\xc3\xa9 bad\xff\xc3 end";
  c.logger->info("{}", nasty);
  std::vector<std::string> lines = Lines(c.out);
  const std::vector<std::string> err = Lines(c.err);
  lines.insert(lines.end(), err.begin(), err.end());
  ASSERT_THAT(lines, SizeIs(5));
  const std::vector<std::pair<std::string, std::string>> want = {
      {"debug", "d 1"}, {"info", "i 2"}, {"info", "a \"quoted\" C:\\path\ttab\x01 caf\xc3\xa9 "
                                                  "bad\xef\xbf\xbd\xef\xbf\xbd end"},
      {"warn", "w 3"}, {"error", "e 4"}};
  for (size_t i = 0; i < lines.size(); ++i) {
    const google::protobuf::Struct s = ParseJson(lines[i]);
    EXPECT_THAT(s.fields(), SizeIs(3)) << lines[i];
    EXPECT_TRUE(std::regex_match(Field(s, "ts"), std::regex(kTimestamp))) << lines[i];
    EXPECT_EQ(Field(s, "level"), want[i].first) << lines[i];
    EXPECT_EQ(Field(s, "msg"), want[i].second) << lines[i];
  }
}

TEST(LogTest, JsonEscapeKeepsValidUtf8AndReplacesTheRest) {
  EXPECT_EQ(JsonEscape("plain"), "plain");
  EXPECT_EQ(JsonEscape("\"\\\n\r\t\x1f\x7f"), "\\\"\\\\\\n\\r\\t\\u001f\\u007f");
  EXPECT_EQ(JsonEscape("\xe2\x82\xac \xf0\x9f\x98\x80"), "\xe2\x82\xac \xf0\x9f\x98\x80");
  // Overlong, surrogate, past U+10FFFF, truncated, a lone continuation byte.
  EXPECT_EQ(JsonEscape("\xc0\xaf"), "\\ufffd\\ufffd");
  EXPECT_EQ(JsonEscape("\xed\xa0\x80"), "\\ufffd\\ufffd\\ufffd");
  EXPECT_EQ(JsonEscape("\xf4\x90\x80\x80"), "\\ufffd\\ufffd\\ufffd\\ufffd");
  EXPECT_EQ(JsonEscape("\xe2\x82"), "\\ufffd\\ufffd");
  EXPECT_EQ(JsonEscape("\x80"), "\\ufffd");
}

TEST(LogTest, LogLinesGivesEachLineATimestamp) {
  Captured c(LogOptions{});
  LogLines(*c.logger, LogLevel::kInfo, "first\n  second\n\nfourth\n");
  LogLines(*c.logger, LogLevel::kDebug, "filtered\n");
  LogLines(*c.logger, LogLevel::kWarn, "");
  const std::vector<std::string> out = Lines(c.out);
  ASSERT_THAT(out, SizeIs(4));
  const std::string t = kTimestamp;
  EXPECT_TRUE(std::regex_match(out[0], std::regex(t + " info flowclassd: first")));
  EXPECT_TRUE(std::regex_match(out[1], std::regex(t + " info flowclassd:   second")));
  EXPECT_TRUE(std::regex_match(out[2], std::regex(t + " info flowclassd: ")));
  EXPECT_TRUE(std::regex_match(out[3], std::regex(t + " info flowclassd: fourth")));
  EXPECT_THAT(Lines(c.err), IsEmpty());
}

TEST(LogTest, OptionNamesRoundTrip) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError})
    EXPECT_EQ(ParseLogLevel(LogLevelName(l)), l);
  for (LogFormat f : {LogFormat::kText, LogFormat::kJson})
    EXPECT_EQ(ParseLogFormat(LogFormatName(f)), f);
  EXPECT_EQ(ParseLogLevel("warning"), std::nullopt);
  EXPECT_EQ(ParseLogLevel("INFO"), std::nullopt);
  EXPECT_EQ(ParseLogFormat("yaml"), std::nullopt);
}

}  // namespace
}  // namespace flowclass
