#include "tests/common/random_rules.h"

#include <algorithm>
#include <utility>

namespace flowclass {
namespace {

constexpr uint16_t kWellKnownPorts[] = {0,   22,   53,   80,   123,
                                        443, 1023, 1024, 8080, 65535};

}  // namespace

RandomRuleGen::RandomRuleGen(uint64_t seed, RandomRuleOptions options)
    : rng_(seed), options_(options) {
  const int pool = std::max(1, options_.address_pool);
  for (int i = 0; i < pool; ++i) {
    ipv4_pool_.push_back(static_cast<uint32_t>(rng_()) & 0xffff0000u);
    ipv6_pool_.push_back(rng_() & ~uint64_t{0xffffffff});
  }
  for (int i = 0; i < 4; ++i) mac_pool_.push_back(rng_() & 0xfeffffffffffULL);
}

uint64_t RandomRuleGen::Uniform(uint64_t n) {
  return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_);
}

bool RandomRuleGen::Chance(double p) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
}

RandomRuleGen::Family RandomRuleGen::PickFamily() {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  if (u < options_.l2_only_fraction) return Family::kL2;
  if (u < options_.l2_only_fraction + options_.ipv6_fraction)
    return Family::kIpv6;
  return Family::kIpv4;
}

uint64_t RandomRuleGen::PrefixMask(int len, int bits) {
  if (len <= 0) return 0;
  const uint64_t full = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  if (len >= bits) return full;
  return (full << (bits - len)) & full;
}

uint16_t RandomRuleGen::PoolPort() {
  if (Chance(0.6)) return kWellKnownPorts[Uniform(std::size(kWellKnownPorts))];
  return static_cast<uint16_t>(Uniform(65536));
}

// One 32- or 64-bit address field: a prefix of a typical length, or now and
// then an arbitrary mask.  `base` comes from the pool so rules overlap.
void RandomRuleGen::AddAddress(Match* m, Field f, int bits, uint64_t base) {
  static constexpr int kLens32[] = {0, 0, 8, 16, 16, 24, 24, 32, 32};
  static constexpr int kLens64[] = {0, 0, 16, 32, 48, 56, 64, 64};
  uint64_t mask;
  if (Chance(options_.arbitrary_mask_fraction)) {
    mask = rng_() & PrefixMask(bits, bits);
  } else if (Chance(0.2)) {
    mask = PrefixMask(static_cast<int>(Uniform(bits + 1)), bits);
  } else if (bits == 32) {
    mask = PrefixMask(kLens32[Uniform(std::size(kLens32))], 32);
  } else {
    mask = PrefixMask(kLens64[Uniform(std::size(kLens64))], 64);
  }
  if (mask == 0) return;
  // Pool network plus random host bits.
  const uint64_t host_bits = bits == 32 ? 0xffffu : 0xffffffffu;
  const uint64_t v = (base & ~host_bits) | (rng_() & host_bits);
  m->SetMasked(f, v, mask);
}

void RandomRuleGen::AddPort(Match* m, Field f) {
  PortRange* range = f == Field::kTpSrc ? &m->tp_src : &m->tp_dst;
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  if (u < 0.45) return;  // wildcard
  if (u < 0.65) {
    m->SetExact(f, PoolPort());
    return;
  }
  if (u < 0.65 + options_.range_fraction) {
    switch (Uniform(6)) {
      case 0:
        *range = {0, 1023};
        break;
      case 1:
        *range = {1024, 65535};
        break;
      case 2:
        *range = {1, 65534};
        break;
      case 3: {
        const uint16_t lo = PoolPort();
        *range = {
            lo, static_cast<uint16_t>(std::min<int>(65535, lo + Uniform(64)))};
        break;
      }
      default: {
        uint16_t a = static_cast<uint16_t>(Uniform(65536));
        uint16_t b = static_cast<uint16_t>(Uniform(65536));
        if (a > b) std::swap(a, b);
        *range = {a, b};
        break;
      }
    }
    if (range->IsFull()) *range = {1, 65535};
    return;
  }
  // Masked port: a prefix or an arbitrary mask.
  const uint64_t mask =
      Chance(0.5) ? PrefixMask(1 + Uniform(16), 16) : (1 + Uniform(0xffff));
  m->SetMasked(f, PoolPort(), mask);
}

