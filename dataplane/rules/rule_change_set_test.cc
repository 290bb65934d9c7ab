// Tests for RuleChangeSet: merged batches, deletes by cookie, and the
// sealed index against the unsealed scan.
#include "dataplane/rules/rule_change_set.h"

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

// A group's change set: the batches' matches, merged without copies and
// grown in chunks, are all there and only they are (MayAffect per megaflow).
TEST(RuleChangeSetTest, MergedBatchesNameEveryMatchAndNoOther) {
  RuleTable table;
  RuleChangeSet group;
  std::vector<Rule> inserted;
  uint64_t id = 0;
  // Batches on port 1, port 2, port 1 again and, every third rule, on no
  // exact port; each of a different size so chunks end at different places.
  const int ports[] = {1, 2, 1, 1};
  const int sizes[] = {700, 17, 1500, 40};
  for (int b = 0; b < 4; ++b) {
    std::vector<RuleOp> ops;
    for (int i = 0; i < sizes[b]; ++i) {
      ++id;
      Rule r = Ipv4SrcRule(id, 10, 0x0a000000u + static_cast<uint32_t>(id), 32,
                           Action::Output(1));
      if (id % 3 != 0) r.match.SetExact(Field::kInPort, static_cast<uint64_t>(ports[b]));
      inserted.push_back(r);
      ops.push_back(RuleOp::Insert(r));
    }
    RuleChangeSet cs = MakeRuleChangeSet(table, ops);
    EXPECT_EQ(cs.size(), ops.size());
    ASSERT_TRUE(table.ApplyBatch(ops).ok());
    group.Merge(std::move(cs));
    EXPECT_EQ(cs.size(), 0u);  // taken over
  }
  EXPECT_EQ(group.size(), inserted.size());
  EXPECT_EQ(group.by_in_port.size(), 2u);
  auto megaflow = [](uint32_t port, uint32_t src, Flow* value, Flow* mask) {
    value->Set(Field::kInPort, port);
    mask->Set(Field::kInPort, 0xffffffffu);
    value->Set(Field::kEthType, kEthTypeIpv4);
    mask->Set(Field::kEthType, 0xffff);
    value->Set(Field::kIpv4Src, src);
    mask->Set(Field::kIpv4Src, 0xffffffffu);
  };
  for (const Rule& r : inserted) {
    const bool any_port = r.match.mask.Get(Field::kInPort) == 0;
    const auto port = static_cast<uint32_t>(r.match.value.Get(Field::kInPort));
    const auto src = static_cast<uint32_t>(r.match.value.Get(Field::kIpv4Src));
    for (uint32_t on : {1u, 2u, 3u}) {
      Flow value, mask;
      megaflow(on, src, &value, &mask);
      EXPECT_EQ(group.MayAffect(value, mask, 0), any_port || on == port)
          << "rule " << r.id << " on port " << on;
    }
  }
  Flow value, mask;
  megaflow(1, 0x0b000000u, &value, &mask);  // overlaps no rule
  EXPECT_FALSE(group.MayAffect(value, mask, 0));
  group.Clear();
  EXPECT_EQ(group.size(), 0u);
}

