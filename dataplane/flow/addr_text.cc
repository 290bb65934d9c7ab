// addr_text.cc — the address codec of addr_text.h.
//
// One template does the "ADDR[/LEN|/MASK]" layer for the three kinds; each
// kind brings its address grammar, separator and width.  Everything works on
// the caller's bytes: no copy of the text except the NUL-terminated one
// inet_pton needs for IPv6 (on the stack).
#include "dataplane/flow/addr_text.h"

#include <arpa/inet.h>

#include <bit>
#include <cstring>

#include "dataplane/internal/cat.h"

namespace flowclass {
namespace {

using internal::Cat;
using internal::Quote;

absl::Status Fail(size_t at, size_t* error_at, const std::string& problem) {
  if (error_at != nullptr) *error_at = at;
  return absl::InvalidArgumentError(problem);
}

// ---------------------------------------------------------------- the kinds

// Each kind: T, its width, its name in messages, the character that marks a
// MASK suffix, and Parse(text, &value, &zero) for one address (zero: for
// IPv4, the octet with a leading zero that made it fail, if that was why).

struct Ipv4Kind {
  using T = uint32_t;
  static constexpr int kBits = 32;
  static constexpr const char* kName = "IPv4";
  static constexpr char kSeparator = '.';

  // inet_pton(AF_INET)'s grammar: four decimal octets 0..255 separated by
  // single dots.  A leading zero is refused with its own reason.
  static bool Parse(std::string_view s, T* out, std::string_view* zero) {
    uint32_t v = 0;
    size_t i = 0;
    std::string_view z;  // the first octet with a leading zero
    for (int n = 0; n < 4; ++n) {
      if (n > 0) {
        if (i >= s.size() || s[i] != '.') return false;
        ++i;
      }
      const size_t start = i;
      uint32_t octet = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 4) {
        octet = octet * 10 + static_cast<uint32_t>(s[i] - '0');
        ++i;
      }
      if (i == start || octet > 255) return false;
      if (s[start] == '0' && i - start > 1 && z.empty()) z = s.substr(start, i - start);
      v = v << 8 | octet;
    }
    if (i != s.size()) return false;
    if (!z.empty()) {  // well formed but for that: say so
      *zero = z;
      return false;
    }
    *out = v;
    return true;
  }
};

struct Ipv6Kind {
  using T = absl::uint128;
  static constexpr int kBits = 128;
  static constexpr const char* kName = "IPv6";
  static constexpr char kSeparator = ':';

  static bool Parse(std::string_view s, T* out, std::string_view*) {
    // inet_pton wants a C string: a text too long for any address, or one
    // with a NUL (inet_pton would stop there), is refused first.
    char buf[INET6_ADDRSTRLEN];
    if (s.empty() || s.size() >= sizeof(buf) || std::memchr(s.data(), '\0', s.size()) != nullptr)
      return false;
    std::memcpy(buf, s.data(), s.size());
    buf[s.size()] = '\0';
    unsigned char b[16];
    if (inet_pton(AF_INET6, buf, b) != 1) return false;
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; ++i) hi = hi << 8 | b[i];
    for (int i = 8; i < 16; ++i) lo = lo << 8 | b[i];
    *out = absl::MakeUint128(hi, lo);
    return true;
  }
};

struct MacKind {
  using T = uint64_t;
  static constexpr int kBits = 48;
  static constexpr const char* kName = "Ethernet";
  static constexpr char kSeparator = ':';

  static int HexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Six groups of one or two hex digits separated by single ':'.
  static bool Parse(std::string_view s, T* out, std::string_view*) {
    uint64_t v = 0;
    size_t i = 0;
    for (int n = 0; n < 6; ++n) {
      if (n > 0) {
        if (i >= s.size() || s[i] != ':') return false;
        ++i;
      }
      const size_t start = i;
      uint64_t byte = 0;
      while (i < s.size() && i - start < 2 && HexDigit(s[i]) >= 0)
        byte = byte << 4 | static_cast<uint64_t>(HexDigit(s[i++]));
      if (i == start) return false;
      v = v << 8 | byte;
    }
    if (i != s.size()) return false;
    *out = v;
    return true;
  }
};

