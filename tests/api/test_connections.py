"""Connection budgets of `petri serve`: at max_connections the server
accepts no more until one closes, one address cannot hold more than
max_connections_per_ip, and a client that stops sending its request is
closed after http_timeout_s (docs/configuration.md, "The HTTP server")."""
import socket

import pytest
import requests

import harness


def port_of(srv):
    return int(srv.url.rsplit(":", 1)[1])


def half_request(src, port):
    s = socket.socket()
    s.settimeout(10)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
    return s


def closed(s, wait):
    """Does the server close s within wait seconds?"""
    s.settimeout(wait)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def test_one_address_cannot_take_every_connection(make_server):
    srv = make_server("[server]\nmax_connections_per_ip = 20\n[sessions]\nwarm = false\n")
    port = port_of(srv)
    held = [half_request("127.0.0.5", port) for _ in range(30)]
    try:
        # The server closes those past the 20th; 10 s is well before
        # http_timeout_s (30 s), which would close them all.
        refused = harness.poll(lambda: sum(closed(s, 0.01) for s in held), lambda n: n >= 10, 10)
        assert refused >= 10, f"only {refused} of 30 connections from one address refused"
        # Another address is served.
        r = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
        assert r.status_code == 200
    finally:
        for s in held:
            s.close()
    # The address is served again once its connections are gone.
    def served():
        s = half_request("127.0.0.5", port)
        try:
            s.sendall(b"x\r\n\r\n")
            return s.recv(12).startswith(b"HTTP/1.1 200")
        except OSError:
            return False
        finally:
            s.close()
    assert harness.wait_for(served, 30, 0.2), "127.0.0.5 is still refused"


@pytest.mark.parametrize("threads", [1, 2])
def test_at_the_connection_limit_the_next_waits_for_a_free_one(make_server, threads):
    """At max_connections the server accepts nothing more (the next
    connections wait in the kernel's backlog, none is reset) and spends no
    CPU on them; when one closes, the oldest waiting is served (with one
    event thread too, whose libmicrohttpd counts a close after reporting
    it)."""
    srv = make_server("[server]\nmax_connections = 16\nmax_connections_per_ip = 0\n"
                      f"http_timeout_s = 120\nhttp_threads = {threads}\n"
                      "[sessions]\nwarm = false\n")
    port = port_of(srv)
    held = [half_request(f"127.0.0.{10 + i}", port) for i in range(16)]
    waiting = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        # The handshake is the kernel's; the request is never read.
        waiting.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        cpu = harness.cpu_seconds(srv.pid)
        assert not closed(waiting, 2), "a connection past the limit was answered or reset"
        spent = harness.cpu_seconds(srv.pid) - cpu
        assert spent < 0.5, f"the daemon spent {spent:.2f} s of CPU at the limit"
        assert all(not closed(s, 0.01) for s in held), "a held connection was closed"
        held.pop().close()
        waiting.settimeout(30)
        assert waiting.recv(12).startswith(b"HTTP/1.1 200"), "the waiting connection was not served"
    finally:
        waiting.close()
        for s in held:
            s.close()


def test_a_stalled_request_is_closed(make_server):
    srv = make_server("[server]\nhttp_timeout_s = 2\n[sessions]\nwarm = false\n")
    port = port_of(srv)
    s = half_request("127.0.0.1", port)
    try:
        assert closed(s, 30), "a connection idle in its headers was kept"
    finally:
        s.close()
    # A slow execution is not idle: it is answered.
    api = srv.api()
    r = api.post("/v1/execute", {"code": "import time; time.sleep(4); print('done')"})
    assert r.status_code == 200 and r.json()["stdout"] == "done\n", r.text


def held_body(port, key, size, src="127.0.0.1"):
    """A POST whose body of size bytes lacks its last byte: held by the
    server until it comes."""
    s = socket.socket()
    s.settimeout(30)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall((f"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {size}\r\n\r\n").encode() + b"{" + b" " * (size - 2))
    return s


def test_one_key_cannot_hold_every_request_body(make_server):
    """Two keys share a 4 MiB budget of request bodies: one holding
    unfinished bodies is refused past its half (429 too_many_bodies), and
    the other's one-shot is still served, not 503 busy."""
    srv = make_server("[server]\napi_keys = k-one, k-two\nmax_buffered_mb = 4\n"
                      "max_json_kb = 1024\n")
    port = port_of(srv)
    one, two = srv.api(key="k-one"), srv.api(key="k-two")
    held, refused = [], None
    try:
        # One body at a time (so that each is whole in the server before
        # the next), until a small one of the same key is refused.
        for _ in range(6):
            held.append(held_body(port, "k-one", 1 << 20))
            r = harness.poll(lambda: one.post("/v1/sessions", {"bogus": 1}),
                             lambda r: r.status_code != 400, 5)
            if r.status_code != 400:
                refused = r
                break
        assert refused is not None, "a key's unfinished bodies were never counted"
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "too_many_bodies"
        assert "share (2048 KiB)" in refused.json()["error"]["message"]
        r = two.post("/v1/execute", {"code": "print(6 * 7)"})
        assert r.status_code == 200 and r.json()["stdout"] == "42\n", r.text
    finally:
        for s in held:
            s.close()


def test_a_trickled_body_is_closed(make_server):
    """A body that never idles for http_timeout_s but comes a byte at a
    time loses its connection: it may not hold its share of the body budget
    forever."""
    srv = make_server("[server]\nhttp_timeout_s = 2\n[sessions]\nwarm = false\n")
    port = port_of(srv)
    s = socket.socket()
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall((f"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               f"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{").encode())
    try:
        for _ in range(40):
            try:
                s.sendall(b" ")
            except OSError:
                break
            if closed(s, 0.5):
                break
        else:
            raise AssertionError("a body trickled for 20 s was kept")
    finally:
        s.close()
