#!/usr/bin/env bash
# The flowclass.v1 API against buf (buf.yaml at the repository root):
#   1. `buf lint`: STANDARD rules, no finding;
#   2. `buf breaking proto --against proto/baseline/flowclass-v1.binpb`: no
#      change that breaks a client of the frozen v1 (FILE rules);
#   3. and that both checks can fail: in a scratch copy, a service renamed
#      must fail the lint and a field retyped must fail the breaking check.
# buf is the pinned npm package @bufbuild/buf that tests/node/setup.sh
# installs into BUILD_DIR/node-client (make test runs it first).
#
#   tests/api/buf_check.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$(cd "${1:?usage: buf_check.sh SOURCE_DIR BUILD_DIR}" && pwd)"
build="$(cd "${2:?usage: buf_check.sh SOURCE_DIR BUILD_DIR}" && pwd)"
buf="$build/node-client/node_modules/.bin/buf"
baseline=proto/baseline/flowclass-v1.binpb

if [[ ! -x "$buf" ]]; then
  echo "buf_check: no buf at $buf: run tests/node/setup.sh $build first (make test does)" >&2
  exit 1
fi
if [[ ! -e "$src/proto-deps/googleapis/google/rpc/status.proto" ]]; then
  echo "buf_check: $src/proto-deps/googleapis/google/rpc/status.proto is missing:" \
       "install golang-github-gogo-googleapis-dev (make deps does)" >&2
  exit 1
fi
export BUF_CACHE_DIR="$build/buf-cache"
echo "buf $("$buf" --version)"

cd "$src"
"$buf" lint
echo "buf lint: clean"
"$buf" breaking proto --against "$baseline"
echo "buf breaking against $baseline: no breaking change"

# The checks can fail: the same module with one breaking edit each.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cp -r "$src/buf.yaml" "$src/proto" "$scratch/"
ln -s "$src/proto-deps" "$scratch/proto-deps"
api="$scratch/proto/flowclass/v1/flowclass.proto"
cd "$scratch"

cp "$api" "$api.orig"
sed -i 's/^service ClassifierService {/service Classifier {/' "$api"
if cmp -s "$api" "$api.orig"; then echo "buf_check: the service line was not found" >&2; exit 1; fi
if "$buf" lint >"$scratch/lint.out" 2>&1; then
  echo "buf_check: buf lint accepted a service not named ...Service" >&2
  exit 1
fi
grep -q 'should be suffixed with "Service"' "$scratch/lint.out" || {
  echo "buf_check: buf lint failed for another reason:" >&2
  cat "$scratch/lint.out" >&2
  exit 1
}
cp "$api.orig" "$api"

sed -i 's/^  uint64 generation = 3;  \/\/ after this batch/  uint32 generation = 3;  \/\/ after this batch/' "$api"
if cmp -s "$api" "$api.orig"; then echo "buf_check: BatchAck.generation was not found" >&2; exit 1; fi
if "$buf" breaking proto --against "$baseline" >"$scratch/breaking.out" 2>&1; then
  echo "buf_check: buf breaking accepted BatchAck.generation retyped" >&2
  exit 1
fi
grep -q 'changed type from "uint64" to "uint32"' "$scratch/breaking.out" || {
  echo "buf_check: buf breaking failed for another reason:" >&2
  cat "$scratch/breaking.out" >&2
  exit 1
}
echo "buf_check: a renamed service fails the lint and a retyped field the breaking check"
