#!/usr/bin/env python3
"""Checks what `helm template` rendered from helm/flowclass against the values
it was rendered with (the chart's values.yaml merged with a test value set, as
Helm merges them), and against the files the chart must agree with
(deploy/prometheus/flowclass_alerts.yml, deploy/grafana/flowclass.json,
docs/flowclassd.md, CMakeLists.txt).  Called by tests/helm/helm_test.sh.

  check_manifests.py manifests SOURCE_DIR RENDERED.yaml [VALUES.yaml]
      one rendered value set; also writes RENDERED.d/{flowclassd.yaml,
      entrypoint.sh, rules.txt, env.sh} for the shell part of the test
  check_manifests.py drift SOURCE_DIR
      schema keys vs docs/flowclassd.md, appVersion vs CMakeLists.txt
  check_manifests.py package SOURCE_DIR CHART.tgz
      the packaged chart holds the deploy files themselves, not links

Prints one line per failed check and exits 1 if any failed.
"""
import copy
import json
import os
import re
import shlex
import sys
import tarfile

import yaml

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def merge(base, over):
    """Helm's coalescing: maps merge recursively, anything else replaces,
    null deletes."""
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def pci_env_name(resource):
    # The SR-IOV device plugin's rule, written independently of the chart's.
    return "PCIDEVICE_" + resource.replace(".", "_").replace("/", "_").upper()


def by_kind(docs, kind):
    return [d for d in docs if d and d.get("kind") == kind]


