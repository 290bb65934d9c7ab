#!/usr/bin/env python3
"""peer_bench.py — flowclassd beside OVS-DPDK and dpdk-testpmd, same pcaps.

Each system is started here, fed the same pcap on a net_pcap rx port
(infinite_rx=1) with one PMD on CPU PMD_CPU, forwards to a net_pcap tx port
writing /dev/null, and is stopped by its PID.  Rounds interleave the
systems; the tables show medians (this VM drifts +-20-30 % between runs, so
only ratios from one run mean anything).  README.md beside this file has the
scenarios, the systems, what each row verifies and how to rerun.

  tests/bench/peer/peer_bench.py [--build BUILD] [--out DIR] [--scenarios rfc,emc]
                                 [--ks 1,10,20,30] [--streams 100,...,11000]
                                 [--rounds 3] [--seconds 5]

Writes DIR/results.csv (every run), DIR/summary.md (medians, ratios) and
DIR/peer.png (Mpps by K); exits non-zero when any run fails or a system
does not hold the number of megaflow masks / subtables its row claims.
"""
import argparse
import csv
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import gen_pcap  # noqa: E402  (the repository's frame packer)

OVS_VSWITCHD = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
# OVS replays at most this many distinct packets from one rx port: its
# shared pool has 262,144 mbufs and infinite_rx holds the whole pcap in it.
RFC_FLOWS = 262112
# rfc1m: RFC_FLOWS on each of this many rx ports, ~1M flows.
RFC1M_PORTS = 4
# OVS's default datapath flow limit (other_config:flow-limit).
OVS_FLOW_LIMIT = 200000
SYSTEMS = ["testpmd", "ovs_smc", "ovs_default", "fc_default", "fc_smc"]


def die(msg):
    sys.exit("peer_bench: " + msg)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- workloads

def rfc_prefix(j):
    """Rule j's nw_src prefix: length 32-j, (length-1) one bits then a zero,
    so the K prefixes are disjoint and every packet matches exactly one."""
    length = 32 - j
    value = ((1 << (length - 1)) - 1) << (33 - length) if length > 1 else 0
    return value & 0xFFFFFFFF, length


def ip_text(v):
    return ".".join(str((v >> s) & 255) for s in (24, 16, 8, 0))


def rfc_rules(k, rx_ports=1):
    """K rules nw_src=P_j/(32-j); the shorter prefix has the higher priority
    (so a packet of rule j un-wildcards 32-j bits: exactly K megaflow masks).
    The same text for both systems: {"fc": [...], "ovs": [...]}, each a
    flow without its actions (output:2).  With more rx ports, the K rules
    for each in_port 1..rx_ports, output to the tx port after them."""
    rules = []
    for port in range(1, rx_ports + 1):
        for j in range(k):
            p, length = rfc_prefix(j)
            rules.append("priority=%d,in_port=%d,udp,nw_src=%s/%d" % (1000 + j, port, ip_text(p),
                                                                     length) +
                         (",actions=output:%d" % (rx_ports + 1) if rx_ports > 1 else ""))
    return {"fc": rules, "ovs": rules}


def port_prefixes(lo, hi):
    """The fewest value/mask pairs covering lo..hi (16-bit), for OVS, which
    has no port ranges."""
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << 16
        while size > hi - lo + 1:
            size //= 2
        out.append((lo, (0xFFFF ^ (size - 1)) & 0xFFFF))
        lo += size
    return out


def classbench_case(path, packets, seed=1):
    """A ClassBench set (scripts/classbench_acl.py reads it) as rules for both
    systems, first match first, and `packets` random points inside random
    rules (TCP and UDP only) as frames.  flowclassd gets the port ranges as
    they are; OVS gets each range as its prefixes, and a rule with ports
    under any protocol as a tcp and a udp flow (the traffic is TCP and UDP
    only), as tests/e2e/ovs_differential_test.cc translates them."""
    import random
    import classbench_acl
    rules = classbench_acl.read_rules(path)
    fc, ovs = [], []
    n = len(rules)
    for i, (src, slen, dst, dlen, splo, sphi, dplo, dphi, proto, pmask) in enumerate(rules):
        prio = n - i + 1
        if pmask == 0xFF:
            protos = ["ip,nw_proto=%d" % proto] if proto not in (6, 17) else [
                "tcp" if proto == 6 else "udp"]
        elif pmask == 0:
            full = (splo, sphi, dplo, dphi) == (0, 65535, 0, 65535)
            protos = ["ip"] if full else ["tcp", "udp"]
        else:
            die("%s: rule %d: protocol mask 0x%02x is neither exact nor any" % (path, i + 1, pmask))
        base = "in_port=1,%%s,nw_src=%s/%d,nw_dst=%s/%d" % (ip_text(src), slen, ip_text(dst), dlen)
        for pr in protos:
            has_ports = pr in ("tcp", "udp")
            m = "priority=%d," % prio + base % pr
            fc.append(m + (",tp_src=%d-%d,tp_dst=%d-%d" % (splo, sphi, dplo, dphi)
                           if has_ports else ""))
            if not has_ports:
                ovs.append(m)
                continue
            for sv, sm in port_prefixes(splo, sphi):
                for dv, dm in port_prefixes(dplo, dphi):
                    ovs.append(m + ",tp_src=0x%04x/0x%04x,tp_dst=0x%04x/0x%04x" % (sv, sm, dv, dm))
    rng = random.Random(seed)
    frames = []
    while len(frames) < packets:
        src, slen, dst, dlen, splo, sphi, dplo, dphi, proto, pmask = rng.choice(rules)
        p = proto if pmask == 0xFF else rng.choice((6, 17))
        if p not in (6, 17):
            continue
        frames.append(gen_pcap.frame(classbench_acl.point(rng, src, slen),
                                     classbench_acl.point(rng, dst, dlen), p,
                                     rng.randint(splo, sphi), rng.randint(dplo, dphi)))
    return {"fc": fc, "ovs": ovs}, frames


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for fr in frames:
            f.write(struct.pack("<IIII", 0, 0, len(fr), len(fr)))
            f.write(fr)


