// The rule and trace formats on bad input (every message names line, column,
// field and problem; mutated lines fail cleanly), the trace format, and
// reading files: format detection, byte-order marks, errors with the path,
// directories and pipes.
#include "dataplane/rules/rule_format.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_format_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/sanitizer.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

// ------------------------------------------------------------- Bad inputs

enum class Input { kClassBench, kNative, kTrace };

struct BadCase {
  Input input;
  const char* text;
  const char* message;
};

absl::Status ParseAny(Input in, std::string_view text) {
  switch (in) {
    case Input::kClassBench:
      return ParseClassBench(text).status();
    case Input::kNative:
      return ParseNativeRules(text).status();
    case Input::kTrace:
      return ParseTrace(text).status();
  }
  return absl::InternalError("bad input kind");
}

constexpr const char* kCbOk = "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF";

const BadCase kBadCases[] = {
    // ---- ClassBench
    {Input::kClassBench, "@1.2.3.4/33 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 10: ipv4_src: prefix length 33 exceeds 32"},
    {Input::kClassBench, "@1.2.3/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 2: ipv4_src: bad IPv4 address '1.2.3'"},
    {Input::kClassBench, "1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 1: ipv4_src: expected '@' at the start of a ClassBench rule"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.300.8/32 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 12: ipv4_dst: bad IPv4 address '5.6.300.8'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/x 0 : 65535 80 : 80 0x06/0xFF",
     "line 1, column 20: ipv4_dst: bad prefix length 'x'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 100 : 50 80 : 80 0x06/0xFF",
     "line 1, column 23: tp_src: range 100 : 50 has lo > hi"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 70000 0x06/0xFF",
     "line 1, column 38: tp_dst: port 70000 does not fit 16 bits (max 65535)"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 65535 80 : 80 0x06/0xFF",
     "line 1, column 25: tp_src: expected ':' in port range 'lo : hi'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : x 80 : 80 0x06/0xFF",
     "line 1, column 27: tp_src: bad number 'x'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06",
     "line 1, column 41: nw_proto: expected hex value/mask like 0x06/0xFF, got "
     "'0x06'"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x100/0xFF",
     "line 1, column 41: nw_proto: value '0x100' is 0x100 in hex, which does not fit 8 bits "
     "(max 0xff; this column is hex, e.g. 0x06/0xFF)"},
    // Without 0x the column is still hex: "255" is 0x255, and the message says so.
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 6/255",
     "line 1, column 43: nw_proto: mask '255' is 0x255 in hex, which does not fit 8 bits "
     "(max 0xff; this column is hex, e.g. 0x06/0xFF)"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80",
     "line 1, column 40: nw_proto: missing"},
    {Input::kClassBench,
     "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0200\t\n"
     "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t\n",
     "line 2, column 51: tcp_flags: missing; the first rule of this file has a "
     "TCP-flags field"},
    {Input::kClassBench,
     "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF\n"
     "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xFF 0x0000/0x0200\n",
     "line 2, column 51: tcp_flags: unexpected field '0x0000/0x0200'; the first "
     "rule of this file has no TCP-flags field"},
    {Input::kClassBench,
     "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x10000/0xFFFF\t",
     "line 1, column 51: tcp_flags: value '0x10000' is 0x10000 in hex, which does not fit 16 "
     "bits (max 0xffff; this column is hex, e.g. 0x06/0xFF)"},
    {Input::kClassBench,
     "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0/0x0\tjunk",
     "line 1, column 59: tcp_flags: unexpected text 'junk' after the last field"},
    // A cut line ("0x06/0" of "0x06/0xFF") would widen the rule to any
    // protocol; ClassBench writes a protocol exact or any, never a value
    // outside its mask.
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0",
     "line 1, column 41: nw_proto: '0x06/0' has value bits outside its mask (any protocol is "
     "0x00/0x00); a cut line?"},
    {Input::kClassBench, "@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xF",
     "line 1, column 41: nw_proto: mask '0xF' is neither 0xFF (exact) nor 0x00 (any); a cut "
     "line?"},
    {Input::kClassBench,
     "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0200/0x0000\t",
     "line 1, column 51: tcp_flags: '0x0200/0x0000' has value bits outside its mask; a cut "
     "line?"},
    {Input::kClassBench, "# header\n\n@1.2.3.4/8 5.6.7.8/32 0 : 65535 80 : 80 0x06/0xZZ",
     "line 3, column 46: nw_proto: bad number '0xZZ'"},
    // ---- Native
    {Input::kNative, "priority=1,foo=3,actions=drop",
     "line 1, column 12: foo: unknown key"},
    {Input::kNative, "dl_src=00:00:00:00:00:01,eth_src=00:00:00:00:00:02,actions=drop",
     "line 1, column 26: eth_src: duplicate key (this field is already set on "
     "the line)"},
    {Input::kNative, "tcp,nw_proto=17,actions=drop",
     "line 1, column 5: nw_proto: duplicate key (this field is already set on "
     "the line)"},
    {Input::kNative, "ip,nw_src=10.0.0.0/33,actions=drop",
     "line 1, column 20: nw_src: prefix length 33 exceeds 32"},
    {Input::kNative, "ip,nw_dst=10.0.0.256,actions=drop",
     "line 1, column 11: nw_dst: bad IPv4 address '10.0.0.256'"},
    {Input::kNative, "ipv6,ipv6_src=1:::2,actions=drop",
     "line 1, column 15: ipv6_src: bad IPv6 address '1:::2'"},
    {Input::kNative, "ipv6,ipv6_dst=::/129,actions=drop",
     "line 1, column 18: ipv6_dst: prefix length 129 exceeds 128"},
    {Input::kNative, "udp,tp_dst=2000-1000,actions=drop",
     "line 1, column 12: tp_dst: range 2000-1000 has lo > hi"},
    {Input::kNative, "nw_proto=256,actions=drop",
     "line 1, column 10: nw_proto: value 256 does not fit 8 bits (max 255)"},
    {Input::kNative, "tp_src=1/0x10000,actions=drop",
     "line 1, column 10: tp_src: mask 0x10000 does not fit 16 bits (max 65535)"},
    {Input::kNative, "dl_vlan=4096,actions=drop",
     "line 1, column 9: dl_vlan: value 4096 does not fit 12 bits (max 4095)"},
    {Input::kNative, "priority=4294967296,actions=drop",
     "line 1, column 10: priority: value 4294967296 does not fit 32 bits (max "
     "4294967295)"},
    {Input::kNative, "priority=1,tcp",
     "line 1, column 15: actions: missing (every rule needs actions=output:N or "
     "actions=drop as its last key)"},
    {Input::kNative, "tcp,actions=normal",
     "line 1, column 13: actions: unknown action 'normal'"},
    {Input::kNative, "tcp,actions=output:70000",
     "line 1, column 20: actions: output port 70000 exceeds 65535"},
    {Input::kNative, "tcp,actions=output:1,output:2",
     "line 1, column 21: actions: only one action is supported"},
    {Input::kNative, "tcp,actions=drop,priority=5",
     "line 1, column 18: actions: must be the last key (everything after "
     "actions= is the action list)"},
    {Input::kNative, "tcp,actions=",
     "line 1, column 13: actions: missing action"},
    {Input::kNative, "tcp,tcp_flags=+syn-foo,actions=drop",
     "line 1, column 20: tcp_flags: unknown TCP flag 'foo'"},
    {Input::kNative, "ip,ip_frag=maybe,actions=drop",
     "line 1, column 12: ip_frag: unknown value 'maybe' (no, yes, first, later, "
     "not_later)"},
    {Input::kNative, "dl_dst=00:11:22:33:44,actions=drop",
     "line 1, column 8: dl_dst: bad Ethernet address '00:11:22:33:44'"},
    {Input::kNative, "ip,nw_tos=5,actions=drop",
     "line 1, column 11: nw_tos: value 5 has ECN bits set (use ip_ecn, or "
     "nw_tos=value/mask)"},
    {Input::kNative, "priority,actions=drop",
     "line 1, column 1: priority: missing value (priority=...)"},
    {Input::kNative, "tcp=1,actions=drop",
     "line 1, column 1: tcp: protocol keyword takes no value"},
    {Input::kNative, "cookie=0xzz,actions=drop",
     "line 1, column 8: cookie: bad number '0xzz'"},
    // One past 2^64 - 1, decimal and hex: overflow, not a wrapped value.
    {Input::kNative, "id=18446744073709551616,actions=drop",
     "line 1, column 4: id: bad number '18446744073709551616'"},
    {Input::kNative, "cookie=0x10000000000000000,actions=drop",
     "line 1, column 8: cookie: bad number '0x10000000000000000'"},
    {Input::kNative, "icmp,icmp_type=300,actions=drop",
     "line 1, column 16: icmp_type: value 300 does not fit 8 bits (max 255)"},
    {Input::kNative, "# ok\ntcp,actions=drop\n\n  udp,in_port=x,actions=drop",
     "line 4, column 15: in_port: bad number 'x'"},
    // ---- Traces
    {Input::kTrace, "1 2 3 4 5", "line 1, column 10: expected: missing"},
    {Input::kTrace, "1 2 70000 4 5 6",
     "line 1, column 5: tp_src: value 70000 does not fit 16 bits (max 65535)"},
    {Input::kTrace, "1\tx 3 4 5 6", "line 1, column 3: ipv4_dst: bad number 'x'"},
    {Input::kTrace, "4294967296 2 3 4 5 6",
     "line 1, column 1: ipv4_src: value 4294967296 does not fit 32 bits (max "
     "4294967295)"},
    {Input::kTrace, "1 2 3 4 5 6\n1 2 3 4 256 6",
     "line 2, column 9: nw_proto: value 256 does not fit 8 bits (max 255)"},
    {Input::kTrace, "1 2 3 -4 5 6", "line 1, column 7: tp_dst: bad number '-4'"},
};

