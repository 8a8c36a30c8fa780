"""A node drains (docs/cluster.md): it takes no new session, one-shot, E2B
sandbox or MCP session (503 `draining`) while its sessions run on;
/healthz and the node's agent say so (HAProxy's agent-check reads
`ready up N%`, `drain`, `down`), and /readyz answers 503 `draining`; an admin key, never a tenant's API key,
drains and undrains it (POST /v1/node/drain, `petri drain`); SIGTERM with
[cluster] drain_grace_s drains first and stops once the sessions have
ended, the grace has passed, or a second signal says so.

Without the change: a node had no way to refuse new sessions while its
own ran on, no agent, and SIGTERM killed every session at once."""
import signal
import socket
import subprocess
import threading

import pytest
import requests

from apihelp import PETRI, wait_for

TENANT = "tenant-key-" + "a" * 24
ADMIN = "admin-key-" + "b" * 24
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {TENANT}"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}}


def config(extra=""):
    return (f"[server]\nnode = d1\napi_keys = {TENANT}\nmax_sessions = 4\n"
            f"[cluster]\nadmin_keys = {ADMIN}\nagent_listen = 127.0.0.1:0\n{extra}")


def agent_address(srv):
    """The second line petri serve prints: where its agent listens."""
    line = srv.out_line(1, timeout=60)
    assert line.startswith("petri: agent on "), line
    host, port = line.split()[-1].rsplit(":", 1)
    return host, int(port)


def agent_says(addr):
    """What HAProxy's agent-check reads: one line, then the agent closes."""
    with socket.create_connection(addr, timeout=10) as s:
        data = b""
        while chunk := s.recv(256):
            data += chunk
    return data.decode()


def admin(srv, action, key=ADMIN):
    return requests.post(f"{srv.url}/v1/node/{action}", timeout=30,
                         headers={"Authorization": f"Bearer {key}"})


def mcp_initialize(url):
    return requests.post(url + "/mcp", headers=MCP_HEADERS, json=INIT, timeout=60)


def test_drain_refuses_new_sessions_and_keeps_the_live_ones(make_server):
    srv = make_server(config())
    addr = agent_address(srv)
    api = srv.api(TENANT)
    assert agent_says(addr) == "ready up 100%\n"
    sid = api.session()
    assert api.execute(sid, "x = 41")["status"] == "ok"
    assert agent_says(addr) == "ready up 75%\n"      # 3 of 4 free
    # An MCP session made before the drain: its sandbox starts on its
    # first call, after it; it is this node's session, so it runs.
    r = mcp_initialize(srv.url)
    assert r.status_code == 200, r.text
    mcp_headers = {**MCP_HEADERS, "Mcp-Session-Id": r.headers["Mcp-Session-Id"]}

    r = admin(srv, "drain")
    assert r.status_code == 200 and r.json()["draining"] is True, r.text
    assert api.get("/healthz").json()["draining"] is True
    assert agent_says(addr) == "drain\n"
    # Nothing new: a session, a one-shot, an E2B sandbox, an MCP session.
    for r in (api.post("/v1/sessions", {}), api.post("/v1/execute", {"code": "1"})):
        assert r.status_code == 503 and r.json()["error"]["code"] == "draining", r.text
    r = requests.post(srv.url + "/sandboxes", headers={"X-API-KEY": TENANT},
                      json={"templateID": "base"}, timeout=60)
    assert r.status_code == 503 and "draining" in r.text, r.text
    r = mcp_initialize(srv.url)
    assert r.status_code == 503 and "draining" in r.json()["error"]["message"], r.text
    # The live ones run on: state, files, the MCP session's first call.
    r = api.execute(sid, "x + 1")
    assert r["status"] == "ok" and r["results"][0]["text/plain"] == "42", r
    assert api.put(f"/v1/sessions/{sid}/files/a.txt", b"kept").status_code in (200, 201)
    assert api.get(f"/v1/sessions/{sid}/files/a.txt").content == b"kept"
    r = requests.post(srv.url + "/mcp", headers=mcp_headers, timeout=120, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "print(7 * 6)"}}})
    assert r.status_code == 200 and "42" in r.text and not r.json()["result"].get("isError"), r.text
    # Its sandbox ended, the next one would be a new session: refused.
    mcp_sid = [x["id"] for x in api.get("/v1/sessions").json()["sessions"] if x["id"] != sid]
    assert len(mcp_sid) == 1, mcp_sid
    assert api.delete(f"/v1/sessions/{mcp_sid[0]}").status_code == 204
    r = requests.post(srv.url + "/mcp", headers=mcp_headers, timeout=120, json={
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "print(1)"}}})
    assert r.status_code == 200 and r.json()["result"].get("isError") and "draining" in r.text, r.text

    r = admin(srv, "undrain")
    assert r.status_code == 200 and r.json()["draining"] is False, r.text
    assert agent_says(addr).startswith("ready up ")
    assert api.post("/v1/execute", {"code": "1"}).json()["status"] == "ok"
    requests.delete(srv.url + "/mcp", headers=mcp_headers, timeout=60)


def test_readyz_follows_drain_and_undrain(make_server):
    srv = make_server(config())
    readyz = lambda: requests.get(srv.url + "/readyz", timeout=30)  # noqa: E731
    r = readyz()                                  # no key: a probe's
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    assert admin(srv, "drain").status_code == 200
    r = readyz()
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["status"] == "not_ready" and body["reason"] == "draining", body
    assert body["draining"] is True and body["node"] == "d1", body
    # /healthz still says the node is up: only readiness changed.
    assert srv.api(TENANT).get("/healthz").status_code == 200
    assert admin(srv, "undrain").status_code == 200
    r = readyz()
    assert r.status_code == 200 and "reason" not in r.json(), r.text


