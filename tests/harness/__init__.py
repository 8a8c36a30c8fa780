"""The one way a test starts `petri serve`, waits for it and talks to it.

Every pytest tier imports it as `harness` (tests/conftest.py puts tests/ on
sys.path once).  What is specific to a tier (the API tier's module-scoped
servers, the fault tier's kill -9 clean-up, the hostile tier's neighbour
session) stays in the tier, built on this:

Daemon      one `petri serve` for a test: its own config file, state
            directory, port (127.0.0.1:0, the address read from the line
            it prints) and, when asked, uid range; started detached (a
            session of its own, stdin from /dev/null) with stdout and
            stderr in files of the test's tmp dir; stopped by pid with a
            note of what outlived it.
wait_for    the one polling helper: a condition, a deadline, an interval;
            poll() on it, for a value to assert on (an answer, a listing).
free_port   a loopback port nothing listens on, for a program that wants one.
healthz, readyz, wait_warm
            readiness as the daemon states it (GET /healthz's "warm",
            GET /readyz's status), with a deadline; never a line of its log.
Api         a small requests-based client; SSE (a streamed execution),
            answer_on() (the answer to a hand-written request on a raw
            socket), metric() (one sample of /metrics).
read_text, stat_fields, proc_status, cmdline, command_line, start_time, runs,
cpu_seconds, signal_pending, all_pids, naming, pids_named, unread
            /proc views (a process that is gone reads as None or []).
process_tree, still_alive, ended, cgroup_dirs, cgroup_tag
            the leak checks; find_template (the warm template's pids).
petri_lock  /run/lock/petri-tests.lock: shared while a petri starts (a
            starting petri sweeps the cgroups of dead ones), exclusive
            where a test kills one and checks the sweep.
"""
import contextlib
import fcntl
import hashlib
import http.client
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import requests

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
PETRI = os.environ.get("PETRI_BIN") or str(ROOT / "build" / "petri")
SANDBOX_UID_MIN = 2_000_000_000          # JAIL_UID_BASE_DEFAULT in src/jail/jail.h
LOCK_PATH = "/run/lock/petri-tests.lock"

# The states of /healthz's "warm" that do not change by waiting: the
# template is up (ready), there is none (off: warm = false), or it could not
# start (failed: every sandbox starts cold).
WARM_SETTLED = ("ready", "off", "failed")


def wait_for(cond, timeout, interval=0.1):
    """Poll cond() until it returns a true value; returns it, or the last
    false value once timeout seconds have passed."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(interval)


def poll(fetch, done, timeout, interval=0.1):
    """wait_for over a value: fetch() until done(value) holds or timeout
    seconds have passed; returns the last value fetched either way, for the
    caller's assertion and its message (a requests.Response is false when
    its status is 4xx or 5xx, so it cannot be wait_for's condition)."""
    last = []

    def fetched_done():
        last[:] = [fetch()]
        return done(last[0])

    wait_for(fetched_done, timeout, interval)
    return last[0]


def free_port():
    """A TCP port of 127.0.0.1 that nothing listens on now (for a program
    that takes its port as a number, not 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_block(nodes):
    """A port P of 127.0.0.1 with P, P+1..P+nodes and P+101..P+100+nodes
    free now: deploy/local/cluster's router, nodes and their agents."""
    for _ in range(200):
        p = random.randrange(20000, 60000)
        wanted = [p] + [p + k for k in range(1, nodes + 1)] + [p + 100 + k for k in range(1, nodes + 1)]
        socks = []
        try:
            for q in wanted:
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", q))
                socks.append(s)
            return p
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free block of ports")


