#include "proto/rich_error.h"

#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"

namespace flowclass {

absl::string_view ErrorReason(RuleErrorKind kind) {
  switch (kind) {
    case RuleErrorKind::kInvalid: return "INVALID_RULE";
    case RuleErrorKind::kAlreadyExists: return "RULE_EXISTS";
    case RuleErrorKind::kNotFound: return "RULE_NOT_FOUND";
    case RuleErrorKind::kLimit: return "LIMIT";
    case RuleErrorKind::kCount: break;
  }
  return "INVALID_ARGUMENT";
}

std::string OpFieldPath(const RuleOpError& e, absl::string_view op_oneof, bool text_rule) {
  if (e.field == RuleField::kOps) return "ops";
  const std::string op = absl::StrCat("ops[", e.index, "]");
  if (op_oneof.empty()) return op;
  const std::string in_op = absl::StrCat(op, ".", op_oneof);
  if (op_oneof == "delete_id" || op_oneof == "delete_cookie") return in_op;
  // A field of the inserted or replaced rule; native text says them all.
  switch (e.field) {
    case RuleField::kNone:
    case RuleField::kKind:
    case RuleField::kOp:
    case RuleField::kDeleteId:
    case RuleField::kMaxRules:
    case RuleField::kMaxEntries:
      return in_op;
    case RuleField::kText: return absl::StrCat(in_op, ".text");
    case RuleField::kId: return absl::StrCat(in_op, text_rule ? ".text" : ".id");
    case RuleField::kAction: return absl::StrCat(in_op, text_rule ? ".text" : ".action");
    case RuleField::kMatch: return absl::StrCat(in_op, text_rule ? ".text" : ".match");
    default:  // a match field
      return text_rule ? absl::StrCat(in_op, ".text")
                       : absl::StrCat(in_op, ".match.", ProtoName(e.field));
  }
}

FieldViolation OpViolation(const RuleOpError& e, absl::string_view op_oneof, bool text_rule,
                           absl::string_view field, std::string description) {
  FieldViolation v;
  v.path = OpFieldPath(e, op_oneof, text_rule);
  v.description = std::move(description);
  v.reason = std::string(ErrorReason(e.kind));
  v.op_index = e.index;
  v.rule_id = e.rule_id;
  v.field = std::string(field);
  return v;
}

void SetRichStatus(absl::StatusCode code, absl::string_view message, const FieldViolation* v,
                   google::rpc::Status* out) {
  out->Clear();
  if (code == absl::StatusCode::kOk) return;
  out->set_code(static_cast<int32_t>(code));
  out->set_message(std::string(message));
  if (v == nullptr) return;
  google::rpc::BadRequest bad;
  google::rpc::BadRequest::FieldViolation* fv = bad.add_field_violations();
  fv->set_field(v->path);
  fv->set_description(v->description);
  out->add_details()->PackFrom(bad);
  google::rpc::ErrorInfo info;
  info.set_domain(std::string(kErrorDomain));
  info.set_reason(v->reason.empty() ? "INVALID_ARGUMENT" : v->reason);
  auto& md = *info.mutable_metadata();
  if (v->op_index.has_value()) {
    md["op_index"] = absl::StrCat(*v->op_index);
    md["rule_id"] = absl::StrCat(v->rule_id);
  }
  if (!v->field.empty()) md["field"] = v->field;
  out->add_details()->PackFrom(info);
}

grpc::Status ToGrpcStatus(const google::rpc::Status& st) {
  if (st.code() == 0) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), st.message(),
                      st.SerializeAsString());
}

grpc::Status RichGrpcStatus(grpc::StatusCode code, absl::string_view message,
                            const FieldViolation& v) {
  google::rpc::Status st;
  SetRichStatus(static_cast<absl::StatusCode>(code), message, &v, &st);
  return ToGrpcStatus(st);
}

std::optional<FieldViolation> GetFieldViolation(const google::rpc::Status& st) {
  std::optional<FieldViolation> out;
  for (const google::protobuf::Any& any : st.details()) {
    if (google::rpc::BadRequest bad; any.UnpackTo(&bad)) {
      if (bad.field_violations_size() == 0 || out.has_value()) continue;
      out.emplace();
      out->path = bad.field_violations(0).field();
      out->description = bad.field_violations(0).description();
    }
  }
  if (!out.has_value()) return out;
  for (const google::protobuf::Any& any : st.details()) {
    google::rpc::ErrorInfo info;
    if (!any.UnpackTo(&info) || info.domain() != kErrorDomain) continue;
    out->reason = info.reason();
    const auto& md = info.metadata();
    if (auto it = md.find("op_index"); it != md.end()) {
      uint32_t i = 0;
      if (absl::SimpleAtoi(it->second, &i)) out->op_index = i;
    }
    if (auto it = md.find("rule_id"); it != md.end())
      (void)absl::SimpleAtoi(it->second, &out->rule_id);
    if (auto it = md.find("field"); it != md.end()) out->field = it->second;
    break;
  }
  return out;
}

std::optional<FieldViolation> GetFieldViolation(const grpc::Status& st) {
  if (st.ok() || st.error_details().empty()) return std::nullopt;
  google::rpc::Status rich;
  if (!rich.ParseFromString(st.error_details())) return std::nullopt;
  return GetFieldViolation(rich);
}

absl::Status ToAbslStatus(const google::rpc::Status& st) {
  return absl::Status(static_cast<absl::StatusCode>(st.code()), st.message());
}

absl::Status FromGrpcStatusWithDetails(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  if (!s.error_details().empty())
    out.SetPayload(kRichStatusPayloadUrl, absl::Cord(s.error_details()));
  return out;
}

std::optional<FieldViolation> GetFieldViolation(const absl::Status& s) {
  const auto details = s.GetPayload(kRichStatusPayloadUrl);  // absl::optional<absl::Cord>
  if (!details.has_value()) return std::nullopt;
  google::rpc::Status rich;
  if (!rich.ParseFromString(std::string(*details))) return std::nullopt;
  return GetFieldViolation(rich);
}

}  // namespace flowclass
