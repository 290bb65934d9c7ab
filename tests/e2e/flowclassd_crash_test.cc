// Rules survive crashes: a real flowclassd with a rule store (store.path in
// a temp dir, net_pcap vdevs, gRPC on 127.0.0.1:0) is killed with SIGKILL at
// random moments while a client streams batches and records every ack
// (a few SIGTERM restarts mixed in).  After every restart the restored rule
// set and generation must be exactly those of the acknowledged batches plus,
// at most, batches that were in flight, whole: the state of some generation
// between the last ack and the last batch sent.  Bounded: at most 90 cycles
// and 170 s; it fails if fewer than 50 kills landed while a stream ran.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/rpc/flowclass_client.h"
#include "dataplane/rules/rule_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rule_convert.h"
#include "tests/common/ack_reader.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

const char* const kDaemon = FLOWCLASS_BINARY_DIR "/server/flowclassd";

// Batch j (j >= 1, generation j on an empty store): inserts ids 3j, 3j+1,
// 3j+2; from j = 2 on also deletes 3(j-1) and replaces 3(j-1)+1 (cookie j).
Rule CrashRule(uint64_t id, uint64_t cookie) {
  absl::StatusOr<Rule> r = ParseNativeRule(
      absl::StrCat("id=", id, ",priority=", 1 + id % 9, ",cookie=", cookie, ",udp,nw_dst=10.",
                   (id / 256) % 256, ".", id % 256, ".0/24,tp_dst=", 1000 + id % 50,
                   ",actions=output:2"),
      1);
  return r.ok() ? *r : Rule{};
}

v1::ApplyRulesRequest CrashBatch(uint64_t j) {
  v1::ApplyRulesRequest b;
  b.set_batch_id(j);
  for (uint64_t k = 0; k < 3; ++k)
    RuleToProto(CrashRule(3 * j + k, 0), b.add_ops()->mutable_insert());
  if (j >= 2) {
    b.add_ops()->set_delete_id(3 * (j - 1));
    RuleToProto(CrashRule(3 * (j - 1) + 1, j), b.add_ops()->mutable_replace());
  }
  return b;
}

// The rule set at generation g (native text, sorted by id).
std::vector<std::string> StateAt(uint64_t g) {
  std::vector<std::string> out;
  for (uint64_t j = 1; j < g; ++j) {
    out.push_back(CrashRule(3 * j + 1, j + 1).ToString());
    out.push_back(CrashRule(3 * j + 2, 0).ToString());
  }
  if (g >= 1)
    for (uint64_t k = 0; k < 3; ++k) out.push_back(CrashRule(3 * g + k, 0).ToString());
  std::sort(out.begin(), out.end());
  return out;
}

std::string Config(const TempDir& dir) {
  return absl::StrCat(R"(
eal:
  hugepages: false
  memory_mb: 256
  pci: false
  lcore_map: "0@0,1@1"
  log_level: error
pmd:
  lcores: [1]
  idle_sleep_us: 200
mempool:
  mbufs: 2047
ports:
  - number: 1
    device: net_pcap0
    args: "rx_pcap=)", dir.File("in.pcap"), R"("
  - number: 2
    device: net_pcap1
    args: "tx_pcap=/dev/null"
    poll: false
stats:
  interval_ms: 0
  final: false
store:
  path: )", dir.File("store"), R"(
grpc:
  address: 127.0.0.1
  port: 0
  plaintext: true
)");
}

std::string WaitForGrpc(ChildProcess& d, double seconds) {
  return WaitForOutputAfter(d, "flowclassd: grpc listening on ", seconds);
}

