"""Ports: a server a session's code runs, reached from outside through petri
(ANY /v1/sessions/{id}/ports/{port}/{path}, docs/api.md "Ports"): the
request as the client sent it, but for petri's credentials, cookies and
the hop's headers; the answer as the server gave it, with a sandboxing
Content-Security-Policy; clear errors for a closed port, a silent server,
an answer too large or not HTTP; one session's ports are its own.

Servers are started as commands (docs/api.md "Commands") and waited for by
reading their output: nothing asserts on how long anything took.
"""
import pytest

from apihelp import wait_for

# Answers every request with what it received, as JSON; says "ready" once
# it listens.
ECHO = r"""
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.dumps({"method": self.command, "path": self.path,
                           "version": self.request_version,
                           "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": self.rfile.read(n).decode(),
                           "client": self.client_address[0]}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Upstream", "yes")
        self.send_header("Set-Cookie", "sid=abc; Path=/")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_PUT = do_DELETE = answer
    def log_message(self, *a):
        pass
srv = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("ready", flush=True)
srv.serve_forever()
"""

# A raw server: accepts, then answers with what argv[2] says.
RAW = r"""
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.recv(65536)
    if sys.argv[2] == "silent":
        time.sleep(600)
    elif sys.argv[2] == "garbage":
        c.sendall(b"this is not http\r\n\r\n")
    elif sys.argv[2] == "huge":
        c.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
        chunk = b"x" * 65536
        try:
            for _ in range(17 * 16 + 1):
                c.sendall(chunk)
        except OSError:
            pass
    elif sys.argv[2] == "headers":
        c.sendall(b"HTTP/1.0 200 OK\r\n" + b"X-Long: " + b"a" * 70000 + b"\r\n\r\n")
    elif sys.argv[2] == "keepalive":       # answers whole, then keeps the connection
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        time.sleep(600)
    elif sys.argv[2] == "interim":
        c.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                  b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    elif sys.argv[2] == "upgrade":
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
    elif sys.argv[2] == "short":
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    elif sys.argv[2] == "chunked":
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
    elif sys.argv[2] == "origin-wide":
        c.sendall(b"HTTP/1.0 302 Found\r\nLocation: https://elsewhere.example/\r\n"
                  b"Clear-Site-Data: \"*\"\r\nAlt-Svc: h3=\":443\"\r\nNEL: {}\r\n"
                  b"Strict-Transport-Security: max-age=1\r\nWWW-Authenticate: Basic\r\n"
                  b"X-Accel-Redirect: /internal\r\nCache-Control: public\r\nX-Empty:\r\n"
                  b"X-Mine: kept  \r\nContent-Type: text/plain\r\n\r\nmoved")
    elif sys.argv[2] == "local-redirect":
        c.sendall(b"HTTP/1.0 302 Found\r\nLocation: /login?next=1\r\n\r\n")
    elif sys.argv[2] == "big":
        try:
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 8388608\r\n\r\n" + b"x" * 8388608)
        except OSError:
            pass
    c.close()
"""


def serve(api, sid, code, *args):
    r = api.post(f"/v1/sessions/{sid}/commands",
                 {"args": ["python3", "-c", code, *map(str, args)]})
    assert r.status_code == 201, r.text
    pid, said, at = r.json()["pid"], "", 0
    while "ready\n" not in said:
        got = api.get(f"/v1/sessions/{sid}/commands/{pid}",
                      params={"wait_s": 30, "stdout_from": at}).json()
        assert got["running"], got
        said, at = said + got["stdout"], got["stdout_next"]
    return pid


def refused(r, status, code):
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code, r.text
    return r.json()["error"]["message"]


def test_a_request_reaches_the_sessions_server_as_sent(server):
    api = server.api()
    sid = api.session()
    serve(api, sid, ECHO, 8000)
    r = api.post(f"/v1/sessions/{sid}/ports/8000/some/where?q=a b&n=1", data="hello",
                 headers={"Content-Type": "text/plain", "X-Custom": "mine",
                          "Authorization": "Bearer petri-key", "Cookie": "theirs=1"})
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["method"] == "POST" and got["path"] == "/some/where?q=a%20b&n=1", got
    assert got["body"] == "hello" and got["client"] == "127.0.0.1", got
    assert got["version"] == "HTTP/1.0", got
    h = got["headers"]
    assert h["x-custom"] == "mine" and h["content-type"] == "text/plain", h
    assert h["host"] == "127.0.0.1:8000", h
    assert h["x-forwarded-prefix"] == f"/v1/sessions/{sid}/ports/8000", h
    # petri's credentials and the browser's cookies stay out.
    assert "authorization" not in h and "cookie" not in h, h
    # The answer: the server's status and headers, but its cookies; and a
    # policy that gives what it serves an origin of its own.
    assert r.headers["X-Upstream"] == "yes", r.headers
    assert "Set-Cookie" not in r.headers, r.headers
    assert r.headers["Content-Security-Policy"].startswith("sandbox "), r.headers
    # Every method, and the root path.
    assert api.delete(f"/v1/sessions/{sid}/ports/8000").json()["path"] == "/"
    assert api.get(f"/v1/sessions/{sid}/ports/8000/").json()["method"] == "GET"


