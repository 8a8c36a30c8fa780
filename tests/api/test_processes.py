"""Processes that outlive one execution: a server started in the background
in one execution and reached over the session's own loopback from the next;
GET /v1/sessions/{id}/processes lists them, DELETE .../processes/{pid}
signals one; petri's own (pid 1, the driver) are refused; nothing outlives
the session; a sandbox with a thousand processes gets a bounded answer.

Readiness is waited for inside the sandbox (a connect loop with a bound),
and a signalled process's end by polling the listing: nothing asserts on how
long anything took.
"""
import json
import os
import secrets
import subprocess
import threading

import pytest

from apihelp import attacked_server, error_of, still_alive, wait_for

# Wait inside the sandbox until 127.0.0.1:PORT accepts, then GET / once.
FETCH = """
import socket, time, urllib.request
for _ in range(300):
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
        break
    except OSError:
        time.sleep(0.05)
with urllib.request.urlopen("http://127.0.0.1:{port}/{path}", timeout=10) as r:
    print(r.status, r.read().decode())
"""

REFUSED = """
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    print("open")
except ConnectionRefusedError:
    print("refused")
"""


def out(res):
    assert res["status"] == "ok", res
    return res["stdout"]


def listing(api, sid):
    r = api.get(f"/v1/sessions/{sid}/processes")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"processes", "count", "truncated"}, body
    return body


def find(api, sid, *words):
    """The listed process whose command holds every word, or None."""
    for p in listing(api, sid)["processes"]:
        if all(w in p["command"] for w in words):
            return p
    return None


def gone(api, sid, pid):
    """pid is no longer listed, or listed only as a zombie its parent has
    not waited for yet."""
    return all(p["pid"] != pid or p["state"] == "zombie"
               for p in listing(api, sid)["processes"])


def host_processes(marker):
    """{host pid: start time} of the processes whose command line holds
    marker, and their host uids."""
    found, uids = {}, set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if marker.encode() not in f.read():
                    continue
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            with open(f"/proc/{d}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        found[int(d)] = int(st[st.rindex(")") + 2:].split()[19])
        uids.add(uid)
    return found, uids


def processes_of_uid(uid):
    """{host pid: start time} of every process running as uid."""
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                if next(int(line.split()[1]) for line in f if line.startswith("Uid:")) != uid:
                    continue
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except (OSError, StopIteration):
            continue
        found[int(d)] = int(st[st.rindex(")") + 2:].split()[19])
    return found


# ---- a server across executions ------------------------------------------------

@pytest.mark.parametrize("fixture", ["server", "cold_server"])
def test_a_background_server_serves_the_next_execution(request, fixture):
    api = request.getfixturevalue(fixture).api()
    sid = api.session(language="bash")
    api.execute(sid, "mkdir -p site && echo hello from the sandbox > site/index.txt")
    # Started in the background by one execution, which ends at once.
    res = api.execute(sid, "cd site && python3 -m http.server 8000 --bind 127.0.0.1 "
                           ">../server.log 2>&1 &\necho started")
    assert out(res) == "started\n"
    # The next execution, another language even, reaches it over loopback.
    fetched = out(api.execute(sid, FETCH.format(port=8000, path="index.txt"),
                              language="python"))
    assert fetched == "200 hello from the sandbox\n\n", fetched
    # Listed, with its command, as the sandbox numbers it.
    p = find(api, sid, "http.server", "8000")
    assert p, listing(api, sid)
    assert p["command"][:3] == ["python3", "-m", "http.server"], p
    assert p["name"] == "python3" and p["pid"] > 2 and p["ppid"] >= 1, p
    assert p["state"] in ("sleeping", "running"), p
    assert p["rss_bytes"] > 0 and p["cpu_ms"] >= 0 and p["elapsed_s"] >= 0, p
    assert p["started_at"].endswith("Z") and p["threads"] >= 1, p
    # Killed: then gone from the list, and nothing answers on its port.
    r = api.delete(f"/v1/sessions/{sid}/processes/{p['pid']}")
    assert r.status_code == 202, r.text
    assert r.json() == {"pid": p["pid"], "signal": "TERM"}
    assert wait_for(lambda: gone(api, sid, p["pid"]), 30), listing(api, sid)
    # The port closes once the last of its threads has gone (http.server runs
    # a thread per request), which may come a moment after the listing shows
    # the process gone or a zombie.
    assert wait_for(lambda: out(api.execute(sid, REFUSED.format(port=8000),
                                            language="python")) == "refused\n", 30)
    # The session goes on.
    assert out(api.execute(sid, "cat server.log | grep -c 'GET /index.txt'")) == "1\n"


