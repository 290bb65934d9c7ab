// flow_format.cc — the textual dump of a Flow (declared in flow.h) and the
// per-field number spellings shared with the rule printer
// (internal/field_text.h).
//
// Flow::ToString() is a debugging dump keyed by the kFieldInfo names.
#include <string>
#include <string_view>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "dataplane/flow/addr_text.h"
#include "dataplane/flow/flow.h"
#include "dataplane/flow/internal/field_text.h"
#include "dataplane/internal/cat.h"

namespace flowclass {
namespace internal {

std::string Ipv4Masked(uint64_t v, uint64_t m) {
  return FormatIpv4Masked(static_cast<uint32_t>(v), static_cast<uint32_t>(m));
}

namespace {
bool IsHexField(Field f) {
  return f == Field::kEthType || f == Field::kTcpFlags ||
         f == Field::kVlan0Tci || f == Field::kVlan1Tci || f == Field::kNwFrag;
}
}  // namespace

std::string NumString(Field f, uint64_t v) {
  return IsHexField(f) ? absl::StrFormat("0x%x", v) : Cat(v);
}

// Value, or value/mask with the mask in hex.
std::string NumMasked(Field f, uint64_t v, uint64_t m) {
  if (m == InfoOf(f).Mask() >> InfoOf(f).shift) return NumString(f, v);
  return Cat(NumString(f, v), absl::StrFormat("/0x%x", m));
}

}  // namespace internal

namespace {

using internal::Cat;
using internal::CatTo;
using internal::Ipv4Masked;
using internal::NumMasked;
using internal::NumString;

// The dump shared by both Flow::ToString overloads; `mask` null means
// "print every non-zero field's value".
std::string FlowDump(const Flow& flow, const Flow* mask) {
  std::string out;
  auto add = [&out](std::string_view name, const std::string& text) {
    CatTo(&out, out.empty() ? "" : ",", name, "=", text);
  };
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    if (f == Field::kIpv6SrcLo || f == Field::kIpv6DstLo) continue;
    if (f == Field::kIpv6SrcHi || f == Field::kIpv6DstHi) {
      const bool src = f == Field::kIpv6SrcHi;
      const absl::uint128 v = src ? flow.Ipv6Src() : flow.Ipv6Dst();
      const char* name = src ? "ipv6_src" : "ipv6_dst";
      if (mask == nullptr) {
        if (v != 0) add(name, Ipv6String(v));
      } else {
        const absl::uint128 m = src ? mask->Ipv6Src() : mask->Ipv6Dst();
        if (m != 0) add(name, FormatIpv6Masked(v, m));
      }
      continue;
    }
    const uint64_t v = flow.Get(f);
    const uint64_t full = InfoOf(f).Mask() >> InfoOf(f).shift;
    const uint64_t m = mask == nullptr ? full : mask->Get(f);
    if (mask == nullptr ? v == 0 : m == 0) continue;
    const char* name = InfoOf(f).name;
    switch (f) {
      case Field::kEthSrc:
      case Field::kEthDst:
        add(name, FormatMacMasked(v, m));
        break;
      case Field::kIpv4Src:
      case Field::kIpv4Dst:
        add(name, Ipv4Masked(v, m));
        break;
      case Field::kNwTos:
        // Always with its mask: a bare nw_tos means DSCP-only when parsed.
        add(name, mask == nullptr ? NumString(f, v)
                                  : absl::StrFormat("%d/0x%x", v, m));
        break;
      default:
        add(name, NumMasked(f, v, m));
        break;
    }
  }
  return out;
}

}  // namespace

std::string Ipv6String(absl::uint128 a) { return FormatIpv6Masked(a, ~absl::uint128(0)); }

std::string Flow::ToString() const { return FlowDump(*this, nullptr); }

std::string Flow::ToString(const Flow& mask) const {
  return FlowDump(*this, &mask);
}

}  // namespace flowclass
