// The deploy files against what flowclassd exports: the Grafana dashboard
// (deploy/grafana/flowclass.json) is well-formed, has the panels the issue
// asks for, and every query and alert rule names only metrics the collector
// produces.  (promtool checks the rules' syntax and behaviour: ctest entries
// prometheus_rules_check / prometheus_rules_unit_test; the e2e test runs
// every dashboard query against a real Prometheus.)
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/dataplane_collector.h"
#include "server/metrics/observed_dataplane.h"
#include "server/metrics/test_json.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {


// Metric names a PromQL expression (or any text) references.
std::set<std::string> MetricNames(const std::string& text) {
  // Tokens "flowclass_[a-z0-9_]*" (no std::regex: GCC 12 warns inside it
  // under ASan), trailing underscores dropped.
  std::set<std::string> names;
  auto word = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  };
  for (size_t at = text.find("flowclass_"); at != std::string::npos;
       at = text.find("flowclass_", at + 1)) {
    if (at > 0 && (word(text[at - 1]) || std::isupper(static_cast<unsigned char>(text[at - 1]))))
      continue;
    size_t end = at + 10;
    while (end < text.size() && word(text[end])) ++end;
    std::string n = text.substr(at, end - at);
    while (!n.empty() && n.back() == '_') n.pop_back();
    for (const char* suffix : {"_bucket", "_count", "_sum"}) {
      const std::string s(suffix);
      if (n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0 &&
          n.substr(0, n.size() - s.size()) == kApplyDurationMetric)
        n = kApplyDurationMetric;
    }
    names.insert(n);
  }
  return names;
}

bool Balanced(const std::string& e) {
  std::string stack;
  bool in_str = false;
  for (char c : e) {
    if (c == '"') in_str = !in_str;
    if (in_str) continue;
    if (c == '(' || c == '{' || c == '[') stack.push_back(c);
    if (c == ')' || c == '}' || c == ']') {
      const char open = c == ')' ? '(' : c == '}' ? '{' : '[';
      if (stack.empty() || stack.back() != open) return false;
      stack.pop_back();
    }
  }
  return stack.empty() && !in_str;
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::string& n : ExportedMetricNames()) exported_.insert(n);
    const std::string text = ReadFile(FLOWCLASS_SOURCE_DIR "/deploy/grafana/flowclass.json");
    ASSERT_FALSE(text.empty());
    auto j = ParseJson(text);
    ASSERT_TRUE(j.has_value()) << "flowclass.json is not valid JSON";
    dash_ = *j;
  }
  std::set<std::string> exported_;
  Json dash_;
};

TEST_F(DashboardTest, TopLevelAndVariables) {
  EXPECT_EQ(dash_["title"].str, "flowclass");
  EXPECT_EQ(dash_["uid"].str, "flowclass-overview");
  EXPECT_GE(dash_["schemaVersion"].number, 30);
  std::set<std::string> vars;
  for (const Json& v : dash_["templating"]["list"].array) {
    vars.insert(v["name"].str);
    for (const std::string& n : MetricNames(v["definition"].str))
      EXPECT_TRUE(exported_.count(n)) << "variable " << v["name"].str << ": " << n;
  }
  EXPECT_EQ(vars, (std::set<std::string>{"datasource", "instance", "pmd"}));
}

