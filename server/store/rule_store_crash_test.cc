// rule_store_crash_test.cc — a writer process is SIGKILLed at random moments
// (or stops cleanly now and then); after each, the store must hold exactly
// the groups it acknowledged plus, at most, the one in flight, whole.
//
// The child appends groups from a sequence fixed before the fork (so parent
// and child agree on every batch) and writes each acknowledged generation to
// a pipe after CommitGroup returns, and Settles only now and then (as
// flowclassd does when its store thread is idle), so the -wal holds up to
// checkpoint_groups (4 here) committed groups when a kill lands.  The parent kills it after a random
// delay, drains the pipe, loads the store (strictly: a crash must never
// leave damage) and compares with a RuleTable fed the same batches.
// Automatic compaction runs often, so kills land inside compactions too.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "dataplane/rules/rule_table.h"
#include "gtest/gtest.h"
#include "server/store/rule_store.h"
#include "tests/common/random_rules.h"

namespace flowclass {
namespace {

namespace fs = std::filesystem;

constexpr int kKills = 60;           // SIGKILLs that land while the writer runs
constexpr int kMaxCycles = 200;
constexpr int kBatches = 4000;       // a run used ~450 on the dev VM; a faster disk wraps
constexpr auto kTimeLimit = std::chrono::seconds(240);  // a hang, not a slow VM

std::vector<Rule> TableRules(const RuleTable& t) {
  std::vector<Rule> v;
  for (const Rule* r : t.Rules()) v.push_back(*r);
  std::sort(v.begin(), v.end(), [](const Rule& a, const Rule& b) { return a.id < b.id; });
  return v;
}

RuleStoreOptions ChildOptions() {
  RuleStoreOptions o;
  o.auto_compact_batches = 60;
  o.snapshot_chunk_rules = 64;
  o.checkpoint_groups = 4;
  return o;
}

// Child: appends groups from the one after the store's generation on,
// acknowledging each on `fd`; stops after `groups` groups (clean exit) or
// when killed.
[[noreturn]] void RunWriter(const std::string& dir,
                            const std::vector<std::vector<RuleOp>>& batches,
                            const absl::flat_hash_map<uint64_t, uint64_t>& group_end, int fd,
                            int groups) {
  int code = 0;
  {
    auto store = RuleStore::Open(dir, ChildOptions());
    if (!store.ok()) ::_exit(10);
    absl::StatusOr<RuleStoreState> state = (*store)->Load();
    if (!state.ok()) ::_exit(11);
    uint64_t g = state->generation;
    for (int n = 0; n < groups; ++n) {
      if (g == batches.size()) break;  // the sequence is used up: a clean stop
      auto end = group_end.find(g + 1);
      if (end == group_end.end()) {
        code = 12;  // not at a group boundary: a half-applied group
        break;
      }
      std::vector<StoreBatch> group;
      for (uint64_t i = g + 1; i <= end->second; ++i) group.push_back({i, batches[i - 1]});
      // As flowclassd does: acknowledged after the commit, checkpointed
      // (and compacted) later: after some acks (flowclassd: when idle), or
      // by CommitGroup every checkpoint_groups groups, so kills land with
      // several groups in the -wal and inside checkpoints too.
      if (!(*store)->CommitGroup(group).ok()) {
        code = 13;
        break;
      }
      g = end->second;
      if (::write(fd, &g, sizeof g) != sizeof g) {
        code = 14;
        break;
      }
      if (g % 3 == 0 && !(*store)->Settle().ok()) {
        code = 15;
        break;
      }
    }
  }  // a clean close when not killed
  ::_exit(code);
}

TEST(RuleStoreCrashTest, RestoredStateIsTheAckedGroupsPlusAtMostTheOneInFlight) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/rule_store_crash.XXXXXX");
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl + "/store";

