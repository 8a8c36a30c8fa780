"""SIGTERM while streams and executions are in flight: every worker and
every stream lets go of its session before the session manager is freed
(a detached stream thread once outlived it), the daemon exits 0 and
nothing of it remains."""
import threading
import time

from apihelp import SSE, metric, wait_for

SLEEPER = "import time\nprint('started', flush=True)\ntime.sleep(120)"


def test_sigterm_with_streams_and_executions_in_flight(make_server):
    srv = make_server("[server]\nshutdown_grace_s = 1\n")
    api = srv.api()
    sids = [api.session() for _ in range(8)]
    streams, gone = [], []
    for sid in sids[6:]:         # clients that hang up as the signal comes
        gone.append(SSE(srv.url, f"/v1/sessions/{sid}/execute", {"code": SLEEPER},
                        timeout=120))
    for sid in sids[:3]:
        st = SSE(srv.url, f"/v1/sessions/{sid}/execute", {"code": SLEEPER}, timeout=120)
        assert st.status == 200
        streams.append(st)
    for st in streams[:2]:       # the third client never reads
        ev = next(iter(st))
        assert ev[1] == "stdout" and ev[2]["text"].startswith("started"), ev
    answers = []

    def run(path, body):
        try:
            r = api.post(path, body, timeout=120)
            answers.append(r.status_code)
        except Exception as e:   # the connection may close at shutdown
            answers.append(repr(e))

    calls = [threading.Thread(target=run, args=(f"/v1/sessions/{sid}/execute",
                                                {"code": SLEEPER}))
             for sid in sids[3:6]]
    calls.append(threading.Thread(target=run, args=("/v1/execute", {"code": SLEEPER})))
    for t in calls:
        t.start()
    # All nine in flight: the daemon counts them.
    assert wait_for(lambda: metric(api.get("/metrics").text, "petri_executions_running") == 9,
                    60, 0.2), api.get("/metrics").text
    for st in gone:
        st.close()
    t0 = time.monotonic()
    code, err = srv.stop(timeout=60)
    took = time.monotonic() - t0
    assert code == 0, err[-3000:]
    assert "outlived" not in err, err[-3000:]
    assert not srv.leaked, f"processes of petri serve outlived it: {srv.leaked}"
    assert not srv.leaked_cgroups, f"cgroups left behind: {srv.leaked_cgroups}"
    for t in calls:
        t.join(30)
        assert not t.is_alive()
    # The streams ended: a last event or the connection closed.
    for st in streams[:2]:
        events = [e for _, e, _ in st]
        assert not events or events[-1] == "done", events
        st.close()
    streams[2].close()
    print(f"\nshutdown with 3 streams and 3 executions in flight: {took:.1f} s, "
          f"answers {answers}")


def test_sigterm_right_after_stream_clients_hang_up(make_server):
    """Nothing is in flight but the executions of clients that just left:
    the daemon must still wait for them before freeing their sessions."""
    srv = make_server("[server]\nshutdown_grace_s = 0\n")
    api = srv.api()
    gone = []
    for sid in [api.session() for _ in range(6)]:
        st = SSE(srv.url, f"/v1/sessions/{sid}/execute",
                 {"code": "import sys\nwhile True: sys.stdout.write('x' * 4096)"}, timeout=120)
        assert st.status == 200
        gone.append(st)
    for st in gone:              # each one's code is writing
        ev = next(iter(st))
        assert ev[1] == "stdout", ev
    for st in gone:
        st.close()
    code, err = srv.stop(timeout=60)
    assert code == 0, err[-3000:]
    assert "outlived" not in err, err[-3000:]
    assert not srv.leaked, f"processes of petri serve outlived it: {srv.leaked}"
    assert not srv.leaked_cgroups, f"cgroups left behind: {srv.leaked_cgroups}"
