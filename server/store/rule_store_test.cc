// rule_store_test.cc — RuleStore: round trips, generations, compaction,
// reopening, and what each kind of damage to the files gives.
//
// The reference for every restored state is a RuleTable fed the same
// batches: the store must give back exactly its rule set and generation.
#include "server/store/rule_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/rules/rule_format.h"
#include "dataplane/rules/rule_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/internal/store_records.h"
#include "server/store/internal/wal_scan.h"
#include "tests/common/random_rules.h"
#include "tests/common/rule_builders.h"

namespace flowclass {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/rule_store_test.XXXXXX");
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string db() const { return path_ + "/rules.db"; }
  std::string wal() const { return path_ + "/rules.db-wal"; }

 private:
  std::string path_;
};

std::vector<Rule> TableRules(const RuleTable& t) {
  std::vector<Rule> v;
  for (const Rule* r : t.Rules()) v.push_back(*r);
  std::sort(v.begin(), v.end(), [](const Rule& a, const Rule& b) { return a.id < b.id; });
  return v;
}

std::unique_ptr<RuleStore> OpenOrDie(const std::string& dir, RuleStoreOptions o = {}) {
  absl::StatusOr<std::unique_ptr<RuleStore>> s = RuleStore::Open(dir, o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

absl::StatusOr<RuleStoreState> OpenAndLoad(const std::string& dir, RuleStoreOptions o = {}) {
  absl::StatusOr<std::unique_ptr<RuleStore>> s = RuleStore::Open(dir, o);
  if (!s.ok()) return s.status();
  return (*s)->Load();
}

// A writer that feeds a RuleTable and a store the same batches, and keeps
// the table's rule set after every generation.
class Writer {
 public:
  explicit Writer(uint64_t seed) : gen_(seed) { states_.push_back({}); }

  // Next valid batch that changes the table (a batch that changes nothing
  // gets no generation, as in the dataplane).
  std::vector<RuleOp> NextBatch(int n) {
    for (int tries = 0;; ++tries) {
      std::vector<RuleOp> ops = gen_.NextBatch(n, &live_, &next_id_);
      RuleTable probe(table_);
      absl::StatusOr<BatchResult> r = probe.ApplyBatch(ops);
      if (!r.ok() || tries > 100) {
        ADD_FAILURE() << "the generator's batch does not apply: " << r.status();
        std::abort();
      }
      if (r->generation != table_.generation()) return ops;
    }
  }
  // Applies to the table; returns the generation.
  uint64_t Apply(const std::vector<RuleOp>& ops) {
    absl::StatusOr<BatchResult> r = table_.ApplyBatch(ops);
    EXPECT_TRUE(r.ok()) << r.status();
    states_.push_back(TableRules(table_));
    EXPECT_EQ(table_.generation() + 1, states_.size());
    return table_.generation();
  }
  uint64_t ApplyDeleteAll() {
    table_.DeleteAll();
    live_.clear();
    states_.push_back(TableRules(table_));
    return table_.generation();
  }
  // Appends `batches` batches of `n` operations as one group.
  absl::Status AppendGroup(RuleStore& store, int batches, int n) {
    return Group(store, batches, n, /*settle=*/true);
  }
  // The same, committed but not checkpointed (RuleStore::CommitGroup).
  absl::Status CommitGroup(RuleStore& store, int batches, int n) {
    return Group(store, batches, n, /*settle=*/false);
  }
  uint64_t generation() const { return table_.generation(); }
  const std::vector<Rule>& state(uint64_t g) const { return states_.at(g); }
  const std::vector<Rule>& state() const { return states_.back(); }
  RandomRuleGen& gen() { return gen_; }

 private:
  absl::Status Group(RuleStore& store, int batches, int n, bool settle) {
    std::vector<std::vector<RuleOp>> ops;
    std::vector<StoreBatch> group;
    std::vector<uint64_t> gens;
    for (int i = 0; i < batches; ++i) {
      ops.push_back(NextBatch(n));
      gens.push_back(Apply(ops.back()));
    }
    for (int i = 0; i < batches; ++i) group.push_back({gens[i], ops[i]});
    return settle ? store.AppendGroup(group) : store.CommitGroup(group);
  }

  RandomRuleGen gen_;
  RuleTable table_;
  std::vector<Rule> live_;
  uint64_t next_id_ = 1;
  std::vector<std::vector<Rule>> states_;  // [generation]
};

void ExpectState(const absl::StatusOr<RuleStoreState>& got, const Writer& w, uint64_t gen) {
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->generation, gen);
  EXPECT_EQ(got->rules, w.state(gen));
}

// Records carry zlib's CRC-32 (stores written before ISA-L computed it must
// load unchanged): the same value as zlib's crc32() over the tag, the fields
// (8 bytes each, little-endian) and the body, for bodies of every length
// class the vector code splits differently (0, short, around 16/64/256-byte
// folds, large).
TEST(RuleStoreTest, RecordCrcIsZlibCrc32) {
  std::mt19937_64 rng(7);
  for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{15}, size_t{16}, size_t{17},
                     size_t{63}, size_t{64}, size_t{65}, size_t{255}, size_t{256},
                     size_t{257}, size_t{4095}, size_t{40000}, size_t{1} << 20}) {
    std::string body(len, '\0');
    for (char& c : body) c = static_cast<char>(rng());
    const uint64_t f1 = rng(), f2 = rng();
    std::string all = "b";
    for (uint64_t f : {f1, f2})
      for (int i = 0; i < 8; ++i) all.push_back(static_cast<char>(f >> (8 * i)));
    all += body;
    const uLong want = crc32_z(crc32_z(0L, Z_NULL, 0),
                               reinterpret_cast<const Bytef*>(all.data()), all.size());
    EXPECT_EQ(store_internal::RecordCrc('b', {f1, f2}, body), static_cast<uint32_t>(want)) << len;
  }
}

