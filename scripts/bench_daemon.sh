#!/usr/bin/env bash
# bench_daemon.sh — flowclassd throughput beside the dpdk-testpmd I/O ceiling.
#
# net_pcap rx (infinite_rx=1) -> 1 PMD -> net_pcap tx to /dev/null.  For
# 100 flows and 1M flows, over rule sets with 1, 10, 20 and 30 subtables
# (distinct (nw_src, nw_dst) prefix-length pairs; every packet matches),
# reports Mpps and cycles/packet from flowclassd's own final counters, and
# dpdk-testpmd io-forwarding on the same vdevs in the same run (median and
# best of its per-second rates).  Prints a
# Markdown table (tests/bench/README.md keeps the last results).
#
#   scripts/bench_daemon.sh [BUILD_DIR]
# Environment: BENCH_SECONDS (5), BENCH_FLOWS ("100 1000000"),
#              BENCH_SUBTABLES ("1 10 20 30"), BENCH_LCORE_MAP ("0@0,1@1"),
#              BENCH_RUNS (3: flowclassd runs per row, the median is shown).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
secs="${BENCH_SECONDS:-5}"
flows_list="${BENCH_FLOWS:-100 1000000}"
subtables_list="${BENCH_SUBTABLES:-1 10 20 30}"
lcore_map="${BENCH_LCORE_MAP:-0@0,1@1}"
n_runs="${BENCH_RUNS:-3}"
daemon="$build/server/flowclassd"
testpmd="$(command -v dpdk-testpmd || true)"
[[ -x "$daemon" ]] || { echo "bench: build flowclassd first ($daemon)" >&2; exit 1; }
work="$(mktemp -d /tmp/flowclassd-bench.XXXXXX)"
trap 'rm -rf "$work" /var/run/dpdk/fcbench$$ /var/run/dpdk/tpbench$$' EXIT

# Rule set with S subtables: S distinct (src_len, dst_len) shapes, 4 rules
# each, all output:2, plus a catch-all so every packet is forwarded.
gen_rules() {
  python3 - "$1" "$2" <<'PY'
import sys, random
s, out = int(sys.argv[1]), sys.argv[2]
rnd = random.Random(s)
shapes = [(a, b) for a in (0, 8, 12, 16, 20, 24) for b in (8, 10, 12, 14, 16, 18, 20, 24)][:max(0, s - 1)]
with open(out, "w") as f:
    prio = 1000
    for a, b in shapes:
        for _ in range(4):
            src = "10.%d.%d.0/%d" % (rnd.randrange(256), rnd.randrange(256), a) if a else None
            dst = "10.%d.%d.0/%d" % (rnd.randrange(4), rnd.randrange(256), b)
            m = "priority=%d,in_port=1,ip," % prio + ("nw_src=%s," % src if src else "") + "nw_dst=" + dst
            f.write(m + ",actions=output:2\n")
            prio -= 1
    f.write("priority=1,in_port=1,ip,actions=output:2\n")
PY
}

run_daemon() {  # pcap rules mbufs -> "mpps cycles_per_pkt"
  local pcap=$1 rules=$2 mbufs=$3
  cat > "$work/d.yaml" <<YAML
eal: {hugepages: false, memory_mb: 3072, pci: false, lcore_map: "$lcore_map",
      file_prefix: fcbench$$, log_level: error}
pmd: {lcores: [1]}
mempool: {mbufs: $mbufs, data_room: 512}
ports:
  - {number: 1, device: net_pcap0, args: "rx_pcap=$pcap,infinite_rx=1"}
  - {number: 2, device: net_pcap1, args: "tx_pcap=/dev/null", poll: false}
rules: {file: $rules}
stats: {interval_ms: 0, final: false}
run: {duration_s: $secs}
YAML
  "$daemon" -c "$work/d.yaml" > "$work/d.out" 2>&1 || { cat "$work/d.out" >&2; return 1; }
  python3 - "$work/d.out" <<'PY'
import sys
for line in open(sys.argv[1]):
    # "TIMESTAMP info flowclassd: final total gen=.. rx=.." (server/log.h)
    if " final total " in line:
        kv = dict(x.split("=", 1) for x in line.split(" final total ", 1)[1].split())
        rx, busy, idle, hz = (int(kv[k]) for k in ("rx", "busy_cycles", "idle_cycles", "tsc_hz"))
        secs = (busy + idle) / hz
        print("%.2f %.0f" % (rx / secs / 1e6, busy / max(rx, 1)))
PY
}

run_testpmd() {  # pcap mbufs -> "mpps"
  local pcap=$1 mbufs=$2
  [[ -n "$testpmd" ]] || { echo "n/a n/a"; return; }
  "$testpmd" --no-huge -m 3072 --no-pci --file-prefix=tpbench$$ --lcores="$lcore_map" \
    --log-level=error \
    --vdev="net_pcap0,rx_pcap=$pcap,infinite_rx=1" --vdev="net_pcap1,tx_pcap=/dev/null" \
    -- --forward-mode=io --total-num-mbufs="$mbufs" --mbuf-size=512 --stats-period=1 \
    --nb-cores=1 > "$work/t.out" 2>&1 &
  local pid=$!
  # + start-up (EAL clears its memory, infinite_rx copies the whole pcap
  # into mbufs); long enough for several per-second samples at full rate.
  sleep $(( secs + 6 + mbufs / 150000 ))
  kill -INT "$pid"; wait "$pid" || true
  # Rx-pps of port 0 over the per-second prints (the seconds it forwarded):
  # "median best".  The median is the sustained rate, comparable with
  # flowclassd's whole-run average; the best second is kept for reference.
  python3 - "$work/t.out" <<'PY'
import re, statistics, sys
txt = open(sys.argv[1], errors="replace").read()
pps = [int(x) for x in re.findall(r"NIC statistics for port 0.*?Rx-pps:\s+(\d+)", txt, re.S)]
pps = [x for x in pps if x > 0]
print("%.2f %.2f" % (statistics.median(pps) / 1e6, max(pps) / 1e6) if pps else "n/a n/a")
PY
}

echo "| flows | subtables | flowclassd Mpps | cycles/pkt | testpmd io Mpps (median / best s) | ratio (to median / best) |"
echo "|------:|----------:|----------------:|-----------:|----------------:|------:|"
for flows in $flows_list; do
  pkts=$(( flows < 10000 ? 10000 : flows ))
  python3 "$here/scripts/gen_pcap.py" --out "$work/in.pcap" --packets "$pkts" --flows "$flows"
  mbufs=$(( pkts + 16384 ))
  read -r ceiling best < <(run_testpmd "$work/in.pcap" "$mbufs")
  for s in $subtables_list; do
    gen_rules "$s" "$work/rules.txt"
    # The run with the median rate of BENCH_RUNS (this VM's noise is +-5%).
    runs=()
    for _ in $(seq "$n_runs"); do
      runs+=("$(run_daemon "$work/in.pcap" "$work/rules.txt" "$mbufs")")
    done
    read -r mpps cpp < <(printf '%s\n' "${runs[@]}" | sort -n | sed -n "$(( (n_runs + 1) / 2 ))p")
    ratio=$(python3 -c "print('%.2f / %.2f' % ($mpps / $ceiling, $mpps / $best))" 2>/dev/null || echo n/a)
    echo "| $flows | $s | $mpps | $cpp | $ceiling / $best | $ratio |"
  done
done
