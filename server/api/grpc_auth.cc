#include "server/api/grpc_auth.h"

#include <optional>
#include <vector>

#include <grpcpp/server_context.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flowclass {
namespace {

absl::string_view View(const grpc::string_ref& r) { return {r.data(), r.size()}; }

class AuditInterceptor final : public grpc::experimental::Interceptor {
 public:
  AuditInterceptor(grpc::experimental::ServerRpcInfo* info,
                   const std::function<uint64_t()>* generation,
                   const std::function<void(const std::string&)>* sink)
      : info_(info), generation_(generation), sink_(sink) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    using grpc::experimental::InterceptionHookPoints;
    // A read that found the end of the stream comes here too, without a message.
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        m->GetRecvMessage() != nullptr)
      ++received_;
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status st = m->GetSendStatus();
      std::string identity = "anonymous";
      std::string peer;
      if (grpc::ServerContextBase* ctx = info_->server_context()) {
        peer = ctx->peer();
        if (auto ac = ctx->auth_context()) {
          std::vector<grpc::string_ref> v = ac->FindPropertyValues(kIdentityProperty);
          if (!v.empty()) identity = std::string(View(v.front()));
        }
      }
      (*sink_)(absl::StrCat("audit: identity=", identity, " method=", info_->method(),
                            " peer=", peer, " batches=", received_,
                            " code=", StatusCodeName(st.error_code()),
                            " generation=", (*generation_)()));
    }
    m->Proceed();
  }

 private:
  static const char* StatusCodeName(grpc::StatusCode c) {
    static const char* const kNames[] = {
        "OK",        "CANCELLED",         "UNKNOWN",           "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",    "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
        "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",       "DATA_LOSS",
        "UNAUTHENTICATED"};
    const int i = static_cast<int>(c);
    return i >= 0 && i < 17 ? kNames[i] : "?";
  }

  grpc::experimental::ServerRpcInfo* info_;
  const std::function<uint64_t()>* generation_;
  const std::function<void(const std::string&)>* sink_;
  uint64_t received_ = 0;
};

}  // namespace

void AuthProcessor::SetPolicy(std::shared_ptr<const AuthPolicy> policy) {
  std::lock_guard<std::mutex> l(mu_);
  policy_ = std::move(policy);
}

std::shared_ptr<const AuthPolicy> AuthProcessor::policy() const {
  std::lock_guard<std::mutex> l(mu_);
  return policy_;
}

grpc::Status AuthProcessor::Process(const InputMetadata& md, grpc::AuthContext* context,
                                    OutputMetadata* consumed, OutputMetadata*) {
  const std::shared_ptr<const AuthPolicy> policy = this->policy();
  absl::string_view method;
  std::optional<absl::string_view> bearer;
  for (const auto& [k, v] : md) {
    const absl::string_view key = View(k);
    if (key == ":path") {
      method = View(v);
    } else if (key == "authorization") {
      absl::string_view value = absl::StripAsciiWhitespace(View(v));
      if (value.size() < 7 || !absl::EqualsIgnoreCase(value.substr(0, 7), "bearer "))
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            "authorization metadata must be \"Bearer TOKEN\"");
      if (bearer.has_value())
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            "more than one authorization metadata");
      bearer = absl::StripAsciiWhitespace(value.substr(7));
      consumed->insert({std::string(View(k)), std::string(View(v))});  // handlers never see it
    }
  }
  std::vector<std::string> names;
  for (const char* prop : {"peer_uri", "peer_dns", "x509_common_name"})
    for (const grpc::string_ref& n : context->FindPropertyValues(prop))
      names.emplace_back(View(n));
  const AuthDecision d = policy->Decide(method, bearer, names);
  switch (d.code) {
    case AuthDecision::kAllow:
      context->AddProperty(kIdentityProperty, d.identity.name);
      context->AddProperty(kRoleProperty, RoleName(d.identity.role));
      return grpc::Status::OK;
    case AuthDecision::kPermissionDenied:
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, d.message);
    case AuthDecision::kUnauthenticated:
      break;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, d.message);
}

grpc::experimental::Interceptor* AuditInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (RequiredRole(info->method()) != Role::kAdmin) return nullptr;
  return new AuditInterceptor(info, &generation_, &sink_);
}

}  // namespace flowclass
