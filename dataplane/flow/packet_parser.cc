#include "dataplane/flow/packet_parser.h"

#include <bit>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"

namespace flowclass {
namespace {

// Wire header sizes (see the contract in the header).
constexpr size_t kEthAddrsLen = 12;
constexpr size_t kEthTypeLen = 2;
constexpr size_t kVlanTagLen = 4;
constexpr size_t kIpv4MinLen = 20;
constexpr size_t kIpv6Len = 40;
constexpr size_t kIpv6FragLen = 8;
constexpr size_t kTcpMinLen = 20;
constexpr size_t kUdpLen = 8;
constexpr size_t kSctpLen = 12;
constexpr size_t kIcmpLen = 8;
constexpr size_t kIcmpv6Len = 4;

constexpr uint8_t kIpv6HopByHop = 0;
constexpr uint8_t kIpv6Routing = 43;
constexpr uint8_t kIpv6Fragment = 44;
constexpr uint8_t kIpv6Ah = 51;
constexpr uint8_t kIpv6DestOpts = 60;

// Big-endian loads through memcpy: no alignment assumptions (headers after an
// odd-sized option block are unaligned), and compilers turn them into one
// load plus bswap.
inline uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::little)
    v = __builtin_bswap16(v);
  return v;
}
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::little)
    v = __builtin_bswap32(v);
  return v;
}
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::little)
    v = __builtin_bswap64(v);
  return v;
}
inline uint64_t Load48(const uint8_t* p) {
  return (uint64_t{Load16(p)} << 32) | Load32(p + 2);
}

inline void SetEthType(uint64_t* w, uint16_t type) {
  w[kWordMeta] =
      (w[kWordMeta] & ~(uint64_t{0xffff} << 32)) | (uint64_t{type} << 32);
}

inline uint64_t L4Word(uint8_t proto, uint8_t tos, uint8_t ttl, uint8_t frag) {
  return (uint64_t{proto} << 56) | (uint64_t{tos} << 48) |
         (uint64_t{ttl} << 40) | (uint64_t{frag} << 32);
}

inline void SetPorts(uint64_t* w, uint16_t src, uint16_t dst) {
  w[kWordL4] |= (uint64_t{src} << 16) | dst;
}

// q[0, n) is the L4 header and everything after it up to the datagram end.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint8_t ParseL4(uint8_t proto, bool ipv6,
                                                    const uint8_t* q, size_t n,
                                                    uint64_t* w) {
  switch (proto) {
    case kIpProtoTcp: {
      if (n < kTcpMinLen) return kKeyTruncated;
      const uint16_t off_flags = Load16(q + 12);
      const size_t hlen = static_cast<size_t>(off_flags >> 12) * 4;
      if (hlen < kTcpMinLen) return kKeyMalformed;
      // A header that claims more than the datagram holds: no ports or
      // flags (as OVS: a forged length must not satisfy a port rule).
      if (n < hlen) return kKeyTruncated;
      SetPorts(w, Load16(q), Load16(q + 2));
      w[kWordMeta] |= uint64_t{off_flags & 0x0fffu} << 48;
      return 0;
    }
    case kIpProtoUdp:
      if (n < kUdpLen) return kKeyTruncated;
      SetPorts(w, Load16(q), Load16(q + 2));
      return 0;
    case kIpProtoSctp:
      if (n < kSctpLen) return kKeyTruncated;
      SetPorts(w, Load16(q), Load16(q + 2));
      return 0;
    case kIpProtoIcmp:
      if (ipv6) return 0;
      if (n < kIcmpLen) return kKeyTruncated;
      SetPorts(w, q[0], q[1]);
      return 0;
    case kIpProtoIcmpv6:
      if (!ipv6) return 0;
      if (n < kIcmpv6Len) return kKeyTruncated;
      SetPorts(w, q[0], q[1]);
      return 0;
    default:
      return 0;
  }
}

