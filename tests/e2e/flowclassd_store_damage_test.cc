// A damaged rule store through a real flowclassd (docs/store.md, "What a
// damaged store does"): a store written by the daemon (12 acknowledged
// batches over gRPC, then SIGTERM; and one more batch, then SIGKILL, which
// leaves rules.db-wal behind) is damaged in each way — truncated, bytes
// flipped in rule records, in the SQLite header and in b-tree pages,
// rules.db or rules.db-wal deleted or torn — and the daemon is started on
// it.  Each start either refuses with exit code 10 and a message naming
// rules.db and what was wrong, or serves exactly the rule set of some
// acknowledged generation (never a signal, never a half-applied set); with
// --recover-to-last-consistent it serves the last consistent state, and a
// strict restart then serves the same.  Each daemon has its own
// --file-prefix, gRPC on 127.0.0.1:0, and is stopped by PID.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/rpc/flowclass_client.h"
#include "dataplane/rules/rule_format.h"
#include "dataplane/rules/rule_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rule_convert.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const char* const kDaemon = FLOWCLASS_BINARY_DIR "/server/flowclassd";
constexpr int kAcked = 12;  // batches acknowledged before the clean stop
constexpr int kStoreExit = 10;

Rule MakeRule(uint64_t id, int priority, uint64_t cookie) {
  absl::StatusOr<Rule> r = ParseNativeRule(
      absl::StrCat("id=", id, ",priority=", priority, ",cookie=", cookie, ",udp,nw_dst=10.",
                   id % 200, ".", id / 200 % 200, ".0/24,tp_dst=", 2000 + id % 97,
                   ",actions=output:2"),
      1);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : Rule{};
}

// Batch j (generation j on an empty store): inserts ids 10j..10j+2 (cookie
// 70000+j, a marker only batch j's row holds); from j = 2 on also deletes
// 10(j-1) and replaces 10(j-1)+1.
std::vector<RuleOp> BatchOps(int j) {
  std::vector<RuleOp> ops;
  for (int k = 0; k < 3; ++k) ops.push_back(RuleOp::Insert(MakeRule(10 * j + k, 10, 70000 + j)));
  if (j >= 2) {
    ops.push_back(RuleOp::Delete(10 * (j - 1)));
    ops.push_back(RuleOp::Replace(MakeRule(10 * (j - 1) + 1, 500 + j, 0)));
  }
  return ops;
}

// The bytes only the rules batch j inserted carry: their cookie as a store
// record holds it (a varint, server/store/internal/store_records.cc).
std::string Marker(int j) {
  std::string s;
  for (uint64_t c = 70000 + static_cast<uint64_t>(j); ; c >>= 7) {
    if (c < 0x80) {
      s.push_back(static_cast<char>(c));
      return s;
    }
    s.push_back(static_cast<char>((c & 0x7f) | 0x80));
  }
}

// The rule set at generation g (native text, sorted), from a RuleTable fed
// batches 1..g.
std::vector<std::string> StateAt(int g) {
  RuleTable t;
  for (int j = 1; j <= g; ++j) {
    absl::StatusOr<BatchResult> r = t.ApplyBatch(BatchOps(j));
    EXPECT_TRUE(r.ok()) << r.status();
  }
  std::vector<std::string> out;
  for (const Rule* r : t.Rules()) out.push_back(r->ToString());
  std::sort(out.begin(), out.end());
  return out;
}

std::string Config(const TempDir& dir) {
  return absl::StrCat(R"(
eal: {hugepages: false, memory_mb: 128, pci: false, lcore_map: "0@0,1@1", log_level: error}
pmd: {lcores: [1], idle_sleep_us: 500}
mempool: {mbufs: 1023}
ports:
  - {number: 1, device: net_pcap0, args: "rx_pcap=)", dir.File("in.pcap"), R"("}
  - {number: 2, device: net_pcap1, args: "tx_pcap=/dev/null", poll: false}
stats: {interval_ms: 0, final: false}
grpc: {address: 127.0.0.1, port: 0, plaintext: true}
)");
}

// What one start of flowclassd on a store did.
struct Outcome {
  int code = -1;           // exit code (-2: a signal); 0 with `started`
  bool started = false;    // served gRPC (then stopped with SIGTERM)
  std::string output;      // stdout + stderr
  int generation = -1;     // served, when started
  std::vector<std::string> rules;
};

class StoreDamageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>("flowclass_store_damage");
    WritePcap(dir_->File("in.pcap"), {std::vector<uint8_t>(64, 0)});
    WriteFile(dir_->File("d.yaml"), Config(*dir_));
  }
  static void TearDownTestSuite() { dir_.reset(); }

  // Starts flowclassd on `store` with `extra` arguments; when it serves,
  // reads the generation and the rule set over gRPC, then stops it by PID.
  // With `kill`, SIGKILL instead of SIGTERM, `kill_after_ms` after the last
  // ack.
  static Outcome Start(const std::string& store, const std::vector<std::string>& extra = {},
                       const std::vector<int>& apply = {}, bool kill = false,
                       int kill_after_ms = 0) {
    Outcome o;
    std::vector<std::string> args = {"-c", dir_->File("d.yaml"), "--store", store};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string out = dir_->File(absl::StrCat("out", ++runs_, ".txt"));
    EalDaemonProcess d(kDaemon, args, absl::StrCat("fcdamage_", getpid()), out);
    std::string target;
    const auto end = Clock::now() + std::chrono::seconds(30);
    while (target.empty() && Clock::now() < end) {
      for (absl::string_view line : absl::StrSplit(d.Output(), '\n')) {
        constexpr absl::string_view kTag = "flowclassd: grpc listening on ";
        if (line = LogMessageFrom(line, kTag); !line.empty()) {
          line.remove_prefix(kTag.size());
          target = std::string(line.substr(0, line.find(' ')));
        }
      }
      if (target.empty() && !d.Running()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (target.empty()) {
      o.code = d.Wait(30);
      o.output = d.Output();
      return o;
    }
    o.started = true;
    ClientOptions co;
    co.target = target;
    co.plaintext = true;
    co.timeout = std::chrono::milliseconds(20000);
    absl::StatusOr<std::unique_ptr<FlowclassClient>> c = FlowclassClient::Connect(co);
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) {
      for (int j : apply) {
        v1::ApplyRulesRequest b;
        b.set_batch_id(static_cast<uint64_t>(j));
        for (const RuleOp& op : BatchOps(j)) RuleOpToProto(op, b.add_ops());
        absl::StatusOr<v1::BatchAck> a = (*c)->ApplyBatch(b);
        EXPECT_TRUE(a.ok()) << a.status();
        if (a.ok()) {
          EXPECT_EQ(AckStatus(*a), absl::OkStatus());
          EXPECT_EQ(a->generation(), static_cast<uint64_t>(j)) << "batch " << j;
        }
      }
      absl::StatusOr<v1::GetStatsResponse> s = (*c)->GetStats();
      EXPECT_TRUE(s.ok()) << s.status();
      if (s.ok()) o.generation = static_cast<int>(s->generation());
      absl::StatusOr<std::vector<v1::Rule>> listed = (*c)->ListRules();
      EXPECT_TRUE(listed.ok()) << listed.status();
      if (listed.ok())
        for (const v1::Rule& r : *listed) {
          Rule n;
          EXPECT_TRUE(RuleFromProto(r, &n).ok());
          o.rules.push_back(n.ToString());
        }
      std::sort(o.rules.begin(), o.rules.end());
      c->reset();  // closed before the stop (an open channel holds it up 2 s)
    }
    if (kill) std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms));
    d.Signal(kill ? SIGKILL : SIGTERM);
    o.code = d.Wait(30);
    o.output = d.Output();
    return o;
  }

  // The baselines, written once by real daemons: "clean" (batches
  // 1..kAcked, SIGTERM: rules.db alone) and "killed" (clean plus batch
  // kAcked+1, then SIGKILL before the store's checkpoint, which
  // store.checkpoint_idle_ms holds off for an hour: batch kAcked+1 is in
  // rules.db-wal only).
  static const fs::path& Baseline(const std::string& which) {
    static fs::path clean, killed;
    if (clean.empty()) {
      clean = dir_->File("baseline_clean");
      std::vector<int> all;
      for (int j = 1; j <= kAcked; ++j) all.push_back(j);
      const Outcome o = Start(clean.string(), {}, all);
      EXPECT_TRUE(o.started) << o.output;
      EXPECT_EQ(o.code, 0) << o.output;
      EXPECT_EQ(o.generation, kAcked);
      EXPECT_EQ(o.rules, StateAt(kAcked));
      EXPECT_FALSE(fs::exists(clean / "rules.db-wal")) << "a clean stop checkpoints the WAL";
      killed = dir_->File("baseline_killed");
      fs::copy(clean, killed);
      const Outcome k = Start(killed.string(), {"--set", "store.checkpoint_idle_ms=3600000"},
                              {kAcked + 1}, /*kill=*/true);
      EXPECT_TRUE(k.started) << k.output;
      EXPECT_EQ(k.code, -2) << "SIGKILL";
      EXPECT_EQ(k.generation, kAcked + 1);
      EXPECT_TRUE(fs::exists(killed / "rules.db-wal"));
      EXPECT_GT(fs::file_size(killed / "rules.db-wal"), 0u);
    }
    return which == "clean" ? clean : killed;
  }

  // A fresh copy of a baseline store; returns its directory.
  static std::string Copy(const std::string& which) {
    const fs::path base = Baseline(which);
    const fs::path to = dir_->File(absl::StrCat("case", ++cases_));
    fs::copy(base, to);
    return to.string();
  }

  static std::string Db(const std::string& store) { return store + "/rules.db"; }
  static std::string Wal(const std::string& store) { return store + "/rules.db-wal"; }

  // Refused: exit 10, no signal, stderr names rules.db and `what`, and the
  // damaged files are left exactly as they were.
  static void ExpectRefused(const std::string& store, const std::vector<std::string>& what,
                            const std::vector<std::string>& extra = {}) {
    const std::string db = ReadFile(Db(store)), wal = ReadFile(Wal(store));
    const Outcome o = Start(store, extra);
    EXPECT_FALSE(o.started) << o.output;
    EXPECT_EQ(o.code, kStoreExit) << o.output;
    EXPECT_THAT(o.output, HasSubstr(absl::StrCat("flowclassd: store error: ", Db(store))));
    for (const std::string& w : what) EXPECT_THAT(o.output, HasSubstr(w));
    EXPECT_EQ(ReadFile(Db(store)), db) << "refusing to start changed rules.db";
    EXPECT_EQ(ReadFile(Wal(store)), wal) << "refusing to start changed rules.db-wal";
    std::printf("refused: %s", o.output.c_str());
  }

  // Serves exactly the rule set of generation `g`.
  static void ExpectServes(const Outcome& o, int g) {
    ASSERT_TRUE(o.started) << o.output;
    EXPECT_EQ(o.code, 0) << o.output;
    EXPECT_EQ(o.generation, g) << o.output;
    EXPECT_EQ(o.rules, StateAt(g)) << "not the rule set of generation " << g;
  }

  // With --recover-to-last-consistent: starts, says what was dropped and
  // where the damaged file is kept, and serves the state of generation
  // `want` (-1: of some generation <= `most`, whichever it reports); with
  // `restart`, a strict restart then serves the same.  Returns the
  // generation.
  static int ExpectRecovers(const std::string& store, int want, int most,
                            const std::string& what = "", bool restart = false) {
    const Outcome o = Start(store, {"--recover-to-last-consistent"});
    EXPECT_TRUE(o.started) << o.output;
    if (!o.started) return -1;
    EXPECT_EQ(o.code, 0) << o.output;
    EXPECT_THAT(o.output, HasSubstr(absl::StrCat("flowclassd: warning: rule store ", Db(store),
                                                 " was damaged; recovered:")));
    EXPECT_THAT(o.output, HasSubstr("flowclassd:   the damaged file was kept as " + store +
                                    "/rules.damaged-"));
    if (!what.empty()) {
      EXPECT_THAT(o.output, HasSubstr(what));
    }
    if (want >= 0) {
      EXPECT_EQ(o.generation, want) << o.output;
    } else {
      EXPECT_GE(o.generation, 0);
      EXPECT_LE(o.generation, most) << o.output;
    }
    EXPECT_EQ(o.rules, StateAt(o.generation)) << "half-applied: not the rule set of generation "
                                              << o.generation;
    bool kept = false;
    for (const auto& e : fs::directory_iterator(store))
      kept = kept || absl::StartsWith(e.path().filename().string(), "rules.damaged-");
    EXPECT_TRUE(kept) << "no rules.damaged-* kept in " << store;
    std::printf("recovered to generation %d:\n%s", o.generation, o.output.c_str());
    if (restart) ExpectServes(Start(store), o.generation);
    return o.generation;
  }

  // Flips one bit in every copy of `needle` in `file` (a b-tree page may
  // keep a stale copy in its free space; the live one is among them).
  static void FlipText(const std::string& file, const std::string& needle) {
    std::string data = ReadFile(file);
    size_t n = 0;
    for (size_t p = data.find(needle); p != std::string::npos; p = data.find(needle, p + 1), ++n)
      data[p + needle.size() - 1] ^= 0x01;
    ASSERT_GT(n, 0u) << needle << " not in " << file;
    WriteFile(file, data);
  }
  static void FlipAt(const std::string& file, size_t at, uint8_t mask) {
    std::string data = ReadFile(file);
    ASSERT_LT(at, data.size());
    data[at] = static_cast<char>(data[at] ^ mask);
    WriteFile(file, data);
  }
  static void TruncateTo(const std::string& file, size_t len) {
    ASSERT_EQ(::truncate(file.c_str(), static_cast<off_t>(len)), 0) << file;
  }

  static std::unique_ptr<TempDir> dir_;
  static int runs_;
  static int cases_;
};
std::unique_ptr<TempDir> StoreDamageTest::dir_;
int StoreDamageTest::runs_ = 0;
int StoreDamageTest::cases_ = 0;

