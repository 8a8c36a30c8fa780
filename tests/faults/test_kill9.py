"""kill -9 of the daemon in the middle of executions: its sandboxes die with
it (pid 1 has a parent-death signal and watches a pipe only the daemon
holds), within seconds; the next daemon's start-up sweep removes the dead
one's cgroups and the uid leases it held; no mount is left; new sessions
work, warm and cold."""
import fcntl
import os
import threading
import time

import pytest

from faulthelp import leftovers, mountinfo, sandbox_tree, write_out
from harness import SSE, cgroup_dirs, petri_lock, proc_status, wait_for

CONFIG = """
[server]
max_sessions = 20
max_executions = 20

[sessions]
pool_size = 2

[limits]
memory_mb = 256
timeout_s = 60
"""

# Which path a session took, seen from inside: a warm sandbox runs the
# template's forked driver (`driver.py --zygote`), a cold one a fresh one.
WHICH_PATH = "'warm' if b'--zygote' in open('/proc/self/cmdline', 'rb').read().split(b'\\0') else 'cold'"


COLD = CONFIG.replace("pool_size = 2", "pool_size = 2\nwarm = false")
LEASES = "/run/petri/uids"          # a lock file per host uid in use (src/jail/lease.h)

# The victim's uids are its own.  Every daemon leases from uid_base + 1000
# up, and other daemons may run beside this one (another test's, another
# run's on a shared machine) and be killed at their end, their leases left
# for the next start to sweep: in the shared range, one of theirs could be
# taken for one of the victim's.
VICTIM_UIDS = {"warm": "\n[sandbox]\nuid_base = 2100000000\n",
               "cold": "\n[sandbox]\nuid_base = 2100100000\n"}


def host_uids(pids):
    """The real uids these processes run as (those still there)."""
    return {int(st["Uid"].split()[0]) for st in map(proc_status, pids) if st and "Uid" in st}


def _unheld(uid):
    """The inode of uid's lease file if no process holds it, else None.  As
    the daemon does (lease.c, still_linked): a lock granted on a file that
    was unlinked meanwhile (a lease given back) is no lease."""
    path = os.path.join(LEASES, str(uid))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        st = os.fstat(fd)
        try:
            same = os.stat(path).st_ino == st.st_ino and st.st_nlink > 0
        except FileNotFoundError:
            same = False
        return st.st_ino if same else None
    except BlockingIOError:
        return None               # held: a sandbox of a living daemon has it
    finally:
        os.close(fd)


def unheld_leases(uids):
    """The lease files of these uids that no process holds, twice 0.5 s
    apart and the same file both times (a daemon creates a lease file, then
    locks it): what a dead daemon left and nobody swept."""
    first = {uid: ino for uid in uids if (ino := _unheld(uid)) is not None}
    if first:
        time.sleep(0.5)
    return sorted(uid for uid, ino in first.items() if _unheld(uid) == ino)


