// bench_common.h — what the pipeline attack benchmarks (tse_benchmark,
// soak_benchmark) and their tests share: the ACL of the Tuple Space
// Explosion setup and its attack keys, the soak's rules and scan keys, a
// seeded generator, --flag=value parsing, the median, the load average and a
// cycle counter.
// Header only, for benchmarks and tests (not part of flowclass_dataplane).
#ifndef FLOWCLASS_DATAPLANE_BENCH_COMMON_H_
#define FLOWCLASS_DATAPLANE_BENCH_COMMON_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "dataplane/rules/rule_table.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace flowclass::bench {

inline constexpr uint32_t kAclSrc = 0x0a000000u;  // 10.0.0.0/16
inline constexpr uint32_t kAclDst = 0xc0a80000u;  // 192.168.0.0/16

// One rule of the ACL on in_port 1: IPv4, optional prefixes (length 0: any)
// and exact ports (-1: any).
inline Rule AclRule(uint64_t id, uint32_t prio, int src_len, uint32_t src, int dst_len,
                    uint32_t dst, int tp_dst, int tp_src, Action a) {
  Rule r;
  r.id = id;
  r.priority = prio;
  r.action = a;
  r.match.SetExact(Field::kInPort, 1);
  r.match.SetExact(Field::kEthType, kEthTypeIpv4);
  auto prefix = [](int len) { return len == 0 ? 0u : ~uint32_t{0} << (32 - len); };
  if (src_len) r.match.SetMasked(Field::kIpv4Src, src & prefix(src_len), prefix(src_len));
  if (dst_len) r.match.SetMasked(Field::kIpv4Dst, dst & prefix(dst_len), prefix(dst_len));
  if (tp_dst >= 0) r.match.SetExact(Field::kTpDst, static_cast<uint64_t>(tp_dst));
  if (tp_src >= 0) r.match.SetExact(Field::kTpSrc, static_cast<uint64_t>(tp_src));
  return r;
}

// Four allow rules under 10.0.0.0/16 -> 192.168.0.0/16 (ids 1-4: a /24
// source, a /24 destination, tp_dst=80, tp_src=53, all output:2) and a
// default deny (id 5).
inline std::vector<Rule> AclRules() {
  const Action out = Action::Output(2);
  return {
      AclRule(1, 40, 24, kAclSrc | 0x100, 16, kAclDst, -1, -1, out),  // 10.0.1.0/24
      AclRule(2, 30, 16, kAclSrc, 24, kAclDst | 0x100, -1, -1, out),  // 192.168.1.0/24
      AclRule(3, 20, 16, kAclSrc, 16, kAclDst, 80, -1, out),
      AclRule(4, 10, 16, kAclSrc, 16, kAclDst, -1, 53, out),
      AclRule(5, 0, 0, 0, 0, 0, -1, -1, Action::Drop()),  // default deny
  };
}

inline uint64_t Rng(uint64_t* s) {  // splitmix64
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Flow number i of the victim: one of the flows that allow rule 1, 2 or 3
// (i % 3) forwards, drawn from *s.
inline FlowKey AclVictimKey(int i, uint64_t* s) {
  const uint64_t r = Rng(s);
  const uint16_t sport = static_cast<uint16_t>(1024 + r % 60000);
  const uint8_t lo = static_cast<uint8_t>(r >> 20);
  switch (i % 3) {
    case 0:  // rule 1
      return MakeFiveTupleKey(kAclSrc | 0x100 | lo, kAclDst | (r >> 32 & 0xffff), sport,
                              static_cast<uint16_t>(r >> 48), 6, 1);
    case 1:  // rule 2
      return MakeFiveTupleKey(kAclSrc | lo, kAclDst | 0x100 | (r >> 40 & 0xff), sport,
                              static_cast<uint16_t>(r >> 48), 6, 1);
    default:  // rule 3
      return MakeFiveTupleKey(kAclSrc | lo, kAclDst | (r >> 40 & 0xff), sport, 80, 6, 1);
  }
}

// The Tuple Space Explosion attack on AclRules(): one key per (src byte bit,
// dst byte bit, tp_dst bit, tp_src bit), each failing rule 1 at that bit of
// 10.0.X, rule 2 at that bit of 192.168.Y, rule 3 at that bit of tp_dst and
// rule 4 at that bit of tp_src, so that each un-wildcards its own
// combination: 8 x 8 x 16 x 16 = 16384 keys of as many megaflow masks, all
// denied by the default rule.  Each key `repeat` times in a row.
inline std::vector<FlowKey> TseAttackKeys(int repeat = 1) {
  std::vector<FlowKey> keys;
  for (int p = 0; p < 8; ++p)
    for (int q = 0; q < 8; ++q)
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
          const uint32_t x = 1u ^ (1u << p), y = 1u ^ (1u << q);
          const uint16_t dport = static_cast<uint16_t>(80 ^ (1u << i));
          const uint16_t sport = static_cast<uint16_t>(53 ^ (1u << j));
          for (int k = 0; k < repeat; ++k)
            keys.push_back(MakeFiveTupleKey(kAclSrc | x << 8 | 7, kAclDst | y << 8 | 9, sport,
                                            dport, 17, 1));
        }
  return keys;
}

// The soak's rules: AclRules() plus a blocklist on in_port 1 of `hosts`
// random source /32s and as many destination /32s (drop, priority 60, ids
// from 100; none inside 10.0.0.0/16 or 192.168.0.0/16).  Their prefix
// levels make the megaflow of a random key keep a /16 or /24 of both
// addresses, so nearly every scan packet (spoofed source, random
// destination) is a megaflow of its own.
inline std::vector<Rule> SoakRules(int hosts = 1000) {
  std::vector<Rule> rules = AclRules();
  uint64_t s = 0x50a6;
  uint64_t id = 100;
  for (int side = 0; side < 2; ++side) {
    for (int i = 0; i < hosts;) {
      const uint32_t a = static_cast<uint32_t>(Rng(&s));
      if ((a >> 16) == (kAclSrc >> 16) || (a >> 16) == (kAclDst >> 16)) continue;
      rules.push_back(side == 0 ? AclRule(id++, 60, 32, a, 0, 0, -1, -1, Action::Drop())
                                : AclRule(id++, 60, 0, 0, 32, a, -1, -1, Action::Drop()));
      ++i;
    }
  }
  return rules;
}

// A random new 5-tuple on in_port 1 (a scan of spoofed sources): addresses
// and ports anywhere, TCP or UDP.
inline FlowKey ScanKey(uint64_t* s) {
  const uint64_t a = Rng(s), b = Rng(s);
  return MakeFiveTupleKey(static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32),
                          static_cast<uint16_t>(b), static_cast<uint16_t>(b >> 16),
                          (b >> 32) & 1 ? 6 : 17, 1);
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// --name=value: true (and *value set) when `arg` is that flag.
inline bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

// The TSC (the pipeline's own cycle counter), else steady_clock ticks.
inline uint64_t Cycles() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

}  // namespace flowclass::bench

#endif  // FLOWCLASS_DATAPLANE_BENCH_COMMON_H_
