// internal/field_text.h — how a numeric field's value (and mask) is spelled,
// shared by the flow dump (flow_format.cc) and the rule printer
// (rules/rule_print.cc) so that both write a field the same way.
//
// Control path only (allocates).  Addresses are spelled by addr_text.h.
#ifndef FLOWCLASS_DATAPLANE_FLOW_INTERNAL_FIELD_TEXT_H_
#define FLOWCLASS_DATAPLANE_FLOW_INTERNAL_FIELD_TEXT_H_

#include <cstdint>
#include <string>

#include "dataplane/flow/flow.h"

namespace flowclass {
namespace internal {

// A dotted-quad IPv4 value, with "/len" or "/mask" when `m` is not all ones.
std::string Ipv4Masked(uint64_t v, uint64_t m);

// A field's value: hex ("0x800") for eth_type, tcp_flags, the VLAN TCIs and
// nw_frag, decimal for the others.
std::string NumString(Field f, uint64_t v);

// NumString, followed by "/0x<mask>" unless `m` is the field's full mask.
std::string NumMasked(Field f, uint64_t v, uint64_t m);

}  // namespace internal
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_FLOW_INTERNAL_FIELD_TEXT_H_
