// GetStats, GetConfig / SetConfig and Trace over a FakeDataplane, through a
// real gRPC server on 127.0.0.1 (port 0) and the C++ client library, and the
// gRPC server's own config checks (grpc_config.h).
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/api_test_fixture.h"
#include "tests/common/packet_builder.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

TEST_F(ApiTest, StatsTotalsAndRuleHits) {
  Start();
  DataplaneStats s;
  for (uint32_t i = 0; i < 2; ++i) {
    PmdCounters p;
    p.pmd = i;
    p.lcore = i + 1;
    p.rx_packets = 100 * (i + 1);
    p.busy_cycles = 1000 * (i + 1);
    p.idle_cycles = 50;
    p.pipeline.packets = 100 * (i + 1);
    p.pipeline.emc_hits = 10 * (i + 1);
    p.pipeline.megaflow_hits = 20;
    p.pipeline.subtable_lookups = 30;
    p.pipeline.upcall_ok = 5;
    p.pipeline.cd_hits = 3;
    // Where PMD i's packets went (distinct values, each field checked).
    p.tx_packets = 60 * (i + 1);
    p.tx_dropped = 1 + i;
    p.rule_drops = 20 + i;
    p.no_match = 7 + i;
    p.bad_port = 3 + i;
    p.parse_errors = 2 + i;
    p.iterations = 500 + i;
    p.pipeline.revalidation_cycles = 700 + i;
    p.pipeline.upcall_cycles = 800 + i;
    if (i == 1) {  // PMD 1 answered the snapshot request, PMD 0 did not
      p.has_snapshot = true;
      p.snapshot.cd_enabled = true;
      p.snapshot.emc_occupancy = 12;
      p.snapshot.emc_entries = 8192;
      p.snapshot.smc_entries = 1024;
      p.snapshot.megaflows = 9;
      p.snapshot.subtables = 2;
      SubtableInfo t;
      t.id = 4;
      t.in_port = 1;
      t.mask.Set(Field::kInPort, 0xffffffff);
      t.megaflows = 7;
      t.hits = 99;
      t.rank = 0;
      t.lookup_fn = "avx512";
      p.snapshot.subtable.push_back(t);
    }
    s.pmds.push_back(p);
  }
  PortCounters port;
  port.number = 1;
  port.device = "net_pcap0";
  port.tx_packets = 77;
  s.ports.push_back(port);
  fake_->SetStats(s);
  fake_->SetRuleHits({{1, 40}, {2, 2}});
  ASSERT_EQ(Apply(Batch(1, {Insert(MakeRule(1)), Insert(MakeRule(2))})).status().code(), kOk);
  auto st = client_->GetStats(/*include_subtables=*/true, /*include_rule_hits=*/true);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->generation(), 1u);
  EXPECT_EQ(st->rules(), 2u);
  ASSERT_EQ(st->pmds_size(), 2);
  EXPECT_EQ(st->pmds(1).lcore(), 2u);
  EXPECT_EQ(st->pmds(1).packets(), 200u);
  // The PMD snapshot: occupancy, CD state, megaflow-classifier subtables.
  EXPECT_TRUE(st->pmds(1).cd_enabled());
  EXPECT_EQ(st->pmds(1).emc_occupancy(), 12u);
  EXPECT_EQ(st->pmds(1).emc_entries(), 8192u);
  EXPECT_EQ(st->pmds(1).smc_entries(), 1024u);
  EXPECT_EQ(st->pmds(1).megaflows(), 9u);
  ASSERT_EQ(st->pmds(1).subtables_size(), 1);
  EXPECT_EQ(st->pmds(1).subtables(0).hits(), 99u);
  EXPECT_EQ(st->pmds(1).subtables(0).lookup_impl(), "avx512");
  EXPECT_EQ(st->pmds(1).subtables(0).mask(), "in_port=4294967295");
  EXPECT_EQ(st->pmds(0).emc_entries(), 0u);  // no snapshot from PMD 0
  EXPECT_EQ(st->total().megaflows(), 9u);
  EXPECT_EQ(st->total().subtable_count(), 2u);
  EXPECT_EQ(st->total().packets(), 300u);
  EXPECT_EQ(st->total().emc_hits(), 30u);
  EXPECT_EQ(st->total().megaflow_hits(), 40u);
  EXPECT_EQ(st->total().cd_hits(), 6u);
  EXPECT_DOUBLE_EQ(st->total().avg_subtable_lookups_per_hit(), 1.5);
  EXPECT_DOUBLE_EQ(st->total().avg_cycles_per_packet(), 10.0);
  EXPECT_EQ(st->pmds(1).tx_packets(), 120u);
  EXPECT_EQ(st->pmds(1).tx_dropped(), 2u);
  EXPECT_EQ(st->pmds(1).rule_drops(), 21u);
  EXPECT_EQ(st->pmds(1).no_match(), 8u);
  EXPECT_EQ(st->pmds(1).bad_port(), 4u);
  EXPECT_EQ(st->pmds(1).parse_errors(), 3u);
  EXPECT_EQ(st->pmds(1).iterations(), 501u);
  EXPECT_EQ(st->pmds(1).cycles_revalidation(), 701u);
  EXPECT_EQ(st->pmds(1).cycles_upcall(), 801u);
  EXPECT_EQ(st->total().cycles_revalidation(), 1401u);
  EXPECT_EQ(st->total().cycles_upcall(), 1601u);
  EXPECT_EQ(st->total().tx_packets(), 180u);
  EXPECT_EQ(st->total().tx_dropped(), 3u);
  EXPECT_EQ(st->total().rule_drops(), 41u);
  EXPECT_EQ(st->total().bad_port(), 7u);
  EXPECT_EQ(st->total().parse_errors(), 5u);
  EXPECT_EQ(st->total().iterations(), 1001u);
  ASSERT_EQ(st->ports_size(), 1);
  EXPECT_EQ(st->ports(0).tx_packets(), 77u);
  ASSERT_EQ(st->rule_hits_size(), 2);
  EXPECT_EQ(st->rule_hits(0).hits(), 40u);
  auto r1 = client_->GetRule(1);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->hits(), 40u);
  const std::string text = FormatStats(*st);
  EXPECT_THAT(text, HasSubstr("pmd thread 1 (lcore 2)"));
  EXPECT_THAT(text, HasSubstr("emc hits: 30"));
  EXPECT_THAT(text, HasSubstr("avg. subtable lookups per megaflow hit: 1.50"));
  EXPECT_THAT(text, HasSubstr("  dropped by a rule: 21\n"
                              "  output to an unknown port (dropped): 4\n"
                              "  sent: 120\n"
                              "  tx dropped (queue full): 2\n"
                              "  truncated or malformed headers: 3\n"));
}

