"""Black-box tests against a real `petri serve`.

`server` (module-scoped) starts the daemon with a config written for the
test (tests/harness: its own port, state directory and log file, readiness
read from /healthz), and stops it with SIGTERM afterwards, checking that it
exits 0 and leaves no sandbox process or cgroup behind.  `make_server`
starts one with a custom config (for limits, keys, expiry); its warm
template preloads nothing unless the config names a `preload` (`light`,
below).  `api` is harness.Api on it.
Server(..., preexec_fn=cg.enter) starts it in a memory cgroup (tests/memcg.py);
`attacked_server(...)` is that, checked when it ends (no OOM kill, exit 0,
nothing left behind).

Server is harness.Daemon, waiting for the warm path to settle once it
listens; extras: .api(key=None) -> Api, .warm_state, .stderr_text() (what it
logged so far), .descendants() (host pids of its process tree).
"""
import contextlib
import os
import re
import subprocess

import pytest

import harness
import memcg
from apihelp import LOCK_PATH, cgroup_dirs, petri_lock, process_tree, still_alive, wait_warm  # noqa: F401
from harness import PETRI, SANDBOX_UID_MIN, Api  # noqa: F401


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


class Server(harness.Daemon):
    def __init__(self, tmp_path, config="", extra_args=(), preexec_fn=None, light=False,
                 wait_warm=True):
        if light and not re.search(r"^\s*preload\s*=", config, re.M):
            config += LIGHT
        super().__init__(tmp_path, config, extra_args=extra_args, preexec_fn=preexec_fn)
        # Tests run against a daemon whose warm template is up (the default
        # configuration's steady state), not against the cold start-up path.
        # A loaded CI machine has taken over 15 s to import the template's
        # preload; the wait ends when /healthz says the warm path settled
        # (ready, off, failed), or the daemon exits.  wait_warm=False: a
        # test of the start itself.
        self.warm_state = self.wait_warm(120) if wait_warm else None

    def api(self, key=None):
        return Api(self.url, key)

    def stop(self, timeout=30):
        """SIGTERM once the warm path has settled; returns (exit code,
        stderr); .leaked and .leaked_cgroups as harness.Daemon.stop."""
        if self.running():
            self.wait_warm(10)
        return super().stop(timeout), self.stderr_text()


def check_stopped(srv):
    """Stop srv; it must exit 0 and leave no process and no cgroup."""
    code, err = srv.stop()
    assert code == 0, err[-3000:]
    assert not srv.leaked, f"processes of petri serve outlived it: {srv.leaked}"
    assert not srv.leaked_cgroups, f"cgroups left behind: {srv.leaked_cgroups}"


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
    check_stopped(srv)


@pytest.fixture(scope="module")
def cold_server(tmp_path_factory):
    """Like `server`, with the warm path off ([sessions] warm = false):
    every sandbox starts cold, as when no template can run."""
    srv = Server(tmp_path_factory.mktemp("cold"), "[sessions]\nwarm = false\n")
    yield srv
    check_stopped(srv)


@pytest.fixture
def api(server):
    return Api(server.url)