def rfc_pcap(path, k, flows, seed=1, first=0):
    """`flows` distinct UDP flows spread evenly over the K rules: flow i has
    a random source inside rule (i mod K)'s prefix and destination
    172.16.0.0 + first + i (so every 5-tuple differs)."""
    import random
    rnd = random.Random(seed)
    frames = []
    for i in range(flows):
        p, length = rfc_prefix(i % k)
        host_bits = 32 - length
        src = p | (rnd.getrandbits(host_bits) if host_bits else 0)
        dst = 0xAC100000 + first + i
        frames.append(gen_pcap.frame(src, dst, 17, 1024 + rnd.randrange(60000),
                                     1024 + rnd.randrange(60000)))
    write_pcap(path, frames)


ETH_DST = 0x020000000002  # gen_pcap.frame's destination MAC
ETHMASK_RULES = 255
ETHMASK_PACKETS = 65536


def mac_text(v):
    return ":".join("%02x" % ((v >> s) & 255) for s in range(40, -8, -8))


def ethmask_rules(masks):
    """255 rules, rule j for destination 10.0.j.1 with dl_dst=ETH_DST/M_j,
    M_j = ff:ff:ff:ff:ff:jj (`masks` 255: 255 masks) or ff:ff:ff:ff:ff:00
    for every j (`masks` 1).  Every low byte stays below ff, so flowclassd
    relaxes every rule's table mask to the same 32-bit dl_dst prefix: one
    rule-table subtable, one bucket per destination, and a megaflow is its
    rule's whole mask.

    OVS gets the same classification in two tables: table 0 maps nw_dst to
    reg0 = j, table 1 matches reg0=j,dl_dst=ETH_DST/M_j.  In one table its
    classifier would visit every subtable of higher priority, miss it in the
    dl_dst stage and fold that subtable's dl_dst mask into the megaflow: the
    megaflow masks would be unions along the visiting order, at most 49
    distinct over 48 bits whatever the rules.  reg0 is in the metadata stage,
    so in table 1 a packet misses every other subtable on reg0 alone, and a
    register is not a datapath field: the megaflow is in_port, eth_type,
    nw_dst and dl_dst/M_j, one mask per rule in both systems."""
    fc, ovs = [], []
    for j in range(ETHMASK_RULES):
        mask = 0xFFFFFFFFFF00 | (j if masks > 1 else 0)
        dl = "dl_dst=%s/%s" % (mac_text(ETH_DST & mask), mac_text(mask))
        dst = "10.0.%d.1" % j
        fc.append("priority=1000,in_port=1,ip,nw_dst=%s,%s" % (dst, dl))
        ovs.append("priority=1000,in_port=1,ip,nw_dst=%s,actions=load:%d->NXM_NX_REG0[],"
                   "resubmit(,1)" % (dst, j))
        ovs.append("table=1,priority=1000,reg0=%d,%s,actions=output:2" % (j, dl))
    return {"fc": fc, "ovs": ovs}


def ethmask_pcap(path, packets=ETHMASK_PACKETS):
    """One flow (to 10.0.254.1, the last rule's) in every packet but the
    first 254 of each pass over the pcap, which go one to each other rule's
    destination: they install the other 254 megaflows (one per mask with
    255 masks) and keep them used, at 254 / `packets` of the traffic."""
    frames = [gen_pcap.frame(0x0A640001, 0x0A000001 | (j << 8), 17, 1024, 2048)
              for j in range(ETHMASK_RULES - 1)]
    main = gen_pcap.frame(0x0A640001, 0x0A000001 | ((ETHMASK_RULES - 1) << 8), 17, 1024, 2048)
    frames += [main] * (packets - len(frames))
    write_pcap(path, frames)


def newflow_rules(nflows):
    """One exact nw_dst rule per flow of rfc_pcap(K=1): the winner's whole
    mask is the megaflow in both systems (nw_dst exact), so every flow is a
    megaflow of its own and every first packet of a flow an upcall."""
    rules = ["priority=1000,in_port=1,udp,nw_dst=%s" % ip_text(0xAC100000 + i)
             for i in range(nflows)]
    return {"fc": rules, "ovs": rules}


# ------------------------------------------------------------------ systems

class Proc:
    """A child process with its output in a file; stopped by PID."""

    def __init__(self, argv, log, env=None):
        self.log = log
        self.f = open(log, "w")
        self.p = subprocess.Popen(argv, stdout=self.f, stderr=subprocess.STDOUT, env=env,
                                  start_new_session=True)

    def alive(self):
        return self.p.poll() is None

    def stop(self, sig=signal.SIGTERM, wait=20):
        if self.alive():
            self.p.send_signal(sig)
            try:
                self.p.wait(wait)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.f.close()
        return self.p.returncode

    def output(self):
        with open(self.log, errors="replace") as f:
            return f.read()