// q[0, n) starts at the IPv4 header and runs to the end of the frame.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint8_t ParseIpv4(const uint8_t* q,
                                                      size_t n, uint64_t* w) {
  if (ABSL_PREDICT_FALSE(n < kIpv4MinLen)) return kKeyTruncated;
  const uint8_t ver_ihl = q[0];
  const size_t hlen = static_cast<size_t>(ver_ihl & 0x0fu) * 4;
  if (ABSL_PREDICT_FALSE((ver_ihl >> 4) != 4 || hlen < kIpv4MinLen))
    return kKeyMalformed;
  const size_t total = Load16(q + 2);
  if (ABSL_PREDICT_FALSE(total < hlen)) return kKeyMalformed;
  // A header or datagram longer than the frame: no L3 field at all, as in
  // OVS (its IPv4 sanity check), rather than fields a forged length vouches for.
  if (ABSL_PREDICT_FALSE(n < total)) return kKeyTruncated;  // total >= hlen

  const uint16_t frag_off = Load16(q + 6);
  uint8_t frag = 0;
  if (frag_off & 0x3fff) {  // MF set or offset non-zero
    frag = kFragAny;
    if (frag_off & 0x1fff) frag |= kFragLater;
  }
  const uint8_t proto = q[9];
  w[kWordIpv4] = Load64(q + 12);  // src in [63:32], dst in [31:0]: wire order
  w[kWordL4] = L4Word(proto, /*tos=*/q[1], /*ttl=*/q[8], frag);
  if (frag & kFragLater) return 0;
  return ParseL4(proto, /*ipv6=*/false, q + hlen, total - hlen, w);
}

// q[0, n) starts at the IPv6 header and runs to the end of the frame.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint8_t ParseIpv6(const uint8_t* q,
                                                      size_t n, uint64_t* w) {
  if (ABSL_PREDICT_FALSE(n < kIpv6Len)) return kKeyTruncated;
  if (ABSL_PREDICT_FALSE((q[0] >> 4) != 6)) return kKeyMalformed;
  const uint8_t tclass = static_cast<uint8_t>((q[0] << 4) | (q[1] >> 4));
  const size_t total = kIpv6Len + Load16(q + 4);
  // A payload longer than the frame: no L3 field at all (OVS's sanity check).
  if (ABSL_PREDICT_FALSE(n < total)) return kKeyTruncated;
  const uint8_t hop_limit = q[7];
  w[kWordIpv6SrcHi] = Load64(q + 8);
  w[kWordIpv6SrcLo] = Load64(q + 16);
  w[kWordIpv6DstHi] = Load64(q + 24);
  w[kWordIpv6DstLo] = Load64(q + 32);

  size_t off = kIpv6Len;
  uint8_t next = q[6];
  uint8_t frag = 0;
  uint8_t flags = 0;
  // Each extension header is at least 8 bytes long, so the walk ends after at
  // most (total - 40) / 8 steps.
  for (;;) {
    size_t hlen;
    if (next == kIpv6HopByHop || next == kIpv6Routing ||
        next == kIpv6DestOpts) {
      if (total - off < 2) {
        flags = kKeyTruncated;
        break;
      }
      hlen = (size_t{q[off + 1]} + 1) * 8;
    } else if (next == kIpv6Ah) {
      if (total - off < 2) {
        flags = kKeyTruncated;
        break;
      }
      hlen = (size_t{q[off + 1]} + 2) * 4;
    } else if (next == kIpv6Fragment) {
      if (total - off < kIpv6FragLen) {
        flags = kKeyTruncated;
        break;
      }
      hlen = kIpv6FragLen;
      // As OVS: a fragment header with offset 0 and M=0 (an atomic
      // fragment, RFC 6946) is not a fragment; a later fragment's nw_proto
      // is the fragment header's own number, 44 (its payload is no header).
      const uint16_t offlg = Load16(q + off + 2);
      if (offlg != 0) frag = kFragAny;
      if (offlg & 0xfff8) frag |= kFragLater;
    } else {
      break;  // upper-layer protocol (or ESP / no-next-header)
    }
    if (total - off < hlen) {
      flags = kKeyTruncated;
      break;
    }
    if (frag & kFragLater) break;  // next stays 44
    next = q[off];
    off += hlen;
  }
  // Extension headers cut short: the addresses only (OVS keeps no
  // tclass, hop limit or protocol for such a datagram).
  if (flags) return flags;
  w[kWordL4] = L4Word(next, tclass, hop_limit, frag);
  if (frag & kFragLater) return 0;
  return ParseL4(next, /*ipv6=*/true, q + off, total - off, w);
}