TEST(RuleStoreTest, NewStoreIsEmptyAtGenerationZero) {
  TempDir dir;
  absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir.path() + "/sub/dir");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->generation, 0u);
  EXPECT_TRUE(s->rules.empty());
  EXPECT_EQ(s->info.path, dir.path() + "/sub/dir/rules.db");
  EXPECT_EQ(s->info.schema_version, 2);
  EXPECT_GT(s->info.created_unix_seconds, 0);
  EXPECT_FALSE(s->info.recovered);
  EXPECT_TRUE(fs::exists(dir.path() + "/sub/dir/rules.db"));
  EXPECT_FALSE(fs::exists(dir.path() + "/sub/dir/rules.db.tmp"));
}

TEST(RuleStoreTest, RoundTrip) {
  TempDir dir;
  Writer w(1);
  {
    auto store = OpenOrDie(dir.path());
    ASSERT_TRUE(store->Load().ok());
    ASSERT_TRUE(w.AppendGroup(*store, 3, 20).ok());
    ASSERT_TRUE(w.AppendGroup(*store, 1, 5).ok());
    EXPECT_EQ(store->generation(), w.generation());
  }
  absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir.path());
  ExpectState(s, w, w.generation());
  EXPECT_EQ(s->info.batches, 4u);
  EXPECT_FALSE(s->rules.empty());
}

TEST(RuleStoreTest, EveryOperationKindAndDeleteAllFirst) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_TRUE(store->Load().ok());
  Rule a = Ipv4SrcRule(5, 10, 0x0a000000, 8, Action::Output(1));
  a.cookie = 7;
  Rule b = Ipv4DstRule(9, 20, 0xc0a80000, 16, Action::Drop());
  b.cookie = 7;
  Rule c = Ipv4SrcRule(11, 30, 0x0b000000, 8, Action::Output(2));
  Rule a2 = a;
  a2.priority = 99;
  const std::vector<RuleOp> g1 = {RuleOp::Insert(a), RuleOp::Insert(b), RuleOp::Insert(c)};
  const std::vector<RuleOp> g2 = {RuleOp::Replace(a2), RuleOp::Delete(11)};
  const std::vector<RuleOp> g3 = {RuleOp::DeleteByCookie(7), RuleOp::Insert(c)};
  const std::vector<RuleOp> g4 = {RuleOp::Insert(a)};
  const std::vector<StoreBatch> group = {{1, g1}, {2, g2}, {3, g3}, {4, g4, true}};
  ASSERT_TRUE(store->AppendGroup(group).ok());
  store.reset();
  absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir.path());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->generation, 4u);
  EXPECT_EQ(s->rules, std::vector<Rule>({a}));  // batch 4 deleted everything first
}

// Stores written by an older flowclassd (schema version 1: native rule
// text) are read with every check and rewritten in the current version; the
// old file is kept.
TEST(RuleStoreTest, VersionOneStoreIsMigrated) {
  TempDir dir;
  Writer w(11);
  RuleStoreOptions v1;
  v1.testing_write_schema_version = 1;
  {
    auto store = OpenOrDie(dir.path(), v1);
    ASSERT_TRUE(store->Load().ok());
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(w.AppendGroup(*store, 2, 15).ok());
    ASSERT_TRUE(store->Compact().ok());  // a text snapshot and text batches after it
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(w.AppendGroup(*store, 2, 15).ok());
  }
  {
    // Text on disk: an older flowclassd's store.
    std::ifstream f(dir.db(), std::ios::binary);
    const std::string data((std::istreambuf_iterator<char>(f)), {});
    EXPECT_NE(data.find(",priority="), std::string::npos);
  }
  absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir.path());
  ExpectState(s, w, w.generation());
  EXPECT_EQ(s->info.schema_version, 2);
  EXPECT_EQ(s->info.migrated_from_version, 1);
  EXPECT_FALSE(s->info.recovered);
  ASSERT_FALSE(s->info.migrated_file.empty());
  EXPECT_THAT(s->info.migrated_file, HasSubstr(dir.path() + "/rules.v1-"));
  EXPECT_TRUE(fs::exists(s->info.migrated_file));
  // The kept file is still a valid version-1 store.
  {
    TempDir old;
    fs::copy_file(s->info.migrated_file, old.db());
    absl::StatusOr<RuleStoreState> o = OpenAndLoad(old.path(), v1);
    ExpectState(o, w, w.generation());
    EXPECT_EQ(o->info.schema_version, 1);
  }
  // Migrated once: now a version-2 store that appends and reloads.
  {
    auto store = OpenOrDie(dir.path());
    absl::StatusOr<RuleStoreState> again = store->Load();
    ExpectState(again, w, w.generation());
    EXPECT_EQ(again->info.migrated_from_version, 0);
    ASSERT_TRUE(w.AppendGroup(*store, 2, 15).ok());
  }
  ExpectState(OpenAndLoad(dir.path()), w, w.generation());
}