// ---------------------------------------------------------------- rules.db

TEST_F(StoreDamageTest, UndamagedStoresServeEveryAcknowledgedBatch) {
  ExpectServes(Start(Copy("clean")), kAcked);
  // The -wal a SIGKILL left is replayed: batch kAcked+1 was acknowledged.
  ExpectServes(Start(Copy("killed")), kAcked + 1);
}

TEST_F(StoreDamageTest, TruncatedToZero) {
  const std::string s = Copy("clean");
  TruncateTo(Db(s), 0);
  ExpectRefused(s, {"rules.db: the file is empty (0 bytes): truncated",
                    "(the store was left as it is; start with "
                    "store.recover_to_last_consistent: true or --recover-to-last-consistent"});
  ExpectRecovers(s, 0, 0, "nothing consistent was left: the store starts empty at generation 0",
                 /*restart=*/true);
}

TEST_F(StoreDamageTest, TruncatedInsideTheHeader) {
  const std::string s = Copy("clean");
  TruncateTo(Db(s), 50);
  ExpectRefused(s, {"rules.db: cannot open: "});
  ExpectRecovers(s, 0, 0);
}

TEST_F(StoreDamageTest, TruncatedByPages) {
  // By the last page (16 KiB), and mid-page: SQLite opens no file shorter
  // than its header says.
  for (bool mid_page : {false, true}) {
    SCOPED_TRACE(mid_page ? "mid-page" : "by one page");
    const std::string s = Copy("clean");
    const size_t size = fs::file_size(Db(s));
    ASSERT_GT(size, 16384u * 3);
    TruncateTo(Db(s), mid_page ? size / 2 + 1000 : size - 16384u);
    ExpectRefused(s, {"rules.db: cannot open: database disk image is malformed"});
    ExpectRecovers(s, -1, kAcked);
  }
}

