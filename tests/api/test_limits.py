"""Every error status the API gives, each for its reason: 400, 401, 404,
405, 409, 410, 413, 429; and the capacity limits behind 409/429."""
import base64
import threading

import pytest

from apihelp import error_of, raw

SID0 = "ses_" + "0" * 32


@pytest.fixture
def sid(api):
    s = api.session()
    yield s
    api.delete(f"/v1/sessions/{s}")


# ---- 400 -------------------------------------------------------------------

BAD_CREATE = {
    "unknown-field": {"langauge": "python"},
    "language-unknown": {"language": "cobol"},
    "language-type": {"language": 3},
    "limits-type": {"limits": "big"},
    "limits-unknown": {"limits": {"gpus": 1}},
    "memory-above-max": {"limits": {"memory_mb": 999999}},
    "memory-below-min": {"limits": {"memory_mb": 1}},
    "memory-float": {"limits": {"memory_mb": 128.5}},
    "memory-string": {"limits": {"memory_mb": "128"}},
    "memory-bool": {"limits": {"memory_mb": True}},
    "memory-negative": {"limits": {"memory_mb": -64}},
    "pids-above-max": {"limits": {"pids": 1 << 20}},
    "timeout-above-max": {"limits": {"timeout_s": 100000}},
    "timeout-zero": {"limits": {"timeout_s": 0}},
    "cpu-above-max": {"limits": {"cpu": 1000}},
    "disk-above-max": {"limits": {"disk_mb": 1 << 30}},
    "output-above-max": {"limits": {"output_kb": 1 << 30}},
    "idle-above-server": {"idle_timeout_s": 10 ** 9},
    "lifetime-type": {"max_lifetime_s": "1h"},
    "env-type": {"env": ["A=1"]},
    "env-reserved": {"env": {"PATH": "/tmp"}},
    "env-bad-name": {"env": {"A-B": "1"}},
    "env-value-type": {"env": {"A": 1}},
}


@pytest.mark.parametrize("name", sorted(BAD_CREATE))
def test_400_create_session(api, name):
    before = api.get("/healthz").json()["sessions"]
    r = api.post("/v1/sessions", BAD_CREATE[name])
    assert r.status_code == 400, (name, r.status_code, r.text)
    assert error_of(r.content)["code"] in ("invalid_request", "invalid_json")
    assert api.get("/healthz").json()["sessions"] == before


BAD_EXECUTE = {
    "no-code": {},
    "code-int": {"code": 1},
    "code-null": {"code": None},
    "code-list": {"code": ["print(1)"]},
    "language-unknown": {"code": "1", "language": "ruby"},
    "language-case": {"code": "1", "language": "Python"},
    "unknown-field": {"code": "1", "timeout": 5},
    "timeout-string": {"code": "1", "timeout_s": "5"},
    "timeout-above-session": {"code": "1", "timeout_s": 100000},
    "timeout-negative": {"code": "1", "timeout_s": -1},
    "code-with-nul": {"code": "print(1)\u0000"},
}


@pytest.mark.parametrize("name", sorted(BAD_EXECUTE))
def test_400_execute(api, sid, name):
    r = api.post(f"/v1/sessions/{sid}/execute", BAD_EXECUTE[name])
    assert r.status_code == 400, (name, r.status_code, r.text)
    e = error_of(r.content)
    assert e["code"] in ("invalid_request", "invalid_json") and e["message"]


@pytest.mark.parametrize("body", [b"{", b"not json", b'{"code": "1",}', b"[1, 2]", b'"str"',
                                  b'{"code": "1", "code": "2"}', b"\xff\xfe"])
def test_400_bad_json(server, sid, body):
    for path in (f"/v1/sessions/{sid}/execute", "/v1/sessions", "/v1/execute"):
        status, _, data = raw(server.url, "POST", path, body=body,
                              headers={"Content-Type": "application/json"})
        assert status == 400, (path, body, status, data)
        assert error_of(data)["code"] == "invalid_json", data


def test_400_oneshot(api):
    for body in ({"code": "1", "limits": {"memory_mb": 10 ** 7}},
                 {"code": "1", "language": "fortran"},
                 {"code": "1", "session": "x"},
                 {"code": "1", "files": [{"path": "a/../../b", "content_base64": ""}]},
                 {"code": "1", "files": [{"path": "x", "content_base64": "***"}]},
                 {"code": 7}):
        r = api.post("/v1/execute", body)
        assert r.status_code == 400, (body, r.text)


