"""Three petri nodes behind HAProxy (docs/cluster.md), through the router
only: sessions spread over every node and keep their state; files, event
streams, MCP over HTTP and E2B's routes reach the node an id names; each
node's own endpoints under /nodes/NODE/; a drained node gets no new
session while its own run on; per-client caps hold behind the router and a
forged X-Forwarded-For changes nothing; SIGTERM drains; after `kill -9` of
a node its sessions answer node_unavailable (JSON) and the others and new
sessions are unaffected; `cluster down` leaves nothing.

The tests run in file order on one cluster: the destructive ones last."""
import json
import os
import signal
import socket
import subprocess
import time
from collections import Counter

import requests

from clusterhelp import CAP, NODES
from harness import cgroup_dirs, ended, refuses, still_alive, wait_for

JSON = {"Content-Type": "application/json"}


def node_of(sid):
    return sid.split("_", 1)[1].split("-", 1)[0]


def create(url):
    r = requests.post(url + "/v1/sessions", json={}, timeout=60)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def execute(url, sid, code):
    r = requests.post(f"{url}/v1/sessions/{sid}/execute", json={"code": code}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_sessions_spread_over_every_node_and_keep_their_state(cluster):
    sids = [create(cluster.url) for _ in range(30)]
    counts = Counter(node_of(s) for s in sids)
    assert set(counts) == {f"n{k}" for k in range(1, NODES + 1)}, counts
    for i, sid in enumerate(sids):
        assert execute(cluster.url, sid, f"x = {i}")["status"] == "ok"
    for i, sid in enumerate(sids):
        r = execute(cluster.url, sid, "x * 2")
        assert r["status"] == "ok" and r["results"][0]["text/plain"] == str(2 * i), r
    # Each node's own list, through the router: its sessions only.
    for k in range(1, NODES + 1):
        listed = requests.get(f"{cluster.url}/nodes/n{k}/v1/sessions", timeout=30).json()
        mine = {s["id"] for s in listed["sessions"]}
        assert mine == {s for s in sids if node_of(s) == f"n{k}"}, (k, counts)
        assert requests.get(f"{cluster.url}/nodes/n{k}/healthz", timeout=30).json()["node"] == f"n{k}"
        assert "petri_sessions_live" in requests.get(f"{cluster.url}/nodes/n{k}/metrics", timeout=30).text
    for sid in sids:
        assert requests.delete(f"{cluster.url}/v1/sessions/{sid}", timeout=60).status_code == 204
    # An id that names no node of this router: no such session, at once.
    r = requests.get(f"{cluster.url}/v1/sessions/ses_nowhere-{'0' * 32}", timeout=30)
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found", r.text


def test_files_and_streams_reach_the_session(cluster):
    sid = create(cluster.url)
    data = bytes(range(256)) * 40000     # 10 MB
    r = requests.put(f"{cluster.url}/v1/sessions/{sid}/files/blob.bin", data=data, timeout=120)
    assert r.status_code in (200, 201), r.text
    assert execute(cluster.url, sid, "import os; os.path.getsize('blob.bin')")["results"][0]["text/plain"] \
        == str(len(data))
    assert requests.get(f"{cluster.url}/v1/sessions/{sid}/files/blob.bin", timeout=120).content == data
    # Server-Sent Events pass as they are written: the code prints, then
    # waits until the client, having read that line, interrupts it; held
    # back anywhere, the line would come only with the time limit's end.
    code = "import time\nprint('first', flush=True)\nwhile True: time.sleep(0.05)"
    with requests.post(f"{cluster.url}/v1/sessions/{sid}/execute",
                       json={"code": code, "timeout_s": 30},
                       headers={"Accept": "text/event-stream"}, stream=True, timeout=120) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        for line in lines:
            if b"first" in line:
                break
        assert requests.post(f"{cluster.url}/v1/sessions/{sid}/interrupt",
                             timeout=30).json()["interrupted"] is True
        rest = b"\n".join(lines)
    assert b"KeyboardInterrupt" in rest and b'"timeout"' not in rest, rest[-500:]
    requests.delete(f"{cluster.url}/v1/sessions/{sid}", timeout=60)


def test_mcp_over_http_through_the_router(cluster):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    r = requests.post(cluster.url + "/mcp", headers=headers, timeout=60, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}})
    assert r.status_code == 200, r.text
    headers["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]
    for i, code in enumerate(("y = 20", "print(y + 22)")):
        r = requests.post(cluster.url + "/mcp", headers=headers, timeout=120, json={
            "jsonrpc": "2.0", "id": 2 + i, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": code}}})
        assert r.status_code == 200 and not r.json()["result"].get("isError"), r.text
    assert "42" in r.text
    assert requests.delete(cluster.url + "/mcp", headers=headers, timeout=60).status_code == 204


def test_e2b_routes_through_the_router(cluster):
    """E2B's control plane by the sandbox's id, its data plane by the
    sandbox id header or by the access token alone."""
    r = requests.post(cluster.url + "/sandboxes", json={"templateID": "code-interpreter-v1"},
                      headers={"X-API-KEY": "e2b_" + "1" * 32}, timeout=120)
    assert r.status_code == 201, r.text
    box = r.json()
    sid, token = box["sandboxID"], box["envdAccessToken"]
    assert node_of(token) == node_of(sid)
    r = requests.get(cluster.url + "/health", headers={"X-Access-Token": token}, timeout=30)
    assert r.status_code == 204, r.text
    r = requests.post(cluster.url + "/execute", timeout=120, json={"code": "z = 6 * 7\nz"},
                      headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49999",
                               "X-Access-Token": token})
    assert r.status_code == 200 and '"42"' in r.text, r.text
    r = requests.get(f"{cluster.url}/sandboxes/{sid}", headers={"X-API-KEY": "e2b_" + "1" * 32},
                     timeout=30)
    assert r.status_code == 200 and r.json()["sandboxID"] == sid, r.text
    assert requests.delete(f"{cluster.url}/sandboxes/{sid}", headers={"X-API-KEY": "e2b_" + "1" * 32},
                           timeout=60).status_code == 204


def test_the_e2b_sdk_through_the_router(cluster):
    """E2B's own JavaScript SDK, pointed at the router as docs/e2b.md says."""
    env = {**os.environ, "E2B_API_URL": cluster.url, "E2B_SANDBOX_URL": cluster.url,
           "E2B_API_KEY": "e2b_" + "2" * 32}
    p = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "e2b_sdk.mjs")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["text"] == "42" and out["read"] == "through the router\n", out
    assert out["stdout"] == "through the router\n", out
    assert node_of(out["id"]) in {f"n{k}" for k in range(1, NODES + 1)}


def open_stream(port, source, path, xff=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if xff:
        head += f"X-Forwarded-For: {xff}\r\n"
    s.sendall((head + "\r\n").encode())
    try:
        line = s.recv(64).split(b"\r\n", 1)[0]
    except OSError:
        line = b""
    return s, line


def test_per_client_caps_hold_behind_the_router(cluster):
    """Each client (its own address, as the router saw it) has CAP requests
    in flight at a node; a header naming someone else changes nothing,
    through the router or straight to a node."""
    path = "/nodes/n1/v1/events"
    held = []
    try:
        for source in ("127.0.0.5", "127.0.0.1"):
            for _ in range(CAP):
                s, line = open_stream(cluster.port, source, path)
                held.append(s)
                assert line == b"HTTP/1.1 200 OK", line
            for xff in (None, "127.0.0.6", "198.51.100.1", "127.0.0.2"):
                s, line = open_stream(cluster.port, source, path, xff)
                held.append(s)
                assert line.startswith(b"HTTP/1.1 429"), (source, xff, line)
        # Another client is served at the same node.
        s, line = open_stream(cluster.port, "127.0.0.6", path)
        held.append(s)
        assert line == b"HTTP/1.1 200 OK", line
    finally:
        for s in held:
            s.close()
    # Straight to a node, from an address it does not trust: the header is
    # not read, and the log names the address the request came from.
    node2 = int(cluster.node_url(2).rsplit(":", 1)[1])
    s, line = open_stream(node2, "127.0.0.1", "/v1/nothing", "192.0.2.77")
    s.close()
    assert line.startswith(b"HTTP/1.1 404"), line
    with open(f"{cluster.dir}/node-2.log") as f:
        log = f.read()
    assert "-> 404 (client 127.0.0.1)" in log and "192.0.2.77" not in log
    # The streams' ends reach the node (at its next keepalive at the
    # latest): both clients are served again.
    for source in ("127.0.0.5", "127.0.0.1"):
        assert wait_for(lambda: open_stream(cluster.port, source, "/nodes/n1/healthz")[1]
                        == b"HTTP/1.1 200 OK", 60), source


def test_a_drained_node_takes_no_new_session(cluster):
    own = create(cluster.url)
    while node_of(own) != "n2":
        requests.delete(f"{cluster.url}/v1/sessions/{own}", timeout=60)
        own = create(cluster.url)
    r = requests.post(f"{cluster.url}/nodes/n2/v1/node/drain", timeout=30)
    assert r.status_code == 200 and r.json()["draining"], r.text
    assert wait_for(lambda: cluster.server_status("nodes", "n2").startswith("DRAIN"), 30), \
        cluster.server_status("nodes", "n2")
    sids = [create(cluster.url) for _ in range(12)]
    assert not [s for s in sids if node_of(s) == "n2"], sids
    assert execute(cluster.url, own, "print('on n2')")["stdout"] == "on n2\n"
    r = requests.post(f"{cluster.url}/nodes/n2/v1/node/undrain", timeout=30)
    assert r.status_code == 200 and not r.json()["draining"], r.text
    assert wait_for(lambda: cluster.server_status("nodes", "n2") == "UP", 30)
    for sid in sids + [own]:
        requests.delete(f"{cluster.url}/v1/sessions/{sid}", timeout=60)


def test_sigterm_drains_the_node_first(cluster):
    own = create(cluster.url)
    while node_of(own) != "n3":
        requests.delete(f"{cluster.url}/v1/sessions/{own}", timeout=60)
        own = create(cluster.url)
    pid = cluster.pid(3)
    os.kill(pid, signal.SIGTERM)
    assert wait_for(lambda: cluster.server_status("nodes", "n3").startswith("DRAIN"), 30)
    assert not [s for s in (create(cluster.url) for _ in range(6)) if node_of(s) == "n3"]
    assert execute(cluster.url, own, "print('still')")["stdout"] == "still\n"
    assert requests.delete(f"{cluster.url}/v1/sessions/{own}", timeout=60).status_code == 204
    assert wait_for(lambda: ended(pid), 60)


def test_a_dead_nodes_sessions_say_so_and_the_rest_work(cluster):
    sids = [create(cluster.url) for _ in range(8)]
    victims = [s for s in sids if node_of(s) == "n1"]
    others = [s for s in sids if node_of(s) != "n1"]
    assert victims and others, sids
    pid = cluster.pid(1)
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    # Until the kernel has closed the dead node's files, its listening
    # socket still accepts a connection, then resets it: a request in that
    # moment is answered 502 node_unavailable ("stopped answering"), never
    # sent again (it may not be idempotent).  The leader is a zombie before
    # its last thread has closed them: the node is gone when its port
    # refuses.  Then:
    assert wait_for(lambda: ended(pid) and refuses(cluster.node_url(1)), 10)
    r = requests.post(f"{cluster.url}/v1/sessions/{victims[0]}/execute", json={"code": "1"},
                      timeout=60)
    took = time.monotonic() - started
    # 503 at once: each request has a connection of its own to its node,
    # refused now that the node is gone.
    assert r.status_code == 503, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json()["error"]["code"] == "node_unavailable", r.text
    print(f"kill -9 to node_unavailable: {took * 1000:.0f} ms")
    for sid in others:
        assert execute(cluster.url, sid, "print('fine')")["stdout"] == "fine\n"
    fresh = [create(cluster.url) for _ in range(4)]
    assert all(node_of(s) != "n1" for s in fresh), fresh
    for sid in others + fresh:
        requests.delete(f"{cluster.url}/v1/sessions/{sid}", timeout=60)


def test_down_leaves_nothing(cluster):
    p, pids = cluster.down()
    assert p.returncode == 0, p.stderr
    for pid, tree in zip(pids, cluster.trees.values()):
        assert not still_alive(tree), f"processes of node pid {pid} outlived it"
        assert not cgroup_dirs(pid), f"cgroups of node pid {pid} left behind"
    assert not os.path.exists(cluster.dir)