  // The sequence: batches that each change the rule set (so generation g is
  // batches[g-1]), cut into groups of 1..6.
  std::vector<std::vector<RuleOp>> batches;
  absl::flat_hash_map<uint64_t, uint64_t> group_end;  // first generation -> last
  {
    RandomRuleGen gen(2024);
    RuleTable table;
    std::vector<Rule> live;
    uint64_t next_id = 1;
    std::mt19937_64 rng(7);
    while (batches.size() < kBatches) {
      std::vector<RuleOp> ops = gen.NextBatch(1 + static_cast<int>(rng() % 12), &live, &next_id);
      absl::StatusOr<BatchResult> r = table.ApplyBatch(ops);
      ASSERT_TRUE(r.ok()) << r.status();
      if (r->generation == batches.size()) continue;  // changed nothing
      batches.push_back(std::move(ops));
    }
    for (uint64_t g = 1; g <= batches.size();) {
      const uint64_t end = std::min<uint64_t>(batches.size(), g + rng() % 6);
      group_end[g] = end;
      g = end + 1;
    }
  }

  RuleTable reference;
  std::mt19937_64 rng(99);
  const auto start = std::chrono::steady_clock::now();
  uint64_t acked = 0;
  int kills = 0, in_flight_kept = 0, clean = 0, wraps = 0;
  uint64_t total = 0;  // generations acknowledged over every pass of the sequence
  for (int cycle = 0; kills < kKills; ++cycle) {
    ASSERT_LT(cycle, kMaxCycles) << "only " << kills << " kills landed while the writer ran";
    ASSERT_LT(std::chrono::steady_clock::now() - start, kTimeLimit) << "after " << cycle << " cycles";
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const bool stop_cleanly = cycle % 9 == 4;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      RunWriter(dir, batches, group_end, fds[1], stop_cleanly ? 1 + cycle % 5 : 1 << 30);
    }
    ::close(fds[1]);
    if (!stop_cleanly) {
      // From "still opening" to "many groups in".
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
      ::kill(pid, SIGKILL);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    uint64_t g;
    ssize_t n;
    while ((n = ::read(fds[0], &g, sizeof g)) == sizeof g) {
      ASSERT_GT(g, acked);
      acked = g;
    }
    ::close(fds[0]);
    if (WIFSIGNALED(status)) {
      ASSERT_EQ(WTERMSIG(status), SIGKILL);
      ++kills;
    } else {  // a clean stop, or the sequence used up before the kill
      ASSERT_TRUE(WIFEXITED(status));
      ASSERT_EQ(WEXITSTATUS(status), 0) << "the writer failed in cycle " << cycle;
      ++clean;
    }

    absl::StatusOr<std::unique_ptr<RuleStore>> store = RuleStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<RuleStoreState> state = (*store)->Load();
    ASSERT_TRUE(state.ok()) << "cycle " << cycle << ": " << state.status();
    const uint64_t r = state->generation;
    // Exactly the acked groups, or those and the next group whole.
    if (r != acked) {
      auto next = group_end.find(acked + 1);
      ASSERT_TRUE(next != group_end.end());
      ASSERT_EQ(r, next->second) << "cycle " << cycle << ": acked " << acked
                                 << ", restored " << r << " (not a whole group)";
      ASSERT_FALSE(stop_cleanly) << "a clean stop left an unacknowledged group";
      ++in_flight_kept;
      acked = r;  // durable now: the next cycle continues after it
    }
    while (reference.generation() < r) {
      ASSERT_TRUE(reference.ApplyBatch(batches[reference.generation()]).ok());
    }
    ASSERT_EQ(state->rules, TableRules(reference)) << "cycle " << cycle << ", generation " << r;
    if (r == batches.size()) {
      // A fast disk used the whole sequence up: start it again on a new store.
      store->reset();
      fs::remove_all(dir);
      reference.Clear(0);
      total += acked;
      acked = 0;
      ++wraps;
    }
  }
  total += acked;
  std::cerr << kills << " kills, " << clean << " clean stops, " << in_flight_kept
            << " in-flight groups restored whole, " << total << " generations acknowledged ("
            << wraps << " passes of the sequence completed) in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";
  EXPECT_GE(kills, 50);
  EXPECT_GT(total, 100u);  // the writers made progress
  std::error_code ec;
  fs::remove_all(tmpl, ec);
}

}  // namespace
}  // namespace flowclass
