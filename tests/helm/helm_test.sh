#!/usr/bin/env bash
# helm_chart_test: the Helm chart helm/flowclass, checked with a real helm.
#
#   tests/helm/helm_test.sh --helm HELM (--flowclassd FLOWCLASSD | --no-flowclassd REASON)
#
# HELM is put in BUILD/helm-tool/helm by tests/helm/setup.sh (`make test` runs
# it); without it the test fails.  FLOWCLASSD is the built daemon: every
# rendered config, completed by the chart's entrypoint script, must pass
# `flowclassd --check-config`.  ctest passes --no-flowclassd only when the
# build has no flowclassd (FLOWCLASS_WITH_SERVICE=OFF); that step is then
# reported as skipped.
#
# Steps: helm lint --strict (default values and every value set in
# tests/helm/values/), helm template of each, yamllint of the chart and of
# what it renders, check_manifests.py on each rendering, the entrypoint
# script's logic (fake PCIDEVICE_* variables and CPU lists, a stub
# flowclassd), flowclassd --check-config, values the schema or the templates
# must reject, and `helm package` (the symlinked deploy files end up inside).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/../.." && pwd)"
chart="$src/helm/flowclass"

helm="" flowclassd="" no_flowclassd=""
while [ $# -gt 0 ]; do
  case "$1" in
    --helm) helm="$2"; shift 2 ;;
    --flowclassd) flowclassd="$2"; shift 2 ;;
    --no-flowclassd) no_flowclassd="$2"; shift 2 ;;
    *) echo "usage: $0 --helm HELM (--flowclassd FLOWCLASSD | --no-flowclassd REASON)" >&2; exit 2 ;;
  esac
done

passed=0 failed=0 skipped=0
pass() { passed=$((passed + 1)); echo "ok    $*"; }
fail() { failed=$((failed + 1)); echo "FAIL  $*"; }
skip() { skipped=$((skipped + 1)); echo "skip  $*"; }
fatal() { echo "FAIL  $*"; echo "0 passed, 1 failed"; exit 1; }

# ---- tools: missing tools are failures, not skips ------------------------
if [ -z "$helm" ] || [ ! -x "$helm" ]; then
  fatal "helm not found at '${helm}': run tests/helm/setup.sh BUILD_DIR (make test does)"
fi
if [ -z "$no_flowclassd" ] && { [ -z "$flowclassd" ] || [ ! -x "$flowclassd" ]; }; then
  fatal "flowclassd not found at '${flowclassd}' (build it first: ninja -C BUILD flowclassd)"
fi
command -v yamllint >/dev/null || fatal "yamllint not found (Debian package yamllint; make deps installs it)"
py=""
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null && "$cand" -c 'import yaml' 2>/dev/null; then py="$cand"; break; fi
done
[ -n "$py" ] || fatal "no python3 with PyYAML (Debian package python3-yaml)"

work="$(mktemp -d "${TMPDIR:-/tmp}/helm_test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# Keep helm away from the user's ~/.config, ~/.cache and plugins.
export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" \
       HELM_DATA_HOME="$work/helm/data"
echo "helm $("$helm" version --short), $(yamllint --version), $("$py" --version)"

# helm logs "found symbolic link in path" for files/flowclass_alerts.yml and
# files/flowclass.json (symlinks into deploy/, on purpose): drop those lines.
hq() { "$helm" "$@" 2> >(grep -v 'found symbolic link in path' >&2); }

# ---- drift between the chart and the files it must agree with ------------
if out=$("$py" "$here/check_manifests.py" drift "$src"); then
  pass "schema config keys = docs/flowclassd.md keys; appVersion = CMake project VERSION"
else
  fail "drift:"$'\n'"$out"
fi

# ---- lint, render, yamllint, assertions per value set ---------------------
if out=$(yamllint -s -c "$here/yamllint.yaml" "$chart/Chart.yaml" "$chart/values.yaml" "$here/values" 2>&1); then
  pass "yamllint Chart.yaml values.yaml tests/helm/values"
