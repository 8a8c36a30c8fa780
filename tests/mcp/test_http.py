"""MCP over Streamable HTTP at /mcp of `petri serve`: sessions by
Mcp-Session-Id, status codes, headers, auth and Origin checks."""
import json

import requests

from harness import Api, metric, wait_for
from mcphelp import JSON_HEADERS, http_init, http_post, text_of


def test_initialize_assigns_a_session_id_and_negotiates(http_server):
    sid, r = http_init(http_server.mcp, "2025-06-18")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert sid and sid.startswith("mcp_") and all(0x21 <= ord(c) <= 0x7E for c in sid)
    assert r.json()["result"]["protocolVersion"] == "2025-06-18"
    sid2, r = http_init(http_server.mcp, "2030-01-01")
    assert sid2 != sid
    assert r.json()["result"]["protocolVersion"] == "2025-11-25"


def test_a_failed_initialize_leaves_no_session(http_server):
    r = requests.post(http_server.mcp, headers=JSON_HEADERS, timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert r.json()["error"]["code"] == -32602
    assert "Mcp-Session-Id" not in r.headers


def test_requests_need_a_known_session(http_server):
    r = http_post(http_server.mcp, None, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600
    r = http_post(http_server.mcp, "mcp_" + "0" * 32, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 404
    sid, _ = http_init(http_server.mcp)
    r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert r.status_code == 200 and r.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 3, "method": "initialize",
                                         "params": {"protocolVersion": "2025-06-18"}})
    assert r.status_code == 400                   # initialize carries no session id


def test_notifications_get_202_and_no_body(http_server):
    sid, _ = http_init(http_server.mcp)
    r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status_code == 202 and r.content == b""
    r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 5, "result": {}})
    assert r.status_code == 202 and r.content == b""
    r = http_post(http_server.mcp, sid, {"method": "notifications/initialized"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600


def test_malformed_bodies(http_server):
    sid, _ = http_init(http_server.mcp)
    r = http_post(http_server.mcp, sid, b'{"jsonrpc": "2.0", "id": 1,')
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700
    r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 1, "method": "nope"})
    assert r.status_code == 200 and r.json()["error"]["code"] == -32601
    r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                  headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                  headers={"Accept": "text/html"})
    assert r.status_code == 406


def test_sse_when_the_client_accepts_only_event_streams(http_server):
    sid, _ = http_init(http_server.mcp)
    r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 7, "method": "ping"},
                  headers={"Accept": "text/event-stream"})
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/event-stream"
    assert r.text.startswith("event: message\ndata: ")
    data = r.text.split("data: ", 1)[1].strip()
    assert json.loads(data) == {"jsonrpc": "2.0", "id": 7, "result": {}}


def test_protocol_version_header(http_server):
    sid, _ = http_init(http_server.mcp, "2025-06-18")
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert http_post(http_server.mcp, sid, ping, version="2025-06-18").status_code == 200
    assert http_post(http_server.mcp, sid, ping).status_code == 200     # absent: as negotiated
    assert http_post(http_server.mcp, sid, ping, version="1999-01-01").status_code == 400
    assert http_post(http_server.mcp, sid, ping, version="2024-11-05").status_code == 400


def test_batches_only_in_2025_03_26(http_server):
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    sid, _ = http_init(http_server.mcp, "2025-03-26")
    r = http_post(http_server.mcp, sid, batch, version="2025-03-26")
    assert r.status_code == 200
    assert sorted(x["id"] for x in r.json()) == [1, 2]
    r = http_post(http_server.mcp, sid, batch[1:2], version="2025-03-26")
    assert r.status_code == 202
    sid, _ = http_init(http_server.mcp, "2025-06-18")
    r = http_post(http_server.mcp, sid, batch)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600


def test_get_is_405_and_delete_ends_the_session_and_its_sandbox(http_server):
    r = requests.get(http_server.mcp, headers={"Accept": "text/event-stream"}, timeout=30)
    assert r.status_code == 405 and "POST" in r.headers["Allow"]
    sid, _ = http_init(http_server.mcp)
    res = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                           "params": {"name": "execute",
                                                      "arguments": {"code": "v = 41\nv + 1"}}})
    assert "42" in text_of(res.json()["result"])
    assert len(requests.get(http_server.url + "/v1/sessions", timeout=30).json()["sessions"]) == 1
    assert requests.delete(http_server.mcp, timeout=30).status_code == 400
    r = requests.delete(http_server.mcp, headers={"Mcp-Session-Id": sid}, timeout=30)
    assert r.status_code == 204
    assert requests.get(http_server.url + "/v1/sessions", timeout=30).json()["sessions"] == []
    r = requests.delete(http_server.mcp, headers={"Mcp-Session-Id": sid}, timeout=30)
    assert r.status_code == 404
    r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert r.status_code == 404


def test_each_mcp_session_has_its_own_sandbox(http_server):
    a, _ = http_init(http_server.mcp)
    b, _ = http_init(http_server.mcp)

    def run(sid, code):
        r = http_post(http_server.mcp, sid, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                             "params": {"name": "execute",
                                                        "arguments": {"code": code}}})
        return r.json()["result"]

    run(a, "who = 'a'")
    run(b, "who = 'b'")
    assert "'a'" in text_of(run(a, "who"))
    assert "'b'" in text_of(run(b, "who"))


def test_origin_is_checked(http_server):
    """Only the server's own origin, or one configured: a page on another
    loopback port is another origin (docs/security.md)."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    port = http_server.mcp.split(":")[2].split("/")[0]
    for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example:80",
                   "http://localhost:6274", f"http://localhost:{port}"):
        r = http_post(http_server.mcp, None, ping, headers={"Origin": origin})
        assert r.status_code == 403, origin
        assert r.json()["error"]["code"] == -32600
    # Sent to 127.0.0.1: that is its origin.
    for origin in (f"http://127.0.0.1:{port}", f"https://127.0.0.1:{port}"):
        sid, r = http_init(http_server.mcp, headers={"Origin": origin})
        assert r.status_code == 200, origin


def test_api_keys_apply_to_mcp(make_http):
    srv = make_http("[server]\napi_keys = sekrit-key-1234\n"
                    "allowed_origins = https://app.example\n")
    sid, r = http_init(srv.mcp)
    assert r.status_code == 401
    auth = {"Authorization": "Bearer sekrit-key-1234"}
    sid, r = http_init(srv.mcp, headers=auth)
    assert r.status_code == 200 and sid
    # A key does not open the API to every page: only configured origins.
    sid, r = http_init(srv.mcp, headers={**auth, "Origin": "https://app.example"})
    assert r.status_code == 200
    _, r = http_init(srv.mcp, headers={**auth, "Origin": "https://other.example"})
    assert r.status_code == 403
    r = http_post(srv.mcp, sid, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401


def test_sandbox_idle_expiry_is_reported_on_next_use(make_http):
    srv = make_http("[sessions]\nidle_timeout_s = 1\n")
    sid, _ = http_init(srv.mcp)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": "x = 1"}}}
    assert http_post(srv.mcp, sid, call).json()["result"]["isError"] is False
    # The daemon ends the sandbox (asking the session would be a use).
    api = Api(srv.url)
    expired = wait_for(lambda: metric(api.get("/metrics").text, "petri_sessions_expired_total"), 30)
    assert expired == 1, expired
    res = http_post(srv.mcp, sid, call).json()["result"]
    assert res["isError"] is True and "idle" in text_of(res)
    assert http_post(srv.mcp, sid, call).json()["result"]["isError"] is False