def wait_for(cond, timeout, what):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if cond():
            return
        time.sleep(0.2)
    raise RuntimeError("timed out after %d s waiting for %s" % (timeout, what))


def layer_shares(emc, smc, cd, megaflow, upcall, lookups):
    """Each layer's share of the packets classified, and dpcls subtable
    lookups per dpcls hit (the megaflow and CD layers), as one CSV field."""
    n = emc + smc + cd + megaflow + upcall
    if not n:
        return ""
    hits = cd + megaflow
    return ("emc %.2f smc %.2f cd %.2f dpcls %.2f upcall %.2f lookups/hit %s" %
            (emc / n, smc / n, cd / n, megaflow / n, upcall / n,
             "%.2f" % (lookups / hits) if hits else "-"))


def rx_pcaps(pcap, opts):
    """The rx ports' pcaps: `pcap`, or with opts["rx_ports"] N > 1 the N
    files pcap.0 .. pcap.N-1 (in_port 1..N; the tx port is N+1)."""
    n = opts.get("rx_ports", 1)
    return [pcap] if n == 1 else ["%s.%d" % (pcap, i) for i in range(n)]


def rule_line(match):
    """A rule of the rules text as a flow line: output:2 unless it has its
    own actions (ethmask's OVS table 0)."""
    return match + ("\n" if "actions=" in match else ",actions=output:2\n")


def new_flows(snaps, hz, held, nflows):
    """The new-flow rate of one pass over `nflows` new flows, from counter
    snapshots taken during the pass (oldest first, the last after it), each
    {"rx", "busy", "ok", "failed"} (packets received, the PMD's busy cycles:
    iterations that received packets, upcalls that installed a megaflow,
    upcalls that did not).  Timed by the busy cycles, so neither the start
    nor the idle polling after the pass counts.  The window is the whole
    pass, or, after failed upcalls (OVS's first packets can come before its
    bridge knows their port), from the first snapshot after the last one.
    Refused unless every packet was an upcall, none in the window failed to
    install its megaflow, the window holds half of the flows or more, and
    the system still holds every megaflow it installed.  (A snapshot may
    count a burst received whose upcalls are not counted yet: the rate is
    of the upcalls in the window.)"""
    last = snaps[-1]
    first = dict.fromkeys(last, 0)
    if last["failed"]:
        first = next((x for x in snaps if x["rx"] and x["failed"] == last["failed"]), last)
    d = {key: last[key] - first[key] for key in last}
    why = []
    if last["rx"] != nflows or last["ok"] + last["failed"] != last["rx"]:
        why.append("%d of %d packets received, %d upcalls ok, %d failed"
                   % (last["rx"], nflows, last["ok"], last["failed"]))
    if d["failed"]:
        why.append("%d upcalls in the window failed" % d["failed"])
    if d["ok"] < nflows / 2:
        why.append("a window of %d upcalls, less than half the flows" % d["ok"])
    if held < last["ok"]:
        why.append("%d megaflows held of %d installed" % (held, last["ok"]))
    if not (d["busy"] and hz):
        why.append("no busy cycles or TSC rate to time the upcalls by")
    if why:
        raise RuntimeError("not one megaflow per packet: " + "; ".join(why))
    return {"mpps": d["ok"] * hz / d["busy"] / 1e6,
            "cycles_per_pkt": "%.0f" % (d["busy"] / d["ok"]),
            "layers": "new flows %d timed of %d, upcalls ok %d failed %d, megaflows %d, "
                      "TSC %.3f GHz" % (d["ok"], nflows, last["ok"], last["failed"], held,
                                        hz / 1e9)}


