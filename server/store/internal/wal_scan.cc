#include "server/store/internal/wal_scan.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/store/internal/sqlite_db.h"

namespace flowclass {
namespace store_internal {
namespace {

// https://www.sqlite.org/fileformat2.html#walformat
constexpr size_t kWalHeader = 32;
constexpr size_t kFrameHeader = 24;
constexpr uint32_t kWalMagic = 0x377f0682;  // | 1: checksums over big-endian words
constexpr uint32_t kWalVersion = 3007000;

uint32_t Be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint32_t Le32(const unsigned char* p) {
  return (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
}

struct Cksum {
  uint32_t s0 = 0, s1 = 0;
  bool operator==(const Cksum&) const = default;
};

// SQLite's walChecksumBytes: pairs of 32-bit words, in the byte order the
// magic number names; `n` is a multiple of 8.
Cksum Checksum(bool big_endian, const unsigned char* p, size_t n, Cksum c) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint32_t a = big_endian ? Be32(p + i) : Le32(p + i);
    const uint32_t b = big_endian ? Be32(p + i + 4) : Le32(p + i + 4);
    c.s0 += a + c.s1;
    c.s1 += b + c.s0;
  }
  return c;
}

Cksum Stored(const unsigned char* p) { return {Be32(p), Be32(p + 4)}; }

bool ValidPageSize(uint32_t n) { return n >= 512 && n <= 65536 && (n & (n - 1)) == 0; }

}  // namespace

WalScan ScanWalBytes(std::string_view wal, uint32_t db_page_size) {
  WalScan scan;
  if (wal.empty()) return scan;
  scan.present = true;
  if (wal.size() < kWalHeader) return scan;
  const auto* h = reinterpret_cast<const unsigned char*>(wal.data());
  const uint32_t magic = Be32(h);
  const bool big_endian = (magic & 1) != 0;
  scan.header_ok = (magic & ~1u) == kWalMagic && Be32(h + 4) == kWalVersion &&
                   ValidPageSize(Be32(h + 8)) &&
                   Checksum(big_endian, h, 24, {}) == Stored(h + 24);
  scan.page_size = scan.header_ok ? Be32(h + 8) : db_page_size;
  if (!ValidPageSize(scan.page_size)) return scan;
  const size_t frame_bytes = kFrameHeader + scan.page_size;
  scan.frames = (wal.size() - kWalHeader) / frame_bytes;
  if (scan.frames == 0) return scan;

  auto frame = [&](uint64_t i) { return h + kWalHeader + (i - 1) * frame_bytes; };
  // The salts of the current WAL cycle: the header's, or the first frame's
  // when the header itself is damaged (SQLite then replays nothing).
  const unsigned char* salts = scan.header_ok ? h + 16 : frame(1) + 8;
  // A frame is valid when it carries the salts, names a page and its
  // checksum continues `seed` (SQLite's walDecodeFrame).
  auto valid = [&](uint64_t i, Cksum seed) {
    const unsigned char* f = frame(i);
    if (std::memcmp(f + 8, salts, 8) != 0 || Be32(f) == 0) return false;
    const Cksum c = Checksum(big_endian, f + kFrameHeader, scan.page_size,
                             Checksum(big_endian, f, 8, seed));
    return c == Stored(f + 16);
  };
  auto is_commit = [&](uint64_t i) { return Be32(frame(i) + 4) != 0; };

  // What SQLite's recovery replays: the valid frames up to the last commit.
  uint64_t i = 1;
  if (scan.header_ok) {
    for (Cksum running = Stored(h + 24); i <= scan.frames; ++i) {
      if (!valid(i, running)) break;
      running = Stored(frame(i) + 16);
      if (is_commit(i)) {
        scan.replayed_frames = i;
        ++scan.replayed_commits;
      }
    }
  }
  if (i <= scan.frames) scan.first_bad_frame = i;
  else return scan;  // read to the end: at most a torn tail

  // After the replayed prefix: the commit frames still intact on their own,
  // each checked from the checksum its predecessor stores.  The first bad
  // frame counts when it is marked as a commit (its bytes may be what is
  // damaged) and is of this cycle: it carries the salts, or, since salts
  // are not under the checksum, the next frame chains from the checksum it
  // stores (a stale frame of an earlier cycle has no such successor).  A
  // damaged commit mark (nTruncate zeroed) is not seen: then the damaged
  // group and the next one count as one.
  const uint64_t k = scan.first_bad_frame;
  const unsigned char* bad = frame(k);
  if (is_commit(k) && (std::memcmp(bad + 8, salts, 8) == 0 ||
                       (k < scan.frames && valid(k + 1, Stored(bad + 16)))))
    ++scan.intact_commits_after;
  for (uint64_t j = scan.first_bad_frame + 1; j <= scan.frames; ++j) {
    const Cksum seed = Stored(j == 1 ? h + 24 : frame(j - 1) + 16);
    if (is_commit(j) && valid(j, seed)) ++scan.intact_commits_after;
  }
  return scan;
}

absl::StatusOr<WalScan> ScanWal(const std::string& db_path) {
  const std::string wal_path = db_path + "-wal";
  if (!Exists(wal_path)) return WalScan{};
  // Up to `limit` bytes of `path`.
  auto read = [](const std::string& path, size_t limit, std::string* out) -> absl::Status {
    std::ifstream f(path, std::ios::binary);
    if (!f) return absl::UnavailableError(absl::StrCat(path, ": cannot open: ", strerror(errno)));
    if (limit == SIZE_MAX) {
      out->assign(std::istreambuf_iterator<char>(f), {});
    } else {
      out->resize(limit);
      f.read(out->data(), static_cast<std::streamsize>(limit));
      out->resize(static_cast<size_t>(f.gcount()));
    }
    if (f.bad()) return absl::UnavailableError(absl::StrCat(path, ": cannot read"));
    return absl::OkStatus();
  };
  std::string db_header;
  uint32_t db_page_size = 0;
  if (Exists(db_path)) {
    if (absl::Status s = read(db_path, 100, &db_header); !s.ok()) return s;
    if (db_header.size() >= 18) {
      const auto* p = reinterpret_cast<const unsigned char*>(db_header.data());
      const uint32_t n = (uint32_t{p[16]} << 8) | p[17];
      db_page_size = n == 1 ? 65536 : n;
    }
  }
  std::string wal;
  if (absl::Status s = read(wal_path, SIZE_MAX, &wal); !s.ok()) return s;
  return ScanWalBytes(wal, db_page_size);
}

}  // namespace store_internal
}  // namespace flowclass
