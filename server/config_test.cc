#include "server/config.h"

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flowclass {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kMinimal[] = R"(
eal: {hugepages: false, memory_mb: 256, pci: false, file_prefix: t1}
pmd: {lcores: [1, 2]}
ports:
  - {number: 1, device: net_pcap0, args: "rx_pcap=in.pcap,tx_pcap=o1.pcap,tx_pcap=o2.pcap"}
  - {number: 7, device: net_null0, poll: false}
)";

absl::StatusOr<DaemonConfig> Parse(const std::string& text,
                                   std::vector<std::string> ov = {}) {
  return ParseConfig(text, ov, "test.yaml");
}

TEST(ConfigTest, MinimalConfigGetsDefaults) {
  auto c = Parse(kMinimal);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->dataplane.pmd_lcores, ElementsAre(1, 2));
  EXPECT_THAT(c->eal.pmd_lcores, ElementsAre(1, 2));
  EXPECT_EQ(c->dataplane.burst, 32);
  EXPECT_EQ(c->dataplane.tx_retries, 4);
  ASSERT_EQ(c->dataplane.ports.size(), 2u);
  EXPECT_EQ(c->dataplane.ports[0].number, 1u);
  EXPECT_EQ(c->dataplane.ports[0].devargs, "rx_pcap=in.pcap,tx_pcap=o1.pcap,tx_pcap=o2.pcap");
  EXPECT_TRUE(c->dataplane.ports[0].poll);
  EXPECT_FALSE(c->dataplane.ports[1].poll);
  EXPECT_EQ(c->stats_interval_ms, 1000u);
  EXPECT_EQ(c->rules_format, "auto");
  EXPECT_THAT(BuildEalArgs(c->eal),
              ElementsAre("flowclassd", "-l", "0,1,2", "--main-lcore=0", "--no-huge",
                          "-m", "256", "--file-prefix=t1", "--no-pci"));
}

TEST(ConfigTest, LogLevelAndFormat) {
  auto d = Parse(kMinimal);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->log.level, LogLevel::kInfo);
  EXPECT_EQ(d->log.format, LogFormat::kText);
  EXPECT_THAT(DescribeConfig(*d), HasSubstr("\nlog: level info format text\n"));
  auto c = Parse(std::string(kMinimal) + "log: {level: debug, format: json}\n",
                 {"log.level=error"});  // an override (--log-level) wins over the file
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log.level, LogLevel::kError);
  EXPECT_EQ(c->log.format, LogFormat::kJson);
  EXPECT_THAT(DescribeConfig(*c), HasSubstr("\nlog: level error format json\n"));
}

