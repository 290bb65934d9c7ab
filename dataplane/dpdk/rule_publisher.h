// rule_publisher.h — RCU publication of rule table generations to PMD threads.
//
// Contract
// --------
// One writer (the control thread, serialised by the caller) and up to
// `num_readers` reader slots (one per PMD thread; reader i is used by exactly
// one thread).  No DPDK dependency, so it is unit-tested on plain threads.
//
// Writer:  PublishAndWait(next) stores `next` (seq_cst), then waits until every
//          reader slot is offline or has reported generation >= next's, then
//          hands back the previously published view.  Only then does it
//          return, which is what makes the dataplane's ack ("every packet
//          from now on is classified by generation G") true.  It is also a
//          grace period: no reader still holds a pointer it loaded before the
//          publication, so the writer may free what it unlinked before
//          (RuleTable::FreeRetired) and unlink rules older generations saw
//          (RuleTable::RemoveDeleted).
//          With a deadline (PublishWithDeadline) the wait stops at the
//          deadline: the new view is published either way (readers that
//          reach a quiescent point install it), but a reader that has not
//          reported it yet may still hold a pointer into anything older, so
//          the grace period is *not* over and the caller must keep every
//          older view and retired memory until LaggingReader() says no
//          online reader is behind any more.
// Reader:  once per poll-loop iteration
//            const PublishedTable* v = pub.Load();          // acquire
//            if (v != current) { pipeline.SetRuleTable(v->table, ..., v->generation);
//                                current = v; pub.Quiescent(i, v->generation); }
//          Quiescent() is called only *after* SetRuleTable(), so a reported
//          generation means "my caches were rebuilt for it and I hold no
//          pointer into any older table".  While a reader is Offline() it must
//          hold no table pointer at all (the PMD calls SetRuleTable(nullptr)
//          first); Online() must be followed by a Load() before any lookup.
//
// Why this instead of rte_rcu_qsbr: qsbr's quiescent() records a token, but
// our readers keep the table pointer *across* quiescent points (inside the
// Pipeline), so "passed a quiescent point" is not enough: the writer must know
// the reader has installed the new table.  Reporting the installed generation
// gives exactly that, with the same cost (one store per change, no RMW).
//
// Offline/online race: the writer's publish (seq_cst store) precedes its
// seq_cst load of `online`; a reader's Online() (seq_cst store) precedes its
// seq_cst Load().  So either the writer sees the reader online (and waits for
// it) or the reader's Load() sees the new version — never neither.
//
// Memory layout: one 64-byte line per reader slot so that PMDs reporting
// quiescence never share a cache line.
#ifndef FLOWCLASS_DATAPLANE_DPDK_RULE_PUBLISHER_H_
#define FLOWCLASS_DATAPLANE_DPDK_RULE_PUBLISHER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "dataplane/rules/rule_table.h"

namespace flowclass {

class AclClassifier;

// A rule table at a generation: the dataplane's one table (written in place
// by the control thread, read by PMDs at the generation they installed; see
// RuleTable's concurrent readers) or any table no writer changes.  The
// table outlives every view of it that a reader may hold.
struct PublishedTable {
  PublishedTable(const RuleTable* t, uint64_t gen) : table(t), generation(gen) {}
  const RuleTable* table;
  uint64_t generation;
  // What the batches that produced `generation` changed relative to
  // `base_generation` (for targeted revalidation; a group commit publishes
  // several batches at once); empty for the initial table.
  RuleChangeSet changes;
  bool has_changes = false;
  uint64_t base_generation = 0;
  // pipeline.kind acl: the classifier compiled from the table at
  // `generation` (what the PMDs install; they do not read `table`).  It
  // outlives every view of it a reader may hold.  nullptr: no rule (every
  // key misses).
  const AclClassifier* acl = nullptr;
};

class RulePublisher {
 public:
  explicit RulePublisher(int num_readers,
                         std::unique_ptr<PublishedTable> initial)
      : slots_(static_cast<size_t>(num_readers)),
        published_(initial.release()) {}
  ~RulePublisher() { delete published_.load(std::memory_order_acquire); }
  RulePublisher(const RulePublisher&) = delete;
  RulePublisher& operator=(const RulePublisher&) = delete;

