"""docs/openapi.json against the real server.

The document must be what GET /v1/openapi.json serves, a well-formed
OpenAPI 3.1 document whose schemas are valid Draft 2020-12, and every
response the server gives here must be declared by it: the status for that
path and method, the media type, required headers, and a body that
validates against the declared schema.  A response the document does not
declare fails the test.
"""
import base64
import io
import json
import os
import re
import tarfile
import threading
from datetime import datetime

import pytest
import requests
from jsonschema import Draft202012Validator, FormatChecker, RefResolver

from harness import poll, wait_for

DOC_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.json")
with open(DOC_PATH, "rb") as _f:
    DOC_BYTES = _f.read()
DOC = json.loads(DOC_BYTES)

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

FORMATS = FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value):
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", value):
        raise ValueError(f"not an RFC 3339 date-time: {value!r}")
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


def validator(schema):
    return Draft202012Validator(schema, resolver=RefResolver("", DOC), format_checker=FORMATS)


def validate(instance, schema, what=""):
    errors = sorted(validator(schema).iter_errors(instance), key=lambda e: list(e.path))
    assert not errors, f"{what}: {errors[0].message} at {list(errors[0].path)}\n" \
                       f"instance: {json.dumps(instance)[:2000]}"


def deref(obj):
    """Follow a local $ref (components/responses and the like)."""
    while isinstance(obj, dict) and "$ref" in obj and len(obj) == 1:
        node = DOC
        for part in obj["$ref"].removeprefix("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        obj = node
    return obj


def template_regex(template):
    parts = re.split(r"(\{[^}]+\})", template)
    out = ""
    for p in parts:
        if p == "{path}":
            out += r".+"
        elif p.startswith("{"):
            out += r"[^/]+"
        else:
            out += re.escape(p)
    return re.compile("^" + out + "$")


TEMPLATES = sorted(((t, template_regex(t)) for t in DOC["paths"]),
                   key=lambda tr: (tr[0].count("{"), -len(tr[0])))


def declared_responses(method, path):
    """The responses the document declares for this method on this path."""
    method = method.lower()
    for template, rx in TEMPLATES:
        if rx.match(path):
            item = DOC["paths"][template]
            if method in item:
                return f"{method.upper()} {template}", item[method]["responses"]
            other = item["x-other-methods"]
            assert method.upper() not in other["allowed"]
            return f"{method.upper()} {template} (other method)", other["responses"]
    return f"{method.upper()} {path} (unmatched)", DOC["x-unmatched-path"]["responses"]


def media_type(declared, content_type):
    ct = (content_type or "").split(";")[0].strip().lower()
    if ct in declared:
        return ct
    for key in declared:
        major, _, minor = key.partition("/")
        if minor == "*" and (major == "*" or ct.startswith(major + "/")):
            return key
    return None


def parse_sse(text):
    """Server-Sent Events -> ([(event, data)], number of comment lines)."""
    events, comments = [], 0
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        event, data = "message", []
        for line in block.split("\n"):
            if line.startswith(":"):
                comments += 1
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            events.append((event, json.loads("\n".join(data))))
    return events, comments


def check(r, method=None, path=None):
    """Assert the document declares response r; return its parsed body
    (JSON value, list of SSE events, text or bytes)."""
    method = method or r.request.method
    path = path or r.request.path_url.split("?")[0]
    where, responses = declared_responses(method, path)
    status = str(r.status_code)
    if status not in responses:     # OpenAPI: a status declared alone before its range
        status = status[0] + "XX"
    assert status in responses, \
        f"{where} answered {r.status_code}, which the document does not declare: {r.text[:500]}"
    resp = deref(responses[status])
    for name, h in resp.get("headers", {}).items():
        if deref(h).get("required"):
            assert name in r.headers, f"{where} {status}: required header {name} missing"
    content = resp.get("content")
    if not content:
        assert r.content == b"", f"{where} {status} declares no body but got {r.content[:200]!r}"
        return None
    key = media_type(content, r.headers.get("Content-Type"))
    assert key, f"{where} {status}: Content-Type {r.headers.get('Content-Type')!r} " \
                f"not declared (declared: {list(content)})"
    mt = content[key]
    if key == "application/json":
        body = r.json()
        validate(body, mt["schema"], f"{where} {status}")
        if r.status_code >= 400:
            assert set(body) == {"error"}
        return body
    if key == "text/event-stream":
        events, _ = parse_sse(r.text)
        for name, data in events:
            assert name in mt["x-events"], f"{where}: undeclared event {name!r}"
            validate(data, mt["x-events"][name], f"{where} event {name}")
        return events
    if key.startswith("text/"):
        validate(r.text, mt["schema"], f"{where} {status}")
        return r.text
    return r.content


def error_code(r):
    body = check(r)
    return body["error"]["code"]


def request_schema(method, template):
    op = DOC["paths"][template][method]
    return op["requestBody"]["content"]["application/json"]["schema"]


def fake_response(status, body, method="GET", path="/healthz"):
    r = requests.Response()
    r.status_code = status
    r._content = json.dumps(body).encode()
    r.headers["Content-Type"] = "application/json"
    return r, method, path


# ---- the document itself -------------------------------------------------


def test_served_document_is_docs_openapi_json(api):
    r = api.get("/v1/openapi.json")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert r.content == DOC_BYTES
    assert check(r) == DOC


def _walk(node, path=()):
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, path + (i,))


def test_document_structure():
    assert DOC["openapi"] == "3.1.0"
    assert DOC["info"]["title"] and DOC["info"]["version"]
    expected = {"/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/v1/sessions", "/v1/sessions/{id}",
                "/v1/sessions/{id}/keepalive", "/v1/sessions/{id}/interrupt",
                "/v1/sessions/{id}/restart",
                "/v1/sessions/{id}/execute", "/v1/sessions/{id}/executions",
                "/v1/sessions/{id}/export", "/v1/sessions/{id}/files",
                "/v1/sessions/{id}/files/{path}", "/v1/sessions/{id}/archive",
                "/v1/sessions/{id}/processes", "/v1/sessions/{id}/processes/{pid}",
                "/v1/sessions/{id}/commands", "/v1/sessions/{id}/commands/{pid}",
                "/v1/sessions/{id}/commands/{pid}/stdin",
                "/v1/sessions/{id}/commands/{pid}/resize", "/v1/sessions/{id}/usage",
                "/v1/sessions/{id}/watch",
                "/v1/sessions/{id}/ports/{port}", "/v1/sessions/{id}/ports/{port}/",
                "/v1/sessions/{id}/ports/{port}/{path}",
                "/v1/execute", "/v1/executions", "/v1/events", "/v1/executions/export", "/v1/languages",
                "/v1/node", "/v1/node/drain", "/v1/node/undrain"}
    assert set(DOC["paths"]) == expected
    op_ids = []
    for template, item in DOC["paths"].items():
        ops = [m for m in METHODS if m in item]
        assert ops, template
        assert sorted(m.upper() for m in ops) == sorted(item["x-other-methods"]["allowed"])
        if "/ports/" in template:
            # Every method reaches the sandbox's server, answered alike: no
            # 405 of petri's.
            assert all(item["x-other-methods"]["responses"] == item[m]["responses"]
                       for m in ops), template
        else:
            assert "405" in item["x-other-methods"]["responses"]
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        assert declared == set(re.findall(r"\{([^}]+)\}", template)), template
        for m in ops:
            op = item[m]
            op_ids.append(op["operationId"])
            assert op["responses"], f"{m} {template} has no responses"
            for status, resp in op["responses"].items():
                assert re.fullmatch(r"[1-5](\d\d|XX)", status), status
                assert deref(resp)["description"]
                if status not in ("204",):
                    assert deref(resp).get("content"), f"{m} {template} {status}"
            if template not in ("/healthz", "/readyz"):
                assert "401" in op["responses"], f"{m} {template} lacks 401"
    assert len(op_ids) == len(set(op_ids))
    for name in ("Session", "Result", "MimeBundle", "Error", "FileEntry", "FileList",
                 "ArchiveSummary", "CreateSessionRequest", "ExecuteRequest", "OneShotRequest"):
        assert name in DOC["components"]["schemas"], name
    for name in ("CreateSessionRequest", "ExecuteRequest", "OneShotRequest", "OneShotFile",
                 "LimitsRequest", "StartCommandRequest", "CommandInput"):
        assert DOC["components"]["schemas"][name]["additionalProperties"] is False