def test_only_an_admin_key_administers_the_node(make_server, tmp_path):
    srv = make_server(config())
    api = srv.api(TENANT)
    # A tenant's key never drains a node; no key at all neither.
    for key in (TENANT, "", ADMIN + "x"):
        r = admin(srv, "drain", key)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", r.text
    assert api.get("/healthz").json()["draining"] is False
    # An admin key is not a tenant's: it opens nothing else.
    assert srv.api(ADMIN).post("/v1/sessions", {}).status_code == 401
    r = requests.get(srv.url + "/v1/node", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
    assert r.status_code == 200 and r.json()["node"] == "d1", r.text
    assert admin(srv, "nothing").status_code == 404
    assert requests.get(srv.url + "/v1/node/drain", timeout=30,
                        headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 405

    # API keys and no admin keys: no one administers it over HTTP.
    other = make_server(f"[server]\napi_keys = {TENANT}\n")
    r = admin(other, "drain", TENANT)
    assert r.status_code == 403, r.text
    # An admin key that is also an API key is refused at start.
    ini = tmp_path / "same.ini"
    ini.write_text(f"[server]\napi_keys = {TENANT}\n[cluster]\nadmin_keys = {TENANT}\n")
    p = subprocess.run([PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(ini)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "admin_keys" in p.stderr, p.stderr


def test_petri_drain_undrain_and_node(make_server):
    srv = make_server(config())
    run = lambda *a, **kw: subprocess.run([PETRI, *a, "--url", srv.url], capture_output=True,  # noqa: E731
                                          text=True, timeout=60, **kw)
    p = run("drain", "--key", ADMIN)
    assert p.returncode == 0 and '"draining":true' in p.stdout, (p.stdout, p.stderr)
    p = run("node", env={"PETRI_ADMIN_KEY": ADMIN, "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0 and '"draining":true' in p.stdout and '"node":"d1"' in p.stdout, p
    p = run("undrain", "--key", ADMIN)
    assert p.returncode == 0 and '"draining":false' in p.stdout, p
    p = run("drain", "--key", TENANT)
    assert p.returncode == 1 and "admin key" in p.stderr, p
    assert srv.api(TENANT).get("/healthz").json()["draining"] is False


def test_sigterm_drains_until_the_sessions_end(make_server):
    srv = make_server(config("drain_grace_s = 120\n"))
    addr = agent_address(srv)
    api = srv.api(TENANT)
    sid = api.session()
    srv.proc.send_signal(signal.SIGTERM)
    assert wait_for(lambda: api.get("/healthz").json()["draining"], 30)
    assert agent_says(addr) == "drain\n"
    r = api.get("/readyz")
    assert r.status_code == 503 and r.json()["reason"] == "draining", r.text
    assert api.post("/v1/sessions", {}).json()["error"]["code"] == "draining"
    assert api.execute(sid, "print('still here')")["stdout"] == "still here\n"
    assert srv.proc.poll() is None
    # Its last session ends: the node stops, well before the grace.
    assert api.delete(f"/v1/sessions/{sid}").status_code == 204
    assert srv.proc.wait(timeout=60) == 0
    assert "drained: 0 sessions live" in srv.stderr_text()


def test_sigterm_drain_ends_with_its_grace_or_a_second_signal(make_server):
    srv = make_server(config("drain_grace_s = 2\n"))
    srv.api(TENANT).session()
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=60) == 0
    assert "drained: 1 sessions live" in srv.stderr_text()

    srv = make_server(config("drain_grace_s = 600\n"))
    srv.api(TENANT).session()
    srv.proc.send_signal(signal.SIGTERM)
    assert wait_for(lambda: "draining before stopping" in srv.stderr_text(), 30)
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=60) == 0
    assert "stopping now, 1 sessions live" in srv.stderr_text()


def test_the_agent_says_down_while_stopping(make_server):
    srv = make_server(config("[server]\nshutdown_grace_s = 30\n"))
    addr = agent_address(srv)
    api = srv.api(TENANT)
    sid = api.session()
    t = threading.Thread(target=lambda: api.post(f"/v1/sessions/{sid}/execute",
                                                 {"code": "import time; time.sleep(5)"}))
    t.start()
    assert api.wait_busy(sid, 30)   # the execution is under way: the stop waits for it
    srv.proc.send_signal(signal.SIGTERM)
    assert wait_for(lambda: "stopping (grace" in srv.stderr_text(), 30)
    assert agent_says(addr) == "down\n"
    t.join(60)
    assert srv.proc.wait(timeout=60) == 0


def test_a_client_that_reads_nothing_costs_the_agent_nothing(make_server):
    """Connections that never read, or send garbage, are answered and
    closed; the agent serves the next at once."""
    srv = make_server(config())
    addr = agent_address(srv)
    held = [socket.create_connection(addr, timeout=10) for _ in range(50)]
    for s in held[:10]:
        s.sendall(b"x" * 4096)
    assert agent_says(addr) == "ready up 100%\n"
    for s in held:
        s.close()


@pytest.mark.parametrize("bad", ["unix:/tmp/x", "nohost"])
def test_a_bad_agent_address_is_refused(tmp_path, bad):
    ini = tmp_path / "petri.ini"
    ini.write_text(f"[cluster]\nagent_listen = {bad}\n")
    p = subprocess.run([PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(ini)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "agent_listen" in p.stderr, p.stderr
