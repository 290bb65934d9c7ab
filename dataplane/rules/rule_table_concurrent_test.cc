// Tests for a RuleTable with concurrent readers: every generation stays
// readable until RemoveDeleted, lists grow in place, and lookups on another
// thread see the generation they were published.
#include "dataplane/rules/rule_table.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "gtest/gtest.h"
#include "tests/common/random_rules.h"
#include "tests/common/rule_table_testing.h"

namespace flowclass {
namespace {

// A table with concurrent readers gives, at its latest generation, what a
// plain table gives; at the generation before a batch, what the plain table
// gave before it (deleted rules stay linked until RemoveDeleted), through
// inserts, deletes, replaces, deletes by cookie and subtables that empty and
// come back (the last-subtable cache must not outlive its subtable).
TEST(RuleTableTest, ConcurrentReadersTableKeepsEachGeneration) {
  RandomRuleOptions opts;
  opts.cookies = 4;
  RandomRuleGen gen(2024, opts);
  std::vector<Rule> live;
  uint64_t next_id = 1;
  RuleTable plain, versioned({}, /*concurrent_readers=*/true);
  size_t unlinked = 0, freed = 0;
  auto apply_both = [&](const std::vector<RuleOp>& ops, int b) {
    // The answers before the batch, for keys near the rules before and after.
    std::vector<Flow> keys;
    std::vector<std::pair<uint64_t, Flow>> before;
    for (int k = 0; k < 40; ++k) {
      keys.push_back(gen.NextKeyNear(live));
      Flow wc;
      const uint64_t id = IdOf(plain.Lookup(keys.back(), &wc));
      before.emplace_back(id, wc);
    }
    const uint64_t old_gen = plain.generation();
    const RuleTable plain_before(plain);
    absl::StatusOr<BatchResult> r = plain.ApplyBatch(ops);
    ASSERT_TRUE(r.ok()) << r.status();
    absl::StatusOr<BatchResult> v = versioned.ApplyBatch(ops);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->generation, r->generation);
    EXPECT_EQ(v->inserted, r->inserted);
    EXPECT_EQ(v->deleted, r->deleted);
    EXPECT_EQ(v->replaced, r->replaced);
    EXPECT_EQ(v->rules, r->rules);
    for (int k = 0; k < 40; ++k) {
      Flow wp, wv, wold;
      ASSERT_EQ(IdOf(versioned.Lookup(keys[k], &wv)), IdOf(plain.Lookup(keys[k], &wp)))
          << "batch " << b << " key " << k;
      ASSERT_EQ(IdOf(versioned.Lookup(keys[k], &wold, nullptr, old_gen)), before[k].first)
          << "batch " << b << " key " << k << " at the generation before";
      // The mask at the old generation is a megaflow of the old rule set
      // (deleted rules are still linked and checked): keys that agree with
      // the key on it get the old answer.
      for (int p = 0; p < 4; ++p) {
        Flow wo;
        const Flow other = gen.NextKeyAgreeing(keys[k], wold);
        ASSERT_EQ(IdOf(plain_before.Lookup(other, &wo)), before[k].first)
            << "batch " << b << " key " << k << " perturbed on the old mask";
      }
    }
    unlinked += versioned.RemoveDeleted();
    freed += versioned.FreeRetired();
    EXPECT_EQ(versioned.Stats().subtables, plain.Stats().subtables) << "batch " << b;
    ASSERT_EQ(versioned.DebugString(), plain.DebugString()) << "batch " << b;
    for (int k = 0; k < 40; ++k) {
      Flow wp, wv;
      ASSERT_EQ(IdOf(versioned.Lookup(keys[k], &wv)), IdOf(plain.Lookup(keys[k], &wp)));
      ASSERT_EQ(wv, wp);
    }
  };
  for (int b = 0; b < 60; ++b) {
    apply_both(gen.NextBatch(b % 10 == 9 ? 0 : 25, &live, &next_id), b);
    if (b % 15 == 14) {  // empty every subtable, then refill the same shapes
      std::vector<RuleOp> wipe;
      for (const Rule& rule : live) wipe.push_back(RuleOp::Delete(rule.id));
      apply_both(wipe, b);
      std::vector<RuleOp> back;
      for (Rule rule : live) {
        rule.id = next_id++;
        back.push_back(RuleOp::Insert(rule));
      }
      live.clear();
      for (const RuleOp& op : back) live.push_back(op.rule);
      apply_both(back, b);
    }
  }
  EXPECT_GT(plain.size(), 0u);
  EXPECT_GT(unlinked, 0u);
  EXPECT_GT(freed, 0u);
  // A plain table unlinks and frees as it goes.
  EXPECT_EQ(plain.RemoveDeleted(), 0u);
  EXPECT_EQ(plain.FreeRetired(), 0u);
}

// A key that takes many rules in one batch (rules that differ only in
// priority and id) grows its list in place, doubling: a copy per rule would
// all be retired until the publication (quadratic memory).  Unlinking them
// all leaves holes and compacts now and then.  FreeRetired's count of freed
// blocks tells how many lists were replaced.
TEST(RuleTableTest, ManyRulesOnOneKeyRetireFewLists) {
  constexpr int kRules = 2000;
  RuleTable t({}, /*concurrent_readers=*/true);
  std::vector<RuleOp> ops, dels;
  for (int i = 0; i < kRules; ++i) {
    Rule r = V4Rule(i + 1, static_cast<uint32_t>(i % 7));
    ops.push_back(RuleOp::Insert(r));
    dels.push_back(RuleOp::Delete(i + 1));
  }
  ASSERT_TRUE(t.ApplyBatch(ops).ok());
  Flow wc;
  const Flow key = V4Key(1, 2, 3, 4);
  // Priority 6 at ids 7, 14, ...: the lowest id of the top priority wins.
  EXPECT_EQ(IdOf(t.Lookup(key, &wc)), 7u);
  const size_t grown = t.FreeRetired();
  EXPECT_LE(grown, 16u);  // ~log2(2000) doublings, plus the order and arrays
  ASSERT_TRUE(t.ApplyBatch(dels).ok());
  EXPECT_EQ(t.Lookup(key, &wc), nullptr);
  EXPECT_EQ(IdOf(t.Lookup(key, &wc, nullptr, 1)), 7u);  // still linked
  EXPECT_EQ(t.RemoveDeleted(), size_t{kRules});
  const size_t unlinked = t.FreeRetired();
  EXPECT_LE(unlinked, size_t{kRules} + 32);  // the nodes, a few lists, the order
  EXPECT_GE(unlinked, size_t{kRules});
}

// One thread applies batches to a concurrent-readers table and publishes
// each generation; another looks up keys at the generation it last saw, and
// must get exactly what a plain table gave at that generation, while the
// writer inserts, grows key sets, replaces lists and subtables and unlinks.
// The writer unlinks and frees only once the reader has reported a newer
// generation (the dataplane's grace period).  ASan (make test's sanitizer
// build) catches memory freed too early.
TEST(RuleTableTest, LookupsOnAnotherThreadSeeThePublishedGeneration) {
  RandomRuleOptions opts;
  opts.cookies = 4;
  RandomRuleGen gen(4242, opts);
  std::vector<Rule> live;
  uint64_t next_id = 1;
  constexpr int kBatches = 120;
  constexpr int kKeys = 48;
  // The batches (each one a new generation), then per generation the plain
  // table's answers for the keys.
  std::vector<std::vector<RuleOp>> batches;
  std::vector<Flow> keys;
  {
    RuleTable sim;
    for (int b = 0; b < kBatches; ++b) {
      std::vector<RuleOp> ops;
      if (b % 30 == 29) {  // empty every subtable
        for (const Rule& rule : live) ops.push_back(RuleOp::Delete(rule.id));
        live.clear();
      } else {
        ops = gen.NextBatch(40, &live, &next_id);
      }
      ASSERT_TRUE(sim.ApplyBatch(ops).ok());
      if (sim.generation() != batches.size() + 1) continue;  // changed nothing
      batches.push_back(std::move(ops));
      if (keys.size() < kKeys && b % 2 == 0) keys.push_back(gen.NextKeyNear(live));
    }
  }
  while (keys.size() < kKeys) keys.push_back(gen.NextKeyNear(live));
  ASSERT_GE(batches.size(), size_t{kBatches} * 9 / 10);
  RuleTable plain;
  std::vector<std::vector<uint64_t>> want;  // [generation][key]
  auto answers = [&](const RuleTable& t) {
    std::vector<uint64_t> ids;
    for (const Flow& key : keys) {
      Flow wc;
      ids.push_back(IdOf(t.Lookup(key, &wc)));
    }
    return ids;
  };
  want.push_back(answers(plain));
  for (const std::vector<RuleOp>& ops : batches) {
    ASSERT_TRUE(plain.ApplyBatch(ops).ok());
    ASSERT_EQ(plain.generation(), want.size());
    want.push_back(answers(plain));
  }

  RuleTable table({}, /*concurrent_readers=*/true);
  std::atomic<uint64_t> published{0}, reported{0};
  std::atomic<bool> done{false};
  std::atomic<uint64_t> lookups{0}, wrong{0};
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {
      const uint64_t g = published.load(std::memory_order_acquire);
      for (int k = 0; k < kKeys; ++k) {
        Flow wc;
        if (IdOf(table.Lookup(keys[k], &wc, nullptr, g)) != want[g][k])
          wrong.fetch_add(1, std::memory_order_relaxed);
        lookups.fetch_add(1, std::memory_order_relaxed);
      }
      reported.store(g, std::memory_order_release);  // quiescent point
    }
  });
  auto wait_for_reader = [&](uint64_t g) {
    while (reported.load(std::memory_order_acquire) < g) std::this_thread::yield();
  };
  for (const std::vector<RuleOp>& ops : batches) {
    absl::StatusOr<BatchResult> r = table.ApplyBatch(ops);
    ASSERT_TRUE(r.ok()) << r.status();
    published.store(r->generation, std::memory_order_release);
    wait_for_reader(r->generation);
    table.FreeRetired();   // retired before the publication
    table.RemoveDeleted(); // nobody reads an older generation now
  }
  done.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(wrong.load(), 0u) << "of " << lookups.load() << " lookups";
  EXPECT_GE(lookups.load(), uint64_t{kKeys} * batches.size());
  EXPECT_EQ(table.DebugString(), plain.DebugString());
}


