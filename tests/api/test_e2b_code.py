"""E2B's code interpreter (port 49999) over raw HTTP, as @e2b/code-interpreter
speaks it (issue 11; /work/notes' contract §6, docs/e2b.md): POST /execute
streams NDJSON, /contexts makes, lists, restarts and removes code contexts.

One daemon for the module, in a memory cgroup of its own (the hostile bodies
attack it), with an E2B-shaped key; each test makes its sandbox with
POST /sandboxes.  An E2B sandbox is a petri session with the same id, so the
native files API can write into it while its code runs.
"""
import base64
import http.client
import json
import re
import secrets
import socket
import urllib.parse

import pytest
import requests

from apihelp import attacked_server
from harness import poll

CG_LIMIT = 4 << 30
TIMEOUT_S = 15          # the sandboxes' execution time limit ([limits] timeout_s)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    key = "e2b_" + secrets.token_hex(20)
    config = f"[server]\napi_keys = {key}\n[limits]\ntimeout_s = {TIMEOUT_S}\n"
    with attacked_server(tmp_path_factory.mktemp("e2b-code"), "e2b-code", CG_LIMIT,
                         config) as srv:
        srv.key = key
        yield srv


class Stream:
    """A POST /execute as it streams: .status, .headers, iterate for lines
    (each checked: one JSON object, newline-terminated, ASCII)."""

    def __init__(self, url, headers, body):
        u = urllib.parse.urlsplit(url)
        self.c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.c.request("POST", "/execute", payload,
                       {"Content-Type": "application/json", **headers})
        self.resp = self.c.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}

    def __iter__(self):
        while True:
            line = self.resp.readline()
            if not line:
                return
            assert line.endswith(b"\n"), f"an unterminated line: {line[:200]!r}"
            assert line.strip(), "a blank line (the SDK's JSON.parse throws on it)"
            assert line.isascii(), "non-ASCII bytes (the SDK decodes each chunk on its own)"
            obj = json.loads(line)
            assert isinstance(obj, dict) and "type" in obj, obj
            if obj["type"] != "keepalive":
                yield obj

    def body(self):
        return self.resp.read()

    def close(self):
        self.resp.close()
        self.c.close()


class Execution:
    """The lines of one execution, gathered as the SDK does."""

    @staticmethod
    def text_of(lines, kind):
        return "".join(x["text"] for x in lines if x["type"] == kind)

    @staticmethod
    def wait_for_stdout(it, text):
        """Read lines of a stream until its stdout is text; those lines."""
        lines = []
        while Execution.text_of(lines, "stdout") != text:
            lines.append(next(it))
        return lines

    def __init__(self, lines):
        self.lines = lines
        types = [x["type"] for x in lines]
        assert types[-1] == "end_of_execution" and types.count("end_of_execution") == 1, types
        self.stdout = "".join(x["text"] for x in lines if x["type"] == "stdout")
        self.stderr = "".join(x["text"] for x in lines if x["type"] == "stderr")
        self.results = [x for x in lines if x["type"] == "result"]
        errors = [x for x in lines if x["type"] == "error"]
        assert len(errors) <= 1, errors
        self.error = errors[0] if errors else None
        counts = [x["execution_count"] for x in lines if x["type"] == "number_of_executions"]
        self.count = counts[-1] if counts else None
        main = [r for r in self.results if r["is_main_result"]]
        self.text = main[0].get("text") if main else None


