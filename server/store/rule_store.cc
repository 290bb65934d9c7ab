// rule_store.cc — see rule_store.h and docs/store.md.
#include "server/store/rule_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/quote.h"
#include "dataplane/rules/rule_format.h"
#include "server/store/internal/sqlite_db.h"
#include "server/store/internal/store_records.h"
#include "server/store/internal/wal_scan.h"

namespace flowclass {
namespace {

using store_internal::Checkpoint;
using store_internal::ScanWal;
using store_internal::WalScan;
using store_internal::CloseDb;
using store_internal::AppendRule;
using store_internal::DecodeOps;
using store_internal::DecodeOpsText;
using store_internal::EncodeOpsText;
using store_internal::Exec;
using store_internal::Exists;
using store_internal::FileBytes;
using store_internal::FsyncPath;
using store_internal::OpenDb;
using store_internal::ParseStoredRule;
using store_internal::QueryText;
using store_internal::RecordCrc;
using store_internal::RemoveIfExists;
using store_internal::ReadRule;
using store_internal::ReplayState;
using store_internal::SplitLines;
using store_internal::SqlError;
using store_internal::SqlStatus;
using store_internal::Stmt;

// Version 2: binary records (store_records.h).  Version 1 (native rule
// text) is read and migrated to 2 by Load.
constexpr int kSchemaVersion = RuleStore::kCurrentSchemaVersion;
constexpr int kOldestSchemaVersion = 1;
// PRAGMA application_id: "FCls".  Any other SQLite file is not a rule store.
constexpr int32_t kApplicationId = 0x46436c73;
constexpr int64_t kBatchDeleteAllFirst = 1;  // batch.flags bit 0
constexpr uint64_t kMaxGeneration = uint64_t{1} << 62;

constexpr const char* kSchema =
    "CREATE TABLE meta (id INTEGER PRIMARY KEY, schema_version INTEGER NOT NULL,"
    " created_unix INTEGER NOT NULL, head_generation INTEGER NOT NULL,"
    " snapshot_generation INTEGER NOT NULL, snapshot_chunks INTEGER NOT NULL,"
    " snapshot_rules INTEGER NOT NULL, crc INTEGER NOT NULL) STRICT;"
    "CREATE TABLE snapshot (chunk INTEGER PRIMARY KEY, generation INTEGER NOT NULL,"
    " rules INTEGER NOT NULL, body BLOB NOT NULL, crc INTEGER NOT NULL) STRICT;"
    "CREATE TABLE batch (generation INTEGER PRIMARY KEY, flags INTEGER NOT NULL,"
    " ops INTEGER NOT NULL, body BLOB NOT NULL, crc INTEGER NOT NULL) STRICT;";

struct Meta {
  int64_t schema_version = kSchemaVersion;
  int64_t created_unix = 0;
  uint64_t head_generation = 0;
  uint64_t snapshot_generation = 0;
  uint64_t snapshot_chunks = 0;
  uint64_t snapshot_rules = 0;
  uint32_t Crc() const {
    return RecordCrc('m', {static_cast<uint64_t>(schema_version),
                           static_cast<uint64_t>(created_unix), head_generation,
                           snapshot_generation, snapshot_chunks, snapshot_rules},
                     {});
  }
};

absl::Status WriteMeta(sqlite3* db, const std::string& path, const Meta& m, bool insert) {
  Stmt st;
  const char* sql =
      insert ? "INSERT INTO meta (schema_version, created_unix, head_generation,"
               " snapshot_generation, snapshot_chunks, snapshot_rules, crc, id)"
               " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
             : "UPDATE meta SET schema_version = ?, created_unix = ?, head_generation = ?,"
               " snapshot_generation = ?, snapshot_chunks = ?, snapshot_rules = ?, crc = ?"
               " WHERE id = ?";
  if (absl::Status s = st.Prepare(db, path, sql); !s.ok()) return s;
  st.BindInt(1, m.schema_version);
  st.BindInt(2, m.created_unix);
  st.BindInt(3, static_cast<int64_t>(m.head_generation));
  st.BindInt(4, static_cast<int64_t>(m.snapshot_generation));
  st.BindInt(5, static_cast<int64_t>(m.snapshot_chunks));
  st.BindInt(6, static_cast<int64_t>(m.snapshot_rules));
  st.BindInt(7, m.Crc());
  st.BindInt(8, 1);
  if (int rc = st.Step(); rc != SQLITE_DONE) return SqlError(db, rc, path, "write meta");
  if (sqlite3_changes(db) != 1)
    return absl::DataLossError(absl::StrCat(path, ": table meta: its row is missing"));
  return absl::OkStatus();
}

// Replaces the snapshot rows with `rules` (sorted by id) at `generation`;
// fills m's snapshot fields.  Inside the caller's transaction.
absl::Status WriteSnapshot(sqlite3* db, const std::string& path, uint64_t generation,
                           absl::Span<const Rule* const> rules, size_t chunk_rules,
                           int version, Meta* m, uint64_t* bytes) {
  if (absl::Status s = Exec(db, path, "DELETE FROM snapshot"); !s.ok()) return s;
  Stmt st;
  if (absl::Status s = st.Prepare(
          db, path, "INSERT INTO snapshot (chunk, generation, rules, body, crc) VALUES (?, ?, ?, ?, ?)");
      !s.ok())
    return s;
  chunk_rules = std::max<size_t>(chunk_rules, 1);
  uint64_t chunk = 0;
  *bytes = 0;
  std::string body;
  for (size_t start = 0; start < rules.size(); start += chunk_rules, ++chunk) {
    const size_t end = std::min(rules.size(), start + chunk_rules);
    body.clear();
    for (size_t i = start; i < end; ++i) {
      if (version == 1) {
        body.append(rules[i]->ToString());
        body.push_back('\n');
      } else {
        AppendRule(*rules[i], &body);
      }
    }
    const uint64_t n = end - start;
    st.BindInt(1, static_cast<int64_t>(chunk));
    st.BindInt(2, static_cast<int64_t>(generation));
    st.BindInt(3, static_cast<int64_t>(n));
    st.BindBlob(4, body);
    st.BindInt(5, RecordCrc('s', {chunk, generation, n}, body));
    if (int rc = st.Step(); rc != SQLITE_DONE)
      return SqlError(db, rc, path, absl::StrCat("write snapshot chunk ", chunk));
    st.Reset();
    *bytes += body.size();
  }
  m->snapshot_generation = generation;
  m->snapshot_chunks = chunk;
  m->snapshot_rules = rules.size();
  m->head_generation = generation;
  return absl::OkStatus();
}

// Writes a complete store with `rules` as its snapshot to PATH.tmp and syncs
// it; the caller renames it into place.
absl::Status WriteStoreFile(const std::string& tmp, uint64_t generation,
                            absl::Span<const Rule* const> rules, int64_t created_unix,
                            size_t chunk_rules, int version = kSchemaVersion) {
  for (const char* suffix : {"", "-wal", "-journal", "-shm"})
    if (absl::Status s = RemoveIfExists(tmp + suffix); !s.ok()) return s;
  absl::StatusOr<sqlite3*> db = OpenDb(tmp, /*create=*/true, kApplicationId);
  if (!db.ok()) return db.status();
  absl::Status s = Exec(*db, tmp, absl::StrCat("PRAGMA application_id=", kApplicationId,
                                               "; PRAGMA user_version=", version)
                                      .c_str());
  if (s.ok()) s = Exec(*db, tmp, "BEGIN IMMEDIATE");
  if (s.ok()) s = Exec(*db, tmp, kSchema);
  Meta m;
  m.schema_version = version;
  m.created_unix = created_unix;
  uint64_t bytes = 0;
  if (s.ok()) s = WriteSnapshot(*db, tmp, generation, rules, chunk_rules, version, &m, &bytes);
  if (s.ok()) s = WriteMeta(*db, tmp, m, /*insert=*/true);
  if (s.ok()) s = Exec(*db, tmp, "COMMIT");
  if (s.ok()) s = Checkpoint(*db, tmp);
  CloseDb(*db, s.ok());
  if (!s.ok()) return s;
  if (Exists(tmp + "-wal"))
    return absl::InternalError(absl::StrCat(tmp, "-wal: still there after close"));
  return FsyncPath(tmp, false);
}

// What reading a store found: the consistent state up to the first problem.
struct ReadResult {
  absl::Status problem;  // the first problem (OK: none)
  bool base_ok = false;  // meta and snapshot are good: the state is meaningful
  Meta meta;
  ReplayState state;
  uint64_t generation = 0;  // of the state
  uint64_t snapshot_bytes = 0;
  uint64_t batches = 0;
  uint64_t batch_bytes = 0;
  // Where batches stopped being applied (the first problem among them).
  std::optional<uint64_t> dropped_from;
};

// "generation 13 is missing" / "generations 13..15 are missing".
std::string Missing(uint64_t first, uint64_t last) {
  return first == last ? absl::StrCat("generation ", first, " is missing")
                       : absl::StrCat("generations ", first, "..", last, " are missing");
}

absl::Status RowError(const std::string& path, absl::string_view record,
                      absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", record, ": ", what));
}

bool ColumnInts(sqlite3_stmt* st, int first, int n) {
  for (int i = first; i < first + n; ++i)
    if (sqlite3_column_type(st, i) != SQLITE_INTEGER) return false;
  return true;
}

std::string_view ColumnBlob(sqlite3_stmt* st, int i) {
  const void* p = sqlite3_column_blob(st, i);
  const int n = sqlite3_column_bytes(st, i);
  return p == nullptr ? std::string_view() : std::string_view(static_cast<const char*>(p), n);
}

// Prepares a query of ReadStore: a table or column that is not there (a
// damaged schema) is damage, not an internal error.
absl::Status PrepareRead(Stmt& st, sqlite3* db, const std::string& path, const char* sql) {
  absl::Status s = st.Prepare(db, path, sql);
  if (s.code() == absl::StatusCode::kInternal)
    return absl::DataLossError(absl::StrCat(s.message(), " (the store's schema is damaged)"));
  return s;
}

// Reads everything, checking everything; stops at the first problem.
void ReadStore(sqlite3* db, const std::string& path, ReadResult* out) {
  // Application id and schema version first: a foreign file says so.
  {
    absl::StatusOr<std::string> app = QueryText(db, path, "PRAGMA application_id");
    if (!app.ok()) {
      out->problem = app.status();
      return;
    }
    if (*app != absl::StrCat(kApplicationId)) {
      out->problem = absl::DataLossError(absl::StrCat(
          path, ": not a flowclass rule store (SQLite application_id ", *app, ", expected ",
          kApplicationId, ")"));
      return;
    }
  }
  // SQLite's own structure.
  {
    absl::StatusOr<std::string> qc = QueryText(db, path, "PRAGMA quick_check(1)");
    if (!qc.ok()) {
      out->problem = qc.status();
      return;
    }
    if (*qc != "ok") {
      out->problem = absl::DataLossError(
          absl::StrCat(path, ": SQLite integrity check failed: ",
                       QuoteForMessage(*qc, '"', 200)));
      // Go on: the rows may still be readable (recovery keeps what is).
    }
  }
  absl::Status integrity = out->problem;
  out->problem = absl::OkStatus();
  auto finish = [&](absl::Status s) {
    out->problem = !s.ok() ? s : integrity;
  };

  // meta: exactly one row, id 1.
  {
    Stmt st;
    if (absl::Status s = PrepareRead(st, db, path,
                                    "SELECT id, schema_version, created_unix, head_generation,"
                                    " snapshot_generation, snapshot_chunks, snapshot_rules, crc"
                                    " FROM meta");
        !s.ok())
      return finish(s);
    int rows = 0;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      if (++rows > 1) return finish(RowError(path, "table meta", "more than one row"));
      sqlite3_stmt* q = st.get();
      if (!ColumnInts(q, 0, 8)) return finish(RowError(path, "table meta", "a field is not an integer"));
      Meta& m = out->meta;
      m.schema_version = sqlite3_column_int64(q, 1);
      m.created_unix = sqlite3_column_int64(q, 2);
      m.head_generation = static_cast<uint64_t>(sqlite3_column_int64(q, 3));
      m.snapshot_generation = static_cast<uint64_t>(sqlite3_column_int64(q, 4));
      m.snapshot_chunks = static_cast<uint64_t>(sqlite3_column_int64(q, 5));
      m.snapshot_rules = static_cast<uint64_t>(sqlite3_column_int64(q, 6));
      const uint64_t stored = static_cast<uint64_t>(sqlite3_column_int64(q, 7));
      if (sqlite3_column_int64(q, 0) != 1) return finish(RowError(path, "table meta", "its row is not id 1"));
      if (stored != m.Crc())
        return finish(RowError(path, "table meta",
                               absl::StrFormat("checksum mismatch (stored 0x%08x, computed 0x%08x)",
                                               stored, m.Crc())));
      if (m.schema_version > kSchemaVersion)
        return finish(absl::FailedPreconditionError(absl::StrCat(
            path, ": schema version ", m.schema_version, "; this flowclassd reads versions ",
            kOldestSchemaVersion, " to ", kSchemaVersion)));
      if (m.schema_version < kOldestSchemaVersion)
        return finish(RowError(path, "table meta",
                               absl::StrCat("unknown schema version ", m.schema_version)));
      if (m.head_generation >= kMaxGeneration || m.snapshot_generation > m.head_generation)
        return finish(RowError(path, "table meta",
                               absl::StrCat("snapshot generation ", m.snapshot_generation,
                                            " is beyond the head generation ", m.head_generation)));
    }
    if (rc != SQLITE_DONE) return finish(SqlError(db, rc, path, "read table meta"));
    if (rows == 0) return finish(RowError(path, "table meta", "its row is missing"));
  }
  const Meta& m = out->meta;

