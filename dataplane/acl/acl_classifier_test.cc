// Differential tests of the acl pipeline: AclClassifier (every classify
// implementation this CPU runs, and the autovalidator) and AclPipeline
// (EMC -> ACL) against the linear-scan ReferenceClassifier and the megaflow
// Pipeline, on random rule sets (IPv4, IPv6 and L2 rules, prefixes and
// arbitrary masks, port ranges and port masks, overlaps, equal priorities)
// changed batch by batch, and on every ClassBench set tests/data/classbench
// carries.  Also: the key image's layout and the build's errors.
#include "dataplane/acl/acl_classifier.h"

#include <rte_lcore.h>
#include <rte_malloc.h>
#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dataplane/acl/acl_pipeline.h"
#include "dataplane/pipeline.h"
#include "dataplane/rules/rule_error.h"
#include "dataplane/rules/rule_format.h"
#include "dataplane/rules/rule_table.h"
#include "gtest/gtest.h"
#include "tests/common/classbench_data.h"
#include "tests/common/random_rules.h"
#include "tests/common/reference_classifier.h"

namespace flowclass {
namespace {

class AclTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CPU_ZERO(&cpus_before_eal_);
    ASSERT_EQ(sched_getaffinity(0, sizeof(cpus_before_eal_), &cpus_before_eal_), 0);
    const absl::Status s = InitOfflineEal("flowclass_acl_test");
    ASSERT_TRUE(s.ok()) << s;
  }
  // The test thread's CPUs before EAL started (OfflineEalLcores' test).
  static cpu_set_t cpus_before_eal_;
};
cpu_set_t AclTest::cpus_before_eal_;

