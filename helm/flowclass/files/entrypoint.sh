#!/bin/sh
# flowclass-entrypoint: starts flowclassd inside the chart's pod.
#
# The chart renders flowclassd.yaml with everything known at `helm install`
# time.  Two things are only known once the pod runs, and flowclassd reads no
# environment variables (its config has no substitution), so this script turns
# them into flowclassd's own `--set KEY=VALUE` overrides and then execs it
# (flowclassd becomes PID 1 and gets the kubelet's SIGTERM directly):
#
#   * VF PCI addresses.  The SR-IOV device plugin allocates VFs when the pod
#     is scheduled and passes their addresses in PCIDEVICE_<RESOURCE>
#     (resource name upper-cased, '.' and '/' -> '_'), comma-separated, e.g.
#     PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK=0000:3b:02.1,0000:3b:02.2.
#     Every port the chart rendered with `vf: N` gets
#     `--set ports.<i>.device=<N-th address of its resource>`.
#   * Pinned CPUs.  With the kubelet's static CPU manager a Guaranteed pod
#     with an integer CPU request gets exclusive CPUs, known only on the node.
#     In "auto" mode the first CPU of the container's affinity
#     (Cpus_allowed_list) becomes eal.main_lcore (the control core) and the
#     next FLOWCLASS_PMD_COUNT CPUs become pmd.lcores (DPDK lcore id = CPU id,
#     as docs/flowclassd.md asks for production: no lcore_map; but when a CPU
#     id is 128 or more, past DPDK's RTE_MAX_LCORE, lcores 0..n are mapped
#     onto the CPUs with eal.lcore_map).
#
# The rendered config is deliberately incomplete where these values go (VF
# ports carry a placeholder device such as "@vf:intel.com/x:0", and pmd.lcores
# is absent in auto mode): flowclassd rejects it unless this script ran.
#
# Environment (set by the chart's DaemonSet):
#   FLOWCLASSD           flowclassd binary (default: flowclassd on PATH)
#   FLOWCLASS_CONFIG     config file (default: /etc/flowclass/flowclassd.yaml)
#   FLOWCLASS_VF_PORTS   space-separated PORT_INDEX:ENV_NAME:VF_INDEX entries,
#                        e.g. "0:PCIDEVICE_INTEL_COM_X:0 1:PCIDEVICE_INTEL_COM_X:1"
#   FLOWCLASS_LCORES     "auto" (from the CPU affinity) or empty (the config has them)
#   FLOWCLASS_PMD_COUNT  auto mode: PMD lcores (default: every CPU but the first)
#   FLOWCLASS_CPUS       auto mode: CPU list ("4-6,9") used instead of reading
#                        /proc/self/status (tests)
#
# Usage: entrypoint.sh [--check-config] [FLOWCLASSD ARGS...]
#   --check-config  run `flowclassd --check-config` with the same overrides
#                   (validates without touching EAL) instead of starting it.
# Exit status: flowclassd's; 3 (flowclassd's "configuration invalid") when a
# VF address or the CPUs cannot be resolved, with a message saying why.
set -eu
set -f  # overrides such as pmd.lcores=[5,6] must never be glob-expanded

me=flowclass-entrypoint
die() {
  echo "$me: error: $*" >&2
  exit 3
}
is_uint() {
  case $1 in '' | *[!0-9]*) return 1 ;; esac
  return 0
}

flowclassd=${FLOWCLASSD:-flowclassd}
config=${FLOWCLASS_CONFIG:-/etc/flowclass/flowclassd.yaml}
mode=run
if [ "${1:-}" = "--check-config" ]; then
  mode=check
  shift
fi

overrides=""

# ---- VF ports -------------------------------------------------------------
# nth_item LIST N: the N-th (0-based) comma-separated item of LIST, trimmed.
nth_item() {
  _list=$1
  _n=$2
  _i=0
  _old_ifs=$IFS
  IFS=,
  for _item in $_list; do
    if [ "$_i" -eq "$_n" ]; then
      IFS=$_old_ifs
      # Trim blanks around the item.
      echo "$_item" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//'
      return 0
    fi
    _i=$((_i + 1))
  done
  IFS=$_old_ifs
  return 1
}
count_items() {
  _n=0
  _old_ifs=$IFS
  IFS=,
  for _item in $1; do _n=$((_n + 1)); done
  IFS=$_old_ifs
  echo "$_n"
}

# getenv_raw NAME: the value of environment variable NAME from this process's
# initial environment.  A resource name may hold characters that are not
# valid in a shell variable name (e.g. '-'); dash neither imports nor exports
# such variables, but they are in /proc/$$/environ as the kubelet set them.
getenv_raw() {
  if [ -r /proc/$$/environ ]; then
    tr '\0' '\n' </proc/$$/environ | awk -v p="$1=" 'index($0, p) == 1 { print substr($0, length(p) + 1); exit }'
  else
    printenv "$1" || true
  fi
}