// DeleteAll on a table with concurrent readers deletes as a batch does:
// readers at the generation before still see every rule until RemoveDeleted.
TEST(RuleTableTest, DeleteAllWithConcurrentReadersKeepsOlderGenerations) {
  RuleTable t({}, /*concurrent_readers=*/true);
  ApplyOk(&t, {RuleOp::Insert(V4Rule(1, 1)), RuleOp::Insert(SrcRule(2, 5, 0x0a000001))});
  const Flow key = V4Key(0x0a000001, 2, 3, 4);
  Flow wc;
  ASSERT_EQ(IdOf(t.Lookup(key, &wc)), 2u);
  const BatchResult r = t.DeleteAll();
  EXPECT_EQ(r.deleted, 2u);
  EXPECT_EQ(r.generation, 2u);
  EXPECT_EQ(r.rules, 0u);
  EXPECT_EQ(t.Lookup(key, &wc), nullptr);
  EXPECT_EQ(IdOf(t.Lookup(key, &wc, nullptr, 1)), 2u);
  EXPECT_EQ(t.Find(2), nullptr);
  EXPECT_EQ(t.RemoveDeleted(), 2u);
  EXPECT_EQ(t.Stats().subtables, 0u);
  EXPECT_EQ(t.Stats().entries, 0u);
  EXPECT_GE(t.FreeRetired(), 2u);
}

}  // namespace
}  // namespace flowclass
