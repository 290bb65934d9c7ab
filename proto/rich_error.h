// rich_error.h — the flowclass.v1 error model: a google.rpc.Status whose
// details hold a google.rpc.BadRequest (one FieldViolation: the path of the
// bad field in the request and the message) and a google.rpc.ErrorInfo
// (domain "flowclass.v1", a reason, and metadata op_index / rule_id / field).
// An ack carries it in BatchAck.status; a failed RPC in the standard
// `grpc-status-details-bin` trailer (grpc::Status::error_details()).
//
// Server and client share these: the server writes violations, the client
// library and tests read them back.  Control path only (they allocate).
#ifndef FLOWCLASS_PROTO_RICH_ERROR_H_
#define FLOWCLASS_PROTO_RICH_ERROR_H_

#include <cstdint>
#include <optional>
#include <string>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dataplane/rules/rule_error.h"
#include "google/rpc/status.pb.h"

namespace flowclass {

inline constexpr absl::string_view kErrorDomain = "flowclass.v1";

// One bad field of a request.
struct FieldViolation {
  std::string path;         // "ops[3].insert.match.ipv4_src", "page_token"
  std::string description;  // the message
  // ErrorInfo: the reason ("INVALID_RULE", "RULE_EXISTS", "RULE_NOT_FOUND",
  // "LIMIT", "INVALID_ARGUMENT") and, for an operation of a batch, its index,
  // rule id and the field's short name ("ipv4_src", "nw_proto", "id").
  std::string reason;
  std::optional<uint32_t> op_index;
  uint64_t rule_id = 0;
  std::string field;
};

// The ErrorInfo reason of a rule error kind.
absl::string_view ErrorReason(RuleErrorKind kind);

// The path of `e`'s field in an ApplyRulesRequest ("ops[3].insert.match.
// ipv4_src"): `op_oneof` is the operation's kind as v1.RuleOp names it
// ("insert", "replace", "delete_id", "delete_cookie"; "" when unknown), and
// `text_rule` says the rule came as native text (its fields are then found
// in "....text").
std::string OpFieldPath(const RuleOpError& e, absl::string_view op_oneof, bool text_rule);

// The violation of one operation's error `e`: its path (OpFieldPath), its
// kind's reason, index and rule id, `field` (the short name the caller's
// input uses: ProtoName or NativeName) and `description`.
FieldViolation OpViolation(const RuleOpError& e, absl::string_view op_oneof, bool text_rule,
                           absl::string_view field, std::string description);

// Fills *out: code, message, and (with `v`) the BadRequest and ErrorInfo
// details.  Code OK clears *out.
void SetRichStatus(absl::StatusCode code, absl::string_view message,
                   const FieldViolation* v, google::rpc::Status* out);

// A grpc::Status carrying `st` (code, message, and st itself as the
// error details).
grpc::Status ToGrpcStatus(const google::rpc::Status& st);
// One violation as a failed RPC's status.
grpc::Status RichGrpcStatus(grpc::StatusCode code, absl::string_view message,
                            const FieldViolation& v);

// The first violation `st` carries (BadRequest, with the ErrorInfo's
// metadata when present); nullopt without one.
std::optional<FieldViolation> GetFieldViolation(const google::rpc::Status& st);
// The same from a failed RPC's status (its error details); nullopt when it
// has none or they do not parse.
std::optional<FieldViolation> GetFieldViolation(const grpc::Status& st);

// The ack status as an absl::Status (code and message).
absl::Status ToAbslStatus(const google::rpc::Status& st);

// A failed RPC's status as an absl::Status: its code and message, and its
// google.rpc.Status (the error details, when it has them) as the payload
// kRichStatusPayloadUrl, which GetFieldViolation(absl::Status) reads.  The
// client library's FromGrpcStatus.
inline constexpr absl::string_view kRichStatusPayloadUrl =
    "type.googleapis.com/google.rpc.Status";
absl::Status FromGrpcStatusWithDetails(const grpc::Status& s);
std::optional<FieldViolation> GetFieldViolation(const absl::Status& s);

}  // namespace flowclass

#endif  // FLOWCLASS_PROTO_RICH_ERROR_H_