@contextlib.contextmanager
def petri_lock(exclusive=False):
    with open(LOCK_PATH, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ---------------------------------------------------------------- readiness

def _get(url, path, timeout):
    """(status, body bytes) of GET path at url (http://host:port or
    unix:/path)."""
    if url.startswith("unix:"):
        class Conn(http.client.HTTPConnection):
            def connect(self):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(self.timeout)
                s.connect(url[5:])
                self.sock = s
        c = Conn("localhost", timeout=timeout)
    else:
        u = urllib.parse.urlsplit(url)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def healthz(url, timeout=5):
    """GET /healthz as a dict; None when it does not answer 200 (not up
    yet, or gone)."""
    try:
        status, body = _get(url, "/healthz", timeout)
        return json.loads(body) if status == 200 else None
    except (OSError, ValueError, http.client.HTTPException):
        return None


def readyz(url, timeout=5):
    """(status, body as a dict) of GET /readyz: 200 when the warm path is
    up and sessions are taken, else 503 with a "reason"; (None, None) when
    it does not answer."""
    try:
        status, body = _get(url, "/readyz", timeout)
        return status, json.loads(body) if body else {}
    except (OSError, ValueError, http.client.HTTPException):
        return None, None


def wait_warm(url, timeout=120, alive=lambda: True):
    """Poll /healthz until "warm" is settled (WARM_SETTLED), timeout seconds
    pass, or alive() turns false (the daemon exited).  Returns the last
    "warm" seen ("starting", or None when /healthz never answered)."""
    warm = None

    def settled():
        nonlocal warm
        if not alive():
            return True
        h = healthz(url)
        warm = h.get("warm") if h else warm
        return warm in WARM_SETTLED

    wait_for(settled, timeout)
    return warm


# ---------------------------------------------------------------- /proc views

# The states of a process that has ended: a zombie (Z) waits for its parent
# to reap it; dead (X) is seen for a moment while it is reaped.
ENDED = ("Z", "X")


def read_text(path):
    """A file's text, or None when it cannot be read (a process that is
    gone).  Not UTF-8 is replaced: a command name in /proc may be any bytes,
    cut at 15 even inside a UTF-8 character."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name, so that
    [0] is the state, [1] the parent, [11] and [12] utime and stime, [19]
    the start time (proc(5)'s field n is [n - 3]); None when it is gone."""
    st = read_text(f"/proc/{pid}/stat")
    if not st:
        return None
    return st[st.rindex(")") + 2:].split()


def proc_status(pid):
    """/proc/<pid>/status as {name: value}, or None."""
    text = read_text(f"/proc/{pid}/status")
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def cmdline(pid):
    """The arguments of pid, as bytes ([] when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def command_line(pid):
    """cmdline(pid) as one string, its arguments joined by spaces ("" when
    it is gone)."""
    return b" ".join(cmdline(pid)).decode("utf-8", "replace").strip()


def start_time(pid):
    """pid's start time (clock ticks after boot; with the pid, it names one
    process), or None when it is gone."""
    fields = stat_fields(pid)
    return int(fields[19]) if fields else None


def runs(pid, start=None):
    """pid runs (not a zombie), and is the process that started at start
    when start is given."""
    fields = stat_fields(pid)
    return bool(fields) and fields[0] not in ENDED and (start is None or int(fields[19]) == start)


def cpu_seconds(pid):
    """The CPU time pid has spent (user and system), in seconds."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def signal_pending(pid, sig):
    """Signal sig sent to pid is still pending: not yet delivered to it
    (its handler not yet run).  False when pid is gone."""
    st = proc_status(pid)
    if not st:
        return False
    mask = int(st["ShdPnd"], 16) | int(st["SigPnd"], 16)
    return bool(mask >> (sig - 1) & 1)


def naming(name):
    """A line of Python that names the thread that runs it (prctl's
    PR_SET_NAME, at most 15 bytes; /proc/self/comm is not the sandbox's to
    write): in the main thread, the process's name, which pids_named() finds
    from the host, until the process ends."""
    return f"__import__('ctypes').CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"


def all_pids():
    """Every host pid now (a view: some may be gone when read)."""
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def pids_named(name):
    """Host pids whose command name (/proc/<pid>/comm) is name: see
    naming()."""
    return [p for p in all_pids() if read_text(f"/proc/{p}/comm") == name + "\n"]


def unread(sock):
    """Bytes sent on sock (TCP over IPv4, on this host) that its peer has
    not read yet: the receive queue of the peer's end in /proc/net/tcp;
    None when that end is not found (closed)."""
    def hexaddr(addr):
        return "%s:%04X" % (socket.inet_aton(addr[0])[::-1].hex().upper(), addr[1])
    me, peer = hexaddr(sock.getsockname()), hexaddr(sock.getpeername())
    for line in (read_text("/proc/net/tcp") or "").splitlines()[1:]:
        f = line.split()
        if f[1] == peer and f[2] == me:
            return int(f[4].split(":")[1], 16)
    return None


# ---------------------------------------------------------------- leak checks


def process_tree(root):
    """Host pids of root's descendants, each with its start time (to tell
    a pid that was reused): {pid: starttime}."""
    children, starts = {}, {}
    for pid in all_pids():
        fields = stat_fields(pid)
        if fields:
            children.setdefault(int(fields[1]), []).append(pid)
            starts[pid] = int(fields[19])
    out, todo = {}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out[c] = starts[c]
                todo.append(c)
    return out


