"""The execution record: GET /v1/sessions/{id}/executions lists what a
session ran, also after it ended, in memory or in a SQLite file that
outlives the daemon; GET /v1/executions lists all of it, newest first,
one-shot runs (under no session) included."""
import base64
import json
import os
import re
import sqlite3

from jsonschema import Draft202012Validator, RefResolver

# It lists the whole record: a daemon nobody else has written to.
OWN_SERVER = True

DOC = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.json")))


LIST_MAX = 8 << 20             # RECORD_LIST_MAX


def validate_list(body, schema="ExecutionList"):
    schema = {"$ref": f"#/components/schemas/{schema}"}
    resolver = RefResolver.from_schema(DOC)
    Draft202012Validator(schema, resolver=resolver).validate(body)


def whole_record(api, **params):
    r = api.get("/v1/executions", params=params)
    assert r.status_code == 200, r.text[:500]
    body = r.json()
    validate_list(body, "RecordList")
    seqs = [e["seq"] for e in body["executions"]]
    assert seqs == sorted(seqs, reverse=True) and len(set(seqs)) == len(seqs), seqs
    for e in body["executions"]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", e["started_at"]), e
    return len(r.content), body


def test_record_lists_code_and_results_in_order(api):
    sid = api.session()
    assert api.get(f"/v1/sessions/{sid}/executions").json() == {"session": sid, "executions": [],
                                                                 "truncated": False}
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint('héllo')\n1/0"
    api.execute(sid, code)
    api.execute(sid, "echo hi", language="bash")
    r = api.get(f"/v1/sessions/{sid}/executions")
    assert r.status_code == 200, r.text
    body = r.json()
    validate_list(body)
    first, second = body["executions"]
    assert first["seq"] < second["seq"]
    assert first["code"] == code and first["language"] == "python" and not first["code_truncated"]
    assert first["status"] == "error"
    assert first["result"]["stdout"] == "héllo\n"
    assert first["result"]["error"]["name"] == "ZeroDivisionError"
    # The chart itself is kept (up to record_max_attachment_kb).
    png = base64.b64decode(first["result"]["results"][0]["image/png"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert first["limits"]["memory_mb"] >= 32
    assert second["code"] == "echo hi" and second["result"]["stdout"] == "hi\n"
    # limit keeps the most recent
    last = api.get(f"/v1/sessions/{sid}/executions", params={"limit": 1}).json()["executions"]
    assert [e["seq"] for e in last] == [second["seq"]]


def test_record_outlives_the_session(api):
    sid = api.session()
    api.execute(sid, "x = 1")
    assert api.delete(f"/v1/sessions/{sid}").status_code == 204
    r = api.get(f"/v1/sessions/{sid}/executions")
    assert r.status_code == 200, r.text
    assert [e["code"] for e in r.json()["executions"]] == ["x = 1"]


def test_record_errors(api):
    sid = api.session()
    for bad in ("0", "1001", "x", "-1"):
        r = api.get(f"/v1/sessions/{sid}/executions", params={"limit": bad})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
    for bad in ("0", "x", "-1", "4294967296"):
        r = api.get(f"/v1/sessions/{sid}/executions", params={"before": bad})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
    r = api.get("/v1/sessions/ses_00000000000000000000000000000000/executions")
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    r = api.post(f"/v1/sessions/{sid}/executions", {})
    assert r.status_code == 405 and r.headers["Allow"] == "GET"


def test_images_and_files_past_the_attachment_bound_are_noted(make_server):
    srv = make_server("[server]\nrecord =\nrecord_max_attachment_kb = 1\n")
    api = srv.api()
    sid = api.session()
    api.execute(sid, "import matplotlib.pyplot as plt\nplt.plot([1, 2])")
    r = api.post("/v1/execute", {"code": "open('small.txt', 'w').write('hi')\n"
                                         "open('big.bin', 'wb').write(bytes(4096))",
                                 "return_files": ["*.txt", "*.bin"]})
    assert r.status_code == 200, r.text
    entry = api.get(f"/v1/sessions/{sid}/executions").json()["executions"][0]
    pngs = [b["image/png"] for b in entry["result"]["results"] if "image/png" in b]
    assert len(pngs) == 1 and "not recorded" in pngs[0], entry["result"]
    oneshot = api.get("/v1/executions", params={"session": "none"}).json()["executions"][0]
    files = {f["path"]: f for f in oneshot["result"]["files"]}
    assert base64.b64decode(files["small.txt"]["content_base64"]) == b"hi"
    assert "not recorded" in files["big.bin"]["content_base64"]
    # The client got both whole.
    got = {f["path"]: f for f in r.json()["files"]}
    assert len(base64.b64decode(got["big.bin"]["content_base64"])) == 4096


def test_record_in_a_file_survives_a_restart(make_server, tmp_path):
    path = tmp_path / "record.sqlite"
    srv = make_server(f"[server]\nrecord = {path}\n")
    api = srv.api()
    sid = api.session()
    api.execute(sid, "print(6 * 7)")
    one = api.post("/v1/execute", {"code": "print('one-shot')"})
    assert one.status_code == 200
    code, err = srv.stop()
    assert code == 0, err
    # The file holds both, the one-shot under no session.
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT session, code, status FROM executions ORDER BY seq").fetchall()
    assert rows == [(sid, "print(6 * 7)", "ok"), (None, "print('one-shot')", "ok")]
    srv2 = make_server(f"[server]\nrecord = {path}\n")
    r = srv2.api().get(f"/v1/sessions/{sid}/executions")
    assert r.status_code == 200, r.text
    assert r.json()["executions"][0]["result"]["stdout"] == "42\n"


def test_a_relative_record_path_is_refused(make_server, tmp_path):
    import subprocess
    from apihelp import PETRI
    cfg = tmp_path / "bad.ini"
    cfg.write_text("[server]\nrecord = relative.sqlite\n")
    p = subprocess.run([PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "record" in p.stderr, p.stderr


def test_the_whole_record_lists_one_shots_and_sessions_newest_first(api):
    sid = api.session()
    one = api.post("/v1/execute", {"code": "print('first one-shot')"})
    assert one.status_code == 200, one.text
    api.execute(sid, "print('in a session')")
    two = api.post("/v1/execute", {"code": "echo second", "language": "bash"})
    assert two.status_code == 200, two.text
    _, body = whole_record(api, limit=3)
    assert body["truncated"] is False
    newest = body["executions"]
    assert [(e["session"], e["language"], e["code"]) for e in newest] == [
        (None, "bash", "echo second"),
        (sid, "python", "print('in a session')"),
        (None, "python", "print('first one-shot')")]
    assert [e["result"]["stdout"] for e in newest] == ["second\n", "in a session\n",
                                                       "first one-shot\n"]
    assert newest[0]["limits"]["memory_mb"] >= 32
    # The default limit is 100: everything this module's server ran so far.
    _, everything = whole_record(api)
    assert everything["executions"][:3] == newest
    # Only the one-shots.
    _, only = whole_record(api, session="none", limit=2)
    assert [e["code"] for e in only["executions"]] == ["echo second", "print('first one-shot')"]
    assert all(e["session"] is None for e in whole_record(api, session="none")[1]["executions"])
    # before pages back from the last one listed.
    _, older = whole_record(api, limit=1, before=newest[0]["seq"])
    assert older["executions"] == newest[1:2]
    # The session's own listing names it too.
    own = api.get(f"/v1/sessions/{sid}/executions").json()["executions"]
    assert [(e["session"], e["seq"]) for e in own] == [(sid, newest[1]["seq"])]


def test_the_whole_record_errors(api):
    for bad in ("0", "1001", "x", "-1", ""):
        r = api.get("/v1/executions", params={"limit": bad})
        assert r.status_code == 400, r.text
        assert r.json()["error"] == {"code": "invalid_request",
                                     "message": "'limit' must be an integer from 1 to 1000"}
    for bad in ("0", "x", "-1", "4294967296"):
        r = api.get("/v1/executions", params={"before": bad})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
        assert "'before' must be the seq of an execution" in r.json()["error"]["message"]
    for bad in ("ses_00000000000000000000000000000000", "null", "", "NONE"):
        r = api.get("/v1/executions", params={"session": bad})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
        assert "'session' must be 'none'" in r.json()["error"]["message"]
    for method in ("POST", "DELETE", "PUT"):
        r = api.request(method, "/v1/executions")
        assert r.status_code == 405 and r.headers["Allow"] == "GET", r.text


def test_the_whole_record_needs_a_key(make_server):
    srv = make_server("[server]\napi_keys = k1\n")
    assert srv.api().post("/v1/execute", {"code": "1"}).status_code == 401
    one = srv.api("k1").post("/v1/execute", {"code": "print('secret')"})
    assert one.status_code == 200, one.text
    for api in (srv.api(), srv.api("k2")):
        r = api.get("/v1/executions")
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", r.text
        assert "secret" not in r.text
    _, body = whole_record(srv.api("k1"))
    assert [e["code"] for e in body["executions"]] == ["print('secret')"]


def test_the_whole_record_pages_within_its_byte_bound(make_server):
    """Seven entries of 1.5 MiB as JSON each (250000 control characters of
    code, six bytes each escaped), sessions' and one-shots': one answer
    holds at most 8 MiB of them, says so, and `before` pages back to all."""
    srv = make_server()
    api = srv.api()
    sid = api.session()
    big = "#" + "\x01" * 250000 + "\nprint(%d)"
    ran = []
    for i in range(7):
        if i % 2:
            assert api.execute(sid, big % i)["status"] == "ok"
        else:
            r = api.post("/v1/execute", {"code": big % i})
            assert r.status_code == 200 and r.json()["status"] == "ok", r.text[:500]
        ran.append((sid if i % 2 else None, f"{i}\n"))
    size, body = whole_record(api, limit=1000)
    assert size <= LIST_MAX + (64 << 10)
    assert body["truncated"] is True
    got = body["executions"]
    while body["truncated"]:
        _, body = whole_record(api, limit=1000, before=got[-1]["seq"])
        assert body["executions"], body
        got += body["executions"]
    assert [(e["session"], e["result"]["stdout"]) for e in got] == ran[::-1]
    seqs = [e["seq"] for e in got]
    assert seqs == sorted(set(seqs), reverse=True)
    # A limit below what fits is not `truncated`: it is what was asked.
    _, two = whole_record(api, limit=2)
    assert two["truncated"] is False and [e["seq"] for e in two["executions"]] == seqs[:2]
