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

// A table whose content encodes its generation: `gen` rules.  Readers check
// the content of the table they hold, so a table freed too early shows up as
// a wrong count (and as a use-after-free under ASan).
std::unique_ptr<PublishedTable> TableWithRules(const RuleTable& base, uint64_t gen) {
  auto t = std::make_unique<PublishedTable>(base, gen);
  Rule r;
  r.id = gen;
  r.priority = 1;
  r.match.SetExact(Field::kInPort, gen);
  EXPECT_TRUE(t->table.ApplyBatch({RuleOp::Insert(r)}).ok());
  return t;
}

struct Reader {
  std::thread thread;
  std::atomic<bool> violation{false};
  std::atomic<uint64_t> iterations{0};
};

TEST(RulePublisherTest, AckMeansEveryOnlineReaderInstalledTheNewTable) {
  constexpr int kReaders = 3;
  RulePublisher pub(kReaders, std::make_unique<PublishedTable>());
  std::atomic<uint64_t> acked{0};
  std::atomic<bool> stop{false};
  std::vector<Reader> readers(kReaders);
  for (int i = 0; i < kReaders; ++i) {
    readers[i].thread = std::thread([&, i] {
      const PublishedTable* cur = nullptr;
      pub.Online(i);
      while (!stop.load(std::memory_order_relaxed)) {
        // What was acked before this iteration must be visible in it.
        const uint64_t must_see = acked.load(std::memory_order_acquire);
        const PublishedTable* v = pub.Load();
        if (v != cur) {
          cur = v;
          pub.Quiescent(i, v->generation);
        }
        if (cur->generation < must_see) readers[i].violation = true;
        // Use the table we hold (freed too early => wrong size / ASan).
        if (cur->table.size() != (cur->generation ? 1u : 0u) ||
            (cur->generation && !cur->table.Find(cur->generation)))
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
  RuleTable empty;
  bool early_ack = false;
  for (uint64_t g = 1; g <= kBatches && !early_ack; ++g) {
    pub.PublishAndWait(TableWithRules(empty, g));
    acked.store(g, std::memory_order_release);
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
  RulePublisher pub(2, std::make_unique<PublishedTable>());
  int waited = -1;
  pub.PublishAndWait(std::make_unique<PublishedTable>(RuleTable(), 1), &waited);
  EXPECT_EQ(waited, 0);
  pub.Online(0);  // online but stuck at generation 0 until it reports
  std::atomic<bool> done{false};
  std::thread writer([&] {
    int w = -1;
    pub.PublishAndWait(std::make_unique<PublishedTable>(RuleTable(), 2), &w);
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

}  // namespace
}  // namespace flowclass