class Sandbox:
    def __init__(self, srv):
        self.srv = srv
        r = requests.post(srv.url + "/sandboxes", json={"templateID": "code-interpreter-v1"},
                          headers={"X-API-KEY": srv.key}, timeout=60)
        assert r.status_code == 201, r.text
        j = r.json()
        self.id, self.token, self.traffic = (j["sandboxID"], j["envdAccessToken"],
                                             j["trafficAccessToken"])

    def headers(self, **over):
        h = {"E2b-Sandbox-Id": self.id, "E2b-Sandbox-Port": "49999",
             "X-Access-Token": self.token}
        h.update(over)
        return {k: v for k, v in h.items() if v is not None}

    def stream(self, body, **over):
        return Stream(self.srv.url, self.headers(**over), body)

    def run(self, code, **body):
        st = self.stream({"code": code, **body})
        try:
            assert st.status == 200, st.body()
            assert st.headers["content-type"] == "application/x-ndjson"
            return Execution(list(st))
        finally:
            st.close()

    def refused(self, body, **over):
        """(status, JSON body) of an /execute answered before any stream."""
        st = self.stream(body, **over)
        try:
            data = st.body()
            return st.status, json.loads(data) if data else None
        finally:
            st.close()

    def ctx(self, method, path, body=None, **over):
        """A /contexts call as the SDK makes it: the traffic token only."""
        h = self.headers(**{"X-Access-Token": None, "E2B-Traffic-Access-Token": self.traffic,
                            **over})
        return requests.request(method, self.srv.url + path, json=body, headers=h, timeout=60)

    def native_put(self, path, data):
        r = requests.put(f"{self.srv.url}/v1/sessions/{self.id}/files/{path}", data=data,
                         headers={"Authorization": f"Bearer {self.srv.key}"}, timeout=60)
        assert r.status_code in (200, 201, 204), r.text

    def kill(self):
        requests.delete(f"{self.srv.url}/sandboxes/{self.id}",
                        headers={"X-API-KEY": self.srv.key}, timeout=60)


@pytest.fixture
def sbx(daemon):
    s = Sandbox(daemon)
    yield s
    s.kill()


# ---- executions ---------------------------------------------------------------


def test_state_main_result_and_count(sbx):
    e = sbx.run("x = 41")
    assert e.error is None and e.results == [] and e.text is None
    first = e.count
    assert isinstance(first, int) and first >= 1
    e = sbx.run("display(7)\nx + 1")
    assert [(r["text"], r["is_main_result"]) for r in e.results] == [("7", False), ("42", True)]
    assert e.text == "42"
    assert e.count == first + 1
    # E2B's server drops the quotes of a str's repr; so does petri's wire
    assert sbx.run("'kept'").text == "kept"
    assert sbx.run("\"it's\"").text == "it's", "double quotes too, as E2B"
    assert sbx.run("'ab' + 'c'").text == "abc" and sbx.run("42").text == "42"
    # number_of_executions comes right before the end
    assert [x["type"] for x in e.lines][-2:] == ["number_of_executions", "end_of_execution"]


def test_stdout_arrives_while_the_code_runs(sbx):
    # The code waits for a file that the test writes only once it has read
    # the first stdout line: buffered output would make it print "not
    # released" after its deadline.
    code = ("import os, sys, time\nprint('first', flush=True)\n"
            "print('to stderr', file=sys.stderr, flush=True)\n"
            "deadline = time.time() + 10\n"
            "while not os.path.exists('/home/user/release') and time.time() < deadline:\n"
            "    time.sleep(0.05)\n"
            "print('released' if os.path.exists('/home/user/release') else 'not released')")
    st = sbx.stream({"code": code})
    assert st.status == 200
    lines, released = [], False
    try:
        for x in st:
            lines.append(x)
            if x["type"] == "stdout":
                assert set(x) == {"type", "text", "timestamp"}, x
                assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", x["timestamp"])
            if not released and Execution.text_of(lines, "stdout") == "first\n":
                released = True
                sbx.native_put("release", b"")
    finally:
        st.close()
    assert released
    e = Execution(lines)
    assert e.error is None, e.error
    assert e.stdout == "first\nreleased\n"
    assert e.stderr == "to stderr\n"


def test_one_line_is_one_stdout_item(sbx):
    # A line written in two pieces, apart in time, is still one item (as a
    # notebook's kernel sends it); a print is one item, not 'x' then '\n'.
    code = ("import sys, time\nsys.stdout.write('hel')\ntime.sleep(0.3)\nsys.stdout.write('lo\\n')\n"
            "for i in range(3):\n    print(i)\nprint('oops', file=sys.stderr)\n"
            "sys.stdout.write('no newline')")
    e = sbx.run(code)
    assert e.error is None, e.error
    items = [x["text"] for x in e.lines if x["type"] == "stdout"]
    assert "".join(items) == "hello\n0\n1\n2\nno newline"
    # whole lines (the daemon may read several at once), the last at the end
    assert items[0].startswith("hello\n") and items[-1].endswith("no newline"), items
    assert all(x.endswith("\n") for x in items[:-1]), items
    assert [x["text"] for x in e.lines if x["type"] == "stderr"] == ["oops\n"]