  int num_readers() const { return static_cast<int>(slots_.size()); }

  // ---- writer (one thread at a time) ----
  const PublishedTable* Current() const {
    return published_.load(std::memory_order_acquire);
  }
  // Publishes `next` and returns once no reader can still use the old version,
  // which is handed back to the caller (to drop).  `waited_readers`, if not null, gets
  // how many reader slots were online and had to be waited for.
  std::unique_ptr<PublishedTable> PublishAndWait(
      std::unique_ptr<PublishedTable> next, int* waited_readers = nullptr) {
    WaitResult w;
    std::unique_ptr<PublishedTable> old = PublishWithDeadline(
        std::move(next), std::chrono::steady_clock::time_point::max(), &w);
    if (waited_readers) *waited_readers = w.waited;
    return old;
  }

  struct WaitResult {
    int waited = 0;          // online reader slots that had to be waited for
    int lagging_reader = -1;  // first slot still behind at the deadline; -1: none
    bool complete() const { return lagging_reader < 0; }
  };
  // Publishes `next` and waits until every online reader reported it or
  // `deadline` passed (then `out->lagging_reader` names the first slot that
  // had not; the others are not waited for any further).  Hands back the
  // previous view: when the wait was not complete a lagging reader may still
  // read it, so the caller keeps it (and everything older) alive until
  // LaggingReader(next's generation) is -1.
  std::unique_ptr<PublishedTable> PublishWithDeadline(
      std::unique_ptr<PublishedTable> next, std::chrono::steady_clock::time_point deadline,
      WaitResult* out) {
    const uint64_t gen = next->generation;
    const PublishedTable* old =
        published_.exchange(next.release(), std::memory_order_seq_cst);
    const bool bounded = deadline != std::chrono::steady_clock::time_point::max();
    *out = WaitResult{};
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      bool counted = false;
      int spins = 0;
      while (Behind(s, gen)) {
        if (!counted) {
          counted = true;
          ++out->waited;
        }
        // A PMD passes a loop iteration in microseconds; yield after a short
        // spin so a shared test machine stays usable.
        if (++spins > 64) {
          std::this_thread::yield();
          if (bounded && (spins & 255) == 0 && std::chrono::steady_clock::now() >= deadline) {
            out->lagging_reader = static_cast<int>(i);
            break;
          }
        }
      }
      if (out->lagging_reader >= 0) break;
    }
    return std::unique_ptr<PublishedTable>(const_cast<PublishedTable*>(old));
  }
  // The first online reader slot that has not reported `generation` yet, or
  // -1 (then a grace period for every view older than `generation` is over).
  // Does not wait.
  int LaggingReader(uint64_t generation) const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (Behind(slots_[i], generation)) return static_cast<int>(i);
    return -1;
  }

  // ---- reader i (its own thread only) ----
  const PublishedTable* Load() const {
    return published_.load(std::memory_order_seq_cst);
  }
  void Quiescent(int i, uint64_t generation) {
    slots_[i].generation.store(generation, std::memory_order_release);
  }
  void Online(int i) {
    slots_[i].online.store(true, std::memory_order_seq_cst);
  }
  void Offline(int i) {
    slots_[i].online.store(false, std::memory_order_seq_cst);
  }
  uint64_t ReaderGeneration(int i) const {
    return slots_[i].generation.load(std::memory_order_relaxed);
  }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> generation{0};
    std::atomic<bool> online{false};
  };
  static_assert(sizeof(Slot) == 64, "one reader slot per cache line");
  static bool Behind(const Slot& s, uint64_t gen) {
    return s.online.load(std::memory_order_seq_cst) &&
           s.generation.load(std::memory_order_acquire) < gen;
  }

  std::vector<Slot> slots_;
  std::atomic<const PublishedTable*> published_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPDK_RULE_PUBLISHER_H_