def ended(pid):
    """The process has ended and the kernel has closed its files: it is
    no more, or a zombie."""
    fields = stat_fields(pid)
    return fields is None or fields[0] in ENDED


def refuses(url):
    """Nothing listens at url's host and port any more: a connection is
    refused.  A SIGKILLed daemon's leader shows as a zombie before its
    other threads have exited and its listening socket is closed."""
    u = urllib.parse.urlsplit(url)
    try:
        socket.create_connection((u.hostname, u.port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


def find_template(daemon_pid, preloads=None):
    """[(template pid, its pid 1)] in daemon_pid's process tree: the warm
    template is a process running `driver.py --zygote` whose parent (PPid
    in /proc/<pid>/status) is a direct child of the daemon that is pid 1 of
    its pid namespace, and which is itself in that namespace only (NSpid of
    two levels: the sessions' pid 1 also run the forked driver and have the
    same parent, but are one pid namespace deeper).  preloads: True, only
    the template that imports modules (named after --zygote); False, only
    one that imports none (the light template, docs/configuration.md)."""
    tree = process_tree(daemon_pid)
    found = []
    for pid in tree:
        cmd = cmdline(pid)
        if not any(a.endswith(b"driver.py") for a in cmd) or b"--zygote" not in cmd:
            continue
        named = any(cmd[cmd.index(b"--zygote") + 1:])
        if preloads is not None and named != preloads:
            continue
        st = proc_status(pid)
        if not st:
            continue
        ppid = int(st["PPid"])
        pst = proc_status(ppid)
        if ppid not in tree or not pst or int(pst["PPid"]) != daemon_pid:
            continue
        if pst.get("NSpid", "").split()[-1:] != ["1"]:
            continue
        if len(st.get("NSpid", "").split()) != 2:
            continue
        found.append((pid, ppid))
    return found


def still_alive(tree):
    """Those of {pid: starttime} that still run (same pid, same start)."""
    return [pid for pid, start in tree.items() if runs(pid, start)]


def cgroup_dirs(pid, root="/sys/fs/cgroup"):
    """Cgroup directories p<pid>-... under any .../petri/ of the hierarchy."""
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        if os.path.basename(dirpath) == "petri":
            found += [os.path.join(dirpath, d) for d in dirnames if d.startswith(f"p{pid}-")]
            dirnames[:] = []
    return found


def cgroup_tag(pid):
    """"p<pid>-<start time>-": the name prefix of the cgroups petri process
    pid makes (src/jail/cgroup.c's make_tag()); the start time tells it from
    an earlier process of the same pid.  Read it while the process exists."""
    fields = stat_fields(pid)
    assert fields, f"pid {pid} is gone: its cgroup tag cannot be read"
    return f"p{pid}-{fields[19]}-"


# ---------------------------------------------------------------- the daemon

_names = itertools.count()


# ------------------------------------------------------- what the probe found

# A daemon finds out what its sandboxes have (a probe: a sandbox and up to a
# second of CPU, src/session/probe.c) unless its state directory holds what
# an earlier start found that is still true (found.json, whose key and
# stamps the daemon checks).  A run starts a few hundred daemons, each with
# a state directory of its own: each starts with the suite's copy for its
# configuration's context (in the STATE_DIRECTORY make sets), and one that
# had to probe leaves what it found there.  Only the daemon judges a copy:
# a wrong one costs a probe, never a wrong answer.

def _probe_context(config):
    """A name for what in config changes a probe's findings: the languages'
    sections, binds, the [python] path and the wheelhouse."""
    keep, section = [], ""
    for line in config.splitlines():
        text = line.strip()
        if text.startswith("["):
            section = text
        elif section.startswith("[language") or re.match(r"(ro_bind|path|wheelhouse)\s*=", text):
            keep.append(f"{section} {text}")
    return hashlib.sha1("\n".join(keep).encode()).hexdigest()[:16]


def _suite_probe_cache(config):
    shared = os.environ.get("STATE_DIRECTORY")
    return Path(shared) / f"found-{_probe_context(config)}.json" if shared else None


def seed_probe_cache(state_dir, config):
    """Give state_dir the suite's found.json for config, if there is one."""
    shared = _suite_probe_cache(config)
    if shared and shared.is_file():
        Path(state_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(shared, Path(state_dir) / "found.json")
        os.chmod(Path(state_dir) / "found.json", 0o600)


def keep_probe_cache(state_dir, config):
    """Keep state_dir's found.json as the suite's for config, when it differs."""
    shared, made = _suite_probe_cache(config), Path(state_dir) / "found.json"
    try:
        if not shared or made.read_bytes() == (shared.read_bytes() if shared.is_file() else b""):
            return
    except OSError:
        return
    shared.parent.mkdir(parents=True, exist_ok=True)
    tmp = shared.with_name(f"{shared.name}.{os.getpid()}")
    shutil.copyfile(made, tmp)
    os.chmod(tmp, 0o600)
    os.replace(tmp, shared)


class Daemon:
    """One `petri serve` for a test.

    tmp_path: the test's directory; the daemon's files are <stem>.ini (the
    config: `config` text, plus a [sandbox] uid range when uid_range =
    (base, count) is given), <stem>.state/ (STATE_DIRECTORY: its record),
    <stem>.out (stdout: the address line, then the agent's), <stem>.log
    (stderr), where stem is name-<n>.  env: the environment (os.environ by
    default); preexec_fn: run in the child before exec (a memory cgroup's
    enter); lock: take petri_lock() shared until it listens (False when the
    caller holds it); command: what runs `serve` ([PETRI] by default; an
    installed binary, or one behind a wrapper such as setpriv);
    probe_cache: start with the suite's found.json (seed_probe_cache), so
    that it does not probe what its sandboxes have (False: a test of the
    probe).  Raises RuntimeError when it exits or prints no address within
    start_timeout seconds.

    .url, .port, .pid, .proc, .tag (its cgroups' prefix), .state_dir,
    .config_path."""

    def __init__(self, tmp_path, config="", *, name="petri", extra_args=(), env=None,
                 preexec_fn=None, lock=True, uid_range=None, start_timeout=60, command=None,
                 probe_cache=True):
        tmp_path = Path(tmp_path)
        stem = f"{name}-{next(_names)}"
        if uid_range:
            config += "\n[sandbox]\nuid_base = %d\nuid_count = %d\n" % uid_range
        self.config_path = tmp_path / f"{stem}.ini"
        self.config_path.write_text(config)
        self.state_dir = tmp_path / f"{stem}.state"
        self.out_path = tmp_path / f"{stem}.out"
        self.log_path = tmp_path / f"{stem}.log"
        self.probe_cache = probe_cache
        if probe_cache:
            seed_probe_cache(self.state_dir, config)
        env = {**(os.environ if env is None else env), "STATE_DIRECTORY": str(self.state_dir)}
        args = [*(command or [PETRI]), "serve", "--listen", "127.0.0.1:0",
                "--config", str(self.config_path), *extra_args]
        with petri_lock() if lock else contextlib.nullcontext():
            with open(self.out_path, "wb") as out, open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=log, env=env, preexec_fn=preexec_fn,
                                             start_new_session=True)
            self.t_start = time.monotonic()
            self.tag = cgroup_tag(self.proc.pid)
            # The address, not readiness: the daemon prints it once it
            # listens (and has swept the cgroups of dead petris).
            line = wait_for(lambda: self.out_line(0) or not self.running(), start_timeout)
        m = re.search(r"listening on (http://\S+|unix:\S+)", line if isinstance(line, str) else "")
        if not m:
            self.kill()
            raise RuntimeError(f"petri serve did not start: {self.out_line(0)!r} "
                               f"{self.stderr_text()[-3000:]}")
        self.url = m.group(1)
        self.port = int(self.url.rsplit(":", 1)[1]) if self.url.startswith("http") else None

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc.poll() is None

    def out_line(self, n, timeout=0):
        """Line n (from 0) of what it printed on stdout, once complete;
        "" when it has not come within timeout seconds."""
        def line():
            lines = self.out_path.read_text(errors="replace").split("\n")
            return lines[n] + "\n" if len(lines) > n + 1 else ""
        return wait_for(line, timeout, 0.05) if timeout else line()

    def stderr_text(self):
        """What it logged so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def health(self):
        return healthz(self.url)

    def ready(self):
        return readyz(self.url)

    def wait_warm(self, timeout):
        """/healthz's "warm" once settled (or as last seen at timeout, or
        when the daemon exited)."""
        return wait_warm(self.url, timeout, alive=self.running)

    def descendants(self):
        return process_tree(self.proc.pid)

    def kill(self):
        """SIGKILL by pid (never by name), and reap."""
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def terminate(self, timeout):
        """SIGTERM; (exit code, or None if it did not exit in time; seconds)."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        return code, time.monotonic() - t0

    def stop(self, timeout=30):
        """SIGTERM and wait; SIGKILL and raise subprocess.TimeoutExpired
        after timeout seconds.  Returns the exit code; notes in .leaked the
        processes of its tree that outlived it and in .leaked_cgroups its
        cgroup directories that remain."""
        tree = self.descendants() if self.running() else {}
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = thread_stacks(self.proc.pid)
            sys.stderr.write(f"petri serve did not stop within {timeout} s; its threads:\n"
                             f"{stacks}\n")
            self.kill()
            raise subprocess.TimeoutExpired(self.proc.args, timeout, output=stacks) from None
        self.leaked = still_alive(tree)
        self.leaked_cgroups = cgroup_dirs(self.proc.pid)
        if self.probe_cache:
            keep_probe_cache(self.state_dir, self.config_path.read_text())
        return code

    def problems(self, code):
        """What is wrong with a stop() that returned code: [] when it exited
        0 and left no process and no cgroup."""
        out = []
        if code != 0:
            out.append(f"petri serve exited {code}: {self.stderr_text()[-3000:]}")
        if self.leaked:
            out.append(f"processes of petri serve outlived it: {self.leaked}")
        if self.leaked_cgroups:
            out.append(f"cgroups left behind: {self.leaked_cgroups}")
        return out


def thread_stacks(pid):
    """Every thread's stack of pid, as gdb prints them (for a daemon that
    did not stop: where it waits); "" without gdb."""
    try:
        out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return "\n".join(line for line in out.splitlines() if line.startswith(("#", "Thread")))


# ---------------------------------------------------------------- the client

class Api:
    """requests on one connection pool; key: a bearer API key."""

    def __init__(self, url, key=None, timeout=120):
        self.url = url
        self.timeout = timeout
        self.s = requests.Session()
        if key:
            self.s.headers["Authorization"] = f"Bearer {key}"

    def request(self, method, path, **kw):
        kw.setdefault("timeout", self.timeout)
        return self.s.request(method, self.url + path, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        if body is not None:
            kw["json"] = body
        return self.request("POST", path, **kw)

    def put(self, path, data=b"", **kw):
        return self.request("PUT", path, data=data, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def session(self, **body):
        r = self.post("/v1/sessions", body)
        assert r.status_code == 201, f"{r.status_code} {r.text[:2000]}"
        return r.json()["id"]

    def execute(self, sid, code, **kw):
        r = self.post(f"/v1/sessions/{sid}/execute", {"code": code, **kw})
        assert r.status_code == 200, f"{r.status_code} {r.text[:2000]}"
        return r.json()

    def status(self, sid):
        r = self.get(f"/v1/sessions/{sid}")
        return r.json().get("status") if r.status_code == 200 else r.status_code

    def process_names(self, sid):
        """The names of the processes session sid's code left running (its
        GET .../processes), [] when it does not answer 200."""
        r = self.get(f"/v1/sessions/{sid}/processes")
        return [p["name"] for p in r.json()["processes"]] if r.status_code == 200 else []

    def wait_busy(self, sid, timeout=30):
        """Until session sid says it is executing: True, or False once
        timeout seconds have passed."""
        return bool(wait_for(lambda: self.status(sid) == "busy", timeout, 0.05))


def http_connection(url, timeout):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


def answer_on(sock, limit=1 << 20):
    """The whole answer (head and body, bytes) that arrives on a raw socket
    after a hand-written request: read until the body's Content-Length (0
    without one) is in, the peer closes, or the socket's timeout.  One
    recv() may hold only the head: the body can come in a segment of its
    own.  What came after the answer is returned too."""
    data = b""
    while len(data) < limit:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if len(body) >= length:
                return data
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


class SSE:
    """A streamed execution.  Iterate for (t, event, data); .close() drops
    the connection (shutdown + close: the server sees it at once)."""

    def __init__(self, url, path, body, key=None, timeout=60):
        self.t0 = time.monotonic()
        self.c = http_connection(url, timeout)
        payload = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                   "Content-Length": str(len(payload))}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self.c.request("POST", path, payload, headers)
        self.resp = self.c.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}

    def __iter__(self):
        event, data = None, []
        while True:
            line = self.resp.readline()
            if not line:
                return
            line = line.decode("utf-8").rstrip("\r\n")
            if line == "":
                if event is not None or data:
                    yield (time.monotonic() - self.t0, event or "message",
                           json.loads("\n".join(data)) if data else None)
                event, data = None, []
            elif line.startswith(":"):
                continue
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))

    def close(self):
        sock = self.c.sock
        try:
            if sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.resp.close()
        self.c.close()


def metric(text, name, **labels):
    """Value of the sample `name{labels}` in Prometheus text, or None."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    key = f"{name}{{{want}}}" if want else name
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        k, _, v = line.rpartition(" ")
        if k == key:
            return float(v)
    return None