Rule RandomRuleGen::NextRule(uint64_t id) {
  Rule r;
  r.id = id;
  r.priority =
      static_cast<uint32_t>(Uniform(std::max(1u, options_.max_priority)));
  r.cookie = Uniform(std::max<uint64_t>(1, options_.cookies));
  r.action =
      Chance(0.2)
          ? Action::Drop()
          : Action::Output(1 + static_cast<uint32_t>(Uniform(kMaxPortNumber)));
  Match& m = r.match;
  if (Chance(0.3)) m.SetExact(Field::kInPort, 1 + Uniform(options_.in_ports));
  if (Chance(0.1))
    m.SetExact(Field::kEthDst, mac_pool_[Uniform(mac_pool_.size())]);
  if (Chance(0.03))
    m.SetMasked(Field::kEthDst, 0x010000000000ULL, 0x010000000000ULL);
  if (Chance(0.1))
    m.SetExact(Field::kEthSrc, mac_pool_[Uniform(mac_pool_.size())]);
  if (Chance(0.1)) {
    const uint64_t vid = 1 + Uniform(4);
    switch (Uniform(4)) {
      case 0:
        m.SetMasked(Field::kVlan0Tci, 0, kVlanPresent);
        break;
      case 1:
        m.SetMasked(Field::kVlan0Tci, kVlanPresent, kVlanPresent);
        break;
      case 2:
        m.SetMasked(Field::kVlan0Tci, kVlanPresent | vid,
                    kVlanPresent | kVlanVidMask);
        break;
      default:
        m.SetMasked(Field::kVlan0Tci,
                    kVlanPresent | (Uniform(8) << kVlanPcpShift), 0xf000);
    }
  }

  const Family family = PickFamily();
  if (family == Family::kL2) {
    if (Chance(0.5)) {
      static constexpr uint16_t kTypes[] = {kEthTypeArp, kEthTypeIpv4,
                                            kEthTypeIpv6};
      m.SetExact(Field::kEthType, kTypes[Uniform(std::size(kTypes))]);
    }
    return r;
  }
  const bool v6 = family == Family::kIpv6;
  m.SetExact(Field::kEthType, v6 ? kEthTypeIpv6 : kEthTypeIpv4);
  if (v6) {
    for (bool src : {true, false}) {
      const uint64_t base = ipv6_pool_[Uniform(ipv6_pool_.size())];
      AddAddress(&m, src ? Field::kIpv6SrcHi : Field::kIpv6DstHi, 64, base);
      // The low half only under a full /64 (a prefix longer than 64).
      const Field hi = src ? Field::kIpv6SrcHi : Field::kIpv6DstHi;
      if (m.mask.Get(hi) == ~uint64_t{0} && Chance(0.4))
        AddAddress(&m, src ? Field::kIpv6SrcLo : Field::kIpv6DstLo, 64,
                   Uniform(4) << 32);
    }
  } else {
    AddAddress(&m, Field::kIpv4Src, 32, ipv4_pool_[Uniform(ipv4_pool_.size())]);
    AddAddress(&m, Field::kIpv4Dst, 32, ipv4_pool_[Uniform(ipv4_pool_.size())]);
  }
  if (Chance(0.6)) {
    const uint8_t protos[] = {kIpProtoTcp, kIpProtoUdp,
                              v6 ? kIpProtoIcmpv6 : kIpProtoIcmp, kIpProtoSctp};
    m.SetExact(Field::kNwProto, protos[Uniform(std::size(protos))]);
  }
  AddPort(&m, Field::kTpSrc);
  AddPort(&m, Field::kTpDst);
  if (Chance(0.05)) m.SetMasked(Field::kNwTos, Uniform(64) << 2, 0xfc);
  if (Chance(0.03)) m.SetExact(Field::kNwTtl, 1 + Uniform(3));
  if (Chance(0.05)) {
    switch (Uniform(3)) {
      case 0:
        m.SetMasked(Field::kNwFrag, 0, kFragMask);
        break;
      case 1:
        m.SetMasked(Field::kNwFrag, kFragAny, kFragAny);
        break;
      default:
        m.SetMasked(Field::kNwFrag, kFragMask, kFragMask);
    }
  }
  if (Chance(0.05)) {
    const uint64_t mask = 1 + Uniform(0xfff);
    m.SetMasked(Field::kTcpFlags, Uniform(0x1000), mask);
  }
  return r;
}

