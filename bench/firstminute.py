#!/usr/bin/python3
"""The first minute (issue 30): how soon petri answers after it starts.

  mcp      `petri mcp` over stdio: from spawn to the answers of initialize
           and of tools/list (the tool list complete, from what an earlier
           start found in the state directory), N times (default 20); p50
           and p90.  The first run of a fresh state directory fills the
           cache and is reported apart.  Target: tools/list <= 300 ms (p50).
  serve    `petri serve`: from spawn to /healthz answering, and to
           /healthz "warm": "ready" (polled every 50 ms); and a session
           asked for at second 1 after spawn: when its first chart
           (matplotlib's plt.plot and savefig, shown as an image/png) is
           made, and whether it waited for the template or went cold (the
           daemon's log says which).

Each daemon has a state directory of its own under a temporary directory
(removed at the end); the machine's load is printed beside the numbers,
which mean little on a busy host.  Writes bench/results/<date>-firstminute.
{md,json} unless --no-write.

    /usr/bin/python3 bench/firstminute.py --petri build/petri [-n 20] [--only mcp]
"""
import argparse
import datetime
import json
import os
import re
import select
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def readline(proc, deadline):
    buf = b""
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer")
        r, _, _ = select.select([proc.stdout], [], [], left)
        if r:
            c = os.read(proc.stdout.fileno(), 1)
            if not c:
                raise EOFError("petri mcp closed stdout")
            buf += c
    return json.loads(buf)


def mcp_once(petri, env):
    """(ms to initialize's answer, ms to tools/list's, the description names numpy)."""
    t0 = time.monotonic()
    p = subprocess.Popen([petri, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    try:
        def ask(i, method, params=None):
            msg = {"jsonrpc": "2.0", "id": i, "method": method}
            if params is not None:
                msg["params"] = params
            p.stdin.write(json.dumps(msg).encode() + b"\n")
            p.stdin.flush()
            return readline(p, time.monotonic() + 120)
        ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "bench", "version": "1"}})
        t_init = time.monotonic()
        p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        r = ask(2, "tools/list")
        t_list = time.monotonic()
        desc = next(t["description"] for t in r["result"]["tools"] if t["name"] == "execute")
    finally:
        p.stdin.close()
        p.wait(60)
    return (t_init - t0) * 1000, (t_list - t0) * 1000, "numpy" in desc


def bench_mcp(petri, n, tmp):
    env = {**os.environ, "STATE_DIRECTORY": os.path.join(tmp, "mcp")}
    first = mcp_once(petri, env)
    runs = [mcp_once(petri, env) for _ in range(n)]
    init = [r[0] for r in runs]
    lst = [r[1] for r in runs]
    return {
        "first_run_ms": {"initialize": round(first[0]), "tools_list": round(first[1]),
                         "complete": first[2]},
        "runs": n,
        "initialize_ms": {"p50": round(statistics.median(init)), "p90": round(pct(init, 90))},
        "tools_list_ms": {"p50": round(statistics.median(lst)), "p90": round(pct(lst, 90)),
                          "max": round(max(lst))},
        "complete": all(r[2] for r in runs),
    }


def http(url, body=None, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"null")


CHART = ("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\n"
         "plt.savefig('/work/first.png')\nplt.show()")


def bench_serve(petri, tmp):
    env = {**os.environ, "STATE_DIRECTORY": os.path.join(tmp, "serve")}
    log = open(os.path.join(tmp, "serve.log"), "w+")
    t0 = time.monotonic()
    p = subprocess.Popen([petri, "serve", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                         stderr=log, text=True, env=env)
    out = {}
    try:
        url = re.search(r"(http://\S+)", p.stdout.readline()).group(1)
        t_health = t_ready = None
        result = {}

        def session_at_1s():
            time.sleep(max(0, 1 - (time.monotonic() - t0)))
            t_ask = time.monotonic()
            sid = http(url + "/v1/sessions", {})["id"]
            r = http(f"{url}/v1/sessions/{sid}/execute", {"code": CHART})
            result.update(asked_s=t_ask - t0, result_s=time.monotonic() - t0,
                          ok=r["status"] == "ok" and any("image/png" in x for x in r["results"]))

        import threading
        th = threading.Thread(target=session_at_1s)
        th.start()
        while time.monotonic() - t0 < 180:
            try:
                h = http(url + "/healthz", timeout=5)
            except OSError:
                time.sleep(0.05)
                continue
            t_health = t_health or time.monotonic()
            if h["warm"] in ("ready", "off", "failed"):
                t_ready = time.monotonic()
                out["warm"] = h["warm"]
                break
            time.sleep(0.05)
        th.join(180)
        log.seek(0)
        text = log.read()
        m = re.search(r"a sandbox (waited (\d+) ms|went cold)", text)
        out.update(
            healthz_s=round(t_health - t0, 3) if t_health else None,
            warm_ready_s=round(t_ready - t0, 3) if t_ready else None,
            session_asked_s=round(result.get("asked_s", 0), 3),
            first_chart_s=round(result.get("result_s", 0), 3),
            first_chart_ok=result.get("ok"),
            first_session=("waited %s ms" % m.group(2) if m and m.group(2) else
                           "went cold" if m else "warm at once"),
        )
    finally:
        p.terminate()
        p.wait(60)
        log.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--petri", default=os.path.join(HERE, "..", "build", "petri"))
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--only", choices=["mcp", "serve"])
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    petri = os.path.abspath(a.petri)
    res = {"host": socket.gethostname(), "load_before": loadavg(),
           "version": subprocess.run([petri, "--version"], capture_output=True,
                                     text=True).stdout.strip()}
    tmp = tempfile.mkdtemp(prefix="petri-bench-firstminute-")
    try:
        if a.only in (None, "mcp"):
            res["mcp"] = bench_mcp(petri, a.n, tmp)
        if a.only in (None, "serve"):
            res["serve"] = bench_serve(petri, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["load_after"] = loadavg()
    print(json.dumps(res, indent=2))
    if not a.no_write:
        day = datetime.date.today().isoformat()
        base = os.path.join(HERE, "results", f"{day}-firstminute")
        with open(base + ".json", "w") as f:
            json.dump(res, f, indent=2)
        with open(base + ".md", "w") as f:
            f.write(f"# the first minute, {day} ({res['host']}, {res['version']})\n\n"
                    f"load before {res['load_before']}, after {res['load_after']}\n\n"
                    "```json\n" + json.dumps(res, indent=2) + "\n```\n")


if __name__ == "__main__":
    main()
