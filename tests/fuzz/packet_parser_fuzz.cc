// libFuzzer target for the packet parser (OVS tests/oss-fuzz style: parse,
// then check invariants and a round trip).
//
// Built by tests/fuzz/CMakeLists.txt: with libFuzzer in the clang fuzz build
// (`make fuzz`, and a short run in `make test`), and as a replay of the seed
// corpus and regression inputs in the other builds (tests/fuzz/README.md).
// libFuzzer hands over a buffer of exactly `size` bytes, so ASan reports any
// read past the end of the frame.
//
// Invariants checked (any violation aborts):
//   1. The sparse key is the finalized packing of the dense flow (map, words,
//      zeroed tail, hash) and carries only the two defined flags.
//   2. ParseBurst of one frame gives the same key as ParsePacket.
//   3. A cleanly parsed flow that CanBuildFrameFromFlow() accepts parses back
//      to itself from BuildFrameFromFlow() — the builder is the parser's
//      inverse, which end-to-end tests rely on to generate pcaps.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dataplane/flow/flow.h"
#include "dataplane/flow/packet_parser.h"
#include "tests/common/packet_builder.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "packet_parser_fuzz: invariant violated: %s\n", what);
    std::abort();
  }
}

bool SameKey(const flowclass::FlowKey& a, const flowclass::FlowKey& b) {
  return a.map == b.map && a.n_words == b.n_words && a.flags == b.flags &&
         a.words == b.words && a.hash == b.hash;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace flowclass;
  if (size > 0xffff) return 0;  // ParseBurst lengths are 16-bit
  constexpr uint32_t kInPort = 0x01020304;

  const FlowKey key = ParsePacket(data, size, kInPort);
  uint8_t flags = 0xff;
  const Flow flow = ParsePacketToFlow(data, size, kInPort, &flags);
  Check(SameKey(key, FlowKey::FromFlow(flow, flags)), "key != FromFlow(flow)");
  Check((flags & ~(kKeyTruncated | kKeyMalformed)) == 0, "unknown flag");
  Check(flow.Get(Field::kInPort) == kInPort, "in_port");

  const uint8_t* frames[1] = {data};
  const uint16_t lens[1] = {static_cast<uint16_t>(size)};
  FlowKey burst[1];
  ParseBurst(frames, lens, 1, kInPort, burst);
  Check(SameKey(burst[0], key), "ParseBurst != ParsePacket");

  if (flags == 0 && CanBuildFrameFromFlow(flow)) {
    const std::vector<uint8_t> frame = BuildFrameFromFlow(flow);
    uint8_t again_flags = 0xff;
    const Flow again =
        ParsePacketToFlow(frame.data(), frame.size(), kInPort, &again_flags);
    Check(again_flags == 0 && again == flow, "BuildFrameFromFlow round trip");
  }
  return 0;
}
