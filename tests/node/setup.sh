#!/usr/bin/env bash
# Installs the Node client's dependencies (@grpc/grpc-js, @grpc/proto-loader,
# pinned by the committed package-lock.json) into BUILD_DIR/node-client, where
# tests/e2e/grpc_node_test.cc looks for them.  Needs node >= 18 and npm, and
# the npm registry.  `make test` calls it; safe to re-run.
#
#   tests/node/setup.sh BUILD_DIR
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:?usage: tests/node/setup.sh BUILD_DIR}"
dest="$build/node-client"
mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
cd "$dest"
# --ignore-scripts: the only install script (protobufjs) is a version notice.
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
echo "node client dependencies installed in $dest/node_modules"
