// rule_error.h — the typed form of a rule or operation error.
//
// Contract
// --------
// Every error of ValidateRule, RuleTable::ApplyBatch and the proto
// conversion (RuleFromProto / RuleOpFromProto) carries, besides its
// human-readable message, a RuleOpError as an absl::Status payload (type URL
// kRuleOpErrorTypeUrl): what is wrong (kind), with which field, and — once
// the error is one of an operation of a batch — the operation's index and
// rule id.  Whoever acts on such an error (the gRPC service's code and
// OpError, the dataplane's DeleteAll retry) reads the payload, never the
// message: the message is for people, and rewording it changes no code, no
// field and no index.  A status without the payload is classified by its
// code alone.
//
// * The message keeps its form: "<field>: <problem>" for a rule's or an
//   operation's own error (the field's native name from ValidateRule and
//   the table, its v1 name from the proto conversion), and
//   "operation <i> (rule id <id>): <field>: <problem>" once AtOperation has
//   placed it in a batch.
// * The field's two names (native format, v1 message) are in one table
//   (NativeName / ProtoName); the IPv6 address halves of the flow are one
//   field, the address (RuleFieldOf).
// * The status code of these errors is INVALID_ARGUMENT, RESOURCE_EXHAUSTED
//   for kLimit (ApplyBatch's contract); the gRPC API's code for each kind is
//   the service's business (server/api/classifier_service.cc).
// * Plain functions and values, no shared state: any thread.  Error path
//   only (they allocate).
#ifndef FLOWCLASS_DATAPLANE_RULES_RULE_ERROR_H_
#define FLOWCLASS_DATAPLANE_RULES_RULE_ERROR_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "dataplane/flow/flow.h"

namespace flowclass {

// The field an error is about.  Values are part of the payload's encoding:
// append, never renumber.
enum class RuleField : uint8_t {
  kNone,  // not about one field
  // Match fields: the flow's, with each IPv6 address one field.
  kInPort,
  kEthType,
  kTcpFlags,
  kEthDst,
  kVlan0Tci,
  kEthSrc,
  kVlan1Tci,
  kIpv4Src,
  kIpv4Dst,
  kIpv6Src,
  kIpv6Dst,
  kNwProto,
  kNwTos,
  kNwTtl,
  kNwFrag,
  kTpSrc,
  kTpDst,
  kMatch,  // bits of the match outside every field
  // The rule.
  kId,
  kAction,
  kText,  // v1.Rule.text: the native text did not parse
  // The operation and the batch.
  kKind,        // RuleOp::kind (the table: an unknown kind)
  kOp,          // v1.RuleOp's oneof (nothing set, or a kind unknown here)
  kDeleteId,    // v1.RuleOp.delete_id
  kMaxRules,    // RuleTableLimits::max_rules
  kMaxEntries,  // RuleTableLimits::max_entries
  kOps,         // grpc.max_batch_ops: operations per batch
  kCount,
};

// The field's name in the native rule format and the table's messages
// ("nw_proto"), and in the flowclass.v1 messages ("ip_proto"); "" for
// kNone.  Most fields have one name in both.
absl::string_view NativeName(RuleField f);
absl::string_view ProtoName(RuleField f);
// The error field of flow field `f` (kIpv6Src for either half of ipv6_src).
RuleField RuleFieldOf(Field f);

enum class RuleErrorKind : uint8_t {
  kInvalid,        // malformed or refused by validation
  kAlreadyExists,  // insert of an id the table (or the batch so far) has
  kNotFound,       // delete or replace of an id the table does not have
  kLimit,          // a limit: the table's size, operations per batch
  kCount,
};

struct RuleOpError {
  RuleErrorKind kind = RuleErrorKind::kInvalid;
  RuleField field = RuleField::kNone;
  // index and rule_id are those of an operation of a batch (AtOperation);
  // false for the error of a rule or operation on its own.
  bool has_op = false;
  uint32_t index = 0;    // 0-based, in the batch
  uint64_t rule_id = 0;  // the operation's rule id (0: none, delete_cookie)
  friend bool operator==(const RuleOpError&, const RuleOpError&) = default;
};

inline constexpr absl::string_view kRuleOpErrorTypeUrl =
    "type.flowclass/flowclass.RuleOpError";

// The payload's bytes and back: nullopt for bytes that are not an encoding
// of this version (wrong size or version, an enum value out of range).
absl::Cord EncodeRuleOpError(const RuleOpError& e);
std::optional<RuleOpError> DecodeRuleOpError(const absl::Cord& payload);

// On a status (not OK: an OK status takes no payload) and back; nullopt
// when `s` carries none (or one that does not decode).
void SetRuleOpError(absl::Status* s, const RuleOpError& e);
std::optional<RuleOpError> GetRuleOpError(const absl::Status& s);

// "<name>: <problem>" with the payload {kind, field}; `name` is the field's
// name as the caller's input says it (NativeName or ProtoName).
absl::Status RuleError(RuleErrorKind kind, RuleField field, absl::string_view name,
                       absl::string_view problem);
// The same named NativeName(field): ValidateRule's and the table's errors.
absl::Status RuleError(RuleErrorKind kind, RuleField field, absl::string_view problem);

// "operation <index> (rule id <rule_id>): "
std::string OperationPrefix(uint32_t index, uint64_t rule_id);
// `s` as the error of operation `index` (rule `rule_id`) of a batch: the
// message prefixed with OperationPrefix, the code kept, the payload's
// has_op, index and rule_id set (a status without one gets
// {kInvalid, kNone}).
absl::Status AtOperation(const absl::Status& s, uint32_t index, uint64_t rule_id);

// `message`, AtOperation's message for `e`, with the field named `name`
// where it names it NativeName(e.field) after the prefix (how the service
// tells a structured rule's error in v1's names).  Unchanged when it does
// not start so.
std::string RenameErrorField(absl::string_view message, const RuleOpError& e,
                             absl::string_view name);

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_RULE_ERROR_H_
