// sqlite_db.cc — see sqlite_db.h.
#include "server/store/internal/sqlite_db.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flowclass {
namespace store_internal {

absl::Status SqlStatus(int rc, const std::string& msg) {
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
      return absl::DataLossError(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::FailedPreconditionError(msg);
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status SqlError(sqlite3* db, int rc, const std::string& path,
                      absl::string_view what) {
  // SQLite's message may quote bytes of a damaged file (a schema's text):
  // cut and escaped, as every quoted input (common/quote.h).
  const std::string raw = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string detail = absl::CHexEscape(absl::string_view(raw).substr(0, 200));
  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
    detail += " (the store is in use by another process)";
  return SqlStatus(rc, absl::StrCat(path, ": ", what, ": ", detail));
}

absl::Status Exec(sqlite3* db, const std::string& path, const char* sql,
                  const char* what) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    const std::string raw = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    std::string msg = absl::CHexEscape(absl::string_view(raw).substr(0, 200));
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
      msg += " (the store is in use by another process)";
    return SqlStatus(rc, absl::StrCat(path, ": ", what != nullptr ? what : sql, ": ", msg));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> QueryText(sqlite3* db, const std::string& path,
                                      const char* sql) {
  Stmt st;
  if (absl::Status s = st.Prepare(db, path, sql); !s.ok()) return s;
  const int rc = st.Step();
  if (rc == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(st.get(), 0);
    return std::string(t != nullptr ? reinterpret_cast<const char*>(t) : "");
  }
  if (rc == SQLITE_DONE) return std::string();
  return SqlError(db, rc, path, sql);
}

void CloseDb(sqlite3* db, bool checkpoint) {
  if (db == nullptr) return;
  if (!checkpoint) sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  sqlite3_close_v2(db);
}

absl::StatusOr<sqlite3*> OpenDb(const std::string& path, bool create, int32_t application_id) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (create) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = SqlError(db, rc, path, "cannot open");
    sqlite3_close_v2(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  // EXCLUSIVE before the first access: one process at a time, and no -shm
  // file (the WAL index lives in this process's memory).
  for (const char* sql : {"PRAGMA locking_mode=EXCLUSIVE", "PRAGMA synchronous=FULL",
                          "PRAGMA wal_autocheckpoint=0", "PRAGMA cache_size=-32768"}) {
    if (absl::Status s = Exec(db, path, sql, "cannot open"); !s.ok()) {
      CloseDb(db, false);
      return s;
    }
  }
  if (create) {
    if (absl::Status s = Exec(db, path, "PRAGMA page_size=16384"); !s.ok()) {
      CloseDb(db, false);
      return s;
    }
  } else {
    // Before anything may write to it: a foreign file is left as it is.
    absl::StatusOr<std::string> app = QueryText(db, path, "PRAGMA application_id");
    if (!app.ok() || *app != absl::StrCat(application_id)) {
      CloseDb(db, false);
      if (!app.ok()) return app.status();
      return absl::DataLossError(absl::StrCat(
          path, ": not a flowclass rule store (SQLite application_id ", *app, ", expected ",
          application_id, ")"));
    }
    // The store writes only WAL files: one in another journal mode was not
    // written by it, and switching it would rewrite its header (the fuzzer
    // found a refused store changed that way).
    absl::StatusOr<std::string> was = QueryText(db, path, "PRAGMA journal_mode");
    if (!was.ok() || *was != "wal") {
      CloseDb(db, false);
      if (!was.ok()) return was.status();
      return absl::DataLossError(absl::StrCat(
          path, ": not in WAL mode (journal_mode is ", *was,
          "): the rule store writes only WAL files; left as it is"));
    }
  }
  absl::StatusOr<std::string> mode = QueryText(db, path, "PRAGMA journal_mode=WAL");
  if (!mode.ok() || *mode != "wal") {
    CloseDb(db, false);
    if (!mode.ok()) return mode.status();
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot switch to WAL mode (journal_mode is ", *mode, ")"));
  }
  // The lock is taken by a write transaction (a read one in WAL mode would
  // leave other processes free to open the file).
  if (absl::Status s = Exec(db, path, "BEGIN IMMEDIATE; COMMIT"); !s.ok()) {
    CloseDb(db, false);
    return s;
  }
  return db;
}

absl::Status Checkpoint(sqlite3* db, const std::string& path) {
  int log = 0, ckpt = 0;
  // TRUNCATE: the -wal is emptied, not only copied.  A PASSIVE checkpoint
  // left the checkpointed groups in it, and after a crash SQLite replays a
  // -wal from its start: damage in its last group would then replay the
  // older groups over a newer rules.db.
  const int rc = sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_TRUNCATE, &log, &ckpt);
  if (rc != SQLITE_OK) return SqlError(db, rc, path, "checkpoint");
  if (log != ckpt)
    return absl::UnavailableError(absl::StrFormat(
        "%s: checkpoint copied %d of %d WAL frames", path, ckpt, log));
  return absl::OkStatus();
}

uint64_t FileBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

absl::Status FsyncPath(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::UnavailableError(absl::StrCat(path, ": cannot open to sync: ", strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return absl::UnavailableError(absl::StrCat(path, ": fsync: ", strerror(err)));
  return absl::OkStatus();
}

absl::Status RemoveIfExists(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return absl::UnavailableError(absl::StrCat(path, ": cannot remove: ", strerror(errno)));
  return absl::OkStatus();
}

}  // namespace store_internal
}  // namespace flowclass
