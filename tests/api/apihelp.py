"""Helpers for the black-box tests of `petri serve` (imported by the test
modules; fixtures live in conftest.py).

raw()        one HTTP request with the path sent exactly as given (no
             normalisation of "..", "%2e" or "//" by a client library)
unix_request() one request over a unix socket
png_size()   check a PNG signature and IHDR chunk, return (width, height)
SSE, answer_on(), metric(), wait_for(), healthz(), wait_warm(),
process_tree(), still_alive(), cgroup_dirs(), petri_lock(): from
tests/harness (imported here for the tiers that import them from apihelp)
"""
import base64
import http.client
import json
import socket
import struct

from harness import (LOCK_PATH, PETRI, SSE, WARM_SETTLED, http_connection, answer_on, cgroup_dirs,  # noqa: F401
                     healthz, metric, petri_lock, process_tree, still_alive, wait_for, wait_warm)


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