// The binary records are untrusted bytes: every truncation and every
// single-byte change either fails with DATA_LOSS or decodes to rules that
// pass ValidateRule; never a crash.
TEST(RuleStoreTest, BinaryRecordsRejectTruncationAndDecodeOnlyValidRules) {
  Writer w(12);
  std::vector<RuleOp> ops = w.NextBatch(40);
  ops.push_back(RuleOp::Delete(77));
  ops.push_back(RuleOp::DeleteByCookie(0xfedcba9876543210ull));
  const std::string body = store_internal::EncodeOps(ops);
  absl::StatusOr<std::vector<RuleOp>> back = store_internal::DecodeOps(body, ops.size());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ((*back)[i].kind, ops[i].kind);
    EXPECT_EQ((*back)[i].rule, ops[i].rule);
    EXPECT_EQ((*back)[i].id, ops[i].id);
    EXPECT_EQ((*back)[i].cookie, ops[i].cookie);
  }
  EXPECT_EQ(store_internal::DecodeOps(body, ops.size() + 1).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(store_internal::DecodeOps(body, ops.size() - 1).status().code(),
            absl::StatusCode::kDataLoss);
  for (size_t n = 0; n < body.size(); ++n) {
    absl::StatusOr<std::vector<RuleOp>> t =
        store_internal::DecodeOps(std::string_view(body).substr(0, n), ops.size());
    ASSERT_FALSE(t.ok()) << "truncated to " << n;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  }
  size_t refused = 0;
  for (size_t p = 0; p < body.size(); ++p) {
    for (unsigned x : {0x01u, 0x80u, 0xffu}) {
      std::string bad = body;
      bad[p] = static_cast<char>(bad[p] ^ x);
      absl::StatusOr<std::vector<RuleOp>> d = store_internal::DecodeOps(bad, ops.size());
      if (!d.ok()) {
        EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
        ++refused;
        continue;
      }
      for (const RuleOp& op : *d) {
        if (op.kind == RuleOp::Kind::kInsert || op.kind == RuleOp::Kind::kReplace) {
          EXPECT_TRUE(ValidateRule(op.rule).ok());
        }
      }
    }
  }
  EXPECT_GT(refused, 0u);
  // Bits no field uses cannot be stored: the store refuses such a rule.
  Rule r = ops.front().rule;
  EXPECT_TRUE(store_internal::RuleFitsRecord(r));
  r.match.mask.w[kWordMeta] |= uint64_t{1} << 63;  // above tcp_flags' 12 bits
  EXPECT_FALSE(store_internal::RuleFitsRecord(r));
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_TRUE(store->Load().ok());
  const std::vector<RuleOp> bad = {RuleOp::Insert(r)};
  const absl::Status s = store->AppendBatch({1, bad});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("outside every field"));
}

// The record format is what stores already on disk hold: the encoder writes
// exactly the bytes docs/store.md ("Records") describes, field by field.
TEST(RuleStoreTest, BinaryRecordsAreTheDocumentedBytes) {
  using std::string_literals::operator""s;
  Rule r;
  r.id = 300;
  r.priority = 5;
  r.cookie = 0x81;
  r.match.SetExact(Field::kInPort, 7);
  r.match.SetExact(Field::kEthType, 0x0800);
  r.match.SetMasked(Field::kIpv4Src, 0x0a000000, 0xff000000);
  r.match.SetExact(Field::kNwProto, 6);
  r.match.tp_dst = {80, 88};
  r.action = Action::Output(2);
  const std::vector<RuleOp> ops = {RuleOp::Insert(r), RuleOp::Delete(1000),
                                   RuleOp::DeleteByCookie(0), RuleOp::Replace(r)};
  const std::string rule =
      "\xac\x02"              // id 300
      "\x05"                  // priority
      "\x81\x01"              // cookie 0x81
      "\x83\x20\x00"          // present: in_port, eth_type, ipv4_src, nw_proto
      "\x03\x20\x00"          // exact: in_port, eth_type, nw_proto
      "\x07\x00\x00\x00"      // in_port 7
      "\x00\x08"              // eth_type 0x0800
      "\x00\x00\x00\x0a"      // ipv4_src 10.0.0.0
      "\x00\x00\x00\xff"      // its mask /8
      "\x06"                  // nw_proto
      "\x02\x50\x00\x58\x00"  // flags: tp_dst range 80-88
      "\x01\x02"s;            // output:2
  const std::string want = "+" + rule + "-\xe8\x07" + "~" + std::string(1, '\0') + "=" + rule;
  EXPECT_EQ(absl::CHexEscape(store_internal::EncodeOps(ops)), absl::CHexEscape(want));
  std::string one;
  store_internal::AppendRule(r, &one);
  EXPECT_EQ(absl::CHexEscape(one), absl::CHexEscape(rule));
  absl::StatusOr<std::vector<RuleOp>> back = store_internal::DecodeOps(want, ops.size());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[0].rule, r);
  EXPECT_EQ((*back)[3].rule, r);
}

