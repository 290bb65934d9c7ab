// rule_store.h — the durable rule store: every acknowledged batch survives a
// restart or a crash, and the generation counter with it.
//
// Contract
// --------
// One directory holds one store: DIR/rules.db, an SQLite database in WAL mode
// with synchronous=FULL and locking_mode=EXCLUSIVE (one process at a time;
// a second one gets "in use by another process").  Full description, file
// layout and the outcome of every kind of damage: docs/store.md.
//
//   auto store = RuleStore::Open(dir, options);   // creates DIR/rules.db if absent
//   auto state = (*store)->Load();                // generation + rules, checked
//   ... (*store)->AppendGroup(group) ...          // durable when it returns
//
// Records.  The database holds three tables: `meta` (one row: schema version,
// creation time, the generation of the newest batch, the snapshot's shape),
// `snapshot` (the full rule set at one generation, in chunks of rules sorted
// by id) and `batch` (one row per batch after the snapshot: its generation
// and its operations).  Rules and operations are binary records (schema
// version 2, internal/store_records.h); a store of version 1 (native rule
// text, older flowclassd) is read and migrated by Load.  Every row carries a
// CRC-32 (zlib's, computed by ISA-L) of its fields and body, so bytes
// flipped inside a page SQLite still reads as valid are caught.
//
// Writes.  CommitGroup writes a group of batches (a group commit) in one
// SQLite transaction, synced (synchronous=FULL): when it returns OK every
// batch of the group is durable.  Settle checkpoints the WAL into rules.db
// (synced); CommitGroup does so first once checkpoint_groups groups (or
// checkpoint_bytes) wait for it, and AppendGroup is CommitGroup then
// Settle.  SQLite's WAL applies a transaction whole or not at all (a torn
// transaction fails its frame checksums and is discarded), so after a crash the store holds exactly the
// committed groups plus, at most, the group in flight, whole.  A damaged
// frame before the last committed group is refused by Load (SQLite alone
// would drop every group from it on, silently); deleting or truncating the
// -wal file loses the groups not yet checkpointed.
// AppendGroup checks generations only (contiguous with the store's); the
// batches are the ones the rule table accepted.
//
// Compaction.  Compact() (or automatically, see RuleStoreOptions) reads the
// store back with every check Load makes, writes the rule set as the new
// snapshot at the newest generation and deletes the batch rows, in one
// transaction.
//
// Reads are untrusted.  Load checks SQLite's own structure (PRAGMA
// quick_check), the application id, the schema version, every row's CRC,
// that the snapshot's chunks are all there and its ids strictly increase,
// that batch generations continue the snapshot's one by one up to the newest
// generation `meta` records, and parses every rule with the dataplane's
// native parser (ParseNativeRule, version 1) or decodes it as untrusted
// bytes (version 2), and checks it with ValidateRule.  Operations are replayed
// with RuleTable::ApplyBatch's semantics (insert of an existing id, delete or
// replace of an unknown one is corruption; delete-by-cookie removes 0 or
// more).  Table limits (max_rules, ...) are the daemon's configuration, not
// the store's: they are not checked here.
//
// Errors name the file, the record and what was wrong, e.g.
//   "/var/lib/flowclass/rules.db: batch generation 17: checksum mismatch
//    (stored 0x1a2b3c4d, computed 0x5e6f7a8b)"
//   "/var/lib/flowclass/rules.db: batch generation 18: operation 3: delete of
//    unknown rule id 42"
// DATA_LOSS for a damaged store, FAILED_PRECONDITION for one in use or a
// newer schema ("PATH: schema version 3; this flowclassd reads versions 1 to
// 2"), INTERNAL / UNAVAILABLE for I/O errors.  Without
// recover_to_last_consistent, a damaged store is never changed by Load.
//
// With recover_to_last_consistent, Load returns the last consistent state
// instead: the snapshot plus the batches after it that pass every check, up
// to the first that does not (nothing at all, generation 0, when rules.db
// itself or its snapshot is unreadable).  The damaged files are kept beside
// it as rules.damaged-<unix seconds>.db (and its -wal), a new rules.db is
// written with that state as its snapshot, and RuleStoreInfo::dropped says
// what was left out and why.
//
// Threads: one caller at a time (the daemon's rule writer); no internal lock.
#ifndef FLOWCLASS_SERVER_STORE_RULE_STORE_H_
#define FLOWCLASS_SERVER_STORE_RULE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"

