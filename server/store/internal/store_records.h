// internal/store_records.h — what a rule store row holds and how it is
// checked (rule_store.cc): the record checksum, the text of a batch's
// operations, and the replay of batches with the rule table's rules.
//
// The bytes come from disk and are untrusted: every decoder returns
// DATA_LOSS naming what is wrong, and a rule is parsed and validated by the
// dataplane's own parser and validator.  Plain functions and values;
// control path only (they allocate).
#ifndef FLOWCLASS_SERVER_STORE_INTERNAL_STORE_RECORDS_H_
#define FLOWCLASS_SERVER_STORE_INTERNAL_STORE_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"  // RuleOp

namespace flowclass {
namespace store_internal {

// CRC-32 (zlib's, computed by ISA-L) over a record's tag, its integer
// fields (8 bytes little endian each) and its body: a row copied to another
// key or table, or with any field changed, no longer matches.
uint32_t RecordCrc(char tag, std::initializer_list<uint64_t> fields, std::string_view body);

// ---- schema version 2: binary records (what the store writes) ----
//
// A rule: LEB128 varints id, priority, cookie; two 3-byte little-endian
// maps of the match fields (bit i: kFieldInfo[i]), those whose mask is not
// zero ("present") and those of them whose mask is all ones ("exact"); per
// present field, in order, its value and, unless exact, its mask, each in
// the field's width rounded up to bytes, little endian; a flags byte (bit
// 0: tp_src range follows, bit 1: tp_dst range follows), each range as
// 2-byte little-endian lo then hi; the action kind (1 byte) and a varint
// port.  A batch's operations: per operation a kind byte ('+' insert, '='
// replace, each followed by a rule; '-' delete by id, '~' delete by cookie,
// each followed by a varint), nothing between them.
// Decoding treats the bytes as untrusted: a varint that runs past the body
// or past 64 bits (or a priority or port past 32), an unknown field or flag
// bit, an exact field that is not present, a mask that contradicts the
// maps (zero, or all ones when not exact), a value or mask wider than its
// field, value bits outside the mask, an unknown action kind, trailing
// bytes, a count that differs from the row's: DATA_LOSS naming what; then
// ValidateRule, as for text.
// AppendRule keeps only bits inside fields: RuleFitsRecord says whether
// `r` has none outside (the store refuses a rule that has).
bool RuleFitsRecord(const Rule& r);
void AppendRule(const Rule& r, std::string* out);
// The most bytes one rule, or one operation, takes.
extern const size_t kMaxRuleBytes;
extern const size_t kMaxOpBytes;

// Bytes that are appended to and reused: Clear keeps the memory, and new
// room is not zeroed (EncodeOps' std::string would zero it, or check its
// capacity per byte).
class ByteBuffer {
 public:
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  const char* data() const { return data_.get(); }
  std::string_view view() const { return {data_.get(), size_}; }
  void Clear() { size_ = 0; }
  // Room for `n` more bytes at end().
  void Reserve(size_t n) {
    if (cap_ - size_ < n) Grow(n);
  }
  char* end() { return data_.get() + size_; }
  // The bytes up to `p` (inside the reserved room) are written.
  void CommitTo(char* p) { size_ = static_cast<size_t>(p - data_.get()); }
  void Append(std::string_view b) {
    Reserve(b.size());
    if (!b.empty()) std::memcpy(end(), b.data(), b.size());
    size_ += b.size();
  }
  void Truncate(size_t n) { size_ = n < size_ ? n : size_; }

 private:
  void Grow(size_t room);
  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t cap_ = 0;
};

// AppendOps' outcome: ok, or the first operation it refused (nothing appended).
struct OpsAppend {
  enum Problem { kNone, kUnknownKind, kDoesNotFit } problem = kNone;
  size_t op = 0;
  bool ok() const { return problem == kNone; }
};
// Appends EncodeOps(ops) to *out, unless an operation has a kind the store
// does not know or a rule that does not fit a record (RuleFitsRecord).
OpsAppend AppendOps(absl::Span<const RuleOp> ops, ByteBuffer* out);
// Reads one rule at *in and advances it past the rule.
absl::StatusOr<Rule> ReadRule(std::string_view* in);
std::string EncodeOps(absl::Span<const RuleOp> ops);
// EncodeOps' inverse for a row that says it holds `count` operations.
absl::StatusOr<std::vector<RuleOp>> DecodeOps(std::string_view body, uint64_t count);

// ---- schema version 1: native rule text (read only, and migrated) ----
//
// A batch's operations as text, one per line: "+RULE" insert, "=RULE"
// replace (native rule text), "-ID" delete, "~COOKIE" delete by cookie.
// Snapshot chunks: one rule per line.
std::string EncodeOpsText(absl::Span<const RuleOp> ops);  // tests write v1 stores
absl::StatusOr<std::vector<RuleOp>> DecodeOpsText(std::string_view body, uint64_t count);
// Splits a body into its lines; false unless every line ends with '\n'.
bool SplitLines(std::string_view body, std::vector<std::string_view>* lines);
// One stored rule: parsed and validated, DATA_LOSS otherwise.
absl::StatusOr<Rule> ParseStoredRule(std::string_view text);

// The rule set as batches replay it, with RuleTable::ApplyBatch's rules.
class ReplayState {
 public:
  absl::flat_hash_map<uint64_t, Rule>& rules() { return rules_; }

