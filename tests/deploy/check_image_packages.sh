#!/usr/bin/env bash
# The container image (deploy/Dockerfile) against what the build really needs:
#   1. its build stage installs every -dev package of the Makefile's
#      DEB_PACKAGES (what `make` builds with), except libbenchmark-dev
#      (the image builds with FLOWCLASS_BENCHMARKS=OFF);
#   2. its run-time stage (the last FROM) installs the Debian package of every
#      shared library the given binaries link (ldd, dpkg -S), or a package
#      that depends on it, except what debian:bookworm-slim already has (the
#      "required" packages, libstdc++6).
# A package missing from either stage makes the image fail to build, or
# flowclassd fail to start in it; nothing here needs docker.
#
#   tests/deploy/check_image_packages.sh SOURCE_DIR BINARY...
set -euo pipefail
src="$1"; shift
docker="$src/deploy/Dockerfile"
fail=0

# The package names an `apt-get install` of the stage starting at FROM number
# $1 (1-based) lists (continuation lines joined).
stage_packages() {
  awk -v want="$1" '
    /^FROM / { stage++ }
    stage == want { line = line " " $0 }
    END { print line }' "$docker" |
    sed 's/\\ */ /g' | grep -o 'apt-get install [^&]*' | tr ' ' '\n' |
    grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vxE 'apt-get|install' | sort -u
}
stages=$(grep -c '^FROM ' "$docker")
build_pkgs=$(stage_packages 1)
run_pkgs=$(stage_packages "$stages")
[ -n "$build_pkgs" ] || { echo "no apt-get install in the build stage of $docker"; exit 1; }
[ -n "$run_pkgs" ] || { echo "no apt-get install in the run-time stage of $docker"; exit 1; }

# 1. The Makefile's -dev packages.
make_pkgs=$(awk '/^DEB_PACKAGES :=/ { on = 1 } on { print } on && !/\\$/ { exit }' "$src/Makefile" |
  sed 's/DEB_PACKAGES :=//; s/\\//g' | tr ' ' '\n' | grep -E -- '-dev$' | sort -u)
[ -n "$make_pkgs" ] || { echo "no -dev package in the Makefile's DEB_PACKAGES"; exit 1; }
for p in $make_pkgs; do
  [ "$p" = libbenchmark-dev ] && continue
  if ! grep -qx "$p" <<<"$build_pkgs"; then
    echo "deploy/Dockerfile's build stage does not install $p (Makefile DEB_PACKAGES has it)"
    fail=1
  fi
done

# 2. The binaries' shared libraries.  apt installs the listed packages with
# their dependencies, so a library may come from the closure of the list
# (Depends and Pre-Depends, as this machine's dpkg records them); the base
# image has the "required" packages and libstdc++6.
declare -A have
closure() {  # adds $1 and what it depends on to `have`
  local p="$1" deps d
  [ -n "${have[$p]:-}" ] && return
  have[$p]=1
  deps=$(dpkg-query -W -f='${Depends}, ${Pre-Depends}' "$p" 2>/dev/null) || return 0
  for d in $(tr ',|' '\n\n' <<<"$deps" | sed 's/([^)]*)//g; s/:any//g' | awk '{print $1}'); do
    closure "$d"
  done
}
for p in $run_pkgs; do closure "$p"; done
# The package that owns a library file (dpkg may record it under /lib or /usr/lib).
owner() {
  local f; f=$(readlink -f "$1")
  dpkg -S "$f" 2>/dev/null || dpkg -S "${f#/usr}" 2>/dev/null || dpkg -S "/usr$f" 2>/dev/null
}
for bin in "$@"; do
  [ -x "$bin" ] || { echo "no binary $bin"; exit 1; }
  libs=$(ldd "$bin" | awk '/=> \// { print $3 }')
  [ -n "$libs" ] || { echo "ldd found no shared library in $bin"; exit 1; }
  for lib in $libs; do
    pkg=$(owner "$lib" | head -1 | cut -d: -f1) || true
    [ -n "$pkg" ] || { echo "$bin: $lib belongs to no Debian package"; fail=1; continue; }
    [ -n "${have[$pkg]:-}" ] && continue
    [ "$pkg" = libstdc++6 ] && continue
    [ "$(dpkg-query -W -f='${Priority}' "$pkg" 2>/dev/null)" = required ] && continue
    echo "deploy/Dockerfile's run-time stage does not install $pkg" \
         "($(basename "$bin") links $lib), nor a package that depends on it"
    fail=1
  done
done
[ "$fail" = 0 ] && echo "image packages: build stage and run-time stage complete for $*"
exit "$fail"