def test_a_file_server_serves_the_workspace(server):
    api = server.api()
    sid = api.session()
    api.execute(sid, "open('page.html', 'w').write('<h1>made in the sandbox</h1>')")
    r = api.post(f"/v1/sessions/{sid}/commands",
                 {"args": ["python3", "-u", "-m", "http.server", "8080"]})
    pid = r.json()["pid"]
    assert "Serving" in api.get(f"/v1/sessions/{sid}/commands/{pid}",
                                params={"wait_s": 30}).json()["stdout"]
    r = api.get(f"/v1/sessions/{sid}/ports/8080/page.html")
    assert r.status_code == 200 and r.text == "<h1>made in the sandbox</h1>", r.text
    assert r.headers["Content-Type"] == "text/html", r.headers
    assert api.get(f"/v1/sessions/{sid}/ports/8080/nope").status_code == 404


def test_one_sessions_ports_are_its_own(server):
    api = server.api()
    a, b = api.session(), api.session()
    serve(api, a, ECHO, 8000)
    assert api.get(f"/v1/sessions/{a}/ports/8000/").status_code == 201
    message = refused(api.get(f"/v1/sessions/{b}/ports/8000/"), 502, "port_closed")
    assert "8000" in message


@pytest.mark.parametrize("bad", ["0", "65536", "abc", "123456", "-1", ""])
def test_a_bad_port_is_refused(server, bad):
    api = server.api()
    sid = api.session()
    refused(api.get(f"/v1/sessions/{sid}/ports/{bad}/x"), 400, "invalid_request")


def test_servers_that_misbehave_are_clear_errors(make_server):
    srv = make_server("[server]\nhttp_timeout_s = 2\n")
    api = srv.api()
    sid = api.session()
    for port, how in [(9001, "silent"), (9002, "garbage"), (9003, "huge"), (9004, "headers")]:
        serve(api, sid, RAW, port, how)
    refused(api.get(f"/v1/sessions/{sid}/ports/9001/"), 504, "port_timeout")
    assert "not HTTP" in refused(api.get(f"/v1/sessions/{sid}/ports/9002/"), 502,
                                 "bad_gateway")
    assert "16 MiB" in refused(api.get(f"/v1/sessions/{sid}/ports/9003/"), 502,
                               "bad_gateway")
    assert "64 KiB" in refused(api.get(f"/v1/sessions/{sid}/ports/9004/"), 502,
                               "bad_gateway")
    # An answer whole by its Content-Length is passed at once, whatever the
    # connection does after; interim answers are skipped.
    for port, how in [(9005, "keepalive"), (9006, "interim"), (9007, "upgrade"),
                      (9008, "short"), (9009, "chunked")]:
        serve(api, sid, RAW, port, how)
    r = api.get(f"/v1/sessions/{sid}/ports/9005/")
    assert r.status_code == 200 and r.text == "hello", r.text
    r = api.get(f"/v1/sessions/{sid}/ports/9006/")
    assert r.status_code == 200 and r.text == "ok", r.text
    assert "WebSocket" in refused(api.get(f"/v1/sessions/{sid}/ports/9007/"), 502,
                                  "bad_gateway")
    assert "cut short" in refused(api.get(f"/v1/sessions/{sid}/ports/9008/"), 502,
                                  "bad_gateway")
    assert "chunked" in refused(api.get(f"/v1/sessions/{sid}/ports/9009/"), 502,
                                "bad_gateway")
    # The session, and the server, work on.
    assert api.execute(sid, "1 + 1")["results"][0]["text/plain"] == "2"