else
  fail "yamllint of the chart's YAML:"$'\n'"$out"
fi

sets=(default)
for f in "$here"/values/*.yaml; do sets+=("$(basename "$f" .yaml)"); done
for set in "${sets[@]}"; do
  vf=()
  [ "$set" = default ] || vf=(-f "$here/values/$set.yaml")
  if out=$(hq lint --strict "$chart" "${vf[@]}" 2>&1); then
    pass "[$set] helm lint --strict"
  else
    fail "[$set] helm lint --strict:"$'\n'"$out"
  fi
  r="$work/$set.yaml"
  if ! hq template flowclass "$chart" --namespace dataplane "${vf[@]}" >"$r" 2>"$work/$set.err"; then
    fail "[$set] helm template:"$'\n'"$(cat "$work/$set.err")"
    continue
  fi
  pass "[$set] helm template ($(grep -c '^kind:' "$r") objects)"
  if out=$(yamllint -s -c "$here/yamllint.yaml" "$r" 2>&1); then
    pass "[$set] yamllint of the rendered manifests"
  else
    fail "[$set] yamllint of the rendered manifests:"$'\n'"$out"
  fi
  values_arg=()
  [ "$set" = default ] || values_arg=("$here/values/$set.yaml")
  if out=$("$py" "$here/check_manifests.py" manifests "$src" "$r" "${values_arg[@]}" 2>&1); then
    pass "[$set] manifests agree with the values (requests == limits, config, probes, volumes, ...)"
  else
    fail "[$set] manifest checks:"$'\n'"$out"
  fi
  # The config the chart renders is YAML of its own: lint it too.
  if [ -f "$r.d/flowclassd.yaml" ]; then
    if out=$(yamllint -s -c "$here/yamllint.yaml" "$r.d/flowclassd.yaml" 2>&1); then
      pass "[$set] yamllint of the rendered flowclassd.yaml"
    else
      fail "[$set] yamllint of the rendered flowclassd.yaml:"$'\n'"$out"
    fi
  fi
done

# ---- NOTES.txt ----------------------------------------------------------------
# helm template does not render NOTES.txt (and helm install --dry-run needs a
# cluster): in a copy of the chart, an extra template outputs the rendered
# NOTES.txt as one YAML string.
cp -rL "$chart" "$work/notes-chart"
{ echo '{{- define "test.notes" -}}'; cat "$chart/templates/NOTES.txt"; echo '{{- end }}'; } \
  >"$work/notes-chart/templates/_test_notes.tpl"
echo 'notes: {{ include "test.notes" . | toJson }}' >"$work/notes-chart/templates/test-notes.yaml"
for set in "${sets[@]}"; do
  vf=()
  [ "$set" = default ] || vf=(-f "$here/values/$set.yaml")
  notes=$("$helm" template flowclass "$work/notes-chart" --namespace dataplane "${vf[@]}" \
            --show-only templates/test-notes.yaml 2>&1 |
          "$py" -c 'import sys, yaml; print(yaml.safe_load(sys.stdin)["notes"])' 2>&1)
  want="kubectl -n dataplane get pods"
  [ "$set" = plaintext ] && want="WARNING: the API is plaintext"
  if grep -qF -- "$want" <<<"$notes" && ! grep -q '<no value>\|%!' <<<"$notes"; then
    pass "[$set] NOTES.txt renders"
  else
    fail "[$set] NOTES.txt:"$'\n'"$notes"
  fi
done

# ---- the entrypoint script --------------------------------------------------
# run_entry SET OUTFILE [VAR=VALUE...] -- [ARGS...]: the ConfigMap's
# entrypoint.sh of SET under sh, with the DaemonSet's environment plus VARs,
# FLOWCLASSD = a stub that records its arguments one per line in OUTFILE.
stub="$work/flowclassd-stub"
printf '#!/bin/sh\nfor a in "$@"; do printf "%%s\\n" "$a"; done > "$STUB_OUT"\n' >"$stub"
chmod +x "$stub"
run_entry() {
  local set="$1" out="$2"; shift 2
  local vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  ( set -a; . "$work/$set.yaml.d/env.sh"; set +a
    export FLOWCLASS_CONFIG="$work/$set.yaml.d/flowclassd.yaml"
    exec env FLOWCLASSD="$stub" STUB_OUT="$out" "${vars[@]}" sh "$work/$set.yaml.d/entrypoint.sh" "$@" )
}
# expect_args NAME OUTFILE EXPECTED...: the stub got exactly EXPECTED.
expect_args() {
  local name="$1" out="$2"; shift 2
  local want got
  want="$(printf '%s\n' "$@")"
  got="$(cat "$out" 2>/dev/null)"
  if [ "$got" = "$want" ]; then pass "$name"
  else fail "$name: flowclassd got"$'\n'"$got"$'\n'"expected"$'\n'"$want"$'\n'"entrypoint said:"$'\n'"$(cat "$work/entry.err")"; fi
}
# expect_error NAME TEXT CMD...: CMD exits 3 and says TEXT on stderr.
expect_error() {
  local name="$1" text="$2"; shift 2
  local err rc
  err="$("$@" 2>&1 >/dev/null)"; rc=$?
  if [ $rc -eq 3 ] && grep -qF -- "$text" <<<"$err"; then pass "$name"
  else fail "$name: exit $rc, stderr:"$'\n'"$err"$'\n'"(expected exit 3 and: $text)"; fi
}

if command -v shellcheck >/dev/null; then
  if out=$(shellcheck -s sh "$chart/files/entrypoint.sh" 2>&1); then pass "shellcheck entrypoint.sh"
  else fail "shellcheck entrypoint.sh:"$'\n'"$out"; fi
else
  skip "shellcheck entrypoint.sh (shellcheck not installed)"
fi

if [ -f "$work/multi-resource.yaml.d/entrypoint.sh" ] && [ -f "$work/default.yaml.d/entrypoint.sh" ]; then
  o="$work/args.out" e="$work/entry.err"
  cfg="$work/default.yaml.d/flowclassd.yaml"
  run_entry default "$o" PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1 FLOWCLASS_CPUS=4-7 2>"$e"
  expect_args "entrypoint: one VF, CPUs 4-7 -> main lcore 4, PMDs [5,6,7]" "$o" \
    -c "$cfg" --set ports.0.device=0000:3b:02.1 --set eal.main_lcore=4 --set pmd.lcores=[5,6,7]
  # CPU ids past DPDK's RTE_MAX_LCORE (128): lcores 0..n mapped onto them.
  run_entry default "$o" PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1 FLOWCLASS_CPUS=126,150-152 2>"$e"
  expect_args "entrypoint: CPUs 126,150-152 -> eal.lcore_map 0@126,1@150,2@151,3@152" "$o" \
    -c "$cfg" --set ports.0.device=0000:3b:02.1 --set eal.lcore_map=0@126,1@150,2@151,3@152 \
    --set eal.main_lcore=0 --set pmd.lcores=[1,2,3]
  run_entry default "$o" "PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK= 0000:5e:00.2 " FLOWCLASS_CPUS=2,7,11,40 2>"$e"
  expect_args "entrypoint: blanks trimmed, CPU list 2,7,11,40" "$o" \
    -c "$cfg" --set ports.0.device=0000:5e:00.2 --set eal.main_lcore=2 --set pmd.lcores=[7,11,40]
  # Three resources' VFs, one resource name with '-', extra args passed on.
  cfg="$work/multi-resource.yaml.d/flowclassd.yaml"
  run_entry multi-resource "$o" PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1 \
    "PCIDEVICE_EXAMPLE_COM_SRIOV-DPDK-WEST=0000:d8:0a.0,0000:d8:0a.1" FLOWCLASS_CPUS=10-13 -- --set pmd.burst=16 2>"$e"
  expect_args "entrypoint: VFs of two resources ('-' in one name), extra args last" "$o" \
    -c "$cfg" --set ports.0.device=0000:3b:02.1 --set ports.1.device=0000:d8:0a.1 \
    --set eal.main_lcore=10 --set pmd.lcores=[11,12,13] --set pmd.burst=16
  # Not exclusive CPUs (CPU manager not static): warns, uses resources.cpu of them.
  if err=$(run_entry default "$o" PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1 FLOWCLASS_CPUS=0-15 2>&1) &&
     grep -q "not exclusive" <<<"$err"; then
    expect_args "entrypoint: 16 shared CPUs -> warning, 1 + resources.cpu-1 lcores" "$o" \
      -c "$work/default.yaml.d/flowclassd.yaml" --set ports.0.device=0000:3b:02.1 \
      --set eal.main_lcore=0 --set pmd.lcores=[1,2,3]
  else
    fail "entrypoint: no warning for a non-exclusive CPU set:"$'\n'"$err"
  fi
  # Explicit lcores in the config: the script leaves them alone.
  run_entry lab "$o" 2>"$e"
  expect_args "entrypoint: explicit lcores, vdev ports: no overrides" "$o" -c "$work/lab.yaml.d/flowclassd.yaml"
  # Errors: exit 3 and a message saying what is wrong.
  expect_error "entrypoint: no PCIDEVICE_* variable" "PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK is not set" \
    run_entry default "$o" FLOWCLASS_CPUS=4-7
  expect_error "entrypoint: fewer VFs than ports" "wants VF 1 of PCIDEVICE_EXAMPLE_COM_SRIOV-DPDK-WEST, but it holds 1" \
    run_entry multi-resource "$o" PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1 \
    "PCIDEVICE_EXAMPLE_COM_SRIOV-DPDK-WEST=0000:d8:0a.0" FLOWCLASS_CPUS=10-13
  expect_error "entrypoint: malformed PCI address" "not a PCI address" \
    run_entry default "$o" PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=3b:02.1 FLOWCLASS_CPUS=4-7
  expect_error "entrypoint: one CPU" "at least one PMD lcore" \
    run_entry default "$o" PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1 FLOWCLASS_CPUS=5
  expect_error "entrypoint: fewer CPUs than resources.cpu" "may run on 3 CPU(s) only" \
    run_entry default "$o" PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1 FLOWCLASS_CPUS=4-6
  expect_error "entrypoint: unparsable CPU list" "cannot parse the CPU list" \
    run_entry default "$o" PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1 FLOWCLASS_CPUS=4-x
else
  fail "entrypoint: the default or multi-resource rendering is missing"
fi

# ---- flowclassd --check-config on what the pod would run -----------------
# Every value set, with the entrypoint's overrides for fake VFs and CPUs 4-7
# (rules.file re-pointed at the rendered rules.txt; the rest is as in the pod).
if [ -n "$no_flowclassd" ]; then
  skip "flowclassd --check-config of the rendered configs: $no_flowclassd"
else
  vfenv=(PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1,0000:3b:02.2
         "PCIDEVICE_EXAMPLE_COM_SRIOV-DPDK-WEST=0000:d8:0a.0,0000:d8:0a.1")
  for set in "${sets[@]}"; do
    d="$work/$set.yaml.d"
    [ -f "$d/flowclassd.yaml" ] || { fail "[$set] --check-config: no rendered config"; continue; }
    extra=()
    while IFS= read -r a; do extra+=("$a"); done <"$d/args"
    [ -f "$d/rules.txt" ] && extra+=(--set "rules.file=$d/rules.txt")
    # Exclusive CPUs 4.. as many as resources.cpu: main lcore 4, PMDs 5...
    out=$( ( set -a; . "$d/env.sh"; set +a
             cpus="4-$((4 + FLOWCLASS_PMD_COUNT))"
             env FLOWCLASSD="$flowclassd" FLOWCLASS_CONFIG="$d/flowclassd.yaml" FLOWCLASS_CPUS="$cpus" "${vfenv[@]}" \
               sh "$d/entrypoint.sh" --check-config "${extra[@]}" ) 2>&1 )
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^config ok' <<<"$out"; then
      pass "[$set] flowclassd --check-config (config + entrypoint overrides)"
    else
      fail "[$set] flowclassd --check-config exit $rc:"$'\n'"$out"
      continue
    fi
    # What the daemon would do: production EAL flags, PCI allow-list, lcores.
    case "$set" in
      default)
        grep -q '^eal args: .*-l 4,5,6,7 --main-lcore=4 .*-a 0000:3b:02.1' <<<"$out" &&
          ! grep -q -- '--no-huge\|--no-pci' <<<"$out" &&
          grep -q '^port 1: 0000:3b:02.1 ' <<<"$out" &&
          grep -q '^metrics: http://0.0.0.0:9464/metrics' <<<"$out" &&
          grep -q '^grpc: 0.0.0.0:50051 tls (client certificates required)$' <<<"$out" &&
          grep -q '^grpc auth: 1 admin and 0 reader certificate names$' <<<"$out" &&
          pass "[$set] hugepages, PCI allow-list, pinned lcores, metrics on 0.0.0.0, gRPC mTLS with an admin name" ||
          fail "[$set] --check-config summary:"$'\n'"$out" ;;
      plaintext)
        grep -q '^grpc: 0.0.0.0:50051 plaintext$' <<<"$out" && grep -q '^grpc auth: off (grpc.auth.disabled: true' <<<"$out" &&
          pass "[$set] gRPC plaintext on 0.0.0.0, authorization off explicitly" ||
          fail "[$set] --check-config summary:"$'\n'"$out" ;;
      tokens)
        grep -q '^grpc: 0.0.0.0:50051 tls$' <<<"$out" &&
          grep -q '^grpc auth: 0 admin and 0 reader certificate names, tokens from /etc/flowclass-auth/tokens$' <<<"$out" &&
          pass "[$set] gRPC TLS without client certificates, bearer tokens" ||
          fail "[$set] --check-config summary:"$'\n'"$out" ;;
      multi-resource)
        grep -q '^port 7: 0000:d8:0a.1 rx_queues 4' <<<"$out" && grep -q '^port 9: 0000:af:00.3,rxq_pkt_split=0 tx-only' <<<"$out" &&
          grep -q '^pmd lcores: 5,6,7 burst 16 ' <<<"$out" && grep -q '^grpc: \[::\]:50051 tls (client certificates required)' <<<"$out" &&
          grep -q '^3 rules ok' <<<"$out" && grep -q '^metrics: http://0.0.0.0:9100/metrics' <<<"$out" &&
          grep -q '^pipeline: emc_insert_inv_prob 100 emc_adaptive on smc on cd off ' <<<"$out" &&
          pass "[$set] VF of the second resource, fixed PCI port, extra args, mTLS, IPv6, start-up rules" ||
          fail "[$set] --check-config summary:"$'\n'"$out" ;;
      lab)
        grep -q -- '--no-huge -m 1024' <<<"$out" && grep -q -- '--no-pci' <<<"$out" && grep -q '^pmd lcores: 1 ' <<<"$out" &&
          pass "[$set] --no-huge, --no-pci, explicit lcores" || fail "[$set] --check-config summary:"$'\n'"$out" ;;
    esac
  done
  # Fail-safe: without the entrypoint the rendered config must not start.
  out=$("$flowclassd" --check-config "$work/default.yaml.d/flowclassd.yaml" 2>&1); rc=$?
  if [ $rc -eq 3 ]; then pass "the rendered config alone is rejected: $(head -1 <<<"$out")"
  else fail "the rendered config without the entrypoint passed --check-config (exit $rc):"$'\n'"$out"; fi
  out=$("$flowclassd" --check-config "$work/default.yaml.d/flowclassd.yaml" --set pmd.lcores=[1] 2>&1); rc=$?
  if [ $rc -eq 3 ] && grep -qF 'ports[0].device: "@vf:intel.com/intel_sriov_dpdk:0" is neither' <<<"$out"; then
    pass "a VF port whose address was not filled in is rejected"
  else fail "the VF placeholder device passed or failed otherwise (exit $rc):"$'\n'"$out"; fi
fi

# ---- values that must be rejected ------------------------------------------
# reject NAME TEXT HELM-ARGS...: helm template fails and says TEXT.
reject() {
  local name="$1" text="$2"; shift 2
  local err
  if err=$(hq template flowclass "$chart" "$@" 2>&1 >/dev/null); then
    fail "rejects $name: helm template succeeded"
  elif grep -qF -- "$text" <<<"$err"; then
    pass "rejects $name"
  else
    fail "rejects $name: failed for another reason:"$'\n'"$err"$'\n'"(expected: $text)"
  fi
}
reject "negative grpc.port (schema)" "grpc.port" --set grpc.port=-1
reject "an API nobody may call (no admin, reader or token Secret)" \
  "grpc.auth: name who may call the API" --set "grpc.auth.admin=null"
reject "certificate names without client certificates" \
  "they need grpc.tls.requireClientCert=true" --set grpc.tls.requireClientCert=false
reject "metrics.port 70000 (schema)" "metrics.port" --set metrics.port=70000
reject "IPv6 metrics.bindAddress (schema: no IPv6 in civetweb)" "bindAddress" --set metrics.bindAddress=::
reject "a host name as grpc.bindAddress (schema: flowclassd takes IP literals)" "bindAddress" \
  --set grpc.bindAddress=myhost
reject "loopback grpc.bindAddress (probes reach the pod IP)" \
  "grpc.bindAddress 127.0.0.1 is a loopback address" --set grpc.bindAddress=127.0.0.1
reject "loopback IPv6 grpc.bindAddress" "grpc.bindAddress ::1 is a loopback address" \
  --set grpc.bindAddress=::1
reject "loopback metrics.bindAddress (Prometheus scrapes the pod IP)" \
  "metrics.bindAddress localhost is a loopback address" --set metrics.bindAddress=localhost
reject "an IPv4 octet past 255 (schema)" "bindAddress" --set grpc.bindAddress=999.1.1.1
reject "the TLS mount inside the config mount (schema)" "mountPath" \
  --set grpc.tls.mountPath=/etc/flowclass/tls
reject "liveness successThreshold 2 (schema: Kubernetes requires 1)" "successThreshold" \
  --set probes.liveness.successThreshold=2
reject "a capability with the CAP_ prefix (schema)" "capabilities" \
  --set "securityContext.capabilities={CAP_IPC_LOCK}"
reject "hugepages not a whole number of pages" "hugepages.amount 1500Mi is not a whole number of 1Gi pages" \
  --set hugepages.amount=1500Mi
reject "a decimal hugepages.amount" "give a whole number with a binary unit" \
  --set hugepages.pageSize=2Mi --set hugepages.amount=1.5Gi
reject "a scrape timeout past the interval" "serviceMonitor.scrapeTimeout 4s is longer than serviceMonitor.interval 2s" \
  --set serviceMonitor.enabled=true --set serviceMonitor.interval=2s
reject "a surge pod" "maxSurge must stay 0" --set updateStrategy.rollingUpdate.maxSurge=1
reject "a port below 1024 without NET_BIND_SERVICE" "metrics.port 80 is below 1024" --set metrics.port=80
if out=$(hq template flowclass "$chart" --set grpc.port=443 \
           --set "securityContext.capabilities={IPC_LOCK,NET_BIND_SERVICE}" 2>&1 >/dev/null); then
  pass "accepts grpc.port 443 with NET_BIND_SERVICE"
else fail "grpc.port 443 with NET_BIND_SERVICE refused:"$'\n'"$out"; fi
for addr in "::" "0.0.0.0" "10.1.2.3" "fd00::7"; do  # what the two checks above must let through
  if out=$(hq template flowclass "$chart" --set "grpc.bindAddress=$addr" 2>&1 >/dev/null); then
    pass "accepts grpc.bindAddress $addr"
  else fail "grpc.bindAddress $addr refused:"$'\n'"$out"; fi
done
reject "fractional resources.cpu (schema)" "resources.cpu" --set resources.cpu=1.5
reject "hugepages.pageSize 4Mi (schema)" "hugepages.pageSize" --set hugepages.pageSize=4Mi
reject "empty image.repository (schema)" "image.repository" --set image.repository=
reject "malformed memory quantity (schema)" "resources.memory" --set resources.memory=lots
reject "a misspelt top-level value (schema)" "hugepage" --set hugepage.size=1Gi
reject "chart-owned config.eal.hugepages (schema)" "hugepages" --set config.eal.hugepages=false
reject "chart-owned config.grpc.port (schema)" "port" --set config.grpc.port=1
reject "unknown flowclassd key config.pmd.bursts (schema)" "bursts" --set config.pmd.bursts=8
reject "pmd.burst 64 (schema, flowclassd's 1..32)" "burst" --set config.pmd.burst=64
# (--set ports[0].x=... would replace the whole list: lists go in files.)
printf 'ports:\n  - {number: 1, vf: 1}\n' >"$work/bad-vf.yaml"
reject "a VF beyond sriov.count" "ports[0]: vf 1 of intel.com/intel_sriov_dpdk, but the pod requests 1" \
  -f "$work/bad-vf.yaml"
printf 'ports:\n  - {number: 1, vf: 0, device: net_null0}\n' >"$work/bad-both.yaml"
reject "a port with both vf and device" "ports[0]: give exactly one of vf" -f "$work/bad-both.yaml"
printf 'ports:\n  - {number: 1, vf: 0}\n  - {number: 1, device: net_null0}\n' >"$work/bad-dup.yaml"
reject "duplicate port numbers" "ports[1]: port number 1 is also ports[0]" -f "$work/bad-dup.yaml"
printf 'ports:\n  - {number: 1, vf: 0, resource: example.com/other}\n' >"$work/bad-res.yaml"
reject "a VF of a resource the pod does not request" "but the pod requests 0 VF(s) of it" -f "$work/bad-res.yaml"
printf 'ports:\n  - {number: 1, device: net_null0, rx_queue: 2}\n' >"$work/bad-key.yaml"
reject "an unknown port key (schema)" "rx_queue" -f "$work/bad-key.yaml"
reject "no hugepages without memory_mb" "set config.eal.memory_mb" --set hugepages.enabled=false
reject "resources.cpu 1 with automatic lcores" "resources.cpu must be at least 2" --set resources.cpu=1
reject "main_lcore without pmd.lcores" "give both, or neither" --set config.eal.main_lcore=3
reject "ServiceMonitor without metrics" "serviceMonitor.enabled needs metrics.enabled" \
  --set serviceMonitor.enabled=true --set metrics.enabled=false
reject "rules.text and config.rules.file" "either rules.text or config.rules.file" \
  --set rules.text=x --set config.rules.file=/r

# ---- helm package: a self-contained chart ----------------------------------
if out=$(hq package "$chart" -d "$work/pkg" 2>&1) &&
   out=$("$py" "$here/check_manifests.py" package "$src" "$work"/pkg/flowclass-*.tgz 2>&1); then
  pass "helm package holds deploy/prometheus/flowclass_alerts.yml and deploy/grafana/flowclass.json themselves"
else
  fail "helm package:"$'\n'"$out"
fi

echo "helm_chart_test: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
