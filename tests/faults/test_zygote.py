"""The warm template (zygote) killed under load: the sessions it forked keep
running with their state (their pid namespaces hang from the template's
pid 1, which outlives it), new sessions are still created (cold meanwhile
is fine), the pool thread starts a new template (logged, counted in
/metrics) and refills the pool; after SIGTERM nothing is left, the old
template's pid 1 included."""
import os
import signal
import threading
import time

from faulthelp import cgroup_dirs, leftovers, metric, mountinfo, write_out
from harness import find_template, runs, start_time, wait_for

POOL = 2
N_OLD = 6
CONFIG = f"""
[server]
max_sessions = 40
max_executions = 40
shutdown_grace_s = 2

[sessions]
pool_size = {POOL}

[limits]
memory_mb = 256
timeout_s = 30
"""

WHICH_PATH = "'warm' if b'--zygote' in open('/proc/self/cmdline', 'rb').read().split(b'\\0') else 'cold'"
DIED = "the warm template died; starting a new one"
READY = "warm template ready"


def test_template_killed_under_load(daemons):
    mounts_before = mountinfo()
    srv = daemons(CONFIG, "zygote")
    api = srv.api()
    m = srv.metrics()
    assert wait_for(lambda: metric(srv.metrics(), "petri_pool_ready") == POOL, 30), m

    tmpl = find_template(srv.pid, preloads=True)
    assert len(tmpl) == 1, f"not one template in the daemon's tree: {tmpl}"
    zpid, zinit = tmpl[0]
    zstart, zinit_start = start_time(zpid), start_time(zinit)

    # Sessions forked from this template, each with its state.
    old = [api.session() for _ in range(N_OLD)]
    for i, sid in enumerate(old):
        r = api.execute(sid, f"import pandas as pd\nx = {i * 7}\n"
                             f"df = pd.DataFrame({{'v': range({i + 3})}})\n" + WHICH_PATH)
        assert r["results"] == [{"text/plain": "'warm'"}], r

    errors = []
    stop = threading.Event()
    counts = [0] * N_OLD

    # Load: every old session answers over and over; one runs a long cell
    # across the kill.
    def load(i):
        a = srv.api()
        k = 0
        try:
            while not stop.is_set():
                k += 1
                r = a.post(f"/v1/sessions/{old[i]}/execute", {"code": f"x + {k} + len(df)"})
                want = str(i * 7 + k + i + 3)
                if r.status_code != 200 or r.json()["results"] != [{"text/plain": want}]:
                    errors.append(f"old session {i}: {r.status_code} {r.text[:300]}")
                    return
                counts[i] += 1
                time.sleep(0.05)    # steady load, not a flood
        except Exception as e:  # noqa: BLE001
            errors.append(f"old session {i}: {e!r}")

    long_out = {}

    def long_cell():
        try:
            long_out["r"] = srv.api().execute(old[1], "import time\ntime.sleep(4)\nx")
        except Exception as e:  # noqa: BLE001
            long_out["r"] = e

    loaders = [threading.Thread(target=load, args=(i,)) for i in range(N_OLD) if i != 1]
    for t in loaders:
        t.start()
    wait_for(lambda: all(c for i, c in enumerate(counts) if i != 1) or errors, 30)   # load under way

    # New sessions are created all along, before, across and after the kill.
    created = []               # (seconds since the kill, path, ok)
    t_kill = [None]

    def creator():
        a = srv.api()
        while not stop.is_set():
            try:
                s = a.session()
                r = a.execute(s, "import pandas as pd\nint(pd.Series([20, 22]).sum())")
                ok = r["status"] == "ok" and r["results"] == [{"text/plain": "42"}]
                path = a.execute(s, WHICH_PATH)["results"][0]["text/plain"].strip("'")
                since = time.monotonic() - t_kill[0] if t_kill[0] else None
                created.append((since, path, ok))
                if not ok:
                    errors.append(f"new session: {r}")
                a.delete(f"/v1/sessions/{s}")
            except Exception as e:  # noqa: BLE001
                errors.append(f"new session: {e!r}")
                return
            time.sleep(0.1)     # one after another, at a pace

    cr = threading.Thread(target=creator)
    cr.start()
    wait_for(lambda: created or errors, 60)     # a new session made before the kill
    lc = threading.Thread(target=long_cell)     # 4 s from now: across the kill
    lc.start()
    wait_for(lambda: api.status(old[1]) == "busy", 10)

    # The template: still the process found above (pid and start time).
    assert find_template(srv.pid, preloads=True) == [(zpid, zinit)]
    assert start_time(zpid) == zstart
    t_kill[0] = time.monotonic()
    os.kill(zpid, signal.SIGKILL)
    died = srv.wait_log(DIED, 30)
    ready = srv.wait_log(READY, 60, count=2)
    restarted = wait_for(lambda: metric(srv.metrics(), "petri_zygote_restarts_total") >= 1, 10)
    pool_back = wait_for(lambda: metric(srv.metrics(), "petri_pool_ready") == POOL, 30)
    t_pool = time.monotonic()
    new_tmpl = find_template(srv.pid, preloads=True)
    # Keep going on the new template: a new session made once the pool is back.
    wait_for(lambda: any(s is not None and s > t_pool - t_kill[0] for s, _, _ in created)
             or errors, 60)
    stop.set()
    for t in [*loaders, lc, cr]:
        t.join(60)

    # Every old session still holds its state.
    state = [api.execute(sid, "(x, len(df))")["results"] for sid in old]
    m = srv.metrics()
    old_init_alive = runs(zinit, zinit_start)

    died_s = died[0] - t_kill[0] if died else None
    ready_s = ready[0] - t_kill[0] if ready else None
    paths = [(round(s, 2) if s is not None else None, p) for s, p, _ in created]
    report = (
        f"template {zpid} (pid 1 {zinit}) killed with {N_OLD} sessions under load:\n"
        f"  'died' logged after {died_s if died_s is None else round(died_s, 2)} s, "
        f"new template ready after {ready_s if ready_s is None else round(ready_s, 2)} s, "
        f"pool full again after {t_pool - t_kill[0]:.2f} s\n"
        f"  new template {new_tmpl}; old pid 1 alive (sessions hang from it): {old_init_alive}\n"
        f"  executions in old sessions meanwhile: {sum(counts)}; long cell: "
        f"{long_out.get('r') if isinstance(long_out.get('r'), Exception) else (long_out.get('r') or {}).get('status')}\n"
        f"  new sessions (s since kill, path): {paths}\n"
        f"  petri_zygote_restarts_total {metric(m, 'petri_zygote_restarts_total')}, "
        f"petri_pool_ready {metric(m, 'petri_pool_ready')}, spawn failures "
        f"{metric(m, 'petri_sandbox_spawn_failures_total')}\n")

    tree = srv.descendants()
    code, took = srv.terminate(30)
    left = wait_for(lambda: not leftovers(srv, tree), 10)
    remaining = leftovers(srv, tree)
    cg_left = cgroup_dirs(srv.pid)
    report += (f"  SIGTERM: exit {code} after {took:.2f} s; old template pid 1 alive after: "
               f"{runs(zinit, zinit_start)}\n")
    print("\n" + report)
    write_out("zygote.txt", report)

    assert not errors, errors[:10]
    assert died, f"no '{DIED}' in the log: {srv.stderr_text()[-2000:]}"
    assert ready, f"no second '{READY}' in the log: {srv.stderr_text()[-2000:]}"
    assert restarted, m
    assert pool_back, m
    assert len(new_tmpl) == 1 and new_tmpl[0][0] != zpid, new_tmpl
    assert all(c > 0 for i, c in enumerate(counts) if i != 1), counts
    assert not isinstance(long_out.get("r"), Exception) and long_out["r"]["status"] == "ok" \
        and long_out["r"]["results"] == [{"text/plain": "7"}], long_out
    assert state == [[{"text/plain": f"({i * 7}, {i + 3})"}] for i in range(N_OLD)], state
    assert any(s is not None and s > 0 for s, _, _ in created), created
    assert all(ok for _, _, ok in created), created
    assert metric(m, "petri_sessions_ended_total", reason="died") == 0, m
    assert old_init_alive, "the old template's pid 1 died with the template (its sessions hang from it)"

    assert code == 0, srv.stderr_text()[-3000:]
    assert not runs(zinit, zinit_start), f"the old template's pid 1 {zinit} outlived the daemon"
    assert left, remaining
    assert not cg_left, cg_left
    assert mountinfo() == mounts_before
