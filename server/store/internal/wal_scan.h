// internal/wal_scan.h — reads a SQLite write-ahead log the way SQLite's
// recovery does, to tell a torn tail from damage in the middle.
//
// Why the store reads SQLite's file itself: when SQLite opens a database
// whose -wal has a frame that fails its checksum, it replays the frames
// before it and silently ignores everything from that frame on, committed
// transactions included (https://www.sqlite.org/fileformat2.html#walformat,
// "WAL Reset" and "Checksum Algorithm").  For the last transaction in the
// file that is what we want (a torn tail: a commit that never completed).
// But the store leaves several committed groups in the -wal between
// checkpoints (RuleStoreOptions::checkpoint_groups), and a damaged frame in
// an early group would silently drop the acknowledged groups after it.  So
// Load scans the -wal first: frames after the damaged one whose own
// checksum still chains from their predecessor's stored checksum (SQLite's
// checksums are cumulative, and each frame header stores the running value)
// are intact, and an intact commit frame after the damaged transaction is a
// committed transaction SQLite would drop.
//
// The scan reads the file as untrusted bytes (any length, any content) and
// only reads; it never changes the file.  SQLite itself stays the only
// writer and the only reader of the data.
#ifndef FLOWCLASS_SERVER_STORE_INTERNAL_WAL_SCAN_H_
#define FLOWCLASS_SERVER_STORE_INTERNAL_WAL_SCAN_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace flowclass {
namespace store_internal {

struct WalScan {
  bool present = false;     // the -wal file exists and is not empty
  bool header_ok = false;   // magic, version, page size and checksum good
  uint32_t page_size = 0;   // of the frames (from the header, else the database's)
  uint64_t frames = 0;      // whole frames in the file
  // Frames SQLite replays: the valid prefix up to its last commit frame.
  uint64_t replayed_frames = 0;
  uint64_t replayed_commits = 0;  // committed transactions in them
  // The first whole frame (1-based) that fails SQLite's checks (salts,
  // checksum, page number): where its replay stops.  0 when every whole
  // frame passes (bytes after the last whole frame, a torn tail, are not a
  // frame).  Not damage by itself: a torn last transaction stops there too.
  uint64_t first_bad_frame = 0;
  // Commit frames of the current WAL (its salts) after the last replayed
  // commit that are intact on their own: the damaged transaction's own
  // commit (when intact), then the committed transactions after it.  Two or
  // more mean SQLite would silently drop a committed transaction that
  // follows the damaged one.
  uint64_t intact_commits_after = 0;

  // Committed transactions after the damaged one, which SQLite would drop.
  uint64_t dropped_commits() const {
    return intact_commits_after > 1 ? intact_commits_after - 1 : 0;
  }
};

// Scans `wal` (the bytes of DIR/rules.db-wal); `db_page_size` is the
// database's page size, used when the WAL header itself is damaged.
WalScan ScanWalBytes(std::string_view wal, uint32_t db_page_size);
// Reads DIR/rules.db's page size and DIR/rules.db-wal, then ScanWalBytes.  A
// missing -wal is an empty scan; UNAVAILABLE when a file cannot be read.
absl::StatusOr<WalScan> ScanWal(const std::string& db_path);

}  // namespace store_internal
}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_STORE_INTERNAL_WAL_SCAN_H_
