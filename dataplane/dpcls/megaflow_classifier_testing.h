// megaflow_classifier_testing.h — helpers of the megaflow classifier tests
// (megaflow_classifier*_test.cc; header-only): megaflow masks and values on
// one in_port, verdicts, a random megaflow generator over fixed mask shapes,
// and a classifier that must be created.
#ifndef FLOWCLASS_DATAPLANE_DPCLS_MEGAFLOW_CLASSIFIER_TESTING_H_
#define FLOWCLASS_DATAPLANE_DPCLS_MEGAFLOW_CLASSIFIER_TESTING_H_

#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "dataplane/dpcls/megaflow.h"
#include "dataplane/dpcls/megaflow_classifier.h"
#include "dataplane/flow/flow.h"
#include "gtest/gtest.h"
#include "tests/common/megaflow_testing.h"
#include "tests/common/sanitizer.h"

namespace flowclass {

inline constexpr int kScale = kSanitized ? 5 : 20;  // ASan: fewer rounds, same coverage

using FieldValues = std::initializer_list<std::pair<Field, uint64_t>>;

// A megaflow mask: in_port exact, plus `fields` with their masks.
inline Flow PortMask(FieldValues fields = {}) {
  Flow m;
  m.Set(Field::kInPort, 0xffffffff);
  for (const auto& [field, mask] : fields) m.Set(field, mask);
  return m;
}

// A megaflow value: in_port `port`, plus `fields` with their values.
inline Flow PortFlow(uint32_t port, FieldValues fields = {}) {
  Flow v;
  v.Set(Field::kInPort, port);
  for (const auto& [field, value] : fields) v.Set(field, value);
  return v;
}

inline Verdict Out(uint32_t port, uint64_t rule = 1) {
  return Verdict{rule, Action::Output(port)};
}

// Random megaflows over a few ports and mask shapes, with values from small
// domains so keys near them both hit and narrowly miss.
class Generator : public RandomMegaflowGen<Generator> {
 public:
  explicit Generator(uint64_t seed) : RandomMegaflowGen(seed) {
    const uint32_t ports[] = {0, 1, 7, 0xffffffffu, 0x80000000u};
    ports_.assign(std::begin(ports), std::end(ports));
    for (int i = 0; i < 12; ++i) masks_.push_back(RandomMask());
  }

  uint32_t RandomPort() { return ports_[rng_() % ports_.size()]; }

  Flow RandomMask() {
    Flow m = PortMask();
    m.Set(Field::kEthType, 0xffff);
    // Always a fairly specific ipv4_src prefix, so that random megaflows
    // rarely overlap and the live population grows.
    m.Set(Field::kIpv4Src, PrefixMask(16 + 4 * (rng_() % 5)));
    if (Bit()) m.Set(Field::kIpv4Dst, PrefixMask(rng_() % 33));
    if (Bit()) m.Set(Field::kNwProto, 0xff);
    if (Bit()) m.Set(Field::kTpDst, Bit() ? 0xffff : 0xff00);
    if (rng_() % 4 == 0) m.Set(Field::kEthDst, 0xffffffffffffULL);
    if (rng_() % 4 == 0) m.w[kWordIpv6SrcLo] = ~uint64_t{0} << (rng_() % 64);
    return m;
  }

  // Megaflow (value, mask) for one of the fixed shapes.
  std::pair<Flow, Flow> RandomMegaflow() {
    const Flow& mask = masks_[rng_() % masks_.size()];
    Flow f = RandomFlow(RandomPort());
    return {f & mask, mask};
  }

  // A flow whose words are often zero (absent from the miniflow).
  Flow RandomFlow(uint32_t port) {
    Flow f;
    f.Set(Field::kInPort, port);
    f.Set(Field::kEthType, rng_() % 4 ? kEthTypeIpv4 : 0);
    if (Bit()) f.Set(Field::kIpv4Src, 0x0a000000u | (rng_() % 4096) << 8);
    if (Bit()) f.Set(Field::kIpv4Dst, 0xc0a80000u | (rng_() % 64));
    if (Bit()) f.Set(Field::kNwProto, Bit() ? kIpProtoTcp : kIpProtoUdp);
    if (Bit()) f.Set(Field::kTpDst, rng_() % 4 * 0x100 + rng_() % 16);
    if (Bit()) f.Set(Field::kEthDst, rng_() % 3);
    if (Bit()) f.w[kWordIpv6SrcLo] = rng_() % 2 ? ~uint64_t{0} : 0x1234;
    return f;
  }

 private:
  static uint64_t PrefixMask(int len) {
    return len == 0 ? 0 : (0xffffffffull << (32 - len)) & 0xffffffffull;
  }

  std::vector<uint32_t> ports_;
  std::vector<Flow> masks_;
};

inline std::unique_ptr<MegaflowClassifier> MakeClassifier(
    MegaflowPool* pool, MegaflowClassifierOptions options = {}) {
  auto c = MegaflowClassifier::Create(pool, options);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPCLS_MEGAFLOW_CLASSIFIER_TESTING_H_
