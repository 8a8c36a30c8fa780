"""Fixtures of the black-box tests against a real `petri serve` (the Server
they start, attacked_server() and the other helpers are in apihelp.py).

`server` is a daemon with the default configuration (tests/harness: its
own port, state directory and log file, readiness read from /healthz),
one per test process, shared by the modules it runs; it is stopped with
SIGTERM at the end, and must exit 0 and leave no sandbox process or cgroup
behind.  A module whose tests need a daemon nobody else touched (they
count what the whole server holds, or stop it) sets OWN_SERVER = True and
gets one of its own.  `cold_server` is the same with the warm path off.
`make_server` starts one with a custom config (for limits, keys, expiry);
its warm template preloads nothing unless the config names a `preload`
(apihelp.LIGHT).  `api` is harness.Api on `server`.
"""
import subprocess

import pytest

from apihelp import Server, check_stopped
from harness import Api

COLD = "[sessions]\nwarm = false\n"


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


def _shared(request, tmp_path_factory, name, config=""):
    """The module's daemon of this configuration: the test process's, or
    one of its own when the module says OWN_SERVER."""
    if getattr(request.module, "OWN_SERVER", False):
        srv = Server(tmp_path_factory.mktemp(name), config)
        yield srv
        check_stopped(srv)
    else:
        yield request.getfixturevalue(f"shared_{name}")


@pytest.fixture(scope="session")
def shared_srv(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("srv"))
    yield srv
    check_stopped(srv)


@pytest.fixture(scope="session")
def shared_cold(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("cold"), COLD)
    yield srv
    check_stopped(srv)


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    yield from _shared(request, tmp_path_factory, "srv")


@pytest.fixture(scope="module")
def cold_server(request, tmp_path_factory):
    """Like `server`, with the warm path off ([sessions] warm = false):
    every sandbox starts cold, as when no template can run."""
    yield from _shared(request, tmp_path_factory, "cold", COLD)


@pytest.fixture
def api(server):
    return Api(server.url)