class Bench:
    def __init__(self, args):
        self.a = args
        self.build = os.path.abspath(args.build)
        self.work = tempfile.mkdtemp(prefix="peer_bench.")
        self.tag = "peer%d" % os.getpid()

    def cleanup(self):
        shutil.rmtree(self.work, ignore_errors=True)
        for d in ("/var/run/dpdk",):
            for n in os.listdir(d) if os.path.isdir(d) else []:
                if n.startswith(self.tag):
                    shutil.rmtree(os.path.join(d, n), ignore_errors=True)

    # -- dpdk-testpmd: io forwarding, the I/O ceiling
    def run_testpmd(self, pcap, nflows, k):
        mbufs = nflows + 16384
        p = Proc([shutil.which("dpdk-testpmd"), "--no-huge", "-m", "2048", "--no-pci",
                  "--file-prefix=%s_tp" % self.tag, "--lcores=0@0,1@%d" % self.a.pmd_cpu,
                  "--log-level=error",
                  "--vdev=net_pcap0,rx_pcap=%s,infinite_rx=1" % pcap,
                  "--vdev=net_pcap1,tx_pcap=/dev/null", "--", "--forward-mode=io",
                  "--total-num-mbufs=%d" % mbufs, "--mbuf-size=512", "--stats-period=1",
                  "--nb-cores=1"], os.path.join(self.work, "testpmd.log"))
        # Its per-second prints reach the file in 4 KB blocks: wait until one
        # shows traffic, then for the warm-up and the window (and a block more).
        forwarding = re.compile(r"Rx-pps:\s+[1-9]")
        try:
            wait_for(lambda: forwarding.search(p.output()) or not p.alive(), 120,
                     "testpmd to forward")
            time.sleep(self.a.warmup + self.a.seconds + 3)
        finally:
            p.stop(signal.SIGINT)
        pps = [int(x) for x in re.findall(r"NIC statistics for port 0.*?Rx-pps:\s+(\d+)",
                                          p.output(), re.S)]
        pps = [x for x in pps if x > 0][-self.a.seconds:]
        if not pps:
            raise RuntimeError("testpmd printed no Rx-pps (see %s)" % p.log)
        return {"mpps": statistics.median(pps) / 1e6, "cycles_per_pkt": "", "masks": "",
                "layers": ""}

    # -- flowclassd
    def run_flowclassd(self, pcap, nflows, k, smc, rules, opts, masks=None):
        port = free_port()
        rfile = os.path.join(self.work, "fc_rules.txt")
        with open(rfile, "w") as f:
            for m in rules["fc"]:
                f.write(rule_line(m))
        cfg = os.path.join(self.work, "fc.yaml")
        once = opts.get("once", False)
        pcaps = rx_pcaps(pcap, opts)
        # infinite_rx keeps the whole pcap in mbufs; read once, it needs none.
        ports = "".join('  - {number: %d, device: net_pcap%d, args: "rx_pcap=%s%s"}\n'
                        % (i + 1, i, f, "" if once else ",infinite_rx=1")
                        for i, f in enumerate(pcaps))
        # fc_default: the daemon's own default (pipeline.smc: auto since
        # 2026-12-07 21:05; until then this wrote smc: off, the old default).
        pipeline = dict(opts.get("fc_pipeline", {}))
        if smc:
            pipeline["smc"] = "on"
        # 1M mbufs of 512 bytes need more than 2 GB.
        memory = 2048 if len(pcaps) == 1 else 3072
        with open(cfg, "w") as f:
            f.write(f"""eal: {{hugepages: false, memory_mb: {memory}, pci: false,
      lcore_map: "0@0,1@{self.a.pmd_cpu}", file_prefix: {self.tag}_fc, log_level: error}}
pmd: {{lcores: [1]}}
mempool: {{mbufs: {(0 if once else nflows) + 16384}, data_room: 512}}
ports:
{ports}  - {{number: {len(pcaps) + 1}, device: net_pcap{len(pcaps)}, args: "tx_pcap=/dev/null", poll: false}}
rules: {{file: {rfile}}}
pipeline: {{{", ".join("%s: %s" % kv for kv in pipeline.items())}}}
stats: {{interval_ms: 0, final: false}}
metrics: {{enabled: true, address: "127.0.0.1:{port}"}}
""")
        p = Proc([os.path.join(self.build, "server", "flowclassd"), "-c", cfg],
                 os.path.join(self.work, "flowclassd.log"))
        url = "http://127.0.0.1:%d/metrics" % port

        def scrape():
            with urllib.request.urlopen(url, timeout=5) as r:
                text = r.read().decode()
            m = {}
            for line in text.splitlines():
                if line.startswith("#"):
                    continue
                mm = re.match(r"(flowclass_[a-z_]+)(\{[^}]*\})? ([0-9.e+]+)$", line)
                if mm:
                    key = mm.group(1) + (mm.group(2) or "")
                    m[key] = float(mm.group(3))
            return m

        def total(m, name, label=""):
            return sum(v for key, v in m.items()
                       if key.split("{")[0] == name and label in key)

        def received():
            if not p.alive():
                raise RuntimeError("flowclassd exited:\n" + p.output()[-2000:])
            try:
                return total(scrape(), "flowclass_pmd_rx_packets_total")
            except OSError:
                return 0

        try:
            wait_for(lambda: received() > 0, 120, "flowclassd to forward")
            if once:
                # Counters from the start; the pass is over when all arrived.
                snaps = []

                def snap():
                    m = scrape()
                    snaps.append({"rx": total(m, "flowclass_pmd_rx_packets_total"),
                                  "busy": total(m, "flowclass_pmd_cycles_total", 'state="busy"'),
                                  "ok": total(m, "flowclass_pmd_packets_total",
                                              'layer="upcall_ok"'),
                                  "failed": total(m, "flowclass_pmd_packets_total",
                                                  'layer="upcall_failed"')})
                    return m

                wait_for(lambda: snap() and snaps[-1]["rx"] >= nflows, 600,
                         "flowclassd to read the pcap")
                time.sleep(0.5)
                m1, t1 = {}, 0
                m2, t2 = snap(), 0
            else:
                if masks:
                    # Past pipeline.rare_mask_subtables subtables a port gets
                    # at most 10 new ones a second (and only popular masks).
                    held = []
                    try:
                        wait_for(lambda: held.append(total(scrape(), "flowclass_pmd_subtables"))
                                 or held[-1] >= masks, 60, "flowclassd to hold %d subtables" % masks)
                    except RuntimeError as e:
                        raise RuntimeError("%s (holds %d)" % (e, held[-1] if held else 0))
                time.sleep(self.a.warmup)
                m1, t1 = scrape(), time.time()
                time.sleep(self.a.seconds)
                m2, t2 = scrape(), time.time()
        finally:
            rc = p.stop()
        if rc not in (0, None):
            raise RuntimeError("flowclassd exit %s:\n%s" % (rc, p.output()[-2000:]))

        def delta(name, label=""):
            return total(m2, name, label) - total(m1, name, label)

        rx = delta("flowclass_pmd_rx_packets_total")
        busy = delta("flowclass_pmd_cycles_total", 'state="busy"')
        layer = {}
        for name in ("emc", "smc", "cd", "megaflow", "upcall_ok", "upcall_failed"):
            layer[name] = delta("flowclass_pmd_packets_total", 'layer="%s"' % name)
        lookups = delta("flowclass_pmd_subtable_lookups_total")
        r = {"mpps": rx / (t2 - t1) / 1e6 if not once else 0.0,
             "cycles_per_pkt": "%.0f" % (busy / rx) if rx and busy else "",
             "masks": int(total(m2, "flowclass_pmd_subtables")),
             "layers": layer_shares(layer["emc"], layer["smc"], layer["cd"],
                                    layer["megaflow"],
                                    layer["upcall_ok"] + layer["upcall_failed"], lookups)}
        if once:
            r.update(new_flows(snaps, total(m2, "flowclass_tsc_hertz"),
                               total(m2, "flowclass_pmd_megaflows"), nflows))
        return r

    # -- OVS-DPDK: ovsdb-server and ovs-vswitchd-dpdk with private dirs
    def run_ovs(self, pcap, nflows, k, smc, rules, opts):
        once = opts.get("once", False)
        pcaps = rx_pcaps(pcap, opts)
        n = len(pcaps)
        d = os.path.join(self.work, "ovs")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d, OVS_SYSCONFDIR=d,
                   OVS_PKGDATADIR="/usr/share/openvswitch")
        db = "unix:" + os.path.join(d, "db.sock")

        def run(*argv, timeout=60):
            r = subprocess.run(list(argv), env=env, capture_output=True, text=True,
                               timeout=timeout)
            if r.returncode != 0:
                raise RuntimeError("%s: %s%s" % (" ".join(argv), r.stdout, r.stderr))
            return r.stdout

        run("ovsdb-tool", "create", os.path.join(d, "conf.db"), OVS_SCHEMA)
        dbs = Proc(["ovsdb-server", os.path.join(d, "conf.db"), "--remote=p" + db,
                    "--unixctl=" + os.path.join(d, "ovsdb.ctl"),
                    "--log-file=" + os.path.join(d, "ovsdb.log")],
                   os.path.join(d, "ovsdb.out"), env)
        vsd = None
        try:
            wait_for(lambda: os.path.exists(os.path.join(d, "db.sock")), 30, "ovsdb-server")
            vsctl = lambda *a: run("ovs-vsctl", "--db=" + db, "--timeout=60", *a)
            vsctl("--no-wait", "init")
            cfg = {"dpdk-init": "true", "dpdk-lcore-mask": "0x1",
                   "pmd-cpu-mask": hex(1 << self.a.pmd_cpu),
                   # Four pools of 262,144 mbufs of 2-5 KB (below) need 6 GB.
                   "dpdk-extra": "--no-huge -m %d --no-pci --legacy-mem "
                                 "--file-prefix=%s_ovs" % (2048 if n == 1 else 6144, self.tag),
                   "emc-insert-inv-prob": "0" if smc else "100",
                   "smc-enable": "true" if smc else "false"}
            vsctl("--no-wait", "set", "Open_vSwitch", ".",
                  *['other_config:%s="%s"' % kv for kv in cfg.items()])
            # Its own network namespace: the bridge's internal port is a tap.
            vsd = Proc(["unshare", "-n", OVS_VSWITCHD, db,
                        "--unixctl=" + os.path.join(d, "vswitchd.ctl"),
                        "--log-file=" + os.path.join(d, "vswitchd.log")],
                       os.path.join(d, "vswitchd.out"), env)
            appctl = lambda *a: run("ovs-appctl", "-t", os.path.join(d, "vswitchd.ctl"), *a)
            wait_for(lambda: os.path.exists(os.path.join(d, "vswitchd.ctl")) or not vsd.alive(),
                     60, "ovs-vswitchd")
            if not vsd.alive():
                raise RuntimeError("ovs-vswitchd exited: " + vsd.output()[-2000:])
            vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")
            # The rules before the ports, so the first packets meet them.
            flows = os.path.join(d, "flows.txt")
            with open(flows, "w") as f:
                for m in rules["ovs"]:
                    f.write(rule_line(m))
            mgmt = "unix:" + os.path.join(d, "br0.mgmt")
            run("ovs-ofctl", "del-flows", mgmt)
            run("ovs-ofctl", "add-flows", mgmt, flows, timeout=600)
            if once:
                # OVS starts its datapath flow limit at 10,000 whatever
                # flow-limit says (the revalidators raise it by 1,000 a dump):
                # past it an upcall installs nothing.  Start it at flow-limit.
                appctl("upcall/set-flow-limit", str(OVS_FLOW_LIMIT))
            vsctl("add-port", "br0", "p%d" % n, "--", "set", "Interface", "p%d" % n, "type=dpdk",
                  "options:dpdk-devargs=net_pcap%d,tx_pcap=/dev/null" % n,
                  "ofport_request=%d" % (n + 1))
            for i, f in enumerate(pcaps):
                # Ports of one MTU share one pool of 262,144 mbufs (MTU 1500
                # or more; 16,384 below), and infinite_rx keeps each port's
                # pcap in it: with several, each gets an MTU of its own 1 KB
                # mbuf size class, so a pool of its own (net_pcap cannot set
                # an MTU; OVS warns and goes on).
                mtu = ["mtu_request=%d" % (1500 + 1000 * i)] if n > 1 else []
                vsctl("add-port", "br0", "p%d" % i, "--", "set", "Interface", "p%d" % i,
                      "type=dpdk", "options:dpdk-devargs=net_pcap%d,rx_pcap=%s%s"
                      % (i, f, "" if once else ",infinite_rx=1"), "ofport_request=%d" % (i + 1),
                      *mtu)

            def stat(label, text):
                m = re.search(label + r": ([0-9.]+)", text)
                return float(m.group(1)) if m else 0.0

            def received():
                return stat("packets received", appctl("dpif-netdev/pmd-stats-show"))

            wait_for(lambda: received() > 0, 120, "OVS to receive")
            if once:
                # The PMD's counters start with its port; the pass is over
                # when every packet arrived.
                snaps = []

                def snap():
                    text = appctl("dpif-netdev/pmd-stats-show")
                    snaps.append({"rx": stat("packets received", text),
                                  "busy": stat("processing cycles", text),
                                  "ok": stat("miss with success upcall", text),
                                  "failed": stat("miss with failed upcall", text)})
                    return text

                wait_for(lambda: snap() and snaps[-1]["rx"] >= nflows, 600,
                         "OVS to read the pcap")
                time.sleep(0.5)
                out, t1 = snap(), time.time()
            else:
                time.sleep(self.a.warmup)
                appctl("dpif-netdev/pmd-stats-clear")
                t1 = time.time()
                time.sleep(self.a.seconds)
                out = appctl("dpif-netdev/pmd-stats-show")
            t2 = time.time()
            pk = stat("packets received", out)
            cpp = re.search(r"avg processing cycles per packet: ([0-9.]+)", out)
            dump = appctl("dpctl/dump-flows")
            masks = self.ovs_masks(dump)

            mf = stat("megaflow hits", out)
            r = {"mpps": pk / (t2 - t1) / 1e6 if not once else 0.0,
                 "cycles_per_pkt": "%.0f" % float(cpp.group(1)) if cpp else "",
                 "masks": masks,
                 # OVS's SMC hits are dpcls hits found through the SMC, its
                 # megaflow hits the rest; lookups per hit are its own average.
                 "layers": layer_shares(stat("emc hits", out), stat("smc hits", out), 0, mf,
                                        stat("miss with success upcall", out) +
                                        stat("miss with failed upcall", out),
                                        mf * stat(r"avg. subtable lookups per megaflow hit", out))}
            if once:
                # Its TSC rate: the PMD's cycles (idle and processing) over
                # two seconds of wall time once the pass is over.
                time.sleep(2)
                later, t3 = appctl("dpif-netdev/pmd-stats-show"), time.time()

                def cycles(text):
                    return stat("idle cycles", text) + stat("processing cycles", text)

                r.update(new_flows(snaps, (cycles(later) - cycles(out)) / (t3 - t1),
                                   dump.count(", packets:"), nflows))
            return r
        finally:
            if vsd is not None:
                vsd.stop()
            dbs.stop()

    @staticmethod
    def ovs_masks(dump):
        """Distinct megaflow masks of `ovs-appctl dpctl/dump-flows`: each
        flow's match with the values taken out, masks kept."""
        shapes = set()
        for line in dump.splitlines():
            match = line.split(", packets:")[0]
            if not match.strip() or match.startswith("flow-dump"):
                continue
            shapes.add(re.sub(r"=([^,/()]+)(/[^,()]+)?", lambda m: "=" + (m.group(2) or "x"),
                              match))
        return len(shapes)

    def one(self, system, pcap, nflows, k, rules, opts, masks=None):
        """opts: "once" (read the pcap once and time its new flows),
        "fc_pipeline" (flowclassd pipeline settings beside smc)."""
        if system == "testpmd":
            return self.run_testpmd(pcap, nflows, k)
        if system.startswith("ovs"):
            return self.run_ovs(pcap, nflows, k, system == "ovs_smc", rules, opts)
        return self.run_flowclassd(pcap, nflows, k, system == "fc_smc", rules, opts, masks)