// AppendOps (what AppendGroup encodes with): batch after batch into one
// buffer that grows many times, each batch the bytes EncodeOps gives it; a
// batch it refuses leaves the buffer as it was.
TEST(RuleStoreTest, AppendOpsIntoOneBufferEqualsEncodeOps) {
  Writer w(21);
  store_internal::ByteBuffer buf;
  std::vector<std::string> want;
  std::vector<size_t> ends;
  for (int i = 0; i < 30; ++i) {
    std::vector<RuleOp> ops = w.NextBatch(1 + 7 * i);
    w.Apply(ops);
    if (i % 3 == 0) ops.push_back(RuleOp::DeleteByCookie(uint64_t{1} << (2 * i)));
    ASSERT_TRUE(store_internal::AppendOps(ops, &buf).ok());
    want.push_back(store_internal::EncodeOps(ops));
    ends.push_back(buf.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const size_t start = i == 0 ? 0 : ends[i - 1];
    EXPECT_EQ(buf.view().substr(start, ends[i] - start), want[i]) << "batch " << i;
  }
  const std::string before(buf.view());
  Rule bad = w.NextBatch(1).front().rule;
  bad.match.mask.w[kWordMeta] |= uint64_t{1} << 63;  // no field has this bit
  const std::vector<RuleOp> unfit = {RuleOp::Delete(1), RuleOp::Insert(bad)};
  store_internal::OpsAppend a = store_internal::AppendOps(unfit, &buf);
  EXPECT_EQ(a.problem, store_internal::OpsAppend::kDoesNotFit);
  EXPECT_EQ(a.op, 1u);
  RuleOp odd = RuleOp::Delete(1);
  odd.kind = static_cast<RuleOp::Kind>(77);
  const std::vector<RuleOp> unknown = {RuleOp::Delete(2), odd};
  a = store_internal::AppendOps(unknown, &buf);
  EXPECT_EQ(a.problem, store_internal::OpsAppend::kUnknownKind);
  EXPECT_EQ(a.op, 1u);
  EXPECT_EQ(buf.view(), before);
}

TEST(RuleStoreTest, GenerationSurvivesAnEmptyRuleSet) {
  TempDir dir;
  Writer w(2);
  {
    auto store = OpenOrDie(dir.path());
    ASSERT_TRUE(store->Load().ok());
    ASSERT_TRUE(w.AppendGroup(*store, 5, 10).ok());
    const uint64_t g = w.ApplyDeleteAll();
    const StoreBatch clear{g, {}, true};
    ASSERT_TRUE(store->AppendBatch(clear).ok());
  }
  absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir.path());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->generation, 6u);
  EXPECT_TRUE(s->rules.empty());
  // And through a compaction.
  {
    auto store = OpenOrDie(dir.path());
    ASSERT_TRUE(store->Load().ok());
    ASSERT_TRUE(store->Compact().ok());
  }
  s = OpenAndLoad(dir.path());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->generation, 6u);
  EXPECT_EQ(s->info.snapshot_generation, 6u);
  EXPECT_EQ(s->info.batches, 0u);
}

TEST(RuleStoreTest, ManyGroupsCompactionAndReopenAfterEach) {
  TempDir dir;
  Writer w(3);
  RuleStoreOptions o;
  o.auto_compact_batches = 17;  // automatic compactions along the way
  o.snapshot_chunk_rules = 50;  // several chunks
  uint64_t compactions = 0;
  for (int round = 0; round < 40; ++round) {
    auto store = OpenOrDie(dir.path(), o);
    absl::StatusOr<RuleStoreState> s = store->Load();
    ExpectState(s, w, w.generation());
    ASSERT_TRUE(w.AppendGroup(*store, 1 + round % 5, 1 + round % 30).ok());
    if (round % 9 == 8) {
      ASSERT_TRUE(store->Compact().ok());
    }
    compactions += store->Stats().compactions;
    EXPECT_EQ(store->Stats().generation, w.generation());
  }
  EXPECT_GE(compactions, 6u);
  absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir.path(), o);
  ExpectState(s, w, w.generation());
  EXPECT_GT(s->info.snapshot_generation, 0u);
  EXPECT_GT(s->info.snapshot_rules, 50u);
}

TEST(RuleStoreTest, AutomaticCompactionByBytes) {
  TempDir dir;
  Writer w(4);
  RuleStoreOptions o;
  o.auto_compact_bytes = 20000;
  o.auto_compact_batches = 0;
  auto store = OpenOrDie(dir.path(), o);
  ASSERT_TRUE(store->Load().ok());
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(w.AppendGroup(*store, 2, 40).ok());
  const RuleStoreStats st = store->Stats();
  EXPECT_GT(st.compactions, 0u);
  EXPECT_LT(st.batch_bytes, std::max<uint64_t>(20000, st.snapshot_bytes) + 20000);
  store.reset();
  ExpectState(OpenAndLoad(dir.path(), o), w, w.generation());
}

TEST(RuleStoreTest, AppendGroupChecksGenerationsAndWritesNothingOnError) {
  TempDir dir;
  Writer w(5);
  auto store = OpenOrDie(dir.path());
  const std::vector<RuleOp> ops = {RuleOp::Insert(Ipv4SrcRule(1, 1, 0x0a000000, 8, Action::Drop()))};
  const StoreBatch early{1, ops};
  EXPECT_EQ(store->AppendBatch(early).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store->Load().ok());
  ASSERT_TRUE(w.AppendGroup(*store, 2, 5).ok());
  const std::vector<StoreBatch> gap = {{3, ops}, {5, ops}};
  absl::Status s = store->AppendGroup(gap);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("batch 1 has generation 5, the store expects 4"));
  const StoreBatch old{2, ops};
  EXPECT_EQ(store->AppendBatch(old).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store->AppendGroup({}).ok());
  // Not failed by those: the next right one goes in.
  ASSERT_TRUE(w.AppendGroup(*store, 1, 5).ok());
  store.reset();
  ExpectState(OpenAndLoad(dir.path()), w, 3);
}

TEST(RuleStoreTest, OneProcessAtATime) {
  TempDir dir;
  auto first = OpenOrDie(dir.path());
  ASSERT_TRUE(first->Load().ok());
  absl::StatusOr<RuleStoreState> second = OpenAndLoad(dir.path());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another process"));
  EXPECT_THAT(second.status().message(), HasSubstr(dir.db()));
  first.reset();
  EXPECT_TRUE(OpenAndLoad(dir.path()).ok());
}

TEST(RuleStoreTest, WalHoldsOnlyTheGroupInFlight) {
  TempDir dir;
  Writer w(6);
  auto store = OpenOrDie(dir.path());
  ASSERT_TRUE(store->Load().ok());
  uint64_t max_wal = 0;
  for (int i = 0; i < 150; ++i) {
    ASSERT_TRUE(w.AppendGroup(*store, 1, 10).ok());
    max_wal = std::max<uint64_t>(max_wal, fs::file_size(dir.wal()));
  }
  // 150 groups of several 16 KiB pages each: the WAL is reused from its
  // start after every checkpoint instead of growing.
  EXPECT_LT(max_wal, 400u * 1024);
  EXPECT_GT(fs::file_size(dir.db()), max_wal);
  // No -shm: the WAL index lives in the process (exclusive locking).
  EXPECT_FALSE(fs::exists(dir.path() + "/rules.db-shm"));
}

