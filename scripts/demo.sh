#!/usr/bin/env bash
# make demo: run flowclassd on virtual DPDK ports with a sample rule set and
# show its live per-PMD counters, then classify a ClassBench trace offline
# with flowclassctl replay.  No hugepages, no NIC, no network traffic.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build=${1:-build}
cb=${2:-$build/classbench}  # staged from tests/data/classbench by CMake
echo "==== flowclassd on net_pcap vdevs"
FLOWCLASS_NO_BUILD=1 "$here/scripts/demo_daemon.sh" "$build"
echo
set=acl1_1K
echo "==== flowclassctl replay --repeat 20 $cb/hypersplit/$set $cb/hypersplit/${set}_trace"
"$build/client/flowclassctl" replay --repeat 20 "$cb/hypersplit/$set" "$cb/hypersplit/${set}_trace"
