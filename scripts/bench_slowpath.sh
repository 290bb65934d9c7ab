#!/usr/bin/env bash
# bench_slowpath.sh — the slow path (RuleTable) against DPDK's ACL library
# (dpdk-test-acl, Debian dpdk-dev) on the same rules and the same trace, in
# one run; the table is the "Slow path" section of tests/bench/README.md.
#
#   scripts/bench_slowpath.sh [BUILD_DIR] [CLASSBENCH_DIR]
#
# For each ClassBench set (default: the twelve NeuroCuts ~10K sets, staged
# into BUILD_DIR/classbench/neurocuts by CMake):
#   1. the rules are rewritten in the space-separated ClassBench form without
#      the TCP-flags field, which both tools read as the same rules
#      (scripts/classbench_acl.py rules; flowclass would match the flags,
#      dpdk-test-acl ignores them);
#   2. a trace of SLOWPATH_PACKETS random points inside random rules
#      (classbench_acl.py trace; the NeuroCuts sets have no traces), whose
#      expected column is dpdk-test-acl's own verdict for each packet
#      (--verbose=2, classbench_acl.py expect): every flowclassctl replay
#      below then checks each of its verdicts against DPDK's;
#   3. SLOWPATH_ROUNDS rounds, alternating within each round:
#        off     flowclassctl replay --megaflows off (every packet a
#                RuleTable lookup)
#        acl     dpdk-test-acl, default algorithm (the best the CPU has),
#                SLOWPATH_ACL_ITER passes over the trace (DPDK is fast: one
#                pass of a short trace would time little but cache misses)
#        avx512  dpdk-test-acl --alg=avx512x16 (only when the CPU has
#                avx512f/bw/vl; otherwise the column says n/a)
#        on1     flowclassctl replay, default pipeline, cold, --repeat 1
#        on10    flowclassctl replay, default pipeline, cold, --repeat 10
#      and prints the median packets/s of each and the ratios to `off`.
# Checked, or the script fails: both tools loaded the same number of rules,
# classified the same number of packets (per pass), replay found 0
# mismatches against DPDK's verdicts, and with --megaflows off every packet
# was an upcall and no megaflow was installed.
#
# Both tools run on one CPU (SLOWPATH_CPU, default 1; flowclassctl under
# taskset, dpdk-test-acl as its only lcore) and time only their
# classification loop: replay's "classified: ... packets/s" line,
# dpdk-test-acl's "pkt/sec".  DPDK runs without hugepages (--no-huge -m
# SLOWPATH_ACL_MB, its own --file-prefix).
#
# Environment: SLOWPATH_SETS (names under CLASSBENCH_DIR/neurocuts or paths),
# SLOWPATH_PACKETS (10000), SLOWPATH_ACL_ITER (10), SLOWPATH_ROUNDS (3), SLOWPATH_CPU (1),
# SLOWPATH_ACL_MB (2048), SLOWPATH_SEED (1).  Generated files go to
# BUILD_DIR/bench/slowpath/.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$here/build}" && pwd)"
classbench="${2:-$build/classbench}"
sets="${SLOWPATH_SETS:-acl1_10k acl2_10k acl3_10k acl4_10k acl5_10k fw1_10k fw2_10k fw3_10k fw4_10k fw5_10k ipc1_10k ipc2_10k}"
packets="${SLOWPATH_PACKETS:-10000}"
acl_iter="${SLOWPATH_ACL_ITER:-10}"
rounds="${SLOWPATH_ROUNDS:-3}"
cpu="${SLOWPATH_CPU:-1}"
acl_mb="${SLOWPATH_ACL_MB:-2048}"
seed="${SLOWPATH_SEED:-1}"
work="$build/bench/slowpath"
# shellcheck source=scripts/bench_acl_common.sh
. "$here/scripts/bench_acl_common.sh"
bench_acl_setup bench_slowpath

algs="default"
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo &&
   grep -qw avx512vl /proc/cpuinfo; then
  algs="default avx512x16"
fi

echo "slow path vs dpdk-test-acl: $packets packets per set (dpdk-test-acl: $acl_iter passes), median of $rounds rounds, CPU $cpu"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "dpdk-test-acl algorithms: $algs  ($(dpkg-query -W -f='dpdk-dev ${Version}' dpdk-dev 2>/dev/null || echo 'dpdk-dev ?'))"
printf '%-10s %6s %10s %10s %10s %10s %10s %8s %8s %8s %8s\n' set rules off_pps acl_pps \
  avx512_pps on1_pps on10_pps acl/off avx/off on1/off on10/off
for set in $sets; do
  prepare_set "$set"
  off="" acl="" avx="" on1="" on10=""
  for ((r = 1; r <= rounds; r++)); do
    off+=" $(replay_one "$name" "$rules" "$trace" "$nrules" --megaflows off)"
    acl+=" $(acl_one "$name" "$rules" "$trace" "$nrules" default "$acl_iter")"
    if [[ " $algs " == *" avx512x16 "* ]]; then
      avx+=" $(acl_one "$name" "$rules" "$trace" "$nrules" avx512x16 "$acl_iter")"
    fi
    on1+=" $(replay_one "$name" "$rules" "$trace" "$nrules" --repeat=1)"
    on10+=" $(replay_one "$name" "$rules" "$trace" "$nrules" --repeat=10)"
  done
  m_off="$(median <<<"$off")" m_acl="$(median <<<"$acl")" m_avx="$(median <<<"$avx")"
  m_on1="$(median <<<"$on1")" m_on10="$(median <<<"$on10")"
  printf '%-10s %6s %10.0f %10.0f %10s %10.0f %10.0f %8s %8s %8s %8s\n' "$name" "$nrules" \
    "$m_off" "$m_acl" "${m_avx:-n/a}" "$m_on1" "$m_on10" "$(ratio "$m_acl" "$m_off")" \
    "$(ratio "$m_avx" "$m_off")" "$(ratio "$m_on1" "$m_off")" "$(ratio "$m_on10" "$m_off")"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(packets/s; x/off = how many times the slow path's rate; verdicts checked equal on every packet)"