// ----------------------------------------------------------------- damage

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

constexpr uint64_t kSnapshotMarker = 0x5eed5eed5eedull;  // a rule only the snapshot holds
constexpr uint64_t kBatchMarker = 0xbadc0ffee0ull;       // a rule only batch 15 holds

// A store with a snapshot at generation 10 (with a marker rule) and batches
// 11..20 (batch 15 inserts another marker rule), closed cleanly.
class DamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = OpenOrDie(dir_.path());
    ASSERT_TRUE(store->Load().ok());
    for (int g = 1; g <= 20; ++g) {
      std::vector<RuleOp> ops = w_.NextBatch(6);
      if (g == 3 || g == 15) {
        Rule r = Ipv4SrcRule(1000000 + g, 5, 0x0c000000, 8, Action::Output(3));
        r.cookie = g == 3 ? kSnapshotMarker : kBatchMarker;
        ops.push_back(RuleOp::Insert(r));
      }
      const StoreBatch b{w_.Apply(ops), ops};
      ASSERT_EQ(b.generation, static_cast<uint64_t>(g));
      ASSERT_TRUE(store->AppendBatch(b).ok());
      if (g == 10) {
        ASSERT_TRUE(store->Compact().ok());
      }
    }
    store.reset();
    ASSERT_FALSE(fs::exists(dir_.wal()));  // a clean close checkpoints and removes it
    pristine_ = ReadAll(dir_.db());
  }

  // Runs `sql` on rules.db with plain SQLite, past the store's checks.
  void ExecSql(const char* sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir_.db().c_str(), &db), SQLITE_OK);
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << sql;
  }

  // Flips one bit in every copy of `needle` in rules.db (freed pages may
  // hold old copies; the live one is among them).
  void FlipText(const std::string& needle) {
    std::string data = ReadAll(dir_.db());
    size_t n = 0;
    for (size_t p = data.find(needle); p != std::string::npos; p = data.find(needle, p + 1), ++n)
      data[p + needle.size() - 1] ^= 0x01;
    ASSERT_GT(n, 0u) << needle;
    WriteAll(dir_.db(), data);
  }

  // Strict Load fails with DATA_LOSS naming the file; with
  // recover_to_last_consistent it returns the state of generation `recovered`
  // exactly, and the rewritten store then loads strictly.
  void ExpectDamage(const std::string& what, uint64_t recovered) {
    const std::string damaged = ReadAll(dir_.db());
    absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir_.path());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
    EXPECT_THAT(s.status().message(), HasSubstr(dir_.db()));
    EXPECT_THAT(s.status().message(), HasSubstr(what));
    EXPECT_EQ(ReadAll(dir_.db()), damaged) << "a strict Load changed the damaged file";
    std::cerr << "refused: " << s.status().message() << "\n";

    RuleStoreOptions o;
    o.recover_to_last_consistent = true;
    s = OpenAndLoad(dir_.path(), o);
    ExpectState(s, w_, recovered);
    EXPECT_TRUE(s->info.recovered);
    ASSERT_FALSE(s->info.dropped.empty());
    EXPECT_THAT(s->info.dropped[0], HasSubstr(what));
    EXPECT_TRUE(fs::exists(s->info.damaged_file)) << s->info.damaged_file;
    EXPECT_EQ(ReadAll(s->info.damaged_file), damaged);
    for (const std::string& d : s->info.dropped) std::cerr << "recovered: " << d << "\n";
    ExpectState(OpenAndLoad(dir_.path()), w_, recovered);
  }

  TempDir dir_;
  Writer w_{7};
  std::string pristine_;
};

TEST_F(DamageTest, PristineLoads) {
  absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir_.path());
  ExpectState(s, w_, 20);
  EXPECT_EQ(s->info.snapshot_generation, 10u);
  EXPECT_EQ(s->info.batches, 10u);
}

// The bytes of `cookie` as a record stores it (a varint).
std::string CookieBytes(uint64_t cookie) {
  std::string s;
  for (; cookie >= 0x80; cookie >>= 7) s.push_back(static_cast<char>((cookie & 0x7f) | 0x80));
  s.push_back(static_cast<char>(cookie));
  return s;
}

TEST_F(DamageTest, FlippedByteInABatch) {
  FlipText(CookieBytes(kBatchMarker));
  ExpectDamage("batch generation 15: checksum mismatch", 14);
}

TEST_F(DamageTest, FlippedByteInTheSnapshot) {
  FlipText(CookieBytes(kSnapshotMarker));
  ExpectDamage("snapshot chunk 0 (generation 10): checksum mismatch", 0);
}

