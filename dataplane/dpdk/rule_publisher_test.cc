#include "dataplane/dpdk/rule_publisher.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace flowclass {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int kBatches = 100;
#else
constexpr int kBatches = 500;
#endif

// One table read while written, as in the dataplane: generation g holds
// one rule, id g, matching in_port g (batch g inserts it and deletes rule
// g - 1).  Readers look up the table at the generation of the view they
// hold, so a view freed too early, a rule visible at the wrong generation or
// memory the table freed too early shows up as a wrong answer (and as a
// use-after-free under ASan).
Rule InPortRule(uint64_t gen) {
  Rule r;
  r.id = gen;
  r.priority = 1;
  r.match.SetExact(Field::kInPort, gen);
  return r;
}

// The rule id `t` gives a packet from in_port `port` at generation `gen`.
uint64_t IdAt(const RuleTable& t, uint64_t port, uint64_t gen) {
  Flow key, wc;
  key.Set(Field::kInPort, port);
  const Rule* r = t.Lookup(key, &wc, nullptr, gen);
  return r ? r->id : 0;
}

struct Reader {
  std::thread thread;
  std::atomic<bool> violation{false};
  std::atomic<uint64_t> iterations{0};
};

TEST(RulePublisherTest, AckMeansEveryOnlineReaderInstalledTheNewTable) {
  constexpr int kReaders = 3;
  RuleTable table({}, /*concurrent_readers=*/true);
  RulePublisher pub(kReaders, std::make_unique<PublishedTable>(&table, 0));
  std::atomic<uint64_t> acked{0};
  std::atomic<bool> stop{false};
  std::atomic<int> online_count{0};
  std::vector<Reader> readers(kReaders);
  for (int i = 0; i < kReaders; ++i) {
    readers[i].thread = std::thread([&, i] {
      const PublishedTable* cur = nullptr;
      pub.Online(i);
      online_count.fetch_add(1);
      while (!stop.load(std::memory_order_relaxed)) {
        // What was acked before this iteration must be visible in it.
        const uint64_t must_see = acked.load(std::memory_order_acquire);
        const PublishedTable* v = pub.Load();
        if (v != cur) {
          cur = v;
          pub.Quiescent(i, v->generation);
        }
        if (cur->generation < must_see) readers[i].violation = true;
        // Use the view we hold (freed too early => wrong answers / ASan):
        // at its generation g, rule g only, even while the writer inserts
        // rule g + 1 and deletes rule g.
        const uint64_t g = cur->generation;
        if (cur->table != &table || IdAt(table, g, g) != g ||
            (g > 0 && IdAt(table, g - 1, g) != 0) || IdAt(table, g + 1, g) != 0)
          readers[i].violation = true;
        readers[i].iterations.fetch_add(1, std::memory_order_relaxed);
        // The test machine may have fewer cores than threads: let the writer
        // and the other readers run.
        std::this_thread::yield();
        // Reader 2 goes offline now and then (an idle / stopped PMD).
        if (i == 2 && (readers[i].iterations.load() % 64) == 0) {
          cur = nullptr;
          pub.Offline(i);
          std::this_thread::yield();
          pub.Online(i);
        }
      }
      pub.Offline(i);
    });
  }
  // Readers that are not online yet are rightly not waited for: start
  // publishing once all are.
  while (online_count.load() < kReaders) std::this_thread::yield();
  bool early_ack = false;
  for (uint64_t g = 1; g <= kBatches && !early_ack; ++g) {
    std::vector<RuleOp> ops = {RuleOp::Insert(InPortRule(g))};
    if (g > 1) ops.push_back(RuleOp::Delete(g - 1));
    ASSERT_TRUE(table.ApplyBatch(ops).ok());
    pub.PublishAndWait(std::make_unique<PublishedTable>(&table, g));
    acked.store(g, std::memory_order_release);
    table.FreeRetired();
    table.RemoveDeleted();
    for (int i = 0; i < 2; ++i) {  // readers 0 and 1 never go offline
      if (pub.ReaderGeneration(i) < g) {
        ADD_FAILURE() << "generation " << g << " acked before reader " << i
                      << " installed it";
        early_ack = true;
      }
    }
  }
  stop = true;
  for (auto& r : readers) r.thread.join();
  for (int i = 0; i < kReaders; ++i) {
    EXPECT_FALSE(readers[i].violation) << "reader " << i;
    EXPECT_GT(readers[i].iterations.load(), 0u);
  }
  EXPECT_EQ(pub.Current()->generation, static_cast<uint64_t>(kBatches));
}

TEST(RulePublisherTest, OfflineReadersDoNotBlockAndAreNotWaitedFor) {
  RuleTable table;
  RulePublisher pub(2, std::make_unique<PublishedTable>(&table, 0));
  int waited = -1;
  pub.PublishAndWait(std::make_unique<PublishedTable>(&table, 1), &waited);
  EXPECT_EQ(waited, 0);
  pub.Online(0);  // online but stuck at generation 0 until it reports
  std::atomic<bool> done{false};
  std::thread writer([&] {
    int w = -1;
    pub.PublishAndWait(std::make_unique<PublishedTable>(&table, 2), &w);
    EXPECT_EQ(w, 1);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load()) << "ack must wait for an online reader";
  const PublishedTable* v = pub.Load();
  EXPECT_EQ(v->generation, 2u);
  pub.Quiescent(0, v->generation);
  writer.join();
  EXPECT_TRUE(done.load());
  pub.Offline(0);
}

// A reader that never reports: the wait ends at the deadline and names it;
// the view stays published, and LaggingReader tells when the owed grace
// period is over (the reader reported it).
TEST(RulePublisherTest, DeadlineNamesTheLaggingReader) {
  RuleTable table;
  RulePublisher pub(3, std::make_unique<PublishedTable>(&table, 0));
  pub.Online(0);
  pub.Online(2);
  pub.Quiescent(0, 5);  // reader 0 is ahead; reader 2 stays at 0
  const auto t0 = std::chrono::steady_clock::now();
  RulePublisher::WaitResult w;
  std::unique_ptr<PublishedTable> old = pub.PublishWithDeadline(
      std::make_unique<PublishedTable>(&table, 1), t0 + std::chrono::milliseconds(150), &w);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(w.complete());
  EXPECT_EQ(w.lagging_reader, 2);
  EXPECT_EQ(w.waited, 1);
  EXPECT_GE(took, std::chrono::milliseconds(150));
  EXPECT_LT(took, std::chrono::seconds(5));
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->generation, 0u);
  EXPECT_EQ(pub.Load()->generation, 1u);  // published either way
  EXPECT_EQ(pub.LaggingReader(1), 2);
  pub.Quiescent(2, 1);
  EXPECT_EQ(pub.LaggingReader(1), -1);
  // A complete wait within the deadline.
  old = pub.PublishWithDeadline(std::make_unique<PublishedTable>(&table, 1),
                                std::chrono::steady_clock::now() + std::chrono::seconds(5), &w);
  EXPECT_TRUE(w.complete());
  pub.Offline(0);
  pub.Offline(2);
}

}  // namespace
}  // namespace flowclass
