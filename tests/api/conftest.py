"""Fixtures of the black-box tests against a real `petri serve` (the Server
they start, attacked_server() and the other helpers are in apihelp.py).

`server` (module-scoped) starts the daemon with a config written for the
test (tests/harness: its own port, state directory and log file, readiness
read from /healthz), and stops it with SIGTERM afterwards, checking that it
exits 0 and leaves no sandbox process or cgroup behind; `cold_server` is one
with the warm path off.  `make_server` starts one with a custom config (for
limits, keys, expiry); its warm template preloads nothing unless the config
names a `preload` (apihelp.LIGHT).  `api` is harness.Api on `server`.
"""
import subprocess

import pytest

from apihelp import Server, check_stopped
from harness import Api


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