TEST_F(DashboardTest, PanelsAreWellFormedAndQueryOnlyExportedMetrics) {
  ASSERT_EQ(dash_["panels"].type, Json::Type::kArray);
  std::set<double> ids;
  std::set<std::string> titles;
  int queries = 0;
  for (const Json& p : dash_["panels"].array) {
    const std::string title = p["title"].str;
    EXPECT_FALSE(title.empty());
    EXPECT_TRUE(ids.insert(p["id"].number).second) << "duplicate id in " << title;
    const Json& g = p["gridPos"];
    EXPECT_GE(g["w"].number, 1) << title;
    EXPECT_LE(g["x"].number + g["w"].number, 24) << title;
    EXPECT_GE(g["h"].number, 1) << title;
    if (p["type"].str == "row") continue;
    titles.insert(title);
    EXPECT_TRUE(p["type"].str == "timeseries" || p["type"].str == "stat") << title;
    EXPECT_FALSE(p["description"].str.empty()) << title;
    EXPECT_EQ(p["datasource"]["uid"].str, "${datasource}") << title;
    ASSERT_FALSE(p["targets"].array.empty()) << title;
    std::set<std::string> refs;
    for (const Json& t : p["targets"].array) {
      const std::string expr = t["expr"].str;
      EXPECT_TRUE(refs.insert(t["refId"].str).second) << title;
      EXPECT_TRUE(Balanced(expr)) << title << ": " << expr;
      const std::set<std::string> names = MetricNames(expr);
      EXPECT_FALSE(names.empty()) << title << ": " << expr;
      for (const std::string& n : names)
        EXPECT_TRUE(exported_.count(n)) << title << ": unknown metric " << n;
      EXPECT_NE(expr.find("instance=~\"$instance\""), std::string::npos)
          << title << ": not filtered by $instance: " << expr;
      ++queries;
    }
  }
  EXPECT_GE(queries, 20);
  // What the dashboard must show (docs/metrics.md).
  for (const char* want :
       {"Hit ratio per layer", "Mpps per PMD", "Cycles per packet", "Subtables per port",
        "Subtable lookups per megaflow hit", "Rule batch apply latency"})
    EXPECT_TRUE(titles.count(want)) << "missing panel " << want;
}

TEST(AlertRulesTest, ReferenceOnlyExportedMetrics) {
  std::set<std::string> exported;
  for (const std::string& n : ExportedMetricNames()) exported.insert(n);
  const std::string text = ReadFile(FLOWCLASS_SOURCE_DIR "/deploy/prometheus/flowclass_alerts.yml");
  ASSERT_FALSE(text.empty());
  // The rule text without comments and group names.
  std::string rules;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    const size_t key = line.find_first_not_of(" -");
    if (key == std::string::npos || line.compare(key, 5, "name:") != 0) rules += line + "\n";
  }
  const std::set<std::string> names = MetricNames(rules);
  EXPECT_GE(names.size(), 8u);
  for (const std::string& n : names) EXPECT_TRUE(exported.count(n)) << n;
}

// The image builds from the directories the Dockerfile copies: each one the
// top-level CMakeLists.txt adds must be among them (common/ once was not).
TEST(DockerfileTest, CopiesEveryDirectoryTheBuildAdds) {
  const std::string cmake = ReadFile(FLOWCLASS_SOURCE_DIR "/CMakeLists.txt");
  const std::string docker = ReadFile(FLOWCLASS_SOURCE_DIR "/deploy/Dockerfile");
  ASSERT_FALSE(cmake.empty());
  ASSERT_FALSE(docker.empty());
  std::set<std::string> added;
  for (size_t at = cmake.find("add_subdirectory("); at != std::string::npos;
       at = cmake.find("add_subdirectory(", at + 1)) {
    const size_t start = at + 17;
    const size_t end = cmake.find_first_of("/) ", start);
    added.insert(cmake.substr(start, end - start));
  }
  EXPECT_GE(added.size(), 6u);  // dataplane, proto, client, tests, common, server
  for (const std::string& dir : added)
    EXPECT_NE(docker.find("\nCOPY " + dir + "/ " + dir + "/\n"), std::string::npos)
        << "deploy/Dockerfile does not copy " << dir << "/, which CMakeLists.txt adds";
}

TEST(AlertRulesTest, MetricNameScannerFindsUnknownNames) {
  // The checks above rely on MetricNames(); make sure it would catch a typo.
  const auto names = MetricNames(
      "rate(flowclass_pmd_packts_total[5m]) + flowclass_rule_batch_apply_duration_seconds_bucket");
  EXPECT_EQ(names, (std::set<std::string>{"flowclass_pmd_packts_total",
                                          kApplyDurationMetric}));
  std::set<std::string> exported;
  for (const std::string& n : ExportedMetricNames()) exported.insert(n);
  EXPECT_FALSE(exported.count("flowclass_pmd_packts_total"));
}

}  // namespace
}  // namespace flowclass