TEST_F(ApiTest, ConfigGetSetAndRollback) {
  Start();
  fake_->DefineConfig("pipeline.emc_insert_inv_prob", "100", true);
  fake_->DefineConfig("dpcls.lookup_prio.generic", "1", true);
  fake_->DefineConfig("dpcls.lookup_prio.avx512", "0", true);
  auto c = client_->GetConfig();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->emc_insert_inv_prob(), 100u);
  EXPECT_EQ(c->values().at("pmd.tx_retries"), "4");
  EXPECT_EQ(c->lookup_impls_size(), 2);

  v1::Config set;
  set.set_emc_insert_inv_prob(7);
  v1::LookupImpl* li = set.add_lookup_impls();
  li->set_name("avx512");
  li->set_priority(5);
  (*set.mutable_values())["pmd.tx_retries"] = "9";
  auto after = client_->SetConfig(set);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->emc_insert_inv_prob(), 7u);
  EXPECT_EQ(*fake_->GetConfig("dpcls.lookup_prio.avx512"), "5");
  EXPECT_EQ(*fake_->GetConfig("pmd.tx_retries"), "9");

  // One bad key: nothing changes (the request is checked as a whole first).
  v1::Config bad;
  bad.set_emc_insert_inv_prob(11);
  (*bad.mutable_values())["pmd.burst"] = "8";  // start-up only
  EXPECT_EQ(client_->SetConfig(bad).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*fake_->GetConfig("pipeline.emc_insert_inv_prob"), "7");
  bad.clear_values();
  (*bad.mutable_values())["pmd.no_such_key"] = "1";
  EXPECT_EQ(client_->SetConfig(bad).status().code(), absl::StatusCode::kNotFound);
  bad.clear_values();
  (*bad.mutable_values())["pmd.tx_retries"] = "many";
  EXPECT_EQ(client_->SetConfig(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*fake_->GetConfig("pipeline.emc_insert_inv_prob"), "7");
  EXPECT_EQ(*fake_->GetConfig("pmd.tx_retries"), "9");
  // Unknown enum value for a cache mode.
  v1::Config mode;
  mode.set_smc(static_cast<v1::CacheMode>(9));
  auto m = client_->SetConfig(mode);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("smc"));
  mode.set_smc(v1::CACHE_MODE_UNSPECIFIED);  // no mode (AUTO is one, for the SMC too)
  EXPECT_EQ(client_->SetConfig(mode).status().code(), absl::StatusCode::kInvalidArgument);
  // Read-modify-write: everything GetConfig returned, start-up-only keys
  // included, written back with one change: only that one changes.
  auto now = client_->GetConfig();
  ASSERT_TRUE(now.ok());
  ASSERT_TRUE(now->values().contains("pmd.burst"));
  v1::Config echo;
  *echo.mutable_values() = now->values();
  (*echo.mutable_values())["pmd.tx_retries"] = "3";
  auto echoed = client_->SetConfig(echo);
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*fake_->GetConfig("pmd.tx_retries"), "3");
  // The same key twice in one request (named field, then `values`): the
  // last one wins, even when it is the value the key had before.
  ASSERT_TRUE(fake_->SetConfig("pipeline.emc_insert_inv_prob", "7").ok());
  v1::Config twice;
  twice.set_emc_insert_inv_prob(50);
  (*twice.mutable_values())["pipeline.emc_insert_inv_prob"] = "7";
  ASSERT_TRUE(client_->SetConfig(twice).ok());
  EXPECT_EQ(*fake_->GetConfig("pipeline.emc_insert_inv_prob"), "7");
  // A start-up-only key with another value is still refused.
  (*echo.mutable_values())["pmd.burst"] = "7";
  EXPECT_EQ(client_->SetConfig(echo).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Counts the settings requests that reach the dataplane.
class CountingSettingsDataplane final : public InstrumentedDataplane {
 public:
  using InstrumentedDataplane::InstrumentedDataplane;
  absl::Status ApplySettings(absl::Span<const ConfigValue> values) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.emplace_back(values.begin(), values.end());
    }
    return inner_->ApplySettings(values);
  }
  std::vector<std::vector<ConfigValue>> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::vector<ConfigValue>> requests_;
};