  // snapshot: chunks 0..n-1, ids strictly increasing across them.
  {
    Stmt st;
    if (absl::Status s = PrepareRead(st, db, path,
                                    "SELECT chunk, generation, rules, body, crc FROM snapshot"
                                    " ORDER BY chunk");
        !s.ok())
      return finish(s);
    uint64_t next_chunk = 0, n_rules = 0, last_id = 0;
    std::vector<std::string_view> lines;
    int rc;
    auto& rules = out->state.rules();
    rules.reserve(m.snapshot_rules);
    while ((rc = st.Step()) == SQLITE_ROW) {
      sqlite3_stmt* q = st.get();
      const int64_t chunk_col = sqlite3_column_int64(q, 0);
      const std::string rec = absl::StrCat("snapshot chunk ", chunk_col, " (generation ",
                                           m.snapshot_generation, ")");
      if (!ColumnInts(q, 0, 3) || !ColumnInts(q, 4, 1) ||
          sqlite3_column_type(q, 3) != SQLITE_BLOB)
        return finish(RowError(path, rec, "a field has the wrong type"));
      const uint64_t chunk = static_cast<uint64_t>(chunk_col);
      const uint64_t gen = static_cast<uint64_t>(sqlite3_column_int64(q, 1));
      const uint64_t n = static_cast<uint64_t>(sqlite3_column_int64(q, 2));
      const std::string_view body = ColumnBlob(q, 3);
      const uint64_t stored = static_cast<uint64_t>(sqlite3_column_int64(q, 4));
      const uint32_t crc = RecordCrc('s', {chunk, gen, n}, body);
      if (stored != crc)
        return finish(RowError(path, rec, absl::StrFormat(
            "checksum mismatch (stored 0x%08x, computed 0x%08x)", stored, crc)));
      if (chunk != next_chunk)
        return finish(RowError(path, rec, absl::StrCat("chunk ", next_chunk, " is missing")));
      if (gen != m.snapshot_generation)
        return finish(RowError(path, rec, absl::StrCat("the chunk is of generation ", gen)));
      if (chunk >= m.snapshot_chunks)
        return finish(RowError(path, rec, absl::StrCat("table meta records ", m.snapshot_chunks,
                                                       " chunks")));
      // Each rule: parsed (text) or decoded (binary), validated, ids
      // strictly increasing.
      auto take = [&](uint64_t i, absl::StatusOr<Rule> r) -> absl::Status {
        if (!r.ok())
          return RowError(path, rec, absl::StrCat("rule ", i, ": ", r.status().message()));
        if (r->id <= last_id)
          return RowError(path, rec, absl::StrCat("rule ", i, ": id ", r->id,
                                                  " does not follow id ", last_id));
        last_id = r->id;
        rules.emplace(r->id, *std::move(r));
        return absl::OkStatus();
      };
      if (m.schema_version == 1) {
        if (!SplitLines(body, &lines))
          return finish(RowError(path, rec, "the rules do not end with a newline (truncated text)"));
        if (lines.size() != n)
          return finish(RowError(path, rec, absl::StrCat("holds ", lines.size(),
                                                         " rules, its row says ", n)));
        for (size_t i = 0; i < lines.size(); ++i)
          if (absl::Status s = take(i, ParseStoredRule(lines[i])); !s.ok()) return finish(s);
      } else {
        std::string_view in = body;
        uint64_t i = 0;
        for (; !in.empty(); ++i) {
          if (i >= n)
            return finish(RowError(path, rec, absl::StrCat("holds more than the ", n,
                                                           " rules its row says")));
          if (absl::Status s = take(i, ReadRule(&in)); !s.ok()) return finish(s);
        }
        if (i != n)
          return finish(RowError(path, rec, absl::StrCat("holds ", i, " rules, its row says ", n)));
      }
      n_rules += n;
      out->snapshot_bytes += body.size();
      ++next_chunk;
    }
    if (rc != SQLITE_DONE) return finish(SqlError(db, rc, path, "read table snapshot"));
    if (next_chunk != m.snapshot_chunks)
      return finish(RowError(path, "table snapshot",
                             absl::StrCat("holds ", next_chunk, " chunks, table meta records ",
                                          m.snapshot_chunks)));
    if (n_rules != m.snapshot_rules)
      return finish(RowError(path, "table snapshot",
                             absl::StrCat("holds ", n_rules, " rules, table meta records ",
                                          m.snapshot_rules)));
  }
  out->base_ok = true;
  out->generation = m.snapshot_generation;

