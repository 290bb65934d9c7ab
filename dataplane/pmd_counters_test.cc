// The PMD counter table (pmd_counters.h): well-formed entries, and the loops
// over it (PmdStats' operators, Pipeline::FormatStats, DataplaneStats'
// ToString) giving every entry exactly once.
#include "dataplane/pmd_counters.h"

#include <cctype>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "dataplane/dataplane.h"
#include "dataplane/pipeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

bool SnakeCase(const std::string& s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Counter i: a value no other counter has.
uint64_t ValueOf(size_t i) { return 1000 * (i + 1) + 7; }

PmdStats Distinct() {
  PmdStats s;
  for (size_t i = 0; i < kNumPmdCounters; ++i) s.*kPmdCounters[i].field = ValueOf(i);
  return s;
}

// Occurrences of `what` in `text`.
size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PmdCountersTest, EntriesAreWellFormed) {
  std::set<std::string> names, texts, metrics;
  const PmdStats probe;
  std::set<const uint64_t*> fields;
  for (size_t i = 0; i < kNumPmdCounters; ++i) {
    const PmdCounterInfo& c = kPmdCounters[i];
    EXPECT_EQ(static_cast<size_t>(c.id), i) << c.name;
    EXPECT_EQ(&PmdCounterInfoOf(c.id), &c) << c.name;
    EXPECT_TRUE(SnakeCase(c.name)) << c.name;
    EXPECT_TRUE(names.insert(c.name).second) << "name twice: " << c.name;
    EXPECT_TRUE(texts.insert(c.text).second) << "text twice: " << c.text;
    EXPECT_TRUE(fields.insert(&(probe.*c.field)).second) << "field twice: " << c.name;
    EXPECT_EQ(c.metric == nullptr, c.help == nullptr) << c.name;
    if (c.metric == nullptr) continue;
    const std::string m = c.metric;
    EXPECT_TRUE(SnakeCase(m) && m.rfind("flowclass_pmd_", 0) == 0) << m;
    EXPECT_TRUE(metrics.insert(m).second) << "metric twice: " << m;
    EXPECT_FALSE(std::string(c.help).empty()) << m;
    // Prometheus conventions: counters end in _total, gauges do not.
    EXPECT_EQ(EndsWith(m, "_total"), c.kind == PmdCounterKind::kCounter) << m;
    if (c.unit == PmdCounterUnit::kCycles) {
      EXPECT_TRUE(EndsWith(m, "_cycles_total")) << m;
    }
  }
}

TEST(PmdCountersTest, OperatorsTakeEveryCounter) {
  const PmdStats d = Distinct();
  PmdStats s = d;
  s += d;
  for (size_t i = 0; i < kNumPmdCounters; ++i)
    EXPECT_EQ(s.*kPmdCounters[i].field, 2 * ValueOf(i)) << kPmdCounters[i].name;
  s -= d;
  for (size_t i = 0; i < kNumPmdCounters; ++i)
    EXPECT_EQ(s.*kPmdCounters[i].field, ValueOf(i)) << kPmdCounters[i].name;
}

TEST(PmdCountersTest, FormatStatsHasOneLinePerCounterWithItsTextAndValue) {
  PipelineSnapshot snap;
  snap.stats = Distinct();
  // StrCat, not "\n" + std::string: GCC 12's -O3 -Wrestrict false positive
  // on operator+ of a one-character literal (GCC bug 105329).
  const std::string text = absl::StrCat("\n", Pipeline::FormatStats(snap));
  for (size_t i = 0; i < kNumPmdCounters; ++i) {
    const PmdCounterInfo& c = kPmdCounters[i];
    EXPECT_EQ(Count(text, absl::StrCat("\n  ", c.text, ": ")), 1u) << c.text;
    EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat("\n  ", c.text, ": ", ValueOf(i), "\n")))
        << c.text;
  }
  // The derived values follow the counters.
  EXPECT_THAT(text, ::testing::HasSubstr("  avg. subtable lookups per megaflow hit: "));
  EXPECT_THAT(text, ::testing::HasSubstr("  avg cycles per packet: "));
}

TEST(PmdCountersTest, DataplaneToStringShowsEveryCounterOfEachPmd) {
  DataplaneStats s;
  PmdCounters p;
  p.pipeline = Distinct();
  s.pmds.push_back(p);  // counters only
  p.pmd = 1;
  p.has_snapshot = true;
  p.snapshot.stats = p.pipeline;
  s.pmds.push_back(p);  // with a snapshot
  const std::string text = s.ToString();
  for (size_t i = 0; i < kNumPmdCounters; ++i)
    EXPECT_EQ(Count(text, absl::StrCat("\n  ", kPmdCounters[i].text, ": ", ValueOf(i), "\n")), 2u)
        << kPmdCounters[i].text;
}

}  // namespace
}  // namespace flowclass
