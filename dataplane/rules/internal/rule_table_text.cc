// internal/rule_table_text.cc — RuleTable::DebugString's text of matches,
// masks and rules (internal/rule_table_text.h).
#include "dataplane/rules/internal/rule_table_text.h"

#include <cstdint>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/flow/addr_text.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"

namespace flowclass {
namespace internal {
namespace {

std::string Hex(uint64_t v, int bits) {
  return absl::StrFormat("0x%0*x", (bits + 3) / 4, v);
}

}  // namespace

std::string FormatMatch(const Flow& value, const Flow& mask) {
  std::string out;
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    const FieldInfo& info = InfoOf(f);
    if (f == Field::kIpv6SrcLo || f == Field::kIpv6DstLo) continue;  // with the high half
    if (f == Field::kIpv6SrcHi || f == Field::kIpv6DstHi) {
      const bool src = f == Field::kIpv6SrcHi;
      const absl::uint128 m = src ? mask.Ipv6Src() : mask.Ipv6Dst();
      if (m == 0) continue;
      absl::StrAppend(&out, out.empty() ? "" : ",", src ? "ipv6_src=" : "ipv6_dst=");
      AppendIpv6Masked(src ? value.Ipv6Src() : value.Ipv6Dst(), m, &out);
      continue;
    }
    const uint64_t m = mask.Get(f);
    if (m == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",", info.name, "=");
    if (f == Field::kEthSrc || f == Field::kEthDst) {
      AppendMacMasked(value.Get(f), m, &out);
    } else if (f == Field::kIpv4Src || f == Field::kIpv4Dst) {
      AppendIpv4Masked(static_cast<uint32_t>(value.Get(f)), static_cast<uint32_t>(m), &out);
    } else {
      absl::StrAppend(&out, Hex(value.Get(f), info.bits));
      if (m != (info.Mask() >> info.shift)) absl::StrAppend(&out, "/", Hex(m, info.bits));
    }
  }
  return out.empty() ? "*" : out;
}

std::string FormatMask(const Flow& mask) {
  std::string out;
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    const FieldInfo& info = InfoOf(f);
    const uint64_t m = mask.Get(f);
    if (m == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",", info.name, "/",
                    Hex(m, info.bits));
  }
  return out.empty() ? "*" : out;
}

std::string FormatRule(const Rule& r) {
  std::string out = absl::StrCat(
      "id=", r.id, " priority=", r.priority, " cookie=", Hex(r.cookie, 0),
      " match=", FormatMatch(r.match.value, r.match.mask));
  if (!r.match.tp_src.IsFull())
    absl::StrAppend(&out, ",tp_src=", r.match.tp_src.lo, "-",
                    r.match.tp_src.hi);
  if (!r.match.tp_dst.IsFull())
    absl::StrAppend(&out, ",tp_dst=", r.match.tp_dst.lo, "-",
                    r.match.tp_dst.hi);
  if (r.action.kind == Action::Kind::kOutput) {
    absl::StrAppend(&out, " actions=output:", r.action.port);
  } else if (r.action.kind == Action::Kind::kDrop) {
    absl::StrAppend(&out, " actions=drop");
  } else {
    absl::StrAppend(&out, " actions=unknown(", static_cast<int>(r.action.kind),
                    ")");
  }
  return out;
}

}  // namespace internal
}  // namespace flowclass