// Fills w[0, kFlowWords) (must be zeroed by the caller) and returns flags.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint8_t ParseToWords(const uint8_t* p,
                                                         size_t len,
                                                         uint32_t in_port,
                                                         uint64_t* w) {
  w[kWordMeta] = in_port;
  if (ABSL_PREDICT_FALSE(len < kEthAddrsLen)) return kKeyTruncated;
  w[kWordEthDst] = Load48(p);
  w[kWordEthSrc] = Load48(p + 6);
  size_t off = kEthAddrsLen;
  int tags = 0;
  uint16_t type;
  for (;;) {
    if (ABSL_PREDICT_FALSE(len - off < kEthTypeLen)) return kKeyTruncated;
    type = Load16(p + off);
    SetEthType(w, type);
    if (type != kEthTypeVlan && type != kEthTypeQinQ) break;
    if (tags == 2) return 0;  // third tag: left unparsed by contract
    if (ABSL_PREDICT_FALSE(len - off < kVlanTagLen)) return kKeyTruncated;
    const uint64_t tci = Load16(p + off + 2) | kVlanPresent;
    w[tags == 0 ? kWordEthDst : kWordEthSrc] |= tci << 48;
    ++tags;
    off += kVlanTagLen;
  }
  off += kEthTypeLen;
  if (type == kEthTypeIpv4) return ParseIpv4(p + off, len - off, w);
  if (type == kEthTypeIpv6) return ParseIpv6(p + off, len - off, w);
  return 0;
}

// Packs w into *key, in place.  Branch-free: every word is written to the
// next free slot and the slot only advances when the word is non-zero; the
// words array is zeroed first, so slots past n_words end up zero exactly as
// in FlowKey::FromFlow.  Writing the key where it lives (rather than packing a
// local FlowKey and copying it out) matters: the copy reloads with 16-byte
// loads what the pack loop stored 8 bytes at a time, and every such load
// misses store forwarding (~12 cycles each, the largest cost of a parse).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void PackKey(const uint64_t* w,
                                                 uint8_t flags, FlowKey* key) {
  uint64_t* out = key->words.data();
  for (int i = 0; i < kFlowWords; ++i) out[i] = 0;
  unsigned n = 0;
  FlowMap map = 0;
#pragma GCC unroll 16
  for (int i = 0; i < kFlowWords; ++i) {
    out[n] = w[i];
    const unsigned nz = w[i] != 0;
    map |= static_cast<FlowMap>(nz << i);
    n += nz;
  }
  key->map = map;
  key->n_words = static_cast<uint8_t>(n);
  key->flags = flags;
  key->reserved = 0;
  key->Finalize();
}