struct sqlite3;

namespace flowclass {
namespace store_internal {
class ByteBuffer;
}  // namespace store_internal

struct RuleStoreOptions {
  // Load returns the last consistent state of a damaged store (see above)
  // instead of failing.
  bool recover_to_last_consistent = false;
  // Automatic compaction after an AppendGroup, when the batch rows since the
  // snapshot hold at least max(auto_compact_bytes, auto_compact_ratio x the
  // snapshot's bytes) of operation text, or number auto_compact_batches or
  // more.  The ratio keeps the total work of compaction proportional to what
  // is appended.  0 turns that trigger off; both 0: only Compact().
  uint64_t auto_compact_bytes = 64u << 20;
  double auto_compact_ratio = 1.0;
  uint64_t auto_compact_batches = 100000;
  // Rules per snapshot row.
  size_t snapshot_chunk_rules = 8192;
  // CommitGroup checkpoints first when the -wal already holds this many
  // committed groups (1: every group is checkpointed before the next one is
  // written), or batches of checkpoint_bytes or more (their encoded
  // operations; the -wal's pages are about that much; 0: no byte bound).
  // Between checkpoints the -wal holds up to that many groups; Load scans it
  // so that damage in an early group is refused, not silently dropped with
  // the groups after it (internal/wal_scan.h), and checkpoints it before it
  // reads the store.  Settle (which flowclassd calls when its store thread
  // is idle, and at the latest 5 s after the first group it has not
  // checkpointed) checkpoints at once.  The bounds are wide so that a
  // stream's groups are not held up by a checkpoint in the middle (until
  // 2026-12-07: 64 groups, and a 1M-rule stream stopped for one): at 40
  // bytes a rule 256 MiB is ≈ 6.7M rules of inserts.
  uint32_t checkpoint_groups = 1024;
  uint64_t checkpoint_bytes = 256u << 20;
  // Tests only: AppendGroup commits but does not checkpoint, so the group
  // stays in the -wal file alone, as after a crash between the two.
  bool testing_skip_checkpoint = false;
  // Tests only: a new store is written in this schema version (1: the text
  // records of older flowclassd), and Load does not migrate it.  0: current.
  int testing_write_schema_version = 0;
};

// What Load found besides the rules.
struct RuleStoreInfo {
  std::string path;                // DIR/rules.db
  int schema_version = 0;
  int64_t created_unix_seconds = 0;  // when this rules.db was first written
  uint64_t snapshot_generation = 0;  // 0: no snapshot yet
  uint64_t snapshot_rules = 0;
  uint64_t batches = 0;              // batch rows replayed after the snapshot
  uint64_t file_bytes = 0;           // rules.db + rules.db-wal
  // recover_to_last_consistent only: true when Load dropped something and
  // rewrote the store; `dropped` says what and why (one line each), and
  // `damaged_file` is where the damaged rules.db was moved.
  bool recovered = false;
  std::vector<std::string> dropped;
  std::string damaged_file;
  // Load found an older schema version, read it back whole and rewrote the
  // store in the current one (info.schema_version); the old file is kept as
  // `migrated_file` (DIR/rules.v<version>-<unix seconds>.db).  0: none.
  int migrated_from_version = 0;
  std::string migrated_file;
};

struct RuleStoreState {
  uint64_t generation = 0;  // of the newest batch (0: none ever)
  std::vector<Rule> rules;  // sorted by id
  RuleStoreInfo info;
};

// One batch of a group commit: the generation the rule table gave it and its
// operations.  delete_all_first: the batch first deletes every rule (the
// table's DeleteAll, or a replacement of the whole rule set as one
// generation when followed by inserts).
struct StoreBatch {
  uint64_t generation = 0;
  absl::Span<const RuleOp> ops;
  bool delete_all_first = false;
};

struct RuleStoreStats {
  uint64_t generation = 0;
  uint64_t snapshot_generation = 0;
  uint64_t snapshot_rules = 0;
  uint64_t snapshot_bytes = 0;   // rule text in the snapshot
  uint64_t batches = 0;          // batch rows after the snapshot
  uint64_t batch_bytes = 0;      // operation text in them
  uint64_t groups_appended = 0;  // since Open
  uint64_t compactions = 0;      // since Open
  uint64_t unsettled_groups = 0; // committed, not yet checkpointed into rules.db
  uint64_t file_bytes = 0;       // rules.db + rules.db-wal now
};

class RuleStore {
 public:
  static constexpr int kCurrentSchemaVersion = 2;
  // Creates DIR (and its parents) and a new, empty DIR/rules.db when there
  // is none (written as rules.db.tmp, then renamed: a rules.db that exists
  // was complete once).  Reads nothing else of an existing store.
  static absl::StatusOr<std::unique_ptr<RuleStore>> Open(
      const std::string& dir, RuleStoreOptions options = {});
  ~RuleStore();
  RuleStore(const RuleStore&) = delete;
  RuleStore& operator=(const RuleStore&) = delete;