@pytest.mark.parametrize("victim", ["warm", "cold"])
def test_kill9_in_the_middle_of_executions(daemons, victim):
    mounts_before = mountinfo()
    srv = daemons((CONFIG if victim == "warm" else COLD) + VICTIM_UIDS[victim], f"victim-{victim}")
    api = srv.api()
    sids = [api.session() for _ in range(5)]
    bash_sid = api.session(language="bash")
    answers = {}

    def run(key, sid, code, **kw):
        try:
            answers[key] = srv.api().post(f"/v1/sessions/{sid}/execute", {"code": code, **kw},
                                          timeout=90)
        except Exception as e:  # noqa: BLE001  (the connection dies with the daemon)
            answers[key] = e

    threads = [threading.Thread(target=run, args=(f"sleep{i}", sid, "import time\ntime.sleep(30)"))
               for i, sid in enumerate(sids[:4])]
    threads.append(threading.Thread(target=run, args=(
        "bash", bash_sid, "sleep 30 & (sleep 30; echo x) & sleep 30; wait")))
    for t in threads:
        t.start()
    sse = SSE(srv.url, f"/v1/sessions/{sids[4]}/execute",
              {"code": "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.1)"},
              timeout=90)
    assert sse.status == 200
    events = iter(sse)
    first = next(events)
    assert first[1] == "stdout", first
    # Sandboxes being made at the moment of the kill: sessions (warm, and
    # forked with other limits) and one-shot runs, over and over.
    churn_stop = threading.Event()
    churn = {"created": 0, "oneshots": 0}

    def churner(kind):
        a = srv.api()
        while not churn_stop.is_set():
            try:
                if kind == "oneshot":
                    a.post("/v1/execute", {"code": "1+1"}, timeout=30)
                    churn["oneshots"] += 1
                else:
                    body = {} if kind == "session" else {"limits": {"memory_mb": 200}}
                    r = a.post("/v1/sessions", body, timeout=30)
                    if r.status_code == 201:
                        churn["created"] += 1
                        a.delete(f"/v1/sessions/{r.json()['id']}", timeout=30)
            except Exception:  # noqa: BLE001  (the daemon is gone)
                return

    churners = [threading.Thread(target=churner, args=(k,)) for k in ("session", "limits", "oneshot")]
    for t in churners:
        t.start()
    busy = wait_for(lambda: all(api.status(s) == "busy" for s in [*sids, bash_sid]), 30)
    assert busy, [api.status(s) for s in [*sids, bash_sid]]
    children = wait_for(lambda: api.process_names(bash_sid).count("sleep") == 3, 30)
    assert children, api.process_names(bash_sid)      # the bash children started
    tree = srv.descendants()
    sandboxes = sandbox_tree(tree)
    dead_tag, dead_pid = srv.tag, srv.pid
    dead_cgroups = cgroup_dirs(dead_pid)
    dead_uids = host_uids(sandboxes)
    # 6 sessions (+ 2 pooled + the template when warm): a pid 1 and a
    # driver each
    assert len(sandboxes) >= 2 * (6 if victim == "cold" else 9), sandboxes
    assert dead_cgroups, "the daemon made no cgroups?"

    # No other petri may start (and sweep) until the new daemon here does.
    with petri_lock(exclusive=True):
        t0 = time.monotonic()
        srv.kill()
        left = wait_for(lambda: not leftovers(srv, tree), 15, 0.05)
        cleanup_s = time.monotonic() - t0
        remaining = leftovers(srv, tree)
        cgroups_after_kill = cgroup_dirs(dead_pid)

        t1 = time.monotonic()
        new = daemons(CONFIG, "restarted", lock=False)
        swept = wait_for(lambda: not cgroup_dirs(dead_pid), 10)
        sweep_s = time.monotonic() - t1
        not_swept = cgroup_dirs(dead_pid)
        stale_leases = unheld_leases(dead_uids)

    churn_stop.set()
    sse.close()
    for t in threads + churners:
        t.join(30)

    # New sessions work on the restarted daemon (warm), and on a cold one.
    a = new.api()
    s = a.session()
    warm_r = a.execute(s, "import pandas as pd\nx = int(pd.Series([1, 2, 3]).sum())\n" + WHICH_PATH)
    warm_r2 = a.execute(s, "x * 2")
    cold = daemons(COLD, "cold")
    c = cold.api()
    cs = c.session()
    cold_r = c.execute(cs, "import pandas as pd\nx = int(pd.Series([1, 2, 3]).sum())\n" + WHICH_PATH)
    cold_r2 = c.execute(cs, "x * 2")

    report = (f"[{victim} victim] kill -9 with 6 executions in flight (5 python, 1 bash; 1 streaming), "
              f"{len(sandboxes)} sandbox processes, sessions and one-shots being made "
              f"({churn}):\n"
              f"  nothing left after {cleanup_s:.2f} s (processes by tree, by uid+cgroup, "
              f"by cgroup.procs)\n"
              f"  cgroups of the dead daemon after the kill: {len(cgroups_after_kill)}; "
              f"swept by the next daemon within {sweep_s:.2f} s of its start\n")
    print("\n" + report)
    write_out(f"kill9-{victim}.txt", report)

    assert left, f"left {cleanup_s:.1f} s after kill -9: {remaining}"
    assert swept, f"the restarted daemon did not sweep {dead_tag}*: {not_swept}"
    assert dead_uids and not stale_leases, f"uid leases of the dead daemon left: {stale_leases}"
    assert mountinfo() == mounts_before, sorted(set(mountinfo()) - set(mounts_before))
    assert warm_r["status"] == "ok" and warm_r["results"] == [{"text/plain": "'warm'"}], warm_r
    assert warm_r2["results"] == [{"text/plain": "12"}], warm_r2
    assert cold_r["status"] == "ok" and cold_r["results"] == [{"text/plain": "'cold'"}], cold_r
    assert cold_r2["results"] == [{"text/plain": "12"}], cold_r2
    # The clients in flight got an error (the daemon died), never a hang.
    assert all(not t.is_alive() for t in threads)
    assert all(isinstance(answers.get(k), Exception) for k in answers), answers
    assert len(answers) == 5
    # And the new daemons stop cleanly.
    for d in (new, cold):
        tree = d.descendants()
        code, took = d.terminate(30)
        assert code == 0, d.stderr_text()[-3000:]
        assert wait_for(lambda: not leftovers(d, tree), 10), leftovers(d, tree)
        assert not cgroup_dirs(d.pid), cgroup_dirs(d.pid)
