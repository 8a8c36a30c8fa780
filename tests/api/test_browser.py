"""The browser is an attacker too (docs/security.md): a page of another
origin, or one that rebound its own name to 127.0.0.1, must not run code
through the keyless loopback API; and a request framed two ways (request
smuggling behind a proxy) is refused.

Requests go over raw sockets so that Host, Origin, Content-Type and
Content-Length are exactly what a browser or an attacker would send.
"""
import json
import socket

import pytest

from apihelp import Server, answer_on


def port_of(srv):
    return int(srv.url.rsplit(":", 1)[1])


def send(port, method, path, headers=(), body=b"", host="default", timeout=60, check_rest=False):
    """(status, headers dict, body bytes, closed) of one request; headers
    is a list of (name, value), sent as given (duplicates too).  With
    check_rest, wait for what follows the response: nothing, then EOF."""
    lines = [f"{method} {path} HTTP/1.1"]
    if host == "default":
        host = f"127.0.0.1:{port}"
    if host is not None:
        lines.append(f"Host: {host}")
    lines += [f"{k}: {v}" for k, v in headers]
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head, _, rest = answer_on(s).partition(b"\r\n\r\n")
        status_line, *hlines = head.decode(errors="replace").split("\r\n")
        hdrs = {}
        for h in hlines:
            k, _, v = h.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "0"))
        if not check_rest:
            return int(status_line.split()[1]), hdrs, rest[:n], None
        # Anything after the response would be a second, smuggled one:
        # what came with it, or what comes next.
        extra, closed = rest[n:], None
        if not extra:
            s.settimeout(5)
            try:
                extra = s.recv(65536)
                closed = extra == b""
            except socket.timeout:
                extra, closed = b"", False
            except OSError:
                extra, closed = b"", True
        assert not extra, f"more than one response: {extra[:200]!r}"
        return int(status_line.split()[1]), hdrs, rest[:n], closed
    finally:
        s.close()


def post_json(port, path, obj, extra=(), ctype="application/json", **kw):
    body = json.dumps(obj).encode()
    headers = [("Content-Length", str(len(body)))]
    if ctype is not None:
        headers.append(("Content-Type", ctype))
    return send(port, "POST", path, headers + list(extra), body, **kw)


def code_of(body):
    return json.loads(body)["error"]["code"]


@pytest.fixture(scope="module")
def keyless(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("browser"), "[sessions]\nwarm = false\n")
    yield srv
    code, err = srv.stop()
    assert code == 0, err[-3000:]
    assert not srv.leaked, srv.leaked


def marker_written(srv, sid):
    """Did the forged request's code run (it writes /work/pwned)?"""
    status, _, body, _ = send(port_of(srv), "GET", f"/v1/sessions/{sid}/files")
    assert status == 200, body
    return any(f["path"] == "pwned" for f in json.loads(body)["files"])


PWN = {"code": "open('pwned', 'w').write('x')"}


def test_foreign_origin_cannot_run_code(keyless):
    port = port_of(keyless)
    status, _, body, _ = post_json(port, "/v1/sessions", {})
    assert status == 201, body
    sid = json.loads(body)["id"]
    path = f"/v1/sessions/{sid}/execute"
    # A "simple" cross-origin POST, as fetch(..., {mode: "no-cors"}) sends.
    for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example",
                   f"http://localhost:{port}", "http://127.0.0.1:1"):
        for ctype in ("text/plain", "application/json"):
            status, _, body, _ = post_json(port, path, PWN, [("Origin", origin)], ctype)
            assert status == 403, (origin, ctype, status, body)
            assert code_of(body) == "forbidden_origin"
        status, _, body, _ = post_json(port, "/v1/execute", PWN, [("Origin", origin)],
                                       "text/plain")
        assert status == 403 and code_of(body) == "forbidden_origin", (origin, body)
        status, _, body, _ = send(port, "GET", "/v1/sessions", [("Origin", origin)])
        assert status == 403, (origin, body)
    assert not marker_written(keyless, sid)
    # The server's own origin, and no Origin at all (curl, SDKs), may.
    for extra in ([("Origin", f"http://127.0.0.1:{port}")], []):
        status, _, body, _ = post_json(port, path, {"code": "1+1"}, extra)
        assert status == 200, body