  // batch: generations snapshot+1, +2, ... up to the head.
  {
    Stmt st;
    if (absl::Status s = PrepareRead(st, db, path,
                                    "SELECT generation, flags, ops, body, crc FROM batch"
                                    " ORDER BY generation");
        !s.ok()) {
      out->dropped_from = out->generation + 1;  // no batch row could be read
      return finish(s);
    }
    int rc;
    auto stop = [&](absl::Status s) {
      out->dropped_from = out->generation + 1;
      finish(std::move(s));
    };
    while ((rc = st.Step()) == SQLITE_ROW) {
      sqlite3_stmt* q = st.get();
      const int64_t gen_col = sqlite3_column_int64(q, 0);
      const std::string rec = absl::StrCat("batch generation ", gen_col);
      if (!ColumnInts(q, 0, 3) || !ColumnInts(q, 4, 1) ||
          sqlite3_column_type(q, 3) != SQLITE_BLOB)
        return stop(RowError(path, rec, "a field has the wrong type"));
      const uint64_t gen = static_cast<uint64_t>(gen_col);
      const uint64_t flags = static_cast<uint64_t>(sqlite3_column_int64(q, 1));
      const uint64_t n = static_cast<uint64_t>(sqlite3_column_int64(q, 2));
      const std::string_view body = ColumnBlob(q, 3);
      const uint64_t stored = static_cast<uint64_t>(sqlite3_column_int64(q, 4));
      const uint32_t crc = RecordCrc('b', {gen, flags, n}, body);
      if (stored != crc)
        return stop(RowError(path, rec, absl::StrFormat(
            "checksum mismatch (stored 0x%08x, computed 0x%08x)", stored, crc)));
      const uint64_t expected = out->generation + 1;
      if (gen != expected) {
        return stop(RowError(path, rec,
                             gen < expected
                                 ? absl::StrCat("not after the snapshot's generation ",
                                                m.snapshot_generation)
                                 : Missing(expected, gen - 1)));
      }
      if (gen > m.head_generation)
        return stop(RowError(path, rec, absl::StrCat("newer than the head generation ",
                                                     m.head_generation, " table meta records")));
      if ((flags & ~static_cast<uint64_t>(kBatchDeleteAllFirst)) != 0)
        return stop(RowError(path, rec, absl::StrCat("unknown flags ", flags)));
      absl::StatusOr<std::vector<RuleOp>> ops =
          m.schema_version == 1 ? DecodeOpsText(body, n) : DecodeOps(body, n);
      if (!ops.ok()) return stop(RowError(path, rec, ops.status().message()));
      if (absl::Status s = out->state.Apply(*ops, (flags & kBatchDeleteAllFirst) != 0); !s.ok())
        return stop(RowError(path, rec, s.message()));
      out->generation = gen;
      ++out->batches;
      out->batch_bytes += body.size();
    }
    if (rc != SQLITE_DONE) return stop(SqlError(db, rc, path, "read table batch"));
    if (out->generation != m.head_generation)
      return stop(RowError(path, "table batch",
                           absl::StrCat("ends at generation ", out->generation,
                                        ", table meta records head generation ",
                                        m.head_generation, ": batch ",
                                        Missing(out->generation + 1, m.head_generation))));
  }
  finish(absl::OkStatus());
}

std::vector<const Rule*> SortedById(absl::flat_hash_map<uint64_t, Rule>& rules) {
  // Sorted as (id, pointer) pairs: comparing through the pointers chased
  // each rule in the map, most of a restore's sort time.
  std::vector<std::pair<uint64_t, const Rule*>> by_id;
  by_id.reserve(rules.size());
  for (const auto& [id, r] : rules) by_id.emplace_back(id, &r);
  std::sort(by_id.begin(), by_id.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const Rule*> v;
  v.reserve(by_id.size());
  for (const auto& [id, r] : by_id) v.push_back(r);
  return v;
}

// DIR/PREFIX-<unix seconds>.db, or .1.db, .2.db, ... when that exists.
std::string KeptName(const std::string& dir, absl::string_view prefix) {
  const std::string base = absl::StrCat(dir, "/", prefix, "-", static_cast<int64_t>(::time(nullptr)));
  std::string name = base + ".db";
  for (int i = 1; Exists(name) || Exists(name + "-wal"); ++i) name = absl::StrCat(base, ".", i, ".db");
  return name;
}

std::string DamagedName(const std::string& dir) { return KeptName(dir, "rules.damaged"); }

}  // namespace

// ------------------------------------------------------------------ RuleStore

RuleStore::RuleStore(std::string dir, std::string path, RuleStoreOptions options)
    : dir_(std::move(dir)),
      path_(std::move(path)),
      options_(options),
      scratch_(std::make_unique<store_internal::ByteBuffer>()) {}

RuleStore::~RuleStore() { CloseDb(db_, failed_.ok()); }

absl::StatusOr<std::unique_ptr<RuleStore>> RuleStore::Open(const std::string& dir,
                                                            RuleStoreOptions options) {
  if (dir.empty()) return absl::InvalidArgumentError("store path: empty directory name");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::UnavailableError(absl::StrCat(dir, ": cannot create directory: ", ec.message()));
  const std::string path = dir + "/rules.db";
  std::unique_ptr<RuleStore> store(new RuleStore(dir, path, options));
  if (!Exists(path)) {
    if (Exists(path + "-wal")) {
      // A -wal without its database: never attach it to a new one.
      return absl::DataLossError(absl::StrCat(path, " is missing but ", path,
                                              "-wal exists (the database was removed)"));
    }
    const std::string tmp = path + ".tmp";
    if (absl::Status s = WriteStoreFile(tmp, 0, {}, static_cast<int64_t>(::time(nullptr)),
                                        options.snapshot_chunk_rules, store->write_version());
        !s.ok())
      return s;
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      return absl::UnavailableError(absl::StrCat(tmp, ": cannot rename to ", path, ": ",
                                                 strerror(errno)));
    if (absl::Status s = FsyncPath(dir, true); !s.ok()) return s;
  } else if (absl::Status s = RemoveIfExists(path + ".tmp"); !s.ok()) {
    return s;  // an unfinished creation or recovery
  }
  return store;
}

absl::StatusOr<RuleStoreState> RuleStore::Load() {
  if (loaded_ || db_ != nullptr) return absl::FailedPreconditionError(path_ + ": Load: already loaded");
  ReadResult read;
  if (!Exists(path_)) {
    read.problem = absl::DataLossError(absl::StrCat(path_, ": the file is missing"));
  } else if (FileBytes(path_) == 0) {
    read.problem = absl::DataLossError(
        absl::StrCat(path_, ": the file is empty (0 bytes): truncated"));
  } else {
    // Before SQLite replays the -wal: would it drop committed groups after
    // a damaged frame?  (internal/wal_scan.h)
    absl::StatusOr<WalScan> wal = ScanWal(path_);
    if (!wal.ok()) return wal.status();
    absl::StatusOr<sqlite3*> db = OpenDb(path_, /*create=*/false, kApplicationId);
    if (!db.ok()) {
      if (!absl::IsDataLoss(db.status())) return db.status();  // in use, I/O: nothing to recover
      read.problem = db.status();
    } else {
      db_ = *db;
      ReadStore(db_, path_, &read);
      if (!read.problem.ok() && !absl::IsDataLoss(read.problem)) {
        // Newer schema, I/O error: not damage, never "recovered".
        absl::Status s = read.problem;
        CloseDb(std::exchange(db_, nullptr), false);
        return s;
      }
      if (read.problem.ok() && wal->dropped_commits() > 0) {
        // What SQLite read is consistent (the groups before the damage), but
        // acknowledged groups after it are gone.
        const uint64_t n = wal->dropped_commits();
        read.problem = absl::DataLossError(absl::StrCat(
            path_, "-wal: ",
            wal->header_ok
                ? absl::StrCat("frame ", wal->first_bad_frame, " of ", wal->frames,
                               " fails its checksum, and ", n, " committed group",
                               n == 1 ? "" : "s",
                               " after it would be lost (SQLite would drop them without an "
                               "error)")
                : absl::StrCat("the WAL header is damaged: SQLite would replay none of the ",
                               n + 1, " committed groups in it, without an error"),
            "; the state before the damage is generation ",
            read.generation));
        read.dropped_from = read.generation + 1;
      }
    }
  }

  RuleStoreState state;
  RuleStoreInfo& info = state.info;
  info.path = path_;
  // Writes the state of `read` as a new rules.db (rules.db.tmp, renamed over
  // it), keeping the old file (and its -wal) as `keep`, and reads the new
  // one back with every check.
  auto rewrite = [&](const std::string& keep, int64_t created) -> absl::Status {
    CloseDb(std::exchange(db_, nullptr), false);
    const std::vector<const Rule*> sorted = SortedById(read.state.rules());
    const std::string tmp = path_ + ".tmp";
    if (absl::Status s = WriteStoreFile(tmp, read.generation, sorted, created,
                                        options_.snapshot_chunk_rules);
        !s.ok())
      return s;
    if (Exists(path_) && ::link(path_.c_str(), keep.c_str()) != 0)
      return absl::UnavailableError(absl::StrCat(path_, ": cannot keep it as ", keep, ": ",
                                                 strerror(errno)));
    if (Exists(path_ + "-wal") &&
        ::rename((path_ + "-wal").c_str(), (keep + "-wal").c_str()) != 0)
      return absl::UnavailableError(absl::StrCat(path_, "-wal: cannot move it to ", keep,
                                                 "-wal: ", strerror(errno)));
    if (::rename(tmp.c_str(), path_.c_str()) != 0)
      return absl::UnavailableError(absl::StrCat(tmp, ": cannot rename to ", path_, ": ",
                                                 strerror(errno)));
    if (absl::Status s = FsyncPath(dir_, true); !s.ok()) return s;
    absl::StatusOr<sqlite3*> db = OpenDb(path_, /*create=*/false, kApplicationId);
    if (!db.ok()) return db.status();
    db_ = *db;
    ReadResult again;  // the new file, checked like any other
    ReadStore(db_, path_, &again);
    if (!again.problem.ok()) {
      CloseDb(std::exchange(db_, nullptr), false);
      return again.problem;
    }
    read.meta = again.meta;
    read.snapshot_bytes = again.snapshot_bytes;
    read.batches = 0;
    read.batch_bytes = 0;
    return absl::OkStatus();
  };
  if (!read.problem.ok()) {
    if (!options_.recover_to_last_consistent) {
      CloseDb(std::exchange(db_, nullptr), false);
      return read.problem;
    }
    // Recovery: the last consistent state into a new rules.db; the damaged
    // files are kept.
    info.recovered = true;
    info.dropped.push_back(std::string(read.problem.message()));
    if (!read.base_ok) {
      read.generation = 0;
      read.state.rules().clear();
      info.dropped.push_back(
          "nothing consistent was left: the store starts empty at generation 0");
    } else if (read.dropped_from.has_value()) {
      info.dropped.push_back(absl::StrCat("batches from generation ", *read.dropped_from,
                                          " on were dropped; the state is generation ",
                                          read.generation));
    } else {
      info.dropped.push_back(absl::StrCat("every record read back: the state is generation ",
                                          read.generation));
    }
    const std::string damaged = DamagedName(dir_);
    const int64_t created = read.base_ok ? read.meta.created_unix : static_cast<int64_t>(::time(nullptr));
    if (absl::Status s = rewrite(damaged, created); !s.ok()) return s;
    info.damaged_file = damaged;
  } else if (read.meta.schema_version < kSchemaVersion && write_version() == kSchemaVersion) {
    // Migration: an older store that read back whole is rewritten in the
    // current version; the old file is kept (an older flowclassd can still
    // read it).
    info.migrated_from_version = static_cast<int>(read.meta.schema_version);
    info.migrated_file = KeptName(dir_, absl::StrCat("rules.v", read.meta.schema_version));
    if (absl::Status s = rewrite(info.migrated_file, read.meta.created_unix); !s.ok()) return s;
  }

  // A -wal left by a crash or a kill goes into rules.db now, and is emptied,
  // before anything is appended: the next commit starts a new cycle of the
  // -wal, so a torn transaction's remnants and the groups already read are
  // not left in it for a later crash to replay (unsettled_groups_ 0 is
  // then true).
  if (FileBytes(path_ + "-wal") > 0) {
    if (absl::Status s = Checkpoint(db_, path_); !s.ok()) {
      CloseDb(std::exchange(db_, nullptr), false);
      return s;
    }
  }
  loaded_ = true;
  generation_ = read.generation;
  created_unix_ = read.meta.created_unix;
  schema_version_ = static_cast<int>(read.meta.schema_version);
  snapshot_generation_ = read.meta.snapshot_generation;
  snapshot_chunks_ = read.meta.snapshot_chunks;
  snapshot_rules_ = read.meta.snapshot_rules;
  snapshot_bytes_ = read.snapshot_bytes;
  batches_ = read.batches;
  batch_bytes_ = read.batch_bytes;

  state.generation = generation_;
  // Sorted as pointers (a Rule is ~180 bytes), then moved out once.
  const std::vector<const Rule*> sorted = SortedById(read.state.rules());
  state.rules.reserve(sorted.size());
  for (const Rule* r : sorted) state.rules.push_back(std::move(*const_cast<Rule*>(r)));
  info.schema_version = static_cast<int>(read.meta.schema_version);
  info.created_unix_seconds = created_unix_;
  info.snapshot_generation = snapshot_generation_;
  info.snapshot_rules = snapshot_rules_;
  info.batches = batches_;
  info.file_bytes = FileBytes(path_) + FileBytes(path_ + "-wal");
  return state;
}

absl::Status RuleStore::CheckUsable(const char* what) const {
  if (!failed_.ok())
    return absl::Status(failed_.code(),
                        absl::StrCat(what, ": the store failed earlier: ", failed_.message()));
  if (!loaded_) return absl::FailedPreconditionError(absl::StrCat(path_, ": ", what, " before Load"));
  return absl::OkStatus();
}

absl::Status RuleStore::Fail(absl::Status s) {
  if (db_ != nullptr && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  if (failed_.ok()) failed_ = s;
  return s;
}

absl::Status RuleStore::AppendGroup(absl::Span<const StoreBatch> group) {
  if (absl::Status s = CommitGroup(group); !s.ok()) return s;
  return Settle();
}

absl::Status RuleStore::Settle() {
  if (absl::Status s = CheckUsable("Settle"); !s.ok()) return s;
  if (unsettled_groups_ == 0) return absl::OkStatus();
  if (absl::Status s = CheckpointGroups(); !s.ok()) return s;
  if (absl::Status s = MaybeAutoCompact(); !s.ok()) return Fail(s);
  return absl::OkStatus();
}

absl::Status RuleStore::CheckpointGroups() {
  if (!options_.testing_skip_checkpoint) {
    if (absl::Status s = Checkpoint(db_, path_); !s.ok()) return Fail(s);
  }
  unsettled_groups_ = 0;
  unsettled_bytes_ = 0;
  return absl::OkStatus();
}

absl::Status RuleStore::CommitGroup(absl::Span<const StoreBatch> group) {
  if (absl::Status s = CheckUsable("AppendGroup"); !s.ok()) return s;
  // The -wal holds at most checkpoint_groups committed groups, this one
  // included, and about checkpoint_bytes of batches before it (Load checks
  // them: internal/wal_scan.h).  Only the checkpoint: an automatic compaction
  // waits for the next Settle, off the commit's path.
  if (unsettled_groups_ >= std::max<uint32_t>(options_.checkpoint_groups, 1) ||
      (options_.checkpoint_bytes != 0 && unsettled_bytes_ >= options_.checkpoint_bytes)) {
    if (absl::Status s = CheckpointGroups(); !s.ok()) return s;
  }
  if (group.empty()) return absl::OkStatus();
  // Every batch is checked and encoded before anything is written, into one
  // buffer kept from group to group (no allocation per batch or rule).
  store_internal::ByteBuffer& buf = *scratch_;
  buf.Clear();
  std::vector<size_t> ends;
  ends.reserve(group.size());
  for (size_t i = 0; i < group.size(); ++i) {
    const StoreBatch& b = group[i];
    const uint64_t expected = generation_ + 1 + i;
    if (b.generation != expected)
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": AppendGroup: batch ", i, " has generation ", b.generation,
          ", the store expects ", expected));
    if (b.generation >= kMaxGeneration)
      return absl::InvalidArgumentError(absl::StrCat(path_, ": generation ", b.generation,
                                                     " is too large"));
    const size_t start = buf.size();
    const store_internal::OpsAppend a = store_internal::AppendOps(b.ops, &buf);
    if (a.problem == store_internal::OpsAppend::kUnknownKind)
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": AppendGroup: batch ", i, ", operation ", a.op, ": unknown kind ",
          static_cast<int>(b.ops[a.op].kind)));
    if (a.problem == store_internal::OpsAppend::kDoesNotFit)
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": AppendGroup: batch ", i, ", operation ", a.op, ": rule id ",
          b.ops[a.op].rule.id, " has match bits outside every field"));
    if (schema_version_ == 1) {  // a version-1 store (tests): text records
      buf.Truncate(start);
      buf.Append(EncodeOpsText(b.ops));
    }
    ends.push_back(buf.size());
  }
  auto body = [&](size_t i) {
    const size_t start = i == 0 ? 0 : ends[i - 1];
    return buf.view().substr(start, ends[i] - start);
  };

  if (absl::Status s = Exec(db_, path_, "BEGIN IMMEDIATE"); !s.ok()) return Fail(s);
  Stmt st;
  if (absl::Status s = st.Prepare(
          db_, path_, "INSERT INTO batch (generation, flags, ops, body, crc) VALUES (?, ?, ?, ?, ?)");
      !s.ok())
    return Fail(s);
  uint64_t bytes = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    const StoreBatch& b = group[i];
    const uint64_t flags = b.delete_all_first ? kBatchDeleteAllFirst : 0;
    const uint64_t n = b.ops.size();
    st.BindInt(1, static_cast<int64_t>(b.generation));
    st.BindInt(2, static_cast<int64_t>(flags));
    st.BindInt(3, static_cast<int64_t>(n));
    const std::string_view bytes_i = body(i);
    st.BindBlob(4, bytes_i);
    st.BindInt(5, RecordCrc('b', {b.generation, flags, n}, bytes_i));
    if (int rc = st.Step(); rc != SQLITE_DONE)
      return Fail(SqlError(db_, rc, path_, absl::StrCat("write batch generation ", b.generation)));
    st.Reset();
    bytes += bytes_i.size();
  }
  Meta m;
  m.schema_version = schema_version_;
  m.created_unix = created_unix_;
  m.head_generation = group.back().generation;
  m.snapshot_generation = snapshot_generation_;
  m.snapshot_chunks = snapshot_chunks_;
  m.snapshot_rules = snapshot_rules_;
  if (absl::Status s = WriteMeta(db_, path_, m, false); !s.ok()) return Fail(s);
  if (absl::Status s = Exec(db_, path_, "COMMIT"); !s.ok()) return Fail(s);
  generation_ = m.head_generation;
  // Kept for the next group, unless an unusually large one grew it.
  if (buf.capacity() > (16u << 20)) *scratch_ = store_internal::ByteBuffer();
  batches_ += group.size();
  batch_bytes_ += bytes;
  ++groups_appended_;
  ++unsettled_groups_;
  unsettled_bytes_ += bytes;
  return absl::OkStatus();
}