def test_400_bad_paths(server, sid):
    for path in ("..", "%2e%2e/x", "a%00b", "a%0ab", "%2fetc%2fpasswd", "x" * 300):
        status, _, body = raw(server.url, "GET", f"/v1/sessions/{sid}/files/{path}")
        assert status == 400, (path, status, body)
        assert error_of(body)["code"] == "invalid_path"


# ---- 401 -------------------------------------------------------------------

def test_401_api_keys(make_server):
    srv = make_server("[server]\napi_keys = k-one, k-two\n")
    anon = srv.api()
    good, other, bad = srv.api("k-one"), srv.api("k-two"), srv.api("k-three")
    # /healthz stays open.
    assert anon.get("/healthz").status_code == 200
    for client in (anon, bad, srv.api("k-one ")):
        for method, path in (("GET", "/v1/sessions"), ("POST", "/v1/sessions"),
                             ("POST", "/v1/execute"), ("GET", "/metrics"),
                             ("GET", f"/v1/sessions/{SID0}"), ("GET", "/nope")):
            r = client.request(method, path, json={} if method == "POST" else None)
            assert r.status_code == 401, (method, path, r.status_code, r.text)
            assert error_of(r.content)["code"] == "unauthorized"
    # Other schemes and a key without the scheme are refused too.
    for header in ("k-one", "Basic k-one", "Bearer", "Bearer  k-one", "bearer k-onex"):
        r = anon.get("/v1/sessions", headers={"Authorization": header})
        assert r.status_code == 401, header
    # Any configured key works; the scheme's case does not matter.
    sid = good.session()
    assert good.execute(sid, "1+1")["results"] == [{"text/plain": "2"}]
    assert other.get(f"/v1/sessions/{sid}").status_code == 200
    assert anon.get("/v1/sessions", headers={"Authorization": "bearer k-two"}).status_code == 200
    # Nothing leaked to the unauthenticated: not even whether a session exists.
    r = anon.get(f"/v1/sessions/{sid}")
    assert r.status_code == 401 and sid not in r.text


# ---- 404 -------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/v1/sessions/" + SID0, "/v1/sessions/" + SID0 + "/execute",
                                  "/v1/sessions/" + SID0 + "/files", "/v1/sessions/nope",
                                  "/v1/sessions/" + "x" * 200, "/v1/sessions/" + SID0 + "/files/a"])
def test_404_unknown_session(api, path):
    method = "POST" if path.endswith("execute") else "GET"
    r = api.request(method, path, json={"code": "1"} if method == "POST" else None)
    assert r.status_code == 404, (path, r.text)
    assert error_of(r.content)["code"] == "session_not_found"


@pytest.mark.parametrize("path", ["/ui/", "/index.html", "/v2/sessions", "/v1", "/v1/session", "/v1/sessions/{sid}/nope",
                                  "/v1/sessions/{sid}/execute/x", "/healthz/x", "/metrics/"])
def test_404_unknown_endpoint(api, sid, path):
    r = api.get(path.format(sid=sid))
    assert r.status_code == 404, (path, r.status_code, r.text)
    assert error_of(r.content)["code"] in ("not_found", "session_not_found")


def test_404_missing_file(api, sid):
    for method in ("GET", "DELETE"):
        r = api.request(method, f"/v1/sessions/{sid}/files/missing.csv")
        assert r.status_code == 404
        assert error_of(r.content)["code"] == "file_not_found"
    r = api.get(f"/v1/sessions/{sid}/files/no/such/dir.txt")
    assert r.status_code == 404


# ---- 405 -------------------------------------------------------------------

METHODS_405 = [
    ("PUT", "/healthz"), ("POST", "/healthz"), ("DELETE", "/metrics"), ("POST", "/v1/openapi.json"),
    ("PUT", "/v1/sessions"), ("DELETE", "/v1/sessions"), ("PATCH", "/v1/sessions"),
    ("GET", "/v1/execute"), ("PUT", "/v1/execute"),
    ("POST", "/v1/sessions/{sid}"), ("PUT", "/v1/sessions/{sid}"),
    ("GET", "/v1/sessions/{sid}/execute"), ("DELETE", "/v1/sessions/{sid}/execute"),
    ("POST", "/v1/sessions/{sid}/files"), ("DELETE", "/v1/sessions/{sid}/files"),
    ("POST", "/v1/sessions/{sid}/files/a.txt"), ("PATCH", "/v1/sessions/{sid}/files/a.txt"),
]