TEST(BadInputTest, EachBadLineNamesLineColumnFieldAndProblem) {
  ASSERT_GE(std::size(kBadCases), 25u);
  for (const BadCase& c : kBadCases) {
    SCOPED_TRACE(c.text);
    absl::Status s = ParseAny(c.input, c.text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(s.message()), c.message);
  }
  // Sanity: the good ClassBench line the cases are derived from parses.
  EXPECT_TRUE(ParseClassBench(kCbOk).ok());
}

// Mutated valid lines (a poor man's fuzzer, run under ASan in CI): every
// parser either accepts the line or reports "line 1, column C: " with C
// inside the line or just past its end, and never crashes.
TEST(BadInputTest, MutatedLinesFailCleanly) {
  const std::string seeds[] = {
      kCbOk,
      "@1.2.3.4/8\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0200/0x1200\t",
      "id=3,priority=10,cookie=0x1,udp,in_port=1,nw_src=10.0.0.0/8,"
      "tp_dst=1000-2000,tcp_flags=+syn-ack,actions=output:2",
      "ipv6,ipv6_src=2001:db8::1/64,dl_vlan=5,ip_frag=later,nw_tos=4/0xff,"
      "dl_dst=00:11:22:33:44:55/ff:ff:ff:00:00:00,actions=drop",
      "1079733050 4225952233 0 65535 255 82",
  };
  const char kAlphabet[] = "0123456789abcdefx:./-+=, \t@#";
  std::mt19937_64 rng(7);
  const int n = kSanitized ? 3000 : 20000;
  int rejected = 0;
  for (int i = 0; i < n; ++i) {
    std::string line = seeds[rng() % std::size(seeds)];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
      const size_t pos = rng() % (line.size() + 1);
      const char c = kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
      switch (rng() % 3) {
        case 0:
          if (pos < line.size()) line[pos] = c;
          break;
        case 1:
          line.insert(pos, 1, c);
          break;
        default:
          if (pos < line.size()) line.erase(pos, 1 + rng() % 4);
          break;
      }
    }
    for (Input in : {Input::kClassBench, Input::kNative, Input::kTrace}) {
      const absl::Status s = ParseAny(in, line);
      if (s.ok()) continue;
      ++rejected;
      const std::string msg(s.message());
      ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << msg;
      size_t col = 0;
      ASSERT_EQ(std::sscanf(msg.c_str(), "line 1, column %zu: ", &col), 1)
          << line << " -> " << msg;
      ASSERT_GE(col, 1u) << msg;
      ASSERT_LE(col, line.size() + 1) << line << " -> " << msg;
    }
  }
  EXPECT_GT(rejected, n);  // most mutants are rejected by 2 of 3 parsers
}

