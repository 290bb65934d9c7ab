#include "server/api/auth_policy.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/text_file.h"
#include "server/api/grpc_config.h"

namespace flowclass {
namespace {

// The only list of methods a reader may call.  Everything else — ApplyRules,
// ReplaceRules, DeleteAll, SetConfig and any method added later — needs admin.
constexpr MethodRole kMethodRoles[] = {
    {"/flowclass.v1.ClassifierService/GetStats", Role::kReader},
    {"/flowclass.v1.ClassifierService/GetConfig", Role::kReader},
    {"/flowclass.v1.ClassifierService/ListRules", Role::kReader},
    {"/flowclass.v1.ClassifierService/GetRule", Role::kReader},
    {"/flowclass.v1.ClassifierService/Trace", Role::kReader},
    {"/flowclass.v1.ClassifierService/DumpMegaflows", Role::kReader},
    {"/grpc.health.v1.Health/*", Role::kReader},
    {"/grpc.reflection.v1alpha.ServerReflection/*", Role::kReader},
    {"/grpc.reflection.v1.ServerReflection/*", Role::kReader},
};

constexpr size_t kMinTokenChars = 16;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ParseRole(absl::string_view s, Role* r) {
  if (s == "admin") *r = Role::kAdmin;
  else if (s == "reader") *r = Role::kReader;
  else return false;
  return true;
}

}  // namespace

const char* RoleName(Role r) {
  switch (r) {
    case Role::kAdmin: return "admin";
    case Role::kReader: return "reader";
    case Role::kNone: break;
  }
  return "none";
}

absl::Span<const MethodRole> MethodRoles() { return kMethodRoles; }

Role RequiredRole(absl::string_view method) {
  for (const MethodRole& m : kMethodRoles) {
    absl::string_view pattern = m.method;
    if (absl::ConsumeSuffix(&pattern, "*")) {
      // "/svc/*": any method of that service (one more path segment).
      if (absl::StartsWith(method, pattern) && method.size() > pattern.size() &&
          method.substr(pattern.size()).find('/') == absl::string_view::npos)
        return m.role;
    } else if (method == pattern) {
      return m.role;
    }
  }
  return Role::kAdmin;
}

std::array<uint8_t, 32> Sha256(absl::string_view data) {
  std::array<uint8_t, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data());
  return out;
}

absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view what,
                                                       const std::string& path,
                                                       absl::string_view text) {
  std::vector<TokenEntry> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    auto bad = [&](absl::string_view problem) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": \"", path, "\" line ", line_no, ": ", problem));
    };
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() < 2 || f.size() > 3)
      return bad("expected ROLE TOKEN [NAME] (or ROLE sha256:HEX [NAME])");
    TokenEntry e;
    if (!ParseRole(f[0], &e.role))
      return bad(absl::StrCat("role must be admin or reader, not \"",
                              f[0].substr(0, 32), "\""));
    absl::string_view tok = f[1];
    if (absl::ConsumePrefix(&tok, "sha256:")) {
      if (tok.size() != 64) return bad("sha256: needs 64 hex digits");
      for (size_t i = 0; i < 32; ++i) {
        const int hi = HexDigit(tok[2 * i]), lo = HexDigit(tok[2 * i + 1]);
        if (hi < 0 || lo < 0) return bad("sha256: needs 64 hex digits");
        e.sha256[i] = static_cast<uint8_t>(hi * 16 + lo);
      }
    } else {
      // The token itself is never echoed.
      if (tok.size() < kMinTokenChars)
        return bad(absl::StrCat("token shorter than ", kMinTokenChars, " characters"));
      e.sha256 = Sha256(tok);
    }
    e.name = f.size() == 3 ? std::string(f[2]) : absl::StrCat("line", line_no);
    for (const TokenEntry& o : out)
      if (CRYPTO_memcmp(o.sha256.data(), e.sha256.data(), e.sha256.size()) == 0)
        return bad(absl::StrCat("the same token as ", o.name));
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const AuthPolicy>> AuthPolicy::Load(const GrpcServerConfig& c) {
  if (!GrpcAuthEnabled(c)) return AllowAll();
  auto p = std::shared_ptr<AuthPolicy>(new AuthPolicy());
  p->enabled_ = true;
  p->admin_ = c.auth.admin;
  p->reader_ = c.auth.reader;
  if (!c.auth.token_file.empty()) {
    absl::StatusOr<std::string> text = ReadTextFile(c.auth.token_file);
    if (!text.ok())
      return absl::Status(text.status().code(),
                          absl::StrCat("grpc.auth.token_file: ", text.status().message()));
    absl::StatusOr<std::vector<TokenEntry>> t =
        ParseTokenFile("grpc.auth.token_file", c.auth.token_file, *text);
    if (!t.ok()) return t.status();
    p->tokens_ = *std::move(t);
  }
  return std::shared_ptr<const AuthPolicy>(std::move(p));
}

std::shared_ptr<const AuthPolicy> AuthPolicy::AllowAll() {
  return std::shared_ptr<const AuthPolicy>(new AuthPolicy());
}

std::optional<Identity> AuthPolicy::MatchToken(absl::string_view token) const {
  const std::array<uint8_t, 32> d = Sha256(token);
  const TokenEntry* hit = nullptr;
  for (const TokenEntry& e : tokens_)  // every entry, whatever matched
    if (CRYPTO_memcmp(e.sha256.data(), d.data(), d.size()) == 0) hit = &e;
  if (!hit) return std::nullopt;
  return Identity{hit->role, absl::StrCat("token:", hit->name)};
}

AuthDecision AuthPolicy::Decide(absl::string_view method,
                                std::optional<absl::string_view> bearer,
                                absl::Span<const std::string> cert_names) const {
  AuthDecision d;
  const Role need = RequiredRole(method);
  if (!enabled_) {
    d.code = AuthDecision::kAllow;
    d.identity = {Role::kAdmin, "anonymous"};
    return d;
  }
  std::optional<Identity> id;
  if (bearer.has_value()) {
    id = MatchToken(*bearer);
    if (!id) {
      d.code = AuthDecision::kUnauthenticated;
      d.message = "the bearer token is not in grpc.auth.token_file (unknown or revoked)";
      return d;
    }
  }
  auto listed = [&](const std::vector<std::string>& list) -> const std::string* {
    for (const std::string& n : cert_names)
      if (std::find(list.begin(), list.end(), n) != list.end()) return &n;
    return nullptr;
  };
  // The certificate may raise a token's role, never lower it.
  if (!id || id->role < Role::kAdmin) {
    if (const std::string* a = listed(admin_)) {
      id = Identity{Role::kAdmin, absl::StrCat("cert:", *a)};
    } else if (!id) {
      if (const std::string* r = listed(reader_))
        id = Identity{Role::kReader, absl::StrCat("cert:", *r)};
    }
  }
  if (!id) {
    d.code = AuthDecision::kUnauthenticated;
    d.message = cert_names.empty()
                    ? "no identity: send a bearer token (flowclassctl --token-file) or a "
                      "client certificate named in grpc.auth.admin / grpc.auth.reader"
                    : absl::StrCat("the client certificate (", absl::StrJoin(cert_names, ", "),
                                   ") is in neither grpc.auth.admin nor grpc.auth.reader");
    return d;
  }
  d.identity = *id;
  if (id->role < need) {
    d.code = AuthDecision::kPermissionDenied;
    d.message = absl::StrCat(method, " needs role ", RoleName(need), "; ", id->name, " is ",
                             RoleName(id->role));
    return d;
  }
  d.code = AuthDecision::kAllow;
  return d;
}

}  // namespace flowclass
