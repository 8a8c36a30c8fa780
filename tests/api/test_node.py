"""Every id a client keeps names the node that made it (docs/cluster.md):
sessions (`ses_NODE-HEX`), MCP sessions (`mcp_NODE-HEX`), E2B sandboxes
(their id is the session's) and E2B access tokens (`tok_NODE-HEX`), so that
a router in front of several nodes sends a request to the node that holds
what it names from the name alone.  /healthz and every record entry name
the node too.  `[server] node` names it; by default the host's name does.

Without the change: ids were `ses_` and 32 hex digits whatever the node,
and nothing a router could read said where a session lived."""
import re
import socket
import subprocess

import requests

from apihelp import PETRI

NODE = "alpha7"
KEY = "e2b_" + "5" * 32
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {KEY}"}


def id_re(prefix, node, hex_digits):
    return re.compile(rf"^{prefix}_{node}-[0-9a-f]{{{hex_digits}}}$")


def node_of_host(host):
    """util/ids.h's id_node_from_host(), as a user reads it in the docs."""
    name = "".join(c for c in host.split(".")[0].lower() if c.isascii() and c.isalnum())
    return name[-16:] or "petri"


def test_every_id_names_the_node(make_server):
    srv = make_server(f"[server]\nnode = {NODE}\napi_keys = {KEY}\n")
    api = srv.api(KEY)
    assert api.get("/healthz").json()["node"] == NODE

    sid = api.session()
    assert id_re("ses", NODE, 32).match(sid), sid
    r = api.execute(sid, "print(6 * 7)")
    assert r["status"] == "ok" and r["stdout"] == "42\n", r
    entries = api.get("/v1/executions").json()["executions"]
    assert entries and entries[0]["session"] == sid and entries[0]["node"] == NODE, entries[:1]
    assert api.delete(f"/v1/sessions/{sid}").status_code == 204
    # A one-shot's entry names the node too (its session is null).
    assert api.post("/v1/execute", {"code": "1"}).json()["status"] == "ok"
    entries = api.get("/v1/executions").json()["executions"]
    assert entries[0]["session"] is None and entries[0]["node"] == NODE, entries[:1]

    r = requests.post(srv.url + "/mcp", headers=MCP_HEADERS, timeout=60, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}})
    assert r.status_code == 200, r.text
    mcp_id = r.headers["Mcp-Session-Id"]
    assert id_re("mcp", NODE, 32).match(mcp_id), mcp_id
    assert requests.delete(srv.url + "/mcp", headers={**MCP_HEADERS, "Mcp-Session-Id": mcp_id},
                           timeout=60).status_code == 204

    r = requests.post(srv.url + "/sandboxes", headers={"X-API-KEY": KEY},
                      json={"templateID": "base", "timeout": 60}, timeout=120)
    assert r.status_code == 201, r.text
    box = r.json()
    assert id_re("ses", NODE, 32).match(box["sandboxID"]), box
    assert id_re("tok", NODE, 64).match(box["envdAccessToken"]), box
    # The token still opens its sandbox, alone or with its id.
    for headers in ({"X-Access-Token": box["envdAccessToken"]},
                    {"X-Access-Token": box["envdAccessToken"], "E2b-Sandbox-Id": box["sandboxID"],
                     "E2b-Sandbox-Port": "49983"}):
        assert requests.get(srv.url + "/health", headers=headers, timeout=30).status_code == 204
    assert requests.delete(srv.url + f"/sandboxes/{box['sandboxID']}", headers={"X-API-KEY": KEY},
                           timeout=60).status_code == 204


def test_the_host_names_the_node_by_default(make_server):
    srv = make_server("")
    node = srv.api().get("/healthz").json()["node"]
    assert node == node_of_host(socket.gethostname()), node
    assert id_re("ses", node, 32).match(srv.api().session())
    assert f"as node {node} " in srv.stderr_text()


def test_a_bad_node_name_is_refused(tmp_path):
    for bad in ("petri-0", "Alpha", "0123456789abcdef0", "a_b"):
        ini = tmp_path / "petri.ini"
        ini.write_text(f"[server]\nnode = {bad}\n")
        p = subprocess.run([PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(ini)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, (bad, p.stdout, p.stderr)
        assert f"node = {bad}" in p.stderr, (bad, p.stderr)