def test_every_ref_resolves_and_every_schema_is_draft_2020_12():
    schemas = list(DOC["components"]["schemas"].values())
    for path, node in _walk(DOC):
        if isinstance(node, dict) and "$ref" in node:
            deref({"$ref": node["$ref"]})  # raises KeyError if dangling
        if path and path[-1] == "schema" and isinstance(node, dict):
            schemas.append(node)
        if path and path[-1] == "x-events":
            schemas.extend(node.values())
    assert len(schemas) > 30
    for s in schemas:
        Draft202012Validator.check_schema(s)
        validator(s)  # and its $refs resolve against the document
    # The schemas reject what they should: the envelope, nullability.
    validate({"error": {"code": "internal", "message": "x"}}, {"$ref": "#/components/schemas/Error"})
    with pytest.raises(AssertionError):
        validate({"error": {"code": "nope", "message": "x"}}, {"$ref": "#/components/schemas/Error"})


def test_an_undeclared_response_fails():
    r, m, p = fake_response(418, {"error": {"code": "internal", "message": "teapot"}})
    with pytest.raises(AssertionError, match="does not declare"):
        check(r, m, p)
    # a declared status with a body that does not match its schema
    r, m, p = fake_response(200, {"status": "ok"})
    with pytest.raises(AssertionError):
        check(r, m, p)
    # an error code the status does not declare
    r, m, p = fake_response(404, {"error": {"code": "session_busy", "message": "x"}},
                            "GET", "/v1/sessions/ses_x")
    with pytest.raises(AssertionError):
        check(r, m, p)


# ---- the refusals of what a tenant holds ---------------------------------
#
# Mirrors of src/api/server.c, which decides these before any handler runs:
# a response the server can give must be declared wherever it can give it,
# not only where a test happened to meet it.

INLINE = {"/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/v1/events",   # runs_inline()
          "/v1/node", "/v1/node/drain", "/v1/node/undrain"}
EXPENSIVE_READS = {"/v1/executions", "/v1/executions/export",         # is_expensive_read()
                   "/v1/sessions/{id}/executions", "/v1/sessions/{id}/export",
                   "/v1/sessions/{id}/archive"}
ANY_METHOD = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


def is_upload(method, template):
    return (method, template) in {("PUT", "/v1/sessions/{id}/files/{path}"),
                                  ("POST", "/v1/sessions/{id}/archive")}


def answers_little(method, template):
    if template and "/ports/" in template:   # a sandbox's server answers what it likes
        return False
    return method in ("DELETE", "PATCH") or is_upload(method, template) or \
        (method == "POST" and (template or "").endswith("/keepalive"))


def refusals(method, template):
    """The (status, code) pairs server.c may answer method on template with,
    whatever the endpoint does; template None: a path that matches none."""
    out = set()
    if not is_upload(method, template):          # keep_chunk(), on_body_done()
        out |= {("413", "too_large"), ("429", "too_many_bodies"), ("503", "busy")}
    if template in INLINE:
        return out
    if method == "GET" and template in EXPENSIVE_READS:                 # take_read()
        out.add(("429", "too_many_reads"))
    if not answers_little(method, template):     # the key's turns, answers_room()
        out |= {("429", "over_capacity"), ("429", "unread_answers"), ("503", "busy")}
    return out


def declares(responses, status, code):
    if status not in responses:
        return False
    schema = deref(responses[status])["content"]["application/json"]["schema"]
    return not list(validator(schema).iter_errors({"error": {"code": code, "message": "x"}}))


def test_every_refusal_of_a_budget_is_declared_where_it_can_happen():
    missing = []
    for template, item in DOC["paths"].items():
        for m in METHODS:
            if m in item:
                for status, code in refusals(m.upper(), template):
                    if not declares(item[m]["responses"], status, code):
                        missing.append(f"{m.upper()} {template}: {status} {code}")
        other = item["x-other-methods"]
        for method in set(ANY_METHOD) - set(other["allowed"]):
            for status, code in refusals(method, template):
                if not declares(other["responses"], status, code):
                    missing.append(f"{method} {template} (other method): {status} {code}")
    for method in ANY_METHOD:
        for status, code in refusals(method, None):
            if not declares(DOC["x-unmatched-path"]["responses"], status, code):
                missing.append(f"{method} (unmatched path): {status} {code}")
    assert not missing, "undeclared:\n" + "\n".join(sorted(set(missing)))
    # and the mirror is not vacuous
    assert ("429", "unread_answers") in refusals("POST", "/v1/sessions/{id}/execute")
    assert ("429", "too_many_reads") in refusals("GET", "/v1/executions")
    assert refusals("PUT", "/v1/sessions/{id}/files/{path}") == set()


