#!/usr/bin/env python3
"""Writes a pcap of mixed IPv4 UDP/TCP traffic for flowclassd demos/benchmarks.

No third-party modules (no scapy): frames are packed by hand.  Flows are
drawn deterministically from --seed; destination addresses 10.<a>.<b>.<c> and
ports spread so that the demo's sample rule set (in scripts/demo_daemon.sh)
sends some to port 2, some to port 3 and drops others.

  gen_pcap.py --out demo.pcap --packets 10000 --flows 100 [--seed 1]
"""
import argparse
import random
import struct


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(src, dst, proto, sport, dport, size=64):
    l4 = struct.pack("!HHHH", sport, dport, 8, 0) if proto == 17 else \
        struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 0x50, 0x10, 8192, 0, 0)
    ip_len = 20 + len(l4)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0, 64, proto, 0,
                     src.to_bytes(4, "big"), dst.to_bytes(4, "big"))
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    eth = bytes.fromhex("020000000002") + bytes.fromhex("020000000001") + b"\x08\x00"
    f = eth + ip + l4
    return f + b"\0" * max(0, size - len(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--packets", type=int, default=10000)
    ap.add_argument("--flows", type=int, default=100)
    ap.add_argument("--size", type=int, default=64, help="frame size (no FCS)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    for name in ("packets", "flows"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if not 60 <= a.size <= 9000:
        ap.error("--size must be 60..9000 bytes")
    rnd = random.Random(a.seed)
    flows = []
    for _ in range(a.flows):
        proto = rnd.choice([6, 17])
        src = (10 << 24) | rnd.randrange(1 << 24)
        dst = (10 << 24) | (rnd.randrange(4) << 16) | rnd.randrange(1 << 16)
        flows.append(frame(src, dst, proto, rnd.randrange(1024, 65536),
                           rnd.choice([53, 80, 443, 1000, 1500, 2500, 8080]), a.size))
    with open(a.out, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(a.packets):
            f = flows[i % len(flows)]
            out.write(struct.pack("<IIII", i // 1000000, i % 1000000, len(f), len(f)))
            out.write(f)


if __name__ == "__main__":
    main()
