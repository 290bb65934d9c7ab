// quote.h — user text quoted for an error message.
//
// Whatever bytes a file, a flag or an RPC carries, the message that quotes
// them is one short printable line: at most `max` bytes of the text are
// kept ("..." marks the cut), and every byte that is not printable ASCII —
// NUL, a newline, a control or non-ASCII byte — and the quote and the
// backslash are written as C escapes (absl::CHexEscape: "\x00", "\n",
// "\\"), so a NUL cannot end the message early and a 20 MB line is not
// echoed back.  Header only (absl strings), any thread; error path only
// (allocates).
#ifndef FLOWCLASS_COMMON_QUOTE_H_
#define FLOWCLASS_COMMON_QUOTE_H_

#include <cstddef>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace flowclass {

inline constexpr size_t kQuoteMaxBytes = 40;
// A file path or a device spec is kept whole up to this length.
inline constexpr size_t kQuotePathMaxBytes = 256;

inline std::string QuoteForMessage(absl::string_view text, char quote = '\'',
                                   size_t max = kQuoteMaxBytes) {
  const bool cut = text.size() > max;
  std::string out(1, quote);
  out += absl::CHexEscape(cut ? text.substr(0, max) : text);
  if (cut) out += "...";
  out += quote;
  return out;
}

}  // namespace flowclass

#endif  // FLOWCLASS_COMMON_QUOTE_H_