std::vector<Rule> RandomRuleGen::NextRules(size_t n, uint64_t first_id) {
  std::vector<Rule> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(NextRule(first_id + i));
  return out;
}

void RandomRuleGen::FillKey(Family family, Flow* f) {
  f->Set(Field::kInPort, Chance(0.9) ? 1 + Uniform(options_.in_ports)
                                     : static_cast<uint32_t>(rng_()));
  f->Set(Field::kEthDst, Chance(0.6) ? mac_pool_[Uniform(mac_pool_.size())]
                                     : rng_() & 0xffffffffffffULL);
  f->Set(Field::kEthSrc, Chance(0.6) ? mac_pool_[Uniform(mac_pool_.size())]
                                     : rng_() & 0xffffffffffffULL);
  if (Chance(0.3))
    f->Set(Field::kVlan0Tci,
           kVlanPresent | (Uniform(8) << kVlanPcpShift) |
               (Chance(0.7) ? 1 + Uniform(4) : Uniform(4096)));
  if (family == Family::kL2) {
    f->Set(Field::kEthType, Chance(0.5) ? kEthTypeArp : Uniform(65536));
    return;
  }
  const bool v6 = family == Family::kIpv6;
  f->Set(Field::kEthType, v6 ? kEthTypeIpv6 : kEthTypeIpv4);
  if (v6) {
    for (Field hi : {Field::kIpv6SrcHi, Field::kIpv6DstHi}) {
      const uint64_t base = ipv6_pool_[Uniform(ipv6_pool_.size())];
      f->Set(hi, Chance(0.9) ? (base | (rng_() & 0xffffffffu)) : rng_());
      const Field lo =
          hi == Field::kIpv6SrcHi ? Field::kIpv6SrcLo : Field::kIpv6DstLo;
      f->Set(lo, Chance(0.5) ? (Uniform(4) << 32) | (rng_() & 0xffffffffu)
                             : rng_());
    }
  } else {
    for (Field a : {Field::kIpv4Src, Field::kIpv4Dst}) {
      const uint32_t base = ipv4_pool_[Uniform(ipv4_pool_.size())];
      f->Set(a, Chance(0.9) ? (base | (rng_() & 0xffffu))
                            : static_cast<uint32_t>(rng_()));
    }
  }
  const uint8_t protos[] = {kIpProtoTcp, kIpProtoUdp,
                            v6 ? kIpProtoIcmpv6 : kIpProtoIcmp, kIpProtoSctp,
                            static_cast<uint8_t>(Uniform(256))};
  const uint8_t proto = protos[Uniform(std::size(protos))];
  f->Set(Field::kNwProto, proto);
  f->Set(Field::kNwTos, Uniform(256));
  f->Set(Field::kNwTtl, Chance(0.2) ? 1 + Uniform(3) : Uniform(256));
  static constexpr uint8_t kFrags[] = {0, 0, 0, kFragAny,
                                       kFragAny | kFragLater};
  f->Set(Field::kNwFrag, kFrags[Uniform(std::size(kFrags))]);
  f->Set(Field::kTpSrc, PoolPort());
  f->Set(Field::kTpDst, PoolPort());
  if (proto == kIpProtoTcp) f->Set(Field::kTcpFlags, Uniform(0x1000));
}

Flow RandomRuleGen::NextKey() {
  Flow f;
  FillKey(PickFamily(), &f);
  return f;
}

