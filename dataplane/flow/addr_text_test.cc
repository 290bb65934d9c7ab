// The address codec: examples of every form and rejection, the round-trip
// properties of addr_text.h on random values and masks, agreement with
// inet_pton / inet_ntop, and no allocation on the bulk paths.
#include "dataplane/flow/addr_text.h"

#include <arpa/inet.h>

#include <atomic>
#include <bit>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// Counts heap allocations, for ParseAndFormatToAllocateNothing.
namespace {
std::atomic<long> g_allocations{0};
}  // namespace
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
[[gnu::noinline]] void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace flowclass {
namespace {

enum class Kind { kIpv4, kIpv6, kMac };

// Parse, then format: the canonical text, or the error as
// "@offset: message".
std::string Canonical(Kind k, std::string_view text) {
  size_t at = 999;
  absl::Status s;
  std::string out;
  switch (k) {
    case Kind::kIpv4: {
      uint32_t v = 0, m = 0;
      s = ParseIpv4Masked(text, &v, &m, &at);
      if (s.ok()) out = FormatIpv4Masked(v, m);
      break;
    }
    case Kind::kIpv6: {
      absl::uint128 v = 0, m = 0;
      s = ParseIpv6Masked(text, &v, &m, &at);
      if (s.ok()) out = FormatIpv6Masked(v, m);
      break;
    }
    case Kind::kMac: {
      uint64_t v = 0, m = 0;
      s = ParseMacMasked(text, &v, &m, &at);
      if (s.ok()) out = FormatMacMasked(v, m);
      break;
    }
  }
  if (s.ok()) return out;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
  // StrCat, not "@" + std::string: GCC 12's -O3 -Wrestrict false positive
  // on operator+ of a one-character literal (GCC bug 105329).
  return absl::StrCat("@", at, ": ", s.message());
}

struct Example {
  Kind kind;
  std::string_view text;
  std::string_view want;  // canonical text, or "@offset: message"
};

constexpr Kind k4 = Kind::kIpv4, k6 = Kind::kIpv6, kE = Kind::kMac;

const Example kExamples[] = {
    // ---- IPv4: exact, prefix, mask; the canonical spelling of each.
    {k4, "10.0.0.1", "10.0.0.1"},
    {k4, "10.0.0.0/8", "10.0.0.0/8"},
    {k4, "10.0.0.0/255.0.0.0", "10.0.0.0/8"},
    {k4, "10.0.0.1/255.0.255.0", "10.0.0.0/255.0.255.0"},  // bits outside the mask cleared
    {k4, "10.1.2.3/8", "10.0.0.0/8"},
    {k4, "1.2.3.4/32", "1.2.3.4"},
    {k4, "1.2.3.4/255.255.255.255", "1.2.3.4"},
    {k4, "1.2.3.4/0", "0.0.0.0/0"},
    {k4, "0.0.0.0/0.0.0.0", "0.0.0.0/0"},
    {k4, "10.0.0.0/08", "10.0.0.0/8"},  // a length may have leading zeros
    {k4, "10.0.0.0/0000000000000000000032", "10.0.0.0"},
    {k4, "0.0.0.0", "0.0.0.0"},
    {k4, "255.255.255.255", "255.255.255.255"},
    // ---- IPv4 rejections: the part at fault and why.
    {k4, "010.0.0.1",
     "@0: bad IPv4 address '010.0.0.1': octet '010' has a leading zero (octets are decimal "
     "without leading zeros; inet_aton would read it as octal)"},
    {k4, "10.0.0.00", "@0: bad IPv4 address '10.0.0.00': octet '00' has a leading zero (octets "
                      "are decimal without leading zeros; inet_aton would read it as octal)"},
    {k4, "10.0.0.0/255.0.0.01",
     "@9: bad IPv4 mask '255.0.0.01': octet '01' has a leading zero (octets are decimal without "
     "leading zeros; inet_aton would read it as octal)"},
    {k4, "010.1.2", "@0: bad IPv4 address '010.1.2'"},  // the leading zero is not why
    {k4, "1.2.3", "@0: bad IPv4 address '1.2.3'"},
    {k4, "1.2.3.4.5", "@0: bad IPv4 address '1.2.3.4.5'"},
    {k4, "256.0.0.0", "@0: bad IPv4 address '256.0.0.0'"},
    {k4, "1.2.3.1000", "@0: bad IPv4 address '1.2.3.1000'"},
    {k4, "1..2.3", "@0: bad IPv4 address '1..2.3'"},
    {k4, "", "@0: bad IPv4 address ''"},
    {k4, "/8", "@0: bad IPv4 address ''"},
    {k4, " 10.0.0.1", "@0: bad IPv4 address ' 10.0.0.1'"},
    {k4, "10.0.0.1 ", "@0: bad IPv4 address '10.0.0.1 '"},
    {k4, "10.0.0.0 /8", "@0: bad IPv4 address '10.0.0.0 '"},
    {k4, "0x0a.0.0.1", "@0: bad IPv4 address '0x0a.0.0.1'"},
    {k4, "10.0.0.0/33", "@9: prefix length 33 exceeds 32"},
    {k4, "10.0.0.0/99999999999999999999", "@9: prefix length '99999999999999999999' exceeds 32"},
    {k4, "10.0.0.0/", "@9: bad prefix length ''"},
    {k4, "10.0.0.0/+8", "@9: bad prefix length '+8'"},
    {k4, "10.0.0.0/-0", "@9: bad prefix length '-0'"},
    {k4, "10.0.0.0/ 8", "@9: bad prefix length ' 8'"},
    {k4, "10.0.0.0/8 ", "@9: bad prefix length '8 '"},
    {k4, "10.0.0.0/8/8", "@9: bad prefix length '8/8'"},
    {k4, "10.0.0.0/1a", "@9: bad prefix length '1a'"},
    {k4, "10.0.0.0/255.0.0", "@9: bad IPv4 mask '255.0.0'"},
    {k4, "10.0.0.0/255.0.0.0 ", "@9: bad IPv4 mask '255.0.0.0 '"},
    // ---- IPv6
    {k6, "fe80::/10", "fe80::/10"},
    {k6, "FE80::1/10", "fe80::/10"},
    {k6, "2001:db8::/32", "2001:db8::/32"},
    {k6, "2001:db8::1/ffff:ffff::", "2001:db8::/32"},
    {k6, "2001:db8::1/ffff::ff", "2001::1/ffff::ff"},
    {k6, "2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
    {k6, "::/0", "::/0"},
    {k6, "::1/128", "::1"},
    {k6, "::ffff:1.2.3.4", "::ffff:1.2.3.4"},
    {k6, "::/064", "::/64"},
    {k6, "1:::2", "@0: bad IPv6 address '1:::2'"},
    {k6, "2001:db8::g", "@0: bad IPv6 address '2001:db8::g'"},
    {k6, "fe80::1%eth0", "@0: bad IPv6 address 'fe80::1%eth0'"},
    {k6, "::ffff:01.2.3.4", "@0: bad IPv6 address '::ffff:01.2.3.4'"},
    {k6, " ::1", "@0: bad IPv6 address ' ::1'"},
    {k6, std::string_view("::1\0::2", 7), "@0: bad IPv6 address '::1\\x00::2'"},  // the NUL escaped (common/quote.h)
    {k6, "0000:0000:0000:0000:0000:0000:0000:0000:0000",
     "@0: bad IPv6 address '0000:0000:0000:0000:0000:0000:0000:0000:...'"},
    {k6, "::/129", "@3: prefix length 129 exceeds 128"},
    {k6, "::/", "@3: bad prefix length ''"},
    {k6, "::/ 64", "@3: bad prefix length ' 64'"},
    {k6, "::/1.2.3.4", "@3: bad prefix length '1.2.3.4'"},
    {k6, "::/ffff::g", "@3: bad IPv6 mask 'ffff::g'"},
    // ---- Ethernet
    {kE, "aa:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee:ff"},
    {kE, "AA:B:c:d:e:F", "aa:0b:0c:0d:0e:0f"},
    {kE, "aa:bb:cc:dd:ee:ff/ff:ff:ff:00:00:00", "aa:bb:cc:00:00:00/ff:ff:ff:00:00:00"},
    {kE, "01:00:00:00:00:00/01:00:00:00:00:00", "01:00:00:00:00:00/01:00:00:00:00:00"},
    {kE, "aa:bb:cc:dd:ee:ff/24", "aa:bb:cc:00:00:00/ff:ff:ff:00:00:00"},  // masks written out
    {kE, "aa:bb:cc:dd:ee:ff/48", "aa:bb:cc:dd:ee:ff"},
    {kE, "aa:bb:cc:dd:ee:ff/0", "00:00:00:00:00:00/00:00:00:00:00:00"},
    {kE, "aa:bb:cc:dd:ee", "@0: bad Ethernet address 'aa:bb:cc:dd:ee'"},
    {kE, "aa:bb:cc:dd:ee:ff:00", "@0: bad Ethernet address 'aa:bb:cc:dd:ee:ff:00'"},
    {kE, "aaa:bb:cc:dd:ee:ff", "@0: bad Ethernet address 'aaa:bb:cc:dd:ee:ff'"},
    {kE, "aa-bb-cc-dd-ee-ff", "@0: bad Ethernet address 'aa-bb-cc-dd-ee-ff'"},
    {kE, "aa:bb::dd:ee:ff", "@0: bad Ethernet address 'aa:bb::dd:ee:ff'"},
    {kE, "aa:bb:cc:dd:ee:fg", "@0: bad Ethernet address 'aa:bb:cc:dd:ee:fg'"},
    {kE, "aa:bb:cc:dd:ee:ff/49", "@18: prefix length 49 exceeds 48"},
    {kE, "aa:bb:cc:dd:ee:ff/ff:ff:ff", "@18: bad Ethernet mask 'ff:ff:ff'"},
    {kE, "aa:bb:cc:dd:ee:ff/", "@18: bad prefix length ''"},
};

TEST(AddrTextTest, Examples) {
  for (const Example& e : kExamples) {
    EXPECT_EQ(Canonical(e.kind, e.text), e.want) << "'" << e.text << "'";
  }
}

// Format(Parse(t)) is canonical: parsing it again gives the same value and
// mask, and formatting that gives the same text.
TEST(AddrTextTest, CanonicalTextIsAFixedPoint) {
  for (const Example& e : kExamples) {
    const std::string c = Canonical(e.kind, e.text);
    if (c[0] == '@') continue;
    EXPECT_EQ(Canonical(e.kind, c), c) << e.text;
  }
}

uint32_t Prefix32(int len) { return len == 0 ? 0 : ~uint32_t{0} << (32 - len); }

// Parse(Format(v, m)) == (v, m) for every kind of mask (each prefix length,
// random non-prefix masks, zero) and random values inside it.
TEST(AddrTextTest, ParseOfFormatIsIdentity) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) {
    {
      const int len = i % 34;  // 0..32: a prefix; 33: any mask
      const uint32_t m = len <= 32 ? Prefix32(len) : static_cast<uint32_t>(rng());
      const uint32_t v = static_cast<uint32_t>(rng()) & m;
      const std::string t = FormatIpv4Masked(v, m);
      uint32_t pv = 0, pm = 0;
      ASSERT_TRUE(ParseIpv4Masked(t, &pv, &pm).ok()) << t;
      ASSERT_EQ(pv, v) << t;
      ASSERT_EQ(pm, m) << t;
    }
    {
      const int len = i % 130;  // 0..128: a prefix; 129: any mask
      const absl::uint128 full = ~absl::uint128(0);
      const absl::uint128 m = len == 0      ? absl::uint128(0)
                              : len <= 128 ? full << (128 - len)
                                           : absl::MakeUint128(rng(), rng());
      // Values: random, or with long zero runs (inet_ntop's "::" and dotted
      // IPv4 tails).
      absl::uint128 v = absl::MakeUint128(rng(), rng());
      if (i % 3 == 0) v &= absl::MakeUint128(rng() & rng(), rng() & rng() & rng());
      if (i % 5 == 0) v = absl::MakeUint128(0, (i % 2 ? 0xffff00000000ULL : 0) | (rng() >> 32));
      v &= m;
      const std::string t = FormatIpv6Masked(v, m);
      absl::uint128 pv = 0, pm = 0;
      ASSERT_TRUE(ParseIpv6Masked(t, &pv, &pm).ok()) << t;
      ASSERT_EQ(pv, v) << t;
      ASSERT_EQ(pm, m) << t;
    }
    {
      const uint64_t full = 0xffffffffffffULL;
      const int len = i % 50;  // 0..48: a prefix; 49: any mask
      const uint64_t m = len == 0    ? 0
                         : len <= 48 ? (full << (48 - len)) & full
                                     : rng() & full;
      const uint64_t v = rng() & m;
      const std::string t = FormatMacMasked(v, m);
      uint64_t pv = 0, pm = 0;
      ASSERT_TRUE(ParseMacMasked(t, &pv, &pm).ok()) << t;
      ASSERT_EQ(pv, v) << t;
      ASSERT_EQ(pm, m) << t;
    }
  }
}

// The canonical spelling of a prefix is its length, for every length (an
// Ethernet mask is always written out); any other mask is written out.
TEST(AddrTextTest, PrefixesAreWrittenAsLengths) {
  for (int len = 0; len < 32; ++len)
    EXPECT_EQ(FormatIpv4Masked(0x0a000000 & Prefix32(len), Prefix32(len)),
              FormatIpv4Masked(0x0a000000 & Prefix32(len), ~0u) + "/" + std::to_string(len));
  for (int len = 0; len < 128; ++len) {
    const absl::uint128 m = len == 0 ? absl::uint128(0) : ~absl::uint128(0) << (128 - len);
    EXPECT_EQ(FormatIpv6Masked(0, m), "::/" + std::to_string(len));
  }
  EXPECT_EQ(FormatIpv4Masked(0x0a000000, 0xff00ff00), "10.0.0.0/255.0.255.0");
  EXPECT_EQ(FormatIpv4Masked(0x0a000000, 0x7fffffff), "10.0.0.0/127.255.255.255");
  EXPECT_EQ(FormatIpv6Masked(0, absl::MakeUint128(~uint64_t{0}, 1)), "::/ffff:ffff:ffff:ffff::1");
  EXPECT_EQ(FormatMacMasked(0, 0xff0000000000ULL), "00:00:00:00:00:00/ff:00:00:00:00:00");
}

// Addresses are IPv4 as inet_pton(AF_INET) reads them (no leading zeros),
// IPv6 as inet_pton(AF_INET6) does; the formatters write what inet_ntop
// writes.
TEST(AddrTextTest, AddressesAgreeWithInetPtonAndNtop) {
  std::mt19937 rng(7);
  int accepted4 = 0, accepted6 = 0;
  for (int i = 0; i < 20000; ++i) {
    // Near-IPv4: 3 to 5 groups of 0 to 4 digits, sometimes a stray character.
    std::string t;
    for (int g = 0, n = 3 + static_cast<int>(rng() % 3); g < n; ++g) {
      if (g) t += '.';
      for (int d = 0, nd = static_cast<int>(rng() % 5); d < nd; ++d)
        t += static_cast<char>('0' + rng() % (d ? 10 : 3));
    }
    if (rng() % 8 == 0) t.insert(rng() % (t.size() + 1), 1, " a-+:"[rng() % 5]);
    in_addr a4{};
    const bool want4 = inet_pton(AF_INET, t.c_str(), &a4) == 1;
    uint32_t v = 0, m = 0;
    ASSERT_EQ(ParseIpv4Masked(t, &v, &m).ok(), want4) << t;
    if (want4) {
      ++accepted4;
      EXPECT_EQ(v, ntohl(a4.s_addr)) << t;
      char buf[INET_ADDRSTRLEN];
      EXPECT_EQ(FormatIpv4Masked(v, ~0u), inet_ntop(AF_INET, &a4, buf, sizeof(buf)));
    }
    // Near-IPv6: groups of 0 to 5 hex digits, ':' or '::', sometimes a
    // dotted tail or a stray character.
    std::string s;
    for (int g = 0, n = 1 + static_cast<int>(rng() % 9); g < n; ++g) {
      if (g) s += rng() % 6 ? ":" : "::";
      for (int d = 0, nd = static_cast<int>(rng() % 6); d < nd; ++d)
        s += "0123456789abcdefABCDEF"[rng() % 22];
    }
    if (rng() % 6 == 0) s += ":1.2.3.4";
    if (rng() % 8 == 0) s.insert(rng() % (s.size() + 1), 1, " g.%/"[rng() % 5]);
    in6_addr a6{};
    const bool want6 =
        s.find('/') == std::string::npos && inet_pton(AF_INET6, s.c_str(), &a6) == 1;
    absl::uint128 v6 = 0, m6 = 0;
    const absl::Status got6 = ParseIpv6Masked(s, &v6, &m6);
    if (s.find('/') != std::string::npos) continue;  // a suffix: not an address alone
    ASSERT_EQ(got6.ok(), want6) << s << ": " << got6;
    if (want6) {
      ++accepted6;
      char buf[INET6_ADDRSTRLEN];
      EXPECT_EQ(FormatIpv6Masked(v6, ~absl::uint128(0)),
                inet_ntop(AF_INET6, &a6, buf, sizeof(buf)));
    }
  }
  EXPECT_GT(accepted4, 100);
  EXPECT_GT(accepted6, 100);
}

// The longest texts fit the buffers the *To formatters are documented to
// need.
TEST(AddrTextTest, LongestTextsFitTheirBuffers) {
  char buf[kMaxIpv6MaskedText];
  EXPECT_LT(FormatIpv4MaskedTo(0xdededede, 0xfefefefe, buf), kMaxIpv4MaskedText);
  EXPECT_EQ(std::string(buf, FormatIpv4MaskedTo(0xdededede, 0xfefefefe, buf)),
            "222.222.222.222/254.254.254.254");
  const absl::uint128 all = ~absl::uint128(0);
  EXPECT_LT(FormatIpv6MaskedTo(all - 1, all - 2, buf), kMaxIpv6MaskedText);
  EXPECT_EQ(FormatMacMaskedTo(0xffffffffffffULL, 0xfffffffffffeULL, buf) + 1, kMaxMacMaskedText);
  std::string out = "x=";
  AppendIpv4Masked(0x0a000000, 0xff000000, &out);
  out += ",";
  AppendIpv6Masked(absl::MakeUint128(0xfe80000000000000ULL, 0),
                   absl::MakeUint128(0xffc0000000000000ULL, 0), &out);
  out += ",";
  AppendMacMasked(0x0000000000aaULL, 0xffffffffffffULL, &out);
  EXPECT_EQ(out, "x=10.0.0.0/8,fe80::/10,00:00:00:00:00:aa");
}

// The bulk rule paths parse and format addresses by the million: no heap
// allocation on success.
TEST(AddrTextTest, ParseAndFormatToAllocateNothing) {
  const std::string texts4[] = {"10.0.0.0/8", "192.168.1.1", "10.1.0.0/255.255.0.0",
                                "10.1.2.3/16"};
  uint32_t v = 0, m = 0;
  absl::uint128 v6 = 0, m6 = 0;
  uint64_t ve = 0, me = 0;
  char buf[kMaxIpv6MaskedText];
  size_t n = 0;
  const long before = g_allocations.load();
  for (int rep = 0; rep < 100; ++rep) {
    for (const std::string& t : texts4) {
      ASSERT_TRUE(ParseIpv4Masked(t, &v, &m).ok());
      n += FormatIpv4MaskedTo(v, m, buf);
    }
    ASSERT_TRUE(ParseIpv6Masked("2001:db8::1/ffff:ffff::ff", &v6, &m6).ok());
    n += FormatIpv6MaskedTo(v6, m6, buf);
    ASSERT_TRUE(ParseMacMasked("aa:bb:cc:dd:ee:ff/ff:ff:ff:00:00:00", &ve, &me).ok());
    n += FormatMacMaskedTo(ve, me, buf);
  }
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_GT(n, 0u);
}

}  // namespace
}  // namespace flowclass