// Rows whose checksums are right but whose operations the rule table would
// have refused: never acknowledged, so damage.  (AppendGroup trusts its
// caller, which is how these get in.)
TEST_F(DamageTest, BatchTheTableWouldRefuse) {
  const Rule existing = w_.state(20).front();
  struct Case {
    std::vector<RuleOp> ops;
    const char* what;
  };
  const std::vector<Case> cases = {
      {{RuleOp::Delete(999999)}, "batch generation 21: operation 0: delete of unknown rule id 999999"},
      {{RuleOp::DeleteByCookie(existing.cookie), RuleOp::Insert(existing), RuleOp::Insert(existing)},
       "batch generation 21: operation 2: insert of rule id"},
      {{RuleOp::Replace(Ipv4SrcRule(999998, 1, 0x0a000000, 8, Action::Drop()))},
       "batch generation 21: operation 0: replace of unknown rule id 999998"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    WriteAll(dir_.db(), pristine_);
    {
      auto store = OpenOrDie(dir_.path());
      ASSERT_TRUE(store->Load().ok());
      const StoreBatch b{21, c.ops};
      ASSERT_TRUE(store->AppendBatch(b).ok());
    }
    ExpectDamage(c.what, 20);
    for (const auto& e : fs::directory_iterator(dir_.path()))
      if (e.path().filename() != "rules.db") fs::remove(e.path());
  }
}

TEST_F(DamageTest, MetaRowChanged) {
  ASSERT_NO_FATAL_FAILURE(ExecSql("UPDATE meta SET head_generation = 25"));
  ExpectDamage("table meta: checksum mismatch", 0);
}

TEST_F(DamageTest, TruncatedToZero) {
  ::truncate(dir_.db().c_str(), 0);
  ExpectDamage("the file is empty (0 bytes)", 0);
}

TEST_F(DamageTest, TruncatedInsideTheHeader) {
  ::truncate(dir_.db().c_str(), 50);
  ExpectDamage("", 0);
}

TEST_F(DamageTest, TruncatedByHalfAndByOnePage) {
  const uint64_t size = pristine_.size();
  for (uint64_t len : {size / 2, size - 16384}) {
    SCOPED_TRACE(len);
    WriteAll(dir_.db(), pristine_.substr(0, len));
    absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir_.path());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
    EXPECT_THAT(s.status().message(), HasSubstr(dir_.db()));
    std::cerr << "truncated to " << len << " of " << size << ": " << s.status() << "\n";
  }
}

TEST_F(DamageTest, HeadOfTheStoreMissingItsLastBatch) {
  // A valid-looking file whose newest batch row is gone: meta's head says 20.
  ASSERT_NO_FATAL_FAILURE(ExecSql("DELETE FROM batch WHERE generation = 20"));
  ExpectDamage("batch generation 20 is missing", 19);
}

TEST_F(DamageTest, GapInGenerations) {
  ASSERT_NO_FATAL_FAILURE(ExecSql("DELETE FROM batch WHERE generation = 13"));
  ExpectDamage("batch generation 14: generation 13 is missing", 12);
}

TEST_F(DamageTest, NotARuleStore) {
  fs::remove(dir_.db());
  ASSERT_NO_FATAL_FAILURE(ExecSql("CREATE TABLE t (x); INSERT INTO t VALUES (1)"));
  ExpectDamage("not a flowclass rule store", 0);
}

// A store file switched out of WAL mode (not one the store wrote): refused
// before anything writes to it (switching it back would rewrite its header;
// store_file_fuzz found a refused file changed that way).
TEST_F(DamageTest, NotInWalModeIsRefusedUnchanged) {
  ASSERT_NO_FATAL_FAILURE(ExecSql("PRAGMA journal_mode=DELETE"));
  const std::string before = ReadAll(dir_.db());
  ASSERT_NE(before, pristine_);  // the header's read/write versions say "rollback"
  absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir_.path());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr(dir_.db()));
  EXPECT_THAT(s.status().message(), HasSubstr("not in WAL mode (journal_mode is delete)"));
  EXPECT_EQ(ReadAll(dir_.db()), before) << "a refused store was changed";
  RuleStoreOptions o;
  o.recover_to_last_consistent = true;
  s = OpenAndLoad(dir_.path(), o);
  // As for a foreign file: set aside whole, the store starts empty.
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->info.recovered);
  EXPECT_EQ(s->generation, 0u);
  EXPECT_TRUE(s->rules.empty());
  EXPECT_EQ(ReadAll(s->info.damaged_file), before);
}

TEST_F(DamageTest, DatabaseRemovedButItsWalLeft) {
  WriteAll(dir_.wal(), "leftover");
  fs::remove(dir_.db());
  absl::StatusOr<std::unique_ptr<RuleStore>> s = RuleStore::Open(dir_.path());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.status().message(), HasSubstr("rules.db is missing but"));
  EXPECT_FALSE(fs::exists(dir_.db()));  // never a new database beside an old -wal
}

// Random single-byte flips anywhere in rules.db: a strict Load either gives
// the exact state (the byte was in unused space) or fails with DATA_LOSS;
// recovery gives the exact state of some generation.  Never anything else.
TEST_F(DamageTest, RandomFlipsNeverCrashNorHalfApply) {
  std::mt19937_64 rng(42);
  RuleStoreOptions recover;
  recover.recover_to_last_consistent = true;
  int failed = 0, recovered_full = 0;
  // Binary records leave most of the file's pages unused: 300 flips for
  // enough of them to land in data.
  constexpr int kFlips = 300;
  for (int i = 0; i < kFlips; ++i) {
    std::string data = pristine_;
    const size_t at = rng() % data.size();
    data[at] = static_cast<char>(data[at] ^ (1 + rng() % 255));
    WriteAll(dir_.db(), data);
    SCOPED_TRACE(absl::StrCat("flip at ", at));
    absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir_.path());
    if (s.ok()) {
      ExpectState(s, w_, 20);
    } else {
      ++failed;
      EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
      EXPECT_THAT(s.status().message(), HasSubstr(dir_.db()));
      WriteAll(dir_.db(), data);  // as it was
      s = OpenAndLoad(dir_.path(), recover);
      ASSERT_TRUE(s.ok()) << s.status();
      ExpectState(s, w_, s->generation);
      if (s->generation == 20) ++recovered_full;
    }
    for (const auto& e : fs::directory_iterator(dir_.path()))
      if (e.path().filename() != "rules.db") fs::remove(e.path());
  }
  std::cerr << failed << " of " << kFlips << " flips refused, " << recovered_full
            << " of those recovered every batch\n";
  EXPECT_GT(failed, 10);
}

// --------------------------------------------------------------- the -wal

