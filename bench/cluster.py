#!/usr/bin/python3
"""Several nodes behind HAProxy (issue 31, docs/cluster.md): what the router
costs and what a node's death costs, on this machine.

  throughput  one-shots (`print(1)`) a second with C clients for S seconds,
              through the router of N local nodes, and against one node
              alone (node 1 of the same cluster, straight), side by side.
  latency     an execution in a session (`x + 1`), R times straight to its
              node and R times through the router, alternating; p50/p99 of
              each and the difference: the router's added latency.
  router cpu  HAProxy's CPU time (utime + stime of its process) over the
              throughput run through it, per request.
  kill -9     a session on node 1; kill -9 of node 1; then the session asked
              every 10 ms through the router: the time until its first
              `503 node_unavailable`.

The cluster is deploy/local/cluster's (nodes with `preload =` unless
--preload says otherwise), in a temporary directory, taken down at the end.
The machine's load is printed beside the numbers, which mean little on a
busy host.  Writes bench/results/<date>-cluster.{md,json} unless
--no-write.

    /usr/bin/python3 bench/cluster.py [--petri build/petri] [--nodes 3] [-c 4] [-s 20] [-r 200]
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "deploy", "local", "cluster")
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from harness import free_port_block  # noqa: E402 -- tests/harness, the tests' own


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        st = f.read()
    fields = st[st.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(url, clients, seconds):
    done, errors = [0], [0]
    end = time.monotonic() + seconds
    lock = threading.Lock()

    def client():
        while time.monotonic() < end:
            status, r = post(url + "/v1/execute", {"code": "print(1)"})
            with lock:
                if status == 200 and r.get("status") == "ok":
                    done[0] += 1
                else:
                    errors[0] += 1

    ts = [threading.Thread(target=client) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"per_s": round(done[0] / seconds, 1), "done": done[0], "errors": errors[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--petri", default=os.path.join(HERE, "..", "build", "petri"))
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("-c", "--clients", type=int, default=4)
    ap.add_argument("-s", "--seconds", type=float, default=20)
    ap.add_argument("-r", "--rounds", type=int, default=200)
    ap.add_argument("--preload", default="")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    petri = os.path.abspath(a.petri)
    res = {"host": socket.gethostname(), "load_before": loadavg(), "nodes": a.nodes,
           "clients": a.clients, "seconds": a.seconds, "preload": a.preload,
           "version": subprocess.run([petri, "--version"], capture_output=True,
                                     text=True).stdout.strip()}
    tmp = tempfile.mkdtemp(prefix="petri-bench-cluster-")
    d = os.path.join(tmp, "c")
    port = free_port_block(a.nodes)
    up = subprocess.run([CLUSTER, "up", "--nodes", str(a.nodes), "--port", str(port), "--dir", d,
                         "--petri", petri, "--preload", a.preload], capture_output=True, text=True,
                        timeout=600)
    if up.returncode:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(up.stdout + up.stderr)
    router = f"http://127.0.0.1:{port}"
    node1 = f"http://127.0.0.1:{port + 1}"
    hpid = int(open(os.path.join(d, "haproxy.pid")).read())
    try:
        # Throughput: alone (node 1), through the router, alone again.
        res["throughput_node_alone"] = throughput(node1, a.clients, a.seconds)
        c0 = cpu_s(hpid)
        res["throughput_router"] = throughput(router, a.clients, a.seconds)
        used = cpu_s(hpid) - c0
        n = res["throughput_router"]["done"] + res["throughput_router"]["errors"]
        res["router_cpu_ms_per_request"] = round(used * 1000 / max(n, 1), 3)
        res["throughput_node_alone_again"] = throughput(node1, a.clients, a.seconds)

        # Latency: one session on node 1, straight and routed, alternating.
        status, s = post(node1 + "/v1/sessions", {})
        sid = s["id"]
        post(f"{node1}/v1/sessions/{sid}/execute", {"code": "x = 1"})
        straight, routed = [], []
        for i in range(a.rounds):
            for base, into in ((node1, straight), (router, routed)) if i % 2 else \
                    ((router, routed), (node1, straight)):
                t = time.monotonic()
                status, r = post(f"{base}/v1/sessions/{sid}/execute", {"code": "x + 1"})
                into.append((time.monotonic() - t) * 1000)
                assert status == 200 and r["status"] == "ok", r
        res["latency_ms"] = {
            "straight_p50": round(statistics.median(straight), 2),
            "straight_p99": round(pct(straight, 99), 2),
            "router_p50": round(statistics.median(routed), 2),
            "router_p99": round(pct(routed, 99), 2),
            "added_p50": round(statistics.median(routed) - statistics.median(straight), 2),
        }

        # kill -9 of node 1: until its session is said to be unavailable.
        os.kill(int(open(os.path.join(d, "node-1.pid")).read()), signal.SIGKILL)
        t0 = time.monotonic()
        while True:
            status, r = post(f"{router}/v1/sessions/{sid}/execute", {"code": "x"}, timeout=30)
            if status == 503 and r.get("error", {}).get("code") == "node_unavailable":
                break
            if time.monotonic() - t0 > 30:
                raise SystemExit(f"no node_unavailable after 30 s: {status} {r}")
            time.sleep(0.01)
        res["kill9_to_node_unavailable_ms"] = round((time.monotonic() - t0) * 1000)
    finally:
        subprocess.run([CLUSTER, "down", "--dir", d, "--petri", petri], capture_output=True,
                       timeout=300)
        shutil.rmtree(tmp, ignore_errors=True)
    res["load_after"] = loadavg()
    print(json.dumps(res, indent=2))
    if not a.no_write:
        day = datetime.date.today().isoformat()
        base = os.path.join(HERE, "results", f"{day}-cluster")
        with open(base + ".json", "w") as f:
            json.dump(res, f, indent=2)
        with open(base + ".md", "w") as f:
            f.write(f"# several nodes behind HAProxy, {day} ({res['host']}, {res['version']})\n\n"
                    f"load before {res['load_before']}, after {res['load_after']}\n\n"
                    "```json\n" + json.dumps(res, indent=2) + "\n```\n")


if __name__ == "__main__":
    main()
