// libFuzzer target for the rule store's scan of rules.db-wal
// (server/store/internal/wal_scan.h): the bytes of a SQLite write-ahead log,
// untrusted, as Load reads them before SQLite replays them.  The seed is a
// real WAL (SQLite, 512-byte pages, four committed transactions), so short
// frames let mutations reach the frame checks.
//
// Invariants (any violation aborts):
//   1. No crash, no read outside the input (ASan in the replay build).
//   2. The counts are consistent: replayed commits <= replayed frames <=
//      frames; the first bad frame follows the replayed ones; a damaged
//      header replays nothing; intact commits after the damage <= frames.
//   3. The scan is a function of the bytes: twice the same answer, and the
//      answer for the input with its torn tail (bytes after the last whole
//      frame) cut off is the same.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/store/internal/wal_scan.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool Same(const flowclass::store_internal::WalScan& a, const flowclass::store_internal::WalScan& b) {
  return a.present == b.present && a.header_ok == b.header_ok && a.page_size == b.page_size &&
         a.frames == b.frames && a.replayed_frames == b.replayed_frames &&
         a.replayed_commits == b.replayed_commits && a.first_bad_frame == b.first_bad_frame &&
         a.intact_commits_after == b.intact_commits_after;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flowclass::fuzz::Check;
  using flowclass::store_internal::ScanWalBytes;
  using flowclass::store_internal::WalScan;
  const std::string_view wal(reinterpret_cast<const char*>(data), size);
  // The database's page size matters only when the WAL header is damaged.
  for (uint32_t db_page : {512u, 16384u, 0u, 1000u}) {
    const WalScan s = ScanWalBytes(wal, db_page);
    Check(s.present == (size > 0), "present iff the file has bytes");
    Check(s.replayed_commits <= s.replayed_frames, "replayed commits <= replayed frames");
    Check(s.replayed_frames <= s.frames, "replayed frames <= frames");
    Check(s.first_bad_frame == 0 ||
              (s.first_bad_frame > s.replayed_frames && s.first_bad_frame <= s.frames),
          "the first bad frame follows the replayed ones");
    Check(s.header_ok || s.replayed_frames == 0, "a damaged header replays nothing");
    Check(s.intact_commits_after <= s.frames, "intact commits after the damage <= frames");
    Check(s.dropped_commits() < s.frames || s.frames == 0, "dropped commits < frames");
    Check(s.frames == 0 || s.page_size != 0, "frames only with a page size");
    Check(Same(s, ScanWalBytes(wal, db_page)), "the same bytes, the same scan");
    if (s.frames > 0) {
      const size_t whole = 32 + static_cast<size_t>(s.frames) * (24 + s.page_size);
      Check(whole <= size, "whole frames fit in the input");
      Check(Same(s, ScanWalBytes(wal.substr(0, whole), db_page)),
            "a torn tail after the last whole frame changes nothing");
    }
  }
  return 0;
}