for entry in ${FLOWCLASS_VF_PORTS:-}; do
  port=${entry%%:*}
  rest=${entry#*:}
  env_name=${rest%:*}
  vf=${rest##*:}
  if ! is_uint "$port" || ! is_uint "$vf" || [ -z "$env_name" ] || [ "$rest" = "$entry" ]; then
    die "FLOWCLASS_VF_PORTS entry \"$entry\" is not PORT_INDEX:ENV_NAME:VF_INDEX"
  fi
  addrs=$(getenv_raw "$env_name")
  if [ -z "$addrs" ]; then
    die "$env_name is not set: the SR-IOV device plugin did not give this container" \
      "a VF for ports[$port] (is the resource requested and advertised on this node?)"
  fi
  if ! addr=$(nth_item "$addrs" "$vf"); then
    die "ports[$port] wants VF $vf of $env_name, but it holds $(count_items "$addrs")" \
      "address(es): $addrs (raise sriov.count / the resource's count)"
  fi
  case $addr in
    [0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]:[0-9a-fA-F][0-9a-fA-F]:[0-9a-fA-F][0-9a-fA-F].[0-7]) ;;
    *) die "$env_name item $vf is \"$addr\", not a PCI address (DDDD:BB:DD.F)" ;;
  esac
  echo "$me: ports[$port] -> VF $vf of $env_name = $addr" >&2
  overrides="$overrides ports.$port.device=$addr"
done

# ---- pinned CPUs -> lcores ------------------------------------------------
# expand_cpus "2-4,7" prints "2 3 4 7" (the kernel's cpu list format).
expand_cpus() {
  _out=""
  _old_ifs=$IFS
  IFS=,
  for _part in $1; do
    case $_part in
      *-*)
        _lo=${_part%-*}
        _hi=${_part#*-}
        if ! is_uint "$_lo" || ! is_uint "$_hi" || [ "$_lo" -gt "$_hi" ]; then
          IFS=$_old_ifs
          return 1
        fi
        while [ "$_lo" -le "$_hi" ]; do
          _out="$_out $_lo"
          _lo=$((_lo + 1))
        done
        ;;
      *)
        if ! is_uint "$_part"; then
          IFS=$_old_ifs
          return 1
        fi
        _out="$_out $_part"
        ;;
    esac
  done
  IFS=$_old_ifs
  echo "$_out"
}

case ${FLOWCLASS_LCORES:-} in
  auto)
    cpu_list=${FLOWCLASS_CPUS:-$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)}
    cpus=$(expand_cpus "$cpu_list") || die "cannot parse the CPU list \"$cpu_list\""
    ncpus=0
    for c in $cpus; do ncpus=$((ncpus + 1)); done
    if [ "$ncpus" -lt 2 ]; then
      die "the container may run on CPU(s) \"$cpu_list\" only: flowclassd needs" \
        "one control lcore plus at least one PMD lcore (resources.cpu >= 2)"
    fi
    pmd_count=${FLOWCLASS_PMD_COUNT:-$((ncpus - 1))}
    if ! is_uint "$pmd_count" || [ "$pmd_count" -lt 1 ]; then
      die "FLOWCLASS_PMD_COUNT=\"$pmd_count\" is not a positive integer"
    fi
    if [ "$pmd_count" -gt $((ncpus - 1)) ]; then
      die "$pmd_count PMD lcores + 1 control lcore asked for, but the container" \
        "may run on $ncpus CPU(s) only: \"$cpu_list\""
    fi
    if [ "$pmd_count" -lt $((ncpus - 1)) ]; then
      echo "$me: warning: the container may run on $ncpus CPUs ($cpu_list) but asked" \
        "for $((pmd_count + 1)): these CPUs are not exclusive (is the kubelet's CPU" \
        "manager policy \"static\" and the pod Guaranteed?); PMDs may share CPUs" >&2
    fi
    main=""
    pmds=""
    n=0
    for c in $cpus; do
      if [ -z "$main" ]; then
        main=$c
      elif [ "$n" -lt "$pmd_count" ]; then
        pmds="${pmds:+$pmds,}$c"
        n=$((n + 1))
      fi
    done
    # DPDK's lcore ids stop at RTE_MAX_LCORE (128 in Debian's build): on a
    # node with more CPUs, lcores 0..n are mapped onto the pinned CPUs.
    high=""
    for c in $main $(echo "$pmds" | tr , ' '); do
      [ "$c" -ge 128 ] && high=yes
    done
    if [ -n "$high" ]; then
      map="0@$main"
      ids=""
      n=1
      for c in $(echo "$pmds" | tr , ' '); do
        map="$map,$n@$c"
        ids="${ids:+$ids,}$n"
        n=$((n + 1))
      done
      echo "$me: CPUs $cpu_list (ids >= 128) -> eal.lcore_map=$map eal.main_lcore=0" \
        "pmd.lcores=[$ids]" >&2
      overrides="$overrides eal.lcore_map=$map eal.main_lcore=0 pmd.lcores=[$ids]"
    else
      echo "$me: CPUs $cpu_list -> eal.main_lcore=$main pmd.lcores=[$pmds]" >&2
      overrides="$overrides eal.main_lcore=$main pmd.lcores=[$pmds]"
    fi
    ;;
  "") ;;
  *) die "FLOWCLASS_LCORES=\"$FLOWCLASS_LCORES\" is neither auto nor empty" ;;
esac

# ---- run --------------------------------------------------------------------
set_args=""
for o in $overrides; do set_args="$set_args --set $o"; done
if [ "$mode" = check ]; then
  echo "$me: $flowclassd --check-config $config$set_args $*" >&2
  # $set_args is unquoted on purpose: its words hold no blanks (PCI
  # addresses, integers, [a,b] lists) and globbing is off (set -f).
  # shellcheck disable=SC2086
  exec "$flowclassd" --check-config "$config" $set_args "$@"
fi
echo "$me: exec $flowclassd -c $config$set_args $*" >&2
# shellcheck disable=SC2086
exec "$flowclassd" -c "$config" $set_args "$@"
