// test_json.h — a small JSON reader for tests (dashboard checks, Prometheus
// HTTP API answers).  Not for production input: no \u surrogate pairs (they
// become '?'), numbers are doubles, recursion depth is unbounded.
//
// ParseJson(text) returns the value or std::nullopt on a syntax error; the
// accessors never throw (a missing key or wrong type yields a null Json).
#ifndef FLOWCLASS_SERVER_METRICS_TEST_JSON_H_
#define FLOWCLASS_SERVER_METRICS_TEST_JSON_H_

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace flowclass {

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool b = false;
  double number = 0;
  std::string str;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  const Json& operator[](const std::string& key) const {
    static const Json kNull;
    auto it = object.find(key);
    return it == object.end() ? kNull : it->second;
  }
  const Json& operator[](size_t i) const {
    static const Json kNull;
    return i < array.size() ? array[i] : kNull;
  }
  bool is_null() const { return type == Type::kNull; }
};

namespace internal_json {
class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  bool Value(Json* out) {
    Ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') return Object(out);
    if (c == '[') return Array(out);
    if (c == '"') {
      out->type = Json::Type::kString;
      return String(&out->str);
    }
    if (Lit("true")) { out->type = Json::Type::kBool; out->b = true; return true; }
    if (Lit("false")) { out->type = Json::Type::kBool; return true; }
    if (Lit("null")) return true;
    char* end = nullptr;
    out->number = std::strtod(s_.c_str() + i_, &end);
    if (end == s_.c_str() + i_) return false;
    out->type = Json::Type::kNumber;
    i_ = static_cast<size_t>(end - s_.c_str());
    return true;
  }
  bool AtEnd() { Ws(); return i_ == s_.size(); }

 private:
  void Ws() { while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_; }
  bool Lit(const char* w) {
    const std::string t(w);
    if (s_.compare(i_, t.size(), t) != 0) return false;
    i_ += t.size();
    return true;
  }
  bool String(std::string* out) {
    ++i_;  // "
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) return false;
        const char e = s_[i_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'u': {
            if (i_ + 4 > s_.size()) return false;
            const long v = std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16);
            i_ += 4;
            c = v < 128 ? static_cast<char>(v) : '?';
            break;
          }
          default: c = e;  // \" \\ \/
        }
      }
      out->push_back(c);
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    return true;
  }
  bool Array(Json* out) {
    out->type = Json::Type::kArray;
    ++i_;
    Ws();
    if (i_ < s_.size() && s_[i_] == ']') { ++i_; return true; }
    for (;;) {
      Json v;
      if (!Value(&v)) return false;
      out->array.push_back(std::move(v));
      Ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ']') { ++i_; return true; }
      if (s_[i_++] != ',') return false;
    }
  }
  bool Object(Json* out) {
    out->type = Json::Type::kObject;
    ++i_;
    Ws();
    if (i_ < s_.size() && s_[i_] == '}') { ++i_; return true; }
    for (;;) {
      Ws();
      if (i_ >= s_.size() || s_[i_] != '"') return false;
      std::string key;
      if (!String(&key)) return false;
      Ws();
      if (i_ >= s_.size() || s_[i_++] != ':') return false;
      Json v;
      if (!Value(&v)) return false;
      out->object[key] = std::move(v);
      Ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == '}') { ++i_; return true; }
      if (s_[i_++] != ',') return false;
    }
  }
  const std::string& s_;
  size_t i_ = 0;
};
}  // namespace internal_json

inline std::optional<Json> ParseJson(const std::string& text) {
  internal_json::Parser p(text);
  Json v;
  if (!p.Value(&v) || !p.AtEnd()) return std::nullopt;
  return v;
}

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_METRICS_TEST_JSON_H_
