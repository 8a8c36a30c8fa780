"""Fifty sessions at once, one of them hostile (fork bombs, a memory bomb,
a CPU spin): the other forty-nine keep answering, correctly.  Latencies are
printed, not asserted tightly (the machine is shared)."""
import statistics
import threading
import time

import pytest

from apihelp import metric

N_SESSIONS = 50
CONFIG = """
[server]
max_sessions = 60
max_executions = 64
[limits]
memory_mb = 128
pids = 64
timeout_s = 20
"""


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


@pytest.mark.slow
def test_fifty_sessions_with_a_hostile_neighbour(make_server):
    srv = make_server(CONFIG, light=False)   # what forked sessions cost with the default preload
    api = srv.api()

    # Create them all at once.
    ids, errors = [None] * (N_SESSIONS - 1), []
    create_lat = []

    def create(i):
        try:
            t = time.monotonic()
            ids[i] = srv.api().session()
            create_lat.append(time.monotonic() - t)
        except Exception as e:  # noqa: BLE001
            errors.append(f"create {i}: {e!r}")

    ts = [threading.Thread(target=create, args=(i,)) for i in range(N_SESSIONS - 1)]
    hostile_sid = api.session(limits={"timeout_s": 3})
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors
    assert api.get("/healthz").json()["sessions"] == N_SESSIONS

    hostile_done = threading.Event()
    hostile_log = []
    hostile_last = []       # the hostile session the steps ended in

    def hostile():
        a = srv.api()
        try:
            steps = [
                ("bash fork bomb", "bash", "bomb() { bomb | bomb & }; bomb; sleep 30",
                 ("timeout",)),
                ("cpu spin", "python", "while True:\n    pass", ("timeout",)),
                ("threads spinning", "python",
                 "import threading\n"
                 "def spin():\n    while True:\n        pass\n"
                 "for _ in range(4):\n    threading.Thread(target=spin, daemon=True).start()\n"
                 "while True:\n    pass", ("timeout",)),
                # Its limit is reached within its 3 s timeout, except on a
                # machine loaded enough that it is not (a sanitizer build
                # beside other runs): either ends it, and what this test
                # proves is the neighbours' answers.
                ("memory bomb", "python",
                 "b = []\nwhile True:\n    b.append(bytearray(16 << 20))", ("oom", "timeout")),
            ]
            sid = hostile_sid
            for name, lang, code, ok in steps:
                t = time.monotonic()
                r = a.post(f"/v1/sessions/{sid}/execute", {"code": code, "language": lang})
                st = r.json().get("status") if r.status_code == 200 else r.status_code
                hostile_log.append((name, st, round(time.monotonic() - t, 2)))
                if st not in ok:
                    errors.append(f"hostile {name}: {r.status_code} {r.text[:300]}")
                if st == "oom":
                    break       # the session outlives its interpreter
                # A timeout either interrupts the code or, when the code
                # does not stop within the grace (five spinning threads on a
                # loaded machine may not see the interrupt in 2 s), replaces
                # the interpreter: the session is kept either way, and the
                # result says which.
                reason = r.json().get("reason") or ""
                gone = a.get(f"/v1/sessions/{sid}").status_code == 410
                kept = ("the session kept", "files in /work are kept")
                if gone or not reason.endswith(kept):
                    errors.append(f"hostile {name}: reason {reason!r}, gone: {gone}")
            hostile_last.append(sid)
            # A python fork bomb in a fresh session: it cannot be interrupted
            # (every child runs on), so the session is ended, by the clock or
            # by the memory its copies take.
            sid2 = a.session(limits={"timeout_s": 3})
            t = time.monotonic()
            r = a.post(f"/v1/sessions/{sid2}/execute",
                       {"code": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"})
            st = r.json().get("status") if r.status_code == 200 else r.status_code
            hostile_log.append(("python fork bomb", st, round(time.monotonic() - t, 2)))
            if st not in ("timeout", "killed", "oom"):
                errors.append(f"hostile python fork bomb: {r.text[:300]}")
            a.delete(f"/v1/sessions/{sid2}")
        except Exception as e:  # noqa: BLE001
            errors.append(f"hostile: {e!r}")
        finally:
            hostile_done.set()

    latencies = []
    per_session_checks = [0] * (N_SESSIONS - 1)

    def neighbour(i):
        a = srv.api()
        sid = ids[i]
        try:
            a.execute(sid, f"me = {i}")
            k = 0
            while k < 5 or not hostile_done.is_set():
                k += 1
                t = time.monotonic()
                r = a.post(f"/v1/sessions/{sid}/execute", {"code": f"me * {k} + 1"})
                latencies.append(time.monotonic() - t)
                if r.status_code != 200:
                    errors.append(f"session {i}: HTTP {r.status_code} {r.text[:200]}")
                    return
                res = r.json()
                if res["status"] != "ok" or res["results"] != [{"text/plain": str(i * k + 1)}]:
                    errors.append(f"session {i}: wrong answer {res}")
                    return
                per_session_checks[i] += 1
                if k > 400:
                    break
                time.sleep(0.1)     # a neighbour's pace, not a flood of its own
            res = a.execute(sid, "me")
            if res["results"] != [{"text/plain": str(i)}]:
                errors.append(f"session {i} lost its state: {res}")
        except Exception as e:  # noqa: BLE001
            errors.append(f"session {i}: {e!r}")

    t0 = time.monotonic()
    h = threading.Thread(target=hostile)
    ns = [threading.Thread(target=neighbour, args=(i,)) for i in range(N_SESSIONS - 1)]
    h.start()
    for t in ns:
        t.start()
    h.join(180)
    for t in ns:
        t.join(180)
    wall = time.monotonic() - t0

    lat_ms = [x * 1000 for x in latencies]
    print(f"\n{N_SESSIONS} sessions created concurrently: p50 {pct(create_lat, 50) * 1000:.0f} ms, "
          f"max {max(create_lat) * 1000:.0f} ms")
    print(f"hostile neighbour: {hostile_log}")
    print(f"{len(lat_ms)} trivial executions in {N_SESSIONS - 1} sessions over {wall:.1f} s: "
          f"p50 {pct(lat_ms, 50):.1f} ms, p99 {pct(lat_ms, 99):.1f} ms, max {max(lat_ms):.1f} ms, "
          f"mean {statistics.mean(lat_ms):.1f} ms")
    assert not errors, errors[:10]
    assert all(n >= 5 for n in per_session_checks), per_session_checks
    assert max(lat_ms) < 10_000, max(lat_ms)
    assert len(hostile_log) == 5, hostile_log
    # Everyone but the hostile sessions is still there, and nothing leaked
    # into the counters: no execution of a neighbour ended badly.  The
    # hostile session is there too if its last step timed out and was
    # interrupted (a memory bomb on a machine too loaded to reach the limit
    # within 3 s) rather than ended.
    kept = [s for s in hostile_last if s and api.get(f"/v1/sessions/{s}").status_code == 200]
    m = api.get("/metrics").text
    assert metric(m, "petri_sessions_live") == N_SESSIONS - 1 + len(kept)
    assert metric(m, "petri_executions_running") == 0
    assert metric(m, "petri_requests_rejected_total", reason="capacity") == 0
