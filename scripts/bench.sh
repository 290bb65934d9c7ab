#!/usr/bin/env bash
# bench.sh — every benchmark of tests/bench/README.md, one after the other
# (what `make bench` runs; never part of `make test`).
#
#   scripts/bench.sh [BUILD_DIR] [CLASSBENCH_DIR]
# CLASSBENCH_DIR defaults to BUILD_DIR/classbench, the copy of
# tests/data/classbench that CMake stages there.
# Environment: BENCH_ONLY — a space-separated subset of the names printed in
#   the "== name" headers (e.g. "rule_table_benchmark replay"); empty = all.
#   The daemon scripts take their own BENCH_* settings (see each script).
#
# The Google Benchmark binaries print ratios against baselines run in the
# same process; scripts/bench_slowpath.sh needs dpdk-test-acl and python3;
# scripts/bench_daemon.sh needs dpdk-testpmd (Debian: dpdk-dev) and
# runs DPDK without hugepages on lcores 0 and 1; the rule-stream benchmark
# starts flowclassd on 127.0.0.1 and stops it by its PID.  Expect tens of
# minutes for everything on a 2-CPU machine.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$here/build}" && pwd)"
classbench="${2:-$build/classbench}"  # staged from tests/data/classbench by CMake

wanted() { [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" $1 "* ]]; }
ran=0
run() {  # NAME COMMAND...
  local name="$1"; shift
  wanted "$name" || return 0
  echo "== $name"
  "$@"
  ran=$((ran + 1))
}

for b in "$build"/bench/*_benchmark; do
  [ -x "$b" ] || continue
  run "$(basename "$b")" "$b"
done
acl="$classbench/hypersplit/acl1_1K"
if [ ! -f "$acl" ] || [ ! -f "${acl}_trace" ]; then
  echo "bench: no $acl (+ _trace): configure $build first, or name CLASSBENCH_DIR" >&2
  exit 2
fi
run replay "$build/client/flowclassctl" replay --repeat 20 "$acl" "${acl}_trace"
run bench_slowpath "$here/scripts/bench_slowpath.sh" "$build" "$classbench"
run bench_daemon "$here/scripts/bench_daemon.sh" "$build"
run grpc_add_rules_bench "$here/tests/e2e/grpc_add_rules_bench.sh" "$build" 1000000 1000
if [ "$ran" -eq 0 ]; then
  echo "bench: nothing matched BENCH_ONLY='${BENCH_ONLY:-}'" >&2
  exit 2
fi
