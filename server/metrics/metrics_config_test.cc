// The `metrics:` section of flowclassd's YAML config (server/config.cc).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

const char kBase[] = R"(
eal: {hugepages: false, memory_mb: 256, pci: false}
pmd: {lcores: [1]}
ports:
  - {number: 1, device: net_null0}
)";

TEST(MetricsConfigTest, DefaultsAreOffOnLoopback9464) {
  auto c = ParseConfig(kBase, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->metrics.enabled);
  EXPECT_EQ(c->metrics.address, "127.0.0.1:9464");
  EXPECT_EQ(c->metrics.top_subtables, 8u);
  EXPECT_EQ(c->metrics.threads, 4u);
  EXPECT_EQ(c->metrics.request_timeout_ms, 5000u);
  EXPECT_THAT(DescribeConfig(*c), HasSubstr("metrics: off"));
}

TEST(MetricsConfigTest, ParsesEveryKeyAndOverrides) {
  auto c = ParseConfig(std::string(kBase) +
                           "metrics: {enabled: true, address: \"10.1.2.3:9500\", "
                           "top_subtables: 3, threads: 6, request_timeout_ms: 2000}\n",
                       {"metrics.top_subtables=5"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->metrics.enabled);
  EXPECT_EQ(c->metrics.address, "10.1.2.3:9500");
  EXPECT_EQ(c->metrics.top_subtables, 5u);
  EXPECT_EQ(c->metrics.threads, 6u);
  EXPECT_EQ(c->metrics.request_timeout_ms, 2000u);
  EXPECT_THAT(DescribeConfig(*c),
              HasSubstr("metrics: http://10.1.2.3:9500/metrics top_subtables 5 threads 6 "
                        "request_timeout_ms 2000"));
}

TEST(MetricsConfigTest, ErrorsNameTheKey) {
  const std::pair<std::string, std::string> cases[] = {
      {"metrics.address=localhost", "metrics.address: \"localhost\" is not host:port"},
      {"metrics.address=127.0.0.1:70000", "metrics.address"},
      {"metrics.top_subtables=1001", "metrics.top_subtables: 1001 is outside 0..1000"},
      {"metrics.threads=0", "metrics.threads: 0 is outside 1..64"},
      {"metrics.request_timeout_ms=50", "metrics.request_timeout_ms"},
      {"metrics.enabled=maybe", "metrics.enabled: \"maybe\" is not a boolean"},
      {"metrics.adress=1.2.3.4:5", "metrics.adress: unknown key"},
  };
  for (const auto& [ov, want] : cases) {
    auto c = ParseConfig(kBase, {ov}, "t.yaml");
    ASSERT_FALSE(c.ok()) << ov;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << ov;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("t.yaml: " + want)) << ov;
  }
}

TEST(MetricsConfigTest, ExampleConfigServesOnLoopback) {
  auto c = LoadConfig(FLOWCLASS_SOURCE_DIR "/deploy/flowclassd.example.yaml", {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->metrics.enabled);
  EXPECT_EQ(c->metrics.address, "127.0.0.1:9464");
}

}  // namespace
}  // namespace flowclass