std::unique_ptr<AclClassifier> BuildOk(const std::vector<Rule>& rules,
                                       AclAlgorithm alg = AclAlgorithm::kDefault) {
  AclOptions o;
  o.algorithm = alg;
  absl::StatusOr<std::unique_ptr<AclClassifier>> c = AclClassifier::Build(rules, o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

uint64_t IdOf(const Rule* r) { return r == nullptr ? 0 : r->id; }

// What every subject must agree on for `keys`: the reference's winner.
struct Subjects {
  std::vector<std::unique_ptr<AclClassifier>> acl;  // one per algorithm
  std::unique_ptr<AclPipeline> acl_pipeline;        // EMC in front, defaults
  std::unique_ptr<Pipeline> megaflow;
  RuleTable table;
};

// Classifies keys (in bursts of up to 32, of varying size) through every
// subject and checks each against the reference; adds the matched keys to
// *matched_out.
void CheckKeys(const std::vector<FlowKey>& keys, const ReferenceClassifier& ref,
               Subjects* s, const std::string& what, long* matched_out) {
  long& matched = *matched_out;
  size_t burst = 1;
  for (size_t i = 0; i < keys.size(); i += burst, burst = (burst + 6) % kMaxBurst + 1) {
    const int n = static_cast<int>(std::min<size_t>(burst, keys.size() - i));
    const FlowKey* k = &keys[i];
    Verdict mf[kMaxBurst], ap[kMaxBurst];
    s->megaflow->ProcessBurst(k, n, mf);
    const bool ap_alike = s->acl_pipeline->ProcessBurst(k, n, ap);
    // The autovalidator runs every implementation the CPU has and answers
    // with scalar's (differences counted, checked by the caller); then the
    // default (best) one, which the pipeline classifies with.
    AclClassifier& acl = *s->acl.front();
    for (AclAlgorithm a : {AclAlgorithm::kAutovalidator, AclAlgorithm::kDefault}) {
      ASSERT_TRUE(acl.SetAlgorithm(a).ok());
      const Rule* got[kMaxBurst];
      acl.ClassifyBurst(k, n, got);
      for (int j = 0; j < n; ++j) {
        const Rule* want = ref.Lookup(k[j]);
        ASSERT_EQ(IdOf(got[j]), IdOf(want))
            << what << ": acl " << AclAlgorithmName(acl.algorithm()) << " key "
            << k[j].ToString();
      }
    }
    // ProcessBurst's answer: every verdict of the burst has the first's
    // action, and all matched a rule or none did.
    bool want_alike = true;
    const Rule* want0 = ref.Lookup(k[0]);
    const Action a0 = want0 ? want0->action : Action{};
    for (int j = 0; j < n; ++j) {
      const Rule* want = ref.Lookup(k[j]);
      want_alike &=
          (want ? want->action : Action{}) == a0 && (want == nullptr) == (want0 == nullptr);
    }
    ASSERT_EQ(ap_alike, want_alike) << what << ": acl pipeline's alike, burst at key " << i;
    for (int j = 0; j < n; ++j) {
      const Rule* want = ref.Lookup(k[j]);
      const Verdict v = want ? Verdict{want->id, want->action} : Verdict{};
      matched += want != nullptr;
      ASSERT_EQ(mf[j].rule_id, v.rule_id) << what << ": megaflow pipeline, key " << k[j].ToString();
      ASSERT_EQ(ap[j].rule_id, v.rule_id) << what << ": acl pipeline, key " << k[j].ToString();
      ASSERT_EQ(ap[j].action, v.action) << what << ": acl pipeline action";
    }
  }
}

// Builds every subject for `rules` (the table gets `ops` applied: the
// caller keeps it in step with `rules`).
void Rebuild(const std::vector<Rule>& rules, Subjects* s) {
  s->acl.clear();
  s->acl.push_back(BuildOk(rules));
  ASSERT_NE(s->acl.back(), nullptr);
  s->acl_pipeline->SetClassifier(s->acl.back().get());
  s->megaflow->SetRuleTable(&s->table);
}

void ExpectNoAutovalidatorDifferences(const Subjects& s) {
  for (const auto& c : s.acl) EXPECT_EQ(c->autovalidator_mismatches(), 0u);
}

TEST_F(AclTest, RandomRulesMatchReferenceAndMegaflowPipeline) {
  long keys_checked = 0, matched = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RandomRuleOptions opts;
    opts.ipv6_fraction = seed % 3 == 0 ? 0.6 : 0.25;
    opts.range_fraction = 0.3;
    RandomRuleGen gen(seed, opts);
    std::vector<Rule> live = gen.NextRules(40 + gen.Uniform(160));
    uint64_t next_id = live.size() + 1;
    ReferenceClassifier ref(live);
    Subjects s;
    AclPipelineConfig pc;
    pc.emc_insert_inv_prob = 1;  // every miss cached: the EMC answers the repeats
    s.acl_pipeline = std::move(*AclPipeline::Create(pc));
    s.megaflow = std::move(*Pipeline::Create());
    {
      std::vector<RuleOp> ops;
      for (const Rule& r : live) ops.push_back(RuleOp::Insert(r));
      ASSERT_TRUE(s.table.ApplyBatch(ops).ok());
    }
    std::vector<FlowKey> prev_keys;
    for (int round = 0; round < 4; ++round) {
      if (round > 0) {
        std::vector<RuleOp> ops = gen.NextBatch(1 + gen.Uniform(40), &live, &next_id);
        ASSERT_TRUE(ref.ApplyBatch(ops).ok());
        ASSERT_TRUE(s.table.ApplyBatch(ops).ok());
      }
      Rebuild(live, &s);
      if (HasFatalFailure()) return;
      // The last round's keys first: the EMC holds them (every miss is
      // inserted) with the old rule set's answers, which must not survive.
      CheckKeys(prev_keys, ref, &s, absl::StrCat("round ", round, " old keys"), &matched);
      if (HasFatalFailure()) return;
      keys_checked += static_cast<long>(prev_keys.size());
      std::vector<FlowKey>& keys = prev_keys;
      keys.clear();
      for (int i = 0; i < 600; ++i) {
        const Flow f = i % 5 == 4 ? gen.NextKey() : gen.NextKeyNear(live);
        keys.push_back(FlowKey::FromFlow(f));
      }
      // Twice: the second pass meets the EMC and the megaflows.
      for (int pass = 0; pass < 2; ++pass) {
        CheckKeys(keys, ref, &s, absl::StrCat("round ", round, " pass ", pass), &matched);
        if (HasFatalFailure()) return;
        keys_checked += static_cast<long>(keys.size());
      }
      ExpectNoAutovalidatorDifferences(s);
    }
    EXPECT_GT(s.acl_pipeline->stats().emc_hits, 0u);
  }
  // The keys must exercise both outcomes.
  EXPECT_GT(matched, keys_checked / 4);
  EXPECT_LT(matched, keys_checked);
}

std::vector<std::string> ClassBenchSets() {
  std::vector<std::string> sets;
  for (const char* s : {"acl1_100", "acl1_1K", "fw1_100", "fw1_1K", "ipc1_100", "ipc1_1K"})
    sets.push_back(std::string("hypersplit/") + s);
  for (const char* s : {"acl1_1k", "acl2_1k", "acl3_1k", "acl4_1k", "acl5_1k", "fw1_1k",
                        "fw2_1k", "fw3_1k", "fw4_1k", "fw5_1k", "ipc1_1k", "ipc2_1k"})
    sets.push_back(std::string("neurocuts/") + s);
  return sets;
}

TEST_F(AclTest, EveryClassBenchSetMatchesReferenceAndMegaflowPipeline) {
  double total_build = 0;
  for (const std::string& set : ClassBenchSets()) {
    SCOPED_TRACE(set);
    const std::string path = ClassBenchDir() + "/" + set;
    absl::StatusOr<std::vector<Rule>> rules = LoadRuleFile(path);
    ASSERT_TRUE(rules.ok()) << rules.status();
    ASSERT_GT(rules->size(), 50u);
    ReferenceClassifier ref(*rules);
    Subjects s;
    s.acl_pipeline = std::move(*AclPipeline::Create({}));
    s.megaflow = std::move(*Pipeline::Create());
    {
      std::vector<RuleOp> ops;
      for (const Rule& r : *rules) ops.push_back(RuleOp::Insert(r));
      ASSERT_TRUE(s.table.ApplyBatch(ops).ok());
    }
    Rebuild(*rules, &s);
    if (HasFatalFailure()) return;
    std::vector<FlowKey> keys;
    absl::StatusOr<std::vector<TraceEntry>> trace = LoadTraceFile(path + "_trace");
    if (set.starts_with("hypersplit/")) {
      ASSERT_TRUE(trace.ok()) << trace.status();
      for (const TraceEntry& e : *trace) keys.push_back(e.key);
    } else {
      // The neurocuts sets come without traces: keys near their rules.
      RandomRuleGen gen(7);
      for (int i = 0; i < 3000; ++i) keys.push_back(FlowKey::FromFlow(gen.NextKeyNear(*rules)));
    }
    long matched = 0;
    CheckKeys(keys, ref, &s, set, &matched);
    if (HasFatalFailure()) return;
    EXPECT_GT(matched, 0) << "no key matched a rule";
    ExpectNoAutovalidatorDifferences(s);
    total_build += s.acl.front()->stats().build_seconds;
  }
  std::printf("ClassBench sets: %.3f s in ACL builds\n", total_build);
}

TEST_F(AclTest, KeyImageIsTheDenseFlowBigEndian) {
  Flow f;
  for (int w = 0; w < kFlowWords; ++w) f.w[w] = 0x0102030405060708ULL + 0x1010101010101010ULL * w;
  AclKeyImage img;
  MakeAclKeyImage(FlowKey::FromFlow(f), &img);
  for (int w = 0; w < kFlowWords; ++w)
    for (int b = 0; b < 8; ++b)
      ASSERT_EQ(img.bytes[8 * w + b], static_cast<uint8_t>(f.w[w] >> (56 - 8 * b)))
          << "word " << w << " byte " << b;
  // Each named definition reads its flow field's bytes: tp_dst is the last
  // two bytes, ipv4_src the first four of word 3, nw_proto byte 64.
  f = Flow{};
  f.Set(Field::kTpDst, 0xabcd);
  f.Set(Field::kIpv4Src, 0x0a000001);
  f.Set(Field::kNwProto, 17);
  MakeAclKeyImage(FlowKey::FromFlow(f), &img);
  EXPECT_EQ(img.bytes[70], 0xab);
  EXPECT_EQ(img.bytes[71], 0xcd);
  EXPECT_EQ(img.bytes[24], 0x0a);
  EXPECT_EQ(img.bytes[27], 0x01);
  EXPECT_EQ(img.bytes[64], 17);
}

// Every map (the four MakeAclKeyImage writes unrolled and every other one):
// the image is the dense flow, each word big-endian, absent words 0, even
// when the buffer held another key's image before.
TEST_F(AclTest, KeyImageOfEveryMapIsTheDenseFlowBigEndian) {
  std::mt19937_64 rng(7);
  AclKeyImage img;
  std::memset(img.bytes, 0xa5, sizeof(img.bytes));
  for (int pass = 0; pass < 2; ++pass) {
    for (unsigned map = 0; map <= kFullFlowMap; ++map) {
      Flow f;
      for (int w = 0; w < kFlowWords; ++w)
        if (map & (1u << w)) f.w[w] = rng() | 1;  // non-zero: present
      const FlowKey k = FlowKey::FromFlow(f);
      ASSERT_EQ(k.map, map);
      MakeAclKeyImage(k, &img);
      for (int w = 0; w < kFlowWords; ++w)
        for (int b = 0; b < 8; ++b)
          ASSERT_EQ(img.bytes[8 * w + b], static_cast<uint8_t>(f.w[w] >> (56 - 8 * b)))
              << "map 0x" << std::hex << map << std::dec << " word " << w << " byte " << b;
    }
  }
}

TEST_F(AclTest, EveryFlowBitIsCoveredByAFieldDefinition) {
  Rule r;
  r.id = 9;
  for (int w = 0; w < kFlowWords; ++w) r.match.mask.w[w] = ~uint64_t{0};
  EXPECT_TRUE(CheckAclExpressible(r, 0).ok());
  // Input groups are 4 bytes, the first field 1 byte (rte_acl's rules).
  int group_bytes[32] = {};
  for (int i = 1; i < kAclNumFields; ++i) group_bytes[kAclFields[i].input_index] += kAclFields[i].size;
  EXPECT_EQ(kAclFields[0].size, 1);
  for (int g = 1; g <= kAclFields.back().input_index; ++g) EXPECT_EQ(group_bytes[g], 4) << g;
}

TEST_F(AclTest, BuildErrorsNameTheRuleAndField) {
  Rule a;
  a.id = 5;
  a.match.SetExact(Field::kEthType, kEthTypeIpv4);
  Rule b = a;
  b.id = 6;
  b.match.value.Set(Field::kIpv4Src, 0x0a000001);  // value outside its (zero) mask
  absl::StatusOr<std::unique_ptr<AclClassifier>> c = AclClassifier::Build({a, b});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "rule 1 (id 6): ipv4_src:"))
      << c.status();
  std::optional<RuleOpError> e = GetRuleOpError(c.status());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->index, 1u);
  EXPECT_EQ(e->rule_id, 6u);
  EXPECT_EQ(e->field, RuleField::kIpv4Src);

  b = a;  // duplicate id
  c = AclClassifier::Build({a, b});
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "rule 1 (id 5): id: duplicate"))
      << c.status();

  b.id = 7;
  AclOptions o;
  o.max_rules = 1;
  c = AclClassifier::Build({a, b}, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "rule 1 (id 7): max_rules:"))
      << c.status();
}

