"""The host's shared tables (src/session/tables.h): the processes and ptys
that every sandbox of the host draws from.  A configuration whose sandboxes
could hold more than the host leaves them is refused at start; a session or
one-shot that asks for more pids than the live sandboxes leave is refused
with 429, and the room comes back when they end; each sandbox gets exactly
[sandbox] ptys."""
import subprocess

import requests

import pytest

from apihelp import PETRI, metric


def kernel(name):
    with open(f"/proc/sys/kernel/{name}") as f:
        return int(f.read())


def tasks_budget():
    """What petri leaves to sandboxes of the host's tasks: the smaller of
    pid_max and threads-max, less the kernel's first 300 pids and the
    host's reserve (an eighth, at least 2048)."""
    tasks = min(kernel("pid_max"), kernel("threads-max"))
    return tasks - 300 - max(tasks // 8, 2048)


def ptys_budget():
    shared = kernel("pty/max") - kernel("pty/reserve")
    return shared - shared // 4


def serve_refused(tmp_path, config):
    ini = tmp_path / "petri.ini"
    ini.write_text(config)
    p = subprocess.run([PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(ini)],
                       capture_output=True, text=True, timeout=60,
                       env={"STATE_DIRECTORY": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    return p.stderr


def test_sessions_that_could_exhaust_the_pid_table_are_refused_at_start(tmp_path):
    # 8 sessions (and the pool of 8 and the probe) at a pids limit that
    # makes 8 of them alone more than the host leaves
    pids = tasks_budget() // 8 + 1
    if pids > 1 << 20:
        pytest.skip(f"this host's pid table ({kernel('pid_max')}) is larger than 8 sessions "
                    "at the largest pids limit petri allows")
    err = serve_refused(tmp_path, f"[server]\nmax_sessions = 8\n[limits]\npids = {pids}\n"
                                  f"[max_limits]\npids = {pids}\n")
    assert "kernel.pid_max" in err and "max_sessions = 8" in err, err


def test_sandboxes_that_could_exhaust_the_pty_table_are_refused_at_start(tmp_path):
    sessions = ptys_budget() // 1024 + 1
    err = serve_refused(tmp_path, f"[server]\nmax_sessions = {sessions}\n"
                                  "[sandbox]\nptys = 1024\nuid_count = 2000\n")
    assert "kernel.pty.max" in err and "ptys = 1024" in err, err


def test_a_session_past_the_hosts_processes_is_refused_until_room_comes_back(make_server):
    srv = make_server("[server]\nmax_sessions = 8\n[max_limits]\npids = 1048576\n")
    api = srv.api()
    budget = metric(api.get("/metrics").text, "petri_sandbox_tasks_budget")
    assert budget and budget <= tasks_budget(), budget
    pids = min(int(budget) // 2 + 1, 1 << 20)
    fit = int(budget) // pids          # sessions at pids that fit: 1 on most hosts
    assert fit < 8
    held = [api.session(limits={"pids": pids}) for _ in range(fit)]
    assert metric(api.get("/metrics").text, "petri_sandbox_tasks_held") == fit * pids

    r = api.post("/v1/sessions", {"limits": {"pids": pids}})
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "over_capacity", r.text
    assert "kernel.pid_max" in r.json()["error"]["message"], r.text
    # a one-shot is a sandbox too
    left = int(budget) - fit * pids
    r = api.post("/v1/execute", {"code": "1", "limits": {"pids": left + 1}})
    assert r.status_code == 429 and "kernel.pid_max" in r.text, r.text
    # one that fits still runs, and gives its pids back
    r = api.post("/v1/execute", {"code": "1", "limits": {"pids": min(left, 64)}})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text

    assert api.delete(f"/v1/sessions/{held.pop()}").status_code in (200, 204)
    sid = api.session(limits={"pids": pids})
    held.append(sid)
    for sid in held:
        api.delete(f"/v1/sessions/{sid}")
    assert metric(api.get("/metrics").text, "petri_sandbox_tasks_held") == 0


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_each_sandbox_gets_its_ptys_and_no_more(make_server, warm):
    srv = make_server("[sandbox]\nptys = 3\n" + ("" if warm else "[sessions]\nwarm = false\n"))
    api = srv.api()
    sid = api.session()
    r = api.execute(sid, "import os, errno\nheld = []\ntry:\n"
                         "    for _ in range(100):\n        held.append(os.openpty())\n"
                         "except OSError as e:\n    print(len(held), errno.errorcode[e.errno])\n")
    api.delete(f"/v1/sessions/{sid}")
    assert r["status"] == "ok", r
    assert r["stdout"].split() == ["3", "ENOSPC"], r


KEY_A, KEY_B = "key-a-" + "a" * 26, "key-b-" + "b" * 26
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def mcp_execute(url, key, code):
    """One MCP session of key's over HTTP, one execute: the tool's result."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}"}
    r = requests.post(url + "/mcp", headers=headers, timeout=60, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}})
    assert r.status_code == 200, r.text
    headers["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]
    try:
        r = requests.post(url + "/mcp", headers=headers, timeout=120, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": code}}})
        assert r.status_code == 200, r.text
        return r.json()["result"]
    finally:
        requests.delete(url + "/mcp", headers=headers, timeout=60)


def test_each_key_holds_at_most_its_share_of_the_sandboxes(make_server):
    """With two keys and max_sessions = 4, each key may hold 2 sandboxes:
    one key's sessions never shut the other out, by the API, E2B or MCP."""
    srv = make_server(f"[server]\napi_keys = {KEY_A}, {KEY_B}\nmax_sessions = 4\n")
    a, b = srv.api(KEY_A), srv.api(KEY_B)
    held = [a.session(), a.session()]
    r = a.post("/v1/sessions", {})
    assert r.status_code == 429 and r.json()["error"]["code"] == "over_capacity", r.text
    assert "this API key holds its share" in r.text, r.text
    r = a.post("/v1/execute", {"code": "1"})
    assert r.status_code == 429 and "its share" in r.text, r.text
    r = a.post("/sandboxes", {"templateID": "code-interpreter-v1"})
    assert r.status_code == 429, r.text
    assert "its share" in str(mcp_execute(srv.url, KEY_A, "1")), "MCP is charged to its key"
    # the other key has all of its own
    other = [b.session(), b.session()]
    assert b.post("/v1/execute", {"code": "1"}).status_code == 429   # the server is full
    a.delete(f"/v1/sessions/{held.pop()}")
    res = mcp_execute(srv.url, KEY_A, "print(6 * 7)")
    assert "42" in str(res), res
    for sid in held:
        a.delete(f"/v1/sessions/{sid}")
    for sid in other:
        b.delete(f"/v1/sessions/{sid}")


def test_each_key_holds_at_most_its_share_of_the_hosts_processes(make_server):
    srv = make_server(f"[server]\napi_keys = {KEY_A}, {KEY_B}\nmax_sessions = 8\n"
                      "[max_limits]\npids = 1048576\n")
    a, b = srv.api(KEY_A), srv.api(KEY_B)
    budget = int(metric(a.get("/metrics").text, "petri_sandbox_tasks_budget"))
    share = budget // 2
    held, left = [], share
    while left >= 8:                 # key A takes exactly its share
        pids = min(left, 1 << 20)
        held.append(a.session(limits={"pids": pids}))
        left -= pids
    r = a.post("/v1/sessions", {"limits": {"pids": 8 + left}})
    assert r.status_code == 429 and "its share" in r.text, r.text
    # the server has room left, and the other key has its share of it
    sid = b.session(limits={"pids": min(share, 1 << 20)})
    b.delete(f"/v1/sessions/{sid}")
    for sid in held:
        a.delete(f"/v1/sessions/{sid}")
    assert metric(a.get("/metrics").text, "petri_sandbox_tasks_held") == 0