def test_a_subprocess_of_python_stays_and_is_killed(api):
    sid = api.session()
    out(api.execute(sid, "import subprocess, sys\n"
                         "server = subprocess.Popen([sys.executable, '-m', 'http.server', "
                         "'8001', '--bind', '127.0.0.1'], stdout=subprocess.DEVNULL, "
                         "stderr=subprocess.DEVNULL)\n"
                         "print(server.pid)"))
    assert out(api.execute(sid, FETCH.format(port=8001, path=""))).startswith("200 ")
    p = find(api, sid, "http.server", "8001")
    assert p and p["ppid"] == 3, p     # a child of the interpreter
    r = api.delete(f"/v1/sessions/{sid}/processes/{p['pid']}?signal=KILL")
    assert r.status_code == 202 and r.json()["signal"] == "KILL", r.text
    # A zombie until its parent waits for it, as anywhere.
    assert wait_for(lambda: gone(api, sid, p["pid"]), 30), listing(api, sid)
    assert out(api.execute(sid, "print(server.wait())")) == "-9\n"
    assert find(api, sid, "http.server") is None, listing(api, sid)


def test_listing_while_an_execution_runs(server, api):
    """No claim: an agent may look at what a running execution started."""
    sid = api.session(language="bash", limits={"timeout_s": 120})
    marker = f"{secrets.randbelow(10**6)}.5"
    done = {}
    t = threading.Thread(target=lambda: done.update(
        r=server.api().execute(sid, f"sleep {marker}", timeout_s=120)))
    t.start()
    try:
        p = wait_for(lambda: find(api, sid, "sleep", marker), 60)
        assert p, listing(api, sid)
        assert api.delete(f"/v1/sessions/{sid}/processes/{p['pid']}").status_code == 202
    finally:
        t.join(120)
    # The execution saw its sleep end by the signal.
    assert done["r"]["exit_code"] == 143, done["r"]


# ---- what is refused ---------------------------------------------------------------

@pytest.mark.parametrize("fixture", ["server", "cold_server"])
def test_petri_own_processes_are_refused(request, fixture):
    api = request.getfixturevalue(fixture).api()
    sid = api.session()
    # The keeper is pid 2 on either path, pid 1 its parent, and the
    # interpreter its child, which ends with it.
    assert out(api.execute(sid, "import os; print(os.getpid(), os.getppid())")) == "3 2\n"
    for pid, word in ((1, "init"), (2, "driver"), (3, "driver")):
        for query in ("", "?signal=KILL"):
            r = api.delete(f"/v1/sessions/{sid}/processes/{pid}{query}")
            assert r.status_code == 403, r.text
            e = error_of(r.content)
            assert e["code"] == "process_protected" and word in e["message"], e
    # None is listed, and all live on (the interpreter's variables too).
    api.execute(sid, "import subprocess\nchild = subprocess.Popen(['sleep', '60'])")
    assert [p["pid"] for p in listing(api, sid)["processes"]] == [4], listing(api, sid)
    assert out(api.execute(sid, "print(child.pid)")) == "4\n"


def test_a_process_made_a_child_of_the_keeper_is_listed(api):
    # CLONE_PARENT makes a sibling of the interpreter, a child of the keeper
    # (pid 2): it is the code's, listed and signalled as any other; only
    # the interpreter itself is protected.
    sid = api.session()
    pid = int(out(api.execute(sid, "import ctypes, os, signal\n"
                                   "libc = ctypes.CDLL(None, use_errno=True)\n"
                                   "pid = libc.syscall(56, 0x8000 | signal.SIGCHLD, 0, 0, 0, 0)\n"
                                   "if pid == 0:\n"
                                   "    os.execv('/bin/sleep', ['sleep', '600'])\n"
                                   "print(pid)")))
    p = wait_for(lambda: find(api, sid, "sleep", "600"), 30)
    assert p and p["pid"] == pid and p["ppid"] == 2, listing(api, sid)
    r = api.delete(f"/v1/sessions/{sid}/processes/{pid}?signal=KILL")
    assert r.status_code == 202, r.text