TEST_F(AclTest, AlgorithmsTheCpuLacksAreRefusedAndTheRestBuild) {
  Rule a;
  a.id = 1;
  a.match.SetExact(Field::kEthType, kEthTypeIpv4);
  std::unique_ptr<AclClassifier> def = BuildOk({a});
  ASSERT_NE(def, nullptr);
  const std::vector<AclAlgorithm>& sup = def->supported();
  ASSERT_FALSE(sup.empty());
  EXPECT_EQ(sup.front(), AclAlgorithm::kScalar);
  EXPECT_EQ(def->algorithm(), sup.back());
  for (AclAlgorithm alg : {AclAlgorithm::kScalar, AclAlgorithm::kSse, AclAlgorithm::kAvx2,
                           AclAlgorithm::kAvx512x16, AclAlgorithm::kAvx512x32}) {
    AclOptions o;
    o.algorithm = alg;
    absl::StatusOr<std::unique_ptr<AclClassifier>> c = AclClassifier::Build({a}, o);
    const bool expected = std::find(sup.begin(), sup.end(), alg) != sup.end();
    EXPECT_EQ(c.ok(), expected) << AclAlgorithmName(alg) << ": " << c.status();
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_TRUE(absl::StrContains(c.status().message(), "supported: scalar"));
    }
  }
  EXPECT_FALSE(ParseAclAlgorithm("avx3").ok());
  EXPECT_EQ(*ParseAclAlgorithm("avx512x32"), AclAlgorithm::kAvx512x32);
}

