#include "dataplane/dpcls/internal/subtable.h"

namespace flowclass {
namespace internal {

uint32_t SubtableLookupGeneric(const SubtableDesc& st, const Table& table,
                               const FlowKey* keys, uint32_t todo_map,
                               Megaflow** out, MegaflowPool& pool) {
  return SubtableLookupImpl<0>(st, table, keys, todo_map, out, pool);
}

namespace {

// One out-of-line copy of the staged lookup per word count; the compiler
// unrolls extraction, hashing and verify for each.
template <int kWords>
uint32_t SubtableLookupSpecialised(const SubtableDesc& st, const Table& table,
                                   const FlowKey* keys, uint32_t todo_map,
                                   Megaflow** out, MegaflowPool& pool) {
  return SubtableLookupImpl<kWords>(st, table, keys, todo_map, out, pool);
}

constexpr SubtableLookupFn kSpecialised[kFlowWords + 1] = {
    nullptr,
    &SubtableLookupSpecialised<1>,
    &SubtableLookupSpecialised<2>,
    &SubtableLookupSpecialised<3>,
    &SubtableLookupSpecialised<4>,
    &SubtableLookupSpecialised<5>,
    &SubtableLookupSpecialised<6>,
    &SubtableLookupSpecialised<7>,
    &SubtableLookupSpecialised<8>,
    &SubtableLookupSpecialised<9>,
};
static_assert(kFlowWords == 9, "add a specialisation per word count");

}  // namespace

SubtableLookupFn SpecialisedLookupFor(int n_words) {
  if (n_words < 1 || n_words > kFlowWords) return nullptr;
  return kSpecialised[n_words];
}

uint32_t SubtableLookupAvx512(const SubtableDesc& st, const Table& table,
                              const FlowKey* keys, uint32_t todo_map,
                              Megaflow** out, MegaflowPool& pool) {
  Megaflow* slots = pool.capacity() != 0 ? &pool.Get(0) : nullptr;
  return SubtableLookupAvx512Kernel(st, table, keys, todo_map, out, slots);
}

}  // namespace internal
}  // namespace flowclass
