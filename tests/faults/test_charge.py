"""Everything a session holds is charged to that session's cgroup.

  * An upload (PUT /v1/sessions/{id}/files/{path}) is written by a process
    inside the session's cgroups: 512 MiB streamed into a memory_mb=64
    session is refused with a clear error, the session's cgroup (not the
    daemon's) carried the pages while it lasted, the daemon's RSS and its
    cgroup stayed small, host Shmem did not grow by the upload, the file it
    was to replace is untouched and nothing half-written is left.
  * The upload's writer counts against the session's pids limit.
  * Loopback TCP buffers queued by code in a session are the session's:
    v1 memory.kmem.tcp.usage_in_bytes, v2 memory.stat "sock" inside
    memory.current, and the session's limit binds them.

The daemon runs in a memory cgroup of the test's own (tests/memcg.py).  On
cgroup v1 its sandboxes' cgroups are children of that cgroup (petri's
default parent is its own cgroup + /petri), so "the daemon's own" memory is
the cgroup's local statistics (memory.stat rss + cache), not its
hierarchical usage.
"""
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

import memcg
from faulthelp import Daemon, cgroup_procs
from harness import answer_on, cgroup_dirs, ended, poll, read_text, unread, wait_for

MiB = 1 << 20

pytestmark = pytest.mark.skipif(memcg.available() is not None,
                                reason=memcg.available() or "")

CONFIG = """
[server]
max_file_mb = 1024
max_body_mb = 1024
[sessions]
pool_size = 0
warm = false
[limits]
memory_mb = 64
disk_mb = 1024
pids = 64
"""


def _int(path):
    text = read_text(path)
    return int(text) if text and text.strip().isdigit() else 0


def _keyed(path, key):
    for line in (read_text(path) or "").splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    return 0


def host_shmem():
    for line in (read_text("/proc/meminfo") or "").splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1]) * 1024
    return 0


