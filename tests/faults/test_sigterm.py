"""SIGTERM with 30 sessions executing: the daemon exits 0 within
shutdown_grace_s and a few seconds, every client gets an answer (or a
closed connection, never a hang), and nothing is left: processes, cgroups,
mounts."""
import threading
import time

from faulthelp import (SSE, cgroup_dirs, leftovers, metric, mountinfo, sandbox_tree, wait_for,
                      write_out)

N = 30
GRACE_S = 3
CONFIG = f"""
[server]
max_sessions = 40
max_executions = 40
shutdown_grace_s = {GRACE_S}

[sessions]
pool_size = 2

[limits]
memory_mb = 128
pids = 64
timeout_s = 120
"""

# What the 30 run: sleepers, CPU spinners, bash with children, streams.
def workload(i):
    kind = ("sleep", "spin", "bash", "sleep", "stream")[i % 5]
    if kind == "sleep":
        return kind, {"code": "import time\ntime.sleep(90)"}
    if kind == "spin":
        return kind, {"code": "n = 0\nwhile True:\n    n += 1"}
    if kind == "bash":
        return kind, {"code": "sleep 90 & (sleep 90; echo x) & yes > /dev/null & wait",
                      "language": "bash"}
    return kind, {"code": "import time\nwhile True:\n    print('tick', flush=True)\n"
                          "    time.sleep(0.2)"}


def test_sigterm_with_thirty_sessions_executing(daemons):
    mounts_before = mountinfo()
    srv = daemons(CONFIG, "sigterm")
    sids = [None] * N
    errors = []

    def create(i):
        try:
            sids[i] = srv.api().session()
        except Exception as e:  # noqa: BLE001
            errors.append(f"create {i}: {e!r}")

    ts = [threading.Thread(target=create, args=(i,)) for i in range(N)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors

    answers = {}

    def run(i):
        kind, body = workload(i)
        try:
            if kind == "stream":
                sse = SSE(srv.url, f"/v1/sessions/{sids[i]}/execute", body, timeout=60)
                answers[i] = (kind, [(ev, data) for _, ev, data in sse])
                sse.close()
            else:
                answers[i] = (kind, srv.api().post(f"/v1/sessions/{sids[i]}/execute", body,
                                                   timeout=60))
        except Exception as e:  # noqa: BLE001  (the connection may be closed instead)
            answers[i] = (kind, e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    running = wait_for(lambda: metric(srv.metrics(), "petri_executions_running") == N, 60, 0.2)
    assert running, srv.metrics()
    # The bash children under way (the spinners spin once running).
    api = srv.api()
    bash = [sids[i] for i in range(N) if workload(i)[0] == "bash"]

    def children(sid):
        names = api.process_names(sid)
        return names.count("sleep") == 2 and "yes" in names
    assert wait_for(lambda: all(children(s) for s in bash), 60, 0.2), \
        [api.process_names(s) for s in bash]
    tree = srv.descendants()
    sandboxes = sandbox_tree(tree)
    assert len(sandboxes) >= 2 * N, len(sandboxes)

    # New sessions keep being asked for across the SIGTERM: 201 before it,
    # then 503 shutting_down or a refused connection, never a hang or a
    # sandbox left behind.
    created = {"before": 0, "refused": [], "other": []}
    stop_creating = threading.Event()

    def creator():
        a = srv.api()
        while not stop_creating.is_set():
            try:
                r = a.post("/v1/sessions", {}, timeout=60)
            except Exception as e:  # noqa: BLE001
                created["refused"].append(type(e).__name__)
                return
            if r.status_code == 201:
                created["before"] += 1
            elif r.status_code == 503 and r.json()["error"]["code"] == "shutting_down":
                created["refused"].append(503)
            else:
                created["other"].append((r.status_code, r.text[:200]))
            time.sleep(0.05)    # asked over and over, at a pace, not a flood

    cr = threading.Thread(target=creator)
    cr.start()
    wait_for(lambda: created["before"] or created["other"], 60)   # asked before the SIGTERM
    code, took = srv.terminate(GRACE_S + 30)
    t0 = time.monotonic()
    clean = wait_for(lambda: not leftovers(srv, tree) and not cgroup_dirs(srv.pid), 10, 0.05)
    after_exit_s = time.monotonic() - t0
    remaining = leftovers(srv, tree)
    cg_left = cgroup_dirs(srv.pid)
    stop_creating.set()
    for t in [*threads, cr]:
        t.join(60)
    hung = [i for i, t in enumerate(threads) if t.is_alive()]

    outcome = {}
    bad = []
    for i, (kind, a) in sorted(answers.items()):
        if isinstance(a, Exception):
            key = type(a).__name__
        elif kind == "stream":
            last = a[-1] if a else (None, None)
            status = last[1].get("status") if last[0] == "done" and last[1] else None
            key = f"stream ending in {last[0]} {status or ''}".rstrip()
            if last[0] == "done" and status not in ("killed", "timeout"):
                bad.append((i, kind, last))
        else:
            key = f"HTTP {a.status_code}" + (f" {a.json().get('status')}" if a.status_code == 200 else "")
            if a.status_code not in (200, 503) or (
                    a.status_code == 200 and a.json().get("status") not in ("killed", "timeout")):
                bad.append((i, kind, a.status_code, a.text[:300]))
        outcome[f"{kind}: {key}"] = outcome.get(f"{kind}: {key}", 0) + 1

    report = (f"SIGTERM with {N} executions in flight ({len(sandboxes)} sandbox processes), "
              f"grace {GRACE_S} s: exit {code} after {took:.2f} s; nothing left "
              f"{after_exit_s:.2f} s after the exit: {bool(clean)}\n"
              f"  clients: {outcome}\n"
              f"  sessions created across the SIGTERM: {created['before']} before, then "
              f"refused: {sorted(set(map(str, created['refused'])))}, other: {created['other']}\n")
    print("\n" + report)
    write_out("sigterm.txt", report)

    assert code == 0, srv.stderr_text()[-3000:]
    assert took < GRACE_S + 10, took
    assert not hung and not cr.is_alive(), f"clients still waiting after the daemon exited: {hung}"
    assert len(answers) == N
    assert not bad, bad
    assert not created["other"], created["other"]
    assert not cr.is_alive()
    assert clean, (remaining, cg_left)
    assert mountinfo() == mounts_before
