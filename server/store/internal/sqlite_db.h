// internal/sqlite_db.h — the SQLite calls of the rule store (rule_store.cc):
// statuses from SQLite result codes, a prepared statement, opening a store
// file in its modes (WAL, synchronous=FULL, exclusive lock), checkpoints,
// and the few POSIX file calls around them.
//
// Every function names `path` in its errors.  One thread at a time per
// sqlite3* (the store opens it SQLITE_OPEN_NOMUTEX); control path only.
#ifndef FLOWCLASS_SERVER_STORE_INTERNAL_SQLITE_DB_H_
#define FLOWCLASS_SERVER_STORE_INTERNAL_SQLITE_DB_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flowclass {
namespace store_internal {

// DATA_LOSS for a corrupt or foreign file, FAILED_PRECONDITION for a store
// another process holds, UNAVAILABLE for I/O, INTERNAL otherwise.
absl::Status SqlStatus(int rc, const std::string& msg);
// SqlStatus with "PATH: WHAT: <SQLite's message>".
absl::Status SqlError(sqlite3* db, int rc, const std::string& path, absl::string_view what);

class Stmt {
 public:
  Stmt() = default;
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  absl::Status Prepare(sqlite3* db, const std::string& path, const char* sql) {
    const int rc = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr);
    if (rc != SQLITE_OK) return SqlError(db, rc, path, sql);
    return absl::OkStatus();
  }
  sqlite3_stmt* get() const { return s_; }
  void BindInt(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void BindBlob(int i, std::string_view b) {
    // A null pointer would bind NULL, not an empty blob.
    sqlite3_bind_blob(s_, i, b.empty() ? "" : b.data(), static_cast<int>(b.size()),
                      SQLITE_STATIC);
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(s_); }
  void Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }

 private:
  sqlite3_stmt* s_ = nullptr;
};

// sqlite3_exec of `sql`; errors say `what` (the SQL itself when null).
absl::Status Exec(sqlite3* db, const std::string& path, const char* sql,
                  const char* what = nullptr);
// One-value PRAGMA (or SELECT) as text.
absl::StatusOr<std::string> QueryText(sqlite3* db, const std::string& path, const char* sql);
// Closes `db`; without `checkpoint`, leaves the -wal file as it is.
void CloseDb(sqlite3* db, bool checkpoint);
// Opens `path` (which must exist unless `create`) in the store's modes and
// takes its exclusive lock; an existing file must carry `application_id`.
absl::StatusOr<sqlite3*> OpenDb(const std::string& path, bool create, int32_t application_id);
// Copies the WAL into the database file, syncs it and truncates the -wal to
// 0 bytes (SQLITE_CHECKPOINT_TRUNCATE).
absl::Status Checkpoint(sqlite3* db, const std::string& path);

uint64_t FileBytes(const std::string& path);  // 0 when it cannot be stat'ed
bool Exists(const std::string& path);         // lstat: a dangling link exists
absl::Status FsyncPath(const std::string& path, bool directory);
absl::Status RemoveIfExists(const std::string& path);

}  // namespace store_internal
}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_STORE_INTERNAL_SQLITE_DB_H_