@pytest.mark.parametrize("method,path", METHODS_405)
def test_405_wrong_method(api, sid, method, path):
    r = api.request(method, path.format(sid=sid))
    assert r.status_code == 405, (method, path, r.status_code, r.text)
    assert error_of(r.content)["code"] == "method_not_allowed"
    # RFC 9110 15.5.6: a 405 response MUST carry Allow.
    allow = r.headers.get("Allow")
    assert allow, f"{method} {path}: 405 without an Allow header"
    assert method not in [m.strip() for m in allow.split(",")]


# ---- 409 / 429 -------------------------------------------------------------

def run_in_thread(fn):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", fn()))
    t.start()
    return t, out


def wait_busy(api, sid, timeout=10):
    assert api.wait_busy(sid, timeout), "the session never became busy"


def test_409_same_session_concurrent(server, api, sid):
    t, out = run_in_thread(lambda: server.api().post(
        f"/v1/sessions/{sid}/execute", {"code": "import time\ntime.sleep(1.5)\n'first'"}))
    wait_busy(api, sid)
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "'second'"})
    assert r.status_code == 409, r.text
    e = error_of(r.content)
    assert e["code"] == "session_busy"
    # Files and inspection still work while it runs.
    assert api.get(f"/v1/sessions/{sid}").json()["status"] == "busy"
    assert api.put(f"/v1/sessions/{sid}/files/during.txt", data=b"x").status_code == 201
    t.join()
    assert out["r"].status_code == 200 and out["r"].json()["results"] == [{"text/plain": "'first'"}]
    assert api.execute(sid, "'after'")["results"] == [{"text/plain": "'after'"}]


def test_429_max_sessions(make_server):
    srv = make_server("[server]\nmax_sessions = 2\n")
    api = srv.api()
    a, b = api.session(), api.session()
    r = api.post("/v1/sessions", {})
    assert r.status_code == 429, r.text
    assert error_of(r.content)["code"] == "over_capacity"
    # A one-shot needs a sandbox too.
    r = api.post("/v1/execute", {"code": "1"})
    assert r.status_code == 429, r.text
    # The two that exist keep working; ending one frees its place.
    assert api.execute(a, "1")["status"] == "ok"
    assert api.delete(f"/v1/sessions/{b}").status_code == 204
    c = api.session()
    assert api.execute(c, "2")["status"] == "ok"


def test_429_max_executions(make_server):
    srv = make_server("[server]\nmax_executions = 1\n")
    api = srv.api()
    a, b = api.session(), api.session()
    t, out = run_in_thread(lambda: srv.api().post(
        f"/v1/sessions/{a}/execute", {"code": "import time\ntime.sleep(2)\n'a'"}))
    wait_busy(api, a)
    r = api.post(f"/v1/sessions/{b}/execute", {"code": "'b'"})
    assert r.status_code == 429, r.text
    assert error_of(r.content)["code"] == "over_capacity"
    r = api.post(f"/v1/sessions/{a}/execute", {"code": "'a2'"})
    assert r.status_code == 409, r.text            # busy beats capacity in the same session
    r = api.post("/v1/execute", {"code": "1"})
    assert r.status_code == 429, r.text
    r = api.post(f"/v1/sessions/{b}/execute", {"code": "1"},
                 headers={"Accept": "text/event-stream"})
    assert r.status_code == 429, r.text            # a real status, not an event
    t.join()
    assert out["r"].status_code == 200
    # The slot is given back.
    assert api.execute(b, "'b'")["results"] == [{"text/plain": "'b'"}]
    r = api.post("/v1/execute", {"code": "3"})
    assert r.status_code == 200 and r.json()["results"] == [{"text/plain": "3"}]


# ---- 410 -------------------------------------------------------------------

def test_410_after_the_sandbox_ends(api):
    sid = api.session()
    res = api.execute(sid, "raise SystemExit(4)")
    assert res["exit_code"] == 4          # SystemExit does not end the session
    assert api.execute(sid, "1")["status"] == "ok"
    res = api.execute(sid, "import os\nos._exit(5)")
    assert res["exit_code"] == 5 and res["restarted"]      # nor does the interpreter's end
    assert api.execute(sid, "1")["status"] == "ok"
    # The keeper's end is the sandbox's.
    res = api.execute(sid, "import os\nos.kill(os.getppid(), 9)")
    assert res["status"] == "killed" and not res["restarted"], res
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "1"})
    assert r.status_code == 410
    assert "killed by signal 9" in error_of(r.content)["message"]
    # Deleting it afterwards is still answered with why it is gone.
    r = api.delete(f"/v1/sessions/{sid}")
    assert r.status_code in (204, 404, 410), r.text