def test_rebound_host_cannot_run_code(keyless):
    port = port_of(keyless)
    status, _, body, _ = post_json(port, "/v1/sessions", {})
    sid = json.loads(body)["id"]
    path = f"/v1/sessions/{sid}/execute"
    for host in (f"evil.example:{port}", "evil.example", "127.0.0.1.evil.example",
                 f"localhost.evil.example:{port}", "[::2]"):
        # Same-origin for the page: Origin matches its Host.
        status, _, body, _ = post_json(port, path, PWN, [("Origin", f"http://{host}")],
                                       host=host)
        assert status == 403 and code_of(body) == "forbidden_host", (host, body)
        status, _, body, _ = post_json(port, path, PWN, host=host)
        assert status == 403 and code_of(body) == "forbidden_host", (host, body)
    assert not marker_written(keyless, sid)
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "LOCALHOST", f"[::1]:{port}"):
        status, _, body, _ = post_json(port, path, {"code": "1+1"}, host=host)
        assert status == 200, (host, body)
    # A health probe may call the server anything.
    for path in ("/healthz", "/readyz"):
        status, _, body, _ = send(port, "GET", path, host="10.1.2.3:8080")
        assert status == 200, (path, body)


def test_json_routes_take_only_json(keyless):
    port = port_of(keyless)
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                  None, "application/jsonx", "text/json"):
        status, _, body, _ = post_json(port, "/v1/execute", {"code": "1"}, ctype=ctype)
        assert status == 415 and code_of(body) == "unsupported_media_type", (ctype, body)
    for ctype in ("application/json; charset=utf-8", "Application/JSON"):
        status, _, body, _ = post_json(port, "/v1/execute", {"code": "1"}, ctype=ctype)
        assert status == 200, (ctype, body)
    # No body needs no type; an upload is raw bytes of any type.
    status, _, body, _ = send(port, "POST", "/v1/sessions", [("Content-Length", "0")])
    assert status == 201, body
    sid = json.loads(body)["id"]
    status, _, body, _ = send(port, "PUT", f"/v1/sessions/{sid}/files/a.txt",
                              [("Content-Length", "2"), ("Content-Type", "text/plain")], b"hi")
    assert status == 201, body


def test_configured_hosts_and_origins(make_server):
    srv = make_server("[server]\nallowed_hosts = petri.internal, sandbox.example\n"
                      "allowed_origins = https://app.example\n[sessions]\nwarm = false\n")
    port = port_of(srv)
    ok = {"code": "1+1"}
    for host in ("petri.internal", f"sandbox.example:{port}"):
        status, _, body, _ = post_json(port, "/v1/execute", ok, host=host)
        assert status == 200, (host, body)
    # The list replaces the defaults.
    status, _, body, _ = post_json(port, "/v1/execute", ok, host=f"127.0.0.1:{port}")
    assert status == 403 and code_of(body) == "forbidden_host", body
    status, _, body, _ = post_json(port, "/v1/execute", ok, [("Origin", "https://app.example")],
                                   host="petri.internal")
    assert status == 200, body
    status, _, body, _ = post_json(port, "/v1/execute", ok, [("Origin", "https://app2.example")],
                                   host="petri.internal")
    assert status == 403 and code_of(body) == "forbidden_origin", body


@pytest.mark.parametrize("framing", [
    [("Content-Length", "2"), ("Content-Length", "60")],
    [("Content-Length", "2"), ("Content-Length", "2")],
    [("Content-Length", "2"), ("Transfer-Encoding", "chunked")],
    [("Transfer-Encoding", "chunked"), ("Content-Length", "2")],
])
def test_conflicting_framing_is_refused(keyless, framing):
    """A proxy that reads the other Content-Length would see the tail as a
    second request: refuse, answer once, and close."""
    port = port_of(keyless)
    smuggled = b"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    body = b"{}" + smuggled
    status, _, resp, closed = send(port, "POST", "/v1/sessions",
                                   [("Content-Type", "application/json")] + framing, body,
                                   check_rest=True)
    assert status == 400 and code_of(resp) == "bad_framing", resp
    assert closed
