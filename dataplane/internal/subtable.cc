#include "dataplane/internal/subtable.h"

namespace flowclass {
namespace internal {

uint32_t SubtableLookupGeneric(const SubtableDesc& st, const Table& table,
                               const FlowKey* keys, uint32_t todo_map,
                               Megaflow** out, MegaflowPool& pool) {
  return SubtableLookupImpl<0>(st, table, keys, todo_map, out, pool);
}

LookupImplInfo ChooseLookup(const SubtableDesc& /*st*/) {
  return {"generic", &SubtableLookupGeneric};
}

}  // namespace internal
}  // namespace flowclass