def test_the_budget_refusals_for_real(make_server, api):
    """A key over its share of the bodies, and of the event streams, gets
    what the document declares."""
    srv = make_server("[server]\napi_keys = k1,k2,k3,k4\nmax_buffered_mb = 1\n")
    Api = type(api)
    k1 = Api(srv.url, "k1")
    body = json.dumps({"code": "#" * (300 << 10)})   # over 1 MiB / 4
    for method, path in (("POST", "/v1/execute"), ("POST", "/v1/sessions"),
                         ("GET", "/v1/executions"), ("GET", "/v1/languages"),
                         ("GET", "/healthz"), ("PUT", "/v1/sessions")):
        r = k1.request(method, path, data=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 429 and error_code(r) == "too_many_bodies", (path, r.text)
        assert r.headers["Retry-After"] == "1"
    streams = []
    try:
        for _ in range(8):    # 32 streams, a quarter each
            r = k1.get("/v1/events", stream=True)
            assert r.status_code == 200
            streams.append(r)
        r = k1.get("/v1/events")
        assert r.status_code == 429 and error_code(r) == "too_many_streams"
        r = Api(srv.url, "k2").get("/v1/events", stream=True)
        assert r.status_code == 200
        streams.append(r)
    finally:
        for r in streams:
            r.close()


# ---- every endpoint, for real --------------------------------------------


def test_healthz_and_metrics(api):
    r = api.get("/healthz")
    assert r.status_code == 200
    assert check(r)["status"] == "ok"
    r = api.get("/readyz")     # the server has settled
    assert r.status_code == 200
    assert check(r)["status"] == "ok"
    # Not ready: 503 with a NotReady body (not an Error envelope, which
    # check() expects of every 4xx and 5xx), still declared.
    body = dict(check(r), status="not_ready", reason="warming")
    responses = declared_responses("GET", "/readyz")[1]
    validate(body, deref(responses["503"])["content"]["application/json"]["schema"])
    with pytest.raises(AssertionError):
        validate(dict(body, reason="bored"), {"$ref": "#/components/schemas/NotReady"})
    r = api.get("/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain")
    text = check(r)
    for name in ("petri_sessions_live", "petri_executions_total{status=\"ok\"}",
                 "petri_requests_rejected_total{reason=\"bad_request\"}",
                 "petri_execution_duration_seconds_bucket{le=\"+Inf\"}"):
        assert name in text


def test_session_lifecycle(api):
    body = {"language": "python", "limits": {"memory_mb": 256, "timeout_s": 10},
            "idle_timeout_s": 300, "env": {"GREETING": "hi"}}
    validate(body, request_schema("post", "/v1/sessions"))
    r = api.post("/v1/sessions", body)
    assert r.status_code == 201, r.text
    s = check(r)
    assert r.headers["Location"] == f"/v1/sessions/{s['id']}"
    assert s["limits"]["memory_mb"] == 256 and s["limits"]["timeout_s"] == 10
    assert s["idle_timeout_s"] == 300 and s["status"] == "idle"
    sid = s["id"]

    r = api.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200 and check(r)["id"] == sid
    r = api.get("/v1/sessions")
    assert r.status_code == 200
    assert sid in [x["id"] for x in check(r)["sessions"]]

    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "import os\nx = 20\nprint(os.environ['GREETING'])\nx + 1"})
    assert r.status_code == 200
    res = check(r)
    assert res["status"] == "ok" and res["stdout"] == "hi\n"
    assert res["results"] == [{"text/plain": "21"}]
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "echo $((6*7)) > n.txt; cat n.txt", "language": "bash"})
    res = check(r)
    assert res["stdout"] == "42\n" and res["exit_code"] == 0
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "x * 2"})
    assert check(r)["results"] == [{"text/plain": "40"}]
    body = {"code": "import os\nprint(os.environ['ONCE'])", "env": {"ONCE": "1"}}
    validate(body, request_schema("post", "/v1/sessions/{id}/execute"))
    assert check(api.post(f"/v1/sessions/{sid}/execute", body))["stdout"] == "1\n"

    body = {"idle_timeout_s": 120, "max_lifetime_s": 600}
    validate(body, request_schema("patch", "/v1/sessions/{id}"))
    r = api.request("PATCH", f"/v1/sessions/{sid}", json=body)
    assert r.status_code == 200 and check(r)["idle_timeout_s"] == 120, r.text
    r = api.request("PATCH", f"/v1/sessions/{sid}", json={"idle_timeout_s": 1e9})
    assert r.status_code == 400 and error_code(r) == "invalid_request"
    r = api.post(f"/v1/sessions/{sid}/keepalive")
    assert r.status_code == 204
    check(r)
    r = api.post(f"/v1/sessions/{sid}/keepalive", {"x": 1})
    assert r.status_code == 400
    check(r)
    r = api.post(f"/v1/sessions/{sid}/interrupt")
    assert r.status_code == 200 and check(r) == {"interrupted": False}
    r = api.post(f"/v1/sessions/{sid}/interrupt", {"x": 1})
    assert r.status_code == 400
    check(r)
    r = api.post(f"/v1/sessions/{sid}/restart")
    assert r.status_code == 200 and check(r)["id"] == sid

    r = api.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 204
    check(r)
    for r in (api.get(f"/v1/sessions/{sid}"), api.delete(f"/v1/sessions/{sid}"),
              api.post(f"/v1/sessions/{sid}/execute", {"code": "1"})):
        assert r.status_code == 404 and error_code(r) == "session_not_found"


def test_execute_results(api):
    sid = api.session(limits={"output_kb": 1})
    ex = lambda code, **kw: api.post(f"/v1/sessions/{sid}/execute", {"code": code, **kw})

    r = ex("1/0")
    res = check(r)
    assert res["status"] == "error" and res["exit_code"] == 1
    assert res["error"]["name"] == "ZeroDivisionError"
    assert "<cell" in res["error"]["traceback"]

    res = check(ex("import sys\nsys.stdout.buffer.write(b'\\xff\\xfeok\\n'); sys.stdout.flush()\nNone"))
    assert res["stdout_base64"] == base64.b64encode(b"\xff\xfeok\n").decode()
    assert res["stdout"].endswith("ok\n") and "\ufffd" in res["stdout"]
    assert "stderr_base64" not in res

    res = check(ex("print('y' * 5000)"))
    assert res["stdout_truncated"] is True and len(res["stdout"]) == 1024

    res = check(ex("import pandas as pd\nimport matplotlib.pyplot as plt\n"
                   "plt.plot([1, 2])\nopen('out.txt', 'w').write('x')\n"
                   "pd.DataFrame({'a': [1]})"))
    assert res["status"] == "ok"
    kinds = [sorted(b) for b in res["results"]]
    assert ["application/vnd.petri.dataframe+json", "text/html", "text/plain"] in kinds
    assert ["application/vnd.petri.chart+json", "image/png", "text/plain"] in kinds
    assert {"path": "out.txt", "size": 1} in res["files"]

    res = check(ex("echo nope; exit 3", language="bash"))
    assert res["status"] == "error" and res["exit_code"] == 3
    assert res["error"]["name"] == "NonZeroExit"

    res = check(ex("int main(void) { return missing; }", language="c"))
    assert res["status"] == "error" and res["error"]["name"] == "CompileError"


def test_timeout_interrupts_and_keeps_the_session(api):
    sid = api.session()
    r = api.post(f"/v1/sessions/{sid}/execute",
                 {"code": "import time\nn = 0\nwhile True:\n    n += 1\n    time.sleep(0.01)",
                  "timeout_s": 0.5})
    res = check(r)
    assert res["status"] == "timeout"
    assert res["error"]["name"] == "KeyboardInterrupt"
    assert "interrupted and the session kept" in res["reason"]
    res = check(api.post(f"/v1/sessions/{sid}/execute", {"code": "n > 0"}))
    assert res["results"] == [{"text/plain": "True"}]