// Bytes allocated from DPDK's malloc heaps (what AclBuildStats::context_bytes
// measures, read here independently).
size_t DpdkHeapBytes() {
  size_t total = 0;
  for (unsigned i = 0; i < rte_socket_count(); ++i) {
    rte_malloc_socket_stats st{};
    EXPECT_EQ(rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &st), 0);
    total += st.heap_allocsz_bytes;
  }
  return total;
}

// The autovalidator answers with scalar's result and counts every key on
// which another implementation differs: with one implementation broken on
// purpose (the test hook), the answers stay right and the differences show.
TEST_F(AclTest, AutovalidatorCountsAnImplementationThatDiffersFromScalar) {
  RandomRuleOptions opts;
  opts.ipv6_fraction = 0.5;
  opts.range_fraction = 0.3;
  RandomRuleGen gen(11, opts);
  const std::vector<Rule> rules = gen.NextRules(150);
  const ReferenceClassifier ref(rules);
  std::unique_ptr<AclClassifier> c = BuildOk(rules, AclAlgorithm::kAutovalidator);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->algorithm(), AclAlgorithm::kAutovalidator);
  const AclAlgorithm broken = c->supported().back();
  if (broken == AclAlgorithm::kScalar)
    GTEST_SKIP() << "this CPU runs scalar only: no implementation to differ from it";
  std::vector<FlowKey> keys;
  for (int i = 0; i < 32 * 20; ++i) keys.push_back(FlowKey::FromFlow(gen.NextKeyNear(rules)));
  // Every answer is the reference's; returns the bursts classified.
  auto classify_all = [&] {
    int bursts = 0;
    for (size_t i = 0; i < keys.size(); i += kMaxBurst, ++bursts) {
      const Rule* out[kMaxBurst];
      c->ClassifyBurst(&keys[i], kMaxBurst, out);
      for (int j = 0; j < kMaxBurst; ++j)
        EXPECT_EQ(IdOf(out[j]), IdOf(ref.Lookup(keys[i + j].ToFlow()))) << "key " << i + j;
    }
    return bursts;
  };
  classify_all();
  EXPECT_EQ(c->autovalidator_mismatches(), 0u);

  struct Unbreak {
    ~Unbreak() { SetAclAutovalidatorFaultForTesting(AclAlgorithm::kDefault); }
  } unbreak;
  SetAclAutovalidatorFaultForTesting(broken);
  const int bursts = classify_all();  // still the reference's answers
  // At least one corrupted key per burst (one per context the burst used).
  EXPECT_GE(c->autovalidator_mismatches(), static_cast<uint64_t>(bursts))
      << AclAlgorithmName(broken) << " broken";
  // Not autovalidating: the broken implementation is not run against scalar.
  const uint64_t counted = c->autovalidator_mismatches();
  ASSERT_TRUE(c->SetAlgorithm(AclAlgorithm::kScalar).ok());
  classify_all();
  EXPECT_EQ(c->autovalidator_mismatches(), counted);
}