def test_unknown_pids_threads_and_bad_requests(api):
    sid = api.session()
    r = api.delete(f"/v1/sessions/{sid}/processes/999999")
    assert r.status_code == 404 and error_of(r.content)["code"] == "process_not_found", r.text
    # A thread of the driver has a number too, but it is no process.
    tid = int(out(api.execute(sid, "import threading, time\n"
                                   "t = threading.Thread(target=time.sleep, args=(600,), "
                                   "daemon=True)\nt.start()\nprint(t.native_id)")))
    r = api.delete(f"/v1/sessions/{sid}/processes/{tid}?signal=KILL")
    assert r.status_code == 404, r.text
    assert out(api.execute(sid, "print(t.is_alive())")) == "True\n"
    for pid in ("abc", "0", "-3", "1e3", "99999999999", "%00"):
        r = api.delete(f"/v1/sessions/{sid}/processes/{pid}")
        assert r.status_code == 400, (pid, r.text)
        assert error_of(r.content)["code"] == "invalid_request", (pid, r.text)
    r = api.delete(f"/v1/sessions/{sid}/processes/999999?signal=SEGV")
    assert r.status_code == 400 and "signal" in error_of(r.content)["message"], r.text
    r = api.post(f"/v1/sessions/{sid}/processes")
    assert r.status_code == 405 and r.headers["Allow"] == "GET", r.text
    r = api.get(f"/v1/sessions/{sid}/processes/5")
    assert r.status_code == 405 and r.headers["Allow"] == "DELETE", r.text
    for method, path in (("GET", "processes"), ("DELETE", "processes/5")):
        r = api.request(method, f"/v1/sessions/ses_00000000000000000000000000000000/{path}")
        assert r.status_code == 404 and error_of(r.content)["code"] == "session_not_found"


# ---- nothing outlives the session --------------------------------------------------

# A process listed right after the execution that started it ends may still
# be in its execve (its command line is empty meanwhile): tests wait for the
# command they look for.

def background_processes_end_with_the_session(api):
    sid = api.session(language="bash")
    marker = f"{secrets.randbelow(10**6)}.25"
    out(api.execute(sid, f"sleep {marker} &\nsetsid sleep {marker} &\n"
                         f"nohup sleep {marker} >/dev/null 2>&1 &\necho ok"))
    assert wait_for(lambda: len(host_processes(marker)[0]) == 3, 30), host_processes(marker)
    _, uids = host_processes(marker)
    assert len(uids) == 1, uids
    before = processes_of_uid(uids.pop())
    assert len(listing(api, sid)["processes"]) == 3, listing(api, sid)
    assert api.delete(f"/v1/sessions/{sid}").status_code == 204
    # Every process that ran as the sandbox's uid is gone (a later sandbox
    # may be given the uid again: those were started after).
    assert wait_for(lambda: not still_alive(before), 30), still_alive(before)
    r = api.get(f"/v1/sessions/{sid}/processes")
    assert r.status_code == 404, r.text


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own per sandbox needs root")
def test_background_processes_end_with_the_session(api):
    background_processes_end_with_the_session(api)


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own per sandbox needs root")
def test_without_cgroups_the_same(make_server):
    """rlimits only: the listing, a signal and the end with the session."""
    srv = make_server("[sandbox]\ncgroups = false\n")
    api = srv.api()
    sid = api.session(language="bash")
    out(api.execute(sid, "sleep 1000 &\necho ok"))
    # Until the child has exec'd sleep: the execution may end before.
    p = wait_for(lambda: find(api, sid, "sleep", "1000"), 30)
    assert p, listing(api, sid)
    assert api.delete(f"/v1/sessions/{sid}/processes/{p['pid']}").status_code == 202
    assert wait_for(lambda: find(api, sid, "sleep") is None, 30), listing(api, sid)
    assert api.delete(f"/v1/sessions/{sid}/processes/1").status_code == 403
    background_processes_end_with_the_session(api)