TEST(FlowclassdCrashTest, RestoredStateIsExactlyTheAckedBatchesPlusWholeOnesInFlight) {
  TempDir dir("flowclass_crash");
  WriteFile(dir.File("in.pcap"), "");
  WritePcap(dir.File("in.pcap"), {std::vector<uint8_t>(64, 0)});
  WriteFile(dir.File("d.yaml"), Config(dir));
  std::mt19937 rng(static_cast<uint32_t>(getpid()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(170);
  uint64_t acked = 0;  // generation of the last OK ack ever received
  uint64_t sent_before = 0;  // the last batch written before the last kill
  uint64_t prev_boot = 0;
  int kills = 0, terms = 0, cycles = 0;
  const std::string prefix = absl::StrCat("fccrash_", getpid());
  while (kills < 50 && cycles < 90 && std::chrono::steady_clock::now() < deadline) {
    ++cycles;
    // The child truncates its output file only once it runs: remove the last
    // daemon's first, or its "listening" line could be read as this one's.
    std::remove(dir.File("stdout.txt").c_str());
    EalDaemonProcess d(kDaemon, {"-c", dir.File("d.yaml")}, prefix, dir.File("stdout.txt"));
    const std::string target = WaitForGrpc(d, 30);
    ASSERT_FALSE(target.empty()) << "cycle " << cycles << ":\n" << d.Output();
    ClientOptions o;
    o.target = target;
    o.plaintext = true;
    o.timeout = std::chrono::milliseconds(20000);
    auto client = FlowclassClient::Connect(o);
    ASSERT_TRUE(client.ok()) << client.status();

    // ---- what was restored ----
    absl::StatusOr<v1::GetStatsResponse> stats = (*client)->GetStats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    const uint64_t restored = stats->generation();
    ASSERT_GE(restored, acked) << "cycle " << cycles << ": an acknowledged batch was lost";
    ASSERT_LE(restored, std::max(acked, sent_before))
        << "cycle " << cycles << ": a batch never sent was restored";
    EXPECT_EQ(stats->server().restored_generation(), restored);
    EXPECT_TRUE(stats->server().durable());
    EXPECT_NE(stats->server().boot_id(), prev_boot) << "the boot id must change per start";
    prev_boot = stats->server().boot_id();
    absl::StatusOr<std::vector<v1::Rule>> listed = (*client)->ListRules();
    ASSERT_TRUE(listed.ok()) << listed.status();
    std::vector<std::string> got;
    for (const v1::Rule& r : *listed) {
      Rule n;
      ASSERT_TRUE(RuleFromProto(r, &n).ok());
      got.push_back(n.ToString());
    }
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got, StateAt(restored))
        << "cycle " << cycles << ": the rule set is not that of generation " << restored;
    acked = restored;  // the batches in flight that survived are now the base

    // ---- stream batches, record acks, kill at a random moment ----
    std::atomic<uint64_t> last_ack{restored}, last_sent{restored};
    std::atomic<bool> bad_ack{false};
    grpc::ClientContext ctx;
    auto stream = (*client)->stub()->ApplyRules(&ctx);
    std::thread streamer([&] {
      uint64_t next = restored + 1;
      uint64_t outstanding = 0;
      for (;;) {
        while (outstanding < 4) {
          if (!stream->Write(CrashBatch(next))) return;
          last_sent.store(next);
          ++next;
          ++outstanding;
        }
        v1::BatchAck ack;
        if (!ReadAck(stream.get(), &ack)) return;
        if (ack.status().code() != 0 || ack.generation() != ack.batch_id()) {
          bad_ack.store(true);
          return;
        }
        last_ack.store(ack.generation());
        --outstanding;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 400));
    const bool term = cycles % 9 == 0;
    if (term) {
      d.Signal(SIGTERM);
      EXPECT_EQ(d.Wait(30), 0) << d.Output();
      ++terms;
    } else {
      const bool was_running = d.Running();
      d.Signal(SIGKILL);
      d.Wait(30);
      if (was_running && last_sent.load() > restored) ++kills;
    }
    ctx.TryCancel();
    streamer.join();
    ASSERT_FALSE(bad_ack.load()) << "a batch was rejected";
    acked = last_ack.load();
    sent_before = last_sent.load();
  }
  // One last start: the final state is checked like the others.
  {
    std::remove(dir.File("stdout.txt").c_str());
    EalDaemonProcess d(kDaemon, {"-c", dir.File("d.yaml")}, prefix, dir.File("stdout.txt"));
    ASSERT_FALSE(WaitForGrpc(d, 30).empty()) << d.Output();
    d.Signal(SIGTERM);
    EXPECT_EQ(d.Wait(30), 0);
  }
  std::printf("crash test: %d cycles, %d SIGKILLs during a stream, %d SIGTERMs, generation %llu\n",
              cycles, kills, terms, static_cast<unsigned long long>(acked));
  EXPECT_GE(kills, 50) << "only " << kills << " kills in " << cycles << " cycles";
  EXPECT_GT(acked, 50u) << "batches were acknowledged";
}

}  // namespace
}  // namespace flowclass