// context_bytes is the DPDK heap the contexts hold: the heap grows by it
// when the classifier is built and shrinks by it when it is freed; more
// rules take more.
TEST_F(AclTest, ContextBytesAreTheDpdkHeapTheContextsHold) {
  RandomRuleOptions opts;
  opts.ipv6_fraction = 0.4;
  RandomRuleGen gen(5, opts);
  const std::vector<Rule> small_set = gen.NextRules(20);
  const std::vector<Rule> large_set = gen.NextRules(1500, 1000);
  BuildOk({});  // the implementations' one-time probe, out of the counts
  const size_t heap0 = DpdkHeapBytes();
  std::unique_ptr<AclClassifier> small = BuildOk(small_set);
  ASSERT_NE(small, nullptr);
  const size_t heap1 = DpdkHeapBytes();
  EXPECT_GT(small->stats().context_bytes, 0u);
  EXPECT_EQ(heap1 - heap0, small->stats().context_bytes);
  std::unique_ptr<AclClassifier> large = BuildOk(large_set);
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(DpdkHeapBytes() - heap1, large->stats().context_bytes);
  EXPECT_GT(large->stats().context_bytes, 4 * small->stats().context_bytes);
  large.reset();
  EXPECT_EQ(DpdkHeapBytes(), heap1);
  small.reset();
  EXPECT_EQ(DpdkHeapBytes(), heap0);
  // No rules: no context, nothing held.
  std::unique_ptr<AclClassifier> empty = BuildOk({});
  EXPECT_EQ(empty->stats().context_bytes, 0u);
}