// The common case in one straight line: untagged Ethernet, IPv4 without
// options, not a fragment, TCP or UDP with the whole header inside the
// datagram, and non-zero MAC and IP words (so the packed layout is fixed:
// meta, eth_dst, eth_src, ipv4, l4).  Returns false, having written nothing,
// for anything else; the caller then runs the general parser, which gives
// the same key for every frame this accepts (packet_parser_test compares
// ParsePacket / ParseBurst, which take this path, with ParsePacketToFlow,
// which never does, on every case, every prefix and mutated frames).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ParseFastIpv4(const uint8_t* p,
                                                       size_t len,
                                                       uint32_t in_port,
                                                       FlowKey* key) {
  constexpr size_t kIpOff = kEthAddrsLen + kEthTypeLen;
  if (len < kIpOff + kIpv4MinLen + kUdpLen) return false;
  const uint8_t* ip = p + kIpOff;
  if (Load16(p + kEthAddrsLen) != kEthTypeIpv4 || ip[0] != 0x45 ||
      (Load16(ip + 6) & 0x3fff) != 0)
    return false;
  const size_t total = Load16(ip + 2);
  if (total > len - kIpOff) return false;  // longer than the frame: no L3 (slow path)
  const uint8_t proto = ip[9];
  const uint8_t* l4 = ip + kIpv4MinLen;
  uint64_t meta = in_port | (uint64_t{kEthTypeIpv4} << 32);
  if (proto == kIpProtoTcp) {
    if (total < kIpv4MinLen + kTcpMinLen) return false;
    const uint16_t off_flags = Load16(l4 + 12);
    const size_t hlen = static_cast<size_t>(off_flags >> 12) * 4;
    if (hlen < kTcpMinLen || total - kIpv4MinLen < hlen) return false;
    meta |= uint64_t{off_flags & 0x0fffu} << 48;
  } else if (proto != kIpProtoUdp || total < kIpv4MinLen + kUdpLen) {
    return false;
  }
  // len >= 42 here: whole 8-byte loads cover each 6-byte address (one
  // load and a byte swap instead of two of each).
  const uint64_t eth_dst = Load64(p) >> 16;
  const uint64_t eth_src = Load64(p + 6) >> 16;
  const uint64_t ipv4 = Load64(ip + 12);
  if (eth_dst == 0 || eth_src == 0 || ipv4 == 0) return false;
  uint64_t* w = key->words.data();
  w[0] = meta;
  w[1] = eth_dst;
  w[2] = eth_src;
  w[3] = ipv4;
  w[4] = L4Word(proto, /*tos=*/ip[1], /*ttl=*/ip[8], /*frag=*/0) |
         Load32(l4);  // tp_src << 16 | tp_dst
  for (int i = 5; i < kFlowWords; ++i) w[i] = 0;
  key->map = (1u << kWordMeta) | (1u << kWordEthDst) | (1u << kWordEthSrc) |
             (1u << kWordIpv4) | (1u << kWordL4);
  key->n_words = 5;
  key->flags = 0;
  key->reserved = 0;
  key->Finalize();
  return true;
}

}  // namespace

FlowKey ParsePacket(const uint8_t* frame, size_t len, uint32_t in_port) {
  FlowKey key;
  if (ParseFastIpv4(frame, len, in_port, &key)) return key;
  uint64_t w[kFlowWords] = {};
  const uint8_t flags = ParseToWords(frame, len, in_port, w);
  PackKey(w, flags, &key);
  return key;
}

int ParseBurst(const uint8_t* const* frames, const uint16_t* lens, int n,
               uint32_t in_port, FlowKey* keys, HashPrefetch prefetch) {
  // Frames usually arrive cold (just DMA'd); fetch the headers of the next
  // two while parsing this one.
  for (int i = 0; i < n && i < 2; ++i) __builtin_prefetch(frames[i]);
  int flagged = 0;  // the fast path never flags
  for (int i = 0; i < n; ++i) {
    if (i + 2 < n) __builtin_prefetch(frames[i + 2]);
    if (!ParseFastIpv4(frames[i], lens[i], in_port, &keys[i])) {
      uint64_t w[kFlowWords] = {};
      const uint8_t flags = ParseToWords(frames[i], lens[i], in_port, w);
      PackKey(w, flags, &keys[i]);
      flagged += flags != 0;
    }
    if (prefetch.base != nullptr)
      __builtin_prefetch(prefetch.base + (size_t{static_cast<uint32_t>(keys[i].hash) & prefetch.mask}
                                          << prefetch.entry_shift));
  }
  return flagged;
}

Flow ParsePacketToFlow(const uint8_t* frame, size_t len, uint32_t in_port,
                       uint8_t* flags) {
  Flow f;
  const uint8_t fl = ParseToWords(frame, len, in_port, f.w.data());
  if (flags != nullptr) *flags = fl;
  return f;
}

}  // namespace flowclass