TEST(RuleChangeSetTest, DeleteByCookieNamesTheRulesCarryingItAtThatPoint) {
  // deleted_ids resets a rule's hits (a new rule): a delete by cookie names
  // the rules that carry the cookie where it stands in the batch.
  auto with_cookie = [](uint64_t id, uint64_t cookie) {
    Rule r = Ipv4SrcRule(id, 10, 0x0a000000u + static_cast<uint32_t>(id), 32, Action::Output(1));
    r.cookie = cookie;
    return r;
  };
  RuleTable table;
  ASSERT_TRUE(table
                  .ApplyBatch({RuleOp::Insert(with_cookie(1, 7)), RuleOp::Insert(with_cookie(2, 8)),
                               RuleOp::Insert(with_cookie(3, 7))})
                  .ok());
  // Rule 2 takes cookie 7 only after the delete: it stays (replaced).
  // Rule 3 loses cookie 7 before it: it stays (replaced).  Rule 4 is
  // inserted with 7 before it: gone.  Rule 5 comes after it: stays.
  const std::vector<RuleOp> ops = {
      RuleOp::Replace(with_cookie(3, 9)), RuleOp::Insert(with_cookie(4, 7)),
      RuleOp::DeleteByCookie(7), RuleOp::Replace(with_cookie(2, 7)),
      RuleOp::Insert(with_cookie(5, 7))};
  const RuleChangeSet cs = MakeRuleChangeSet(table, ops);
  EXPECT_THAT(cs.deleted_ids, ::testing::UnorderedElementsAre(1u, 4u));
  EXPECT_THAT(cs.removed_ids, ::testing::UnorderedElementsAre(1u, 2u, 3u, 4u));
  ASSERT_TRUE(table.ApplyBatch(ops).ok());
  EXPECT_EQ(table.Find(1), nullptr);
  EXPECT_EQ(table.Find(4), nullptr);
  for (uint64_t id : {2u, 3u, 5u}) EXPECT_NE(table.Find(id), nullptr) << id;
}

// The sealed index (by the top byte of ipv4_src) answers MayAffect as the
// unsealed scan does: matches and megaflows with prefixes shorter, equal
// and longer than a byte, on ports with and without exact in_port.
TEST(RuleChangeSetTest, SealedIndexAnswersAsTheScan) {
  std::mt19937 rng(5);
  const int lens[] = {0, 4, 7, 8, 9, 16, 24, 32};
  auto prefix = [&](Flow* value, Flow* mask, Field f, int min_len = 0) {
    int len = lens[rng() % 8];
    while (len < min_len) len = lens[rng() % 8];
    const uint32_t m = Prefix32(len);
    // Few top bytes, so that buckets hold several matches.
    const uint32_t a = (static_cast<uint32_t>(rng() % 6) << 24) | (static_cast<uint32_t>(rng()) & 0xffffff);
    value->Set(f, a & m);
    mask->Set(f, m);
  };
  RuleChangeSet unsealed;
  for (int batch = 0; batch < 3; ++batch) {
    RuleChangeSet cs;
    for (int i = 0; i < 40; ++i) {
      Match m;
      m.SetExact(Field::kEthType, kEthTypeIpv4);
      if (rng() % 8 != 0) m.SetExact(Field::kInPort, 1 + rng() % 3);
      prefix(&m.value, &m.mask, Field::kIpv4Src, /*min_len=*/4);
      prefix(&m.value, &m.mask, Field::kIpv4Dst, /*min_len=*/16);
      if (m.mask.Get(Field::kInPort) != 0) {
        cs.by_in_port[static_cast<uint32_t>(m.value.Get(Field::kInPort))].push_back(m);
      } else {
        cs.any_in_port.push_back(m);
      }
    }
    unsealed.Merge(std::move(cs));
  }
  RuleChangeSet sealed = unsealed;  // a copy: not indexed
  sealed.Seal();
  const RuleChangeSet copy_of_sealed = sealed;
  int affected = 0;
  for (int i = 0; i < 20000; ++i) {
    Flow value, mask;
    value.Set(Field::kInPort, 1 + rng() % 4);
    mask.Set(Field::kInPort, 0xffffffffu);
    value.Set(Field::kEthType, kEthTypeIpv4);
    mask.Set(Field::kEthType, 0xffff);
    prefix(&value, &mask, Field::kIpv4Src);
    prefix(&value, &mask, Field::kIpv4Dst);
    const bool want = unsealed.MayAffect(value, mask, 0);
    ASSERT_EQ(sealed.MayAffect(value, mask, 0), want) << i;
    ASSERT_EQ(copy_of_sealed.MayAffect(value, mask, 0), want) << i;
    affected += want;
  }
  EXPECT_GT(affected, 1000);   // both answers occur often
  EXPECT_LT(affected, 19000);
}

}  // namespace
}  // namespace flowclass
