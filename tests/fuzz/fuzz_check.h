// fuzz_check.h — what every fuzz target of tests/fuzz checks besides "no
// crash, no sanitizer report": an invariant that aborts with a message, and
// the form of the errors the parsers return for garbage (one bounded line of
// printable text, common/quote.h), since an error message is output too.
#ifndef FLOWCLASS_TESTS_FUZZ_FUZZ_CHECK_H_
#define FLOWCLASS_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "absl/status/status.h"

namespace flowclass {
namespace fuzz {

inline void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz: invariant violated: %s\n", what);
    std::abort();
  }
}

// An error's message: not empty, at most `max` bytes, every byte printable
// ASCII — whatever the input held (a 20 MB line, a NUL, a newline).
inline void CheckErrorMessage(const absl::Status& s, size_t max = 512) {
  const std::string_view m(s.message().data(), s.message().size());
  if (m.empty() || m.size() > max) {
    std::fprintf(stderr, "fuzz: error message of %zu bytes: %.*s\n", m.size(),
                 static_cast<int>(m.size() > 2000 ? 2000 : m.size()), m.data());
    std::abort();
  }
  for (char ch : m) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e) {
      std::fprintf(stderr, "fuzz: byte 0x%02x in error message: %.*s\n", c,
                   static_cast<int>(m.size()), m.data());
      std::abort();
    }
  }
}

}  // namespace fuzz
}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_FUZZ_FUZZ_CHECK_H_