def median_of(rows, **key):
    v = [float(r["mpps"]) for r in rows if all(r[k] == str(x) for k, x in key.items())]
    return statistics.median(v) if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--out", default=None, help="default: BUILD/bench/peer")
    ap.add_argument("--scenarios", default="rfc,emc,classbench,ethmask,newflow")
    ap.add_argument("--ks", default="1,10,20,30")
    ap.add_argument("--ks-1m", default="1,30", help="K of the rfc1m scenario")
    ap.add_argument("--streams", default="100,1000,4000,8000,11000",
                    help="flows of the emc scenario")
    ap.add_argument("--classbench-sets", default="acl1_1k,fw1_1k,ipc1_1k",
                    help="names under BUILD/classbench/neurocuts, or paths")
    ap.add_argument("--classbench-packets", type=int, default=100000,
                    help="frames of each classbench pcap (random points inside random rules)")
    ap.add_argument("--ethmasks", default="1,255",
                    help="dl_dst masks of the ethmask scenario (1 and/or 255)")
    ap.add_argument("--fc-rare-mask-subtables", type=int, default=0,
                    help="flowclassd's pipeline.rare_mask_subtables in the ethmask scenario "
                         "(0: the defence off; 32, the default, holds fewer than 255 masks)")
    ap.add_argument("--newflows", type=int, default=100000,
                    help="flows of the newflow scenario, each a new megaflow (at most %d, "
                         "the datapath flow limit of OVS and of flowclassd)" % OVS_FLOW_LIMIT)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5, help="measured window per run")
    ap.add_argument("--warmup", type=int, default=3, help="seconds before the window")
    ap.add_argument("--pmd-cpu", type=int, default=1)
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()
    out = a.out or os.path.join(a.build, "bench", "peer")
    os.makedirs(out, exist_ok=True)
    systems = a.systems.split(",")
    for s in systems:
        if s not in SYSTEMS:
            die("unknown system %r (%s)" % (s, ", ".join(SYSTEMS)))
    need = {"testpmd": ["dpdk-testpmd"], "ovs": ["ovsdb-tool", "ovsdb-server", "ovs-vsctl",
                                                 "ovs-appctl", "ovs-ofctl", "unshare"]}
    for s in systems:
        for tool in need.get(s.split("_")[0], []):
            if shutil.which(tool) is None:
                die("%s needs %s (make bench-peer installs it)" % (s, tool))
    if any(s.startswith("ovs") for s in systems) and not os.access(OVS_VSWITCHD, os.X_OK):
        die("no %s (Debian openvswitch-switch-dpdk)" % OVS_VSWITCHD)
    if any(s.startswith("fc") for s in systems) and not os.access(
            os.path.join(a.build, "server", "flowclassd"), os.X_OK):
        die("no flowclassd in %s (build it first)" % a.build)
    if not a.no_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            die("no matplotlib for the plot (apt-get install python3-matplotlib, or --no-plot)")

    b = Bench(a)
    rows = []
    # (scenario, k, flows, expected masks or None, what makes rules + pcap,
    # options of Bench.one).  k is K for rfc and emc, the
    # number of rules for classbench, the dl_dst masks for ethmask.
    cases = []

    def rfc_make(k, nflows):
        def make(pcap):
            rfc_pcap(pcap, k, nflows)
            return rfc_rules(k)
        return make

    def rfc1m_make(k):
        def make(pcap):
            for i, f in enumerate(rx_pcaps(pcap, {"rx_ports": RFC1M_PORTS})):
                rfc_pcap(f, k, RFC_FLOWS, seed=1 + i, first=i * RFC_FLOWS)
            return rfc_rules(k, RFC1M_PORTS)
        return make

    def ethmask_make(masks):
        def make(pcap):
            ethmask_pcap(pcap)
            return ethmask_rules(masks)
        return make

    def newflow_make(nflows):
        def make(pcap):
            rfc_pcap(pcap, 1, nflows)
            return newflow_rules(nflows)
        return make

    def classbench_make(path):
        def make(pcap):
            rules, frames = classbench_case(path, a.classbench_packets)
            write_pcap(pcap, frames)
            return rules
        return make

    for sc in a.scenarios.split(","):
        if sc == "rfc":
            cases += [("rfc", int(k), RFC_FLOWS, int(k), rfc_make(int(k), RFC_FLOWS), {})
                      for k in a.ks.split(",")]
        elif sc == "emc":
            # EMC-resident (100) up to EMC thrashing (its 8,192 entries).
            cases += [("emc", 1, int(n), 1, rfc_make(1, int(n)), {})
                      for n in a.streams.split(",")]
        elif sc == "classbench":
            import classbench_acl
            for name in a.classbench_sets.split(","):
                path = name if os.path.isfile(name) else os.path.join(
                    a.build, "classbench", "neurocuts", name)
                if not os.path.isfile(path):
                    die("no ClassBench set %s (configure the build first)" % path)
                # No intended mask count: the row reports what each holds.
                cases.append(("classbench:" + os.path.basename(name),
                              len(classbench_acl.read_rules(path)), a.classbench_packets, None,
                              classbench_make(path), {}))
        elif sc == "rfc1m":
            # K masks on each of 4 in_ports: 4K dpcls subtables in each.
            cases += [("rfc1m", int(k), RFC1M_PORTS * RFC_FLOWS, RFC1M_PORTS * int(k),
                       rfc1m_make(int(k)), {"rx_ports": RFC1M_PORTS})
                      for k in a.ks_1m.split(",")]
        elif sc == "ethmask":
            for m in a.ethmasks.split(","):
                if int(m) not in (1, ETHMASK_RULES):
                    die("--ethmasks: 1 or %d, not %s" % (ETHMASK_RULES, m))
                # The mask-explosion defence would keep most of the 255
                # masks out (README.md): a port that needs hundreds of
                # masks sets it to 0, as docs/pipeline.md says.
                cases.append(("ethmask", int(m), ETHMASK_PACKETS, int(m), ethmask_make(int(m)),
                              {"fc_pipeline": {"rare_mask_subtables": a.fc_rare_mask_subtables}}))
        elif sc == "newflow":
            if not 0 < a.newflows <= OVS_FLOW_LIMIT:
                die("--newflows must be 1..%d" % OVS_FLOW_LIMIT)
            # One mask: every megaflow is exact on nw_dst.
            cases.append(("newflow", 1, a.newflows, 1, newflow_make(a.newflows), {"once": True}))
        else:
            die("unknown scenario %r (rfc, emc, classbench, ethmask, newflow, rfc1m)" % sc)
    failures = []
    print("load average at start: %s" % open("/proc/loadavg").read().split()[:3])
    try:
        made = []
        for i, (sc, k, nflows, want, make, opts) in enumerate(cases):
            pcap = os.path.join(b.work, "case%d.pcap" % i)
            made.append((pcap, make(pcap)))
        # Round by round over every case, so that a drift of the machine's
        # speed during the run falls on every case (K=1 and K=30) alike.
        for rnd in range(1, a.rounds + 1):
            for (sc, k, nflows, want, make, opts), (pcap, rules) in zip(cases, made):
                # testpmd has no flows to set up (no new-flow rate), and runs
                # with one rx port.
                case_systems = [s for s in systems if s != "testpmd" or not (
                    opts.get("once") or opts.get("rx_ports", 1) > 1)]
                # Alternate the order from round to round.
                order = case_systems if rnd % 2 else list(reversed(case_systems))
                for s in order:
                    try:
                        r = b.one(s, pcap, nflows, k, rules, opts, want)
                    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                        failures.append("%s K=%d %s round %d: %s" % (sc, k, s, rnd, e))
                        print(failures[-1], file=sys.stderr)
                        continue
                    ok = r["masks"] == "" or want is None or r["masks"] == want
                    if not ok:
                        failures.append("%s K=%d %s round %d: %s masks, not %d" %
                                        (sc, k, s, rnd, r["masks"], want))
                        print(failures[-1], file=sys.stderr)
                    row = {"scenario": sc, "k": str(k), "flows": str(nflows), "system": s,
                           "round": str(rnd), "mpps": "%.3f" % r["mpps"],
                           "cycles_per_pkt": r["cycles_per_pkt"], "masks": str(r["masks"]),
                           "masks_expected": "" if want is None else str(want),
                           "layers": r["layers"]}
                    rows.append(row)
                    print("%(scenario)s K=%(k)s flows=%(flows)s %(system)-11s round %(round)s: "
                          "%(mpps)s Mpps, %(cycles_per_pkt)s cycles/pkt, masks %(masks)s; %(layers)s" % row,
                          flush=True)
    finally:
        b.cleanup()
    print("load average at end: %s" % open("/proc/loadavg").read().split()[:3])

    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["scenario"])
        w.writeheader()
        w.writerows(rows)
    lines = ["| scenario | K | flows | " + " | ".join(systems) +
             " | fc_default / ovs_smc | fc_default / ovs_default |",
             "|---|---:|---:|" + "---:|" * (len(systems) + 2)]
    for sc, k, nflows, _, _, _ in cases:
        med = {s: median_of(rows, scenario=sc, k=k, flows=nflows, system=s) for s in systems}

        def ratio(x, y):
            return "%.2f" % (med[x] / med[y]) if med.get(x) and med.get(y) else "n/a"

        lines.append("| %s | %d | %d | " % (sc, k, nflows) +
                     # newflow's rates are below 1 (million new flows/s).
                     " | ".join(("%.2f" if med[s] >= 1 else "%.3f") % med[s] if med[s] else "n/a"
                                for s in systems) +
                     " | %s | %s |" % (ratio("fc_default", "ovs_smc"),
                                       ratio("fc_default", "ovs_default")))
    rfc_k = [c[1] for c in cases if c[0] == "rfc"]
    masks_note = ["", "Masks held (medians): " + "; ".join(
        "%s %s" % (sc, ", ".join("%s %s" % (s, statistics.median(
            [int(r["masks"]) for r in rows if r["scenario"] == sc and r["system"] == s
             and r["masks"] not in ("", "None")] or [0])) for s in systems
            if not s == "testpmd"))
        for sc, _, _, _, _, _ in cases if sc.startswith("classbench"))]
    # Each system's rate at the most masks over its rate at the fewest.
    for scn in ("rfc", "rfc1m", "ethmask"):
        ks = [c[1] for c in cases if c[0] == scn]
        if len(ks) < 2:
            continue
        lines.append("")
        for s in systems:
            lo = median_of(rows, scenario=scn, k=min(ks), system=s)
            hi = median_of(rows, scenario=scn, k=max(ks), system=s)
            if lo and hi:
                lines.append("- %s: %s K%d/K%d = %.2f" % (s, scn, max(ks), min(ks), hi / lo))
    if any(c[0] == "newflow" for c in cases):
        lines += ["", "newflow: million new flows per second (every packet an upcall that "
                  "installs a megaflow, timed by the PMD's busy cycles), not Mpps."]
    if any(c[0].startswith("classbench") for c in cases):
        lines += masks_note
    summary = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("Mpps, medians of %d rounds of %d s (warm-up %d s), PMD on CPU %d\n\n"
                % (a.rounds, a.seconds, a.warmup, a.pmd_cpu) + summary)
    print(summary)
    if not a.no_plot and rfc_k:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4))
        for s in systems:
            ys = [median_of(rows, scenario="rfc", k=k, system=s) for k in rfc_k]
            ax.plot(rfc_k, [y or 0 for y in ys], marker="o", label=s)
        ax.set_xlabel("K (megaflow masks)")
        ax.set_ylabel("Mpps (median)")
        ax.set_title("RFC setup, %d flows, 1 PMD" % RFC_FLOWS)
        ax.legend()
        ax.grid(True, alpha=0.3)
        fig.savefig(os.path.join(out, "peer.png"), dpi=100, bbox_inches="tight")
    print("peer_bench: results in %s" % out)
    if failures:
        die("%d runs failed or held the wrong masks:\n  " % len(failures) +
            "\n  ".join(failures))


if __name__ == "__main__":
    main()
