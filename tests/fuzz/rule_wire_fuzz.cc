// libFuzzer target for the ApplyRules stream's wire reader (proto/rule_wire.h):
// the bytes a client sends as one v1.ApplyRulesRequest.
//
// Invariants (any violation aborts):
//   1. Whenever ReadRuleBatchWire answers, protobuf's own parser plus
//      RuleOpFromProto accepts the same bytes and gives the same batch id and
//      the same operations (the reader is a shortcut, never a second
//      opinion).
//   2. What it read writes back as protobuf would serialize it:
//      AppendRuleBatchWire of the ops equals SerializeAsString of the message
//      RuleOpToProto builds from them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "flowclass/v1/flowclass.pb.h"
#include "proto/rule_convert.h"
#include "proto/rule_wire.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool SameOp(const flowclass::RuleOp& a, const flowclass::RuleOp& b) {
  return a.kind == b.kind && a.rule == b.rule && a.id == b.id && a.cookie == b.cookie;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace flowclass;
  using fuzz::Check;
  const std::string wire(reinterpret_cast<const char*>(data), size);

  uint64_t batch_id = 0;
  std::vector<RuleOp> ops;
  const bool direct = ReadRuleBatchWire(wire, &batch_id, &ops);

  v1::ApplyRulesRequest parsed;
  const bool parses = parsed.ParseFromString(wire);
  std::vector<RuleOp> slow;
  bool converts = parses;
  if (parses) {
    slow.resize(static_cast<size_t>(parsed.ops_size()));
    for (int i = 0; i < parsed.ops_size() && converts; ++i) {
      const absl::Status s = RuleOpFromProto(parsed.ops(i), &slow[static_cast<size_t>(i)]);
      if (!s.ok()) {
        fuzz::CheckErrorMessage(s);
        converts = false;
      }
    }
  }
  if (!direct) return 0;
  Check(parses, "the direct reader accepted bytes protobuf refuses");
  Check(converts, "the direct reader accepted an op RuleOpFromProto refuses");
  Check(batch_id == parsed.batch_id(), "batch_id differs from protobuf's");
  Check(ops.size() == slow.size(), "op count differs from protobuf's");
  for (size_t i = 0; i < ops.size(); ++i) Check(SameOp(ops[i], slow[i]), "op differs from protobuf's");

  v1::ApplyRulesRequest rebuilt;
  rebuilt.set_batch_id(batch_id);
  for (const RuleOp& op : ops) RuleOpToProto(op, rebuilt.add_ops());
  std::string written;
  AppendRuleBatchWire(batch_id, ops, &written);
  Check(written == rebuilt.SerializeAsString(), "AppendRuleBatchWire differs from protobuf's serializer");
  return 0;
}