Flow RandomRuleGen::NextKeyNear(const Rule& rule) {
  const Match& m = rule.match;
  Family family = PickFamily();
  if (m.mask.Get(Field::kEthType) == 0xffff) {
    const uint64_t t = m.value.Get(Field::kEthType);
    family = t == kEthTypeIpv4   ? Family::kIpv4
             : t == kEthTypeIpv6 ? Family::kIpv6
                                 : Family::kL2;
  }
  Flow f;
  FillKey(family, &f);
  for (int i = 0; i < kFlowWords; ++i)
    f.w[i] = (f.w[i] & ~m.mask.w[i]) | m.value.w[i];
  for (Field pf : {Field::kTpSrc, Field::kTpDst}) {
    const PortRange& r = pf == Field::kTpSrc ? m.tp_src : m.tp_dst;
    if (r.IsFull()) continue;
    uint32_t p;
    switch (Uniform(6)) {
      case 0:
        p = r.lo;
        break;
      case 1:
        p = r.hi;
        break;
      case 2:
        p = r.lo == 0 ? r.hi : r.lo - 1u;
        break;  // just outside
      case 3:
        p = r.hi == 0xffff ? r.lo : r.hi + 1u;
        break;
      default:
        p = r.lo + Uniform(uint64_t{r.hi} - r.lo + 1);
    }
    f.Set(pf, p);
  }
  if (Chance(0.25)) {
    // Flip one matched bit: the last bit of a prefix most of the time.
    std::vector<Field> matched;
    for (int i = 0; i < kFieldCount; ++i)
      if (m.mask.Get(static_cast<Field>(i)) != 0)
        matched.push_back(static_cast<Field>(i));
    if (!matched.empty()) {
      const Field fld = matched[Uniform(matched.size())];
      const uint64_t mask = m.mask.Get(fld);
      uint64_t bit = mask & (~mask + 1);  // lowest set bit
      if (Chance(0.3)) {
        const int n = std::popcount(mask);
        uint64_t mm = mask;
        for (uint64_t k = Uniform(n); k > 0; --k) mm &= mm - 1;
        bit = mm & (~mm + 1);
      }
      f.Set(fld, f.Get(fld) ^ bit);
    }
  }
  return f;
}

Flow RandomRuleGen::NextKeyNear(const std::vector<Rule>& rules) {
  if (rules.empty() || Chance(0.1)) return NextKey();
  return NextKeyNear(rules[Uniform(rules.size())]);
}

Flow RandomRuleGen::NextKeyAgreeing(const Flow& key, const Flow& mask) {
  Flow other;
  if (Chance(0.5)) {
    other = NextKey();
  } else {
    for (int i = 0; i < kFlowWords; ++i) other.w[i] = rng_();
  }
  Flow out;
  for (int i = 0; i < kFlowWords; ++i)
    out.w[i] = (key.w[i] & mask.w[i]) | (other.w[i] & ~mask.w[i]);
  return out;
}

std::vector<RuleOp> RandomRuleGen::NextBatch(int n, std::vector<Rule>* live,
                                             uint64_t* next_id) {
  std::vector<RuleOp> ops;
  for (int i = 0; i < n; ++i) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    if (live->empty() || u < 0.5) {
      Rule r = NextRule((*next_id)++);
      live->push_back(r);
      ops.push_back(RuleOp::Insert(std::move(r)));
    } else if (u < 0.72) {
      const size_t k = Uniform(live->size());
      ops.push_back(RuleOp::Delete((*live)[k].id));
      live->erase(live->begin() + static_cast<std::ptrdiff_t>(k));
    } else if (u < 0.98) {
      const size_t k = Uniform(live->size());
      Rule r = NextRule((*live)[k].id);
      (*live)[k] = r;
      ops.push_back(RuleOp::Replace(std::move(r)));
    } else {
      const uint64_t cookie = Uniform(std::max<uint64_t>(1, options_.cookies));
      ops.push_back(RuleOp::DeleteByCookie(cookie));
      std::erase_if(*live, [&](const Rule& r) { return r.cookie == cookie; });
    }
  }
  return ops;
}

}  // namespace flowclass