template <typename K>
constexpr typename K::T FullMask() {
  return ~typename K::T(0) >> (sizeof(typename K::T) * 8 - K::kBits);
}

template <typename K>
typename K::T PrefixMask(int len) {
  using T = typename K::T;
  return len == 0 ? T(0) : (FullMask<K>() << (K::kBits - len)) & FullMask<K>();
}

// The prefix length `mask` is, or -1.
template <typename K>
int PrefixLength(typename K::T mask) {
  int len = 0;
  if constexpr (K::kBits == 128) {
    const uint64_t hi = absl::Uint128High64(mask);
    len = hi == ~uint64_t{0} ? 64 + std::countl_one(absl::Uint128Low64(mask)) : std::countl_one(hi);
  } else {
    len = std::countl_one(static_cast<typename K::T>(mask << (sizeof(mask) * 8 - K::kBits)));
  }
  return PrefixMask<K>(len) == mask ? len : -1;
}

// "bad IPv4 address '010.0.0.1': octet '010' has a leading zero (...)".
template <typename K>
absl::Status Bad(std::string_view what, std::string_view text, std::string_view zero, size_t at,
                 size_t* error_at) {
  std::string problem = Cat("bad ", K::kName, " ", what, " ", Quote(text));
  if (!zero.empty()) {
    internal::CatTo(&problem, ": octet ", Quote(zero),
                    " has a leading zero (octets are decimal without leading zeros; inet_aton "
                    "would read it as octal)");
  }
  return Fail(at, error_at, problem);
}

// "ADDR", "ADDR/LEN" or "ADDR/MASK"; the value comes back masked.
template <typename K>
absl::Status ParseMasked(std::string_view text, typename K::T* value, typename K::T* mask,
                         size_t* error_at) {
  const size_t slash = text.find('/');
  const std::string_view addr = text.substr(0, slash);
  std::string_view zero;
  if (!K::Parse(addr, value, &zero)) return Bad<K>("address", addr, zero, 0, error_at);
  *mask = FullMask<K>();
  if (slash != std::string_view::npos) {
    const std::string_view m = text.substr(slash + 1);
    const size_t at = slash + 1;
    // A LEN is digits only; counting stops past the widest length, so that
    // no number of digits overflows.
    int len = 0;
    size_t digits = 0;
    for (; digits < m.size() && m[digits] >= '0' && m[digits] <= '9'; ++digits)
      if (len <= K::kBits) len = len * 10 + (m[digits] - '0');
    if (digits == m.size() && digits > 0) {
      if (len > K::kBits)
        return Fail(at, error_at,
                    Cat("prefix length ", m.size() <= 12 ? std::string(m) : Quote(m),
                        " exceeds ", K::kBits));
      *mask = PrefixMask<K>(len);
    } else if (m.find(K::kSeparator) != std::string_view::npos) {
      if (!K::Parse(m, mask, &zero)) return Bad<K>("mask", m, zero, at, error_at);
    } else {
      return Fail(at, error_at, Cat("bad prefix length ", Quote(m)));
    }
  }
  *value &= *mask;
  return absl::OkStatus();
}

// ------------------------------------------------------------ formatting

char* PutDottedQuad(uint32_t a, char* p) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    uint32_t o = (a >> shift) & 255;
    if (o >= 100) {
      *p++ = static_cast<char>('0' + o / 100);
      o %= 100;
      *p++ = static_cast<char>('0' + o / 10);
    } else if (o >= 10) {
      *p++ = static_cast<char>('0' + o / 10);
    }
    *p++ = static_cast<char>('0' + o % 10);
    if (shift != 0) *p++ = '.';
  }
  return p;
}

// Room for INET6_ADDRSTRLEN bytes at p.
char* PutIpv6(absl::uint128 a, char* p) {
  unsigned char b[16];
  const uint64_t hi = absl::Uint128High64(a), lo = absl::Uint128Low64(a);
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<unsigned char>(hi >> (56 - 8 * i));
    b[8 + i] = static_cast<unsigned char>(lo >> (56 - 8 * i));
  }
  // Cannot fail: the family is known and the room is INET6_ADDRSTRLEN.
  inet_ntop(AF_INET6, b, p, INET6_ADDRSTRLEN);
  return p + std::strlen(p);
}

