// rule_convert_internal.h — helpers the conversion (rule_convert.cc) and the
// ApplyRulesRequest wire codec (rule_wire.cc) share; nothing else includes this.
#ifndef FLOWCLASS_PROTO_RULE_CONVERT_INTERNAL_H_
#define FLOWCLASS_PROTO_RULE_CONVERT_INTERNAL_H_

#include <cstdint>

#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"

namespace flowclass {
namespace internal {

// The mask of a `bits`-wide field.
inline uint64_t WidthMask(int bits) {
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

// Sets a field's value and mask without masking the value (ValidateRule must
// see stray bits).
inline void SetRaw(Match* m, Field f, uint64_t value, uint64_t mask) {
  m->value.Set(f, value);
  m->mask.Set(f, mask);
}

// True when the structured form can express every field of `m`.
bool Structurable(const Match& m);

}  // namespace internal
}  // namespace flowclass

#endif  // FLOWCLASS_PROTO_RULE_CONVERT_INTERNAL_H_