TEST(ConfigTest, OverridesReplaceScalarsListsAndListItems) {
  auto c = Parse(kMinimal, {"pmd.lcores=[3]", "ports.0.args=rx_pcap=x.pcap",
                            "stats.interval_ms=250", "eal.lcore_map=0@0,3@1",
                            "ports.2.number=9", "ports.2.device=net_null1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->dataplane.pmd_lcores, ElementsAre(3));
  EXPECT_EQ(c->dataplane.ports[0].devargs, "rx_pcap=x.pcap");
  EXPECT_EQ(c->stats_interval_ms, 250u);
  ASSERT_EQ(c->dataplane.ports.size(), 3u);
  EXPECT_EQ(c->dataplane.ports[2].number, 9u);
  EXPECT_EQ(BuildEalArgs(c->eal)[1], "--lcores=0@0,3@1");
  // Lists given as "1,2" on the command line work too.
  auto d = Parse(kMinimal, {"pmd.lcores=4,5"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->dataplane.pmd_lcores, ElementsAre(4, 5));
}

TEST(ConfigTest, ErrorsNameTheKeyAndTheProblem) {
  struct Case {
    std::vector<std::string> ov;
    std::string want;
  } cases[] = {
      {{"eal.hugepaggs=true"}, "eal.hugepaggs: unknown key"},
      {{"pmd.burst=64"}, "pmd.burst: 64 is outside 1..32"},
      {{"pmd.burst=many"}, "pmd.burst: \"many\" is not an integer"},
      // EAL only warns about a bad --log-level and runs at its default.
      {{"eal.log_level=nonsense"}, "eal.log_level: \"nonsense\" is not LEVEL, TYPE:LEVEL"},
      {{"eal.log_level=9"}, "eal.log_level: \"9\" is not LEVEL"},
      {{"eal.log_level=lib.eal:loud"}, "eal.log_level: \"lib.eal:loud\""},
      {{"eal.log_level=:debug"}, "eal.log_level: \":debug\""},
      {{"pmd.lcores=[0]"}, "pmd.lcores[0]: lcore 0 is eal.main_lcore"},
      {{"pmd.lcores=[1,1]"}, "pmd.lcores[1]: lcore 1 is listed twice"},
      {{"pmd.lcores=[]"}, "pmd.lcores: required"},
      {{"ports.1.number=1"}, "ports[1].number: duplicate port number 1 (also ports[0])"},
      {{"ports.1.device=net_pcap0"}, "ports[1].device: duplicate device net_pcap0"},
      {{"ports.1.device=eth0"}, "ports[1].device: \"eth0\" is neither a PCI address"},
      {{"ports.0.rx_queues=0"}, "ports[0].rx_queues: 0 is outside 1..64"},
      {{"ports.0.speed=10"}, "ports[0].speed: unknown key"},
      {{"ports.0.poll=maybe"}, "ports[0].poll: \"maybe\" is not a boolean"},
      {{"ports.0.device=0000:3b:02.1"}, "PCI device 0000:3b:02.1 but eal.pci is false"},
      {{"ports.0.poll=false"}, "ports: no port has poll: true"},
      {{"eal.memory_mb=0"}, "eal.memory_mb: required when eal.hugepages is false"},
      {{"eal.file_prefix=a/b"}, "eal.file_prefix: must be a non-empty name"},
      {{"rules.format=xml"}, "rules.format: \"xml\" is not auto, native or classbench"},
      {{"bogus.key=1"}, "bogus: unknown key"},
      {{"eal.file_prefix.x=1"}, "\"x\" is below a scalar"},
      {{"pmd.lcores.x=1"}, "\"x\" is not an index of a list of 2"},
      {{"novalue"}, "expected key=value"},
      {{"pipeline.smc=maybe"}, "pipeline.smc: \"maybe\" is not on, off or auto (or true/false)"},
      {{"pipeline.cd=sometimes"}, "pipeline.cd: \"sometimes\" is not on, off or auto"},
      {{"pipeline.ranking_interval_ms=-1"}, "pipeline.ranking_interval_ms: -1 is outside"},
      {{"pipeline.emc=1"}, "pipeline.emc: unknown key"},
      {{"pipeline.max_megaflows=0"}, "pipeline.max_megaflows: 0 is outside 1..16777216"},
      {{"pipeline.max_subtables_per_port=65536"},
       "pipeline.max_subtables_per_port: 65536 is outside 1..65535"},
      {{"pipeline.megaflow_max_idle_ms=-5"}, "pipeline.megaflow_max_idle_ms: -5 is outside"},
      {{"pipeline.upcall_rate=10000001"}, "pipeline.upcall_rate: 10000001 is outside 0..10000000"},
      {{"pipeline.upcall_burst=0"}, "pipeline.upcall_burst: 0 is outside 1..10000000"},
      {{"pipeline.upcall_limit_action=reject"},
       "pipeline.upcall_limit_action: \"reject\" is not drop or classify"},
      {{"pipeline.rare_mask_subtables=65536"},
       "pipeline.rare_mask_subtables: 65536 is outside 0..65535"},
      {{"dpcls.lookup_prio.sse9=1"}, "dpcls.lookup_prio.sse9: "},
      {{"dpcls.lookup_prio.avx512=high"}, "dpcls.lookup_prio.avx512: \"high\" is not a whole-number priority in 0..255"},
      {{"dpcls.lookup_prio=3"}, "dpcls.lookup_prio: must be a mapping"},
      {{"mempool.mbufs=300"}, "mempool.cache: a cache of 256 mbufs needs a pool of at least 384"},
      {{"log.level=warning"}, "log.level: \"warning\" is not debug, info, warn or error"},
      {{"log.level=[info]"}, "log.level: must be a string"},
      {{"log.format=xml"}, "log.format: \"xml\" is not text or json"},
      {{"log.colour=true"}, "log.colour: unknown key"},
      {{"log=json"}, "log: must be a mapping"},
  };
  for (const Case& c : cases) {
    auto r = Parse(kMinimal, c.ov);
    ASSERT_FALSE(r.ok()) << c.ov[0];
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.ov[0];
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.want)) << c.ov[0];
  }
}

// A key written twice is refused, naming it and both lines (yaml-cpp would
// take the first silently), in any mapping of the document.
TEST(ConfigTest, DuplicateKeysAreRefused) {
  auto r = Parse(std::string(kMinimal) + "pipeline:\n  emc_insert_inv_prob: 5\n"
                                         "  emc_insert_inv_prob: 7\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "test.yaml: pipeline.emc_insert_inv_prob: duplicate key (line 9; first at line 8)");
  r = Parse(std::string(kMinimal) + "pmd: {lcores: [3]}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("test.yaml: pmd: duplicate key"));
  r = Parse("ports:\n  - {number: 1, device: net_null0, number: 2}\npmd: {lcores: [1]}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("ports[0].number: duplicate key"));
  // The same key in two mappings is two keys.
  r = Parse(std::string(kMinimal) + "store: {path: /tmp/x}\nrules: {path: x}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::Not(HasSubstr("duplicate")));
}

// What an error quotes is cut short and escaped: a 20 MB value is not
// echoed, a NUL does not end the message, and a document of nested aliases
// is refused instead of expanded.
TEST(ConfigTest, QuotedInputIsBoundedAndEscaped) {
  auto r = Parse(kMinimal, {"pipeline.emc_insert_inv_prob=" + std::string(20 << 20, 'x')});
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 200u);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("pipeline.emc_insert_inv_prob: \"xxxxxxxxxx"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("x...\" is not an integer"));
  r = Parse(std::string(kMinimal) + "rules: {format: \"na\\0tive\"}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "test.yaml: rules.format: \"na\\x00tive\" is not auto, native or classbench");
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    bomb += absl::StrCat("a", i, ": &a", i, " [");
    for (int j = 0; j < 10; ++j) bomb += absl::StrCat(j ? ", " : "", "*a", i - 1);
    bomb += "]\n";
  }
  r = Parse(bomb);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("more than 100000 YAML nodes"));
  // An alias inside its own anchor nests for ever: refused at a depth, at
  // once, and the key path it names is cut short.
  r = Parse(std::string(kMinimal) + "a: &a [x, *a]\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("\"a[1][1][1]"));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("...\": nested deeper than 32 levels (aliases expanded)"));
  EXPECT_LT(r.status().message().size(), 200u);
  // A config nested 30 levels deep is still read (and refused for its key).
  std::string deep = "x: ";
  for (int i = 0; i < 30; ++i) deep += "{a: ";
  deep += "1" + std::string(30, '}') + "\n";
  r = Parse(std::string(kMinimal) + deep);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::Not(HasSubstr("nested deeper")));
}

