// internal/rule_table_text.h — the text RuleTable::DebugString prints for
// matches, subtable masks and rules (rule_table.cc only includes this; the
// native rule format is rule_format.h's).  Control path only (allocates).
#ifndef FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_TABLE_TEXT_H_
#define FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_TABLE_TEXT_H_

#include <string>

#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"

namespace flowclass {
namespace internal {

// "eth_type=0x0800,ipv4_src=10.0.0.0/8": fields with a non-zero mask,
// addresses in their text form (addr_text.h, an IPv6 address whole), other
// fields in hex with "/mask" only when the mask is not the whole field.
std::string FormatMatch(const Flow& value, const Flow& mask);

// "eth_type/0xffff,tp_dst/0xff00": a subtable shape.
std::string FormatMask(const Flow& mask);

// "id=1 priority=10 cookie=0x0 match=... actions=output:1": a rule as
// DebugString lists it (port ranges as ",tp_src=lo-hi").
std::string FormatRule(const Rule& r);

}  // namespace internal
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RULES_INTERNAL_RULE_TABLE_TEXT_H_