// A group left in the -wal alone (committed, not checkpointed: a crash
// between the two) by a child process that exits without closing.
class WalTest : public DamageTest {
 protected:
  void SetUp() override {
    DamageTest::SetUp();
    ops_ = {w_.NextBatch(4)};
    const uint64_t g21 = w_.Apply(ops_[0]);
    ops_.push_back(w_.NextBatch(4));
    const uint64_t g22 = w_.Apply(ops_[1]);
    const std::vector<StoreBatch> group = {{g21, ops_[0]}, {g22, ops_[1]}};
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      RuleStoreOptions o;
      o.testing_skip_checkpoint = true;
      auto store = RuleStore::Open(dir_.path(), o);
      bool ok = store.ok() && (*store)->Load().ok() && (*store)->AppendGroup(group).ok();
      ::_exit(ok ? 0 : 1);  // no destructor: no checkpoint on close
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_TRUE(fs::exists(dir_.wal()));
    wal_ = ReadAll(dir_.wal());
    ASSERT_GT(wal_.size(), 32u + 24u + 16384u);
  }
  std::vector<std::vector<RuleOp>> ops_;
  std::string wal_;
};

TEST_F(WalTest, GroupInTheWalIsRestoredWhole) {
  ExpectState(OpenAndLoad(dir_.path()), w_, 22);
}

TEST_F(WalTest, DeletedWalDropsTheGroupWhole) {
  fs::remove(dir_.wal());
  ExpectState(OpenAndLoad(dir_.path()), w_, 20);
}

TEST_F(WalTest, TornWalDropsTheGroupWhole) {
  for (size_t len : {wal_.size() - 100, wal_.size() / 2, size_t{40}}) {
    SCOPED_TRACE(len);
    WriteAll(dir_.db(), pristine_);
    WriteAll(dir_.wal(), wal_.substr(0, len));
    ExpectState(OpenAndLoad(dir_.path()), w_, 20);
  }
}

TEST_F(WalTest, FlippedWalBytesDropTheGroupWhole) {
  // In the header, in the first frame's header, in a page, in the last frame.
  for (size_t at : {size_t{13}, size_t{32 + 10}, size_t{32 + 24 + 5000}, wal_.size() - 7}) {
    SCOPED_TRACE(at);
    std::string data = wal_;
    data[at] ^= 0x20;
    WriteAll(dir_.db(), pristine_);
    WriteAll(dir_.wal(), data);
    ExpectState(OpenAndLoad(dir_.path()), w_, 20);
  }
}


// Several committed groups left in the -wal (checkpoint_groups > 1: a stream
// of groups, then a crash before the store's idle checkpoint), one batch a
// group: generations 21, 22 and 23.
class MultiGroupWalTest : public DamageTest {
 protected:
  static constexpr int kGroups = 3;
  void SetUp() override {
    DamageTest::SetUp();
    for (int i = 0; i < kGroups; ++i) {
      ops_.push_back(w_.NextBatch(4));
      gens_.push_back(w_.Apply(ops_.back()));
    }
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = RuleStore::Open(dir_.path(), {});
      bool ok = store.ok() && (*store)->Load().ok();
      for (int i = 0; ok && i < kGroups; ++i) {
        const StoreBatch b{gens_[i], ops_[i]};
        ok = (*store)->CommitGroup({&b, 1}).ok();
      }
      ::_exit(ok ? 0 : 1);  // no destructor, no Settle: no checkpoint
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    wal_ = ReadAll(dir_.wal());
    scan_ = store_internal::ScanWalBytes(wal_, 16384);
    ASSERT_EQ(scan_.replayed_commits, static_cast<uint64_t>(kGroups));
    ASSERT_EQ(scan_.replayed_frames, scan_.frames);
    ASSERT_EQ(scan_.dropped_commits(), 0u);
  }
  // Where frame `i` (1-based) starts in the -wal.
  size_t FrameAt(uint64_t i) const { return 32 + (i - 1) * (24 + scan_.page_size); }
  void Restore(const std::string& wal) {
    for (const auto& e : fs::directory_iterator(dir_.path())) fs::remove_all(e.path());
    WriteAll(dir_.db(), pristine_);
    WriteAll(dir_.wal(), wal);
  }
  std::vector<std::vector<RuleOp>> ops_;
  std::vector<uint64_t> gens_;
  std::string wal_;
  store_internal::WalScan scan_;
};

TEST_F(MultiGroupWalTest, EveryCommittedGroupIsRestored) {
  auto store = OpenOrDie(dir_.path());
  absl::StatusOr<RuleStoreState> s = store->Load();
  ExpectState(s, w_, 23);
  // Load checkpoints what it read and empties the -wal: the next commit
  // starts a new cycle, and a later crash has nothing old to replay.
  EXPECT_EQ(fs::file_size(dir_.wal()), 0u);
  EXPECT_EQ(store->Stats().unsettled_groups, 0u);
}

TEST_F(MultiGroupWalTest, DamagedSaltsOfAnEarlierCommitFrameAreRefused) {
  // The salts are not under the checksum: SQLite stops at the frame, the
  // next frames still chain from the checksum it stores.
  std::vector<uint64_t> commits;
  for (uint64_t i = 1; i <= scan_.frames; ++i)
    if (wal_.substr(FrameAt(i) + 4, 4) != std::string(4, '\0')) commits.push_back(i);
  ASSERT_EQ(commits.size(), 3u);
  std::string data = wal_;
  data[FrameAt(commits[1]) + 9] ^= 0x01;  // group 22's commit frame, salt-1
  Restore(data);
  ExpectDamage(absl::StrCat("-wal: frame ", commits[1], " of"), 21);
}