def test_timeout_that_ignores_the_interrupt_restarts_the_interpreter(api):
    sid = api.session()
    r = api.post(f"/v1/sessions/{sid}/execute",
                 {"code": "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                          "while True: time.sleep(1)", "timeout_s": 0.3})
    res = check(r)
    assert res["status"] == "timeout" and res["exit_code"] is None and res["restarted"]
    assert "a fresh interpreter took its place" in res["reason"]
    for r in (api.get(f"/v1/sessions/{sid}"), api.post(f"/v1/sessions/{sid}/execute", {"code": "1"}),
              api.get(f"/v1/sessions/{sid}/files")):
        assert r.status_code == 200
        check(r)
    # A sandbox that ends answers 410 with why.
    res = check(api.post(f"/v1/sessions/{sid}/execute", {"code": "import os\nos.kill(os.getppid(), 9)"}))
    for r in (api.get(f"/v1/sessions/{sid}"), api.post(f"/v1/sessions/{sid}/execute", {"code": "1"}),
              api.get(f"/v1/sessions/{sid}/files"), api.delete(f"/v1/sessions/{sid}")):
        assert r.status_code == 410
        assert check(r)["error"] == {"code": "session_gone", "message": res["reason"]}


def test_oom_and_killed(api):
    sid = api.session(limits={"memory_mb": 128})
    res = check(api.post(f"/v1/sessions/{sid}/execute",
                         {"code": "python3 -c 'bytearray(400 << 20)'; echo $?", "language": "bash"}))
    assert res["status"] == "oom" and res["stdout"] == "137\n" and not res["restarted"]
    assert res["reason"] == ("the memory limit was reached and a process the code started "
                             "was killed; the session was kept")
    assert api.get(f"/v1/sessions/{sid}").status_code == 200
    res = check(api.post(f"/v1/sessions/{sid}/execute",
                         {"code": "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"}))
    assert res["status"] == "killed" and res["signal"] == 9 and res["exit_code"] is None
    assert res["restarted"] and "a fresh interpreter took its place" in res["reason"], res
    assert api.get(f"/v1/sessions/{sid}").status_code == 200
    # The keeper's end is the sandbox's.
    res = check(api.post(f"/v1/sessions/{sid}/execute",
                         {"code": "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"}))
    assert res["status"] == "killed" and res["signal"] == 9 and not res["restarted"], res
    r = api.get(f"/v1/sessions/{sid}")
    assert r.status_code == 410 and "signal 9" in check(r)["error"]["message"]


def test_stream(api):
    sid = api.session()
    r = api.post(f"/v1/sessions/{sid}/execute",
                 {"code": "import sys, time\nprint('a', flush=True)\ntime.sleep(0.1)\n"
                          "print('b', file=sys.stderr)\ndisplay(7)\n1/0"},
                 headers={"Accept": "text/event-stream"})
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/event-stream"
    events = check(r)
    names = [e for e, _ in events]
    assert names[-1] == "done" and names.count("done") == 1
    assert {"stdout", "stderr", "result", "error"} <= set(names)
    assert "".join(d["text"] for e, d in events if e == "stdout") == "a\n"
    assert ("result", {"text/plain": "7"}) in events
    done = events[-1][1]
    assert done["status"] == "error" and done["stdout"] == "a\n" and done["stderr"] == "b\n"
    assert names.index("error") < names.index("done")

    # refusals before the stream starts are plain JSON statuses
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": 1}, headers={"Accept": "text/event-stream"})
    assert r.status_code == 400 and error_code(r) == "invalid_request"


def test_stream_disconnect_cancels_the_execution(api):
    sid = api.session()
    r = api.post(f"/v1/sessions/{sid}/execute",
                 {"code": "import time\nwhile True:\n    print('.', flush=True)\n    time.sleep(0.1)"},
                 headers={"Accept": "text/event-stream"}, stream=True)
    assert r.status_code == 200
    next(r.iter_content(1))
    r.close()

    def settled(g):
        body = check(g)
        return g.status_code == 410 or body["status"] != "busy"
    g = poll(lambda: api.get(f"/v1/sessions/{sid}"), settled, 8, 0.2)
    assert g.status_code == 410 or check(g)["status"] == "idle"


def test_files(api):
    sid = api.session()
    base = f"/v1/sessions/{sid}/files"
    r = api.put(f"{base}/in/data.csv", data=b"a,b\n1,2\n")
    assert r.status_code == 201
    assert check(r) == {"path": "in/data.csv", "size": 8}
    r = api.put(f"{base}/empty.bin")
    assert r.status_code == 201 and check(r)["size"] == 0

    r = api.get(f"{base}/in/data.csv")
    assert r.status_code == 200 and r.content == b"a,b\n1,2\n"
    assert r.headers["Content-Type"].startswith("text/csv")
    check(r)

    r = api.get(base)
    listing = check(r)
    assert listing["path"] == "" and listing["truncated"] is False
    assert [(f["path"], f["type"]) for f in listing["files"]] == [("empty.bin", "file"), ("in", "directory")]
    r = api.get(base, params={"path": "in"})
    assert [f["path"] for f in check(r)["files"]] == ["in/data.csv"]

    res = check(api.post(f"/v1/sessions/{sid}/execute",
                         {"code": "mkfifo pipe; ln -s /etc/passwd link", "language": "bash"}))
    assert res["status"] == "ok"

    cases = [
        (api.get(f"{base}/nope.txt"), 404, "file_not_found"),
        (api.get(base, params={"path": "nope"}), 404, "file_not_found"),
        (api.get(f"{base}/in"), 400, "is_a_directory"),
        (api.get(base, params={"path": "empty.bin"}), 400, "not_a_directory"),
        (api.get(f"{base}/pipe"), 400, "not_a_regular_file"),
        (api.get(f"{base}/link"), 404, "file_not_found"),      # /etc/passwd inside /work
        (api.put(f"{base}/empty.bin/x", data=b"x"), 400, "not_a_directory"),
        (api.get(f"{base}/%2Fetc%2Fpasswd"), 400, "invalid_path"),
        (api.get(base, params={"path": "/etc"}), 400, "invalid_path"),
        (api.get(base, params={"path": "../.."}), 400, "invalid_path"),
        (api.get(f"{base}/a%01b"), 400, "invalid_path"),
        (api.get(f"{base}/a//b"), 400, "invalid_path"),
        (api.delete(f"{base}/in"), 409, "directory_not_empty"),
        (api.delete(f"{base}/nope"), 404, "file_not_found"),
        (api.request("POST", f"{base}/in/data.csv"), 405, "method_not_allowed"),
        (api.request("PATCH", base), 405, "method_not_allowed"),
    ]
    for r, status, code in cases:
        assert (r.status_code, error_code(r)) == (status, code), r.request.url

    for path in ("in/data.csv", "in", "link", "pipe"):
        r = api.delete(f"{base}/{path}")
        assert r.status_code == 204, path
        check(r)
    assert [f["path"] for f in check(api.get(base))["files"]] == ["empty.bin"]
    r = api.get("/v1/sessions/ses_00000000000000000000000000000000/files")
    assert r.status_code == 404 and error_code(r) == "session_not_found"


def tar_gz(*members):
    """A tar.gz of (TarInfo, bytes or None)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def tar_member(name, data=None, **attrs):
    ti = tarfile.TarInfo(name)
    ti.size = len(data) if data is not None else 0
    for k, v in attrs.items():
        setattr(ti, k, v)
    return ti, data


def test_archives(api, make_server):
    sid = api.session()
    base = f"/v1/sessions/{sid}/archive"
    body = tar_gz(tar_member("f.txt", b"hello"), tar_member("l", type=tarfile.SYMTYPE, linkname="f.txt"))
    r = api.request("POST", base, data=body, params={"path": "proj"})
    assert r.status_code == 201, r.text
    assert check(r) == {"format": "tar.gz", "entries": 2, "files": 1, "directories": 0,
                        "links": 1, "bytes": 5, "path": "proj", "size": len(body)}
    for params, ctype in (({}, "application/gzip"), ({"format": "tar", "path": "proj"},
                                                     "application/x-tar")):
        r = api.get(base, params=params)
        assert r.status_code == 200 and r.headers["Content-Type"] == ctype
        with tarfile.open(fileobj=io.BytesIO(check(r))) as t:
            assert "f.txt" in [n.rsplit("/", 1)[-1] for n in t.getnames()]

    # a file of 1 GiB, by its header: more than the session's disk
    huge = tar_member("huge")[0]
    huge.size = 1 << 30
    unknown = "/v1/sessions/ses_00000000000000000000000000000000/archive"
    cases = [
        (api.request("POST", base, data=b"not an archive"), 400, "invalid_archive"),
        (api.request("POST", base, data=huge.tobuf()), 413, "archive_too_large"),
        (api.request("POST", base, data=body, params={"path": "../x"}), 400, "invalid_path"),
        (api.request("POST", unknown, data=body), 404, "session_not_found"),
        (api.get(base, params={"format": "zip"}), 400, "invalid_request"),
        (api.get(base, params={"path": "proj/f.txt"}), 400, "not_a_directory"),
        (api.get(base, params={"path": "nope"}), 404, "file_not_found"),
        (api.get(base, params={"path": "/etc"}), 400, "invalid_path"),
        (api.get(unknown), 404, "session_not_found"),
        (api.request("PUT", base), 405, "method_not_allowed"),
        (api.request("PUT", base, params={"path": "/etc"}), 400, "invalid_path"),
    ]
    for r, status, code in cases:
        assert (r.status_code, error_code(r)) == (status, code), (r.request.method, r.request.url)

    t = keep_busy(api, sid, {})
    r = api.request("POST", base, data=body)
    assert r.status_code == 409 and error_code(r) == "session_busy"
    t.join()

    small = make_server("[server]\nmax_file_mb = 1\narchive_max_entries = 1\n")
    small_api = type(api)(small.url)
    sid = small_api.session()
    r = small_api.request("POST", f"/v1/sessions/{sid}/archive", data=body)
    assert r.status_code == 413 and error_code(r) == "archive_too_large"
    r = small_api.request("POST", f"/v1/sessions/{sid}/archive", data=b"\0" * (2 << 20))
    assert r.status_code == 413 and error_code(r) == "too_large"
    assert small_api.put(f"/v1/sessions/{sid}/files/a", data=b"a").status_code == 201
    assert small_api.put(f"/v1/sessions/{sid}/files/b", data=b"b").status_code == 201
    r = small_api.get(f"/v1/sessions/{sid}/archive")
    assert r.status_code == 413 and error_code(r) == "too_large"


def test_processes(api):
    sid = api.session(language="bash")
    base = f"/v1/sessions/{sid}/processes"
    r = api.get(base)
    assert r.status_code == 200 and check(r) == {"processes": [], "count": 0, "truncated": False}
    res = check(api.post(f"/v1/sessions/{sid}/execute",
                         {"code": "sleep 1000 &\n(exec -a $'\\xff' sleep 1000) &"}))
    assert res["status"] == "ok"
    listing = check(api.get(base))
    assert listing["count"] == 2 and len(listing["processes"]) == 2, listing
    pid = listing["processes"][0]["pid"]
    r = api.delete(f"{base}/{pid}", params={"signal": "kill"})
    assert r.status_code == 202 and check(r) == {"pid": pid, "signal": "KILL"}
    cases = [
        (api.delete(f"{base}/1"), 403, "process_protected"),
        (api.delete(f"{base}/2"), 403, "process_protected"),
        (api.delete(f"{base}/999999"), 404, "process_not_found"),
        (api.delete(f"{base}/x"), 400, "invalid_request"),
        (api.delete(f"{base}/5", params={"signal": "STOP"}), 400, "invalid_request"),
        (api.post(base), 405, "method_not_allowed"),
        (api.get(f"{base}/5"), 405, "method_not_allowed"),
        (api.get("/v1/sessions/ses_00000000000000000000000000000000/processes"), 404,
         "session_not_found"),
        (api.delete("/v1/sessions/ses_00000000000000000000000000000000/processes/5"), 404,
         "session_not_found"),
    ]
    for r, status, code in cases:
        assert (r.status_code, error_code(r)) == (status, code), r.request.url


def test_a_terminal_and_usage(api):
    sid = api.session()
    base = f"/v1/sessions/{sid}/commands"
    body = {"command": "exec cat", "pty": {"rows": 30, "cols": 100}}
    validate(body, request_schema("post", "/v1/sessions/{id}/commands"))
    r = api.post(base, body)
    assert r.status_code == 201, r.text
    term = check(r)
    assert term["asked"]["pty"] == {"rows": 30, "cols": 100}
    size = {"rows": 40, "cols": 120}
    validate(size, request_schema("post", "/v1/sessions/{id}/commands/{pid}/resize"))
    r = api.post(f"{base}/{term['pid']}/resize", size)
    assert r.status_code == 200 and check(r) == {"pid": term["pid"], **size}
    r = api.post(base, {"command": "exec sleep 60"})
    plain = check(r)
    r = api.post(f"{base}/{plain['pid']}/resize", size)
    assert r.status_code == 409 and check(r)["error"]["code"] == "not_a_terminal"
    assert check(api.post(f"{base}/{term['pid']}/resize", {"rows": 0, "cols": 1})) \
        ["error"]["code"] == "invalid_request"
    r = api.get(f"/v1/sessions/{sid}/usage")
    assert r.status_code == 200 and check(r)["memory_bytes"] > 0
    for params, code in [({"path": "nope"}, "file_not_found"), ({"path": "../x"}, "invalid_path"),
                         ({"recursive": "yes"}, "invalid_request")]:
        assert check(api.get(f"/v1/sessions/{sid}/watch", params=params))["error"]["code"] == code
    with api.get(f"/v1/sessions/{sid}/watch", stream=True) as r:
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    for pid in (term["pid"], plain["pid"]):
        check(api.delete(f"/v1/sessions/{sid}/processes/{pid}", params={"signal": "KILL"}))
    assert check(api.get("/v1/sessions/nope/usage"))["error"]["code"] == "session_not_found"


def test_commands(api):
    sid = api.session()
    base = f"/v1/sessions/{sid}/commands"
    start = request_schema("post", "/v1/sessions/{id}/commands")
    write = request_schema("post", "/v1/sessions/{id}/commands/{pid}/stdin")

    # Started and waited for: its end and all it wrote, from offset 0.
    body = {"command": "echo hi; echo oops >&2; exit 3", "tag": "short", "wait_s": 30}
    validate(body, start)
    r = api.post(base, body)
    assert r.status_code == 201, r.text
    short = check(r)
    assert short["running"] is False and short["exit_code"] == 3 and short["signal"] is None
    assert (short["stdout"], short["stderr"], short["stdout_next"]) == ("hi\n", "oops\n", 3)
    assert short["asked"] == {"command": body["command"], "tag": "short", "cwd": "/work",
                              "stdin": False}

    # A cat that reads what is sent to it: written, closed, read to its end.
    body = {"args": ["cat"], "stdin": True, "cwd": "/tmp", "env": {"GREETING": "hi"},
            "timeout_s": 120}
    validate(body, start)
    r = api.post(base, body)
    assert r.status_code == 201, r.text
    cat = check(r)
    assert cat["running"] is True and cat["ended_at"] is None and cat["stdout"] == ""
    assert cat["asked"] == dict(body, env=["GREETING"])   # the names, never the values
    pid = cat["pid"]
    body = {"input": "hello\n"}
    validate(body, write)
    r = api.post(f"{base}/{pid}/stdin", body)
    assert r.status_code == 200 and check(r) == {"pid": pid, "written": 6, "closed": False}
    got = check(api.get(f"{base}/{pid}", params={"wait_s": 30}))
    assert got["stdout"] == "hello\n" and got["stdout_next"] == 6, got
    body = {"input_base64": base64.b64encode(b"bye\n").decode(), "close": True}
    validate(body, write)
    r = api.post(f"{base}/{pid}/stdin", body)
    assert r.status_code == 200 and check(r) == {"pid": pid, "written": 4, "closed": True}
    r = api.get(f"{base}/{pid}", params={"stdout_from": 6, "stderr_from": 0, "wait_s": 30,
                                         "wait_for": "end"})
    assert r.status_code == 200
    end = check(r)
    assert end["running"] is False and end["exit_code"] == 0 and end["ended_at"], end
    assert (end["stdout"], end["stdout_offset"], end["stdout_missed"], end["stdout_next"]) == \
        ("bye\n", 6, 0, 10), end

    # What was asked is shown cut.
    r = api.post(base, {"command": "true #" + "x" * 2000, "wait_s": 30})
    assert r.status_code == 201, r.text
    long = check(r)
    assert long["asked"]["truncated"] is True and len(long["asked"]["command"]) == 1024

    # Listed newest first, without their output.
    r = api.get(base)
    assert r.status_code == 200
    listed = check(r)["commands"]
    assert [c["pid"] for c in listed] == [long["pid"], pid, short["pid"]], listed
    assert "stdout" not in listed[1] and listed[1]["stdout_bytes"] == 10

    # One whose stdin was closed while it runs.
    r = api.post(base, {"command": "sleep 60", "stdin": True, "timeout_s": 60})
    assert r.status_code == 201, r.text
    live = check(r)["pid"]
    r = api.post(f"{base}/{live}/stdin", {"close": True})
    assert r.status_code == 200 and check(r)["closed"] is True

    # Refused, as the document says; the bodies it refuses too.
    refused_bodies = [
        {"command": "true", "args": ["true"]},
        {},
        {"args": []},
        {"command": "true", "wait_s": 61},
        {"command": "true", "timeout_s": 0},
        {"command": "true", "shell": True},
        {"command": "true", "tag": ""},
    ]
    for body in refused_bodies:
        with pytest.raises(AssertionError):
            validate(body, start)
        r = api.post(base, body)
        assert r.status_code == 400 and error_code(r) == "invalid_request", (body, r.text)
    for body in ({}, {"input": "x", "input_base64": "eA=="}, {"close": False}, {"input": 1}):
        with pytest.raises(AssertionError):
            validate(body, write)
        r = api.post(f"{base}/{live}/stdin", body)
        assert r.status_code == 400 and error_code(r) == "invalid_request", (body, r.text)
    unknown = "/v1/sessions/ses_00000000000000000000000000000000/commands"
    cases = [
        (api.post(base, {"command": "true", "cwd": "/work/nowhere"}), 400, "invalid_request"),
        (api.post(base, {"command": "true", "cwd": "../.."}), 400, "invalid_path"),
        (api.request("POST", base, data=b'{"command":',
                     headers={"Content-Type": "application/json"}), 400, "invalid_json"),
        (api.get(f"{base}/999999"), 404, "process_not_found"),
        (api.get(f"{base}/0"), 400, "invalid_request"),
        (api.get(f"{base}/x"), 400, "invalid_request"),
        (api.get(f"{base}/{pid}", params={"stdout_from": "-1"}), 400, "invalid_request"),
        (api.get(f"{base}/{pid}", params={"wait_s": "61"}), 400, "invalid_request"),
        (api.get(f"{base}/{pid}", params={"wait_for": "never"}), 400, "invalid_request"),
        (api.post(f"{base}/{live}/stdin", {"input": "x"}), 409, "stdin_closed"),
        (api.post(f"{base}/{short['pid']}/stdin", {"input": "x"}), 404, "process_not_found"),
        (api.post(f"{base}/999999/stdin", {"input": "x"}), 404, "process_not_found"),
        (api.post(f"{base}/{live}/stdin", {"input": "x" * ((1 << 20) + 1)}), 413, "too_large"),
        (api.request("PUT", base), 405, "method_not_allowed"),
        (api.delete(f"{base}/{live}"), 405, "method_not_allowed"),
        (api.get(f"{base}/{live}/stdin"), 405, "method_not_allowed"),
        (api.request("PUT", f"{base}/x"), 400, "invalid_request"),   # the pid before the method
        (api.get(unknown), 404, "session_not_found"),
        (api.post(unknown, {"command": "true"}), 404, "session_not_found"),
        (api.get(f"{unknown}/4"), 404, "session_not_found"),
        (api.post(f"{unknown}/4/stdin", {"input": "x"}), 404, "session_not_found"),
    ]
    for r, status, code in cases:
        assert (r.status_code, error_code(r)) == (status, code), (r.request.method, r.request.url)
    # A command is a process of the session's: stopped there.
    r = api.delete(f"/v1/sessions/{sid}/processes/{live}", params={"signal": "KILL"})
    assert r.status_code == 202 and check(r) == {"pid": live, "signal": "KILL"}
    end = check(api.get(f"{base}/{live}", params={"wait_s": 30, "wait_for": "end"}))
    assert end["running"] is False and end["signal"] == 9 and end["timed_out"] is False, end


def test_ports(api):
    """A server the session runs, reached through its ports: the server's
    answers, whatever their status and media type, and petri's own errors,
    JSON, as the document declares them."""
    sid = api.session()
    res = check(api.post(f"/v1/sessions/{sid}/execute",
                         {"code": "open('hello.txt', 'w').write('hi there\\n')"}))
    assert res["status"] == "ok", res
    r = api.post(f"/v1/sessions/{sid}/commands",
                 {"args": ["python3", "-u", "-m", "http.server", "8000"]})
    assert r.status_code == 201, r.text
    pid, said, at = check(r)["pid"], "", 0
    while "Serving" not in said:
        got = check(api.get(f"/v1/sessions/{sid}/commands/{pid}",
                            params={"wait_s": 30, "stdout_from": at}))
        assert got["running"], got
        said, at = said + got["stdout"], got["stdout_next"]
    base = f"/v1/sessions/{sid}/ports"
    sandboxed = deref(DOC["components"]["responses"]["PortAnswer"])["headers"][
        "Content-Security-Policy"]["schema"]["const"]

    def served(r, status, ctype):
        """The sandbox's server's answer: its status and media type, and
        the policy petri adds."""
        body = check(r)
        assert r.status_code == status, (r.request.method, r.request.url, r.text[:500])
        assert r.headers["Content-Type"].startswith(ctype), r.headers
        assert r.headers["Content-Security-Policy"] == sandboxed
        return body

    assert served(api.get(f"{base}/8000/hello.txt"), 200, "text/plain") == b"hi there\n"
    for path in (f"{base}/8000", f"{base}/8000/"):          # the server's /
        assert b"hello.txt" in served(api.get(path), 200, "text/html")
    assert served(api.request("HEAD", f"{base}/8000/hello.txt"), 200, "text/plain") == b""
    # The server's own errors, of its media type, pass as its answers.
    assert b"404" in served(api.get(f"{base}/8000/nope.txt"), 404, "text/html")
    served(api.request("POST", f"{base}/8000/hello.txt", data=b"a=1",     # not 415
                       headers={"Content-Type": "application/x-www-form-urlencoded"}),
           501, "text/html")
    # petri's own: JSON Error envelopes, without the server's policy.
    unknown = "/v1/sessions/ses_00000000000000000000000000000000/ports"
    cases = [
        (api.get(f"{base}/8001/"), 502, "port_closed"),
        (api.get(f"{base}/8001/hello.txt"), 502, "port_closed"),
        (api.get(f"{base}/0/hello.txt"), 400, "invalid_request"),
        (api.get(f"{base}/65536"), 400, "invalid_request"),
        (api.request("PUT", f"{base}/x/hello.txt", data=b"x"), 400, "invalid_request"),
        (api.get(f"{unknown}/8000/hello.txt"), 404, "session_not_found"),
        (api.request("DELETE", f"{unknown}/8000"), 404, "session_not_found"),
    ]
    for r, status, code in cases:
        assert (r.status_code, error_code(r)) == (status, code), (r.request.method, r.request.url)
        assert "Content-Security-Policy" not in r.headers, r.request.url
    # A status both may answer takes the server's JSON too, but no Error
    # envelope of petri's with a code the status does not have.
    schema = deref(declared_responses("GET", f"{base}/8000/x")[1]["404"])[
        "content"]["application/json"]["schema"]
    validate({"detail": "Not Found"}, schema)
    validate({"error": {"code": "session_not_found", "message": "x"}}, schema)
    with pytest.raises(AssertionError):
        validate({"error": {"code": "port_closed", "message": "x"}}, schema)
    r = api.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 204
    check(r)


def test_command_reads_that_wait_are_bounded(make_server):
    """Past the waiting reads a server allows, a read that would wait is
    429, and a start that would wait answers with its pid alone."""
    srv = make_server("[server]\nmax_executions = 4\nhttp_workers = 6\n")   # one may wait
    api = srv.api()
    sid = api.session()
    base = f"/v1/sessions/{sid}/commands"
    r = api.post(base, {"command": "exec sleep 600"})
    assert r.status_code == 201, r.text
    pid = check(r)["pid"]
    waits, threads = [], []

    def wait_in_turn():
        """A read that waits for the end, on a thread; again when a probe
        took the slot before it."""
        if not threads or not threads[-1].is_alive():
            threads.append(threading.Thread(target=lambda: waits.append(api.get(
                f"{base}/{pid}", params={"wait_s": 60, "wait_for": "end"}))))
            threads[-1].start()
            return False
        waits.append(api.get(f"{base}/{pid}", params={"wait_s": 0.5}))
        return waits[-1].status_code == 429
    try:
        assert wait_for(wait_in_turn, 30), waits[-1].text
        r = api.post(base, {"command": "exec sleep 600", "wait_s": 30})
        assert r.status_code == 201, r.text
        # Its wait refused, the start says what there is at once.
        other = check(r)
        assert other["running"] is True and other["stdout"] == "", other
        r = api.delete(f"/v1/sessions/{sid}/processes/{other['pid']}", params={"signal": "KILL"})
        assert r.status_code == 202 and check(r)["signal"] == "KILL"
    finally:
        api.delete(f"/v1/sessions/{sid}/processes/{pid}", params={"signal": "KILL"})
        for t in threads:
            t.join()
    for r in waits:
        assert r.status_code in (200, 429), r.text
        if r.status_code == 429:
            assert error_code(r) == "over_capacity"
        else:
            check(r)
    end = check(waits[-1])      # the one that waited: its end
    assert end["running"] is False and end["signal"] == 9, end


def test_one_shot_execute(api):
    body = {"code": "import pandas as pd\ndf = pd.read_csv('in/d.csv')\n"
                    "df.to_csv('out.csv', index=False)\nprint(int(df.a.sum()))",
            "files": [{"path": "in/d.csv", "content_base64": base64.b64encode(b"a\n1\n2\n").decode()}],
            "limits": {"memory_mb": 512}, "timeout_s": 20}
    validate(body, request_schema("post", "/v1/execute"))
    r = api.post("/v1/execute", body)
    assert r.status_code == 200
    res = check(r)
    assert res["status"] == "ok" and res["stdout"] == "3\n"
    assert res["files"] == [{"path": "out.csv", "size": 6}]
    body["return_files"] = ["*.csv"]
    validate(body, request_schema("post", "/v1/execute"))
    res = check(api.post("/v1/execute", body))
    assert res["files"] == [{"path": "out.csv", "size": 6, "truncated": False,
                             "content_base64": base64.b64encode(b"a\n1\n2\n").decode()}]

    res = check(api.post("/v1/execute", {"code": "echo hi", "language": "bash"}))
    assert res["stdout"] == "hi\n"
    res = check(api.post("/v1/execute", {"code": "import time; time.sleep(5)", "timeout_s": 0.3}))
    assert res["status"] == "timeout" and res["reason"].endswith("the sandbox was killed")

    bad = [
        ({"code": "1", "files": [{"path": "/etc/x", "content_base64": ""}]}, "invalid_path"),
        ({"code": "1", "files": [{"path": "x", "content_base64": "!!"}]}, "invalid_request"),
        ({"code": "1", "files": [{"path": "x", "content_base64": "", "mode": 1}]}, "invalid_request"),
        ({"code": "1", "files": {}}, "invalid_request"),
        ({"code": "1", "idle_timeout_s": 5}, "invalid_request"),
        ({"code": "1", "timeout_s": 10_000}, "invalid_request"),
        ({}, "invalid_request"),
    ]
    for body, code in bad:
        r = api.post("/v1/execute", body)
        assert r.status_code == 400 and error_code(r) == code, body
    r = api.get("/v1/execute")
    assert r.status_code == 405 and error_code(r) == "method_not_allowed"
    assert r.headers["Allow"] == "POST"


def test_the_execution_record(api):
    sid = api.session()
    check(api.post(f"/v1/sessions/{sid}/execute", {"code": "print(1)"}))
    check(api.post("/v1/execute", {"code": "print(2)"}))
    own = check(api.get(f"/v1/sessions/{sid}/executions"))
    assert [e["session"] for e in own["executions"]] == [sid]
    found = check(api.get("/v1/languages"))
    assert found["languages"][0]["name"] == "python"
    # Known once the probe has found out (seconds; a slow machine may not
    # have yet): until then null, with why.
    assert found["packages"] or found["error"], found
    everything = check(api.get("/v1/executions", params={"limit": 2}))
    assert [e["session"] for e in everything["executions"]] == [None, sid]
    only = check(api.get("/v1/executions", params={"session": "none", "limit": 1}))
    assert only["executions"][0]["result"]["stdout"] == "2\n"
    for params in ({"limit": 0}, {"before": "x"}, {"session": sid}):
        r = api.get("/v1/executions", params=params)
        assert r.status_code == 400 and error_code(r) == "invalid_request", params
    r = api.post("/v1/executions", {})
    assert r.status_code == 405 and error_code(r) == "method_not_allowed"


def test_the_record_export(api):
    sid = api.session()
    check(api.post(f"/v1/sessions/{sid}/execute", {"code": "print(1)"}))
    check(api.post("/v1/execute", {"code": "print(2)"}))
    for fmt in ("ipynb", "html", "jsonl"):
        check(api.get(f"/v1/sessions/{sid}/export", params={"format": fmt}))
        check(api.get("/v1/executions/export", params={"format": fmt, "since": "2020-01-01"}))
    for params in ({}, {"format": "pdf"}, {"format": "html", "since": "yesterday"}):
        r = api.get("/v1/executions/export", params=params)
        check(r)
        assert r.status_code == 400 and error_code(r) == "invalid_request", params
    r = api.get(f"/v1/sessions/{sid}/export", params={"format": "jsonl", "until": "2030-01-01"})
    check(r)
    assert r.status_code == 400
    r = api.get("/v1/sessions/ses_00000000000000000000000000000000/export", params={"format": "html"})
    check(r)
    assert r.status_code == 404
    check(api.post("/v1/executions/export", {}))


def test_bad_requests(api):
    sid = api.session()
    create = request_schema("post", "/v1/sessions")
    execute = request_schema("post", "/v1/sessions/{id}/execute")
    cases = [
        ("/v1/sessions", b"[1]", "invalid_json", None),
        ("/v1/sessions", b'{"a":', "invalid_json", None),
        ("/v1/sessions", b'{"language":"python","language":"c"}', "invalid_json", None),
        ("/v1/sessions", {"bogus": 1}, "invalid_request", create),
        ("/v1/sessions", {"language": "ruby"}, "invalid_request", None),  # GET /v1/languages
        ("/v1/sessions", {"limits": {"gpu": 1}}, "invalid_request", create),
        ("/v1/sessions", {"limits": []}, "invalid_request", create),
        ("/v1/sessions", {"limits": {"memory_mb": 16}}, "invalid_request", create),
        ("/v1/sessions", {"limits": {"memory_mb": 1 << 20}}, "invalid_request", None),  # above max
        ("/v1/sessions", {"limits": {"timeout_s": 10_000}}, "invalid_request", None),
        ("/v1/sessions", {"idle_timeout_s": 0}, "invalid_request", create),
        ("/v1/sessions", {"env": {"PATH": "/x"}}, "invalid_request", create),
        ("/v1/sessions", {"env": {"1A": "x"}}, "invalid_request", create),
        ("/v1/sessions", {"env": {"A": 1}}, "invalid_request", create),
        (f"/v1/sessions/{sid}/execute", {}, "invalid_request", execute),
        (f"/v1/sessions/{sid}/execute", {"code": 1}, "invalid_request", execute),
        (f"/v1/sessions/{sid}/execute", {"code": "1", "language": "ruby"}, "invalid_request", None),
        (f"/v1/sessions/{sid}/execute", {"code": "1", "timeout_s": 0}, "invalid_request", execute),
        (f"/v1/sessions/{sid}/execute", {"code": "1", "timeout_s": 31}, "invalid_request", None),
        (f"/v1/sessions/{sid}/execute", {"code": "1", "limits": {}}, "invalid_request", execute),
    ]
    for path, body, code, schema in cases:
        if isinstance(body, bytes):
            r = api.request("POST", path, data=body, headers={"Content-Type": "application/json"})
        else:
            r = api.post(path, body)
            if schema is not None:  # the document refuses it too
                with pytest.raises(AssertionError):
                    validate(body, schema)
        assert r.status_code == 400 and error_code(r) == code, (path, body, r.text)
    assert check(api.get("/v1/sessions/" + sid))["status"] == "idle"


def test_not_found_and_method_not_allowed(api):
    sid = api.session()
    cases = [
        (api.get("/nope"), 404, "not_found"),
        (api.get("/v1/sessionsX"), 404, "not_found"),
        (api.get(f"/v1/sessions/{sid}/bogus"), 404, "not_found"),
        (api.get("/v1/sessions/ses_00000000000000000000000000000000"), 404, "session_not_found"),
        (api.get("/v1/sessions/" + "x" * 40), 404, "session_not_found"),
        (api.request("PUT", "/v1/sessions"), 405, "method_not_allowed"),
        (api.post(f"/v1/sessions/{sid}"), 405, "method_not_allowed"),
        (api.get(f"/v1/sessions/{sid}/execute"), 405, "method_not_allowed"),
        (api.post("/healthz"), 405, "method_not_allowed"),
        (api.post("/readyz"), 405, "method_not_allowed"),
        (api.post("/metrics"), 405, "method_not_allowed"),
        (api.delete("/v1/openapi.json"), 405, "method_not_allowed"),
    ]
    for r, status, code in cases:
        assert (r.status_code, error_code(r)) == (status, code), r.request.url


def keep_busy(api, sid, out):
    """Start a 1.5 s execution in sid on a thread (its response goes into
    out["r"]); return the thread once the session says it is busy."""
    t = threading.Thread(target=lambda: out.update(r=api.post(
        f"/v1/sessions/{sid}/execute", {"code": "import time; time.sleep(1.5)"})))
    t.start()
    api.wait_busy(sid, 5)
    return t


def test_busy_session_is_409(api):
    sid = api.session()
    out = {}
    t = keep_busy(api, sid, out)
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "1"})
    assert r.status_code == 409 and error_code(r) == "session_busy"
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "1"}, headers={"Accept": "text/event-stream"})
    assert r.status_code == 409 and error_code(r) == "session_busy"
    t.join()
    assert check(out["r"])["status"] == "ok"


def test_expired_session_is_410_with_the_reason(api):
    sid = api.session(idle_timeout_s=1)
    assert wait_for(lambda: api.get(f"/v1/sessions/{sid}").status_code != 200, 30, 0.2), \
        "a session of 1 s idle never expired"
    r = api.get(f"/v1/sessions/{sid}")
    assert r.status_code == 410
    assert check(r)["error"] == {"code": "session_gone",
                                 "message": "the session was idle too long and was ended"}
    r = api.put(f"/v1/sessions/{sid}/files/x", data=b"x")
    assert r.status_code == 410 and error_code(r) == "session_gone"
    r = api.get(f"/v1/sessions/{sid}/archive")
    assert r.status_code == 410 and error_code(r) == "session_gone"
    r = api.request("POST", f"/v1/sessions/{sid}/archive", data=b"x")
    assert r.status_code == 410 and error_code(r) == "session_gone"


def test_keys_401(make_server, api):
    srv = make_server("[server]\napi_keys = k1\n")
    Api = type(api)
    anon, wrong, good = Api(srv.url), Api(srv.url, "k2"), Api(srv.url, "k1")
    for a in (anon, wrong):
        for r in (a.get("/v1/sessions"), a.post("/v1/sessions", {}), a.get("/metrics"),
                  a.get("/v1/openapi.json"), a.post("/v1/execute", {"code": "1"}),
                  a.get("/v1/executions"),
                  a.get("/nope"), a.request("PUT", "/v1/sessions")):
            assert r.status_code == 401 and error_code(r) == "unauthorized", r.request.url
    r = anon.get("/healthz")
    assert r.status_code == 200 and check(r)["status"] == "ok"
    r = anon.get("/readyz")
    assert r.status_code == 200 and check(r)["status"] == "ok"
    r = good.get("/v1/sessions")
    assert r.status_code == 200 and check(r) == {"sessions": []}
    r = good.get("/v1/openapi.json")
    assert r.status_code == 200 and r.content == DOC_BYTES


def test_limits_413_and_capacity_429(make_server, api):
    srv = make_server("[server]\nmax_sessions = 1\nmax_executions = 1\nmax_body_mb = 1\n"
                      "max_file_mb = 1\n")
    api = type(api)(srv.url)
    sid = api.session()
    big = b"\0" * (1 << 20) + b"x"
    # without Content-Length (chunked): read, dropped, refused
    r = api.put(f"/v1/sessions/{sid}/files/big", data=iter([big[:1 << 19], big[1 << 19:]]))
    assert r.status_code == 413 and error_code(r) == "too_large"
    r = api.request("POST", f"/v1/sessions/{sid}/execute", data=iter([big]),
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and error_code(r) == "too_large"
    # a file larger than max_file_mb cannot be downloaded
    res = check(api.post(f"/v1/sessions/{sid}/execute",
                         {"code": "open('big', 'wb').write(b'0' * (2 << 20))"}))
    assert res["status"] == "ok"
    r = api.get(f"/v1/sessions/{sid}/files/big")
    assert r.status_code == 413 and error_code(r) == "too_large"

    r = api.post("/v1/sessions", {})
    assert r.status_code == 429 and error_code(r) == "over_capacity"
    r = api.post("/v1/execute", {"code": "1"})
    assert r.status_code == 429 and error_code(r) == "over_capacity"

    r = api.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 204
    res = check(api.post("/v1/execute", {"code": "print(1)"}))
    assert res["stdout"] == "1\n"
    text = check(api.get("/metrics"))
    assert 'petri_requests_rejected_total{reason="capacity"} 2' in text
    assert 'petri_requests_rejected_total{reason="too_large"} 3' in text
