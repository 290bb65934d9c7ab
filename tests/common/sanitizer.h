// sanitizer.h — whether this binary runs under AddressSanitizer, so that
// randomised tests can draw fewer cases there and stay quick (header-only).
#ifndef FLOWCLASS_TESTS_COMMON_SANITIZER_H_
#define FLOWCLASS_TESTS_COMMON_SANITIZER_H_

namespace flowclass {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_SANITIZER_H_
