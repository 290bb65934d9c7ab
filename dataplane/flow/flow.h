// flow.h — the flow layout, dense `Flow` and sparse `FlowKey` ("miniflow").
//
// Contract
// --------
// Every header field the classifier can match lives at a fixed place in one of
// kFlowWords 64-bit words.  Two representations exist:
//
//   Flow      dense: all kFlowWords words.  Used for rule values and masks,
//             megaflow masks and anywhere code is not per packet.
//   FlowKey   sparse: a bitmap of the words that are non-zero plus those words
//             packed in order, and a hash precomputed over both.  This is what
//             the parser produces and what every cache and classifier takes.
//             Zero words are never stored, so two keys for the same header
//             values are bit-for-bit equal (EMC compares them with memcmp-like
//             word loops).
//
// All types here are plain values: no allocation, no locks, safe to copy
// between threads.  Field values are host-order integers: an IPv4 address
// 10.0.0.1 is 0x0a000001, an Ethernet address 00:11:22:33:44:55 is
// 0x001122334455.
//
// Word layout (bit 63 is the most significant):
//
//   word 0 kWordMeta   [63:48] tcp_flags (12 bits used) [47:32] eth_type
//                      [31:0]  in_port
//   word 1 kWordEthDst [63:48] vlan0 TCI (pcp:3 present:1 vid:12) [47:0] eth_dst
//   word 2 kWordEthSrc [63:48] vlan1 TCI                          [47:0] eth_src
//   word 3 kWordIpv4   [63:32] ipv4_src  [31:0] ipv4_dst
//   word 4,5           ipv6_src high, low 64 bits
//   word 6,7           ipv6_dst high, low 64 bits
//   word 8 kWordL4     [63:56] nw_proto [55:48] nw_tos (DSCP<<2|ECN)
//                      [47:40] nw_ttl   [39:32] nw_frag [31:16] tp_src [15:0] tp_dst
//
// ICMP and ICMPv6 type/code are stored in tp_src/tp_dst, as Open vSwitch does,
// so a 5-tuple rule and an ICMP rule use the same subtable shapes.
//
// The VLAN "present" bit is the 802.1Q CFI position: a frame with a tag always
// has it set, so `vlan_vid=0` (priority tag) differs from "no tag".
#ifndef FLOWCLASS_DATAPLANE_FLOW_FLOW_H_
#define FLOWCLASS_DATAPLANE_FLOW_FLOW_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/numeric/int128.h"

namespace flowclass {

inline constexpr int kFlowWords = 9;
using FlowMap = uint16_t;  // bit i set: word i is present
static_assert(kFlowWords <= 16, "FlowMap must hold one bit per word");
inline constexpr FlowMap kFullFlowMap = (1u << kFlowWords) - 1;

enum FlowWord : int {
  kWordMeta = 0,
  kWordEthDst = 1,
  kWordEthSrc = 2,
  kWordIpv4 = 3,
  kWordIpv6SrcHi = 4,
  kWordIpv6SrcLo = 5,
  kWordIpv6DstHi = 6,
  kWordIpv6DstLo = 7,
  kWordL4 = 8,
};

// Ethernet types the parser and rule model know about.
inline constexpr uint16_t kEthTypeIpv4 = 0x0800;
inline constexpr uint16_t kEthTypeIpv6 = 0x86dd;
inline constexpr uint16_t kEthTypeArp = 0x0806;
inline constexpr uint16_t kEthTypeVlan = 0x8100;
inline constexpr uint16_t kEthTypeQinQ = 0x88a8;

inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoTcp = 6;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;
inline constexpr uint8_t kIpProtoSctp = 132;

// nw_frag bits (as OVS FLOW_NW_FRAG_*): a first fragment has kFragAny, a later
// one kFragAny|kFragLater, a whole datagram neither.
inline constexpr uint8_t kFragAny = 1;
inline constexpr uint8_t kFragLater = 2;
inline constexpr uint8_t kFragMask = kFragAny | kFragLater;

// VLAN TCI as stored: pcp in [15:13], present in [12], vid in [11:0].
inline constexpr uint16_t kVlanPresent = 0x1000;
inline constexpr uint16_t kVlanVidMask = 0x0fff;
inline constexpr uint16_t kVlanPcpShift = 13;

// Every matchable field: where it lives.  128-bit IPv6 addresses are two
// fields (high and low word) so that every field fits one word.
enum class Field : uint8_t {
  kInPort,
  kEthType,
  kTcpFlags,
  kEthDst,
  kVlan0Tci,
  kEthSrc,
  kVlan1Tci,
  kIpv4Src,
  kIpv4Dst,
  kIpv6SrcHi,
  kIpv6SrcLo,
  kIpv6DstHi,
  kIpv6DstLo,
  kNwProto,
  kNwTos,
  kNwTtl,
  kNwFrag,
  kTpSrc,
  kTpDst,
  kCount,
};
inline constexpr int kFieldCount = static_cast<int>(Field::kCount);

struct FieldInfo {
  const char* name;  // name used in error messages and the native rule format
  uint8_t word;
  uint8_t shift;
  uint8_t bits;
  constexpr uint64_t Mask() const {
    return (bits == 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1)) << shift;
  }
};

