#!/usr/bin/env bash
# bench_acl.sh — the acl pipeline (`flowclassctl replay --pipeline acl`:
# EMC -> rte_acl -> action) against dpdk-test-acl and the megaflow pipeline,
# on the same rules and the same trace, in one run; the table is the "acl
# pipeline" section of tests/bench/README.md.
#
#   scripts/bench_acl.sh [BUILD_DIR] [CLASSBENCH_DIR]
#
# For each ClassBench set (default: acl1, fw1 and ipc1 of the NeuroCuts sets
# at ~1K and ~10K rules, staged into BUILD_DIR/classbench/neurocuts by CMake)
# the rules and a trace are made as scripts/bench_slowpath.sh makes them
# (classbench_acl.py: rules without the TCP-flags field, ACLBENCH_PACKETS
# random points inside random rules, expected column = dpdk-test-acl's own
# verdict), so every replay below checks each of its verdicts against DPDK's.
# Then ACLBENCH_ROUNDS rounds, alternating within each round, each tool
# making ACLBENCH_ITER passes over the trace:
#   dpdk     dpdk-test-acl, default algorithm (the best the CPU has), its
#            default 256 packets per rte_acl_classify call
#   dpdk32   the same with --tracestep=32: the 32-packet bursts replay
#            feeds (and flowclassd's PMD, pmd.burst) classified per call
#   acl      replay --pipeline acl (EMC on, insert 1/100: the defaults)
#   acl_ne   replay --pipeline acl --emc off (rte_acl alone, plus the key
#            image and the verdict)
#   mf       replay (the megaflow pipeline, defaults)
#   mf_ne    replay --emc off
# and prints the median packets/s of each and the ratios to dpdk.
# Checked, or the script fails: both tools loaded the same number of rules,
# classified the same number of packets, and replay found 0 mismatches
# against DPDK's verdicts.  All run on one CPU (ACLBENCH_CPU, default 1:
# taskset for replay, whose offline EAL keeps that CPU since 2026-12-07 --
# before, its "-l 0" moved it to CPU 0 -- and -l for dpdk-test-acl) and
# time only their classification loop.  What is inside each timer:
#   dpdk-test-acl (app/test-acl/main.c, search_ip5tuples): rte_rdtsc_precise
#     around all passes; per call of up to --tracestep records, their data
#     pointers into its array of 16-byte ipv4_5tuple records, the
#     rte_acl_classify call (the context's default algorithm) and a
#     verbose-level test per result.  No verdict, no counter.
#   replay (client/replay.cc, RunTimedPasses): steady_clock around each
#     pass; per 32-key burst one AclPipeline::ProcessBurst -- the EMC's gate
#     and (sampled) probes and inserts, the 72-byte key image and data
#     pointer of each miss, rte_acl_classify_alg, each packet's verdict from
#     the verdict table, the burst's "alike" answer and the counters: the
#     pipeline flowclassd's PMD runs.  Checking the verdicts against the
#     expected column is after each pass, outside the timer.
# The machine may be shared: the load average is printed at the start and
# the end.
#
# Environment: ACLBENCH_SETS (names under CLASSBENCH_DIR/neurocuts or paths),
# ACLBENCH_PACKETS (10000), ACLBENCH_ITER (10), ACLBENCH_ROUNDS (3),
# ACLBENCH_CPU (1), ACLBENCH_ACL_MB (2048), ACLBENCH_SEED (1).  Generated
# files go to BUILD_DIR/bench/acl/.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$here/build}" && pwd)"
classbench="${2:-$build/classbench}"
sets="${ACLBENCH_SETS:-acl1_1k fw1_1k ipc1_1k acl1_10k fw1_10k ipc1_10k}"
packets="${ACLBENCH_PACKETS:-10000}"
iter="${ACLBENCH_ITER:-10}"
rounds="${ACLBENCH_ROUNDS:-3}"
cpu="${ACLBENCH_CPU:-1}"
acl_mb="${ACLBENCH_ACL_MB:-2048}"
seed="${ACLBENCH_SEED:-1}"
work="$build/bench/acl"
# shellcheck source=scripts/bench_acl_common.sh
. "$here/scripts/bench_acl_common.sh"
bench_acl_setup bench_acl

# round_ratio "A1 A2 ..." "B1 B2 ...": the median of Ai / Bi.
round_ratio() {
  paste -d' ' <(tr ' ' '\n' <<<"$1" | awk NF) <(tr ' ' '\n' <<<"$2" | awk NF) |
    awk '{printf "%s ", $1 / $2}' | median | awk '{printf "%.2f", $1}'
}

echo "acl pipeline vs dpdk-test-acl vs megaflow pipeline: $packets packets x $iter passes per set, median of $rounds rounds, CPU $cpu"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %6s %10s %10s %10s %10s %10s %10s %8s %8s %8s %8s %8s\n' set rules dpdk_pps \
  dpdk32_pps acl_pps acl_ne_pps mf_pps mf_ne_pps acl/dpdk acl/dp32 acl_ne/dp mf/dpdk mf_ne/dp
for set in $sets; do
  prepare_set "$set"
  dp="" d3="" ac="" an="" mf="" mn=""
  for ((r = 1; r <= rounds; r++)); do
    dp+=" $(acl_one "$name" "$rules" "$trace" "$nrules" default "$iter")"
    d3+=" $(acl_one "$name" "$rules" "$trace" "$nrules" default "$iter" 32)"
    ac+=" $(replay_one "$name" "$rules" "$trace" "$nrules" --repeat="$iter" --pipeline=acl)"
    an+=" $(replay_one "$name" "$rules" "$trace" "$nrules" --repeat="$iter" --pipeline=acl --emc=off)"
    mf+=" $(replay_one "$name" "$rules" "$trace" "$nrules" --repeat="$iter")"
    mn+=" $(replay_one "$name" "$rules" "$trace" "$nrules" --repeat="$iter" --emc=off)"
  done
  m_dp="$(median <<<"$dp")" m_ac="$(median <<<"$ac")" m_an="$(median <<<"$an")"
  m_mf="$(median <<<"$mf")" m_mn="$(median <<<"$mn")" m_d3="$(median <<<"$d3")"
  printf '%-10s %6s %10.0f %10.0f %10.0f %10.0f %10.0f %10.0f %8s %8s %8s %8s %8s\n' "$name" \
    "$nrules" "$m_dp" "$m_d3" "$m_ac" "$m_an" "$m_mf" "$m_mn" "$(ratio "$m_ac" "$m_dp")" \
    "$(ratio "$m_ac" "$m_d3")" "$(ratio "$m_an" "$m_dp")" "$(ratio "$m_mf" "$m_dp")" \
    "$(ratio "$m_mn" "$m_dp")"
  # Every round's figures, for the medians' spread, and the medians of the
  # per-round ratios (each round's tools ran back to back, so a load phase
  # of the machine moves both sides of a round's ratio alike).
  echo "  rounds: dpdk$dp | dpdk32$d3 | acl$ac | acl_ne$an | mf$mf | mf_ne$mn" >&2
  echo "  per-round ratio medians: acl/dpdk $(round_ratio "$ac" "$dp")  acl/dpdk32 $(round_ratio "$ac" "$d3")  acl_ne/dpdk $(round_ratio "$an" "$dp")  acl/acl_ne $(round_ratio "$ac" "$an")" >&2
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(packets/s; x/dpdk = the rate as a multiple of dpdk-test-acl's, x/dp32 of dpdk-test-acl's at 32 per call; verdicts checked equal on every packet)"
