#!/usr/bin/env python3
"""classbench_acl.py — ClassBench rules and traces that flowclassctl replay
and DPDK's dpdk-test-acl both read (scripts/bench_slowpath.sh uses it).

  classbench_acl.py rules IN OUT
      IN: a ClassBench filter file, either form (space-separated, or the
      generator's tab-separated output with a TCP-flags field).  OUT: the
      space-separated form without flags,
        @a.b.c.d/len a.b.c.d/len lo : hi lo : hi 0xPP/0xMM
      which dpdk-test-acl parses (it reads the first nine fields and has no
      flags field) and flowclass reads as the same rules.  Dropping the flags
      field is what makes the two rule sets the same: flowclass matches the
      flags a rule names, dpdk-test-acl ignores them.  Prints the rule count.

  classbench_acl.py trace RULES OUT PACKETS SEED
      PACKETS 5-tuples, each a random point inside a rule drawn uniformly
      from RULES (the output of `rules`): host bits below each prefix, ports
      in each range and, for a wildcarded protocol, TCP or UDP, drawn with
      random.Random(SEED).  Lines are `sip dip sport dport proto 0`
      (ClassBench trace order, decimal); the expected column is filled in by
      `expect`.

  classbench_acl.py expect TRACE ACL_OUTPUT OUT
      ACL_OUTPUT: what `dpdk-test-acl --verbose=2 --rulesf=RULES
      --tracef=TRACE` printed (one "ipv4_5tuple: I, category: 0, result: R"
      line per packet, R the 0-based rule index, 4294967295 for no match).
      OUT: TRACE with the expected column set to R + 1 (0: no match), the
      1-based rule line flowclassctl replay checks every verdict against.
      Fails unless ACL_OUTPUT has exactly one result per trace line.
"""
import random
import re
import sys


def die(msg):
    sys.stderr.write("classbench_acl.py: " + msg + "\n")
    sys.exit(1)


def parse_prefix(text, where):
    try:
        addr, length = text.split("/")
        parts = [int(p) for p in addr.split(".")]
        length = int(length)
    except ValueError:
        die("%s: bad prefix %r" % (where, text))
    if len(parts) != 4 or any(p < 0 or p > 255 for p in parts) or not 0 <= length <= 32:
        die("%s: bad prefix %r" % (where, text))
    value = (parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]
    mask = ((1 << 32) - 1) ^ ((1 << (32 - length)) - 1)
    return value & mask, length


def read_rules(path):
    """[(src, slen, dst, dlen, splo, sphi, dplo, dphi, proto, pmask)]"""
    rules = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            where = "%s: line %d" % (path, lineno)
            if not s.startswith("@"):
                die(where + ": a rule starts with '@'")
            t = s[1:].split()
            if len(t) < 9 or t[3] != ":" or t[6] != ":":
                die(where + ": expected 'src dst lo : hi lo : hi proto/mask'")
            src, slen = parse_prefix(t[0], where + ": source")
            dst, dlen = parse_prefix(t[1], where + ": destination")
            try:
                ports = [int(t[i]) for i in (2, 4, 5, 7)]
                proto, pmask = (int(x, 16) for x in t[8].split("/"))
            except ValueError:
                die(where + ": bad port range or protocol")
            if ports[0] > ports[1] or ports[2] > ports[3] or max(ports) > 65535:
                die(where + ": bad port range")
            rules.append((src, slen, dst, dlen, ports[0], ports[1], ports[2], ports[3],
                          proto & pmask, pmask))
    if not rules:
        die(path + ": no rules")
    return rules


def dotted(v):
    return "%d.%d.%d.%d" % (v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255)


def cmd_rules(src, out):
    rules = read_rules(src)
    with open(out, "w") as f:
        for r in rules:
            f.write("@%s/%d %s/%d %d : %d %d : %d 0x%02X/0x%02X\n" % (
                dotted(r[0]), r[1], dotted(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], r[9]))
    print(len(rules))


def point(rng, value, length):
    host = 32 - length
    return value | (rng.getrandbits(host) if host else 0)


def cmd_trace(rules_path, out, packets, seed):
    rules = read_rules(rules_path)
    rng = random.Random(seed)
    with open(out, "w") as f:
        for _ in range(packets):
            src, slen, dst, dlen, splo, sphi, dplo, dphi, proto, pmask = rng.choice(rules)
            if pmask == 0xFF:
                p = proto
            elif pmask == 0:
                p = rng.choice((6, 17))
            else:
                p = proto | (rng.getrandbits(8) & ~pmask & 0xFF)
            f.write("%d %d %d %d %d 0\n" % (point(rng, src, slen), point(rng, dst, dlen),
                                           rng.randint(splo, sphi), rng.randint(dplo, dphi), p))


def cmd_expect(trace, acl_output, out):
    result = re.compile(r"ipv4_5tuple: (\d+), category: 0, result: (\d+)")
    got = {}
    with open(acl_output) as f:
        for line in f:
            m = result.search(line)
            if m:
                got[int(m.group(1))] = int(m.group(2))
    with open(trace) as f:
        lines = [l.split() for l in f if l.strip()]
    if len(got) != len(lines) or any(i not in got for i in range(1, len(lines) + 1)):
        die("%s: %d results for %d trace lines of %s" % (acl_output, len(got), len(lines), trace))
    with open(out, "w") as f:
        for i, t in enumerate(lines, 1):
            r = got[i]
            f.write("%s %d\n" % (" ".join(t[:5]), 0 if r == 0xFFFFFFFF else r + 1))


def main(argv):
    if len(argv) == 4 and argv[1] == "rules":
        cmd_rules(argv[2], argv[3])
    elif len(argv) == 6 and argv[1] == "trace":
        cmd_trace(argv[2], argv[3], int(argv[4]), int(argv[5]))
    elif len(argv) == 5 and argv[1] == "expect":
        cmd_expect(argv[2], argv[3], argv[4])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
