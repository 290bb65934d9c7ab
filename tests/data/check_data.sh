#!/usr/bin/env bash
# check_data.sh — the ctest checks that the repository stands alone:
#
#   check_data.sh standalone SOURCE_DIR
#       no tracked file names the team's folder beside the checkout, which a
#       user's clone does not have (everything read is in tests/data);
#   check_data.sh checksums DATA_DIR
#       every file of DATA_DIR/PROVENANCE.tsv is there with its SHA-256
#       (the staged copy of tests/data/classbench is complete and unchanged);
#   check_data.sh missing-fails TEST_BINARY[:GTEST_FILTER]...
#       each test binary, pointed at an empty data directory
#       (FLOWCLASS_CLASSBENCH_DIR), fails and names the missing path: a
#       missing data file is a failure, never a silent skip.
set -euo pipefail
mode="${1:?usage: check_data.sh standalone|checksums|missing-fails ARGS}"
shift

case "$mode" in
standalone)
  src="${1:?usage: check_data.sh standalone SOURCE_DIR}"
  cd "$src"
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    list() { git ls-files -z; }
  else  # an exported tarball: every file
    list() { find . -type f -not -path './build*' -print0; }
  fi
  # Written so that this file does not match itself.
  pattern='\.\./shared|shared/[w]orkloads'
  hits="$(list | xargs -0 -r grep -nE -I -- "$pattern" 2>/dev/null || true)"
  if [ -n "$hits" ]; then
    echo "FAIL: tracked files name the folder beside the checkout (a clone has none):"
    echo "$hits"
    exit 1
  fi
  echo "ok: $(list | tr -cd '\0' | wc -c) files, none reads outside the checkout"
  ;;
checksums)
  dir="${1:?usage: check_data.sh checksums DATA_DIR}"
  prov="$dir/PROVENANCE.tsv"
  [ -f "$prov" ] || { echo "FAIL: no $prov"; exit 1; }
  n=0
  while IFS=$'\t' read -r file _repo _path _commit _blob sha _lines bytes; do
    [ "$file" = file ] && continue
    n=$((n + 1))
    [ -f "$dir/$file" ] || { echo "FAIL: $dir/$file is missing"; exit 1; }
    got="$(sha256sum "$dir/$file" | cut -d' ' -f1)"
    [ "$got" = "$sha" ] || { echo "FAIL: $dir/$file has SHA-256 $got, PROVENANCE.tsv says $sha"; exit 1; }
    size="$(stat -c %s "$dir/$file")"
    [ "$size" = "$bytes" ] || { echo "FAIL: $dir/$file has $size bytes, PROVENANCE.tsv says $bytes"; exit 1; }
  done < "$prov"
  [ "$n" -gt 0 ] || { echo "FAIL: $prov lists no file"; exit 1; }
  echo "ok: $n files in $dir match PROVENANCE.tsv"
  ;;
missing-fails)
  [ $# -gt 0 ] || { echo "usage: check_data.sh missing-fails TEST_BINARY[:GTEST_FILTER]..."; exit 2; }
  empty="$(mktemp -d /tmp/flowclass_no_data_XXXXXX)"
  trap 'rm -rf "$empty"' EXIT
  for spec in "$@"; do
    bin="${spec%%:*}"
    filter="*"
    [ "$spec" != "$bin" ] && filter="${spec#*:}"
    [ -x "$bin" ] || { echo "FAIL: no test binary $bin"; exit 1; }
    set +e
    out="$(FLOWCLASS_CLASSBENCH_DIR="$empty" "$bin" --gtest_filter="$filter" 2>&1)"
    code=$?
    set -e
    if [ "$code" -eq 0 ]; then
      echo "FAIL: $(basename "$bin") --gtest_filter=$filter passed with no data in $empty:"
      echo "$out" | tail -20
      exit 1
    fi
    if ! grep -qF "$empty" <<<"$out"; then
      echo "FAIL: $(basename "$bin") failed (exit $code) without naming the missing path under $empty:"
      echo "$out" | tail -20
      exit 1
    fi
    if grep -q '\[  SKIPPED \]' <<<"$out"; then
      echo "FAIL: $(basename "$bin") skipped tests for want of data:"
      grep '\[  SKIPPED \]' <<<"$out"
      exit 1
    fi
    echo "ok: $(basename "$bin") --gtest_filter=$filter fails (exit $code) and names $empty"
  done
  ;;
*)
  echo "usage: check_data.sh standalone|checksums|missing-fails ARGS" >&2
  exit 2
  ;;
esac
