#include "dataplane/runtime_settings.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// Every key the settings have, with a value other than its default.
RuntimeSettings Unusual() {
  RuntimeSettings s;
  s.tx_retries = 1000000;
  s.idle_sleep_us = 7;
  s.emc_insert_inv_prob = kMaxEmcInsertInvProb;
  s.smc = CacheMode::kOn;
  s.cd = CdMode::kOn;
  s.ranking_interval_ms = 0;
  s.megaflow_max_idle_ms = 0;
  s.max_megaflows = kMaxMaxMegaflows;
  s.max_subtables_per_port = 1;
  s.upcall_rate = kMaxUpcallRate;
  s.upcall_burst = 1;
  s.upcall_limit_action = UpcallLimitAction::kClassify;
  s.rare_mask_subtables = 7;
  s.lookup.force_scalar = true;
  s.lookup.priority = {0, 255, 9, 4};
  return s;
}

std::map<std::string, std::string> Listed(const RuntimeSettings& s) {
  std::map<std::string, std::string> m = {{"pmd.burst", "32"}};
  for (const auto& [k, v] : FormatRuntimeSettings(RuntimeSettingsUpdate::All(s))) m[k] = v;
  return m;
}

TEST(RuntimeSettingsTest, FormatsEveryKeyInTheDocumentedSpelling) {
  EXPECT_THAT(FormatRuntimeSettings(RuntimeSettingsUpdate::All(Unusual())),
              ::testing::IsSupersetOf({
                  Pair("pmd.tx_retries", "1000000"),
                  Pair("pmd.idle_sleep_us", "7"),
                  Pair("pipeline.emc_insert_inv_prob", "1073741824"),
                  Pair("pipeline.smc", "on"),
                  Pair("pipeline.cd", "on"),
                  Pair("pipeline.ranking_interval_ms", "0"),
                  Pair("pipeline.megaflow_max_idle_ms", "0"),
                  Pair("pipeline.max_megaflows", "16777216"),
                  Pair("pipeline.max_subtables_per_port", "1"),
                  Pair("pipeline.upcall_rate", "10000000"),
                  Pair("pipeline.upcall_burst", "1"),
                  Pair("pipeline.upcall_limit_action", "classify"),
                  Pair("pipeline.rare_mask_subtables", "7"),
                  Pair("dpcls.force_scalar", "true"),
                  Pair("dpcls.lookup_prio.generic", "0"),
                  Pair("dpcls.lookup_prio.specialised", "255"),
                  Pair("dpcls.lookup_prio.avx512", "9"),
                  Pair("dpcls.lookup_prio.autovalidator", "4"),
                  Pair("dpcls.lookup_available.generic", "true"),
              }));
  EXPECT_EQ(FormatRuntimeSettings(RuntimeSettingsUpdate::All(Unusual())).size(),
            14u + 2 * kLookupImplCount);
  RuntimeSettingsUpdate some;
  some.smc = CacheMode::kOff;
  some.cd = CdMode::kAuto;
  EXPECT_THAT(FormatRuntimeSettings(some),
              ElementsAre(Pair("pipeline.smc", "off"), Pair("pipeline.cd", "auto")));
  EXPECT_TRUE(FormatRuntimeSettings(RuntimeSettingsUpdate{}).empty());
}

// Parse(Format(x)) == x, key by key and all at once, for the defaults and
// for settings that differ from them in every key.
TEST(RuntimeSettingsTest, EveryKeyRoundTrips) {
  for (const RuntimeSettings& s : {RuntimeSettings{}, Unusual()}) {
    const RuntimeSettingsUpdate all = RuntimeSettingsUpdate::All(s);
    RuntimeSettingsUpdate back;
    for (const auto& [k, v] : FormatRuntimeSettings(all)) {
      RuntimeSettingsUpdate one;
      ASSERT_TRUE(ParseRuntimeSetting(k, v, &one).ok()) << k << "=" << v;
      ASSERT_EQ(FormatRuntimeSettings(one), std::vector<ConfigValue>({{k, v}})) << k;
      ASSERT_TRUE(ParseRuntimeSetting(k, v, &back).ok());
    }
    EXPECT_EQ(back, all);
    RuntimeSettings applied = s == RuntimeSettings{} ? Unusual() : RuntimeSettings{};
    back.ApplyTo(&applied);
    EXPECT_EQ(applied, s);
  }
}