// One rule: every IPv4 packet to port 2.
Rule AnyIpv4ToPort2() {
  Rule a;
  a.id = 1;
  a.match.SetExact(Field::kEthType, kEthTypeIpv4);
  a.action = Action::Output(2);
  return a;
}

// `bursts` full bursts of new 5-tuples (sources from *src on) through `p`;
// each verdict must be rule 1's.
void NewFlowBursts(AclPipeline* p, int bursts, uint32_t* src) {
  FlowKey keys[kMaxBurst];
  Verdict v[kMaxBurst];
  for (int b = 0; b < bursts; ++b) {
    for (FlowKey& k : keys) k = MakeFiveTupleKey((*src)++, 2, 3, 4, 6);
    p->ProcessBurst(keys, kMaxBurst, v);
    for (const Verdict& x : v) ASSERT_EQ(x.rule_id, 1u);
  }
}

TEST_F(AclTest, AdaptiveEmcStopsLookingWhileItMissesAndResumesOnHits) {
  std::unique_ptr<AclClassifier> c = BuildOk({AnyIpv4ToPort2()});
  ASSERT_NE(c, nullptr);
  AclPipelineConfig pc;
  pc.emc_insert_inv_prob = 1;
  std::unique_ptr<AclPipeline> p = std::move(*AclPipeline::Create(pc));
  p->SetClassifier(c.get());
  FlowKey keys[kMaxBurst];
  Verdict v[kMaxBurst];
  // Every key new: the EMC never hits, so most bursts stop looking it up.
  uint32_t src = 1;
  ASSERT_NO_FATAL_FAILURE(NewFlowBursts(p.get(), 512, &src));
  EXPECT_EQ(p->stats().emc_hits, 0u);
  // The first window looks every key up; each of the 7 after it skips all
  // but its sampled bursts, and those look up kSampleKeys of their keys.
  constexpr uint64_t kW = EmcGate::kWindow, kS = kW / EmcGate::kSampleEvery;
  EXPECT_EQ(p->stats().emc_skipped,
            7 * ((kW - kS) * kMaxBurst + kS * (kMaxBurst - AclPipeline::kSampleKeys)));
  // Now the same 32 flows over and over: the sampled bursts hit, and the
  // EMC is looked up again.
  for (FlowKey& k : keys) k = MakeFiveTupleKey(src++, 2, 3, 4, 6);
  const uint64_t skipped = p->stats().emc_skipped;
  for (int b = 0; b < 512; ++b) {
    p->ProcessBurst(keys, kMaxBurst, v);
    for (const Verdict& x : v) ASSERT_EQ(x.action, Action::Output(2));
  }
  EXPECT_GT(p->stats().emc_hits, 400u * kMaxBurst);
  EXPECT_LT(p->stats().emc_skipped - skipped, 128u * kMaxBurst);
}

