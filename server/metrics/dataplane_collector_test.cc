// DataplaneCollector: the families built from a DataplaneStats snapshot
// (names, types, labels, values, top-N subtable bucketing) and Collect()
// reading a live Dataplane (FakeDataplane).
#include "server/metrics/dataplane_collector.h"

#include <cctype>
#include <map>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dataplane/pmd_counters.h"
#include "server/metrics/observed_dataplane.h"
#include "server/testing/fake_dataplane.h"

namespace flowclass {
namespace {

using prometheus::MetricFamily;
using prometheus::MetricType;
using ::testing::Contains;
using ::testing::UnorderedElementsAre;

SubtableInfo Sub(uint16_t id, uint32_t port, uint64_t hits, uint32_t megaflows, int rank) {
  SubtableInfo t;
  t.id = id;
  t.in_port = port;
  t.hits = hits;
  t.megaflows = megaflows;
  t.rank = rank;
  return t;
}

// Two PMDs; PMD 0 has a snapshot with five subtables on ports 1 and 2.
DataplaneStats SampleStats() {
  DataplaneStats s;
  s.generation = 7;
  s.rules.rules = 100;
  s.rules.entries = 140;
  s.rules.subtables = 9;
  s.tsc_hz = 2000000000;
  PmdCounters p;
  p.pmd = 0;
  p.lcore = 3;
  p.iterations = 1000;
  p.rx_packets = 1000;
  p.tx_packets = 900;
  p.tx_dropped = 10;
  p.rule_drops = 50;
  p.no_match = 30;
  p.bad_port = 10;
  p.parse_errors = 2;
  p.busy_cycles = 500000;
  p.idle_cycles = 1500000;
  p.generation = 7;
  p.pipeline.packets = 1000;
  p.pipeline.emc_hits = 600;
  p.pipeline.smc_hits = 100;
  p.pipeline.megaflow_hits = 200;
  p.pipeline.cd_hits = 80;
  p.pipeline.cd_false_hits = 4;
  p.pipeline.subtable_lookups = 450;
  p.pipeline.upcall_ok = 90;
  p.pipeline.upcall_failed = 10;
  p.pipeline.cycles = 300000;
  p.pipeline.revalidations = 3;
  p.pipeline.megaflows_revalidated_out = 5;
  p.pipeline.revalidation_cycles = 6000;
  p.pipeline.upcall_cycles = 7000;
  p.rx_queues = {{1, 0, 600, 0}, {1, 1, 400, 0}};
  p.tx_queues = {{2, 0, 900, 10}};
  p.has_snapshot = true;
  p.snapshot.cd_enabled = true;
  p.snapshot.cd_transitions = 2;
  p.snapshot.smc_enabled = true;
  p.snapshot.smc_switches = 3;
  p.snapshot.emc_occupancy = 500;
  p.snapshot.emc_entries = 8192;
  p.snapshot.smc_occupancy = 0;
  p.snapshot.smc_entries = 1 << 20;
  p.snapshot.cd_occupancy = 40;
  p.snapshot.cd_entries = 1 << 20;
  p.snapshot.megaflows = 15;
  p.snapshot.subtables = 5;
  p.snapshot.subtable = {Sub(4, 1, 500, 5, 0), Sub(9, 1, 10, 1, 2), Sub(2, 1, 300, 3, 1),
                         Sub(7, 2, 300, 4, 0), Sub(1, 2, 0, 2, 1)};
  s.pmds.push_back(p);
  PmdCounters q;  // PMD 1: counters only, no snapshot
  q.pmd = 1;
  q.lcore = 4;
  q.rx_packets = 5;
  q.pipeline.packets = 5;
  q.pipeline.upcall_ok = 5;
  s.pmds.push_back(q);
  PortCounters port;
  port.number = 1;
  port.device = "net_pcap0";
  port.rx_packets = 1000;
  port.dev_ipackets = 1005;
  port.dev_imissed = 3;
  s.ports.push_back(port);
  port = {};
  port.number = 2;
  port.device = "0000:3b:02.1";
  port.tx_packets = 900;
  port.tx_dropped = 10;
  port.dev_opackets = 900;
  s.ports.push_back(port);
  return s;
}

// name -> (sorted "k=v,..." label string -> value) over counters and gauges.
using Series = std::map<std::string, std::map<std::string, double>>;
Series Flatten(const std::vector<MetricFamily>& fams) {
  Series out;
  for (const MetricFamily& f : fams)
    for (const auto& m : f.metric) {
      std::string key;
      auto labels = m.label;
      std::sort(labels.begin(), labels.end());
      for (const auto& l : labels) key += l.name + "=" + l.value + ",";
      if (!key.empty()) key.pop_back();
      const double v = f.type == MetricType::Counter ? m.counter.value : m.gauge.value;
      EXPECT_FALSE(out[f.name].count(key)) << "duplicate series " << f.name << "{" << key << "}";
      out[f.name][key] = v;
    }
  return out;
}

// [a-z_][a-z0-9_]* (no std::regex: GCC 12 warns inside it under ASan).
bool SnakeCase(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

TEST(DataplaneCollectorTest, NamesFollowPrometheusConventions) {
  const auto fams = DataplaneCollector::BuildFamilies(SampleStats(), {});
  std::set<std::string> names;
  for (const MetricFamily& f : fams) {
    EXPECT_TRUE(f.name.rfind("flowclass_", 0) == 0 && f.name.size() > 10 &&
                SnakeCase(f.name))
        << f.name;
    EXPECT_TRUE(names.insert(f.name).second) << "family twice: " << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    const bool total = f.name.size() > 6 && f.name.substr(f.name.size() - 6) == "_total";
    EXPECT_EQ(total, f.type == MetricType::Counter) << f.name;
    ASSERT_TRUE(f.type == MetricType::Counter || f.type == MetricType::Gauge) << f.name;
    EXPECT_FALSE(f.metric.empty()) << f.name;
    // Every series of a family has the same label names.
    std::set<std::string> first;
    for (const auto& l : f.metric.front().label) first.insert(l.name);
    for (const auto& m : f.metric) {
      std::set<std::string> these;
      for (const auto& l : m.label) {
        EXPECT_TRUE(SnakeCase(l.name)) << f.name << " " << l.name;
        these.insert(l.name);
      }
      EXPECT_EQ(these, first) << f.name;
    }
  }
  // ExportedMetricNames covers every family (plus the apply histogram).
  const std::vector<std::string> exported = ExportedMetricNames();
  for (const std::string& n : names) EXPECT_THAT(exported, Contains(n));
  EXPECT_THAT(exported, Contains(std::string(kApplyDurationMetric)));
}

TEST(DataplaneCollectorTest, LayersPartitionPacketsAndCountersCarrySnapshotValues) {
  Series s = Flatten(DataplaneCollector::BuildFamilies(SampleStats(), {}));
  const auto& layers = s["flowclass_pmd_packets_total"];
  EXPECT_EQ(layers.at("layer=emc,pmd=0"), 600);
  EXPECT_EQ(layers.at("layer=smc,pmd=0"), 100);
  EXPECT_EQ(layers.at("layer=cd,pmd=0"), 80);
  EXPECT_EQ(layers.at("layer=megaflow,pmd=0"), 120);  // 200 minus the CD's 80
  EXPECT_EQ(layers.at("layer=upcall_ok,pmd=0"), 90);
  EXPECT_EQ(layers.at("layer=upcall_failed,pmd=0"), 10);
  double sum = 0;
  for (const auto& [k, v] : layers)
    if (k.find("pmd=0") != std::string::npos) sum += v;
  EXPECT_EQ(sum, 1000);  // == pipeline.packets
  EXPECT_EQ(layers.at("layer=upcall_ok,pmd=1"), 5);

  EXPECT_EQ(s["flowclass_pmd_cycles_total"].at("pmd=0,state=busy"), 500000);
  EXPECT_EQ(s["flowclass_pmd_cycles_total"].at("pmd=0,state=idle"), 1500000);
  EXPECT_EQ(s["flowclass_pmd_classifier_cycles_total"].at("pmd=0"), 300000);
  EXPECT_EQ(s["flowclass_pmd_subtable_lookups_total"].at("pmd=0"), 450);
  EXPECT_EQ(s["flowclass_pmd_dropped_packets_total"].at("pmd=0,reason=rule"), 50);
  EXPECT_EQ(s["flowclass_pmd_dropped_packets_total"].at("pmd=0,reason=no_match"), 30);
  EXPECT_EQ(s["flowclass_pmd_dropped_packets_total"].at("pmd=0,reason=bad_port"), 10);
  EXPECT_EQ(s["flowclass_pmd_dropped_packets_total"].at("pmd=0,reason=tx_full"), 10);
  EXPECT_EQ(s["flowclass_pmd_dropped_packets_total"].at("pmd=0,reason=upcall_limit"), 0);
  EXPECT_EQ(s["flowclass_pmd_rate_limited_upcalls_total"].at("pmd=0"), 0);
  EXPECT_EQ(s["flowclass_pmd_rare_mask_upcalls_total"].at("pmd=0"), 0);
  EXPECT_EQ(s["flowclass_pmd_rx_packets_total"].at("pmd=0"), 1000);
  EXPECT_EQ(s["flowclass_pmd_tx_packets_total"].at("pmd=0"), 900);
  EXPECT_EQ(s["flowclass_pmd_cd_false_hits_total"].at("pmd=0"), 4);
  EXPECT_EQ(s["flowclass_pmd_revalidations_total"].at("pmd=0"), 3);
  EXPECT_EQ(s["flowclass_pmd_revalidated_megaflows_total"].at("pmd=0"), 5);
  EXPECT_EQ(s["flowclass_pmd_revalidation_cycles_total"].at("pmd=0"), 6000);
  EXPECT_EQ(s["flowclass_pmd_upcall_cycles_total"].at("pmd=0"), 7000);
  EXPECT_EQ(s["flowclass_pmd_generation"].at("pmd=0"), 7);
  EXPECT_EQ(s["flowclass_pmd_info"].at("lcore=3,pmd=0"), 1);
  EXPECT_EQ(s["flowclass_rule_generation"].at(""), 7);
  EXPECT_EQ(s["flowclass_rules"].at(""), 100);
  EXPECT_EQ(s["flowclass_rule_entries"].at(""), 140);
  EXPECT_EQ(s["flowclass_rule_subtables"].at(""), 9);
  EXPECT_EQ(s["flowclass_tsc_hertz"].at(""), 2e9);
  EXPECT_EQ(s["flowclass_pmds"].at(""), 2);
  EXPECT_EQ(s["flowclass_build_info"].size(), 1u);

  // Queues and ports.
  const auto& q = s["flowclass_queue_packets_total"];
  EXPECT_EQ(q.at("direction=rx,pmd=0,port=1,queue=0"), 600);
  EXPECT_EQ(q.at("direction=rx,pmd=0,port=1,queue=1"), 400);
  EXPECT_EQ(q.at("direction=tx,pmd=0,port=2,queue=0"), 900);
  EXPECT_EQ(s["flowclass_queue_tx_dropped_packets_total"].at("pmd=0,port=2,queue=0"), 10);
  EXPECT_EQ(s["flowclass_port_info"].at("device=0000:3b:02.1,port=2"), 1);
  EXPECT_EQ(s["flowclass_port_rx_packets_total"].at("port=1"), 1000);
  EXPECT_EQ(s["flowclass_port_tx_packets_total"].at("port=2"), 900);
  EXPECT_EQ(s["flowclass_port_tx_dropped_packets_total"].at("port=2"), 10);
  EXPECT_EQ(s["flowclass_port_device_packets_total"].at("direction=rx,port=1"), 1005);
  EXPECT_EQ(s["flowclass_port_device_packets_total"].at("direction=tx,port=2"), 900);
  EXPECT_EQ(s["flowclass_port_device_missed_packets_total"].at("port=1"), 3);

  // Snapshot gauges: only PMD 0 has one.
  EXPECT_EQ(s["flowclass_pmd_cd_enabled"].size(), 1u);
  EXPECT_EQ(s["flowclass_pmd_cd_enabled"].at("pmd=0"), 1);
  EXPECT_EQ(s["flowclass_pmd_cd_transitions_total"].at("pmd=0"), 2);
  EXPECT_EQ(s["flowclass_pmd_smc_enabled"].at("pmd=0"), 1);
  EXPECT_EQ(s["flowclass_pmd_smc_switches_total"].at("pmd=0"), 3);
  EXPECT_EQ(s["flowclass_pmd_cache_used_entries"].at("cache=emc,pmd=0"), 500);
  EXPECT_EQ(s["flowclass_pmd_cache_used_entries"].at("cache=cd,pmd=0"), 40);
  EXPECT_EQ(s["flowclass_pmd_cache_capacity_entries"].at("cache=emc,pmd=0"), 8192);
  EXPECT_EQ(s["flowclass_pmd_cache_capacity_entries"].at("cache=smc,pmd=0"), 1 << 20);
  EXPECT_EQ(s["flowclass_pmd_megaflows"].at("pmd=0"), 15);
  EXPECT_EQ(s["flowclass_pmd_subtables"].at("pmd=0"), 5);
  EXPECT_EQ(s["flowclass_subtables"].at("pmd=0,port=1"), 3);
  EXPECT_EQ(s["flowclass_subtables"].at("pmd=0,port=2"), 2);
  EXPECT_EQ(s["flowclass_megaflows"].at("pmd=0,port=1"), 9);
  EXPECT_EQ(s["flowclass_megaflows"].at("pmd=0,port=2"), 6);
}

// The per-PMD pipeline families keep the names, types and help texts that
// docs/metrics.md, the alert rules and the dashboard were written against.
TEST(DataplaneCollectorTest, PipelineCounterFamiliesKeepTheirNamesAndHelp) {
  const std::map<std::string, std::string> want = {
      {"flowclass_pmd_packets_total",
       "Packets classified, by the layer that found the answer (emc, smc, cd, "
       "megaflow = dpcls search without the CD, upcall_ok, upcall_failed; "
       "pipeline.kind acl: emc, acl); the layers add up to all packets."},
      {"flowclass_pmd_classifier_cycles_total",
       "TSC cycles spent in the classification pipeline (EMC to upcall)."},
      {"flowclass_pmd_subtable_lookups_total",
       "Subtables probed for megaflow hits (divide by megaflow hits for lookups per hit)."},
      {"flowclass_pmd_cd_false_hits_total",
       "Cuckoo Distributor suggestions that did not verify."},
      {"flowclass_pmd_revalidations_total",
       "Rule set changes the PMD installed (caches revalidated or flushed)."},
      {"flowclass_pmd_revalidated_megaflows_total",
       "Megaflows removed by revalidation after rule changes."},
      {"flowclass_pmd_reverdicted_megaflows_total",
       "Megaflows revalidation kept with a new verdict (the new rule's answer holds on the "
       "whole megaflow)."},
      {"flowclass_pmd_rechecked_megaflows_total",
       "Megaflows revalidation looked up again in the slow path after rule changes (those the "
       "change set could not prove unchanged)."},
      {"flowclass_pmd_revalidation_cycles_total",
       "TSC cycles spent installing rule changes (revalidating or flushing the caches); not "
       "in classifier cycles."},
      {"flowclass_pmd_upcall_cycles_total",
       "TSC cycles spent in upcalls (slow-path lookups, megaflow installs); part of "
       "classifier cycles."},
  };
  std::map<std::string, std::string> got;
  std::vector<std::string> order;
  for (const MetricFamily& f : DataplaneCollector::BuildFamilies(SampleStats(), {})) {
    if (!want.count(f.name)) continue;
    EXPECT_EQ(f.type, MetricType::Counter) << f.name;
    got[f.name] = f.help;
    order.push_back(f.name);
  }
  EXPECT_EQ(got, want);
  // Exposition order as before: the layers, then the counters of the cycles block.
  EXPECT_THAT(order, ::testing::ElementsAre(
                         "flowclass_pmd_packets_total", "flowclass_pmd_classifier_cycles_total",
                         "flowclass_pmd_subtable_lookups_total",
                         "flowclass_pmd_cd_false_hits_total", "flowclass_pmd_revalidations_total",
                         "flowclass_pmd_revalidated_megaflows_total",
                         "flowclass_pmd_reverdicted_megaflows_total",
                         "flowclass_pmd_rechecked_megaflows_total",
                         "flowclass_pmd_revalidation_cycles_total",
                         "flowclass_pmd_upcall_cycles_total"));
}

// The family named `name` in `fams`, checked against a counter table entry's
// help and kind (nullptr, with a failure, when it is missing).
const MetricFamily* FamilyOfEntry(const std::vector<MetricFamily>& fams, const char* name,
                                  const char* help, PmdCounterKind kind) {
  for (const MetricFamily& f : fams) {
    if (f.name != name) continue;
    EXPECT_EQ(f.help, help) << name;
    EXPECT_EQ(f.type, kind == PmdCounterKind::kCounter ? MetricType::Counter : MetricType::Gauge)
        << name;
    return &f;
  }
  ADD_FAILURE() << name << ": no such family";
  return nullptr;
}

// Every entry of the counter table with a metric is one family of its own:
// one series per PMD, the entry's help and type, the counter's value.
TEST(DataplaneCollectorTest, EveryTableCounterWithAMetricIsOneSeriesPerPmd) {
  DataplaneStats st;
  for (uint32_t pmd = 0; pmd < 2; ++pmd) {
    PmdCounters p;
    p.pmd = pmd;
    for (size_t i = 0; i < kNumPmdCounters; ++i)
      p.pipeline.*kPmdCounters[i].field = 1000 * (pmd + 1) + i + 1;
    st.pmds.push_back(p);
  }
  const std::vector<MetricFamily> fams = DataplaneCollector::BuildFamilies(st, {});
  const std::vector<std::string> exported = ExportedMetricNames();
  size_t with_metric = 0;
  for (size_t i = 0; i < kNumPmdCounters; ++i) {
    const PmdCounterInfo& c = kPmdCounters[i];
    if (c.metric == nullptr) continue;
    ++with_metric;
    EXPECT_THAT(exported, Contains(std::string(c.metric)));
    const MetricFamily* fam = FamilyOfEntry(fams, c.metric, c.help, c.kind);
    ASSERT_NE(fam, nullptr) << c.metric;
    ASSERT_EQ(fam->metric.size(), 2u) << c.metric;
    for (uint32_t pmd = 0; pmd < 2; ++pmd) {
      const auto& m = fam->metric[pmd];
      ASSERT_EQ(m.label.size(), 1u) << c.metric;
      EXPECT_EQ(m.label[0].name, "pmd");
      EXPECT_EQ(m.label[0].value, std::to_string(pmd));
      const double v = fam->type == MetricType::Counter ? m.counter.value : m.gauge.value;
      EXPECT_EQ(v, 1000.0 * (pmd + 1) + i + 1) << c.metric;
    }
  }
  EXPECT_GT(with_metric, 0u);
}

// Every pipeline counter is on /metrics: the ones counted in TSC cycles or
// events have a family of their own; the packet counters without one are
// the layers of flowclass_pmd_packets_total, or the loop's own counts of
// the same packets (packets: rx_packets_total, no_match and
// upcall_limit_drops: drop reasons).
TEST(DataplaneCollectorTest, EveryPipelineCounterIsExported) {
  const std::set<std::string> by_layer_or_loop = {
      "packets", "emc_hits", "smc_hits", "megaflow_hits", "cd_hits", "upcall_ok", "upcall_failed",
      "no_match", "upcall_limit_drops"};
  for (const PmdCounterInfo& c : kPmdCounters) {
    if (c.metric != nullptr) {
      EXPECT_EQ(by_layer_or_loop.count(c.name), 0u) << c.name;
      continue;
    }
    EXPECT_EQ(c.unit, PmdCounterUnit::kPackets) << c.name << ": no metric (dataplane/pmd_counters.h)";
    EXPECT_EQ(by_layer_or_loop.count(c.name), 1u) << c.name << ": not on /metrics";
  }
}

// Every loop counter is one series of its family per PMD (with its label
// where entries share the family), of the entry's help, type and value.
TEST(DataplaneCollectorTest, EveryLoopCounterIsOneSeriesPerPmd) {
  DataplaneStats st;
  for (uint32_t pmd = 0; pmd < 2; ++pmd) {
    PmdCounters p;
    p.pmd = pmd;
    for (size_t i = 0; i < kNumPmdLoopCounters; ++i)
      p.*kPmdLoopCounters[i].field = 1000 * (pmd + 1) + i + 1;
    st.pmds.push_back(p);
  }
  const std::vector<MetricFamily> fams = DataplaneCollector::BuildFamilies(st, {});
  const std::vector<std::string> exported = ExportedMetricNames();
  for (size_t i = 0; i < kNumPmdLoopCounters; ++i) {
    const PmdLoopCounterInfo& c = kPmdLoopCounters[i];
    ASSERT_NE(c.metric, nullptr) << c.name;
    EXPECT_THAT(exported, Contains(std::string(c.metric)));
    const MetricFamily* fam = FamilyOfEntry(fams, c.metric, c.help, c.kind);
    ASSERT_NE(fam, nullptr) << c.metric;
    for (uint32_t pmd = 0; pmd < 2; ++pmd) {
      size_t found = 0;
      for (const auto& m : fam->metric) {
        std::map<std::string, std::string> labels;
        for (const auto& l : m.label) labels[l.name] = l.value;
        if (labels["pmd"] != std::to_string(pmd)) continue;
        if (c.label != nullptr && labels[c.label] != c.label_value) continue;
        ++found;
        EXPECT_EQ(m.label.size(), c.label != nullptr ? 2u : 1u) << c.metric;
        const double v = fam->type == MetricType::Counter ? m.counter.value : m.gauge.value;
        EXPECT_EQ(v, 1000.0 * (pmd + 1) + i + 1) << c.name;
      }
      EXPECT_EQ(found, 1u) << c.name << " pmd " << pmd;
    }
  }
}

TEST(DataplaneCollectorTest, TopSubtablesPlusOtherBucketPerPort) {
  // Hits: id4 500 (port 1), id2 300 (1), id7 300 (2), id9 10 (1), id1 0 (2).
  Series s = Flatten(DataplaneCollector::BuildFamilies(SampleStats(), {/*top_subtables=*/2}));
  // Top 2 by hits: id 4, then the 300-hit tie broken by lower id: id 2.
  EXPECT_THAT(s["flowclass_subtable_rank"],
              UnorderedElementsAre(std::pair<const std::string, double>(
                                       "pmd=0,port=1,subtable=4", 0),
                                   std::pair<const std::string, double>(
                                       "pmd=0,port=1,subtable=2", 1)));
  const auto& hits = s["flowclass_subtable_hits_total"];
  EXPECT_EQ(hits.size(), 4u);
  EXPECT_EQ(hits.at("pmd=0,port=1,subtable=4"), 500);
  EXPECT_EQ(hits.at("pmd=0,port=1,subtable=2"), 300);
  EXPECT_EQ(hits.at("pmd=0,port=1,subtable=other"), 10);   // id 9
  EXPECT_EQ(hits.at("pmd=0,port=2,subtable=other"), 300);  // ids 7 and 1
  const auto& mf = s["flowclass_subtable_megaflows"];
  EXPECT_EQ(mf.at("pmd=0,port=1,subtable=other"), 1);
  EXPECT_EQ(mf.at("pmd=0,port=2,subtable=other"), 6);

  // N = 0: only the per-port buckets; N >= subtables: no bucket.
  s = Flatten(DataplaneCollector::BuildFamilies(SampleStats(), {/*top_subtables=*/0}));
  EXPECT_EQ(s["flowclass_subtable_hits_total"].size(), 2u);
  EXPECT_EQ(s["flowclass_subtable_hits_total"].at("pmd=0,port=1,subtable=other"), 810);
  EXPECT_EQ(s.count("flowclass_subtable_rank"), 0u);
  s = Flatten(DataplaneCollector::BuildFamilies(SampleStats(), {/*top_subtables=*/5}));
  EXPECT_EQ(s["flowclass_subtable_hits_total"].size(), 5u);
  for (const auto& [k, v] : s["flowclass_subtable_hits_total"])
    EXPECT_EQ(k.find("other"), std::string::npos) << k;
}

TEST(DataplaneCollectorTest, CardinalityIsBoundedByTopN) {
  DataplaneStats st = SampleStats();
  st.pmds[0].snapshot.subtable.clear();
  for (int i = 0; i < 1000; ++i)
    st.pmds[0].snapshot.subtable.push_back(Sub(static_cast<uint16_t>(i), 1 + i % 3, i, 1, i / 3));
  Series s = Flatten(DataplaneCollector::BuildFamilies(st, {/*top_subtables=*/8}));
  EXPECT_EQ(s["flowclass_subtable_hits_total"].size(), 8u + 3u);  // top 8 + one per port
  EXPECT_EQ(s["flowclass_subtable_hits_total"].at("pmd=0,port=1,subtable=999"), 999);
  double total = 0;
  for (const auto& [k, v] : s["flowclass_subtable_hits_total"]) total += v;
  EXPECT_EQ(total, 999.0 * 1000 / 2);  // nothing lost to the bucketing
}

TEST(DataplaneCollectorTest, CollectReadsTheDataplane) {
  FakeDataplane fake;
  DataplaneCollector c(&fake, {});
  Series before = Flatten(c.Collect());
  EXPECT_EQ(before["flowclass_rule_generation"].at(""), 0);
  EXPECT_EQ(before.count("flowclass_pmd_packets_total"), 0u);  // no PMDs yet

  Rule r;
  r.id = 1;
  r.priority = 1;
  r.action = Action::Output(2);
  ASSERT_TRUE(fake.ApplyBatch({RuleOp::Insert(r)}).ok());
  fake.SetStats(SampleStats());
  Series after = Flatten(c.Collect());
  EXPECT_EQ(after["flowclass_rule_generation"].at(""), 1);  // the fake's own table
  EXPECT_EQ(after["flowclass_rules"].at(""), 1);
  EXPECT_EQ(after["flowclass_pmd_packets_total"].at("layer=emc,pmd=0"), 600);
}

}  // namespace
}  // namespace flowclass

namespace flowclass {
namespace {

// pipeline.kind acl: the builder's families, only when the dataplane has one;
// the acl layer completes the packet partition of an acl PMD.
TEST(DataplaneCollectorTest, AclBuilderFamiliesAndTheAclLayer) {
  DataplaneStats none = SampleStats();
  for (const MetricFamily& f : DataplaneCollector::BuildFamilies(none, {}))
    EXPECT_EQ(f.name.rfind("flowclass_acl_", 0), std::string::npos) << f.name;

  DataplaneStats s;
  s.acl.enabled = true;
  s.acl.builds = 3;
  s.acl.build_ns = 30'000'000;  // 30 ms in all
  s.acl.le_ms[0] = 1;           // one build <= 1 ms
  s.acl.le_ms[1] = 2;           // two <= 5 ms
  for (size_t i = 2; i < AclBuilderStats::kNumBuckets; ++i) s.acl.le_ms[i] = 3;
  s.acl.batches = 10;
  s.acl.coalesced_batches = 7;
  s.acl.queue_depth = 4;
  s.acl.last_build_rules = 1000;
  s.acl.live_generation = 12;
  s.acl.context_bytes = 123456;
  s.acl.autovalidator_mismatches = 5;
  s.acl.algorithm = AclAlgorithm::kAutovalidator;
  PmdCounters p;
  p.pipeline.packets = 100;
  p.pipeline.emc_hits = 60;
  p.pipeline.acl_hits = 30;
  p.pipeline.acl_misses = 10;
  s.pmds.push_back(p);
  const std::vector<MetricFamily> fams = DataplaneCollector::BuildFamilies(s, {});
  Series v = Flatten(fams);
  EXPECT_EQ(v["flowclass_acl_builds_total"].at(""), 3);
  EXPECT_EQ(v["flowclass_acl_batches_total"].at(""), 10);
  EXPECT_EQ(v["flowclass_acl_coalesced_batches_total"].at(""), 7);
  EXPECT_EQ(v["flowclass_acl_build_queue_depth"].at(""), 4);
  EXPECT_EQ(v["flowclass_acl_last_build_rules"].at(""), 1000);
  EXPECT_EQ(v["flowclass_acl_live_generation"].at(""), 12);
  EXPECT_EQ(v["flowclass_acl_context_bytes"].at(""), 123456);
  EXPECT_EQ(v["flowclass_acl_autovalidator_mismatches_total"].at(""), 5);
  EXPECT_EQ(v["flowclass_acl_algorithm_info"].at("algorithm=autovalidator"), 1);
  EXPECT_EQ(v["flowclass_pmd_acl_hits_total"].at("pmd=0"), 30);
  EXPECT_EQ(v["flowclass_pmd_acl_misses_total"].at("pmd=0"), 10);
  EXPECT_EQ(v["flowclass_pmd_packets_total"].at("layer=acl,pmd=0"), 40);
  double sum = 0;
  for (const auto& [k, x] : v["flowclass_pmd_packets_total"]) sum += x;
  EXPECT_EQ(sum, 100);
  bool found = false;
  for (const MetricFamily& f : fams) {
    if (f.name != "flowclass_acl_build_duration_seconds") continue;
    found = true;
    ASSERT_EQ(f.type, MetricType::Histogram);
    ASSERT_EQ(f.metric.size(), 1u);
    const auto& h = f.metric[0].histogram;
    EXPECT_EQ(h.sample_count, 3u);
    EXPECT_DOUBLE_EQ(h.sample_sum, 0.03);
    ASSERT_EQ(h.bucket.size(), AclBuilderStats::kNumBuckets + 1);
    EXPECT_DOUBLE_EQ(h.bucket[0].upper_bound, 0.001);
    EXPECT_EQ(h.bucket[0].cumulative_count, 1u);
    EXPECT_EQ(h.bucket[1].cumulative_count, 2u);
    EXPECT_EQ(h.bucket.back().cumulative_count, 3u);  // +Inf
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace flowclass