TEST_F(MultiGroupWalTest, DamageInAnEarlierGroupIsRefusedNotDropped) {
  // A page of the first frame (the first group): SQLite alone would replay
  // nothing and drop 21, 22 and 23 without a word.
  std::string data = wal_;
  data[FrameAt(1) + 24 + 5000] ^= 0x20;
  Restore(data);
  ExpectDamage("-wal: frame 1 of", 20);
  // The WAL header: the same (SQLite would ignore the whole file).
  data = wal_;
  data[13] ^= 0x20;
  Restore(data);
  ExpectDamage("the WAL header is damaged", 20);
}

TEST_F(MultiGroupWalTest, DamageInTheLastGroupDropsItWhole) {
  std::string data = wal_;
  data[wal_.size() - 7] ^= 0x20;  // the last frame: the last group's commit
  Restore(data);
  ExpectState(OpenAndLoad(dir_.path()), w_, 22);
}

TEST_F(MultiGroupWalTest, TruncatedOrDeletedWalLosesTheGroupsNotCheckpointed) {
  // Documented (docs/store.md): nothing in the files tells that the lost
  // groups existed; the store checkpoints when idle to keep this short.
  Restore(wal_.substr(0, wal_.size() - 100));
  ExpectState(OpenAndLoad(dir_.path()), w_, 22);
  Restore(wal_);
  fs::remove(dir_.wal());
  ExpectState(OpenAndLoad(dir_.path()), w_, 20);
}

TEST_F(MultiGroupWalTest, RandomFlipsNeverDropAnAcknowledgedGroupButTheLast) {
  // Any one damaged byte of the -wal: either a refusal (DATA_LOSS), or every
  // group but possibly the last, whole.  Never 20 or 21 silently.
  std::mt19937_64 rng(7);
  int refused = 0, dropped_last = 0;
  constexpr int kFlips = 200;
  for (int i = 0; i < kFlips; ++i) {
    std::string data = wal_;
    const size_t at = rng() % data.size();
    data[at] = static_cast<char>(data[at] ^ (1 + rng() % 255));
    SCOPED_TRACE(absl::StrCat("flip at ", at));
    Restore(data);
    absl::StatusOr<RuleStoreState> s = OpenAndLoad(dir_.path());
    if (!s.ok()) {
      ++refused;
      EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
      EXPECT_THAT(s.status().message(), HasSubstr(dir_.wal()));
      continue;
    }
    ASSERT_GE(s->generation, 22u);
    ExpectState(s, w_, s->generation);
    if (s->generation == 22) ++dropped_last;
  }
  std::cerr << refused << " of " << kFlips << " flips refused, " << dropped_last
            << " dropped the last group\n";
  EXPECT_GT(refused, 10);
  EXPECT_GT(dropped_last, 10);
}

TEST(RuleStoreTest, SettleEmptiesTheWal) {
  // A PASSIVE checkpoint would leave the checkpointed groups in the -wal,
  // and a crash replays a -wal from its start: damage in its last group
  // would then put older pages over a newer rules.db.
  TempDir dir;
  Writer w(11);
  auto store = OpenOrDie(dir.path());
  ASSERT_TRUE(store->Load().ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(w.CommitGroup(*store, 1, 5).ok());
  EXPECT_GT(fs::file_size(dir.wal()), 0u);
  ASSERT_TRUE(store->Settle().ok());
  EXPECT_EQ(fs::file_size(dir.wal()), 0u);
}

TEST(RuleStoreTest, CommitGroupCheckpointsEveryCheckpointGroups) {
  TempDir dir;
  Writer w(9);
  RuleStoreOptions o;
  o.checkpoint_groups = 4;
  auto store = OpenOrDie(dir.path(), o);
  ASSERT_TRUE(store->Load().ok());
  for (int i = 1; i <= 10; ++i) {
    ASSERT_TRUE(w.CommitGroup(*store, 1, 5).ok());
    // 1..4 wait; the 5th checkpoints the first 4 before it is written.
    EXPECT_EQ(store->Stats().unsettled_groups, static_cast<uint64_t>((i - 1) % 4 + 1)) << i;
    absl::StatusOr<store_internal::WalScan> scan = store_internal::ScanWal(dir.db());
    ASSERT_TRUE(scan.ok());
    EXPECT_EQ(scan->replayed_commits, static_cast<uint64_t>((i - 1) % 4 + 1)) << i;
  }
  ASSERT_TRUE(store->Settle().ok());
  EXPECT_EQ(store->Stats().unsettled_groups, 0u);
  store.reset();
  ExpectState(OpenAndLoad(dir.path()), w, 10);
}

// checkpoint_bytes bounds the -wal by the batches' bytes too: with a bound
// below one group's, every commit after the first checkpoints the one
// before it; with the bound off, the groups wait (checkpoint_groups wide).
TEST(RuleStoreTest, CommitGroupCheckpointsOnceCheckpointBytesWait) {
  for (const uint64_t bound : {uint64_t{1}, uint64_t{0}}) {
    SCOPED_TRACE(bound);
    TempDir dir;
    Writer w(9);
    RuleStoreOptions o;
    o.checkpoint_groups = 1000;
    o.checkpoint_bytes = bound;
    auto store = OpenOrDie(dir.path(), o);
    ASSERT_TRUE(store->Load().ok());
    for (int i = 1; i <= 6; ++i) {
      ASSERT_TRUE(w.CommitGroup(*store, 1, 5).ok());
      const uint64_t waiting = bound != 0 ? 1 : static_cast<uint64_t>(i);
      EXPECT_EQ(store->Stats().unsettled_groups, waiting) << i;
      absl::StatusOr<store_internal::WalScan> scan = store_internal::ScanWal(dir.db());
      ASSERT_TRUE(scan.ok());
      EXPECT_EQ(scan->replayed_commits, waiting) << i;
    }
    store.reset();
    ExpectState(OpenAndLoad(dir.path()), w, 6);
  }
}

}  // namespace
}  // namespace flowclass
