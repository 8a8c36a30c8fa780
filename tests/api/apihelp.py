"""Helpers for the black-box tests of `petri serve` (imported by the test
modules; fixtures live in conftest.py).

Server       harness.Daemon, waiting for the warm path to settle once it
             listens; extras: .api(key=None) -> Api, .warm_state,
             .stderr_text() (what it logged so far), .descendants() (host
             pids of its process tree); .stop() returns (exit code, stderr).
             Server(..., preexec_fn=cg.enter) starts it in a memory cgroup
             (tests/memcg.py); light=True: its template preloads nothing
             (LIGHT).
check_stopped(srv)  stop it: exit 0, no process and no cgroup left.
attacked_server(tmp_path, name, limit, config)  a Server in a memory cgroup
             of its own, checked when the block ends (no OOM kill, exit 0,
             nothing left behind).
raw()        one HTTP request with the path sent exactly as given (no
             normalisation of "..", "%2e" or "//" by a client library)
unix_request() one request over a unix socket
png_size()   check a PNG signature and IHDR chunk, return (width, height)
SSE, answer_on(), metric(), wait_for(), healthz(), wait_warm(),
process_tree(), still_alive(), cgroup_dirs(), petri_lock(): from
tests/harness (imported here for the tiers that import them from apihelp)
"""
import base64
import contextlib
import http.client
import json
import re
import socket
import struct

import pytest

import harness
import memcg
from harness import (LOCK_PATH, PETRI, SSE, WARM_SETTLED, Api, http_connection, answer_on,  # noqa: F401
                     cgroup_dirs, healthz, metric, petri_lock, process_tree, still_alive, wait_for,
                     wait_warm)


def raw(url, method, path, body=None, headers=None, timeout=30):
    """(status, headers dict with lower-case names, body bytes)."""
    c = http_connection(url, timeout)
    try:
        c.putrequest(method, path, skip_accept_encoding=True)
        hdrs = dict(headers or {})
        if body is not None:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                hdrs.setdefault("Content-Type", "application/json")
            hdrs.setdefault("Content-Length", str(len(body)))
        for k, v in hdrs.items():
            c.putheader(k, v)
        c.endheaders(body)
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def error_of(body):
    """The {"code", "message"} of an error body."""
    j = json.loads(body) if isinstance(body, (bytes, str)) else body
    assert set(j) == {"error"}, j
    assert isinstance(j["error"]["code"], str) and isinstance(j["error"]["message"], str), j
    return j["error"]


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def unix_request(sock_path, method, path, body=None, timeout=30):
    c = UnixHTTPConnection(sock_path, timeout)
    try:
        headers = {}
        if body is not None:
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json"}
        c.request(method, path, body, headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def png_size(data):
    """Width and height of a PNG; asserts the signature and the IHDR chunk."""
    if isinstance(data, str):
        data = base64.b64decode(data, validate=True)
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13, (length, kind)
    w, h = struct.unpack(">II", data[16:24])
    assert data[-8:-4] == b"IEND", "no IEND chunk at the end"
    return w, h


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
