# bench_acl_common.sh — what scripts/bench_slowpath.sh and scripts/bench_acl.sh
# share: the same ClassBench rules and traces, the same dpdk-test-acl runs
# and the same checked flowclassctl replays.  Sourced, not run.
#
# The sourcing script sets, before `bench_acl_setup NAME`:
#   build classbench packets cpu acl_mb seed  (its directories and knobs)
#   work                                       (where generated files go)
# and gets: ctl, conv, acl_bin, and the functions below.

# bench_acl_setup NAME: the tools, checked; NAME prefixes every error.
bench_acl_setup() {
  bench_name="$1"
  ctl="$build/client/flowclassctl"
  conv="$here/scripts/classbench_acl.py"
  [ -x "$ctl" ] || die "no $ctl: build the flowclassctl target first"
  acl_bin="$(command -v dpdk-test-acl)" ||
    die "no dpdk-test-acl (Debian: apt-get install dpdk-dev; make deps-bench)"
  command -v taskset >/dev/null || die "no taskset (util-linux)"
  mkdir -p "$work"
  # dpdk-test-acl leaves its runtime directory (--file-prefix) behind.
  trap 'rm -rf "/var/run/dpdk/${bench_name}$$"' EXIT
}

die() { echo "${bench_name:-bench}: $*" >&2; exit 1; }

# Values from the tools' output (the last match; "" if none).
field() { sed -n "$1" <<<"$2" | tail -n 1; }

ratio() { if [ -n "$1" ]; then awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; else echo n/a; fi; }

median() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print ""; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# dpdk-test-acl RULES TRACE ALG VERBOSE ITERATIONS [STEP]: its output on
# stdout.  STEP: packets per rte_acl_classify call (--tracestep; default
# dpdk-test-acl's own, 256).  --tracenum is one more than the trace's lines:
# dpdk-test-acl 22.11 writes one record past its buffer when the file has
# more lines than --tracenum.
run_acl() {
  local eal=() app=()
  if [ "$3" != default ]; then  # DPDK uses AVX-512 only when allowed to
    eal=(--force-max-simd-bitwidth=512)
    app=(--alg="$3")
  fi
  [ -n "${6:-}" ] && app+=(--tracestep="$6")
  "$acl_bin" --no-huge -m "$acl_mb" --file-prefix="${bench_name}$$" -l "$cpu" --no-pci \
    --no-telemetry --log-level=lib.eal:warning "${eal[@]}" -- "${app[@]}" \
    --rulesf="$1" --tracef="$2" --tracenum="$((packets + 1))" --iter="$5" --verbose="$4" 2>&1
}

# prepare_set SET: the rules of SET (a name under CLASSBENCH_DIR/neurocuts or
# a path) without the TCP-flags field, which both tools read as the same
# rules (classbench_acl.py rules), and a trace of `packets` random points
# inside random rules whose expected column is dpdk-test-acl's own verdict
# (--verbose=2, classbench_acl.py expect): every replay then checks each of
# its verdicts against DPDK's.  Sets name, rules, nrules, trace.
prepare_set() {
  local src="$1"
  [ -f "$src" ] || src="$classbench/neurocuts/$1"
  [ -f "$src" ] || die "missing rule set $src (configure $build first, or name CLASSBENCH_DIR)"
  name="$(basename "$1")"
  rules="$work/$name.rules"
  nrules="$(python3 "$conv" rules "$src" "$rules")"
  python3 "$conv" trace "$rules" "$work/$name.points" "$packets" "$seed"
  run_acl "$rules" "$work/$name.points" default 2 1 >"$work/$name.acl_verdicts" ||
    die "$name: dpdk-test-acl --verbose=2 failed (see $work/$name.acl_verdicts)"
  python3 "$conv" expect "$work/$name.points" "$work/$name.acl_verdicts" "$work/${name}_trace"
  trace="$work/${name}_trace"
}

# One replay: prints packets/s; checks rules, trace lines, packets (trace
# lines x --repeat), mismatches (and, with --megaflows off, that every packet
# was an upcall and nothing was installed).
# replay_one NAME RULES TRACE NRULES ARGS...
replay_one() {
  local name="$1" rules="$2" trace="$3" nrules="$4"; shift 4
  local out repeat=1 a
  for a in "$@"; do [[ "$a" == --repeat=* ]] && repeat="${a#--repeat=}"; done
  out="$(taskset -c "$cpu" "$ctl" replay "$@" "$rules" "$trace")" ||
    die "$name: flowclassctl replay $* failed:"$'\n'"$out"
  local lr lt pk mm pps
  lr="$(field 's/^rules: \([0-9]*\) .*/\1/p' "$out")"
  lt="$(field 's/^rules: [0-9]*  trace lines: \([0-9]*\) .*/\1/p' "$out")"
  pk="$(field 's/^replay: packets=\([0-9]*\) .*/\1/p' "$out")"
  mm="$(field 's/^replay: .*mismatches=\([0-9]*\) .*/\1/p' "$out")"
  pps="$(field 's/^classified: .*(\([0-9]*\) packets\/s)$/\1/p' "$out")"
  [ "$lr" = "$nrules" ] || die "$name: replay loaded $lr rules, not $nrules"
  [ "$lt" = "$packets" ] || die "$name: replay read $lt trace lines, not $packets"
  [ "$pk" = "$((packets * repeat))" ] || die "$name: replay classified $pk packets"
  [ "$mm" = 0 ] || die "$name: replay $* disagrees with dpdk-test-acl on $mm packets"
  if [[ " $* " == *" --megaflows off "* ]]; then
    grep -qx "  miss with success upcall: $pk" <<<"$out" ||
      die "$name: --megaflows off: not every packet was an upcall"
    grep -qx "  megaflows: 0 in 0 subtables" <<<"$out" ||
      die "$name: --megaflows off: megaflows were installed"
  fi
  [ -n "$pps" ] || die "$name: no classified: line in replay's output"
  echo "$pps"
}

# One dpdk-test-acl timing run: prints pkt/sec.
# acl_one NAME RULES TRACE NRULES ALG ITERATIONS [STEP]
acl_one() {
  local out nr pk pps
  out="$(run_acl "$2" "$3" "$5" 0 "$6" "${7:-}")" || die "$1: dpdk-test-acl --alg=$5 failed:"$'\n'"$out"
  nr="$(field 's/^ *num_rules=\([0-9]*\)$/\1/p' "$out")"
  pk="$(field 's/.* iterations, \([0-9]*\) pkts, .*/\1/p' "$out")"
  pps="$(field 's/.*cycles\/pkt, \([0-9.]*\) pkt\/sec$/\1/p' "$out")"
  [ "$nr" = "$4" ] || die "$1: dpdk-test-acl loaded $nr rules, not $4"
  [ "$pk" = "$((packets * $6))" ] ||
    die "$1: dpdk-test-acl classified $pk packets, not $packets x $6"
  [ -n "$pps" ] || die "$1: no pkt/sec in dpdk-test-acl's output"
  printf '%.0f\n' "$pps"
}
