#!/usr/bin/python3
"""What a network costs a session (issue 35's targets), side by side in one run.

  create       POST /v1/sessions and DELETE of it, from the request to the
               answer: without a network (none: no link is made) and with
               an allow-list of one name (a link, its rules and a resolver
               of its own).  The daemon's CPU (its own, with the resolvers it
               starts) per session, from /proc, beside the wall time.
  connect      from inside a sandbox: a name resolved and a TCP connection
               to an allowed HTTP server made, a GET sent and answered, once
               per run; against the same from the host (resolved by the same
               world's DNS server, connected directly): what the path through
               the router (veth, nftables, slirp4netns) adds.

The world is the test suite's small internet (tests/net/networld.py: a
network namespace with an HTTP and a DNS server on a documentation range);
nothing leaves the machine.  It starts a `petri serve` of its own
([network] clients_may = allowlist, the world's resolver upstream, a uid
range of its own) and stops it at the end; the load average is printed
beside the numbers.

    /usr/bin/python3 bench/network.py --petri build/petri [--runs 30] [--json OUT]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "net"))

from harness import Api, Daemon  # noqa: E402
from networld import World  # noqa: E402


def loadavg():
    return os.getloadavg()[0]


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def summary(values):
    return {"p50": round(pct(values, 50), 2), "p90": round(pct(values, 90), 2),
            "mean": round(statistics.mean(values), 2), "n": len(values)}


def tree_cpu_s(pid):
    """CPU seconds of pid and of its children it has waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(f) for f in fields[11:15])      # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def create_series(api, pid, network, runs):
    walls, cpu0 = [], tree_cpu_s(pid)
    for _ in range(runs):
        t0 = time.monotonic()
        r = api.post("/v1/sessions", {"network": network} if network else {})
        assert r.status_code == 201, r.text
        walls.append((time.monotonic() - t0) * 1000)
        api.delete(f"/v1/sessions/{r.json()['id']}")
    time.sleep(1)           # the disposer's teardown, counted in the CPU
    return summary(walls), round((tree_cpu_s(pid) - cpu0) * 1000 / runs, 2)


CLIENT = r'''
import socket, time
def once(name):
    t0 = time.perf_counter()
    addr = socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4]
    s = socket.create_connection(addr, 5)
    s.sendall(b'GET /index.txt HTTP/1.0\r\nHost: x\r\n\r\n')
    while s.recv(65536):
        pass
    s.close()
    return (time.perf_counter() - t0) * 1000
once(NAME)
print(' '.join('%.3f' % once(NAME) for _ in range(RUNS)))
'''


def resolve_from_host(world, name):
    """An A query to the world's DNS server, as the host's C library would
    send it (the host's own resolver does not know the world)."""
    q = struct.pack(">HHHHHH", 1, 0x100, 1, 0, 0, 0) + b"".join(
        bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0" + \
        struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, (world.a, 53))
    r = s.recv(512)
    s.close()
    return socket.inet_ntoa(r[-4:])


def host_series(world, runs):
    out = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        addr = resolve_from_host(world, "allowed.test")
        s = socket.create_connection((addr, 80), 5)
        s.sendall(b"GET /index.txt HTTP/1.0\r\nHost: x\r\n\r\n")
        while s.recv(65536):
            pass
        s.close()
        if i:
            out.append((time.perf_counter() - t0) * 1000)
    return summary(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--petri", default=str(ROOT / "build" / "petri"))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json")
    a = ap.parse_args()
    os.environ["PETRI_BIN"] = a.petri
    tmp = Path(tempfile.mkdtemp(prefix="petri-bench-net-"))
    world = World(tmp)
    d = None
    try:
        d = Daemon(tmp, world.config("clients_may = allowlist"), command=[a.petri],
                   uid_range=(3_500_000_000, 200))
        d.wait_warm(120)
        api = Api(d.url)
        for network in (None, {"allow": ["allowed.test"]}):    # warm-ups
            create_series(api, d.pid, network, 3)
        load0 = loadavg()
        none, none_cpu = create_series(api, d.pid, None, a.runs)
        listed, listed_cpu = create_series(api, d.pid, {"allow": ["allowed.test"]}, a.runs)
        sid = api.session(network={"allow": ["allowed.test"]})
        r = api.execute(sid, f"NAME = 'allowed.test'\nRUNS = {a.runs}\n" + CLIENT)
        inside = summary([float(x) for x in r["stdout"].split()])
        host = host_series(world, a.runs)
        out = {
            "load": [round(load0, 2), round(loadavg(), 2)],
            "create_none_ms": none, "create_none_cpu_ms": none_cpu,
            "create_allowlist_ms": listed, "create_allowlist_cpu_ms": listed_cpu,
            "create_extra_p50_ms": round(listed["p50"] - none["p50"], 2),
            "create_extra_cpu_ms": round(listed_cpu - none_cpu, 2),
            "connect_inside_ms": inside, "connect_host_ms": host,
            "connect_extra_p50_ms": round(inside["p50"] - host["p50"], 2),
        }
        print(json.dumps(out, indent=2))
        if a.json:
            Path(a.json).write_text(json.dumps(out, indent=2) + "\n")
    finally:
        if d:
            d.stop()
        world.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
