// rule_convert.h — flowclass.v1 messages <-> dataplane types (Rule, RuleOp).
//
// Contract
// --------
// The one place that knows both the proto and the dataplane's rule model; the
// server (server/api) and the client library (client/rpc) both use it, so the
// two ends always agree on what a message means.
//
// * RuleFromProto / RuleOpFromProto are syntactic: every value must parse and
//   fit its field, enums must be values this build knows, a oneof must be set.
//   Errors are INVALID_ARGUMENT "<field>: <problem>" with the proto's field
//   name ("ipv4_src: bad IPv4 address '10.0.0.300'"), and carry the field
//   typed as a RuleOpError (dataplane/rules/rule_error.h; ProtoName gives the name
//   the message uses; no index yet: the caller knows the operation, see
//   AtOperation).  Address fields are text in the syntax of
//   dataplane/flow/addr_text.h, the same codec the native rule format uses, so an
//   address means the same in a rule file, in `text` and in a structured
//   field; like ovs-ofctl, it clears address bits outside the mask
//   ("10.1.2.3/8" is 10.0.0.0/8).  Semantic checks (a numeric value inside
//   its mask, IPv4 fields need eth_type 0x0800, ...) are left to
//   ValidateRule, which the RuleTable applies to every rule; to let it see
//   them, numeric values are stored unmasked (OVS likewise refuses a binary
//   OXM value with bits outside its mask).
// * RuleToProto always produces a message that RuleFromProto turns back into
//   an equal Rule (tested over random rule sets).  It uses the structured
//   form, or the native text form when a field cannot be expressed in the
//   structured form (a partially masked in_port, eth_type or VLAN TCI, an
//   nw_frag mask that is not one of the ip_frag keywords).
// * Plain functions, no shared state: any thread.  Control path only (they
//   allocate).
#ifndef FLOWCLASS_PROTO_RULE_CONVERT_H_
#define FLOWCLASS_PROTO_RULE_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/flow/addr_text.h"  // the address fields' syntax
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"
#include "flowclass/v1/flowclass.pb.h"

namespace flowclass {

absl::Status RuleFromProto(const v1::Rule& in, Rule* out);
void RuleToProto(const Rule& in, v1::Rule* out);

// On an error `out` is left half written (RuleFromProto leaves its rule as
// it was): the caller drops it.
absl::Status RuleOpFromProto(const v1::RuleOp& in, RuleOp* out);
void RuleOpToProto(const RuleOp& in, v1::RuleOp* out);

void ActionToProto(const Action& in, v1::Action* out);


}  // namespace flowclass

#endif  // FLOWCLASS_PROTO_RULE_CONVERT_H_