TEST_F(ApiTest, SetConfigIsOneAllOrNothingRequest) {
  FakeDataplane inner;
  inner.DefineConfig("pipeline.emc_insert_inv_prob", "100", true);
  inner.DefineConfig("pipeline.smc", "off", true);
  CountingSettingsDataplane dp(&inner);
  Start({}, {}, &dp);
  const std::map<std::string, std::string> before = inner.GetConfig();

  // A good key and a bad one: nothing changes, the error names the bad key,
  // and nothing is put back afterwards (the dataplane got one request).
  v1::Config set;
  set.set_emc_insert_inv_prob(7);
  (*set.mutable_values())["pipeline.smc"] = "sometimes";
  auto r = client_->SetConfig(set);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "pipeline.smc: \"sometimes\" is not on, off or auto");
  EXPECT_EQ(inner.GetConfig(), before);
  ASSERT_EQ(dp.requests().size(), 1u);
  EXPECT_EQ(dp.requests()[0], (std::vector<ConfigValue>{{"pipeline.emc_insert_inv_prob", "7"},
                                                        {"pipeline.smc", "sometimes"}}));
  // Bad last or first, and whatever the error: the same.
  (*set.mutable_values())["pipeline.smc"] = "on";
  (*set.mutable_values())["pmd.tx_retries"] = "-3";
  EXPECT_EQ(client_->SetConfig(set).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(inner.GetConfig(), before);
  (*set.mutable_values())["pmd.tx_retries"] = "3";
  (*set.mutable_values())["pmd.burst"] = "8";
  EXPECT_EQ(client_->SetConfig(set).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(inner.GetConfig(), before);
  set.mutable_values()->erase("pmd.burst");
  (*set.mutable_values())["no.such"] = "1";
  EXPECT_EQ(client_->SetConfig(set).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(inner.GetConfig(), before);
  EXPECT_EQ(dp.requests().size(), 4u);

  // All good: all of them, in one request.
  set.mutable_values()->erase("no.such");
  auto ok = client_->SetConfig(set);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->emc_insert_inv_prob(), 7u);
  EXPECT_EQ(ok->smc(), v1::CACHE_MODE_ON);
  EXPECT_EQ(*inner.GetConfig("pmd.tx_retries"), "3");
  ASSERT_EQ(dp.requests().size(), 5u);
  EXPECT_EQ(dp.requests().back().size(), 3u);
  // Nothing to change: nothing sent.
  ASSERT_TRUE(client_->SetConfig(set).ok());
  EXPECT_EQ(dp.requests().size(), 5u);
}

TEST_F(ApiTest, TraceFlowAndPacket) {
  Start();
  v1::Rule wide = MakeRule(1, 5);
  wide.mutable_match()->set_ipv4_src("10.0.0.0/8");
  v1::Rule narrow = MakeRule(2, 9);
  narrow.mutable_match()->set_ipv4_src("10.1.2.0/24");
  narrow.mutable_action()->mutable_drop();
  ASSERT_EQ(Apply(Batch(1, {Insert(wide), Insert(narrow)})).status().code(), kOk);

  v1::TraceRequest req;
  req.set_flow("in_port=3,udp,nw_src=10.1.2.3,nw_dst=1.2.3.4,tp_src=9,tp_dst=53");
  auto t = client_->Trace(req);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rule_id(), 2u);
  EXPECT_TRUE(t->action().has_drop());
  EXPECT_EQ(t->layer(), v1::LAYER_SLOW_PATH);
  EXPECT_EQ(t->generation(), 1u);
  EXPECT_GE(t->rule_subtables_visited(), 1u);
  EXPECT_THAT(t->megaflow(), HasSubstr("in_port=3"));
  EXPECT_THAT(t->rule(), HasSubstr("id=2"));

  const std::vector<uint8_t> frame = PacketBuilder()
                                         .Eth(0x020000000001, 0x020000000002)
                                         .Ipv4(0x0a090000, 0x01020304)
                                         .Udp(1000, 53)
                                         .Build();
  req.Clear();
  req.set_packet(std::string(frame.begin(), frame.end()));
  req.set_in_port(1);
  t = client_->Trace(req);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rule_id(), 1u);
  EXPECT_EQ(t->action().output_port(), 1u);
  EXPECT_THAT(t->key(), HasSubstr("in_port=1"));

  req.Clear();
  req.set_flow("udp,nw_src=10.0.0.0/8");
  t = client_->Trace(req);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "flow: nw_src: a mask is not allowed in a trace (exact values only)");
  req.set_flow("udp,nw_src=1.2.3.4,tp_dst=10-20");
  EXPECT_EQ(client_->Trace(req).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Trace(req).status().message(),
            "flow: tp_dst: a range is not allowed in a trace (exact values only)");
  // A whole-address prefix is an exact value; a rule's own keys are not
  // packet fields; in_port goes with a packet only.
  req.set_flow("in_port=3,udp,nw_src=10.1.2.3/32,nw_dst=1.2.3.4,tp_src=9,tp_dst=53");
  t = client_->Trace(req);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rule_id(), 2u);
  req.set_flow("udp,nw_src=10.1.2.3/31");
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("flow: nw_src: a mask"));
  // Whole-field masks written other ways are exact too; a partial one is not.
  for (const char* flow : {"in_port=3,udp,nw_src=10.1.2.3/255.255.255.255,tp_dst=53",
                           "in_port=3,udp,nw_src=10.1.2.3,tp_dst=0x35/0xffff"}) {
    req.set_flow(flow);
    t = client_->Trace(req);
    ASSERT_TRUE(t.ok()) << flow << ": " << t.status();
    EXPECT_EQ(t->rule_id(), 2u) << flow;
  }
  req.set_flow("in_port=3,udp,nw_src=10.1.2.3,tp_dst=0x35/0xff");
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("flow: tp_dst: a mask"));
  req.set_flow("priority=9,udp,nw_src=10.1.2.3");
  EXPECT_EQ(client_->Trace(req).status().message(), "flow: priority: not a packet field");
  req.set_flow("udp,nw_src=10.1.2.3");
  req.set_in_port(3);
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("in_port: goes with packet"));
  req.clear_in_port();
  // A trace reports the action; it takes none, and not nothing.
  req.set_flow("in_port=1,udp,actions=drop");
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("flow: actions: "));
  req.set_flow(" ");
  EXPECT_THAT(client_->Trace(req).status().message(), HasSubstr("flow: empty"));
  // Keys that set part of a field are values, not masks: the packet has the
  // field's other bits 0.
  for (const char* flow : {"in_port=3,dl_vlan=5,udp,nw_src=10.1.2.3", "ip,nw_tos=4,nw_src=10.1.2.3",
                           "ip,ip_dscp=1,nw_src=10.1.2.3", "ip,ip_frag=first,nw_src=10.1.2.3",
                           "tcp,tcp_flags=+syn,nw_src=10.1.2.3"}) {
    req.set_flow(flow);
    t = client_->Trace(req);
    EXPECT_TRUE(t.ok()) << flow << ": " << t.status();
  }
  req.set_flow("in_port=3,dl_vlan=5,udp,nw_src=10.1.2.3");
  t = client_->Trace(req);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->key(), HasSubstr("vlan0_tci=0x1005"));
  req.Clear();
  EXPECT_EQ(client_->Trace(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_flow("udp,nw_src=1.2.3.4,tp_dst=99");
  t = client_->Trace(req);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rule_id(), 0u);
  EXPECT_TRUE(t->action().has_drop());
}