// What an error quotes is cut to 40 bytes and escaped: a NUL does not end
// the message, a newline or a control byte does not break it, a 20 MB value
// or key is not echoed back.
TEST(BadInputTest, QuotedTextIsCutAndEscaped) {
  using namespace std::string_literals;
  absl::Status s = ParseAny(Input::kNative, "ip,nw_dst=10.0.0.1\0x,actions=drop"s);
  EXPECT_EQ(std::string(s.message()),
            "line 1, column 11: nw_dst: bad IPv4 address '10.0.0.1\\x00x'");
  s = ParseAny(Input::kNative, "ip,nw_dst=1\x01'\\,actions=drop");
  EXPECT_EQ(std::string(s.message()),
            "line 1, column 11: nw_dst: bad IPv4 address '1\\x01\\'\\\\'");
  s = ParseAny(Input::kNative, "ip,nw_dst=" + std::string(20 << 20, '7') + ",actions=drop");
  EXPECT_EQ(std::string(s.message()),
            "line 1, column 11: nw_dst: bad IPv4 address '" + std::string(40, '7') + "...'");
  s = ParseAny(Input::kNative, std::string(20 << 20, 'k') + "=1,actions=drop");
  EXPECT_EQ(std::string(s.message()),
            "line 1, column 1: '" + std::string(40, 'k') + "...': unknown key");
  s = ParseAny(Input::kNative, "f\x7fo=1,actions=drop");
  EXPECT_EQ(std::string(s.message()), "line 1, column 1: 'f\\x7fo': unknown key");
}