TEST_F(StoreDamageTest, FlippedByteInARuleRecord) {
  // The rules batch 7 inserted: its row fails its checksum; recovery keeps
  // batches 1..6.
  const std::string s = Copy("clean");
  FlipText(Db(s), Marker(7));
  ExpectRefused(s, {"rules.db: batch generation 7: checksum mismatch (stored 0x"});
  ExpectRecovers(s, 6, 6, "batches from generation 7 on were dropped; the state is generation 6",
                 /*restart=*/true);
}

TEST_F(StoreDamageTest, FlippedByteInTheNewestRecord) {
  const std::string s = Copy("clean");
  FlipText(Db(s), Marker(kAcked));
  ExpectRefused(s, {absl::StrCat("rules.db: batch generation ", kAcked, ": checksum mismatch")});
  ExpectRecovers(s, kAcked - 1, kAcked - 1);
}

TEST_F(StoreDamageTest, FlippedByteInTheSnapshot) {
  // A recovery writes the rule set as a snapshot: damage that one.
  const std::string s = Copy("clean");
  FlipText(Db(s), Marker(10));
  ExpectRefused(s, {"rules.db: batch generation 10: checksum mismatch"});
  ExpectRecovers(s, 9, 9, "", /*restart=*/true);  // now a snapshot at generation 9, no batches
  FlipText(Db(s), Marker(9));
  ExpectRefused(s, {"rules.db: snapshot chunk 0 (generation 9): checksum mismatch"});
  ExpectRecovers(s, 0, 0);
}