// The rule table's caps: RuleTableLimits' defaults, the file's values, the
// range, and the start-up summary.
TEST(ConfigTest, RuleTableCapsAreConfigKeys) {
  auto d = Parse(kMinimal);
  ASSERT_TRUE(d.ok()) << d.status();
  const RuleTableLimits dflt;
  EXPECT_EQ(d->dataplane.limits.max_rules, dflt.max_rules);
  EXPECT_EQ(d->dataplane.limits.max_entries, dflt.max_entries);
  auto c = Parse(std::string(kMinimal) + "rules: {max_rules: 1000, max_entries: 2000}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dataplane.limits.max_rules, 1000u);
  EXPECT_EQ(c->dataplane.limits.max_entries, 2000u);
  EXPECT_THAT(DescribeConfig(*c), HasSubstr("max_rules 1000 max_entries 2000\n"));
  auto z = Parse(kMinimal, {"rules.max_rules=0"});
  ASSERT_FALSE(z.ok());
  EXPECT_THAT(std::string(z.status().message()),
              HasSubstr("rules.max_rules: 0 is outside 1..268435456"));
  z = Parse(kMinimal, {"rules.max_entries=268435457"});
  ASSERT_FALSE(z.ok());
  EXPECT_THAT(std::string(z.status().message()),
              HasSubstr("rules.max_entries: 268435457 is outside 1..268435456"));
}

// The connection and stream limits of the gRPC server (no lockout by one
// client): defaults, every key read, the summary, range and cross-key errors.
TEST(ConfigTest, GrpcLockoutLimitsAreConfigKeys) {
  const std::string grpc = "grpc: {plaintext: true, port: 0}\n";
  auto d = Parse(std::string(kMinimal) + grpc);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->grpc.max_streams_per_identity, 0u);
  EXPECT_EQ(StreamsPerIdentity(d->grpc), 8u);  // a quarter of 32
  EXPECT_EQ(d->grpc.stream_idle_timeout_ms, 60000u);
  EXPECT_EQ(d->grpc.handshake_timeout_ms, 10000u);
  EXPECT_EQ(d->grpc.keepalive_time_ms, 60000u);
  EXPECT_EQ(d->grpc.keepalive_timeout_ms, 20000u);
  EXPECT_EQ(d->grpc.min_client_ping_interval_ms, 10000u);
  EXPECT_EQ(d->grpc.max_connection_idle_ms, 300000u);
  EXPECT_THAT(DescribeConfig(*d),
              HasSubstr("grpc limits: max_concurrent_streams 32 max_streams_per_identity 8 "
                        "stream_idle_timeout_ms 60000 handshake_timeout_ms 10000 "
                        "keepalive_time_ms 60000 keepalive_timeout_ms 20000 "
                        "min_client_ping_interval_ms 10000 max_connection_idle_ms 300000\n"));
  auto c = Parse(std::string(kMinimal) + grpc,
                 {"grpc.max_concurrent_streams=10", "grpc.max_streams_per_identity=3",
                  "grpc.stream_idle_timeout_ms=0", "grpc.handshake_timeout_ms=2000",
                  "grpc.keepalive_time_ms=5000", "grpc.keepalive_timeout_ms=1000",
                  "grpc.min_client_ping_interval_ms=0", "grpc.max_connection_idle_ms=9000"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(StreamsPerIdentity(c->grpc), 3u);
  EXPECT_EQ(c->grpc.stream_idle_timeout_ms, 0u);
  EXPECT_EQ(c->grpc.handshake_timeout_ms, 2000u);
  EXPECT_EQ(c->grpc.keepalive_time_ms, 5000u);
  EXPECT_EQ(c->grpc.keepalive_timeout_ms, 1000u);
  EXPECT_EQ(c->grpc.min_client_ping_interval_ms, 0u);
  EXPECT_EQ(c->grpc.max_connection_idle_ms, 9000u);
  auto one = Parse(std::string(kMinimal) + grpc, {"grpc.max_concurrent_streams=3"});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(StreamsPerIdentity(one->grpc), 1u);  // at least 1
  for (const auto& [ov, want] : std::vector<std::pair<std::string, std::string>>{
           {"grpc.max_streams_per_identity=33",
            "grpc.max_streams_per_identity: 33 is above max_concurrent_streams (32)"},
           {"grpc.stream_idle_timeout_ms=86400001",
            "grpc.stream_idle_timeout_ms: 86400001 is outside 0..86400000"},
           {"grpc.handshake_timeout_ms=99", "grpc.handshake_timeout_ms: 99 is outside"},
           {"grpc.keepalive_time_ms=999", "grpc.keepalive_time_ms: 999 is outside"},
           {"grpc.keepalive_timeout_ms=0", "grpc.keepalive_timeout_ms: 0 is outside"},
           {"grpc.max_connection_idle_ms=0", "grpc.max_connection_idle_ms: 0 is outside"},
           {"grpc.min_client_ping_interval_ms=-1", "grpc.min_client_ping_interval_ms"},
       }) {
    auto e = Parse(std::string(kMinimal) + grpc, {ov});
    ASSERT_FALSE(e.ok()) << ov;
    EXPECT_THAT(std::string(e.status().message()), HasSubstr(want)) << ov;
  }
}

// Megaflow expiry and caps: defaults as the pipeline's, the file's values
// reach PipelineConfig and the start-up summary.
TEST(ConfigTest, MegaflowExpiryAndCapsReachThePipeline) {
  auto d = Parse(kMinimal);
  ASSERT_TRUE(d.ok()) << d.status();
  const PipelineConfig dflt;
  EXPECT_EQ(d->dataplane.pipeline.megaflow_max_idle_ms, 10000u);
  EXPECT_EQ(d->dataplane.pipeline.max_megaflows, dflt.max_megaflows);
  EXPECT_EQ(d->dataplane.pipeline.max_subtables_per_port, dflt.max_subtables_per_port);
  auto c = Parse(std::string(kMinimal) + R"(
pipeline: {megaflow_max_idle_ms: 0, max_megaflows: 5000, max_subtables_per_port: 8}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  const PipelineConfig& p = c->dataplane.pipeline;
  EXPECT_EQ(p.megaflow_max_idle_ms, 0u);
  EXPECT_EQ(p.max_megaflows, 5000u);
  EXPECT_EQ(p.max_subtables_per_port, 8u);
  EXPECT_THAT(DescribeConfig(*c),
              HasSubstr("megaflows: max_megaflows 5000 max_subtables_per_port 8 "
                        "megaflow_max_idle_ms 0\n"));
}

// The upcall rate limit is off by default, the mask-explosion defence on at
// 32 subtables; the file's values reach PipelineConfig and the summary.
TEST(ConfigTest, UpcallLimitAndRareMaskDefenceReachThePipeline) {
  auto d = Parse(kMinimal);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->dataplane.pipeline.upcall_rate, 0u);
  EXPECT_EQ(d->dataplane.pipeline.upcall_burst, 1000u);
  EXPECT_EQ(d->dataplane.pipeline.upcall_limit_action, UpcallLimitAction::kDrop);
  EXPECT_EQ(d->dataplane.pipeline.rare_mask_subtables, 32u);
  EXPECT_THAT(DescribeConfig(*d), HasSubstr(" rare_mask_subtables 32\n"));
  auto c = Parse(std::string(kMinimal) + R"(
pipeline: {upcall_rate: 2000, upcall_burst: 50, upcall_limit_action: classify,
           rare_mask_subtables: 64}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  const PipelineConfig& p = c->dataplane.pipeline;
  EXPECT_EQ(p.upcall_rate, 2000u);
  EXPECT_EQ(p.upcall_burst, 50u);
  EXPECT_EQ(p.upcall_limit_action, UpcallLimitAction::kClassify);
  EXPECT_EQ(p.rare_mask_subtables, 64u);
  EXPECT_THAT(DescribeConfig(*c),
              HasSubstr("upcalls: upcall_rate 2000 upcall_burst 50 upcall_limit_action classify "
                        "rare_mask_subtables 64\n"));
}

// The run-time settings' start values: the same dotted keys as SetConfig.
TEST(ConfigTest, PipelineAndDpclsSectionsSetTheStartValues) {
  auto d = Parse(kMinimal);
  ASSERT_TRUE(d.ok()) << d.status();
  const PipelineConfig dflt;
  EXPECT_EQ(d->dataplane.pipeline.smc, dflt.smc);
  EXPECT_EQ(dflt.smc, CacheMode::kAuto);  // the cost controller decides
  EXPECT_EQ(d->dataplane.pipeline.dpcls.lookup, dflt.dpcls.lookup);
  auto c = Parse(std::string(kMinimal) + R"(
pipeline: {emc_insert_inv_prob: 5, emc_adaptive: off, smc: on, cd: off, ranking_interval_ms: 250}
dpcls: {force_scalar: true, lookup_prio: {generic: 7, autovalidator: 1}}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  const PipelineConfig& p = c->dataplane.pipeline;
  EXPECT_EQ(p.emc_config.insert_inv_prob, 5u);
  EXPECT_EQ(p.smc, CacheMode::kOn);
  EXPECT_EQ(p.cd.mode, CdMode::kOff);
  EXPECT_EQ(p.ranking_interval_ms, 250u);
  EXPECT_TRUE(p.dpcls.lookup.force_scalar);
  EXPECT_EQ(p.dpcls.lookup.Get("generic").value_or(-1), 7);
  EXPECT_EQ(p.dpcls.lookup.Get("autovalidator").value_or(-1), 1);
  EXPECT_EQ(p.dpcls.lookup.Get("avx512").value_or(-1), dflt.dpcls.lookup.Get("avx512").value_or(-2));
  EXPECT_THAT(DescribeConfig(*c),
              HasSubstr("pipeline: emc_insert_inv_prob 5 emc_adaptive off smc on cd off "
                        "ranking_interval_ms 250\n"));
  // The command line reaches them too.
  auto o = Parse(kMinimal, {"pipeline.smc=on", "dpcls.lookup_prio.generic=9"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->dataplane.pipeline.smc, CacheMode::kOn);
  // auto, and the booleans the key took before auto came.
  for (const auto& [text, want] : {std::pair{"auto", CacheMode::kAuto},
                                   std::pair{"true", CacheMode::kOn},
                                   std::pair{"false", CacheMode::kOff},
                                   std::pair{"off", CacheMode::kOff}}) {
    auto m = Parse(kMinimal, {absl::StrCat("pipeline.smc=", text)});
    ASSERT_TRUE(m.ok()) << text << ": " << m.status();
    EXPECT_EQ(m->dataplane.pipeline.smc, want) << text;
  }
  EXPECT_EQ(o->dataplane.pipeline.dpcls.lookup.Get("generic").value_or(-1), 9);
}

TEST(ConfigTest, PipelineKind) {
  auto d = Parse(kMinimal);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->dataplane.kind, PipelineKind::kMegaflow);
  EXPECT_THAT(DescribeConfig(*d), HasSubstr("\npipeline.kind: megaflow\n"));
  auto m = Parse(std::string(kMinimal) + "pipeline: {kind: megaflow}\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dataplane.kind, PipelineKind::kMegaflow);
  // acl: the dataplane runs the acl pipeline; --check-config shows it.
  auto a = Parse(std::string(kMinimal) + "pipeline: {kind: acl}\n");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dataplane.kind, PipelineKind::kAcl);
  EXPECT_THAT(DescribeConfig(*a), HasSubstr("\npipeline.kind: acl\n"));
  auto o = Parse(kMinimal, {"pipeline.kind=acl"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->dataplane.kind, PipelineKind::kAcl);
  auto x = Parse(kMinimal, {"pipeline.kind=tss"});
  ASSERT_FALSE(x.ok());
  EXPECT_THAT(std::string(x.status().message()),
              HasSubstr("pipeline.kind: \"tss\" is not megaflow or acl"));
}

// pipeline.acl_algorithm: by name, in the file and on the command line; the
// CPU check needs EAL and is made when the dataplane starts.
TEST(ConfigTest, AclAlgorithm) {
  auto d = Parse(std::string(kMinimal) + "pipeline: {kind: acl}\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->dataplane.acl_algorithm, AclAlgorithm::kDefault);
  EXPECT_THAT(DescribeConfig(*d), HasSubstr("\npipeline.acl_algorithm: default ("));
  auto a = Parse(std::string(kMinimal) + "pipeline: {kind: acl, acl_algorithm: autovalidator}\n");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dataplane.acl_algorithm, AclAlgorithm::kAutovalidator);
  auto o = Parse(std::string(kMinimal) + "pipeline: {kind: acl}\n",
                 {"pipeline.acl_algorithm=scalar"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->dataplane.acl_algorithm, AclAlgorithm::kScalar);
  EXPECT_THAT(DescribeConfig(*o), HasSubstr("\npipeline.acl_algorithm: scalar ("));
  auto x = Parse(kMinimal, {"pipeline.acl_algorithm=avx3"});
  ASSERT_FALSE(x.ok());
  EXPECT_THAT(std::string(x.status().message()),
              HasSubstr("pipeline.acl_algorithm: \"avx3\" is not default, scalar, sse, avx2, "
                        "avx512x16, avx512x32 or autovalidator"));
}

TEST(ConfigTest, MissingSectionsAndSyntaxErrors) {
  auto r = Parse("pmd: {lcores: [1]}\neal: {hugepages: false, memory_mb: 64}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("ports: required"));
  r = Parse("eal: [1, 2\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("test.yaml:"));
  r = Parse("- 1\n- 2\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("top level must be a mapping"));
  auto f = LoadConfig("/nonexistent/flowclassd.yaml", {});
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
}

TEST(ConfigTest, PciPortsAreAllowListedForEal) {
  auto c = Parse(kMinimal, {"eal.pci=true", "eal.hugepages=true",
                            "ports.1.device=0000:3b:02.1", "ports.1.args=rxq_cqe_comp_en=0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->eal.pci_allow, ElementsAre("0000:3b:02.1,rxq_cqe_comp_en=0"));
  std::vector<std::string> args = BuildEalArgs(c->eal);
  EXPECT_THAT(args, ::testing::Contains("0000:3b:02.1,rxq_cqe_comp_en=0"));
  EXPECT_THAT(args, ::testing::Not(::testing::Contains("--no-huge")));
}

TEST(ConfigTest, EalLogLevelsAndIpv6OverridesAreTaken) {
  for (const char* level : {"error", "8", "lib.eal:debug", "pmd.net.*,warning"}) {
    auto c = Parse(kMinimal, {absl::StrCat("eal.log_level=", level)});
    ASSERT_TRUE(c.ok()) << level << ": " << c.status();
    EXPECT_EQ(c->eal.log_level, level);
  }
  // "[::1]" and "[::1]:9464" read as YAML lists; --set takes them as the
  // addresses they are (so the message is about the address, not the type).
  auto c = Parse(kMinimal, {"grpc.plaintext=true", "grpc.port=0", "grpc.address=[::1]"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grpc.address, "[::1]");
  c = Parse(kMinimal, {"metrics.address=[::1]:9464"});
  EXPECT_THAT(c.status().message(), ::testing::Not(HasSubstr("must be a string")));
  EXPECT_THAT(c.status().message(), HasSubstr("metrics.address"));
  // Only for address keys: elsewhere a bracketed value that reads like an
  // IPv6 address stays a list.
  c = Parse(kMinimal, {"eal.extra_args=[ab:cd]"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->eal.extra_args, ElementsAre("ab:cd"));
  // A list stays a list.
  c = Parse(kMinimal, {"pmd.lcores=[3,4]"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->dataplane.pmd_lcores, ElementsAre(3, 4));
}

TEST(ConfigTest, NoPciPortMeansNoPciProbe) {
  // eal.pci: true with vdevs only: nothing to allow-list, so nothing probed
  // (not every PCI device EAL can bind).
  auto c = Parse(kMinimal, {"eal.pci=true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(BuildEalArgs(c->eal), ::testing::Contains("--no-pci"));
  // Unless the user picks devices in extra_args.
  c = Parse(kMinimal, {"eal.pci=true", "eal.extra_args=[-a, 0000:3b:02.1]"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(BuildEalArgs(c->eal), ::testing::Not(::testing::Contains("--no-pci")));
  // A vdev over PCI devices (bonding): they are allow-listed, not left out.
  c = Parse(kMinimal, {"eal.pci=true", "ports.1.device=net_bonding0",
                       "ports.1.args=mode=1,slave=0000:3b:00.0,slave=3b:00.1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->eal.pci_allow, ElementsAre("0000:3b:00.0", "3b:00.1"));
  EXPECT_THAT(BuildEalArgs(c->eal), ::testing::Not(::testing::Contains("--no-pci")));
  // With a PCI port: it is allowed, nothing else.
  c = Parse(kMinimal, {"eal.pci=true", "ports.1.device=0000:3b:02.1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(BuildEalArgs(c->eal), ::testing::Not(::testing::Contains("--no-pci")));
}

TEST(ConfigTest, StoreSection) {
  auto c = Parse(kMinimal);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->store.path, "");  // in memory unless configured
  EXPECT_FALSE(c->store.recover_to_last_consistent);
  EXPECT_THAT(DescribeConfig(*c), HasSubstr("store: (none: in memory"));
  c = Parse(kMinimal, {"store.path=/var/lib/flowclass", "store.recover_to_last_consistent=true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->store.path, "/var/lib/flowclass");
  EXPECT_TRUE(c->store.recover_to_last_consistent);
  EXPECT_THAT(DescribeConfig(*c),
              HasSubstr("store: /var/lib/flowclass/rules.db recover_to_last_consistent "
                        "checkpoint_idle_ms 50"));
  EXPECT_EQ(c->store.checkpoint_idle_ms, 50u);
  c = Parse(kMinimal, {"store.path=/var/lib/flowclass", "store.checkpoint_idle_ms=0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->store.checkpoint_idle_ms, 0u);
  struct Case {
    std::vector<std::string> ov;
    std::string want;
  } cases[] = {
      {{"store.path=relative/dir"}, "store.path: \"relative/dir\" is not an absolute path"},
      {{"store.path=\"\""}, "store.path: empty"},
      {{"store.recover_to_last_consistent=maybe"},
       "store.recover_to_last_consistent: \"maybe\" is not a boolean"},
      {{"store.pth=/x"}, "store.pth: unknown key"},
      {{"store.checkpoint_idle_ms=3600001"}, "store.checkpoint_idle_ms"},
      {{"store.checkpoint_idle_ms=-1"}, "store.checkpoint_idle_ms"},
  };
  for (const Case& k : cases) {
    auto bad = Parse(kMinimal, k.ov);
    ASSERT_FALSE(bad.ok()) << k.want;
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(k.want));
  }
}

TEST(ConfigTest, LooksLikePciAddress) {
  EXPECT_TRUE(LooksLikePciAddress("0000:3b:02.1"));
  EXPECT_TRUE(LooksLikePciAddress("3b:02.7"));
  EXPECT_FALSE(LooksLikePciAddress("net_pcap0"));
  EXPECT_FALSE(LooksLikePciAddress("0000:3b:02"));
  EXPECT_FALSE(LooksLikePciAddress("000:3b:02.1"));
  EXPECT_FALSE(LooksLikePciAddress("0000:3g:02.1"));
}

TEST(ConfigTest, ExampleConfigIsValid) {
  auto c = LoadConfig(FLOWCLASS_SOURCE_DIR "/deploy/flowclassd.example.yaml", {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dataplane.ports.size(), 3u);
  EXPECT_FALSE(c->eal.hugepages);
  EXPECT_THAT(DescribeConfig(*c), HasSubstr("port 3: net_null0 tx-only"));
}

}  // namespace
}  // namespace flowclass
