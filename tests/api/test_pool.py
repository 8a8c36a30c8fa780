"""The warm pool follows demand (src/session/pool.c, poolrate.c): its target
grows under a burst of one-shots and falls back to pool_min once idle, never
above pool_max nor the room max_sessions leaves; a pooled sandbox that dies
is replaced at once, not handed out; a configuration whose pool sizes make no
sense is refused, naming them.  Observed through /metrics, with generous
deadlines and no timing assertions."""
import os
import signal
import subprocess
import threading

from apihelp import PETRI, metric, process_tree, wait_for
from harness import find_template, read_text

WARM_S = 120        # a loaded machine may take this long to start the template


def pool(srv):
    """(ready, target, take rate) as /metrics says."""
    m = srv.api().get("/metrics").text
    return (metric(m, "petri_pool_ready"), metric(m, "petri_pool_target"),
            metric(m, "petri_pool_take_rate"))


def settled(srv, ready):
    """Wait until the pool holds `ready` and aims at that many."""
    return wait_for(lambda: pool(srv)[:2] == (ready, ready), WARM_S, 0.2)


def pooled_drivers(srv):
    """{host pid: start time} of the drivers of the daemon's forked
    sandboxes: driver.py processes that are pid 2 of a pid namespace below
    the template's (NSpid of three levels or more)."""
    out = {}
    for pid, start in process_tree(srv.pid).items():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{pid}/status") as f:
                nspid = next(ln.split()[1:] for ln in f if ln.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if any(a.endswith(b"driver.py") for a in cmd) and len(nspid) >= 3 and nspid[-1] == "2":
            out[pid] = start
    return out


def test_target_grows_under_burst_and_shrinks_back(make_server):
    # Forks that cost what the default's do; one-shots that would go to the
    # light template's pool come to this one.
    srv = make_server("[server]\nmax_executions = 8\n"
                      "[sessions]\npool_min = 1\npool_max = 4\npool_window_s = 2\n"
                      "[python]\nlight_template = false\n", light=False)
    api = srv.api()
    api.get("/v1/languages")            # the probe's one-shot is over
    assert settled(srv, 1), pool(srv)

    # A burst: four clients, one-shots back to back.  Four takes at once
    # from a pool of one miss at least three times, whatever the speed
    # of the machine, and the misses raise the target.
    seen, errors, stop = [], [], threading.Event()

    def client():
        a = srv.api()
        while not stop.is_set():
            r = a.post("/v1/execute", {"code": "print(6 * 7)"})
            if r.status_code != 200 or r.json()["stdout"] != "42\n":
                errors.append(r.text[:300])
                return

    clients = [threading.Thread(target=client) for _ in range(4)]
    for t in clients:
        t.start()
    try:
        def grown():
            seen.append(pool(srv))
            return seen[-1][1] > 1
        assert wait_for(grown, WARM_S, 0.05), seen[-20:]
    finally:
        stop.set()
        for t in clients:
            t.join(120)
    assert not errors, errors[:5]
    assert max(s[2] for s in seen) > 0, seen[-20:]

    # Idle: back to pool_min, the extras freed; the rate fades.
    def back():
        seen.append(pool(srv))
        return seen[-1][:2] == (1, 1) and seen[-1][2] < 0.25
    assert wait_for(back, WARM_S, 0.2), seen[-20:]
    # Never above pool_max, neither the target nor what was ready.
    assert all(r <= 4 and t <= 4 for r, t, _ in seen), max(seen)


def test_room_left_by_the_session_cap_bounds_the_pool(make_server):
    srv = make_server("[server]\nmax_sessions = 3\n"
                      "[sessions]\npool_min = 2\npool_max = 8\n")
    api = srv.api()
    assert settled(srv, 2), pool(srv)
    a, b = api.session(), api.session()
    # Two sessions of three: room for one ready sandbox only.
    assert settled(srv, 1), pool(srv)
    api.delete(f"/v1/sessions/{a}")
    api.delete(f"/v1/sessions/{b}")
    assert settled(srv, 2), pool(srv)


def test_dead_pooled_sandbox_is_replaced(make_server):
    srv = make_server("[sessions]\npool_size = 2\n")
    api = srv.api()
    api.get("/v1/languages")
    assert settled(srv, 2), pool(srv)
    drivers = wait_for(lambda: len(pooled_drivers(srv)) == 2 and pooled_drivers(srv), WARM_S)
    assert drivers, pooled_drivers(srv)
    for pid in drivers:
        os.kill(pid, signal.SIGKILL)
    # The pool sees them die and forks two others, without a take.
    fresh = wait_for(lambda: (lambda d: len(d) == 2 and not set(d.items()) & set(drivers.items())
                              and pool(srv)[0] == 2)(pooled_drivers(srv)), WARM_S, 0.2)
    assert fresh, (drivers, pooled_drivers(srv), pool(srv))
    for _ in range(3):
        r = api.post("/v1/execute", {"code": "print(6 * 7)"})
        assert r.status_code == 200 and r.json()["stdout"] == "42\n", r.text
    assert "a warm sandbox died while it waited in the pool" in srv.stderr_text()


def cpu_weight_of(pid):
    """The CPU weight of the cgroup pid is in, on cgroup v2's scale: its
    cpu.weight, or cgroup v1's cpu.shares at 1024 per 100; None where no cpu
    controller says."""
    v2 = None
    for line in (read_text(f"/proc/{pid}/cgroup") or "").splitlines():
        _, ctrls, path = line.split(":", 2)
        if "cpu" in ctrls.split(","):
            shares = read_text(f"/sys/fs/cgroup/cpu{path}/cpu.shares")
            return int(shares) * 100 // 1024 if shares else None
        if ctrls == "":
            v2 = read_text(f"/sys/fs/cgroup{path}/cpu.weight")
    return int(v2) if v2 else None


def test_refills_yield_to_sessions(make_server):
    """Fair CPU (docs/configuration.md): the template and the sandboxes it
    forks ahead have the pool's CPU weight until a session takes one, which
    then has a session's; a sandbox forked for a session has a session's
    from the start."""
    srv = make_server("[sessions]\npool_size = 2\n"
                      "[sandbox]\ncpu_weight = 300\npool_cpu_weight = 25\n")
    api = srv.api()
    api.get("/v1/languages")
    assert settled(srv, 2), pool(srv)
    (template, _), = find_template(srv.pid)
    assert cpu_weight_of(template) == 25
    pooled = wait_for(lambda: len(pooled_drivers(srv)) == 2 and pooled_drivers(srv), WARM_S)
    assert pooled and [cpu_weight_of(p) for p in pooled] == [25, 25], pooled

    sid = api.session()
    assert api.execute(sid, "x = 1")["status"] == "ok"
    assert settled(srv, 2), pool(srv)
    weights = {p: cpu_weight_of(p) for p in pooled_drivers(srv)}
    taken = [p for p, w in weights.items() if w == 300]
    assert len(taken) == 1 and taken[0] in pooled, (pooled, weights)
    assert sorted(weights.values()) == [25, 25, 300], weights

    # Limits other than the defaults: forked for it, never pooled.
    other = api.session(limits={"memory_mb": 300})
    assert api.execute(other, "x = 1")["status"] == "ok"
    weights = {p: cpu_weight_of(p) for p in pooled_drivers(srv)}
    assert sorted(weights.values()) == [25, 25, 300, 300], weights


def test_bad_pool_sizes_are_refused(tmp_path):
    cases = [
        ("pool_size = 2\npool_max = 4\n", "set either pool_size or pool_min and pool_max"),
        ("pool_min = 5\npool_max = 4\n", "pool_min = 5 in [sessions] is above pool_max = 4"),
        ("pool_min = 9\n", "above pool_max = 8 (its default): set pool_max too"),
        ("pool_max = 1001\n", "bad value or unknown setting 'pool_max = 1001'"),
        ("pool_window_s = 0\n", "'pool_window_s = 0'"),
    ]
    for i, (sessions, message) in enumerate(cases):
        cfg = tmp_path / f"bad-{i}.ini"
        cfg.write_text("[sessions]\n" + sessions)
        p = subprocess.run([PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(cfg)],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "STATE_DIRECTORY": str(tmp_path / "state")})
        assert p.returncode != 0, (sessions, p.stdout, p.stderr)
        assert message in p.stderr, (sessions, p.stderr)
    # The uid range must hold the pool at its largest.
    cfg = tmp_path / "uids.ini"
    cfg.write_text("[server]\nmax_sessions = 10\n[sessions]\npool_max = 5\n"
                   "[sandbox]\nuid_count = 17\n")
    p = subprocess.run([PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "STATE_DIRECTORY": str(tmp_path / "state")})
    assert p.returncode != 0 and "max_sessions + pool_max + 6 = 21" in p.stderr, p.stderr