inline constexpr std::array<FieldInfo, kFieldCount> kFieldInfo = {{
    {"in_port", kWordMeta, 0, 32},
    {"eth_type", kWordMeta, 32, 16},
    {"tcp_flags", kWordMeta, 48, 12},
    {"eth_dst", kWordEthDst, 0, 48},
    {"vlan0_tci", kWordEthDst, 48, 16},
    {"eth_src", kWordEthSrc, 0, 48},
    {"vlan1_tci", kWordEthSrc, 48, 16},
    {"ipv4_src", kWordIpv4, 32, 32},
    {"ipv4_dst", kWordIpv4, 0, 32},
    {"ipv6_src_hi", kWordIpv6SrcHi, 0, 64},
    {"ipv6_src_lo", kWordIpv6SrcLo, 0, 64},
    {"ipv6_dst_hi", kWordIpv6DstHi, 0, 64},
    {"ipv6_dst_lo", kWordIpv6DstLo, 0, 64},
    {"nw_proto", kWordL4, 56, 8},
    {"nw_tos", kWordL4, 48, 8},
    {"nw_ttl", kWordL4, 40, 8},
    {"nw_frag", kWordL4, 32, 8},
    {"tp_src", kWordL4, 16, 16},
    {"tp_dst", kWordL4, 0, 16},
}};

constexpr const FieldInfo& InfoOf(Field f) {
  return kFieldInfo[static_cast<int>(f)];
}

// Dense flow: a value or a mask over every field.
struct Flow {
  std::array<uint64_t, kFlowWords> w{};

  constexpr uint64_t Get(Field f) const {
    const FieldInfo& i = InfoOf(f);
    return (w[i.word] & i.Mask()) >> i.shift;
  }
  constexpr void Set(Field f, uint64_t v) {
    const FieldInfo& i = InfoOf(f);
    w[i.word] = (w[i.word] & ~i.Mask()) | ((v << i.shift) & i.Mask());
  }
  absl::uint128 Ipv6Src() const {
    return absl::MakeUint128(w[kWordIpv6SrcHi], w[kWordIpv6SrcLo]);
  }
  absl::uint128 Ipv6Dst() const {
    return absl::MakeUint128(w[kWordIpv6DstHi], w[kWordIpv6DstLo]);
  }
  void SetIpv6Src(absl::uint128 a) {
    w[kWordIpv6SrcHi] = absl::Uint128High64(a);
    w[kWordIpv6SrcLo] = absl::Uint128Low64(a);
  }
  void SetIpv6Dst(absl::uint128 a) {
    w[kWordIpv6DstHi] = absl::Uint128High64(a);
    w[kWordIpv6DstLo] = absl::Uint128Low64(a);
  }
  FlowMap NonZeroMap() const {
    FlowMap m = 0;
    for (int i = 0; i < kFlowWords; ++i) m |= FlowMap(w[i] != 0) << i;
    return m;
  }
  bool IsZero() const { return NonZeroMap() == 0; }
  Flow operator&(const Flow& o) const {
    Flow r;
    for (int i = 0; i < kFlowWords; ++i) r.w[i] = w[i] & o.w[i];
    return r;
  }
  Flow operator|(const Flow& o) const {
    Flow r;
    for (int i = 0; i < kFlowWords; ++i) r.w[i] = w[i] | o.w[i];
    return r;
  }
  Flow& operator|=(const Flow& o) {
    for (int i = 0; i < kFlowWords; ++i) w[i] |= o.w[i];
    return *this;
  }
  friend bool operator==(const Flow&, const Flow&) = default;

  // "in_port=1,eth_type=0x800,..." listing the non-zero fields; with a mask,
  // fields are shown as value/mask and fully wildcarded fields are omitted.
  std::string ToString() const;
  std::string ToString(const Flow& mask) const;
};

// "2001:db8::1": an IPv6 address as inet_ntop writes it.
std::string Ipv6String(absl::uint128 a);

// 64-bit hashing used by every table.  Not cryptographic; good avalanche.
inline constexpr uint64_t HashFinish(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}
inline constexpr uint64_t HashAdd(uint64_t h, uint64_t word) {
  h ^= word * 0x9e3779b97f4a7c15ULL;
  h = (h << 27) | (h >> 37);
  return h * 5 + 0x52dce729;
}
inline uint64_t HashWords(const uint64_t* words, int n, uint64_t basis) {
  uint64_t h = basis;
  for (int i = 0; i < n; ++i) h = HashAdd(h, words[i]);
  return HashFinish(h ^ static_cast<uint64_t>(n));
}

