// pmd_stats_convert.h — the counter table (dataplane/pmd_counters.h) <->
// v1.PmdStats.
//
// Every kPmdCounters entry with rpc = true is carried by the v1.PmdStats
// uint64 field named by its `name` (proto field names and numbers are the
// API: the table follows them, never the other way round).  The field is
// found by name through protobuf reflection, so a new counter needs no code
// here: its table line and its proto field.  pmd_stats_convert_test checks
// that every such entry names a uint64 field and that every uint64 field of
// v1.PmdStats is either a table entry's or one of the PMD loop's and the
// snapshot's own.
//
// Plain functions over immutable data (the descriptors are looked up once):
// any thread.  Control path only.
#ifndef FLOWCLASS_PROTO_PMD_STATS_CONVERT_H_
#define FLOWCLASS_PROTO_PMD_STATS_CONVERT_H_

#include <cstdint>

#include "dataplane/pmd_counters.h"
#include "flowclass/v1/flowclass.pb.h"

namespace flowclass {

// The v1.PmdStats field carrying `c`: nullptr unless c's entry has rpc =
// true and v1.PmdStats has a singular uint64 field of its name.
const google::protobuf::FieldDescriptor* PmdStatsField(PmdCounter c);

// Sets every field PmdStatsField names to its counter in `s`.
void PmdCountersToProto(const PmdStats& s, v1::PmdStats* out);

// The value of `c` in `p` (0 when GetStats does not carry it).
uint64_t PmdCounterFromProto(const v1::PmdStats& p, PmdCounter c);

}  // namespace flowclass

#endif  // FLOWCLASS_PROTO_PMD_STATS_CONVERT_H_
