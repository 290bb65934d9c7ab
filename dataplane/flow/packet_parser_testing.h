// packet_parser_testing.h — helpers of the packet parser tests
// (packet_parser*_test.cc; header-only): the addresses every test frame
// uses, flows built from field lists, the flows of the standard Ethernet /
// IPv4 / IPv6 frames, and ParseExact, which parses from an exactly sized copy
// and checks that every parse entry point agrees.
#ifndef FLOWCLASS_DATAPLANE_FLOW_PACKET_PARSER_TESTING_H_
#define FLOWCLASS_DATAPLANE_FLOW_PACKET_PARSER_TESTING_H_

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/str_format.h"
#include "dataplane/flow/flow.h"
#include "dataplane/flow/packet_parser.h"
#include "gtest/gtest.h"
#include "tests/common/packet_builder.h"

namespace flowclass {

inline constexpr uint32_t kPort = 7;
inline constexpr uint64_t kMacA = 0x020000000001;
inline constexpr uint64_t kMacB = 0x0a1b2c3d4e5f;
inline constexpr uint32_t kIpA = 0x0a000001;  // 10.0.0.1
inline constexpr uint32_t kIpB = 0xc0a80102;  // 192.168.1.2
inline const absl::uint128 kIp6A = absl::MakeUint128(0x20010db800000000, 0x1);
inline const absl::uint128 kIp6B =
    absl::MakeUint128(0x20010db8ffff0000, 0x00000000cafe0002);

// Flow::ToString lives elsewhere (flow.cc owner); tests format flows here so
// that this binary does not depend on it.
inline std::string Describe(const Flow& f) {
  std::string s;
  for (int i = 0; i < kFieldCount; ++i) {
    const uint64_t v = f.Get(static_cast<Field>(i));
    if (v != 0) absl::StrAppendFormat(&s, "%s=%#x ", kFieldInfo[i].name, v);
  }
  return s.empty() ? "<empty>" : s;
}

inline ::testing::AssertionResult SameFlow(const Flow& got, const Flow& want) {
  if (got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\n  got:  " << Describe(got) << "\n  want: " << Describe(want);
}

inline Flow MakeFlow(std::initializer_list<std::pair<Field, uint64_t>> fields) {
  Flow f;
  for (const auto& [field, value] : fields) f.Set(field, value);
  return f;
}

inline uint16_t Tci(uint16_t vid, uint8_t pcp) {
  return static_cast<uint16_t>((pcp << kVlanPcpShift) | kVlanPresent | vid);
}

// Parses from an exactly sized heap copy so that ASan flags any read past the
// end of the frame.
inline Flow ParseExact(const std::vector<uint8_t>& frame, size_t len, uint8_t* flags) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[len]);
  if (len > 0) std::memcpy(copy.get(), frame.data(), len);
  const FlowKey key = ParsePacket(copy.get(), len, kPort);
  const Flow flow = ParsePacketToFlow(copy.get(), len, kPort, flags);
  // The sparse key is exactly the finalized packing of the dense flow.
  const FlowKey want = FlowKey::FromFlow(flow, *flags);
  EXPECT_EQ(key.map, want.map);
  EXPECT_EQ(key.n_words, want.n_words);
  EXPECT_EQ(key.flags, want.flags);
  EXPECT_EQ(key.words, want.words);
  EXPECT_EQ(key.hash, want.hash);
  // ParseBurst (one frame) gives the same key.
  const uint8_t* ptr = copy.get();
  const uint16_t len16 = static_cast<uint16_t>(len);
  FlowKey burst_key;
  ParseBurst(&ptr, &len16, 1, kPort, &burst_key);
  EXPECT_EQ(burst_key.map, want.map);
  EXPECT_EQ(burst_key.flags, want.flags);
  EXPECT_EQ(burst_key.words, want.words);
  EXPECT_EQ(burst_key.hash, want.hash);
  return flow;
}

inline PacketBuilder EthAB() { return PacketBuilder().Eth(kMacA, kMacB); }

// Fields every Ethernet case shares.
inline Flow EthFlow(uint16_t eth_type) {
  return MakeFlow({{Field::kInPort, kPort},
                   {Field::kEthSrc, kMacA},
                   {Field::kEthDst, kMacB},
                   {Field::kEthType, eth_type}});
}

inline Flow Ipv4Flow(uint8_t proto, uint8_t tos = 0, uint8_t ttl = 64,
              uint8_t frag = 0) {
  Flow f = EthFlow(kEthTypeIpv4);
  f.Set(Field::kIpv4Src, kIpA);
  f.Set(Field::kIpv4Dst, kIpB);
  f.Set(Field::kNwProto, proto);
  f.Set(Field::kNwTos, tos);
  f.Set(Field::kNwTtl, ttl);
  f.Set(Field::kNwFrag, frag);
  return f;
}

inline Flow Ipv6Flow(uint8_t proto, uint8_t tclass = 0, uint8_t hlim = 64,
              uint8_t frag = 0) {
  Flow f = EthFlow(kEthTypeIpv6);
  f.SetIpv6Src(kIp6A);
  f.SetIpv6Dst(kIp6B);
  f.Set(Field::kNwProto, proto);
  f.Set(Field::kNwTos, tclass);
  f.Set(Field::kNwTtl, hlim);
  f.Set(Field::kNwFrag, frag);
  return f;
}

inline Flow With(Flow f, std::initializer_list<std::pair<Field, uint64_t>> fields) {
  for (const auto& [field, value] : fields) f.Set(field, value);
  return f;
}

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_FLOW_PACKET_PARSER_TESTING_H_