def vm_rss(pid):
    for line in (read_text(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def daemon_own_bytes(cg):
    """What the daemon's cgroup holds for the daemon itself."""
    if cg.version == 1:
        stat = os.path.join(cg.path, "memory.stat")
        return _keyed(stat, "rss") + _keyed(stat, "cache")
    return _int(os.path.join(cg.path, "memory.current"))


@pytest.fixture
def daemon(tmp_path):
    started = []

    def start(config=CONFIG, cg_limit=768 * MiB):
        cg = memcg.MemoryCgroup("charge", cg_limit)
        d = Daemon(tmp_path, config, f"charge-{len(started)}", wait_warm=False,
                   preexec_fn=cg.enter)
        d.cg = cg
        started.append(d)
        # At start the daemon finds what its sandboxes have by running one
        # (the probe, GET /v1/languages): wait for it and for its cgroups to
        # go, so that the one a test sees appear is its session's.
        for _ in range(10):         # each answer waits up to 20 s for the probe
            found = d.api().get("/v1/languages", timeout=90)
            assert found.status_code == 200, found.text
            if "error" not in found.json():
                break
        assert "error" not in found.json(), f"the probe did not end: {found.text[-2000:]}"
        assert wait_for(lambda: not cgroup_dirs(d.pid), 30), cgroup_dirs(d.pid)
        return d

    yield start
    for d in started:
        code, _ = d.terminate(30)
        if code is None:
            d.kill()
        wait_for(lambda: not cgroup_procs(cgroup_dirs(d.pid)), 10)
        for path in cgroup_dirs(d.pid):
            try:
                os.rmdir(path)
            except OSError:
                pass
        try:
            os.rmdir(os.path.join(d.cg.path, "petri"))   # v1: petri's parent inside ours
        except OSError:
            pass
        d.cg.close()


class SessionCg:
    """The memory cgroup of the one sandbox a session has (no pool, no
    warm template: a new session is a new cgroup)."""

    def __init__(self, d, before):
        new = [p for p in cgroup_dirs(d.pid) if p not in before and
               (d.cg.version == 2 or "/memory/" in p)]
        assert len(new) == 1, f"expected one new sandbox cgroup, got {new}"
        self.path = new[0]
        self.v1 = d.cg.version == 1

    def f(self, v1, v2):
        return os.path.join(self.path, v1 if self.v1 else v2)

    def usage(self):
        return _int(self.f("memory.usage_in_bytes", "memory.current"))


def new_session(d, api, **limits):
    before = set(cgroup_dirs(d.pid))
    sid = api.session(limits=limits) if limits else api.session()
    return sid, SessionCg(d, before)


def chunks(total, size=MiB):
    block = b"z" * size
    for _ in range(total // size):
        yield block


class Sampler:
    """Polls f() in a thread; .max is the largest value seen."""

    def __init__(self, f):
        self.f, self.max, self._stop = f, f(), threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            self.max = max(self.max, self.f())
            time.sleep(0.01)    # a hundred samples a second

    def stop(self):
        self._stop.set()
        self._t.join()
        self.max = max(self.max, self.f())
        return self.max


def test_upload_is_charged_to_the_session(daemon):
    d = daemon()
    api = d.api()
    sid, scg = new_session(d, api)
    old = b"the old content\n" * 1000
    r = api.request("PUT", f"/v1/sessions/{sid}/files/data/f.bin", data=old)
    assert r.status_code == 201, r.text

    shmem0, rss0, own0 = host_shmem(), vm_rss(d.pid), daemon_own_bytes(d.cg)
    samplers = [Sampler(host_shmem), Sampler(lambda: daemon_own_bytes(d.cg)),
                Sampler(scg.usage)]
    r = api.request("PUT", f"/v1/sessions/{sid}/files/data/f.bin", data=chunks(512 * MiB),
                    timeout=600)
    shmem_max, own_max, session_max = (s.stop() for s in samplers)
    hwm = memcg.peak_rss(d.pid)
    print(f"\nupload 512 MiB into memory_mb=64: {r.status_code} {r.text[:200]}; "
          f"session cgroup max {session_max / MiB:.1f} MiB; daemon own cgroup +{(own_max - own0) / MiB:.1f} MiB, "
          f"VmHWM {hwm / MiB:.1f} MiB (RSS before {rss0 / MiB:.1f}); host Shmem "
          f"+{(shmem_max - shmem0) / MiB:.1f} MiB")

    assert d.running(), f"the daemon died: {d.stderr_text()[-2000:]}"
    # Refused, or the session ended; either way saying so.
    err = r.json()["error"]
    if r.status_code == 410:
        ended = True
        assert err["message"].startswith("out of memory: an upload went over the session's "
                                          "memory limit (64 MiB)"), err
    else:
        assert r.status_code == 413 and err["code"] == "out_of_memory", r.text
        assert "memory limit (64 MiB" in err["message"], err
        ended = "was ended" in err["message"]
        assert ended or "was refused" in err["message"], err
    # The session's cgroup carried the upload up to its limit...
    assert session_max >= 32 * MiB
    # ...and neither the daemon nor the host's shared memory did.
    assert own_max - own0 < 48 * MiB
    assert hwm - rss0 < 48 * MiB
    assert shmem_max - shmem0 < 256 * MiB

    if ended:
        r = api.get(f"/v1/sessions/{sid}")
        assert r.status_code == 410 and "out of memory: an upload" in r.text, r.text
        sid, scg = new_session(d, api)
    else:
        # The old file was never replaced by a part of the new one, and no
        # temporary file holds the session's memory.
        r = api.get(f"/v1/sessions/{sid}/files/data/f.bin")
        assert r.status_code == 200 and r.content == old
        r = api.get(f"/v1/sessions/{sid}/files", params={"path": "data"})
        assert [f["path"] for f in r.json()["files"]] == ["data/f.bin"], r.text
        assert scg.usage() < 32 * MiB
    # A normal upload still works, streamed too.
    r = api.request("PUT", f"/v1/sessions/{sid}/files/data/f.bin", data=chunks(8 * MiB))
    assert r.status_code == 201 and r.json()["size"] == 8 * MiB, r.text
    out = api.execute(sid, "import os; print(os.path.getsize('/work/data/f.bin'), "
                      "open('/work/data/f.bin','rb').read() == b'z' * (8 << 20))")
    assert out["stdout"].split() == [str(8 * MiB), "True"], json.dumps(out)


def test_upload_counts_against_the_pids_limit(daemon):
    d = daemon()
    api = d.api()
    sid, _ = new_session(d, api, pids=16)
    out = api.execute(sid, """
import subprocess
kids = []
while True:
    try:
        kids.append(subprocess.Popen(['sleep', '600']))
    except OSError:
        break
print(len(kids))
""")
    assert out["status"] == "ok" and int(out["stdout"]) > 0, out
    r = api.request("PUT", f"/v1/sessions/{sid}/files/x.txt", data=b"hello")
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "too_many_processes" and "(16)" in err["message"], err
    assert api.get(f"/v1/sessions/{sid}/files/x.txt").status_code == 404

    out = api.execute(sid, "[k.kill() for k in kids]; [k.wait() for k in kids]; print('ok')")
    assert out["stdout"].strip() == "ok", out
    r = api.request("PUT", f"/v1/sessions/{sid}/files/x.txt", data=b"hello")
    assert r.status_code == 201, r.text
    assert api.get(f"/v1/sessions/{sid}/files/x.txt").content == b"hello"


def test_upload_refused_or_cut_short_keeps_the_old_file(daemon):
    d = daemon()
    api = d.api()
    sid, cg = new_session(d, api, memory_mb=256, disk_mb=16)
    r = api.request("PUT", f"/v1/sessions/{sid}/files/f.txt", data=b"old\n")
    assert r.status_code == 201, r.text
    r = api.request("PUT", f"/v1/sessions/{sid}/files/f.txt", data=chunks(64 * MiB))
    assert r.status_code == 413, r.text
    assert "workspace is full" in r.json()["error"]["message"]
    assert api.get(f"/v1/sessions/{sid}/files/f.txt").content == b"old\n"
    names = [f["path"] for f in api.get(f"/v1/sessions/{sid}/files").json()["files"]]
    assert names == ["f.txt"], names
    # Over the limit before a byte is read: refused at once.
    host, port = d.url.split("//")[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as c:
        c.sendall(f"PUT /v1/sessions/{sid}/files/g.txt HTTP/1.1\r\nHost: {host}\r\n"
                  f"Content-Length: {2048 * MiB}\r\n\r\n".encode())
        head = answer_on(c).decode(errors="replace")
    assert head.startswith("HTTP/1.1 413") and "upload limit" in head, head

    # A client that goes away half-way: the old file stays, and nothing of
    # the new one (the writer saw no commit and removed its file).
    with socket.create_connection((host, int(port)), timeout=60) as c:
        c.sendall(f"PUT /v1/sessions/{sid}/files/f.txt HTTP/1.1\r\nHost: {host}\r\n"
                  f"Content-Length: {8 * MiB}\r\n\r\n".encode() + b"n" * MiB)
        find_writer(cg.path)        # the writer started
    listing = lambda: [f["path"] for f in  # noqa: E731
                       api.get(f"/v1/sessions/{sid}/files").json()["files"]]
    assert wait_for(lambda: listing() == ["f.txt"], 30, 0.1), listing()
    assert api.get(f"/v1/sessions/{sid}/files/f.txt").content == b"old\n"


FILL_TCP = """
import socket
srv = socket.socket()
srv.bind(('127.0.0.1', 0))
srv.listen(16)
conns = []
queued = 0
block = b'x' * 65536
for i in range(10):
    c = socket.create_connection(srv.getsockname())
    a, _ = srv.accept()
    c.setblocking(False)
    conns.append((c, a))
    while True:
        try:
            queued += c.send(block)
        except (BlockingIOError, InterruptedError):
            break
print(queued)
"""


def test_loopback_tcp_buffers_are_charged_to_the_session(daemon):
    d = daemon()
    api = d.api()
    sid, scg = new_session(d, api)
    out = api.execute(sid, FILL_TCP)
    assert out["status"] == "ok", out
    queued = int(out["stdout"])
    if scg.v1:
        limit = _int(os.path.join(scg.path, "memory.kmem.tcp.limit_in_bytes"))
        usage = _int(os.path.join(scg.path, "memory.kmem.tcp.usage_in_bytes"))
        peak = _int(os.path.join(scg.path, "memory.kmem.tcp.max_usage_in_bytes"))
        print(f"\n10 loopback connections: {queued / MiB:.1f} MiB queued; "
              f"kmem.tcp usage {usage / MiB:.1f} MiB, max {peak / MiB:.1f} MiB, "
              f"limit {limit / MiB:.1f} MiB")
        assert limit == 64 * MiB // 4
        # The kernel forces a charge past the limit now and then (a
        # packet it must not drop): close to the limit, never far.
        assert peak <= limit + limit // 8
    else:
        usage = _keyed(os.path.join(scg.path, "memory.stat"), "sock")
        current = scg.usage()
        print(f"\n10 loopback connections: {queued / MiB:.1f} MiB queued; "
              f"memory.stat sock {usage / MiB:.1f} MiB of memory.current "
              f"{current / MiB:.1f} MiB")
        assert current >= usage
    # What is queued is the session's (a byte queued costs at least half a
    # byte of charged buffer), and the session's limit binds it.
    assert queued > MiB
    assert usage >= queued // 2, (usage, queued)
    assert queued <= 64 * MiB
    out = api.execute(sid, "[(c.close(), a.close()) for c, a in conns]; print('closed')")
    assert out["stdout"].strip() == "closed"


def writers(path):
    """The upload writers in the session's cgroup directory path: its
    processes that are root's."""
    def roots(pid):
        try:
            return os.stat(f"/proc/{pid}").st_uid == 0
        except FileNotFoundError:
            return False
    return [p for p in cgroup_procs([path]).get(path, []) if roots(p)]


def find_writer(path, n=1):
    """The first upload writer in cgroup directory path, once n are there."""
    found = poll(lambda: writers(path), lambda w: len(w) >= n, 10)
    assert len(found) >= n, f"{len(found)} upload writer(s) in the session's cgroup, not {n}"
    return found[0]


def test_a_stalled_writer_never_holds_the_event_thread(daemon):
    """An upload waits for its writer (a process in the session's cgroups,
    as slow as the session makes it) suspended, not on an event thread:
    with one event thread and the writer stopped mid-upload, /healthz still
    answers at once, and the upload completes once the writer goes on."""
    d = daemon(CONFIG.replace("[server]\n", "[server]\nhttp_threads = 1\n"))
    api = d.api()
    sid, cg = new_session(d, api, memory_mb=256)
    up = {}

    def upload():
        r = api.request("PUT", f"/v1/sessions/{sid}/files/big.bin",
                        data=chunks(128 * MiB), timeout=120)
        up["status"] = r.status_code

    ut = threading.Thread(target=upload, daemon=True)
    ut.start()
    writer = find_writer(cg.path)
    os.kill(writer, signal.SIGSTOP)
    try:
        # Its socket fills and the upload must wait: nothing outside the
        # daemon marks that moment (the socket's queue is the kernel's), so
        # time passes.
        time.sleep(1)
        worst = 0.0
        for _ in range(5):
            t0 = time.monotonic()
            assert api.get("/healthz", timeout=5).status_code == 200
            worst = max(worst, time.monotonic() - t0)
        assert "status" not in up, "the upload ended while its writer was stopped"
    finally:
        os.kill(writer, signal.SIGCONT)
    ut.join(120)
    print(f"\nwriter stopped mid-upload: /healthz worst {worst * 1000:.0f} ms; upload {up}")
    assert up.get("status") == 201, up


ONE_THREAD = CONFIG.replace("[server]\n", "[server]\nhttp_threads = 1\n")


def freezer_dir(d, before):
    """The freezer of the session made since `before` (v1), or its v2 dir."""
    new = [p for p in cgroup_dirs(d.pid) if p not in before]
    if d.cg.version == 2:
        return new[0], "cgroup.freeze", "1", "0"
    return next(p for p in new if "/freezer/" in p), "freezer.state", "FROZEN", "THAWED"


class Frozen:
    """The session's cgroup frozen: a writer forked into it stops before it
    opens its file (before it could say "ready")."""

    def __init__(self, d, api, **limits):
        before = set(cgroup_dirs(d.pid))
        self.sid = api.session(limits=limits) if limits else api.session()
        self.dir, self.file, self.on, self.off = freezer_dir(d, before)

    def __enter__(self):
        Path(self.dir, self.file).write_text(self.on)
        return self

    def __exit__(self, *exc):
        Path(self.dir, self.file).write_text(self.off)


def healthz_answers(api):
    """/healthz answers (with one event thread: that thread is free)."""
    return api.get("/healthz", timeout=10).status_code == 200


def temp_files(api, sid):
    r = api.get(f"/v1/sessions/{sid}/files", params={"path": ""})
    assert r.status_code == 200, r.text
    return [f["path"] for f in r.json()["files"] if ".petri-upload-" in f["path"]]


def put_in_thread(d, sid, path, size, out, data=None):
    def run():
        try:
            r = d.api().request("PUT", f"/v1/sessions/{sid}/files/{path}",
                                data=b"q" * size if data is None else data, timeout=120)
            out.append((r.status_code, r.text))
        except Exception as e:  # noqa: BLE001 - reported by the test
            out.append((None, repr(e)))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_writer_stopped_before_ready_never_holds_the_event_thread(daemon):
    """Beginning an upload does not wait for the writer to open its file:
    with the session frozen (its writer too, from birth) and one event
    thread, /healthz answers, and the upload completes once thawed."""
    d = daemon(ONE_THREAD)
    api = d.api()
    fz = Frozen(d, api)
    out = []
    with fz:
        t = put_in_thread(d, fz.sid, "early.bin", 4 * MiB, out)
        find_writer(fz.dir)        # the upload began; its writer is frozen
        assert healthz_answers(api)
        assert not out, f"the upload ended while its writer was frozen: {out}"
    t.join(120)
    assert out and out[0][0] == 201, out
    assert api.get(f"/v1/sessions/{fz.sid}/files/early.bin").content == b"q" * (4 * MiB)


def _host_port(url):
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def test_an_upload_aborted_while_its_writer_is_stopped_frees_the_event_thread(daemon):
    """A client that hangs up mid-upload while the writer is stopped: the
    abort kills the writer and reaps it off the event thread, so /healthz
    answers at once; the temporary file is gone and the old file stays."""
    d = daemon(ONE_THREAD)
    api = d.api()
    sid, cg = new_session(d, api, memory_mb=256)
    assert api.request("PUT", f"/v1/sessions/{sid}/files/f.bin", data=b"old").status_code == 201
    host, port = _host_port(d.url)
    s = socket.create_connection((host, port))
    s.sendall(f"PUT /v1/sessions/{sid}/files/f.bin HTTP/1.1\r\nHost: {host}:{port}\r\n"
              f"Content-Length: {64 * MiB}\r\n\r\n".encode())
    writer = find_writer(cg.path)
    s.sendall(b"z" * 1024)          # taken whole: the connection is not suspended
    assert wait_for(lambda: unread(s) == 0, 30), "the daemon never read the 1024 bytes"
    os.kill(writer, signal.SIGSTOP)
    try:
        s.close()                  # the client gives up: an abort
        assert wait_for(lambda: ended(writer), 30), "the abort left its writer"
        assert healthz_answers(api)
        assert healthz_answers(api)
    finally:
        try:
            os.kill(writer, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert wait_for(lambda: not temp_files(api, sid), 30), temp_files(api, sid)
    assert api.get(f"/v1/sessions/{sid}/files/f.bin").content == b"old"


def test_one_session_cannot_take_every_waiting_slot(daemon):
    """Uploads into one session whose writers are stalled: past the cap per
    session (4) the next ones get a clear 503, while an upload into another
    session goes through; the waiting ones complete once thawed."""
    d = daemon(ONE_THREAD)
    api = d.api()
    fz = Frozen(d, api, memory_mb=256)
    other = api.session()
    waiting, extra = [], []
    with fz:
        threads = [put_in_thread(d, fz.sid, f"w{i}.bin", 8 * MiB, waiting) for i in range(4)]
        find_writer(fz.dir, 4)     # four writers, frozen: all four uploads wait
        for i in range(2):
            put_in_thread(d, fz.sid, f"x{i}.bin", 8 * MiB, extra).join(60)
        assert len(extra) == 2, extra
        for status, text in extra:
            assert status == 503, text
            assert json.loads(text)["error"]["code"] == "busy", text
            assert "this session" in text, text
        r = api.request("PUT", f"/v1/sessions/{other}/files/b.bin", data=b"y" * MiB, timeout=60)
        assert r.status_code == 201, r.text
        assert not waiting, waiting
    for t in threads:
        t.join(120)
    assert sorted(s for s, _ in waiting) == [201] * 4, waiting


def test_a_stalled_upload_times_out_with_a_clear_error(daemon):
    """A suspended upload is not exempt from http_timeout_s: a writer that
    takes no byte for that long fails the upload (503 upload_stalled); the
    old file stays and no temporary file is left."""
    d = daemon(ONE_THREAD.replace("[server]\n", "[server]\nhttp_timeout_s = 3\n"))
    api = d.api()
    sid, cg = new_session(d, api, memory_mb=256)
    assert api.request("PUT", f"/v1/sessions/{sid}/files/s.bin", data=b"old").status_code == 201
    out = []
    t = put_in_thread(d, sid, "s.bin", 0, out, data=chunks(256 * MiB))
    writer = find_writer(cg.path)
    os.kill(writer, signal.SIGSTOP)
    try:
        t.join(60)
    finally:
        try:
            os.kill(writer, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert out, "the stalled upload never ended"
    status, text = out[0]
    assert status == 503 and json.loads(text)["error"]["code"] == "upload_stalled", out
    assert wait_for(lambda: not temp_files(api, sid), 30), temp_files(api, sid)
    assert api.get(f"/v1/sessions/{sid}/files/s.bin").content == b"old"