# ---- within the session's limits ---------------------------------------------------

def test_background_processes_count_against_the_pids_limit(api):
    sid = api.session(limits={"pids": 16})
    started = out(api.execute(sid, """
import os
n = 0
try:
    for _ in range(40):
        if os.fork() == 0:
            os.execv('/bin/sleep', ['sleep', '1000'])
        n += 1
except OSError as e:
    print('refused after', n, e.errno == 11)
"""))
    assert started.startswith("refused after ") and started.endswith(" True\n"), started
    n = int(started.split()[2])
    # pid 1 and the driver count too.
    body = listing(api, sid)
    assert body["count"] == n and 0 < n <= 14, (n, body)
    assert out(api.execute(sid, "print('still')")) == "still\n"


def test_background_memory_is_the_sessions(api):
    """A background process's memory is charged to the session: the next
    execution's peak includes the 200 MiB it holds."""
    sid = api.session(language="bash", limits={"memory_mb": 512})
    out(api.execute(sid, "python3 -c 'import time; b = bytearray(200 << 20); "
                         "b[::4096] = b\"x\" * len(b[::4096]); open(\"held\", \"w\").close(); "
                         "time.sleep(1000)' &"))
    assert out(api.execute(sid, "while [ ! -e held ]; do sleep 0.05; done; echo held")) == "held\n"
    res = api.execute(sid, "true")
    if res["memory_peak_bytes"] == 0:
        pytest.skip("no memory accounting here (no cgroups)")
    assert res["memory_peak_bytes"] >= 200 << 20, res
    p = find(api, sid, "python3", "-c")
    assert p and p["rss_bytes"] >= 200 << 20, p


def test_a_thousand_processes_and_hostile_commands_stay_bounded(tmp_path):
    """1100 processes (more than a listing describes), one with a 4000-byte
    command line, one whose command is not UTF-8: the answer describes 1024,
    counts them all, cuts the long command and is valid JSON; the daemon,
    in a memory cgroup of its own, is not harmed."""
    config = "[max_limits]\npids = 1200\n"
    with attacked_server(tmp_path, "processes", 1536 << 20, config) as srv:
        api = srv.api()
        sid = api.session(language="bash", limits={"pids": 1200, "memory_mb": 1024,
                                                            "timeout_s": 300})
        script = ('(exec -a "$(head -c 4000 /dev/zero | tr "\\0" x)" sleep 1000) &\n'
                  "(exec -a $'\\xff\\xfe\\x01name' sleep 1000) &\n"
                  "for i in $(seq 1100); do sleep 1000 & done\n"
                  # every child has exec'd sleep (its command line is
                  # empty while it does)
                  "until [ \"$(pgrep -xc sleep)\" -ge 1102 ]; do sleep 0.1; done\n"
                  "echo started")
        assert out(api.execute(sid, script, timeout_s=300)) == "started\n"
        r = api.get(f"/v1/sessions/{sid}/processes")
        assert r.status_code == 200, r.text[:500]
        body = r.json()
        assert len(body["processes"]) == 1024 and body["truncated"] is True, len(r.content)
        assert body["count"] >= 1100, body["count"]
        # 1024 entries of a few hundred bytes each, and the long one cut.
        assert len(r.content) < 2 << 20, len(r.content)
        pids = [p["pid"] for p in body["processes"]]
        assert pids == sorted(pids)
        long = [p for p in body["processes"] if p["command_truncated"]]
        assert len(long) == 1 and long[0]["command"][0] == "x" * 512, long
        odd = [p for p in body["processes"] if p["command"][0].endswith("name")]
        assert odd and odd[0]["command"][0] == "\ufffd\ufffd\x01name", odd
        # One of them can still be stopped, and the session used.
        assert api.delete(f"/v1/sessions/{sid}/processes/{pids[-1]}?signal=KILL").status_code == 202
        assert out(api.execute(sid, "echo alive")) == "alive\n"
        assert api.delete(f"/v1/sessions/{sid}").status_code == 204
