"""Clients behind a router (docs/cluster.md): from the addresses of
[server] trusted_proxies only, petri takes the client from X-Forwarded-For
(the rightmost address that is not itself a trusted router) for its
per-client caps and its log; from anyone else the header changes nothing.
Each forwarded client may have max_connections_per_ip requests in flight
through the routers (429 past it) while the routers themselves are not
capped; a connection straight from an untrusted address is capped as
before.

Without the change: every client behind a router was the router's address,
and a cap of 3 refused the fourth client's stream."""
import socket

import pytest

from apihelp import wait_for

ROUTER, OTHER = "127.0.0.2", "127.0.0.3"
CAP = 3
KEY = "proxies-key-" + "c" * 20
AUTH = f"Authorization: Bearer {KEY}\r\n"


def port_of(srv):
    return int(srv.url.rsplit(":", 1)[1])


def open_stream(port, source, xff=None):
    """GET /v1/events from source (with X-Forwarded-For xff): the socket,
    and the status line (b"" when the connection was shut)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    head = "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n" + AUTH
    if xff is not None:
        head += f"X-Forwarded-For: {xff}\r\n"
    try:
        s.sendall((head + "\r\n").encode())
        line = s.recv(64).split(b"\r\n", 1)[0]
    except OSError:
        line = b""
    return s, line


def request(port, source, path="/v1/nothing", headers=()):
    """One request from source; the status code (0: the connection was shut)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    try:
        s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{AUTH}"
                   + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode())
        line = s.recv(64)
        return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else 0
    except OSError:
        return 0
    finally:
        s.close()


@pytest.fixture
def routed(make_server):
    return make_server(f"[server]\napi_keys = {KEY}\ntrusted_proxies = {ROUTER}/32, 10.9.0.0/16\n"
                       f"max_connections_per_ip = {CAP}\n[sessions]\nwarm = false\n")


def test_each_forwarded_client_has_its_own_cap(routed):
    port = port_of(routed)
    held = []
    try:
        # Three streams of one client, two of another: five connections
        # from the router, which is not capped.
        for client in ["198.51.100.7"] * CAP + ["198.51.100.8"] * 2:
            s, line = open_stream(port, ROUTER, client)
            held.append(s)
            assert line == b"HTTP/1.1 200 OK", (client, line)
        # The first client's fourth is refused, and says why; the other's
        # third is served.
        s, line = open_stream(port, ROUTER, "198.51.100.7")
        held.append(s)
        assert line.startswith(b"HTTP/1.1 429"), line
        s, line = open_stream(port, ROUTER, "198.51.100.8")
        held.append(s)
        assert line == b"HTTP/1.1 200 OK", line
    finally:
        for s in held:
            s.close()
    # Its streams gone, the client is served again.
    assert wait_for(lambda: request(port, ROUTER, "/healthz",
                                    [("X-Forwarded-For", "198.51.100.7")]) == 200, 30)


def test_a_forged_header_from_elsewhere_changes_nothing(routed):
    port = port_of(routed)
    held = []
    try:
        # Straight from an untrusted address, a new X-Forwarded-For on each
        # connection: still one address, capped at CAP connections.
        for i in range(CAP + 3):
            s, line = open_stream(port, OTHER, f"203.0.113.{i}")
            held.append((s, line))
        served = [line for _, line in held if line == b"HTTP/1.1 200 OK"]
        assert len(served) == CAP, [line for _, line in held]
    finally:
        for s, _ in held:
            s.close()
    # The log names the address the request came from, not the forged one
    # (once the streams' connections have closed).
    assert wait_for(lambda: request(port, OTHER, headers=[("X-Forwarded-For", "192.0.2.55")])
                    == 404, 30)
    assert wait_for(lambda: f"-> 404 (client {OTHER})" in routed.stderr_text(), 10)
    assert "192.0.2.55" not in routed.stderr_text()


def test_the_log_names_the_forwarded_client(routed):
    port = port_of(routed)
    # A client's own header, then the router's address it came through
    # (a trusted range): the client is the rightmost address not trusted.
    assert request(port, ROUTER, headers=[("X-Forwarded-For", "6.6.6.6, 192.0.2.44, 10.9.1.1")]) == 404
    assert wait_for(lambda: "-> 404 (client 192.0.2.44)" in routed.stderr_text(), 10)
    assert "6.6.6.6" not in routed.stderr_text()
    # Two headers: the last router's is the last one.
    assert request(port, ROUTER, headers=[("X-Forwarded-For", "6.6.6.7"),
                                          ("X-Forwarded-For", "2001:db8::9")]) == 404
    assert wait_for(lambda: "-> 404 (client 2001:db8::9)" in routed.stderr_text(), 10)
    # A trusted router's header that names nothing is refused.
    assert request(port, ROUTER, headers=[("X-Forwarded-For", "not-an-address")]) == 400
    # No header: the router's own request.
    assert request(port, ROUTER, "/healthz") == 200


def test_without_trusted_proxies_the_header_is_never_read(make_server):
    srv = make_server(f"[server]\nmax_connections_per_ip = {CAP}\n[sessions]\nwarm = false\n")
    port = port_of(srv)
    assert request(port, ROUTER, headers=[("X-Forwarded-For", "192.0.2.66")]) == 404
    assert wait_for(lambda: f"-> 404 (client {ROUTER})" in srv.stderr_text(), 10)
    assert "192.0.2.66" not in srv.stderr_text()


def test_a_server_without_keys_serves_no_client_behind_a_router(make_server):
    """Without API keys a server is its own machine's only: a router in
    front of it does not open it to the clients behind the router."""
    srv = make_server(f"[server]\ntrusted_proxies = {ROUTER}\n[sessions]\nwarm = false\n")
    port = port_of(srv)
    assert request(port, ROUTER, "/v1/sessions", [("X-Forwarded-For", "192.0.2.9")]) == 403
    assert request(port, ROUTER, "/v1/node/drain", [("X-Forwarded-For", "2001:db8::1")]) == 403
    # A client on this machine, through the router: served.
    assert request(port, ROUTER, "/v1/sessions", [("X-Forwarded-For", "127.0.0.9")]) == 200
    assert request(port, ROUTER, "/v1/sessions") == 200
