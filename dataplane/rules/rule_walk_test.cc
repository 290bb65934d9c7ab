// rule_walk_test — the walks' incremental edits (internal/rule_walk.h)
// against a full sort: random churn of subtables that come, go and change
// max priority, a few or many per edit; after every edit the walk must hold
// exactly the sorted slots, in blocks of 1..kWalkBlockSlots (at least
// kWalkBlockMin when there are several), sharing the blocks it did not
// change with the old walk and retiring exactly the others.
#include "dataplane/rules/internal/rule_walk.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "dataplane/flow/flow.h"
#include "dataplane/rules/internal/rule_subtable.h"
#include "gtest/gtest.h"
#include "tests/common/rule_table_testing.h"

namespace flowclass {
namespace internal {
namespace {

std::vector<OrderSlot> Flatten(const Walk& w) {
  std::vector<OrderSlot> out;
  ForEachSlot(w, [&out](const OrderSlot& s) { out.push_back(s); });
  return out;
}

TEST(WalkEditorTest, RandomChurnEqualsAFullSort) {
  constexpr int kSubtables = 400;
  std::vector<std::unique_ptr<Subtable>> subtables;
  for (int i = 0; i < kSubtables; ++i) {
    Flow mask;
    mask.w[0] = static_cast<uint64_t>(i % 37 + 1);  // ties on words 0..1 too
    mask.w[1] = static_cast<uint64_t>(i + 1);
    subtables.push_back(std::make_unique<Subtable>(mask));
  }
  std::vector<std::optional<uint32_t>> placed(kSubtables);  // priority in the walk
  std::mt19937_64 rng(22);
  auto uniform = [&rng](uint64_t n) { return static_cast<uint64_t>(rng() % n); };
  WalkEditor editor;
  Walk* walk = editor.Build({});
  const int steps = Scaled(4000);
  for (int step = 0; step < steps; ++step) {
    // Mostly one subtable moved (a one-rule batch), sometimes many (a load).
    const int k = uniform(20) == 0 ? static_cast<int>(uniform(300)) + 1
                                   : static_cast<int>(uniform(3)) + 1;
    std::set<int> picked;
    while (static_cast<int>(picked.size()) < k) picked.insert(static_cast<int>(uniform(kSubtables)));
    std::vector<WalkRemoval> remove;
    std::vector<OrderSlot> add;
    for (int i : picked) {
      const Subtable* st = subtables[i].get();
      // Priorities from a small range: ties broken by the mask.
      const uint32_t p = static_cast<uint32_t>(uniform(50));
      if (placed[i].has_value()) {
        remove.push_back({*placed[i], st->mask, st});
        if (uniform(3) == 0) {
          placed[i].reset();  // gone
          continue;
        }
      }
      placed[i] = p;  // came or moved (maybe to where it was)
      add.push_back(OrderSlot{p, st});
    }
    std::sort(remove.begin(), remove.end(), RemovalBefore);
    SortSlots(&add);
    std::vector<const WalkBlock*> retired;
    Walk* next = editor.Edit(*walk, remove, add,
                             [&retired](const WalkBlock* b) { retired.push_back(b); });

    std::vector<OrderSlot> want;
    for (int i = 0; i < kSubtables; ++i)
      if (placed[i].has_value()) want.push_back(OrderSlot{*placed[i], subtables[i].get()});
    SortSlots(&want);
    const std::vector<OrderSlot> got = Flatten(*next);
    ASSERT_EQ(got.size(), want.size()) << "step " << step;
    for (size_t j = 0; j < got.size(); ++j) {
      ASSERT_EQ(got[j].subtable, want[j].subtable) << "step " << step << " slot " << j;
      ASSERT_EQ(got[j].max_priority, want[j].max_priority) << "step " << step << " slot " << j;
    }
    for (const WalkBlock* b : *next) {
      ASSERT_GE(b->n, 1u);
      ASSERT_LE(b->n, kWalkBlockSlots);
      if (next->size() > 1) {
        ASSERT_GE(b->n, kWalkBlockMin) << "step " << step;
      }
    }
    // Every old block is kept or retired, none both; retired new blocks
    // (a short tail merged) are in neither walk.
    const std::set<const WalkBlock*> kept(next->begin(), next->end());
    const std::set<const WalkBlock*> gone(retired.begin(), retired.end());
    ASSERT_EQ(gone.size(), retired.size()) << "a block retired twice";
    for (const WalkBlock* b : *walk) ASSERT_NE(kept.contains(b), gone.contains(b)) << "step " << step;
    for (const WalkBlock* b : retired) {
      ASSERT_FALSE(kept.contains(b));
      delete b;
    }
    delete walk;
    walk = next;
  }
  FreeWalkAndBlocks(walk);
}

}  // namespace
}  // namespace internal
}  // namespace flowclass
