#!/usr/bin/env bash
# make demo: classify ClassBench traces with flowclassctl replay and show the
# pipeline counters.  (When flowclassd lands, this starts the daemon on
# virtual ports instead.)
set -euo pipefail
build=${1:-build}
cb=${2:-../shared/workloads/classbench}
ctl="$build/client/flowclassctl"
for set in acl1_1K fw1_1K ipc1_1K; do
  echo "== flowclassctl replay --repeat 20 $cb/hypersplit/$set $cb/hypersplit/${set}_trace"
  "$ctl" replay --repeat 20 "$cb/hypersplit/$set" "$cb/hypersplit/${set}_trace"
  echo
done