// pipeline.acl_algorithm: every name round-trips; All() leaves it out (only
// an acl dataplane lists it); it is no PMD knob (ChangesPipeline: the acl
// classifiers read it).
TEST(RuntimeSettingsTest, AclAlgorithmIsListedByAclDataplanesOnly) {
  for (const ConfigValue& kv : FormatRuntimeSettings(RuntimeSettingsUpdate::All(Unusual())))
    EXPECT_NE(kv.first, kConfigAclAlgorithm);
  for (AclAlgorithm a : kAclAlgorithms) {
    RuntimeSettingsUpdate u;
    ASSERT_TRUE(ParseRuntimeSetting(kConfigAclAlgorithm, AclAlgorithmName(a), &u).ok());
    EXPECT_EQ(u.acl_algorithm, a);
    EXPECT_FALSE(u.ChangesPipeline());
    EXPECT_EQ(FormatRuntimeSettings(u),
              std::vector<ConfigValue>({{kConfigAclAlgorithm, AclAlgorithmName(a)}}));
    RuntimeSettings s;
    u.ApplyTo(&s);
    EXPECT_EQ(s.acl_algorithm, a);
  }
  // A dataplane that does not list it (megaflow) answers NOT_FOUND.
  const auto r = ParseRuntimeSettingsRequest({{kConfigAclAlgorithm, "scalar"}},
                                             Listed(RuntimeSettings{}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  auto listed = Listed(RuntimeSettings{});
  listed[kConfigAclAlgorithm] = "default";
  const auto ok = ParseRuntimeSettingsRequest({{kConfigAclAlgorithm, "sse"}}, listed);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->acl_algorithm, AclAlgorithm::kSse);
}

TEST(RuntimeSettingsTest, BadValuesNameTheKeyAsUsersSeeThem) {
  struct Case {
    const char* key;
    const char* value;
    const char* message;
  };
  const Case cases[] = {
      {"pmd.tx_retries", "x", "pmd.tx_retries: \"x\" is not an integer in 0..1000000"},
      {"pmd.idle_sleep_us", "1000001",
       "pmd.idle_sleep_us: \"1000001\" is not an integer in 0..1000000"},
      {"pipeline.emc_insert_inv_prob", "4294967295",
       "pipeline.emc_insert_inv_prob: \"4294967295\" is not a whole number in 0..1073741824 "
       "(0 disables)"},
      {"pipeline.smc", "true", "pipeline.smc: \"true\" is not on, off or auto"},
      {"pipeline.cd", "sometimes", "pipeline.cd: \"sometimes\" is not on, off or auto"},
      {"pipeline.ranking_interval_ms", "-1",
       "pipeline.ranking_interval_ms: \"-1\" is not a whole number of milliseconds in "
       "0..3600000"},
      {"pipeline.megaflow_max_idle_ms", "86400001",
       "pipeline.megaflow_max_idle_ms: \"86400001\" is not a whole number of milliseconds in "
       "0..86400000 (0: megaflows never expire)"},
      {"pipeline.max_megaflows", "0",
       "pipeline.max_megaflows: \"0\" is not a whole number in 1..16777216"},
      {"pipeline.max_megaflows", "16777217",
       "pipeline.max_megaflows: \"16777217\" is not a whole number in 1..16777216"},
      {"pipeline.max_subtables_per_port", "0",
       "pipeline.max_subtables_per_port: \"0\" is not a whole number in 1..65535"},
      {"pipeline.upcall_rate", "10000001",
       "pipeline.upcall_rate: \"10000001\" is not a whole number of upcalls per second in "
       "0..10000000 (0: unlimited)"},
      {"pipeline.upcall_burst", "0",
       "pipeline.upcall_burst: \"0\" is not a whole number in 1..10000000"},
      {"pipeline.upcall_limit_action", "reject",
       "pipeline.upcall_limit_action: \"reject\" is not drop or classify"},
      {"pipeline.rare_mask_subtables", "65536",
       "pipeline.rare_mask_subtables: \"65536\" is not a whole number in 0..65535 (0: off)"},
      {"pipeline.acl_algorithm", "avx3",
       "pipeline.acl_algorithm: \"avx3\" is not default, scalar, sse, avx2, avx512x16, "
       "avx512x32 or autovalidator"},
      {"dpcls.force_scalar", "on", "dpcls.force_scalar: \"on\" is not true or false"},
      {"dpcls.lookup_prio.avx512", "4000000000",
       "dpcls.lookup_prio.avx512: \"4000000000\" is not a whole-number priority in 0..255"},
      {"dpcls.lookup_prio.avx512", "256",
       "dpcls.lookup_prio.avx512: lookup priority of avx512: must be in [0, 255], got 256"},
  };
  for (const Case& c : cases) {
    RuntimeSettingsUpdate u;
    const absl::Status s = ParseRuntimeSetting(c.key, c.value, &u);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_EQ(s.message(), c.message);
    EXPECT_EQ(u, RuntimeSettingsUpdate{}) << c.key << ": changed on error";
  }
  RuntimeSettingsUpdate u;
  const absl::Status s = ParseRuntimeSetting("dpcls.lookup_prio.nosuch", "1", &u);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("dpcls.lookup_prio.nosuch: "));
  for (const char* key : {"pipeline.nosuch", "pmd.burst", "dpcls.lookup_available.nosuch", ""})
    EXPECT_EQ(ParseRuntimeSetting(key, "1", &u).code(), absl::StatusCode::kNotFound) << key;
}

