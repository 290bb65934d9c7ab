#!/bin/bash
# run_fuzzer.sh FUZZER WORKDIR CORPUS REGRESSIONS — one fuzz run, as ctest's
# fuzz_<name> entries and `make fuzz` do it (tests/fuzz/README.md).
#
# Runs FUZZER for ${FLOWCLASS_FUZZ_SECONDS:-10} seconds, starting from the
# seed corpus and the regression inputs; the inputs it finds go to
# WORKDIR/corpus (the committed corpus is read, never written) and a crash
# to WORKDIR/crash-*, which is named on failure with the line that makes it
# a regression input.  Fails when the corpus directory is missing or empty.
# FLOWCLASS_FUZZ_SEED=N fixes libFuzzer's seed (make test's smoke run does,
# so that a CI run explores what the last one did; make fuzz does not).
set -eu -o pipefail
fuzzer=$1 work=$2 corpus=$3 regressions=$4
seconds=${FLOWCLASS_FUZZ_SECONDS:-10}
seed_arg=()
if [ -n "${FLOWCLASS_FUZZ_SEED:-}" ]; then seed_arg=(-seed="$FLOWCLASS_FUZZ_SEED"); fi
name=$(basename "$fuzzer")
for d in "$corpus" "$regressions"; do
  if [ -z "$(find "$d" -maxdepth 1 -type f ! -name README.md 2>/dev/null | head -1)" ]; then
    echo "run_fuzzer: $d is missing or holds no input" >&2
    exit 2
  fi
done
mkdir -p "$work/corpus"
rm -f "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*
set +e
"$fuzzer" "${seed_arg[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$corpus" "$regressions" \
  > "$work/log" 2>&1
rc=$?
set -e
grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::new_units_added)' "$work/log" || true
if [ $rc -ne 0 ]; then
  tail -n 60 "$work/log"
  for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -e "$f" ] || continue
    echo "run_fuzzer: $name failed on $f; keep it as a regression input:"
    echo "  cp $f $regressions/"
  done
  exit 1
fi
echo "run_fuzzer: $name ran ${seconds}s with no failure"