TEST_F(StoreDamageTest, FlippedBytesInTheSqliteHeader) {
  struct Case {
    size_t at;
    uint8_t mask;
    std::vector<std::string> what;
  };
  const std::vector<Case> cases = {
      {0, 0x01, {"rules.db: cannot open: "}},                  // "SQLite format 3\0"
      {16, 0x01, {"rules.db: "}},                              // page size
      {68, 0x01, {"rules.db: not a flowclass rule store (SQLite application_id "}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.at);
    const std::string s = Copy("clean");
    FlipAt(Db(s), c.at, c.mask);
    ExpectRefused(s, c.what);
    ExpectRecovers(s, 0, 0);
  }
}

TEST_F(StoreDamageTest, FlippedByteInTheSchema) {
  // The CREATE TABLE text on page 1 names a column the store reads no more:
  // damage (not an internal error), so recovery can start from what is left
  // (no batch row can be read: the snapshot, empty at generation 0) and says
  // what it dropped.
  const std::string s = Copy("clean");
  FlipText(Db(s), "batch (generation INTEGER PRIMARY KEY, flags");  // flags -> flagr
  ExpectRefused(s, {"rules.db: SELECT generation, flags, ops, body, crc FROM batch ORDER BY "
                    "generation: no such column: flags (the store's schema is damaged)",
                    "(the store was left as it is; start with"});
  ExpectRecovers(s, 0, 0, "batches from generation 1 on were dropped; the state is generation 0");
}

TEST_F(StoreDamageTest, FlippedBytesInBtreePages) {
  // Page 2 onward (16 KiB pages): the b-tree page type byte and the cell
  // count of each page.
  const std::string base = Copy("clean");
  const size_t pages = fs::file_size(Db(base)) / 16384;
  ASSERT_GE(pages, 3u);
  for (size_t page = 1; page < pages; ++page) {
    for (size_t off : {size_t{0}, size_t{3}}) {
      SCOPED_TRACE(absl::StrCat("page ", page + 1, " offset ", off));
      const std::string s = Copy("clean");
      FlipAt(Db(s), page * 16384 + off, 0x04);
      ExpectRefused(s, {});
      ExpectRecovers(s, -1, kAcked);
    }
  }
}

// Random flips of bytes that hold something (not the zeros of unused
// space) in rules.db: each start serves the full state (SQLite or the store
// never reads that byte) or refuses with exit 10 naming rules.db; never a
// signal, never another state.  Recovery gives the state of some
// generation.
TEST_F(StoreDamageTest, RandomFlipsServeTheFullStateOrRefuse) {
  std::mt19937_64 rng(20261203);
  const std::string pristine = ReadFile(Db(Copy("clean")));
  std::vector<size_t> used;
  for (size_t i = 0; i < pristine.size(); ++i)
    if (pristine[i] != 0) used.push_back(i);
  ASSERT_GT(used.size(), 1000u);
  constexpr int kFlips = 4;
  int refused = 0;
  for (int i = 0; i < kFlips; ++i) {
    const size_t at = used[rng() % used.size()];
    SCOPED_TRACE(absl::StrCat("flip at ", at, " (page ", at / 16384 + 1, ")"));
    const std::string s = Copy("clean");
    FlipAt(Db(s), at, static_cast<uint8_t>(1 + rng() % 255));
    const Outcome o = Start(s);
    ASSERT_NE(o.code, -2) << "a signal:\n" << o.output;
    if (o.started) {
      ExpectServes(o, kAcked);
      continue;
    }
    ++refused;
    EXPECT_EQ(o.code, kStoreExit) << o.output;
    EXPECT_THAT(o.output, HasSubstr(absl::StrCat("flowclassd: store error: ", Db(s))));
    ExpectRecovers(s, -1, kAcked);
  }
  std::printf("%d of %d random flips refused\n", refused, kFlips);
  EXPECT_GE(refused, kFlips / 2) << "the flips should mostly hit what is read";
}

// ------------------------------------------------- files deleted, the -wal

