// internal/cat.h — string concatenation that accepts std::string_view.
//
// Debian 12's abseil (20220623) has its own absl::string_view, distinct from
// std::string_view, so absl::StrCat does not take std::string_view.  This is
// the small subset the text formatters need: strings of any kind and
// integers; and Quote, for user text in messages.  Control path only
// (allocates).
#ifndef FLOWCLASS_DATAPLANE_INTERNAL_CAT_H_
#define FLOWCLASS_DATAPLANE_INTERNAL_CAT_H_

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/string_view.h"
#include "common/quote.h"

namespace flowclass {
namespace internal {

inline void AppendPiece(std::string& out, std::string_view s) { out.append(s); }
inline void AppendPiece(std::string& out, absl::string_view s) {
  out.append(s.data(), s.size());
}
inline void AppendPiece(std::string& out, const std::string& s) { out += s; }
inline void AppendPiece(std::string& out, const char* s) { out += s; }
template <typename T>
  requires std::is_integral_v<T>
void AppendPiece(std::string& out, T v) {
  out += std::to_string(v);
}
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (AppendPiece(out, args), ...);
  return out;
}
template <typename... Args>
void CatTo(std::string* out, const Args&... args) {
  (AppendPiece(*out, args), ...);
}

// 'text' for a message, cut short (with "...") and escaped, so that a
// garbage input cannot produce a megabyte-long or cut-off message
// (common/quote.h).
inline std::string Quote(std::string_view s) {
  return QuoteForMessage(absl::string_view(s.data(), s.size()));
}

// A name in a message (a key, a field): as written when it is a short run
// of printable characters, quoted and escaped (Quote) otherwise — an unknown
// key is user text too.
inline std::string ShownName(std::string_view s) {
  bool plain = !s.empty() && s.size() <= kQuoteMaxBytes;
  for (char ch : s) plain = plain && ch > ' ' && ch < 0x7f;
  return plain ? std::string(s) : Quote(s);
}

}  // namespace internal
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_INTERNAL_CAT_H_