  // Applies one batch whole, or (returning its error) not at all.
  absl::Status Apply(absl::Span<const RuleOp> ops, bool delete_all_first) {
    absl::flat_hash_map<uint64_t, Rule> before_all;
    if (delete_all_first) {
      before_all = std::move(rules_);
      rules_.clear();
      by_cookie_.clear();
    }
    std::vector<std::pair<uint64_t, std::optional<Rule>>> undo;
    auto undo_all = [&] {
      if (delete_all_first) {
        rules_ = std::move(before_all);
        by_cookie_.clear();
        if (indexed_) Reindex();
        return;
      }
      for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
        Erase(it->first);
        if (it->second.has_value()) Put(*std::move(it->second));
      }
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      const RuleOp& op = ops[i];
      absl::Status err;
      switch (op.kind) {
        case RuleOp::Kind::kInsert:
          if (rules_.contains(op.rule.id)) {
            err = absl::DataLossError(absl::StrCat(
                "operation ", i, ": insert of rule id ", op.rule.id, " which already exists"));
            break;
          }
          undo.emplace_back(op.rule.id, std::nullopt);
          Put(op.rule);
          break;
        case RuleOp::Kind::kReplace: {
          auto it = rules_.find(op.rule.id);
          if (it == rules_.end()) {
            err = absl::DataLossError(
                absl::StrCat("operation ", i, ": replace of unknown rule id ", op.rule.id));
            break;
          }
          undo.emplace_back(op.rule.id, it->second);
          Erase(op.rule.id);
          Put(op.rule);
          break;
        }
        case RuleOp::Kind::kDelete: {
          auto it = rules_.find(op.id);
          if (it == rules_.end()) {
            err = absl::DataLossError(
                absl::StrCat("operation ", i, ": delete of unknown rule id ", op.id));
            break;
          }
          undo.emplace_back(op.id, std::move(it->second));
          Erase(op.id);
          break;
        }
        case RuleOp::Kind::kDeleteByCookie: {
          if (!indexed_) {
            indexed_ = true;
            Reindex();
          }
          auto c = by_cookie_.find(op.cookie);
          if (c == by_cookie_.end()) break;
          const std::vector<uint64_t> ids(c->second.begin(), c->second.end());
          for (uint64_t id : ids) {
            auto it = rules_.find(id);
            undo.emplace_back(id, std::move(it->second));
            Erase(id);
          }
          break;
        }
      }
      if (!err.ok()) {
        undo_all();
        return err;
      }
    }
    return absl::OkStatus();
  }

 private:
  void Put(Rule r) {
    if (indexed_) by_cookie_[r.cookie].insert(r.id);
    const uint64_t id = r.id;
    rules_.insert_or_assign(id, std::move(r));
  }
  void Erase(uint64_t id) {
    auto it = rules_.find(id);
    if (it == rules_.end()) return;
    if (indexed_) {
      auto c = by_cookie_.find(it->second.cookie);
      c->second.erase(id);
      if (c->second.empty()) by_cookie_.erase(c);
    }
    rules_.erase(it);
  }
  void Reindex() {
    by_cookie_.clear();
    for (const auto& [id, r] : rules_) by_cookie_[r.cookie].insert(id);
  }

  absl::flat_hash_map<uint64_t, Rule> rules_;
  // Built on the first delete-by-cookie (most stores never need it).
  bool indexed_ = false;
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<uint64_t>> by_cookie_;
};

}  // namespace store_internal
}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_STORE_INTERNAL_STORE_RECORDS_H_