TEST_F(StoreDamageTest, DatabaseDeletedWithItsWalLeft) {
  const std::string s = Copy("killed");
  fs::remove(Db(s));
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--recover-to-last-consistent"}}) {
    const Outcome o = Start(s, extra);
    EXPECT_FALSE(o.started) << o.output;
    EXPECT_EQ(o.code, kStoreExit) << o.output;
    EXPECT_THAT(o.output, HasSubstr(absl::StrCat("flowclassd: store error: ", Db(s),
                                                 " is missing but ", Db(s),
                                                 "-wal exists (the database was removed)")));
    EXPECT_FALSE(fs::exists(Db(s))) << "never a new database beside an old -wal";
  }
}

TEST_F(StoreDamageTest, WalDeletedTornOrFlipped) {
  // The -wal holds the last group, not yet checkpointed: losing or damaging
  // it loses that group, whole (docs/store.md, "Writing"), never more, never
  // half of it.
  {
    const std::string s = Copy("killed");
    fs::remove(Wal(s));
    ExpectServes(Start(s), kAcked);
  }
  const size_t wal = fs::file_size(Wal(Copy("killed")));
  {
    SCOPED_TRACE("-wal torn in half");
    const std::string s = Copy("killed");
    TruncateTo(Wal(s), wal / 2);
    ExpectServes(Start(s), kAcked);
  }
  // A page of the first frame, the last frame.
  for (size_t at : {size_t{32 + 24 + 5000}, wal - 7}) {
    SCOPED_TRACE(absl::StrCat("-wal byte ", at, " flipped"));
    const std::string s = Copy("killed");
    FlipAt(Wal(s), at, 0x20);
    ExpectServes(Start(s), kAcked);
  }
  // With the default store.checkpoint_idle_ms (50 ms), a kill 0.5 s after
  // the ack finds the group checkpointed and the -wal emptied: deleting it
  // loses nothing.
  {
    SCOPED_TRACE("killed after the idle checkpoint");
    const std::string s = Copy("clean");
    const Outcome k = Start(s, {}, {kAcked + 1}, /*kill=*/true, /*kill_after_ms=*/500);
    EXPECT_EQ(k.generation, kAcked + 1);
    EXPECT_TRUE(!fs::exists(Wal(s)) || fs::file_size(Wal(s)) == 0) << fs::file_size(Wal(s));
    fs::remove(Wal(s));
    ExpectServes(Start(s), kAcked + 1);
  }
}

TEST_F(StoreDamageTest, DatabaseAndWalDeletedIsANewStore) {
  // Nothing is left to tell a lost store from a first start: a new empty
  // store at generation 0 (docs/store.md).
  const std::string s = Copy("killed");
  fs::remove(Db(s));
  fs::remove(Wal(s));
  const Outcome o = Start(s);
  ExpectServes(o, 0);
  EXPECT_THAT(o.output, HasSubstr("generation 0, 0 rules"));
}

TEST_F(StoreDamageTest, LeftoverTmpFileIsRemoved) {
  // rules.db.tmp of an unfinished creation or recovery beside a good store.
  const std::string s = Copy("clean");
  WriteFile(s + "/rules.db.tmp", "half a store");
  ExpectServes(Start(s), kAcked);
  EXPECT_FALSE(fs::exists(s + "/rules.db.tmp"));
}

TEST_F(StoreDamageTest, StoreInUseByAnotherDaemon) {
  const std::string s = Copy("clean");
  EalDaemonProcess first(kDaemon, {"-c", dir_->File("d.yaml"), "--store", s},
                         absl::StrCat("fcdamage1_", getpid()), dir_->File("first.txt"));
  const auto end = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < end && first.Running() &&
         !absl::StrContains(first.Output(), "flowclassd: grpc listening on "))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_THAT(first.Output(), HasSubstr("flowclassd: grpc listening on "));
  const Outcome o = Start(s);
  EXPECT_FALSE(o.started);
  EXPECT_EQ(o.code, kStoreExit) << o.output;
  EXPECT_THAT(o.output, HasSubstr(absl::StrCat("flowclassd: store error: ", Db(s))));
  EXPECT_THAT(o.output, HasSubstr("(the store is in use by another process)"));
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(30), 0) << first.Output();
  ExpectServes(Start(s), kAcked);  // the first one's store, untouched
}

}  // namespace
}  // namespace flowclass
