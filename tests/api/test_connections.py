"""Connection budgets of `petri serve`: one address cannot hold more than
max_connections_per_ip, and a client that stops sending its request is
closed after http_timeout_s (docs/configuration.md, "The HTTP server")."""
import socket
import time

import requests


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
        time.sleep(1)
        refused = sum(closed(s, 0.01) for s in held)
        assert refused >= 10, f"only {refused} of 30 connections from one address refused"
        # Another address is served.
        r = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
        assert r.status_code == 200
    finally:
        for s in held:
            s.close()
    # The address is served again once its connections are gone.
    deadline = time.monotonic() + 30
    while True:
        s = half_request("127.0.0.5", port)
        try:
            s.sendall(b"x\r\n\r\n")
            if s.recv(12).startswith(b"HTTP/1.1 200"):
                break
        except OSError:
            pass
        finally:
            s.close()
        assert time.monotonic() < deadline, "127.0.0.5 is still refused"
        time.sleep(0.2)


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
