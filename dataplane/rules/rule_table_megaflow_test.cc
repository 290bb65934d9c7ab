// The megaflow contract of RuleTable::Lookup, checked by perturbation: a key
// that agrees with the looked-up key on the returned wildcard mask gets the
// same rule, compared with a linear scan (ReferenceClassifier).  Rule sets
// under churn, port ranges, IPv6, overlapping priorities and the ClassBench
// sets; and the megaflows the ClassBench traces need, which must stay few.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/internal/rule_key_set.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_format.h"
#include "dataplane/rules/rule_table.h"
#include "gtest/gtest.h"
#include "tests/common/classbench_data.h"
#include "tests/common/random_rules.h"
#include "tests/common/reference_classifier.h"
#include "tests/common/rule_table_testing.h"

namespace flowclass {
namespace {

// Looks `key` up in both and checks `perturbations` keys agreeing with it on
// the mask.  Returns false (after a fatal failure) on a mismatch.
void CheckKey(const RuleTable& table, const ReferenceClassifier& ref, RandomRuleGen& gen,
              const Flow& key, int perturbations, long* checks) {
  Flow wc;
  const Rule* got = table.Lookup(key, &wc);
  const uint64_t want = IdOf(ref.Lookup(key));
  ASSERT_EQ(IdOf(got), want) << "key " << Dump(key);
  for (int p = 0; p < perturbations; ++p) {
    const Flow other = gen.NextKeyAgreeing(key, wc);
    ASSERT_EQ(IdOf(ref.Lookup(other)), want)
        << "key " << Dump(key) << "\nwc  " << Dump(wc) << "\nkey'" << Dump(other);
    Flow wc2;
    ASSERT_EQ(IdOf(table.Lookup(other, &wc2)), want);
    ++*checks;
  }
}

struct ContractConfig {
  std::string name;
  int seeds;
  size_t rules;      // loaded first
  int rounds;        // then this many batches of churn
  int max_batch;
  int keys_per_round;
  RandomRuleOptions options;
};

void RunContract(uint64_t seed, const ContractConfig& cfg, long* checks) {
  SCOPED_TRACE(absl::StrCat(cfg.name, " seed ", seed));
  RandomRuleGen gen(seed, cfg.options);
  RuleTable table;
  ReferenceClassifier ref;
  std::vector<Rule> live;
  uint64_t next_id = 1;
  std::vector<RuleOp> load;
  while (live.size() < cfg.rules) {
    live.push_back(gen.NextRule(next_id++));
    load.push_back(RuleOp::Insert(live.back()));
  }
  ApplyOk(&table, load);
  ASSERT_TRUE(ref.ApplyBatch(load).ok());
  for (int round = 0; round < cfg.rounds; ++round) {
    const std::vector<RuleOp> ops =
        gen.NextBatch(1 + static_cast<int>(gen.Uniform(cfg.max_batch)), &live, &next_id);
    ApplyOk(&table, ops);
    ASSERT_TRUE(ref.ApplyBatch(ops).ok());
    for (int k = 0; k < cfg.keys_per_round; ++k) {
      CheckKey(table, ref, gen, gen.NextKeyNear(live), 6, checks);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(RuleTableMegaflowTest, AgreeingKeysGetTheSameRule) {
  RandomRuleOptions churn;
  churn.max_priority = 8;
  RandomRuleOptions ranges;
  ranges.range_fraction = 0.9;
  ranges.ipv6_fraction = 0.1;
  RandomRuleOptions ipv6;
  ipv6.ipv6_fraction = 0.9;
  ipv6.range_fraction = 0.4;
  RandomRuleOptions overlap;  // few priorities, few networks: ties and overlaps
  overlap.max_priority = 2;
  overlap.address_pool = 2;
  overlap.range_fraction = 0.5;
  const std::vector<ContractConfig> configs = {
      {"churn", Scaled(40), 20, 60, 12, 40, churn},
      {"ranges", Scaled(20), 300, 10, 30, 300, ranges},
      {"ipv6", Scaled(20), 300, 10, 30, 300, ipv6},
      {"overlapping_priorities", Scaled(20), 300, 10, 30, 300, overlap},
      {"large_churn", kSanitized ? 1 : 3, 3000, 20, 200, 500, {}},
  };
  long checks = 0;
  uint64_t seed = 5000;
  for (const ContractConfig& cfg : configs) {
    for (int s = 0; s < cfg.seeds; ++s) {
      RunContract(seed++, cfg, &checks);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  std::printf("megaflow contract: %ld perturbed keys checked\n", checks);
  EXPECT_GE(checks, kSanitized ? 50000 : 500000);
}

// Buckets filled against priority order: every rule of a load in ascending
// priority (worst first) breaks its list's order when appended, and each
// batch re-sorts the lists it broke (RuleTable::Impl::SortLists), which a
// lookup then stops reading at the first match.  Loaded in one batch and
// one rule per batch, then churned; a table read while written also answers
// at the generation before each batch, re-sorted lists included.  Crowded
// rules (two base networks, many priorities, ranges, IPv6) share buckets.
TEST(RuleTableMegaflowTest, BucketsLoadedAgainstPriorityOrder) {
  RandomRuleOptions crowded;
  crowded.address_pool = 2;
  crowded.max_priority = 1000;
  crowded.range_fraction = 0.5;
  crowded.ipv6_fraction = 0.2;
  long checks = 0;
  for (int seed = 0; seed < Scaled(6); ++seed) {
    for (const bool one_per_batch : {false, true}) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, one_per_batch ? " one rule per batch" : ""));
      RandomRuleGen gen(7000 + static_cast<uint64_t>(seed), crowded);
      std::vector<Rule> live = gen.NextRules(400);
      std::vector<Rule> worst_first = live;
      std::sort(worst_first.begin(), worst_first.end(),
                [](const Rule& a, const Rule& b) { return RuleBeats(b, a); });
      RuleTable table;
      RuleTable versioned(RuleTableLimits{}, /*concurrent_readers=*/true);
      ReferenceClassifier ref;
      std::vector<RuleOp> load;
      for (const Rule& r : worst_first) load.push_back(RuleOp::Insert(r));
      if (one_per_batch) {
        for (const RuleOp& op : load) {
          ApplyOk(&table, {op});
          ApplyOk(&versioned, {op});
        }
      } else {
        ApplyOk(&table, load);
        ApplyOk(&versioned, load);
      }
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_TRUE(ref.ApplyBatch(load).ok());
      for (int k = 0; k < 400; ++k) {
        CheckKey(table, ref, gen, gen.NextKeyNear(live), 4, &checks);
        CheckKey(versioned, ref, gen, gen.NextKeyNear(live), 4, &checks);
        if (::testing::Test::HasFatalFailure()) return;
      }
      uint64_t next_id = live.size() + 1;
      for (int round = 0; round < 10; ++round) {
        // Churn, then 20 new rules worst first.
        std::vector<RuleOp> ops = gen.NextBatch(30, &live, &next_id);
        std::vector<Rule> added = gen.NextRules(20, next_id);
        next_id += added.size();
        std::sort(added.begin(), added.end(),
                  [](const Rule& a, const Rule& b) { return RuleBeats(b, a); });
        for (const Rule& r : added) {
          ops.push_back(RuleOp::Insert(r));
          live.push_back(r);
        }
        const ReferenceClassifier before = ref;
        const uint64_t old_gen = versioned.generation();
        ApplyOk(&table, ops);
        ApplyOk(&versioned, ops);
        if (::testing::Test::HasFatalFailure()) return;
        ASSERT_TRUE(ref.ApplyBatch(ops).ok());
        for (int k = 0; k < 100; ++k) {
          const Flow key = gen.NextKeyNear(live);
          CheckKey(table, ref, gen, key, 4, &checks);
          if (::testing::Test::HasFatalFailure()) return;
          Flow wc;
          const uint64_t want = IdOf(before.Lookup(key));
          ASSERT_EQ(IdOf(versioned.Lookup(key, &wc, nullptr, old_gen)), want)
              << "key " << Dump(key) << " at the generation before the batch";
          for (int p = 0; p < 4; ++p) {
            const Flow other = gen.NextKeyAgreeing(key, wc);
            ASSERT_EQ(IdOf(before.Lookup(other)), want)
                << "key " << Dump(key) << "\nwc  " << Dump(wc) << "\nkey'" << Dump(other);
            ++checks;
          }
        }
        versioned.RemoveDeleted();
        versioned.FreeRetired();
      }
    }
  }
  std::printf("buckets against priority order: %ld perturbed keys checked\n", checks);
  EXPECT_GE(checks, kSanitized ? 10000 : 60000);
}

// The range proofs on their own, every bound and key of a 6-bit corner of
// the field plus random ones: every k' that agrees with k on the bits stays
// on k's side of the range.
TEST(RuleTableMegaflowTest, RangeProofBitsDecideTheRange) {
  std::mt19937_64 rng(3);
  auto check = [&](uint16_t lo, uint16_t hi, uint16_t k) {
    const bool inside = lo <= k && k <= hi;
    const uint16_t bits =
        inside ? internal::InRangeBits(k, lo, hi) : internal::OutOfRangeBits(k, lo, hi);
    for (int i = 0; i < 64; ++i) {
      const auto other =
          static_cast<uint16_t>((k & bits) | (static_cast<uint16_t>(rng()) & ~bits));
      ASSERT_EQ(lo <= other && other <= hi, inside)
          << "lo " << lo << " hi " << hi << " k " << k << " bits " << bits << " k' " << other;
    }
  };
  for (uint16_t lo = 0; lo < 64; ++lo)
    for (uint16_t hi = lo; hi < 64; ++hi)
      for (uint16_t k = 0; k < 70; ++k) {
        check(lo, hi, k);
        check(static_cast<uint16_t>(lo << 10), static_cast<uint16_t>((hi << 10) | 0x3ff),
              static_cast<uint16_t>(k << 10 | (k & 7)));
        if (::testing::Test::HasFatalFailure()) return;
      }
  for (int i = 0; i < 200000; ++i) {
    auto lo = static_cast<uint16_t>(rng()), hi = static_cast<uint16_t>(rng());
    if (lo > hi) std::swap(lo, hi);
    check(lo, hi, static_cast<uint16_t>(rng()));
    check(lo, hi, lo);
    check(lo, hi, hi);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Replays a ClassBench trace through a megaflow cache that installs what
// Lookup returns (key & wc under wc, as the dataplane does) and counts the
// installs; checks the contract on every packet and on perturbed keys.
struct ReplayCount {
  size_t packets = 0;
  size_t megaflows = 0;
};

ReplayCount Replay(const std::string& set, long* checks) {
  ReplayCount out;
  const std::string dir = ClassBenchDir() + "/hypersplit/";
  absl::StatusOr<std::vector<Rule>> rules = LoadRuleFile(dir + set, RuleFormat::kClassBench);
  EXPECT_TRUE(rules.ok()) << dir + set << ": " << rules.status();
  absl::StatusOr<std::vector<TraceEntry>> trace = LoadTraceFile(dir + set + "_trace");
  EXPECT_TRUE(trace.ok()) << dir + set << "_trace: " << trace.status();
  if (!rules.ok() || !trace.ok()) return out;
  std::vector<RuleOp> ops;
  for (const Rule& r : *rules) ops.push_back(RuleOp::Insert(r));
  RuleTable table;
  ReferenceClassifier ref;
  ApplyOk(&table, ops);
  EXPECT_TRUE(ref.ApplyBatch(ops).ok());
  RandomRuleGen gen(11);
  // mask -> the masked keys installed under it
  std::map<std::vector<uint64_t>, std::set<std::vector<uint64_t>>> cache;
  for (const TraceEntry& e : *trace) {
    const Flow key = e.key.ToFlow();
    ++out.packets;
    bool hit = false;
    for (const auto& [mask, keys] : cache) {
      std::vector<uint64_t> masked(kFlowWords);
      for (int i = 0; i < kFlowWords; ++i) masked[i] = key.w[i] & mask[i];
      if (keys.contains(masked)) {
        hit = true;
        break;
      }
    }
    if (hit) continue;
    CheckKey(table, ref, gen, key, 4, checks);
    if (::testing::Test::HasFatalFailure()) return out;
    Flow wc;
    table.Lookup(key, &wc);
    std::vector<uint64_t> mask(wc.w.begin(), wc.w.end()), masked(kFlowWords);
    for (int i = 0; i < kFlowWords; ++i) masked[i] = key.w[i] & wc.w[i];
    cache[mask].insert(masked);
    ++out.megaflows;
  }
  return out;
}

TEST(RuleTableMegaflowTest, ClassBenchTracesNeedFewMegaflows) {
  // Installs per trace with the exact-mask tuple space this table replaced
  // (one subtable per expanded mask, every consulted mask ORed in): acl1
  // 1,805, fw1 3,367, ipc1 5,043, 209 / 410 / 560 for the 100-rule sets.
  // The bounds are what relaxed masks, per-rule proofs and prefix levels
  // give, with a little room (docs/classifier.md, "Slow-path lookup").
  const std::vector<std::pair<std::string, size_t>> sets = {
      {"acl1_1K", 1500}, {"fw1_1K", 2000}, {"ipc1_1K", 2700},
      {"acl1_100", 170}, {"fw1_100", 240}, {"ipc1_100", 300}};
  long checks = 0;
  for (const auto& [set, bound] : sets) {
    SCOPED_TRACE(set);
    const ReplayCount c = Replay(set, &checks);
    if (::testing::Test::HasFatalFailure()) return;
    std::printf("%s: %zu megaflows for %zu packets\n", set.c_str(), c.megaflows, c.packets);
    EXPECT_GT(c.packets, 0u);
    EXPECT_LE(c.megaflows, bound);
  }
  EXPECT_GT(checks, 1000);
}

}  // namespace
}  // namespace flowclass