# ---- 413 -------------------------------------------------------------------

BIG_CONFIG = "[server]\nmax_body_mb = 2\nmax_file_mb = 1\n"


def test_413_body_over_max_body(make_server):
    srv = make_server(BIG_CONFIG)
    api = srv.api()
    sid = api.session()
    big_code = "x = '" + "a" * (3 << 20) + "'"
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": big_code})
    assert r.status_code == 413, r.status_code
    assert error_of(r.content)["code"] == "too_large"
    # Without a Content-Length (chunked), the limit holds too.
    def chunks():
        yield b'{"code": "'
        for _ in range(3):
            yield b"a" * (1 << 20)
        yield b'"}'
    r = api.post(f"/v1/sessions/{sid}/execute", data=chunks(),
                 headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.status_code
    r = api.put(f"/v1/sessions/{sid}/files/big.bin", data=b"z" * (3 << 20))
    assert r.status_code == 413
    # The session is unharmed.
    assert api.execute(sid, "1+1")["results"] == [{"text/plain": "2"}]


def test_413_file_over_max_file(make_server):
    srv = make_server(BIG_CONFIG)
    api = srv.api()
    sid = api.session()
    r = api.put(f"/v1/sessions/{sid}/files/f.bin", data=b"y" * ((1 << 20) + 1))
    assert r.status_code == 413, r.text
    assert "upload limit" in error_of(r.content)["message"]
    assert api.get(f"/v1/sessions/{sid}/files/f.bin").status_code == 404
    assert api.put(f"/v1/sessions/{sid}/files/f.bin", data=b"y" * (1 << 20)).status_code == 201
    # A file the code wrote that is over the limit is not sent either.
    api.execute(sid, "open('out.bin', 'wb').write(b'x' * (3 << 20))")
    r = api.get(f"/v1/sessions/{sid}/files/out.bin")
    assert r.status_code == 413, r.status_code
    assert "download limit" in error_of(r.content)["message"]


def test_413_workspace_full(api):
    sid = api.session(limits={"disk_mb": 2})
    assert api.put(f"/v1/sessions/{sid}/files/a.bin", data=b"a" * (1500 << 10)).status_code == 201
    r = api.put(f"/v1/sessions/{sid}/files/b.bin", data=b"b" * (1500 << 10))
    assert r.status_code == 413, r.text
    assert "workspace is full" in error_of(r.content)["message"]
    # The code sees the same limit as an error of its own.
    res = api.execute(sid, "open('c.bin', 'wb').write(b'c' * (3 << 20))")
    assert res["status"] == "error" and "No space left" in res["error"]["message"], res
    api.delete(f"/v1/sessions/{sid}")


def test_413_oneshot_files_over_disk(api):
    data = base64.b64encode(b"d" * (3 << 20)).decode()
    r = api.post("/v1/execute", {"code": "1", "limits": {"disk_mb": 1},
                                 "files": [{"path": "big.bin", "content_base64": data}]})
    assert r.status_code == 413, r.text


def test_failed_upload_leaves_the_workspace_unchanged(api):
    sid = api.session(limits={"disk_mb": 1})
    f = f"/v1/sessions/{sid}/files/"
    assert api.put(f + "keep.txt", data=b"original").status_code == 201
    assert api.put(f + "fill.bin", data=b"y" * 900_000).status_code == 201
    r = api.put(f + "keep.txt", data=b"z" * 900_000)
    assert r.status_code == 413, r.text
    r2 = api.put(f + "new.bin", data=b"n" * 900_000)
    assert r2.status_code == 413, r2.text
    listing = {e["path"]: e["size"] for e in api.get(f"/v1/sessions/{sid}/files").json()["files"]}
    api_keep = api.get(f + "keep.txt").content
    api.delete(f"/v1/sessions/{sid}")
    assert api_keep == b"original", f"keep.txt is now {len(api_keep)} bytes of new data"
    assert "new.bin" not in listing, listing