def test_an_indented_cell_runs_as_a_notebook_runs_it(sbx):
    e = sbx.run("\n        a = 20\n    \n        if a:\n            a += 1\n        a * 2\n        ")
    assert e.error is None, e.error
    assert e.text == "42"
    # Only a cell Python would refuse changes: an indented comment first
    # leaves the rest as it is.
    e = sbx.run("  # a comment\nif True:\n  b = 2\nb")
    assert e.error is None and e.text == "2", e.error
    e = sbx.run("\n    x = 1\n    1 / 0")
    assert e.error["name"] == "ZeroDivisionError"
    assert "line 3" in e.error["traceback"] and "1 / 0" in e.error["traceback"]


def test_a_sandbox_killed_under_an_execution_cuts_the_stream(sbx, daemon):
    # E2B's SDK reads a cut connection, then 502 from the sandbox, as
    # "killed while the request was in progress" (its TimeoutError).  On the
    # wire: the chunks so far, then the connection closes without the last
    # chunk (http.client would read that as a proper end).
    body = json.dumps({"code": "import time\nprint('started', flush=True)\ntime.sleep(300)"})
    head = "".join(f"{k}: {v}\r\n" for k, v in sbx.headers().items())
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=60) as s:
        s.sendall((f"POST /execute HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\n{head}"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                   f"{body}").encode())
        data = b""
        while b"started" not in data:
            chunk = s.recv(65536)
            assert chunk, f"closed before the first line: {data!r}"
            data += chunk
        sbx.kill()
        while chunk := s.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 ") and b"Transfer-Encoding: chunked" in data
    assert b"end_of_execution" not in data and not data.endswith(b"0\r\n\r\n"), data[-300:]
    h = sbx.headers()
    assert requests.get(daemon.url + "/health", headers={**h, "E2b-Sandbox-Port": "49983"},
                        timeout=60).status_code == 502
    assert requests.get(daemon.url + "/contexts", headers=h, timeout=60).status_code == 502
    h["X-Access-Token"] = "x" * len(h["X-Access-Token"])
    assert requests.get(daemon.url + "/contexts", headers=h, timeout=60).status_code == 401


def test_split_characters_and_bad_bytes_come_out_whole(sbx):
    # "é" written one byte at a time, then a byte that is no UTF-8 at all
    code = ("import sys\nfor b in 'é€'.encode():\n"
            "    sys.stdout.buffer.write(bytes([b])); sys.stdout.flush()\n"
            "sys.stdout.buffer.write(b'\\xff!\\n'); sys.stdout.flush()")
    e = sbx.run(code)
    assert e.stdout == "é€\ufffd!\n"


def test_a_chart_is_a_png_display_result(sbx):
    e = sbx.run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 4, 1])\nplt.show()")
    assert e.error is None, e.error
    pngs = [r for r in e.results if "png" in r]
    assert len(pngs) == 1, e.results
    assert base64.b64decode(pngs[0]["png"])[:8] == PNG_MAGIC
    assert pngs[0]["is_main_result"] is False
    assert not any("/" in k for r in e.results for k in r), "MIME types are E2B's names"