TEST_F(AclTest, OneMissInEmcInsertInvProbEntersTheEmc) {
  std::unique_ptr<AclClassifier> c = BuildOk({AnyIpv4ToPort2()});
  ASSERT_NE(c, nullptr);
  for (const uint32_t inv : {0u, 1u, 100u}) {
    AclPipelineConfig pc;
    pc.emc_adaptive = false;  // every burst looks the EMC up and inserts
    pc.emc_insert_inv_prob = inv;
    std::unique_ptr<AclPipeline> p = std::move(*AclPipeline::Create(pc));
    p->SetClassifier(c.get());
    uint32_t src = 1;
    ASSERT_NO_FATAL_FAILURE(NewFlowBursts(p.get(), 1000, &src));
    const uint64_t misses = 1000u * kMaxBurst;
    EXPECT_EQ(p->stats().acl_hits, misses);
    if (inv == 0) {
      EXPECT_EQ(p->stats().emc_inserts, 0u);
    } else if (inv == 1) {
      EXPECT_EQ(p->stats().emc_inserts, misses);
    } else {  // 320 expected
      EXPECT_GT(p->stats().emc_inserts, misses / 100 * 3 / 4);
      EXPECT_LT(p->stats().emc_inserts, misses / 100 * 5 / 4);
    }
  }
}

// The counters split a burst's packets into EMC hits, ACL hits (a rule)
// and ACL misses (none), also when the EMC answers some packets of a burst
// with a rule and others with "no rule"; and ProcessBurst says whether the
// verdicts are alike.
TEST_F(AclTest, CountersSplitEmcHitsAclHitsAndAclMissesWithinABurst) {
  Rule tcp;
  tcp.id = 1;
  tcp.match.SetExact(Field::kEthType, kEthTypeIpv4);
  tcp.match.SetExact(Field::kNwProto, kIpProtoTcp);
  tcp.action = Action::Output(2);
  std::unique_ptr<AclClassifier> c = BuildOk({tcp});
  ASSERT_NE(c, nullptr);
  AclPipelineConfig pc;
  pc.emc_adaptive = false;
  pc.emc_insert_inv_prob = 1;  // every miss enters the EMC
  std::unique_ptr<AclPipeline> p = std::move(*AclPipeline::Create(pc));
  p->SetClassifier(c.get());
  const FlowKey t1 = MakeFiveTupleKey(1, 2, 3, 4, kIpProtoTcp);
  const FlowKey t2 = MakeFiveTupleKey(5, 2, 3, 4, kIpProtoTcp);
  const FlowKey u1 = MakeFiveTupleKey(1, 2, 3, 4, kIpProtoUdp);
  const FlowKey u2 = MakeFiveTupleKey(5, 2, 3, 4, kIpProtoUdp);
  Verdict v[4];
  const auto counters = [&] {
    const AclPipelineStats& st = p->stats();
    return std::vector<uint64_t>{st.packets, st.emc_hits, st.acl_hits, st.acl_misses};
  };
  const FlowKey b1[2] = {t1, u1};
  EXPECT_FALSE(p->ProcessBurst(b1, 2, v));  // output:2 and no rule
  EXPECT_EQ(counters(), (std::vector<uint64_t>{2, 0, 1, 1}));
  EXPECT_FALSE(p->ProcessBurst(b1, 2, v));  // both from the EMC now
  EXPECT_EQ(v[0].rule_id, 1u);
  EXPECT_EQ(v[1].rule_id, 0u);
  EXPECT_EQ(counters(), (std::vector<uint64_t>{4, 2, 1, 1}));
  const FlowKey b3[4] = {u1, t2, t1, u2};  // EMC: u1, t1; ACL: t2 (a rule), u2 (none)
  EXPECT_FALSE(p->ProcessBurst(b3, 4, v));
  EXPECT_EQ(v[0].rule_id, 0u);
  EXPECT_EQ(v[1].rule_id, 1u);
  EXPECT_EQ(v[2].rule_id, 1u);
  EXPECT_EQ(v[3].rule_id, 0u);
  EXPECT_EQ(counters(), (std::vector<uint64_t>{8, 4, 2, 2}));
  const FlowKey b4[2] = {t1, t2};
  EXPECT_TRUE(p->ProcessBurst(b4, 2, v));
  const FlowKey b5[2] = {u2, u1};
  EXPECT_TRUE(p->ProcessBurst(b5, 2, v));
  EXPECT_EQ(counters(), (std::vector<uint64_t>{12, 8, 2, 2}));
}