absl::Status RuleStore::MaybeAutoCompact() {
  const bool by_bytes =
      options_.auto_compact_bytes > 0 &&
      batch_bytes_ >= std::max<double>(static_cast<double>(options_.auto_compact_bytes),
                                       options_.auto_compact_ratio *
                                           static_cast<double>(snapshot_bytes_));
  const bool by_count = options_.auto_compact_batches > 0 && batches_ >= options_.auto_compact_batches;
  return by_bytes || by_count ? Compact() : absl::OkStatus();
}

absl::Status RuleStore::Compact() {
  if (absl::Status s = CheckUsable("Compact"); !s.ok()) return s;
  if (absl::Status s = Exec(db_, path_, "BEGIN IMMEDIATE"); !s.ok()) return Fail(s);
  ReadResult read;
  ReadStore(db_, path_, &read);
  if (!read.problem.ok()) return Fail(read.problem);
  if (read.generation != generation_)
    return Fail(absl::DataLossError(absl::StrCat(path_, ": Compact: the store reads back at generation ",
                                                 read.generation, ", written up to ", generation_)));
  const std::vector<const Rule*> sorted = SortedById(read.state.rules());
  Meta m = read.meta;
  uint64_t bytes = 0;
  if (absl::Status s = Exec(db_, path_, "DELETE FROM batch"); !s.ok()) return Fail(s);
  if (absl::Status s = WriteSnapshot(db_, path_, generation_, sorted, options_.snapshot_chunk_rules,
                                     schema_version_, &m, &bytes);
      !s.ok())
    return Fail(s);
  if (absl::Status s = WriteMeta(db_, path_, m, false); !s.ok()) return Fail(s);
  if (absl::Status s = Exec(db_, path_, "COMMIT"); !s.ok()) return Fail(s);
  if (absl::Status s = Checkpoint(db_, path_); !s.ok()) return Fail(s);
  unsettled_groups_ = 0;
  unsettled_bytes_ = 0;
  snapshot_generation_ = m.snapshot_generation;
  snapshot_chunks_ = m.snapshot_chunks;
  snapshot_rules_ = m.snapshot_rules;
  snapshot_bytes_ = bytes;
  batches_ = 0;
  batch_bytes_ = 0;
  ++compactions_;
  return absl::OkStatus();
}

RuleStoreStats RuleStore::Stats() const {
  RuleStoreStats s;
  s.generation = generation_;
  s.snapshot_generation = snapshot_generation_;
  s.snapshot_rules = snapshot_rules_;
  s.snapshot_bytes = snapshot_bytes_;
  s.batches = batches_;
  s.batch_bytes = batch_bytes_;
  s.groups_appended = groups_appended_;
  s.unsettled_groups = unsettled_groups_;
  s.compactions = compactions_;
  s.file_bytes = FileBytes(path_) + FileBytes(path_ + "-wal");
  return s;
}

}  // namespace flowclass