def one(docs, kind, name=None):
    found = [d for d in by_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    check(len(found) == 1, f"expected one {kind}{' ' + name if name else ''}, found {len(found)}")
    return found[0] if found else {}


def check_manifests(src, rendered, values_file):
    chart = os.path.join(src, "helm", "flowclass")
    v = yaml.safe_load(open(os.path.join(chart, "values.yaml")))
    if values_file:
        v = merge(v, yaml.safe_load(open(values_file)))
    docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
    outdir = rendered + ".d"
    os.makedirs(outdir, exist_ok=True)

    grpc_on, tls_on = v["grpc"]["enabled"], v["grpc"]["tls"]["enabled"]
    metrics_on = v["metrics"]["enabled"]
    hp = v["hugepages"]

    # ---- which objects exist -------------------------------------------
    kinds = sorted(d["kind"] for d in docs)
    want = ["ConfigMap", "DaemonSet"]
    if v["serviceAccount"]["create"]:
        want.append("ServiceAccount")
    if grpc_on or metrics_on:
        want.append("Service")
    if v["serviceMonitor"]["enabled"]:
        want.append("ServiceMonitor")
    if v["prometheusRule"]["enabled"]:
        want.append("PrometheusRule")
    if v["grafanaDashboard"]["enabled"]:
        want.append("ConfigMap")
    if v["networkPolicy"]["enabled"]:
        want.append("NetworkPolicy")
    if grpc_on and tls_on and v["grpc"]["tls"]["certManager"]["enabled"]:
        want.append("Certificate")
    check(kinds == sorted(want), f"rendered kinds {kinds}, expected {sorted(want)}")

    if v["networkPolicy"]["enabled"]:
        np = one(docs, "NetworkPolicy")
        rules = {r["ports"][0]["port"]: r["from"] for r in np["spec"].get("ingress", [])}
        want_np = {}
        if grpc_on and v["networkPolicy"]["grpcFrom"]:
            want_np[v["grpc"]["port"]] = v["networkPolicy"]["grpcFrom"]
        if metrics_on and v["networkPolicy"]["metricsFrom"]:
            want_np[v["metrics"]["port"]] = v["networkPolicy"]["metricsFrom"]
        check(rules == want_np and np["spec"]["policyTypes"] == ["Ingress"],
              f"NetworkPolicy ingress {rules}, expected {want_np}")
    if grpc_on and tls_on and v["grpc"]["tls"]["certManager"]["enabled"]:
        cert = one(docs, "Certificate")
        secret = v["grpc"]["tls"]["secretName"] or cert["metadata"]["name"][:-len("-grpc")] + "-grpc-tls"
        check(cert["spec"]["secretName"] == secret and
              cert["spec"]["issuerRef"]["name"] == v["grpc"]["tls"]["certManager"]["issuerRef"]["name"],
              f"Certificate {cert['spec']}")
    check(spec_of(docs).get("securityContext", {}) == v["podSecurityContext"],
          "pod securityContext does not follow podSecurityContext")

    ds = one(docs, "DaemonSet")
    pod = ds["spec"]["template"]
    spec = pod["spec"]
    ctr = [c for c in spec["containers"] if c["name"] == "flowclassd"]
    check(len(ctr) == 1, "DaemonSet has no container flowclassd")
    c = ctr[0]
    check(ds["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(),
          "DaemonSet selector does not match its pod labels")

    # ---- resources: requests == limits, exactly what the values ask ------
    res = c.get("resources", {})
    check(res.get("requests") == res.get("limits"),
          f"requests {res.get('requests')} != limits {res.get('limits')} (not Guaranteed QoS)")
    want_res = {"cpu": str(v["resources"]["cpu"]), "memory": str(v["resources"]["memory"])}
    if hp["enabled"]:
        want_res["hugepages-" + hp["pageSize"]] = hp["amount"]
    if v["sriov"]["count"] > 0:
        want_res[v["sriov"]["resourceName"]] = str(v["sriov"]["count"])
    for r in v["sriov"].get("extraResources", []):
        want_res[r["resourceName"]] = str(r["count"])
    got_res = {k: str(x) for k, x in (res.get("limits") or {}).items()}
    check(got_res == want_res, f"resources {got_res}, expected {want_res}")
    check(re.fullmatch(r"[0-9]+", str(res.get("limits", {}).get("cpu", ""))) is not None,
          "cpu is not a whole number (no exclusive cores)")

    # ---- scheduling -------------------------------------------------------
    check(spec.get("nodeSelector") == (v["nodeSelector"] or None), "nodeSelector differs from values")
    check(spec.get("tolerations") == (v["tolerations"] or None), "tolerations differ from values")
    check(spec.get("affinity") == (v["affinity"] or None), "affinity differs from values")
    check(ds["spec"]["updateStrategy"].get("rollingUpdate", {}).get("maxSurge", 0) == 0,
          "DaemonSet maxSurge must be 0 (VFs, hugepages and CPUs are exclusive)")

    # ---- Multus ---------------------------------------------------------
    ann = pod["metadata"].get("annotations", {})
    nets = v["sriov"]["networks"]
    if not nets:
        check("k8s.v1.cni.cncf.io/networks" not in ann, "networks annotation without sriov.networks")
    elif all(isinstance(n, str) for n in nets):
        check(ann.get("k8s.v1.cni.cncf.io/networks") == ", ".join(nets),
              f"networks annotation {ann.get('k8s.v1.cni.cncf.io/networks')!r}")
    else:
        def short_form(n):  # "[namespace/]name[@interface]", as Multus reads it
            o = {}
            if "@" in n:
                n, o["interface"] = n.split("@", 1)
            if "/" in n:
                o["namespace"], n = n.split("/", 1)
            o["name"] = n
            return o
        want_nets = [n if isinstance(n, dict) else short_form(n) for n in nets]
        got = ann.get("k8s.v1.cni.cncf.io/networks")
        check(got is not None and json.loads(got) == want_nets, f"networks annotation {got!r}")
    check("checksum/config" in ann, "no checksum/config annotation (pods would not roll on config change)")

    # ---- security -------------------------------------------------------
    sc = c.get("securityContext", {})
    if v["securityContext"]["privileged"]:
        check(sc.get("privileged") is True, "privileged opt-in not rendered")
    else:
        check(sc.get("privileged") is False, "container must not be privileged by default")
        check(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation not false")
        caps = sc.get("capabilities", {})
        check(caps.get("drop") == ["ALL"], f"capabilities.drop {caps.get('drop')}")
        check(sorted(caps.get("add", [])) == sorted(v["securityContext"]["capabilities"]),
              f"capabilities.add {caps.get('add')}")
        # What DPDK with vfio-pci needs (values.yaml explains each); every
        # test value set keeps them.
        for cap in ("IPC_LOCK", "SYS_NICE", "SYS_RAWIO", "NET_ADMIN"):
            check(cap in caps.get("add", []), f"capability {cap} missing (DPDK needs it)")
    check(sc.get("readOnlyRootFilesystem") == v["securityContext"]["readOnlyRootFilesystem"],
          "readOnlyRootFilesystem differs")

    # ---- volumes --------------------------------------------------------
    vols = {x["name"]: x for x in spec.get("volumes", [])}
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    check(set(vols) == set(mounts), f"volumes {sorted(vols)} vs mounts {sorted(mounts)}")
    if hp["enabled"]:
        check(vols.get("hugepages", {}).get("emptyDir", {}).get("medium") == "HugePages-" + hp["pageSize"],
              f"hugepages volume {vols.get('hugepages')}")
        check(mounts.get("hugepages", {}).get("mountPath") == hp["mountPath"], "hugepages mountPath")
    else:
        check("hugepages" not in vols, "hugepages volume without hugepages.enabled")
    if grpc_on and tls_on:
        secret = v["grpc"]["tls"]["secretName"] or ds["metadata"]["name"] + "-grpc-tls"
        check(vols.get("grpc-tls", {}).get("secret", {}).get("secretName") == secret,
              f"TLS secret volume {vols.get('grpc-tls')}, expected secret {secret}")
        check(mounts.get("grpc-tls", {}).get("mountPath") == v["grpc"]["tls"]["mountPath"], "TLS mountPath")
    else:
        check("grpc-tls" not in vols, "TLS volume although TLS is off")
    check(mounts.get("config", {}).get("mountPath") == "/etc/flowclass", "config not at /etc/flowclass")
    for m in mounts.values():
        if m["name"] != "config":
            check(not m["mountPath"].startswith("/etc/flowclass/"),
                  f"{m['name']} mounted inside the ConfigMap volume")

    # ---- rolling updates and the rule store ------------------------------
    check(ds["spec"].get("minReadySeconds") == v["minReadySeconds"],
          f"minReadySeconds {ds['spec'].get('minReadySeconds')}")
    st = v["store"]
    if st["hostPath"]:
        hp_vol = vols.get("rule-store", {}).get("hostPath", {})
        check(hp_vol == {"path": st["hostPath"], "type": "DirectoryOrCreate"},
              f"rule-store volume {vols.get('rule-store')}")
        check(mounts.get("rule-store", {}).get("mountPath") == st["mountPath"],
              f"rule-store mount {mounts.get('rule-store')}")
        check(not mounts["rule-store"].get("readOnly"), "rule-store mounted read-only")
    else:
        check("rule-store" not in vols and "rule-store" not in mounts,
              "rule-store volume although store.hostPath is empty")

    # ---- ports and probes -----------------------------------------------
    cports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    want_ports = {}
    if grpc_on:
        want_ports["grpc"] = v["grpc"]["port"]
    if metrics_on:
        want_ports["metrics"] = v["metrics"]["port"]
    check(cports == want_ports, f"containerPorts {cports}, expected {want_ports}")
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        p = c.get(kind)
        if metrics_on:
            # flowclassd's own HTTP probes: /readyz tells readiness (rules
            # restored, PMDs running them), /healthz liveness (no stalled PMD).
            path = "/readyz" if kind == "readinessProbe" else "/healthz"
            check(p and p.get("httpGet") == {"path": path, "port": "metrics"},
                  f"{kind}: {p}: expected httpGet {path} on the metrics port")
        elif grpc_on and not tls_on:
            check(p and p.get("grpc", {}).get("port") == v["grpc"]["port"], f"{kind}: {p} is not a gRPC probe")
            if kind == "readinessProbe":
                check(p and p["grpc"].get("service") == "flowclass.v1.ClassifierService",
                      f"readiness probes service {p and p['grpc'].get('service')}")
        elif grpc_on:
            check(p and "grpc" not in p and p.get("tcpSocket", {}).get("port") == "grpc",
                  f"{kind}: {p}: with TLS a TCP probe on the gRPC port (kubelet gRPC probes cannot do TLS)")
        else:
            check(p is None, f"{kind} although nothing listens")
        if p:
            timing = v["probes"][kind.replace("Probe", "")]
            check({k: p.get(k) for k in timing} == timing, f"{kind} timings differ from values")

    # ---- entrypoint and its environment ----------------------------------
    check(c.get("command") == ["/bin/sh", "/etc/flowclass/entrypoint.sh"], f"command {c.get('command')}")
    check(c.get("args", []) == v["extraArgs"], f"args {c.get('args')} vs extraArgs")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    vf_ports = []
    for i, p in enumerate(v["ports"]):
        if "vf" in p:
            vf_ports.append(f"{i}:{pci_env_name(p.get('resource') or v['sriov']['resourceName'])}:{p['vf']}")
    check(env.get("FLOWCLASS_VF_PORTS") == " ".join(vf_ports),
          f"FLOWCLASS_VF_PORTS {env.get('FLOWCLASS_VF_PORTS')!r}, expected {' '.join(vf_ports)!r}")
    auto = "lcores" not in (v["config"].get("pmd") or {})
    check(env.get("FLOWCLASS_LCORES") == ("auto" if auto else ""), f"FLOWCLASS_LCORES {env.get('FLOWCLASS_LCORES')!r}")
    check(env.get("FLOWCLASS_PMD_COUNT") == str(v["resources"]["cpu"] - 1), "FLOWCLASS_PMD_COUNT")
    check(env.get("FLOWCLASS_CONFIG") == "/etc/flowclass/flowclassd.yaml", "FLOWCLASS_CONFIG")
    with open(os.path.join(outdir, "env.sh"), "w") as f:
        for k, x in env.items():
            f.write(f"export {k}={shlex.quote(x or '')}\n")
    with open(os.path.join(outdir, "args"), "w") as f:
        f.write("\n".join(c.get("args", [])) + ("\n" if c.get("args") else ""))

    # ---- the ConfigMap: flowclassd.yaml, entrypoint.sh, rules.txt ---------
    cm = one(docs, "ConfigMap", ds["metadata"]["name"])
    check(vols.get("config", {}).get("configMap", {}).get("name") == cm["metadata"]["name"],
          "config volume does not name the ConfigMap")
    data = cm.get("data", {})
    entry = open(os.path.join(chart, "files", "entrypoint.sh")).read()
    check(data.get("entrypoint.sh") == entry, "entrypoint.sh in the ConfigMap differs from files/entrypoint.sh")
    for key in ("flowclassd.yaml", "entrypoint.sh", "rules.txt"):
        if key in data:
            with open(os.path.join(outdir, key), "w") as f:
                f.write(data[key])
    cfg = yaml.safe_load(data.get("flowclassd.yaml", ""))
    check(isinstance(cfg, dict), "flowclassd.yaml is not a mapping")
    cfg = cfg or {}
    check(set(cfg) <= {"eal", "pmd", "mempool", "ports", "rules", "stats", "log", "grpc",
                      "metrics", "pipeline", "dpcls", "store"},
          f"unexpected top-level config keys {sorted(cfg)}")
    check("run" not in cfg, "run: in a DaemonSet's config")
    if v["store"]["enabled"]:
        check(cfg.get("store", {}).get("path") == v["store"]["mountPath"],
              f"store.path {cfg.get('store')}, expected {v['store']['mountPath']}")
    else:
        check("path" not in (cfg.get("store") or {}), f"store.path {cfg.get('store')} although store.enabled is false")
    eal = cfg.get("eal", {})
    check(eal.get("hugepages") is hp["enabled"], f"eal.hugepages {eal.get('hugepages')}")
    for k, x in (v["config"].get("eal") or {}).items():
        check(eal.get(k) == x, f"eal.{k} {eal.get(k)!r}, values say {x!r}")
    for sec in ("pmd", "mempool", "stats"):
        for k, x in (v["config"].get(sec) or {}).items():
            got = cfg.get(sec, {}).get(k)
            check(got == x and type(got) is type(x), f"{sec}.{k} {got!r}, values say {x!r}")
    ports = cfg.get("ports", [])
    check(len(ports) == len(v["ports"]), "ports count")
    for i, (got, p) in enumerate(zip(ports, v["ports"])):
        want = {k: x for k, x in p.items() if k not in ("vf", "resource")}
        if "vf" in p:
            want["device"] = f"@vf:{p.get('resource') or v['sriov']['resourceName']}:{p['vf']}"
        check(got == want, f"ports[{i}] {got}, expected {want}")
    g = cfg.get("grpc")
    if grpc_on:
        check(g is not None and g.get("address") == v["grpc"]["bindAddress"] and g.get("port") == v["grpc"]["port"],
              f"grpc address/port {g}")
        g = g or {}
        for k, x in (v["config"].get("grpc") or {}).items():
            check(g.get(k) == x and type(g.get(k)) is int, f"grpc.{k} {g.get(k)!r}, values say {x!r}")
        if tls_on:
            mp = v["grpc"]["tls"]["mountPath"]
            check(g.get("tls_cert_file") == mp + "/tls.crt" and g.get("tls_key_file") == mp + "/tls.key",
                  f"TLS files {g}")
            check("plaintext" not in g and "allow_plaintext_remote" not in g, "plaintext keys with TLS on")
            if v["grpc"]["tls"]["requireClientCert"]:
                check(g.get("require_client_cert") is True and g.get("tls_ca_file") == mp + "/ca.crt", "mTLS keys")
            else:
                check(g.get("require_client_cert") is False and "tls_ca_file" not in g,
                      "TLS without client certificates must say require_client_cert: false")
            a, va = g.get("auth") or {}, v["grpc"].get("auth") or {}
            if va.get("disabled"):
                check(a == {"disabled": True}, f"grpc.auth {a}, values say disabled")
            else:
                check(a.get("admin", []) == (va.get("admin") or []) and
                      a.get("reader", []) == (va.get("reader") or []) and
                      ("token_file" in a) == bool(va.get("tokenSecretName")) and a,
                      f"grpc.auth {a} does not follow the values {va}")
        else:
            check(g.get("plaintext") is True and g.get("allow_plaintext_remote") is True,
                  "plaintext must be explicit (plaintext, allow_plaintext_remote)")
            check(not any(k.startswith("tls_") for k in g), "TLS files with TLS off")
            check(g.get("auth") == {"disabled": True},
                  "plaintext on the pod network must render grpc.auth.disabled: true")
    else:
        check(g is None, "grpc section although grpc.enabled is false")
    m = cfg.get("metrics", {})
    host = v["metrics"]["bindAddress"]
    host = f"[{host}]" if ":" in host else host
    check(m.get("enabled") is metrics_on, "metrics.enabled")
    check(m.get("address") == f"{host}:{v['metrics']['port']}", f"metrics.address {m.get('address')}")
    check(m.get("address", "").split(":")[0] not in ("127.0.0.1", "localhost", "[::1]"),
          "metrics listen on loopback: Prometheus cannot scrape")
    if v["rules"]["text"]:
        check(data.get("rules.txt", "").rstrip("\n") == v["rules"]["text"].rstrip("\n"), "rules.txt")
        check(cfg.get("rules", {}).get("file") == "/etc/flowclass/rules.txt", "rules.file")
    else:
        check("rules.txt" not in data, "rules.txt without rules.text")

    # ---- Service --------------------------------------------------------
    svcs = by_kind(docs, "Service")
    if svcs:
        svc = svcs[0]
        check(svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items(),
              "Service selector does not match the pods")
        check((svc["spec"].get("clusterIP") == "None") == v["service"]["headless"], "headless")
        sports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
        check(sports == {k: (x, k) for k, x in want_ports.items()}, f"Service ports {sports}")
        check(svc["metadata"]["labels"].get("flowclass.io/prometheus-job") == "flowclassd",
              "Service lacks the job label the ServiceMonitor uses")

    # ---- prometheus-operator, Grafana -----------------------------------
    if v["serviceMonitor"]["enabled"]:
        sm = one(docs, "ServiceMonitor")
        svc = svcs[0]
        check(sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(),
              "ServiceMonitor selector does not match the Service")
        check(svc["metadata"]["labels"].get(sm["spec"].get("jobLabel")) == "flowclassd",
              "ServiceMonitor job is not flowclassd (FlowclassdDown matches up{job=\"flowclassd\"})")
        ep = sm["spec"]["endpoints"][0]
        check(ep["port"] == "metrics" and ep["interval"] == v["serviceMonitor"]["interval"], f"endpoint {ep}")
        check(sm["metadata"]["labels"].items() >= v["serviceMonitor"]["labels"].items(), "ServiceMonitor labels")
    alerts = yaml.safe_load(open(os.path.join(src, "deploy", "prometheus", "flowclass_alerts.yml")))
    if v["prometheusRule"]["enabled"]:
        pr = one(docs, "PrometheusRule")
        check(pr.get("spec", {}).get("groups") == alerts["groups"],
              "PrometheusRule groups differ from deploy/prometheus/flowclass_alerts.yml")
        check(pr["metadata"]["labels"].items() >= v["prometheusRule"]["labels"].items(), "PrometheusRule labels")
        exprs = [r.get("expr", "") for grp in alerts["groups"] for r in grp["rules"]]
        check(any('job="flowclassd"' in e for e in exprs), "alerts no longer select job=\"flowclassd\"")
    if v["grafanaDashboard"]["enabled"]:
        dash = [d for d in by_kind(docs, "ConfigMap") if "flowclass.json" in d.get("data", {})]
        check(len(dash) == 1, "no dashboard ConfigMap")
        if dash:
            raw = open(os.path.join(src, "deploy", "grafana", "flowclass.json")).read()
            check(dash[0]["data"]["flowclass.json"].rstrip("\n") == raw.rstrip("\n"),
                  "dashboard differs from deploy/grafana/flowclass.json")
            check(json.loads(dash[0]["data"]["flowclass.json"]).get("uid") == "flowclass-overview", "dashboard uid")
            check(dash[0]["metadata"]["labels"].items() >= v["grafanaDashboard"]["labels"].items(),
                  "dashboard sidecar labels")


def documented_keys(src):
    """Config keys per section as docs/flowclassd.md lists them."""
    text = open(os.path.join(src, "docs", "flowclassd.md")).read()
    keys = {}
    for sec, key in re.findall(r"^\| `(eal|pmd|mempool|rules|stats|run|log|metrics|pipeline|dpcls)\.([a-z_]+)(?:\.NAME)?` \|", text, re.M):
        keys.setdefault(sec, set()).add(key)
    keys.get("dpcls", set()).discard("lookup_available")  # read-only: not in a config file
    ports = re.search(r"^### `ports`.*?\n(.*?)^### ", text, re.M | re.S).group(1)
    keys["ports"] = set(re.findall(r"^\| `([a-z_]+)` \|", ports, re.M))
    grpc = re.search(r"^### `grpc`.*?\n(.*?)^### ", text, re.M | re.S).group(1)
    listed = re.search(r"Keys \((.*?)\)", grpc, re.S).group(1)
    keys["grpc"] = set(re.findall(r"`([a-z_]+)`", listed)) | {"enabled"}  # enabled: docs/api.md
    return keys


def spec_of(docs):
    return one(docs, "DaemonSet")["spec"]["template"]["spec"]


def check_drift(src):
    chart = os.path.join(src, "helm", "flowclass")
    schema = json.load(open(os.path.join(chart, "values.schema.json")))
    cfg = schema["properties"]["config"]["properties"]
    owned = {  # keys the chart sets itself (values.yaml, `config:` comment)
        "eal": {"hugepages"},
        "grpc": {"enabled", "address", "port", "plaintext", "allow_plaintext_remote",
                 "tls_cert_file", "tls_key_file", "tls_ca_file", "require_client_cert", "auth"},
        "metrics": {"enabled", "address"},
    }
    docs = documented_keys(src)
    check(len(docs.get("eal", ())) >= 8 and len(docs.get("ports", ())) >= 9 and len(docs.get("grpc", ())) >= 11,
          f"docs/flowclassd.md key tables not found as expected: {docs}")
    for sec, keys in docs.items():
        if sec == "run":
            check(sec not in cfg, "config.run in the schema (a DaemonSet pod must not stop by itself)")
            continue
        if sec == "ports":
            schema_keys = set(schema["properties"]["ports"]["items"]["properties"]) - {"vf", "resource"}
        else:
            schema_keys = set(cfg.get(sec, {}).get("properties", {}))
        check(schema_keys | owned.get(sec, set()) == keys,
              f"{sec}: schema {sorted(schema_keys)} + chart-owned {sorted(owned.get(sec, ()))}"
              f" != docs/flowclassd.md {sorted(keys)}")
        check(not (schema_keys & owned.get(sec, set())), f"{sec}: chart-owned keys settable in config")
    cm = open(os.path.join(src, "CMakeLists.txt")).read()
    ver = re.search(r"project\(flowclass VERSION ([0-9.]+)", cm).group(1)
    app = yaml.safe_load(open(os.path.join(chart, "Chart.yaml")))["appVersion"]
    check(str(app) == ver, f"Chart.yaml appVersion {app} != project VERSION {ver} in CMakeLists.txt")


def check_package(src, tgz):
    with tarfile.open(tgz) as tar:
        names = tar.getnames()
        for inside, source in (("flowclass/files/flowclass_alerts.yml", "deploy/prometheus/flowclass_alerts.yml"),
                               ("flowclass/files/flowclass.json", "deploy/grafana/flowclass.json")):
            if not check(inside in names, f"{inside} missing from the packaged chart"):
                continue
            member = tar.getmember(inside)
            check(member.isfile(), f"{inside} is not a regular file in the package")
            got = tar.extractfile(member).read() if member.isfile() else b""
            check(got == open(os.path.join(src, source), "rb").read(), f"packaged {inside} differs from {source}")


def main(argv):
    mode = argv[1]
    if mode == "manifests":
        check_manifests(argv[2], argv[3], argv[4] if len(argv) > 4 else None)
    elif mode == "drift":
        check_drift(argv[2])
    elif mode == "package":
        check_package(argv[2], argv[3])
    else:
        sys.exit(f"unknown mode {mode}")
    for f in failures:
        print(f"  FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