// Hash of a packed key: all kFlowWords words (those past n_words must be
// zero) and the map.  Used only by the exact-key caches (EMC, SMC, CD), which
// run it once per packet, so it is built for the parser's throughput rather
// than chained like HashWords: five independent 64x64->128-bit multiplies
// of word pairs xored with fixed odd constants, each folded (low ^ high) as
// in wyhash's "mum", xored together and mixed by HashFinish.  Quality is
// what a cache needs (collisions cost a compare, never a wrong answer).
inline uint64_t MulFold(uint64_t a, uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}
inline uint64_t HashKeyWords(const uint64_t* w, uint32_t map) {
  const uint64_t h = MulFold(w[0] ^ 0xa0761d6478bd642fULL, w[1] ^ 0xe7037ed1a0b428dbULL) ^
                     MulFold(w[2] ^ 0x8ebc6af09c88c6e3ULL, w[3] ^ 0x589965cc75374cc3ULL) ^
                     MulFold(w[4] ^ 0x1d8e4e27c47d124fULL, w[5] ^ 0x9e3779b97f4a7c15ULL) ^
                     MulFold(w[6] ^ 0xbf58476d1ce4e5b9ULL, w[7] ^ 0x94d049bb133111ebULL) ^
                     MulFold(w[8] ^ 0xff51afd7ed558ccdULL, map ^ 0xc4ceb9fe1a85ec53ULL);
  return HashFinish(h);
}

// Where a key's hash points in a hash-indexed table of 2^k entries of
// 2^entry_shift bytes (the EMC's first slots: Emc::prefetch_hint()).
// ParseBurst (packet_parser.h) prefetches that line as soon as each key's hash is known, so the
// table's misses overlap the parsing of the next frames.
struct HashPrefetch {
  const uint8_t* base = nullptr;  // nullptr: no prefetch
  uint32_t mask = 0;              // entries - 1
  int entry_shift = 0;
};

// Parse outcome flags carried next to the key (not matchable).
inline constexpr uint8_t kKeyTruncated = 1;  // frame ended inside a header
inline constexpr uint8_t kKeyMalformed = 2;  // a header field was invalid

// Sparse key.  88 bytes; copied by value into caches.
struct FlowKey {
  uint64_t hash = 0;   // HashKeyWords(words, map) — see Finalize()
  FlowMap map = 0;     // bit i set: word i is non-zero and stored
  uint8_t n_words = 0; // popcount(map)
  uint8_t flags = 0;   // kKeyTruncated | kKeyMalformed
  uint32_t reserved = 0;
  std::array<uint64_t, kFlowWords> words{};  // first n_words are valid

  // Word i of the dense flow (0 when absent).  Hot path: branch-light.
  uint64_t Word(int i) const {
    const FlowMap bit = FlowMap(1u << i);
    if (!(map & bit)) return 0;
    return words[std::popcount(static_cast<unsigned>(map & (bit - 1)))];
  }
  uint64_t Get(Field f) const {
    const FieldInfo& i = InfoOf(f);
    return (Word(i.word) & i.Mask()) >> i.shift;
  }

  static FlowKey FromFlow(const Flow& f, uint8_t flags = 0) {
    FlowKey k;
    k.flags = flags;
    for (int i = 0; i < kFlowWords; ++i) {
      if (f.w[i]) {
        k.map |= FlowMap(1u << i);
        k.words[k.n_words++] = f.w[i];
      }
    }
    k.Finalize();
    return k;
  }
  Flow ToFlow() const {
    Flow f;
    int j = 0;
    for (int i = 0; i < kFlowWords; ++i)
      if (map & (1u << i)) f.w[i] = words[j++];
    return f;
  }
  // Requires words[n_words..] == 0 (FromFlow and the parser guarantee it).
  void Finalize() { hash = HashKeyWords(words.data(), map); }

  // Equal header values (flags and hash ignored; the hash follows from them).
  bool SameFlow(const FlowKey& o) const {
    if (map != o.map) return false;
    for (int i = 0; i < n_words; ++i)
      if (words[i] != o.words[i]) return false;
    return true;
  }
  std::string ToString() const { return ToFlow().ToString(); }
};

// Builds the key ClassBench traces describe: IPv4, the 5-tuple only, ports
// as given whatever the protocol (the ClassBench convention).
FlowKey MakeFiveTupleKey(uint32_t ipv4_src, uint32_t ipv4_dst, uint16_t tp_src,
                         uint16_t tp_dst, uint8_t nw_proto, uint32_t in_port = 0);

// A burst: up to kMaxBurst packets parsed, looked up and acted on together
// (DPDK's rx burst, OVS's NETDEV_MAX_BURST).  Every stage takes a burst and a
// "todo" bitmap of the keys it still has to handle.
inline constexpr int kMaxBurst = 32;

// The todo map of a burst of its first `n` keys (bit i: key i).
inline constexpr uint32_t BurstMap(int n) { return n >= 32 ? ~0u : (1u << n) - 1; }

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_FLOW_FLOW_H_