// The EMC's generation is 32 bits: when it wraps, SetClassifier clears
// every entry, so an entry made 2^32 classifiers ago (the same generation
// number) cannot answer for the classifier of today.
TEST_F(AclTest, EmcGenerationWrapClearsTheEmc) {
  Rule to2 = AnyIpv4ToPort2();
  Rule to3 = to2;
  to3.action = Action::Output(3);
  std::unique_ptr<AclClassifier> c2 = BuildOk({to2});
  std::unique_ptr<AclClassifier> c3 = BuildOk({to3});
  ASSERT_NE(c2, nullptr);
  ASSERT_NE(c3, nullptr);
  AclPipelineConfig pc;
  pc.emc_adaptive = false;
  pc.emc_insert_inv_prob = 1;
  std::unique_ptr<AclPipeline> p = std::move(*AclPipeline::Create(pc));
  p->SetClassifier(c2.get());
  p->SetEmcGenerationForTesting(0xffffffffu);  // the last before the wrap
  const FlowKey k = MakeFiveTupleKey(1, 2, 3, 4, 6);
  Verdict v;
  p->ProcessBurst(&k, 1, &v);
  p->ProcessBurst(&k, 1, &v);
  EXPECT_EQ(v.action, Action::Output(2));
  EXPECT_EQ(p->stats().emc_hits, 1u);
  p->SetClassifier(c3.get());  // wraps: cleared, generation 1
  // 2^32 - 2 classifiers later (and nothing inserted meanwhile) the
  // generation is 0xffffffff again: the old entry was cleared, so the key
  // is classified, not answered by c2's entry.
  p->SetEmcGenerationForTesting(0xffffffffu);
  p->ProcessBurst(&k, 1, &v);
  EXPECT_EQ(v.action, Action::Output(3));
  EXPECT_EQ(p->stats().emc_hits, 1u);
}

TEST_F(AclTest, EmptyRuleSetMatchesNothing) {
  std::unique_ptr<AclClassifier> c = BuildOk({});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Classify(MakeFiveTupleKey(1, 2, 3, 4, 6)), nullptr);
}

// EAL pins its main lcore's thread to that lcore's CPUs.  The offline EAL
// puts lcore 0 on the CPUs the process already had, so `taskset -c 1
// flowclassctl replay --pipeline acl` stays on CPU 1 (with "-l 0" it moved
// to CPU 0, away from the dpdk-test-acl it is compared with on CPU 1).
TEST_F(AclTest, OfflineEalKeepsTheThreadsCpus) {
  cpu_set_t now;
  CPU_ZERO(&now);
  ASSERT_EQ(sched_getaffinity(0, sizeof(now), &now), 0);
  EXPECT_TRUE(CPU_EQUAL(&now, &cpus_before_eal_))
      << "CPUs before EAL: " << CPU_COUNT(&cpus_before_eal_) << ", after: " << CPU_COUNT(&now);
  std::string want = "0@(";
  bool first = true;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &now)) continue;
    want += (first ? "" : ",") + std::to_string(c);
    first = false;
  }
  want += ")";
  EXPECT_EQ(OfflineEalLcores(), want);
}

}  // namespace
}  // namespace flowclass