TEST(RuntimeSettingsTest, RequestIsCheckedAsAWhole) {
  const std::map<std::string, std::string> listed = Listed(RuntimeSettings{});
  auto request = [&](std::vector<ConfigValue> v) { return ParseRuntimeSettingsRequest(v, listed); };
  absl::StatusOr<RuntimeSettingsUpdate> u =
      request({{"pipeline.smc", "on"}, {"pmd.tx_retries", "2"}, {"pipeline.smc", "off"}});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->smc, CacheMode::kOff);  // the last value wins
  EXPECT_EQ(u->tx_retries, 2u);
  EXPECT_FALSE(u->cd.has_value());
  EXPECT_TRUE(u->ChangesPipeline());
  EXPECT_FALSE(request({{"pmd.tx_retries", "2"}})->ChangesPipeline());

  // The first bad pair answers, naming its key.
  u = request({{"pipeline.smc", "on"}, {"pipeline.cd", "sometimes"}, {"pmd.burst", "8"}});
  EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(u.status().message()), ::testing::StartsWith("pipeline.cd: "));
  u = request({{"pipeline.smc", "on"}, {"pmd.burst", "8"}});
  EXPECT_EQ(u.status(),
            absl::FailedPreconditionError("pmd.burst: can only be set at start-up (config file)"));
  u = request({{"dpcls.lookup_available.generic", "banana"}});
  EXPECT_EQ(u.status(), absl::FailedPreconditionError(
                            "dpcls.lookup_available.generic: read-only (whether this CPU can "
                            "run the implementation)"));
  EXPECT_EQ(request({{"no.such", "1"}}).status(), UnknownConfigKeyError("no.such"));
  // A setting the dataplane does not list is unknown to it.
  EXPECT_EQ(
      ParseRuntimeSettingsRequest({{"pipeline.smc", "on"}}, {{"pmd.tx_retries", "4"}}).status(),
      UnknownConfigKeyError("pipeline.smc"));
  EXPECT_EQ(request({{"dpcls.lookup_prio.nosuch", "1"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flowclass
