"""Black-box tests against a real `petri serve`.

`server` (module-scoped) starts the daemon on a free loopback port with a
config written for the test, and stops it with SIGTERM afterwards, checking
that it exits 0 and leaves no sandbox process behind.  `make_server` starts
one with a custom config (for limits, keys, expiry); its warm template
preloads nothing unless the config names a `preload` (`light`, below).
`api` wraps requests.
Server(..., preexec_fn=cg.enter) starts it in a memory cgroup (tests/memcg.py);
`attacked_server(...)` is that, checked when it ends (no OOM kill, exit 0,
nothing left behind).

Server extras: .pid, .api(key=None) -> Api, .descendants() (host pids of the
daemon's process tree, for leak checks), .stderr_text() (what it logged so
far; stderr is drained by a thread so a chatty daemon never blocks on a full
pipe).  A daemon sweeps stale cgroups of dead petri processes when it starts,
so Server takes the CLI suite's lock (tests/cli/conftest.py) shared while it
starts, as every CLI run does.
"""
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import requests

from apihelp import LOCK_PATH, cgroup_dirs, petri_lock, process_tree, still_alive, wait_warm  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import memcg  # noqa: E402

PETRI = os.environ.get("PETRI_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "petri"))
SANDBOX_UID_MIN = 2000000000
_config_names = itertools.count()


def sandbox_pids():
    """Host pids of processes running as a sandbox uid."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status", errors="replace") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) >= SANDBOX_UID_MIN:
                            pids.append(int(d))
                        break
        except OSError:
            pass
    return pids


# What `light` appends to a config that names no preload: the template
# then imports nothing.  Importing the default preload (the data stack) takes
# a template ~1.7 s of CPU, and ~120 daemons start in this tier alone.  The
# module-scoped `server` keeps the default, and so do the tests whose point
# is what the default costs (test_load, the pool's burst) and the analyst
# and hostile tiers; a few modules' own servers are light (envd, export,
# languages, the record chain).
LIGHT = "\n[python]\npreload =\n"


class Server:
    def __init__(self, tmp_path, config="", extra_args=(), preexec_fn=None, light=False,
                 wait_warm=True):
        n = next(_config_names)
        self.config_path = tmp_path / ("petri.ini" if n == 0 else f"petri-{n}.ini")
        if light and not re.search(r"^\s*preload\s*=", config, re.M):
            config += LIGHT
        self.config_path.write_text(config)
        self._err = []
        with petri_lock():
            # Each daemon keeps its record in a state directory of its own
            # (the record is persistent by default), so that a listing
            # shows its own executions only.
            self.state_dir = tmp_path / ("state" if n == 0 else f"state-{n}")
            env = {**os.environ, "STATE_DIRECTORY": str(self.state_dir)}
            self.proc = subprocess.Popen(
                [PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(self.config_path), *extra_args],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                preexec_fn=preexec_fn, env=env)
            self._drain = threading.Thread(target=self._read_stderr, daemon=True)
            self._drain.start()
            line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://\S+|unix:\S+)", line)
        if not m:
            self.proc.kill()
            self.proc.wait()
            self._drain.join(5)
            raise RuntimeError(f"petri serve did not start: {line!r} {self.stderr_text()}")
        self.url = m.group(1)
        self.pids = set()
        # Tests run against a daemon whose warm template is up (the default
        # configuration's steady state), not against the cold start-up path.
        # A loaded CI machine has taken over 15 s to import the template's
        # preload; the wait ends when /healthz says the warm path settled
        # (ready, off, failed), or the daemon exits.  wait_warm=False: a
        # test of the start itself.
        self.warm_state = self.wait_warm(120) if wait_warm else None

    def wait_warm(self, timeout):
        """/healthz's "warm" once settled (or as last seen at timeout)."""
        return wait_warm(self.url, timeout, alive=lambda: self.proc.poll() is None)

    def _read_stderr(self):
        for line in self.proc.stderr:
            self._err.append(line)

    def stderr_text(self):
        return "".join(self._err)

    @property
    def pid(self):
        return self.proc.pid

    def api(self, key=None):
        return Api(self.url, key)

    def descendants(self):
        return process_tree(self.proc.pid)

    def stop(self, timeout=30):
        """SIGTERM; returns (exit code, stderr).  Also notes in .leaked the
        processes of its tree that outlived it and in .leaked_cgroups its
        cgroup directories that remain."""
        if self.proc.poll() is None:
            self.wait_warm(10)
        tree = self.descendants() if self.proc.poll() is None else {}
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self._drain.join(10)
        self.leaked = still_alive(tree)
        self.leaked_cgroups = cgroup_dirs(self.proc.pid)
        return code, self.stderr_text()


class Api:
    def __init__(self, url, key=None):
        self.url = url
        self.s = requests.Session()
        if key:
            self.s.headers["Authorization"] = f"Bearer {key}"

    def request(self, method, path, **kw):
        kw.setdefault("timeout", 120)
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
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def execute(self, sid, code, **kw):
        r = self.post(f"/v1/sessions/{sid}/execute", {"code": code, **kw})
        assert r.status_code == 200, r.text
        return r.json()


@contextlib.contextmanager
def attacked_server(tmp_path, name, limit, config=""):
    """A daemon that a test attacks, in a memory cgroup of its own (skipped
    where none can be made); checked when the block ends."""
    why = memcg.available()
    if why:
        pytest.skip(why)
    with memcg.MemoryCgroup(name, limit) as cg:
        srv = Server(tmp_path, config, preexec_fn=cg.enter)
        try:
            yield srv
        finally:
            code, err = srv.stop()
            assert cg.oom_kills() == 0, "the daemon was OOM-killed in its own cgroup"
            assert code == 0, err[-3000:]
            assert not srv.leaked, f"processes outlived the daemon: {srv.leaked}"


@pytest.fixture
def make_server(tmp_path):
    started = []

    def make(config="", extra_args=(), light=True, wait_warm=True):
        srv = Server(tmp_path, config, extra_args, light=light, wait_warm=wait_warm)
        started.append(srv)
        return srv

    yield make
    results = []
    for srv in started:
        try:
            results.append((srv, *srv.stop()))
        except subprocess.TimeoutExpired:
            results.append((srv, "did not stop within 30 s after SIGTERM", srv.stderr_text()))
    for srv, code, err in results:
        assert code == 0, err[-3000:]
        assert not srv.leaked, f"processes of petri serve outlived it: {srv.leaked}"
        assert not srv.leaked_cgroups, f"cgroups left behind: {srv.leaked_cgroups}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("srv"))
    yield srv
    code, err = srv.stop()
    assert code == 0, err[-3000:]
    assert not srv.leaked, f"processes of petri serve outlived it: {srv.leaked}"
    assert not srv.leaked_cgroups, f"cgroups left behind: {srv.leaked_cgroups}"


@pytest.fixture(scope="module")
def cold_server(tmp_path_factory):
    """Like `server`, with the warm path off ([sessions] warm = false):
    every sandbox starts cold, as when no template can run."""
    srv = Server(tmp_path_factory.mktemp("cold"), "[sessions]\nwarm = false\n")
    yield srv
    code, err = srv.stop()
    assert code == 0, err[-3000:]
    assert not srv.leaked, f"processes of petri serve outlived it: {srv.leaked}"
    assert not srv.leaked_cgroups, f"cgroups left behind: {srv.leaked_cgroups}"


@pytest.fixture
def api(server):
    return Api(server.url)