def test_a_dataframe_is_html_and_text(sbx):
    e = sbx.run("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
    assert e.error is None, e.error
    (main,) = [r for r in e.results if r["is_main_result"]]
    assert "<table" in main["html"] and "<td>x</td>" in main["html"]
    assert re.search(r"a\s+b", main["text"])


def test_json_representation_is_an_object(sbx):
    e = sbx.run("class J:\n    def _repr_json_(self):\n        return {'k': [1, 2]}\nJ()")
    (main,) = e.results
    assert main["json"] == {"k": [1, 2]}


def test_an_exception_is_one_error_line_with_its_traceback(sbx):
    sbx.run("kept = 1")
    e = sbx.run("def f(d):\n    return d['missing']\nf({})")
    assert e.error["name"] == "KeyError"
    assert "missing" in e.error["value"]
    assert isinstance(e.error["traceback"], str)
    assert "KeyError" in e.error["traceback"] and "line 2" in e.error["traceback"]
    assert e.text is None
    assert sbx.run("kept").text == "1", "the state survives an exception"
    assert sbx.run("import sys\nsys.exit(3)").error["name"] == "SystemExit"


@pytest.mark.slow
def test_a_timeout_is_a_timeout_error(sbx):
    e = sbx.run("import time\nprint('started', flush=True)\ntime.sleep(600)")
    assert e.stdout == "started\n"
    assert e.error["name"] == "TimeoutError"
    assert "time limit" in e.error["value"] or "timeout" in e.error["value"].lower()
    assert "sleep" in e.error["traceback"], "where the code was interrupted"
    assert sbx.run("1 + 1").text == "2", "the sandbox survives an interrupted timeout"


def test_languages(sbx):
    sbx.native_put("seen.txt", b"in the workspace\n")
    e = sbx.run("cat seen.txt; echo to-err >&2; exit 3", language="bash")
    assert e.stdout == "in the workspace\n" and e.stderr == "to-err\n"
    assert e.error["name"] == "NonZeroExit" and "3" in e.error["value"]
    e = sbx.run('#include <stdio.h>\nint main(void) { puts("from c"); return 0; }',
                language=" C ")
    assert e.stdout == "from c\n" and e.error is None
    # JavaScript, TypeScript and R are languages of petri's table, as of E2B's.
    e = sbx.run("const answer = 6 * 7;\nanswer", language="js")
    assert e.text == "42" and e.error is None, e
    e = sbx.run("process.cwd()", language="ts")
    assert e.text == "/home/user" and e.error is None, e
    e = sbx.run('const message: string = "Hello World!"; console.log(message)',
                language=" TypeScript ")
    assert e.stdout == "Hello World!\n" and e.error is None and e.results == [], e
    e = sbx.run("let x: = 1", language="typescript")
    assert e.error["name"] == "SyntaxError" and e.error["value"].startswith("main.ts:1:8: "), e
    e = sbx.run("cat(readLines('seen.txt'), '\\n')", language="r")
    assert e.stdout == "in the workspace \n" and e.error is None, e
    for lang in ("cobol", "x" * 5000):
        status, body = sbx.refused({"code": "1", "language": lang})
        assert status == 400 and body["code"] == 400, body
        assert "python" in body["message"], body
        assert "x" * 100 not in body["message"]


def test_env_vars_are_the_executions_only(sbx):
    e = sbx.run("import os\nprint(os.environ['GREETING'])", env_vars={"GREETING": "hi"})
    assert e.stdout == "hi\n"
    assert sbx.run("import os\n'GREETING' in os.environ").text == "False"
    for bad in ({"PATH": "/evil"}, {"A": 1}, ["A=b"], {f"V{i}": "x" for i in range(100)}):
        status, body = sbx.refused({"code": "1", "env_vars": bad})
        assert status == 400 and "env_vars" in body["message"], body


def test_busy_sandbox_is_409_before_the_stream(sbx):
    st = sbx.stream({"code": "import os, time\nprint('in', flush=True)\n"
                             "while not os.path.exists('/home/user/go'):\n"
                             "    time.sleep(0.05)"})
    try:
        it = iter(st)
        seen = Execution.wait_for_stdout(it, "in\n")
        status, body = sbx.refused({"code": "1"})
        assert status == 409 and body["code"] == 409 and "busy" in body["message"], body
        sbx.native_put("go", b"")
        e = Execution(seen + list(it))
        assert e.error is None
    finally:
        st.close()
    assert sbx.run("2").text == "2"


# ---- contexts ------------------------------------------------------------------


def test_contexts_have_their_own_state(sbx):
    r = sbx.ctx("POST", "/contexts", {})
    assert r.status_code == 200, r.text
    ctx = r.json()
    assert ctx["language"] == "python" and ctx["cwd"] == "/home/user"
    assert re.fullmatch(r"[0-9a-f]{32}", ctx["id"])
    sbx.run("where = 'default'")
    sbx.run("where = 'ctx'", context_id=ctx["id"])
    assert sbx.run("where", context_id=ctx["id"]).text == "ctx"
    assert sbx.run("where").text == "default"
    assert sbx.run("where", context_id="python").text == "default", "python is the default"
    # same files
    sbx.run("open('/home/user/shared.txt', 'w').write('x')", context_id=ctx["id"])
    assert sbx.run("open('/home/user/shared.txt').read()").text == "x"
    # each context counts its own executions
    assert sbx.run("1", context_id=ctx["id"]).count == 4
    # listed with the defaults
    listed = sbx.ctx("GET", "/contexts").json()
    ids = {c["id"]: c for c in listed}
    assert {"python", "bash", "c", ctx["id"]} <= set(ids), listed
    assert ids["bash"]["language"] == "bash"
    # restart: its variables are gone, the default's are not
    r = sbx.ctx("POST", f"/contexts/{ctx['id']}/restart")
    assert r.status_code == 204, r.text
    assert sbx.run("where", context_id=ctx["id"]).error["name"] == "NameError"
    assert sbx.run("where").text == "default"
    # removed: gone from the list, and executing in it is 404
    assert sbx.ctx("DELETE", f"/contexts/{ctx['id']}").status_code == 204
    assert ctx["id"] not in {c["id"] for c in sbx.ctx("GET", "/contexts").json()}
    status, body = sbx.refused({"code": "1", "context_id": ctx["id"]})
    assert status == 404 and body["code"] == 404 and ctx["id"] in body["message"]
    assert sbx.ctx("DELETE", f"/contexts/{ctx['id']}").status_code == 404
    assert sbx.ctx("POST", f"/contexts/{ctx['id']}/restart").status_code == 404


def test_restart_of_the_default_context_empties_the_session(sbx):
    sbx.run("gone_soon = 1")
    assert sbx.ctx("POST", "/contexts/bash/restart").status_code == 204
    sbx.run("true", language="bash")
    assert sbx.run("gone_soon").text == "1", "restarting bash leaves Python alone"
    assert sbx.ctx("POST", "/contexts/python/restart").status_code == 204
    assert sbx.run("gone_soon").error["name"] == "NameError"
    r = sbx.ctx("DELETE", "/contexts/python")
    assert r.status_code == 400 and "default" in r.json()["message"]


def test_a_busy_execution_does_not_lose_a_restart(sbx):
    sbx.run("v = 1")
    assert sbx.ctx("POST", "/contexts/python/restart").status_code == 204
    st = sbx.stream({"code": "echo in; while [ ! -e /home/user/go2 ]; do sleep 0.05; done",
                     "language": "bash"})
    try:
        it = iter(st)
        Execution.wait_for_stdout(it, "in\n")
    except Exception:
        st.close()
        raise
    # a Python execution refused as busy...
    status, _ = sbx.refused({"code": "v"})
    sbx.native_put("go2", b"")
    list(it)
    st.close()
    assert status == 409
    # ...leaves the restart for the next one that runs
    assert sbx.run("v").error["name"] == "NameError"


def test_context_cwd_and_language(sbx):
    sbx.run("import os\nos.makedirs('/home/user/sub', exist_ok=True)")
    # Any directory of the sandbox, as the sandbox's user sees it (E2B's
    # tests use /root): the code chdirs there inside its jail.
    for cwd, want in (("/home/user/sub", "/home/user/sub"), ("sub/", "/home/user/sub"),
                      ("/tmp", "/tmp"), ("/etc/", "/etc"), ("/", "/"), ("/home/userx", "/home/userx")):
        r = sbx.ctx("POST", "/contexts", {"cwd": cwd})
        assert r.status_code == 200 and r.json()["cwd"] == want, r.text
    ctx = sbx.ctx("POST", "/contexts", {"cwd": "/home/user/sub"}).json()
    sbx.run("open('here.txt', 'w').write('x')", context_id=ctx["id"])
    assert sbx.run("import os\nos.path.exists('/home/user/sub/here.txt')").text == "True"
    b = sbx.ctx("POST", "/contexts", {"language": "bash", "cwd": "/home/user/sub"}).json()
    assert b["language"] == "bash"
    assert sbx.run("ls", context_id=b["id"]).stdout == "here.txt\n"
    e = sbx.run("import os\nos.getcwd()", context_id=sbx.ctx("POST", "/contexts", {"cwd": "/etc"}).json()["id"])
    assert e.text == "/etc", e.error
    for cwd in ("/home/user/../etc", "/tmp/../etc", "//etc", "/etc/./x", "a\x01b",
                "/home/user/" + "d" * 300, 5):
        r = sbx.ctx("POST", "/contexts", {"cwd": cwd})
        assert r.status_code == 400 and r.json()["code"] == 400, (cwd, r.text)
    r = sbx.ctx("POST", "/contexts", {"language": "cobol"})
    assert r.status_code == 400 and "python" in r.json()["message"]
    status, body = sbx.refused({"code": "1", "context_id": ctx["id"], "language": "python"})
    assert status == 400, body
    # a missing cwd fails the execution, not the daemon
    gone = sbx.ctx("POST", "/contexts", {"cwd": "/home/user/nowhere"}).json()
    assert sbx.run("1", context_id=gone["id"]).error["name"] == "FileNotFoundError"


def test_contexts_are_bounded(sbx):
    made = 0
    while True:
        r = sbx.ctx("POST", "/contexts", {})
        if r.status_code != 200:
            break
        made += 1
        assert made <= 100
    assert r.status_code == 429 and "at most" in r.json()["message"], r.text
    assert 0 < made < 100
    # and the default ones, one per language (java's included)
    assert len(sbx.ctx("GET", "/contexts").json()) == made + 7


# ---- who may, and what a client may send ----------------------------------------------


def test_tokens(sbx, daemon):
    other = Sandbox(daemon)
    try:
        for over in ({"X-Access-Token": "0" * 64}, {"X-Access-Token": None},
                     {"X-Access-Token": other.token},
                     {"E2b-Sandbox-Id": "nosuchsandbox", "X-Access-Token": sbx.token}):
            status, body = sbx.refused({"code": "1"}, **over)
            assert status == 401 and body["code"] == 401, (over, body)
        # the traffic token opens /execute as well as /contexts
        st = sbx.stream({"code": "1"}, **{"X-Access-Token": None,
                                          "E2B-Traffic-Access-Token": sbx.traffic})
        assert st.status == 200
        assert Execution(list(st)).text == "1"
        st.close()
        for token in ("wrong", other.traffic):
            r = sbx.ctx("GET", "/contexts", **{"E2B-Traffic-Access-Token": token})
            assert r.status_code == 401, r.text
        # another sandbox's contexts are not this one's
        ctx = other.ctx("POST", "/contexts", {}).json()
        status, _ = sbx.refused({"code": "1", "context_id": ctx["id"]})
        assert status == 404
        assert sbx.ctx("DELETE", f"/contexts/{ctx['id']}").status_code == 404
    finally:
        other.kill()


def test_hostile_bodies(sbx):
    big = {"code": "x" * (2 << 20)}
    cases = [
        b"not json", b"[1, 2]", b'"code"', b'{"code": 1}', b'{"code": "a\\u0000b"}',
        b'{"code": "1", "code": "2"}', b'{"code": "1", "language": 5}',
        b'{"code": "1", "context_id": ["x"]}', b'{"code": "1", "env_vars": "A=b"}',
        b"{" * 100000, json.dumps(big).encode(), b'{"code": "1", "context_id": "../../x"}',
        json.dumps({"code": "1", "context_id": "\u00e9" * 5000}).encode(),
        b'{"code": "1", "context_id": "' + b"a" * 100000 + b'"}',
    ]
    for body in cases:
        status, answer = sbx.refused(body)
        assert status in (400, 404, 413), (body[:80], status, answer)
        assert answer is not None, body[:80]
        if status == 404:
            assert "../" not in json.dumps(answer) and "aaaa" not in json.dumps(answer)
    for path in ("/contexts/" + "a" * 5000, "/contexts/%ff%00", "/contexts/x/y/z",
                 "/contexts/python/restart/more", "/nothing"):
        r = requests.delete(sbx.srv.url + path, headers=sbx.headers(), timeout=30)
        assert r.status_code in (404, 405) and r.json()["code"] in (404, 405), (path, r.text)
    r = requests.get(sbx.srv.url + "/execute", headers=sbx.headers(), timeout=30)
    assert r.status_code == 405
    # unknown keys are ignored, as E2B's server does; the sandbox still works
    assert sbx.run("6 * 7", extra={"a": [1]}, request_timeout=5).text == "42"


def test_a_client_that_hangs_up_interrupts_the_execution(sbx):
    st = sbx.stream({"code": "import time\nprint('in', flush=True)\ntime.sleep(600)"})
    Execution.wait_for_stdout(iter(st), "in\n")
    st.close()
    # the session is free again once the interrupt lands (no timing: the
    # next execution retries while busy)
    def execution():
        st = sbx.stream({"code": "'free'"})
        if st.status == 409:
            st.body()
            st.close()
        return st
    st = poll(execution, lambda st: st.status != 409, 60)
    assert st.status == 200
    assert Execution(list(st)).text == "free"
    st.close()
