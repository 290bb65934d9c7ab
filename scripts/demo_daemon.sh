#!/usr/bin/env bash
# demo_daemon.sh — the `make demo` part for flowclassd.
#
# Builds flowclassd (unless FLOWCLASS_NO_BUILD=1), generates a pcap of mixed
# traffic, starts flowclassd with a net_pcap rx port replaying it forever
# (infinite_rx=1) and two tx ports (a pcap written to /dev/null and a
# net_null), loads a sample rule set, prints the live per-PMD counters for
# DEMO_SECONDS (default 5) and stops it cleanly with SIGINT.  No hugepages,
# no NIC, no network traffic: everything is a DPDK vdev in this process.
#
#   scripts/demo_daemon.sh [BUILD_DIR]      (default: build)
# Environment: DEMO_SECONDS, DEMO_LCORE_MAP (default "0@0,1@1"),
#              FLOWCLASS_NO_BUILD=1 to use an existing build.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
seconds="${DEMO_SECONDS:-5}"
lcore_map="${DEMO_LCORE_MAP:-0@0,1@1}"

if [[ "${FLOWCLASS_NO_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$build/build.ninja" ]]; then
    cmake -S "$here" -B "$build" -G Ninja -DFLOWCLASS_BENCHMARKS=OFF >/dev/null
  fi
  ninja -C "$build" flowclassd
fi
daemon="$build/server/flowclassd"
[[ -x "$daemon" ]] || { echo "demo: $daemon not built" >&2; exit 1; }

work="$(mktemp -d /tmp/flowclassd-demo.XXXXXX)"
prefix="flowclassd-demo-$$"
# EAL keeps a runtime directory per --file-prefix; ours is unique, remove it.
trap 'rm -rf "$work" "/var/run/dpdk/$prefix" "${XDG_RUNTIME_DIR:-/tmp}/dpdk/$prefix"' EXIT

echo "== generating mixed traffic: 10000 packets over 500 flows"
python3 "$here/scripts/gen_pcap.py" --out "$work/in.pcap" --packets 10000 --flows 500

cat > "$work/rules.txt" <<'RULES'
# sample rule set (native format)
priority=300,in_port=1,udp,nw_dst=10.0.0.0/16,tp_dst=53-53,actions=output:2
priority=200,in_port=1,tcp,tp_dst=443-443,actions=output:3
priority=150,in_port=1,tcp,nw_dst=10.1.0.0/16,tp_dst=1000-2000,actions=output:2
priority=100,in_port=1,ip,nw_dst=10.2.0.0/16,actions=drop
priority=10,in_port=1,ip,nw_dst=10.0.0.0/8,actions=output:3
RULES

cat > "$work/flowclassd.yaml" <<YAML
eal:
  hugepages: false
  memory_mb: 512
  pci: false
  lcore_map: "$lcore_map"
  file_prefix: $prefix
  log_level: warning
pmd:
  lcores: [1]
mempool:
  mbufs: 32767          # infinite_rx keeps the whole pcap in the pool
ports:
  - number: 1
    device: net_pcap0
    args: rx_pcap=$work/in.pcap,infinite_rx=1
  - number: 2
    device: net_pcap1
    args: tx_pcap=/dev/null
    poll: false
  - number: 3
    device: net_null0
    poll: false
rules:
  file: $work/rules.txt
stats:
  interval_ms: 1000
  final: true
YAML

echo "== flowclassd --check-config"
"$daemon" --check-config "$work/flowclassd.yaml"
echo "== running flowclassd for ${seconds}s (live per-PMD counters every second)"
"$daemon" -c "$work/flowclassd.yaml" &
pid=$!
sleep "$seconds"
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
echo "== flowclassd exited with $rc"
exit "$rc"
