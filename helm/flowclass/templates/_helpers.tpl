{{/*
Names and labels.
*/}}
{{- define "flowclass.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flowclass.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "flowclass.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flowclass.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flowclass.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flowclass.labels" -}}
helm.sh/chart: {{ include "flowclass.chart" . }}
{{ include "flowclass.selectorLabels" . }}
app.kubernetes.io/component: dataplane
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "flowclass.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "flowclass.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "flowclass.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "flowclass.tlsSecretName" -}}
{{- default (printf "%s-grpc-tls" (include "flowclass.fullname" .)) .Values.grpc.tls.secretName }}
{{- end }}

{{/*
flowclass.pciEnvName RESOURCE: the variable the SR-IOV device plugin sets,
PCIDEVICE_ + the resource name upper-cased with '.' and '/' turned into '_'
(intel.com/intel_sriov_dpdk -> PCIDEVICE_INTEL_COM_INTEL_SRIOV_DPDK).
*/}}
{{- define "flowclass.pciEnvName" -}}
{{- printf "PCIDEVICE_%s" (. | replace "." "_" | replace "/" "_" | upper) }}
{{- end }}

{{/*
flowclass.resources: the one map both requests and limits are rendered from
(requests == limits: Guaranteed QoS, exclusive CPUs).
*/}}
{{- define "flowclass.resources" -}}
cpu: {{ .Values.resources.cpu | int | quote }}
memory: {{ .Values.resources.memory | quote }}
{{- if .Values.hugepages.enabled }}
hugepages-{{ .Values.hugepages.pageSize }}: {{ .Values.hugepages.amount | quote }}
{{- end }}
{{- if gt (int .Values.sriov.count) 0 }}
{{ .Values.sriov.resourceName }}: {{ .Values.sriov.count | int | quote }}
{{- end }}
{{- range .Values.sriov.extraResources }}
{{ .resourceName }}: {{ .count | int | quote }}
{{- end }}
{{- end }}

{{/*
flowclass.vfPorts: FLOWCLASS_VF_PORTS for the entrypoint,
"PORT_INDEX:ENV_NAME:VF_INDEX ..." for every port given by `vf:`.
*/}}
{{- define "flowclass.vfPorts" -}}
{{- $v := .Values }}
{{- $out := list }}
{{- range $i, $p := $v.ports }}
{{- if hasKey $p "vf" }}
{{- $res := default $v.sriov.resourceName $p.resource }}
{{- $out = append $out (printf "%d:%s:%d" $i (include "flowclass.pciEnvName" $res) (int $p.vf)) }}
{{- end }}
{{- end }}
{{- join " " $out }}
{{- end }}

{{/*
flowclass.autoLcores: true when the entrypoint picks the lcores from the
pinned CPUs (config.pmd.lcores not given).
*/}}
{{- define "flowclass.autoLcores" -}}
{{- $pmd := .Values.config.pmd | default dict }}
{{- if hasKey $pmd "lcores" }}false{{ else }}true{{ end }}
{{- end }}

{{/*
flowclass.bytes QUANTITY: a Kubernetes binary quantity ("2Gi", "512Mi",
"1048576") in bytes.
*/}}
{{- define "flowclass.bytes" -}}
{{- $n := regexFind "^[0-9]+" . | int64 }}
{{- $unit := trimPrefix (regexFind "^[0-9]+" .) . }}
{{- $mul := get (dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000) $unit | default 0 }}
{{- mul $n $mul }}
{{- end }}

{{/*
flowclass.millis DURATION: a Prometheus duration ("5s", "500ms", "1m") in ms.
*/}}
{{- define "flowclass.millis" -}}
{{- $n := regexFind "^[0-9]+" . | int64 }}
{{- $unit := trimPrefix (regexFind "^[0-9]+" .) . }}
{{- mul $n (get (dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000) $unit | default 0) }}
{{- end }}

{{/*
flowclass.validate: checks the schema cannot express.  Called from the
ConfigMap, so every render runs it.
*/}}
{{- define "flowclass.validate" -}}
{{- $v := .Values }}
{{- $counts := dict $v.sriov.resourceName (int $v.sriov.count) }}
{{- range $v.sriov.extraResources }}
{{- if hasKey $counts .resourceName }}
{{- fail (printf "sriov.extraResources: %s is listed twice (or is sriov.resourceName)" .resourceName) }}
{{- end }}
{{- $_ := set $counts .resourceName (int .count) }}
{{- end }}
{{- $numbers := dict }}
{{- range $i, $p := $v.ports }}
{{- if eq (hasKey $p "vf") (hasKey $p "device") }}
{{- fail (printf "ports[%d]: give exactly one of vf (a VF of an SR-IOV resource) or device (a PCI address or vdev)" $i) }}
{{- end }}
{{- if and (hasKey $p "resource") (not (hasKey $p "vf")) }}
{{- fail (printf "ports[%d]: resource is only meaningful with vf" $i) }}
{{- end }}
{{- if hasKey $p "vf" }}
{{- $res := default $v.sriov.resourceName $p.resource }}
{{- $have := get $counts $res | default 0 }}
{{- if ge (int $p.vf) (int $have) }}
{{- fail (printf "ports[%d]: vf %d of %s, but the pod requests %d VF(s) of it (sriov.count / sriov.extraResources)" $i (int $p.vf) $res (int $have)) }}
{{- end }}
{{- end }}
{{- $n := toString (int $p.number) }}
{{- if hasKey $numbers $n }}
{{- fail (printf "ports[%d]: port number %s is also ports[%d]" $i $n (int (get $numbers $n))) }}
{{- end }}
{{- $_ := set $numbers $n $i }}
{{- end }}
{{- $cfg := $v.config | default dict }}
{{- $eal := get $cfg "eal" | default dict }}
{{- if and (not $v.hugepages.enabled) (not (get $eal "memory_mb")) }}
{{- fail "hugepages.enabled is false: set config.eal.memory_mb (e.g. 1024), flowclassd requires it with --no-huge" }}
{{- end }}
{{- if and $v.rules.text (get (get $cfg "rules" | default dict) "file") }}
{{- fail "give either rules.text or config.rules.file, not both" }}
{{- end }}
{{- if eq (include "flowclass.autoLcores" .) "true" }}
{{- if hasKey $eal "main_lcore" }}
{{- fail "config.eal.main_lcore is set but config.pmd.lcores is not: give both, or neither (then the entrypoint takes them from the pinned CPUs)" }}
{{- end }}
{{- if lt (int $v.resources.cpu) 2 }}
{{- fail "resources.cpu must be at least 2: one control lcore and at least one PMD lcore" }}
{{- end }}
{{- end }}
{{- if and $v.serviceMonitor.enabled (not $v.metrics.enabled) }}
{{- fail "serviceMonitor.enabled needs metrics.enabled" }}
{{- end }}
{{- /* Loopback listeners: kubelet probes, the Service, port-forward and
       Prometheus all reach the pod IP, so the pod would never be ready. */}}
{{- $loopback := "^(127\\.|::1$|\\[::1\\]$|localhost$)" }}
{{- if and $v.grpc.enabled (regexMatch $loopback $v.grpc.bindAddress) }}
{{- fail (printf "grpc.bindAddress %s is a loopback address: the probes, the Service and port-forward reach the pod IP; use 0.0.0.0 (or :: for IPv6/dual stack)" $v.grpc.bindAddress) }}
{{- end }}
{{- if and $v.metrics.enabled (regexMatch $loopback $v.metrics.bindAddress) }}
{{- fail (printf "metrics.bindAddress %s is a loopback address: Prometheus scrapes the pod IP (and the probes use it without gRPC); use 0.0.0.0" $v.metrics.bindAddress) }}
{{- end }}
{{- /* The API server refuses a hugepage request that is not a whole number
       of pages. */}}
{{- if $v.hugepages.enabled }}
{{- if contains "." (toString $v.hugepages.amount) }}
{{- fail (printf "hugepages.amount %s: give a whole number with a binary unit (e.g. 1536Mi for 1.5Gi)" (toString $v.hugepages.amount)) }}
{{- end }}
{{- $amount := include "flowclass.bytes" (toString $v.hugepages.amount) | int64 }}
{{- $page := include "flowclass.bytes" (toString $v.hugepages.pageSize) | int64 }}
{{- if or (le $amount 0) (ne (mod $amount $page) 0) }}
{{- fail (printf "hugepages.amount %s is not a whole number of %s pages (Kubernetes refuses the pod)" (toString $v.hugepages.amount) (toString $v.hugepages.pageSize)) }}
{{- end }}
{{- end }}
{{- /* Prometheus refuses a scrape timeout longer than the interval. */}}
{{- if $v.serviceMonitor.enabled }}
{{- if gt (include "flowclass.millis" $v.serviceMonitor.scrapeTimeout | int64) (include "flowclass.millis" $v.serviceMonitor.interval | int64) }}
{{- fail (printf "serviceMonitor.scrapeTimeout %s is longer than serviceMonitor.interval %s (Prometheus refuses it)" $v.serviceMonitor.scrapeTimeout $v.serviceMonitor.interval) }}
{{- end }}
{{- end }}
{{- /* A surge pod would ask for the same VFs, CPUs and hugepages on the node. */}}
{{- $ru := (get ($v.updateStrategy | default dict) "rollingUpdate") | default dict }}
{{- if and (hasKey $ru "maxSurge") (not (has (toString (get $ru "maxSurge")) (list "0" "0%"))) }}
{{- fail (printf "updateStrategy.rollingUpdate.maxSurge must stay 0 (got %v): a second pod on the node would need the same VFs, CPUs and hugepages" (get $ru "maxSurge")) }}
{{- end }}
{{- /* Every capability is dropped but the listed ones: a port below 1024
       needs NET_BIND_SERVICE. */}}
{{- if not $v.securityContext.privileged }}
{{- range $what, $port := dict "grpc.port" (and $v.grpc.enabled (int $v.grpc.port)) "metrics.port" (and $v.metrics.enabled (int $v.metrics.port)) }}
{{- if and $port (lt (int $port) 1024) (not (has "NET_BIND_SERVICE" $v.securityContext.capabilities)) }}
{{- fail (printf "%s %d is below 1024: add NET_BIND_SERVICE to securityContext.capabilities (all others are dropped), or use a port from 1024 up" $what (int $port)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $v.grpc.enabled $v.metrics.enabled (eq (int $v.grpc.port) (int $v.metrics.port)) }}
{{- fail (printf "grpc.port and metrics.port are both %d" (int $v.grpc.port)) }}
{{- end }}
{{- end }}

{{/*
flowclass.config: flowclassd.yaml, i.e. .Values.config plus what the chart
owns (eal.hugepages, ports, the address/TLS part of grpc, metrics.enabled and
address, rules.file for rules.text).  VF ports get a placeholder device that
flowclassd rejects; the entrypoint replaces it with the VF's PCI address.
*/}}
{{- define "flowclass.config" -}}
{{- $v := .Values }}
{{- $cfg := deepCopy ($v.config | default dict) }}
{{- $eal := get $cfg "eal" | default dict }}
{{- $_ := set $eal "hugepages" $v.hugepages.enabled }}
{{- $_ := set $cfg "eal" $eal }}
{{- $ports := list }}
{{- range $i, $p := $v.ports }}
{{- $port := omit $p "vf" "resource" }}
{{- if hasKey $p "vf" }}
{{- $_ := set $port "device" (printf "@vf:%s:%d" (default $v.sriov.resourceName $p.resource) (int $p.vf)) }}
{{- end }}
{{- $ports = append $ports $port }}
{{- end }}
{{- $_ := set $cfg "ports" $ports }}
{{- if $v.grpc.enabled }}
{{- $g := get $cfg "grpc" | default dict }}
{{- $_ := set $g "address" $v.grpc.bindAddress }}
{{- $_ := set $g "port" (int $v.grpc.port) }}
{{- if $v.grpc.tls.enabled }}
{{- $_ := set $g "tls_cert_file" (printf "%s/tls.crt" $v.grpc.tls.mountPath) }}
{{- $_ := set $g "tls_key_file" (printf "%s/tls.key" $v.grpc.tls.mountPath) }}
{{- if $v.grpc.tls.requireClientCert }}
{{- $_ := set $g "tls_ca_file" (printf "%s/ca.crt" $v.grpc.tls.mountPath) }}
{{- $_ := set $g "require_client_cert" true }}
{{- else }}
{{- $_ := set $g "require_client_cert" false }}
{{- end }}
{{- $a := $v.grpc.auth | default dict }}
{{- $auth := dict }}
{{- if $a.disabled }}
{{- $_ := set $auth "disabled" true }}
{{- else }}
{{- if and (or $a.admin $a.reader) (not $v.grpc.tls.requireClientCert) }}
{{- fail "grpc.auth.admin/reader name client certificates: they need grpc.tls.requireClientCert=true" }}
{{- end }}
{{- if $a.admin }}{{- $_ := set $auth "admin" $a.admin }}{{- end }}
{{- if $a.reader }}{{- $_ := set $auth "reader" $a.reader }}{{- end }}
{{- if $a.tokenSecretName }}
{{- $_ := set $auth "token_file" (printf "%s/tokens" (default "/etc/flowclass-auth" $a.mountPath)) }}
{{- end }}
{{- if not (or $a.admin $a.reader $a.tokenSecretName) }}
{{- fail "grpc.auth: name who may call the API (grpc.auth.admin, grpc.auth.reader or grpc.auth.tokenSecretName), or set grpc.auth.disabled=true" }}
{{- end }}
{{- end }}
{{- $_ := set $g "auth" $auth }}
{{- else }}
{{- $_ := set $g "plaintext" true }}
{{- $_ := set $g "allow_plaintext_remote" true }}
{{- $_ := set $g "auth" (dict "disabled" true) }}
{{- end }}
{{- $_ := set $cfg "grpc" $g }}
{{- else }}
{{- $_ := unset $cfg "grpc" }}
{{- end }}
{{- $m := get $cfg "metrics" | default dict }}
{{- $_ := set $m "enabled" $v.metrics.enabled }}
{{- /* IPv4 only (the schema refuses a colon): civetweb has no IPv6 */}}
{{- $_ := set $m "address" (printf "%s:%d" $v.metrics.bindAddress (int $v.metrics.port)) }}
{{- $_ := set $cfg "metrics" $m }}
{{- if $v.rules.text }}
{{- $r := get $cfg "rules" | default dict }}
{{- $_ := set $r "file" "/etc/flowclass/rules.txt" }}
{{- $_ := set $cfg "rules" $r }}
{{- end }}
{{- if $v.store.enabled }}
{{- $st := get $cfg "store" | default dict }}
{{- $_ := set $st "path" $v.store.mountPath }}
{{- $_ := set $cfg "store" $st }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
flowclass.probe KIND: the probe handler (see values.yaml `probes`) plus the
timings of .Values.probes.KIND.  Empty when nothing can be probed.
*/}}
{{- define "flowclass.probe" -}}
{{- $v := .root.Values }}
{{- $timing := get $v.probes .kind }}
{{- if $v.metrics.enabled }}
{{- /* flowclassd's own HTTP probes on the metrics listener: plain HTTP
     whatever the gRPC TLS setting; /readyz fails while rules are being
     restored or a PMD is stalled or behind, /healthz only when a PMD is
     stalled (docs/operations.md). */}}
httpGet:
  path: {{ if eq .kind "readiness" }}/readyz{{ else }}/healthz{{ end }}
  port: metrics
{{- else if and $v.grpc.enabled (not $v.grpc.tls.enabled) }}
grpc:
  port: {{ $v.grpc.port | int }}
  {{- if eq .kind "readiness" }}
  service: flowclass.v1.ClassifierService
  {{- end }}
{{- else if $v.grpc.enabled }}
tcpSocket:
  port: grpc
{{- end }}
{{- if or $v.grpc.enabled $v.metrics.enabled }}
{{ toYaml $timing }}
{{- end }}
{{- end }}

{{/*
flowclass.networks: the value of k8s.v1.cni.cncf.io/networks.  Plain names
are joined with ", "; as soon as one entry is an object, the JSON list form
is used ("ns/name@if" strings become {"namespace", "name", "interface"}).
*/}}
{{- define "flowclass.networks" -}}
{{- $objects := false }}
{{- range .Values.sriov.networks }}
{{- if kindIs "map" . }}{{ $objects = true }}{{ end }}
{{- end }}
{{- if $objects }}
{{- $list := list }}
{{- range .Values.sriov.networks }}
{{- if kindIs "map" . }}
{{- $list = append $list . }}
{{- else }}
{{- /* The short form "[namespace/]name[@interface]" as Multus reads it. */}}
{{- $o := dict }}
{{- $rest := . }}
{{- if contains "@" $rest }}
{{- $_ := set $o "interface" (last (splitList "@" $rest)) }}
{{- $rest = first (splitList "@" $rest) }}
{{- end }}
{{- if contains "/" $rest }}
{{- $_ := set $o "namespace" (first (splitList "/" $rest)) }}
{{- $rest = last (splitList "/" $rest) }}
{{- end }}
{{- $_ := set $o "name" $rest }}
{{- $list = append $list $o }}
{{- end }}
{{- end }}
{{- toJson $list }}
{{- else }}
{{- join ", " .Values.sriov.networks }}
{{- end }}
{{- end }}
