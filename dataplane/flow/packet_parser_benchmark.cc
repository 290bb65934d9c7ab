// ParseBurst over bursts of kMaxBurst prebuilt frames; reports ns per packet
// ("ns/pkt" counter) and packets per second (items_per_second).
//
//   ninja -C build packet_parser_benchmark &&
//   build/bench/packet_parser_benchmark
//
// The frames live in a pool of 64 bursts (2048 frames, ~200 KiB) that is
// walked round-robin, so the numbers include L1/L2 misses on frame headers
// roughly as after a NIC DMA, not a single hot burst.
#include <cstdint>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "dataplane/flow/packet_parser.h"
#include "tests/common/packet_builder.h"

namespace flowclass {
namespace {

constexpr int kBursts = 64;

enum Mix { kTcp4, kUdp4, kIpv6, kVlanMixed };

std::vector<uint8_t> MakeFrame(Mix mix, int i) {
  const uint32_t src = 0x0a000000u + static_cast<uint32_t>(i);
  const uint16_t sport = static_cast<uint16_t>(1024 + i);
  const absl::uint128 src6 =
      absl::MakeUint128(0x20010db800000000, static_cast<uint64_t>(i));
  PacketBuilder b;
  b.Eth(0x020000000001, 0x020000000002);
  switch (mix) {
    case kTcp4:
      b.Ipv4(src, 0xc0a80001).Tcp(sport, 80, kTcpAck).Payload(64);
      break;
    case kUdp4:
      b.Ipv4(src, 0xc0a80001).Udp(sport, 53).Payload(64);
      break;
    case kIpv6:
      b.Ipv6(src6, 1).Tcp(sport, 443, kTcpAck).Payload(64);
      break;
    case kVlanMixed:
      switch (i % 4) {
        case 0:
          b.Vlan(10).Ipv4(src, 1).Tcp(sport, 80, kTcpAck);
          break;
        case 1:
          b.QinQ(10, 20).Ipv4(src, 1).Udp(sport, 53);
          break;
        case 2:
          b.Ipv6(src6, 1).Ipv6HopByHop().Udp(sport, 53);
          break;
        default:
          b.Vlan(10).Ipv6(src6, 1).Ipv6Fragment(true, 0).Tcp(sport, 22,
                                                             kTcpSyn);
          break;
      }
      b.Payload(32);
      break;
  }
  return b.Build();
}

void BM_ParseBurst(benchmark::State& state) {
  const Mix mix = static_cast<Mix>(state.range(0));
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < kBursts * kMaxBurst; ++i)
    frames.push_back(MakeFrame(mix, i));
  const FrameArrays arrays(std::move(frames));
  const std::vector<const uint8_t*>& ptrs = arrays.ptrs;
  const std::vector<uint16_t>& lens = arrays.lens;
  FlowKey keys[kMaxBurst];
  int burst = 0;
  for (auto _ : state) {
    const size_t base = static_cast<size_t>(burst) * kMaxBurst;
    ParseBurst(&ptrs[base], &lens[base], kMaxBurst, /*in_port=*/1, keys);
    benchmark::DoNotOptimize(keys);
    benchmark::ClobberMemory();
    burst = (burst + 1) % kBursts;
  }
  state.SetItemsProcessed(state.iterations() * kMaxBurst);
  state.counters["ns/pkt"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kMaxBurst),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ParseBurst)
    ->Arg(kTcp4)
    ->Arg(kUdp4)
    ->Arg(kIpv6)
    ->Arg(kVlanMixed)
    ->ArgName("mix(0=tcp4,1=udp4,2=tcp6,3=vlan/qinq/ext)");

// One packet at a time, for comparison with the burst form.
void BM_ParsePacket(benchmark::State& state) {
  const std::vector<uint8_t> frame = MakeFrame(kTcp4, 1);
  for (auto _ : state) {
    FlowKey k = ParsePacket(frame.data(), frame.size(), 1);
    benchmark::DoNotOptimize(k);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParsePacket);

}  // namespace
}  // namespace flowclass

BENCHMARK_MAIN();