TEST(BadInputTest, SingleLineApiHasNoLinePrefix) {
  absl::StatusOr<Rule> r = ParseNativeRule("ip,nw_src=1.2.3.4/40,actions=drop", 1);
  EXPECT_EQ(std::string(r.status().message()),
            "column 19: nw_src: prefix length 40 exceeds 32");
}

// ---------------------------------------------------------------- Traces

TEST(TraceTest, ParsesColumnsAndIgnoresExtras) {
  absl::StatusOr<std::vector<TraceEntry>> t = ParseTrace(
      "1079733050 4225952233 0 65535 255 82\n"
      "\n"
      "167772161\t167772162\t1234\t80\t6\t7\textra columns 9 9\r\n");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_TRUE((*t)[0].key.SameFlow(
      MakeFiveTupleKey(1079733050u, 4225952233u, 0, 65535, 255)));
  EXPECT_EQ((*t)[0].expected, 82u);
  EXPECT_EQ((*t)[1].key.Get(Field::kIpv4Src), Ip(10, 0, 0, 1));
  EXPECT_EQ((*t)[1].key.Get(Field::kTpSrc), 1234u);
  EXPECT_EQ((*t)[1].key.Get(Field::kNwProto), 6u);
  EXPECT_EQ((*t)[1].key.Get(Field::kEthType), kEthTypeIpv4);
  EXPECT_EQ((*t)[1].key.Get(Field::kInPort), 0u);
  EXPECT_EQ((*t)[1].key.hash, MakeFiveTupleKey(Ip(10, 0, 0, 1), Ip(10, 0, 0, 2),
                                                1234, 80, 6).hash);
  EXPECT_EQ((*t)[1].expected, 7u);
}

// ------------------------------------------------------------------ Files

class FileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path =
        (std::filesystem::temp_directory_path() /
         absl::StrCat("rule_format_test_", ::getpid(), "_", name))
            .string();
    std::ofstream(path, std::ios::binary) << text;
    paths_.push_back(path);
    return path;
  }
  ~FileTest() override {
    for (const std::string& p : paths_) std::filesystem::remove(p);
  }
  std::vector<std::string> paths_;
};