def test_an_answer_acts_on_nothing_but_itself(server):
    api = server.api()
    sid = api.session()
    serve(api, sid, RAW, 9101, "origin-wide")
    serve(api, sid, RAW, 9102, "local-redirect")
    r = api.get(f"/v1/sessions/{sid}/ports/9101/", allow_redirects=False)
    assert r.status_code == 302 and r.text == "moved", r.text
    h = {k.lower(): v for k, v in r.headers.items()}
    # Nothing that tells the browser, or a proxy in front, to act on petri's
    # origin; no redirect to another site; what describes the content stays.
    for name in ("location", "clear-site-data", "alt-svc", "nel", "strict-transport-security",
                 "www-authenticate", "x-accel-redirect", "x-empty"):
        assert name not in h, (name, h)
    assert h["cache-control"] == "no-store" and h["x-mine"] == "kept", h
    assert h["content-type"] == "text/plain", h
    r = api.get(f"/v1/sessions/{sid}/ports/9102/", allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"] == "/login?next=1", r.headers


def test_unread_answers_of_any_method_are_bounded(make_server):
    import socket
    srv = make_server("[server]\nmax_answers_mb = 4\n")
    api = srv.api()
    sid = api.session()
    serve(api, sid, RAW, 9200, "big")
    host, port = srv.url.split("//")[1].split(":")
    held = []
    try:
        # Answers of 8 MiB nobody reads, asked for by DELETE: each is held
        # as any answer is, and the next is refused once they fill the cap.
        def refused_now():
            s = socket.create_connection((host, int(port)))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            held.append(s)
            s.sendall(f"DELETE /v1/sessions/{sid}/ports/9200/ HTTP/1.1\r\n"
                      f"Host: {host}:{port}\r\n\r\n".encode())
            s.settimeout(30)
            status = s.recv(12)
            return status[9:12] in (b"429", b"503")
        assert wait_for(refused_now, 60)
    finally:
        for s in held:
            s.close()


def test_an_unknown_or_ended_session(server):
    api = server.api()
    refused(api.get("/v1/sessions/ses_nope/ports/8000/"), 404, "session_not_found")
    sid = api.session()
    assert api.delete(f"/v1/sessions/{sid}").status_code == 204
    assert api.get(f"/v1/sessions/{sid}/ports/8000/").status_code in (404, 410)


# ---- E2B's sandboxes: getHost() and the data plane's headers ------------------

def test_an_e2b_sandboxs_port_by_its_headers_and_by_gethost(make_server):
    import secrets

    import requests
    from harness import Api

    key = "e2b_" + secrets.token_hex(16)
    srv = make_server(f"[server]\napi_keys = {key}\n")
    r = requests.post(srv.url + "/sandboxes", headers={"X-API-KEY": key},
                      json={"templateID": "base", "timeout": 600}, timeout=120)
    assert r.status_code == 201, r.text
    sid, token = r.json()["sandboxID"], r.json()["trafficAccessToken"]
    api = Api(srv.url, key=key)
    serve(api, sid, ECHO, 3000)
    # As the data plane names it: the sandbox and its port in headers.
    r = requests.post(srv.url + "/api/anything?x=1", data=b"\x00raw", timeout=60, headers={
        "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "3000",
        "E2B-Traffic-Access-Token": token, "Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["path"] == "/api/anything?x=1" and got["body"] == "\x00raw", got
    # Neither the sandbox's tokens nor where it is reach its server.
    assert not {"e2b-traffic-access-token", "x-access-token", "e2b-sandbox-id",
                "e2b-sandbox-port", "x-forwarded-prefix"} & set(got["headers"]), got
    # As getHost(3000) names it: "3000-<id>.<domain>", whatever the domain.
    host = {"Host": f"3000-{sid}.sandboxes.example.org"}
    r = requests.get(srv.url + "/healthz", timeout=60,
                     headers={**host, "X-Access-Token": token})
    assert r.status_code == 201 and r.json()["path"] == "/healthz", r.text
    # ... petri's own paths included: an upload's is the server's too.
    r = requests.put(srv.url + "/v1/sessions/x/files/y", data=b"hi", timeout=60,
                     headers={**host, "X-Access-Token": token})
    assert r.status_code == 201 and r.json()["method"] == "PUT", r.text
    assert r.json()["body"] == "hi", r.text
    # Never without the sandbox's token, nor with another's.
    for headers in [host, {**host, "X-Access-Token": "tok_nope"},
                    {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "3000"}]:
        r = requests.get(srv.url + "/", headers=headers, timeout=60)
        assert r.status_code == 401, (headers, r.text)
    # A port that is no number.
    r = requests.get(srv.url + "/", timeout=60, headers={
        "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "http", "X-Access-Token": token})
    assert r.status_code == 404, r.text
    # Killed: what the SDKs read as a sandbox that ended.
    assert requests.delete(f"{srv.url}/sandboxes/{sid}", headers={"X-API-KEY": key},
                           timeout=60).status_code == 204
    r = requests.get(srv.url + "/", headers={**host, "X-Access-Token": token}, timeout=60)
    assert r.status_code == 502, r.text