char* PutMac(uint64_t a, char* p) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int shift = 40; shift >= 0; shift -= 8) {
    const auto byte = static_cast<unsigned>(a >> shift) & 255;
    *p++ = kHex[byte >> 4];
    *p++ = kHex[byte & 15];
    if (shift != 0) *p++ = ':';
  }
  return p;
}

char* PutLength(int len, char* p) {
  if (len >= 100) *p++ = static_cast<char>('0' + len / 100);
  if (len >= 10) *p++ = static_cast<char>('0' + len / 10 % 10);
  *p++ = static_cast<char>('0' + len % 10);
  return p;
}

}  // namespace

absl::Status ParseIpv4Masked(std::string_view text, uint32_t* value, uint32_t* mask,
                             size_t* error_at) {
  return ParseMasked<Ipv4Kind>(text, value, mask, error_at);
}

absl::Status ParseIpv6Masked(std::string_view text, absl::uint128* value, absl::uint128* mask,
                             size_t* error_at) {
  return ParseMasked<Ipv6Kind>(text, value, mask, error_at);
}

absl::Status ParseMacMasked(std::string_view text, uint64_t* value, uint64_t* mask,
                            size_t* error_at) {
  return ParseMasked<MacKind>(text, value, mask, error_at);
}

size_t FormatIpv4MaskedTo(uint32_t value, uint32_t mask, char* buf) {
  // By hand into the caller's buffer: a streamed load formats two addresses
  // per rule.
  char* p = PutDottedQuad(value, buf);
  if (mask != FullMask<Ipv4Kind>()) {
    *p++ = '/';
    const int len = PrefixLength<Ipv4Kind>(mask);
    p = len >= 0 ? PutLength(len, p) : PutDottedQuad(mask, p);
  }
  return static_cast<size_t>(p - buf);
}

size_t FormatIpv6MaskedTo(absl::uint128 value, absl::uint128 mask, char* buf) {
  char* p = PutIpv6(value, buf);
  if (mask != FullMask<Ipv6Kind>()) {
    *p++ = '/';
    const int len = PrefixLength<Ipv6Kind>(mask);
    p = len >= 0 ? PutLength(len, p) : PutIpv6(mask, p);
  }
  return static_cast<size_t>(p - buf);
}

size_t FormatMacMaskedTo(uint64_t value, uint64_t mask, char* buf) {
  char* p = PutMac(value, buf);
  if ((mask & FullMask<MacKind>()) != FullMask<MacKind>()) {
    *p++ = '/';
    p = PutMac(mask, p);
  }
  return static_cast<size_t>(p - buf);
}

void AppendIpv4Masked(uint32_t value, uint32_t mask, std::string* out) {
  char buf[kMaxIpv4MaskedText];
  out->append(buf, FormatIpv4MaskedTo(value, mask, buf));
}

void AppendIpv6Masked(absl::uint128 value, absl::uint128 mask, std::string* out) {
  char buf[kMaxIpv6MaskedText];
  out->append(buf, FormatIpv6MaskedTo(value, mask, buf));
}

void AppendMacMasked(uint64_t value, uint64_t mask, std::string* out) {
  char buf[kMaxMacMaskedText];
  out->append(buf, FormatMacMaskedTo(value, mask, buf));
}

std::string FormatIpv4Masked(uint32_t value, uint32_t mask) {
  std::string s;
  AppendIpv4Masked(value, mask, &s);
  return s;
}

std::string FormatIpv6Masked(absl::uint128 value, absl::uint128 mask) {
  std::string s;
  AppendIpv6Masked(value, mask, &s);
  return s;
}

std::string FormatMacMasked(uint64_t value, uint64_t mask) {
  std::string s;
  AppendMacMasked(value, mask, &s);
  return s;
}

}  // namespace flowclass