TEST_F(FileTest, AutoDetectsFormatAndPrefixesPathToErrors) {
  const std::string cb = Write("cb", std::string("# c\n\n") + kCbOk + "\n");
  absl::StatusOr<std::vector<Rule>> r = LoadRuleFile(cb);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].match.value.Get(Field::kIpv4Dst), Ip(5, 6, 7, 8));
  // Forcing the other format fails on the same text.
  EXPECT_FALSE(LoadRuleFile(cb, RuleFormat::kNative).ok());

  const std::string nat = Write("native", "# c\ntcp,actions=output:3\n");
  std::vector<size_t> lines;
  r = LoadRuleFile(nat, RuleFormat::kAuto, {}, &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_THAT(lines, ::testing::ElementsAre(2));
  r = LoadRuleFile(cb, RuleFormat::kAuto, {}, &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(lines, ::testing::ElementsAre(3));  // after a comment and a blank line
  r = LoadRuleFile(nat);
  EXPECT_EQ((*r)[0].id, 2u);
  EXPECT_EQ((*r)[0].action, Action::Output(3));

  // A UTF-8 byte-order mark is not part of the first rule, and does not hide
  // a ClassBench file from the detection; `used` says what the file was read as.
  RuleFormat used = RuleFormat::kAuto;
  r = LoadRuleFile(Write("bom_native", "\xEF\xBB\xBFid=7,udp,actions=drop\n"), RuleFormat::kAuto,
                   {}, nullptr, &used);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].id, 7u);
  EXPECT_EQ(used, RuleFormat::kNative);
  r = LoadRuleFile(Write("bom_cb", std::string("\xEF\xBB\xBF") + kCbOk + "\n"),
                   RuleFormat::kAuto, {}, nullptr, &used);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(used, RuleFormat::kClassBench);
  absl::StatusOr<std::vector<TraceEntry>> bom_trace =
      LoadTraceFile(Write("bom_trace", "\xEF\xBB\xBF" "1 2 3 4 5 1\n"));
  ASSERT_TRUE(bom_trace.ok()) << bom_trace.status();
  EXPECT_EQ(bom_trace->size(), 1u);

  const std::string bad = Write("bad", "tcp,actions=output:3\nudp,bogus=1,actions=drop\n");
  r = LoadRuleFile(bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(r.status().message()),
            absl::StrCat(bad, ": line 2, column 5: bogus: unknown key"));

  const std::string bad_trace = Write("trace", "1 2 3 4 5 x\n");
  absl::StatusOr<std::vector<TraceEntry>> t = LoadTraceFile(bad_trace);
  EXPECT_EQ(std::string(t.status().message()),
            absl::StrCat(bad_trace, ": line 1, column 11: expected: bad number 'x'"));

  r = LoadRuleFile("/nonexistent/rules.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/nonexistent/rules.txt"));
  EXPECT_EQ(LoadTraceFile("/nonexistent/t").status().code(),
            absl::StatusCode::kNotFound);

  const std::string empty = Write("empty", "");
  r = LoadRuleFile(empty);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());

  // A directory opens but cannot be read: an error, never an empty rule set
  // (or an empty trace that a replay would pass).
  const std::string dir = std::filesystem::temp_directory_path().string();
  r = LoadRuleFile(dir);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(r.status().message()), dir + ": cannot read: Is a directory");
  EXPECT_EQ(LoadTraceFile(dir).status().code(), absl::StatusCode::kFailedPrecondition);
  // Not only regular files: a pipe (`add-rules <(generate)`) is read to its end.
  const std::string fifo = dir + "/" + absl::StrCat("rule_format_test_", ::getpid(), "_fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  paths_.push_back(fifo);
  std::thread writer([&] {
    std::ofstream(fifo) << "tcp,actions=output:3\nudp,actions=drop\n";
  });
  r = LoadRuleFile(fifo);
  writer.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 2u);
}

}  // namespace
}  // namespace flowclass
