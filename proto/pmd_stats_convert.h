// pmd_stats_convert.h — the counter table (dataplane/pmd_counters.h) <->
// v1.PmdStats.
//
// Every kPmdCounters entry with rpc = true is carried by the v1.PmdStats
// uint64 field named by its `name` (proto field names and numbers are the
// API: the table follows them, never the other way round), and so is every
// kPmdLoopCounters entry (the PMD loop's own counters).  The field is found
// by name through protobuf reflection, so a new counter needs no code here:
// its table line and its proto field.  pmd_stats_convert_test checks that
// every such entry names a uint64 field and that every uint64 field of
// v1.PmdStats is either a table entry's or one of the snapshot's own.
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

// The v1.PmdStats field carrying loop counter `c` (nullptr only when the
// .proto lacks the entry's field, which pmd_stats_convert_test rules out).
const google::protobuf::FieldDescriptor* PmdStatsField(PmdLoopCounter c);

// Sets the field of every loop counter that is not 0.  Call it after
// PmdCountersToProto: where a loop counter and a pipeline counter share a
// field ("packets", "no_match"), the loop's count, when it keeps one, wins.
void PmdLoopCountersToProto(const PmdLoopStats& s, v1::PmdStats* out);

// The value of field of loop counter `c` in `p`.
uint64_t PmdLoopCounterFromProto(const v1::PmdStats& p, PmdLoopCounter c);

}  // namespace flowclass

#endif  // FLOWCLASS_PROTO_PMD_STATS_CONVERT_H_
