// rule_wire.h — the ApplyRulesRequest wire codec: a v1.ApplyRulesRequest written and read
// straight from its wire form, without building the message (a streamed
// load's path).  It agrees byte for byte with protobuf's serializer and
// parser plus RuleOpToProto / RuleOpFromProto (rule_convert.h), and leaves
// to them what it does not know.
//
// Plain functions, no shared state: any thread.  Control path only (they
// allocate).
#ifndef FLOWCLASS_PROTO_RULE_WIRE_H_
#define FLOWCLASS_PROTO_RULE_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {

// Appends the wire form of a v1.ApplyRulesRequest {batch_id, one RuleOpToProto per
// op} to *out: byte for byte what serializing that message gives, without
// building it (a streamed load sends a million rules).  The usual rules
// (IPv4, ports, protocol, actions) are encoded directly; an op with Ethernet
// addresses, VLANs, IPv6 or fragment fields, or that only the text form can
// say, goes through RuleOpToProto.  Returns how many ops were encoded
// directly.
size_t AppendRuleBatchWire(uint64_t batch_id, absl::Span<const RuleOp> ops, std::string* out);

// Reads the wire form of a v1.ApplyRulesRequest straight into ops: true when it
// holds only what the direct encoder writes (structured IPv4-style rules,
// deletes) and every op converts without error, and then *batch_id and *ops
// are exactly what parsing the message and RuleOpFromProto of each op give.
// False for anything else — another field, a repeated one, a text rule, an
// error, malformed bytes — and then the caller parses the message (which
// reports the error); *ops is then unspecified.
bool ReadRuleBatchWire(absl::string_view wire, uint64_t* batch_id, std::vector<RuleOp>* ops);

}  // namespace flowclass

#endif  // FLOWCLASS_PROTO_RULE_WIRE_H_