TEST(GrpcConfigTest, PlaintextNeedsLoopbackOrExplicitRemote) {
  GrpcServerConfig c;
  c.plaintext = true;
  EXPECT_TRUE(ValidateGrpcServerConfig(c).ok());
  c.address = "0.0.0.0";
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.allow_plaintext_remote"));
  c.allow_plaintext_remote = true;
  // Off the loopback, nobody can be authenticated over plaintext: saying so
  // is part of choosing it.
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.auth: nobody is named"));
  c.auth.disabled = true;
  EXPECT_TRUE(ValidateGrpcServerConfig(c).ok());
  c = GrpcServerConfig();
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.tls_cert_file: required"));
  c.tls_cert_file = "a.pem";
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.tls_key_file"));
  c.tls_key_file = "k.pem";
  c.require_client_cert = true;
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.tls_ca_file"));
  c.tls_ca_file = "ca.pem";
  c.auth.admin = {"controller"};
  EXPECT_TRUE(ValidateGrpcServerConfig(c).ok());
  // A CA without mutual TLS would be silently unused: refused.
  c.require_client_cert = false;
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(),
              HasSubstr("grpc.tls_ca_file: only verifies client certificates"));
  GrpcServerConfig p;
  p.plaintext = true;
  p.tls_ca_file = "ca.pem";
  EXPECT_THAT(ValidateGrpcServerConfig(p).message(), HasSubstr("grpc.tls_ca_file: set, but plaintext"));
  c.address = "not an address";
  EXPECT_THAT(ValidateGrpcServerConfig(c).message(), HasSubstr("grpc.address"));
  EXPECT_TRUE(IsLoopbackAddress("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]"));
  EXPECT_FALSE(IsLoopbackAddress("::"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
}

}  // namespace
}  // namespace flowclass
