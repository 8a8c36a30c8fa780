"""The execution record: GET /v1/sessions/{id}/executions lists what a
session ran, also after it ended, in memory or in a SQLite file that
outlives the daemon."""
import json
import os
import sqlite3

from jsonschema import Draft202012Validator, RefResolver

DOC = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.json")))


def validate_list(body):
    schema = {"$ref": "#/components/schemas/ExecutionList"}
    resolver = RefResolver.from_schema(DOC)
    Draft202012Validator(schema, resolver=resolver).validate(body)


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
    png = first["result"]["results"][0]["image/png"]
    assert png.startswith("[") and "not recorded" in png       # the image itself is not kept
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
    from conftest import PETRI
    cfg = tmp_path / "bad.ini"
    cfg.write_text("[server]\nrecord = relative.sqlite\n")
    p = subprocess.run([PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "record" in p.stderr, p.stderr
