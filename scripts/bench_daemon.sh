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
#
# The two pipelines (pipeline.kind) on ClassBench rules:
#   BENCH_PIPELINES="megaflow acl" scripts/bench_daemon.sh [BUILD_DIR]
# For each set of BENCH_SETS ("acl1_10k": names under
# BUILD_DIR/classbench/neurocuts, or paths), the rules as
# scripts/bench_acl.sh makes them (classbench_acl.py, no TCP-flags field;
# every rule output:1, i.e. back out of net_pcap0's tx to /dev/null) and a
# trace of points inside random rules (seed 1); for each F of BENCH_FLOWS
# ("100 100000") a pcap of the trace's first F points (TCP, UDP, or bare
# IPv4 of the point's protocol), repeated to at least 10,000 packets.  Then
# BENCH_RUNS rounds, each running flowclassd once per pipeline of
# BENCH_PIPELINES in turn (same rules, same pcap, same config otherwise:
# the EMC on, pmd.burst 32, acl_algorithm default); prints every round and
# the medians (Mpps and busy cycles/packet from flowclassd's final
# counters, as above) and the ratio of the medians to the first pipeline's.
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

# A daemon log's final totals as "mpps cycles_per_pkt".
final_rate() {
  python3 - "$1" <<'PY'
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
  final_rate "$work/d.out"
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

if [[ -n "${BENCH_PIPELINES:-}" ]]; then
  pipelines="$BENCH_PIPELINES"
  sets="${BENCH_SETS:-acl1_10k}"
  pflows="${BENCH_FLOWS:-100 100000}"
  conv="$here/scripts/classbench_acl.py"
  # run_pipeline KIND RULES PCAP MBUFS -> "mpps cycles_per_pkt"
  run_pipeline() {
    cat > "$work/p.yaml" <<YAML
eal: {hugepages: false, memory_mb: 3072, pci: false, lcore_map: "$lcore_map",
      file_prefix: fcbench$$, log_level: error}
pmd: {lcores: [1]}
mempool: {mbufs: $4, data_room: 512}
pipeline: {kind: $1}
ports:
  - {number: 1, device: net_pcap0, args: "rx_pcap=$3,tx_pcap=/dev/null,infinite_rx=1"}
rules: {file: $2, format: classbench}
stats: {interval_ms: 0, final: false}
run: {duration_s: $secs}
YAML
    "$daemon" -c "$work/p.yaml" > "$work/d.out" 2>&1 || { cat "$work/d.out" >&2; return 1; }
    final_rate "$work/d.out"
  }
  med() { tr ' ' '\n' | awk NF | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
  echo "flowclassd on net_pcap, pipelines: $pipelines; $secs s per run, $n_runs rounds (alternating), PMD on lcore 1"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  hdr="| set | rules | flows |" sep="|---|---:|---:|"
  for kind in $pipelines; do
    hdr+=" $kind Mpps [rounds] | cycles/pkt | ratio (medians / per-round median) |"
    sep+="---|---:|---:|"
  done
  echo "$hdr"; echo "$sep"
  # rr "A1 A2 .." "B1 B2 ..": the median of Ai / Bi.
  rr() {
    paste -d' ' <(tr ' ' '\n' <<<"$1" | awk NF) <(tr ' ' '\n' <<<"$2" | awk NF) |
      awk '{printf "%s ", $1 / $2}' | med | awk '{printf "%.2f", $1}'
  }
  for set in $sets; do
    src="$set"; [[ -f "$src" ]] || src="$build/classbench/neurocuts/$set"
    [[ -f "$src" ]] || { echo "bench: no rule set $src" >&2; exit 1; }
    name="$(basename "$set")"
    nrules="$(python3 "$conv" rules "$src" "$work/$name.rules")"
    maxf=0; for f in $pflows; do (( f > maxf )) && maxf=$f; done
    python3 "$conv" trace "$work/$name.rules" "$work/$name.points" "$maxf" 1
    for flows in $pflows; do
      pkts=$(( flows < 10000 ? 10000 : flows ))
      python3 - "$work/$name.points" "$flows" "$pkts" "$work/in.pcap" <<'PY'
import struct, sys
points, flows, pkts, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
frames = []
for line in open(points):
    if len(frames) == flows:
        break
    src, dst, sp, dp, proto = (int(x) for x in line.split()[:5])
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", sp, dp, 1, 0, 0x50, 0x10, 8192, 0, 0)
    elif proto == 17:
        l4 = struct.pack("!HHHH", sp, dp, 8, 0)
    else:
        l4 = bytes(8)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0, 64, proto, 0,
                     src.to_bytes(4, "big"), dst.to_bytes(4, "big"))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    f = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + l4
    frames.append(f + bytes(max(0, 60 - len(f))))
with open(out, "wb") as o:
    o.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i in range(pkts):
        f = frames[i % len(frames)]
        o.write(struct.pack("<IIII", i // 1000000, i % 1000000, len(f), len(f)) + f)
PY
      mbufs=$(( pkts + 16384 ))
      declare -A mp=() cp=()
      for ((r = 1; r <= n_runs; r++)); do
        for kind in $pipelines; do
          read -r m c < <(run_pipeline "$kind" "$work/$name.rules" "$work/in.pcap" "$mbufs")
          mp[$kind]+=" $m"; cp[$kind]+=" $c"
        done
      done
      first="" firstk="" line="| $name | $nrules | $flows |"
      for kind in $pipelines; do
        m="$(med <<<"${mp[$kind]}")"; c="$(med <<<"${cp[$kind]}")"
        [[ -z "$first" ]] && first="$m" firstk="$kind"
        line+=" $m [${mp[$kind]# }] | $c | $(awk -v a="$m" -v b="$first" 'BEGIN {printf "%.2f", a / b}')"
        line+=" / $(rr "${mp[$kind]}" "${mp[$firstk]}") |"
      done
      echo "$line"
      unset mp cp
    done
  done
  echo "(per pipeline: median Mpps [the rounds], median busy cycles/packet; ratio to the first pipeline: of the medians / the median of the per-round ratios)"
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi

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