  // Opens the database, checks everything (see above) and returns the state.
  // Once per store; AppendGroup and Compact need a successful Load first.
  absl::StatusOr<RuleStoreState> Load();

  // Appends batches whose generations continue the store's by one each
  // (INVALID_ARGUMENT otherwise, nothing written).  One transaction; durable
  // in rules.db when it returns OK.  An I/O error leaves the store failed:
  // every later call returns it (reopen to continue).  An empty group is a
  // no-op.  May compact afterwards (RuleStoreOptions); a compaction that
  // fails leaves the group durable and the store failed.
  absl::Status AppendGroup(absl::Span<const StoreBatch> group);
  // AppendGroup in two steps.  CommitGroup: the transaction alone; when it
  // returns OK the group is durable (its commit synced to rules.db-wal) and
  // is restored after a crash, but the -wal still holds it.  It checkpoints
  // first when checkpoint_groups committed groups (or checkpoint_bytes of
  // batches) are not yet checkpointed.
  // Settle: the checkpoint that copies every committed group into rules.db
  // (and syncs it), then the automatic compaction, if due (only Settle
  // compacts: CommitGroup's own checkpoint never does); a no-op when
  // nothing is unsettled.  Until then, deleting or truncating rules.db-wal
  // loses the unsettled groups (whole); damage inside it is caught by Load
  // (see checkpoint_groups).  The same errors as AppendGroup; a failed
  // Settle fails the store (the groups stay durable in the -wal).
  absl::Status CommitGroup(absl::Span<const StoreBatch> group);
  absl::Status Settle();
  absl::Status AppendBatch(const StoreBatch& batch) { return AppendGroup({&batch, 1}); }

  // Rewrites the snapshot at the newest generation and deletes the batch
  // rows, in one transaction (reads the store back first, with Load's
  // checks; DATA_LOSS if that finds damage, nothing changed).
  absl::Status Compact();

  uint64_t generation() const { return generation_; }
  const std::string& path() const { return path_; }
  RuleStoreStats Stats() const;

 private:
  RuleStore(std::string dir, std::string path, RuleStoreOptions options);
  absl::Status Fail(absl::Status s);
  absl::Status CheckUsable(const char* what) const;
  absl::Status MaybeAutoCompact();
  absl::Status CheckpointGroups();  // the unsettled groups into rules.db
  int write_version() const {
    return options_.testing_write_schema_version != 0 ? options_.testing_write_schema_version
                                                      : kCurrentSchemaVersion;
  }

  std::string dir_;
  std::string path_;
  RuleStoreOptions options_;
  sqlite3* db_ = nullptr;
  bool loaded_ = false;
  absl::Status failed_;  // sticky I/O error
  uint64_t generation_ = 0;
  int64_t created_unix_ = 0;
  int schema_version_ = 0;  // of rules.db as loaded (what it is written in)
  uint64_t unsettled_groups_ = 0;  // committed groups not yet checkpointed
  uint64_t unsettled_bytes_ = 0;   // their batches' encoded bytes
  uint64_t snapshot_generation_ = 0;
  uint64_t snapshot_chunks_ = 0;
  uint64_t snapshot_rules_ = 0;
  uint64_t snapshot_bytes_ = 0;
  uint64_t batches_ = 0;
  uint64_t batch_bytes_ = 0;
  uint64_t groups_appended_ = 0;
  uint64_t compactions_ = 0;
  // CommitGroup's encoded batches, kept from group to group.
  std::unique_ptr<store_internal::ByteBuffer> scratch_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_STORE_RULE_STORE_H_
