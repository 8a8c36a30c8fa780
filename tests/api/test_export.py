"""The record's export (docs/record.md): GET /v1/sessions/{id}/export and
GET /v1/executions/export over HTTP, and `petri record export` against the
record file the daemon writes ([server] record = PATH): a Jupyter notebook
that nbformat validates, with the code and its outputs; an HTML page that
shows hostile code and output as text, HTML results only in sandboxed
iframes, and has no script at all; JSON Lines that match the listing; the
one-shot runs by time; every entry of a long session; clear errors."""
import base64
import json
import re
import subprocess

import nbformat
import pytest

from apihelp import PETRI, Server

# Its exports span the whole record: a daemon nobody else has written to.
OWN_SERVER = True

HOSTILE = "</script><img src=x onerror=alert(1)>"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

CODES = [
    "print('hello')",
    "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
    "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})",
    "import sys\nsys.stderr.write('careful\\n')\n1/0",
    f"print({HOSTILE!r})",
    "class Page:\n    def _repr_html_(self):\n"
    "        return '<script>alert(2)</script><b>bold</b>'\nPage()",
]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = tmp_path_factory.mktemp("export")
    record = d / "record.sqlite"
    srv = Server(d, f"[server]\nrecord = {record}\n", light=True)
    srv.record_config = srv.config_path
    yield srv
    code, err = srv.stop()
    assert code == 0, err[-3000:]
    assert not srv.leaked, f"processes of petri serve outlived it: {srv.leaked}"


@pytest.fixture(scope="module")
def api(daemon):
    return daemon.api()


@pytest.fixture(scope="module")
def sid(api):
    sid = api.session()
    for code in CODES:
        api.execute(sid, code)
    return sid


def cli(*args, config=None):
    argv = [PETRI, "record", "export", *args]
    if config:
        argv += ["--config", str(config)]
    return subprocess.run(argv, capture_output=True, timeout=120)


def export(api, sid, fmt, **params):
    r = api.get(f"/v1/sessions/{sid}/export", params={"format": fmt, **params})
    assert r.status_code == 200, r.text[:500]
    return r


def test_notebook_over_http_and_from_the_record_file(api, daemon, sid):
    r = export(api, sid, "ipynb")
    assert r.headers["Content-Type"] == "application/x-ipynb+json"
    assert r.headers["Content-Disposition"] == f'attachment; filename="petri-{sid}.ipynb"'
    nb = nbformat.reads(r.text, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4 and nb.nbformat_minor == 5
    assert nb.metadata.kernelspec.name == "python3"
    assert nb.metadata.language_info.name == "python"
    assert nb.metadata.petri.session == sid and nb.metadata.petri.executions == len(CODES)
    assert [c.source for c in nb.cells] == CODES
    assert [c.execution_count for c in nb.cells] == list(range(1, len(CODES) + 1))
    hello, chart, frame, error, hostile, page = nb.cells
    assert [(o.output_type, o.name, o.text) for o in hello.outputs] == [("stream", "stdout", "hello\n")]
    assert [o.output_type for o in chart.outputs] == ["display_data"]
    table = frame.outputs[0]
    assert table.output_type == "display_data"
    assert "<table" in table.data["text/html"] and "a" in table.data["text/plain"]
    assert [o.output_type for o in error.outputs] == ["stream", "error"]
    assert error.outputs[0].name == "stderr" and error.outputs[0].text == "careful\n"
    assert error.outputs[1].ename == "ZeroDivisionError"
    assert error.outputs[1].evalue == "division by zero"
    assert any("1/0" in line for line in error.outputs[1].traceback)
    assert hostile.outputs[0].text == HOSTILE + "\n"
    seqs = [c.metadata.petri.seq for c in nb.cells]
    assert seqs == sorted(seqs)
    for c, status in zip(nb.cells, ["ok", "ok", "ok", "error", "ok", "ok"]):
        p = c.metadata.petri
        assert p.status == status and p.language == "python" and p.session == sid
        assert p.limits["memory_mb"] >= 32 and p.duration_ms >= 0
        assert p.memory_peak_bytes >= 0 and re.fullmatch(r"\d{4}-.*Z", p.started_at)
        assert c.id == f"petri-{p.seq}"
    # The same notebook from the record file, by the command line.
    out = cli("--session", sid, "--format", "ipynb", config=daemon.record_config)
    assert out.returncode == 0, out.stderr
    assert out.stdout == r.content


def test_notebook_keeps_the_chart(api, sid):
    """The PNG itself, base64 in the notebook.  Fails while the record
    replaces images by a note of their size (record.c's stored_result)."""
    nb = nbformat.reads(export(api, sid, "ipynb").text, as_version=4)
    bundle = nb.cells[1].outputs[0].data
    assert "image/png" in bundle, bundle
    assert base64.b64decode(bundle["image/png"], validate=True).startswith(PNG_MAGIC)


def test_html_shows_everything_as_text(api, daemon, sid):
    r = export(api, sid, "html")
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.headers["Content-Disposition"] == f'attachment; filename="petri-{sid}.html"'
    policy = r.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "sandbox" in policy and "script-src" not in policy
    page = r.text
    assert "<script" not in page.lower()
    assert "<img src=x" not in page and "onerror=alert(1)>" not in page
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page     # code and stdout
    assert page.count("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;") >= 2
    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'' in page
    # Every tag of the page is the page's own: no table, no bold, no
    # external resource; HTML results only as a sandboxed iframe's srcdoc.
    tags = set(re.findall(r"<([a-zA-Z0-9]+)", page))
    assert tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "b",
                    "section", "span", "pre", "code", "div", "iframe", "img", "details",
                    "summary"}, tags
    assert "<table" not in page and "<b>bold" not in page
    frames = re.findall(r"<iframe[^>]*>", page)
    assert len(frames) == 2, frames                      # the DataFrame and Page()
    for f in frames:
        assert 'sandbox=""' in f and "allow-" not in f and "srcdoc=" in f
    assert "&lt;script&gt;alert(2)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;" in page
    for src in re.findall(r'src="([^"]*)"', page):
        assert src.startswith("data:image/"), src
    assert "ZeroDivisionError" in page and "careful" in page
    assert "memory_mb" in page and "ms wall" in page
    out = cli("--session", sid, "--format", "html", config=daemon.record_config)
    assert out.returncode == 0 and out.stdout == r.content, out.stderr


def test_jsonl_matches_the_listing(api, daemon, sid):
    r = export(api, sid, "jsonl")
    assert r.headers["Content-Type"] == "application/jsonl"
    lines = r.text.splitlines()
    listing = api.get(f"/v1/sessions/{sid}/executions").json()["executions"]
    assert [json.loads(line) for line in lines] == listing
    out = cli("--session", sid, "--format", "jsonl", config=daemon.record_config)
    assert out.returncode == 0 and out.stdout == r.content, out.stderr


def test_a_long_session_exports_whole(api, daemon):
    sid = api.session()
    n = 21                                   # pages of 8 and a rest
    for i in range(n):
        api.execute(sid, f"print({i})")
    lines = export(api, sid, "jsonl").text.splitlines()
    assert [json.loads(line)["result"]["stdout"] for line in lines] == [f"{i}\n" for i in range(n)]
    out = cli("--session", sid, "--format", "ipynb", config=daemon.record_config)
    assert out.returncode == 0, out.stderr
    nb = nbformat.reads(out.stdout.decode(), as_version=4)
    nbformat.validate(nb)
    assert [c.source for c in nb.cells] == [f"print({i})" for i in range(n)]


def test_an_ended_session_exports_and_one_with_nothing_answers_as_the_listing(api):
    sid = api.session()
    api.execute(sid, "x = 41")
    assert api.delete(f"/v1/sessions/{sid}").status_code == 204
    assert json.loads(export(api, sid, "jsonl").text)["code"] == "x = 41"
    empty = api.session()
    nb = nbformat.reads(export(api, empty, "ipynb").text, as_version=4)    # live, nothing yet
    nbformat.validate(nb)
    assert nb.cells == []
    assert api.delete(f"/v1/sessions/{empty}").status_code == 204
    r = api.get(f"/v1/sessions/{empty}/export", params={"format": "ipynb"})
    listing = api.get(f"/v1/sessions/{empty}/executions")
    assert r.status_code == listing.status_code == 404, r.text     # deleted: no tombstone
    assert r.json() == listing.json()


def oneshot(api, code):
    r = api.post("/v1/execute", {"code": code})
    assert r.status_code == 200, r.text


def test_oneshots_by_time(api, daemon):
    oneshot(api, "print('first one-shot')")
    oneshot(api, "print('second one-shot')")
    mine = [e for e in api.get("/v1/executions", params={"session": "none"}).json()["executions"]
            if "one-shot" in e["code"]]
    second, first = mine[:2]
    assert second["seq"] > first["seq"]

    def codes(text):
        return [json.loads(line)["code"] for line in text.splitlines()]

    r = api.get("/v1/executions/export", params={"format": "jsonl", "since": second["started_at"]})
    assert r.status_code == 200 and r.headers["Content-Disposition"].endswith('"petri-oneshots.jsonl"')
    assert codes(r.text) == [second["code"]]
    r = api.get("/v1/executions/export", params={"format": "jsonl", "until": second["started_at"]})
    assert second["code"] not in codes(r.text) and first["code"] in codes(r.text)
    everything = api.get("/v1/executions/export", params={"format": "ipynb", "since": "2000-01-01"})
    nb = nbformat.reads(everything.text, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.petri.scope == "oneshots" and nb.metadata.petri.session is None
    assert [c.source for c in nb.cells][-2:] == [first["code"], second["code"]]
    assert all(c.metadata.petri.session is None for c in nb.cells)
    nothing = api.get("/v1/executions/export", params={"format": "ipynb", "until": "2000-01-01"})
    nbformat.validate(nbformat.reads(nothing.text, as_version=4))
    # The command line, the same.
    out = cli("--oneshots", "--since", second["started_at"], "--format", "jsonl",
              config=daemon.record_config)
    assert out.returncode == 0 and codes(out.stdout.decode()) == [second["code"]], out.stderr
    out = cli("--oneshots", "--since", "2000-01-01", "--until", "2000-01-02", "--format", "html",
              config=daemon.record_config)
    assert out.returncode == 0 and b"0 executions." in out.stdout, out.stderr


def test_http_errors(api, sid):
    for params in ({}, {"format": "pdf"}, {"format": "ipynb", "since": "yesterday"},
                   {"format": "ipynb", "until": "2026-02-30"}):
        r = api.get("/v1/executions/export", params=params)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", params
    r = api.get(f"/v1/sessions/{sid}/export", params={"format": "html", "since": "2020-01-01"})
    assert r.status_code == 400 and "one-shot" in r.json()["error"]["message"]
    r = api.get(f"/v1/sessions/{sid}/export")
    assert r.status_code == 400 and "format" in r.json()["error"]["message"]
    r = api.get("/v1/sessions/ses_00000000000000000000000000000000/export", params={"format": "html"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    r = api.post(f"/v1/sessions/{sid}/export", {})
    assert r.status_code == 405 and r.headers["Allow"] == "GET"


def test_keys_apply(make_server, tmp_path):
    srv = make_server("[server]\napi_keys = k1\n")
    assert srv.api().get("/v1/executions/export", params={"format": "jsonl"}).status_code == 401
    r = srv.api("k1").get("/v1/executions/export", params={"format": "jsonl"})
    assert r.status_code == 200 and r.text == ""
    r = srv.api("k1").get("/v1/executions/export", params={"format": "html"},
                          headers={"Origin": "http://evil.example"})
    assert r.status_code == 403


def test_cli_errors(daemon, sid, tmp_path):
    cfg = daemon.record_config
    for args in ([], ["--session", sid], ["--session", sid, "--oneshots", "--format", "html"],
                 ["--session", sid, "--format", "pdf"], ["--oneshots", "--since", "soon", "--format", "html"],
                 ["--session", sid, "--until", "2026-01-01", "--format", "html"],
                 ["--session", sid, "--format", "html", "extra"], ["--bogus"]):
        out = cli(*args, config=cfg)
        assert out.returncode == 2 and b"usage: petri record export" in out.stderr, (args, out.stderr)
        assert out.stdout == b""
    out = cli("--session", "ses_nobody", "--format", "ipynb", config=cfg)
    assert out.returncode == 1 and b"no execution of session 'ses_nobody'" in out.stderr
    assert out.stdout == b""
    missing = tmp_path / "missing.ini"
    missing.write_text(f"[server]\nrecord = {tmp_path / 'gone.sqlite'}\n")
    out = cli("--oneshots", "--format", "jsonl", config=missing)
    assert out.returncode == 1 and b"gone.sqlite" in out.stderr and b"No such file" in out.stderr
    assert not (tmp_path / "gone.sqlite").exists()
    memory = tmp_path / "memory.ini"
    memory.write_text("[server]\nrecord =\n")
    out = cli("--oneshots", "--format", "jsonl", config=memory)
    assert out.returncode == 1 and b"in memory" in out.stderr
    help_ = subprocess.run([PETRI, "record", "--help"], capture_output=True, timeout=30)
    assert help_.returncode == 0 and b"export" in help_.stdout
    top = subprocess.run([PETRI, "--help"], capture_output=True, timeout=30)
    assert b"record" in top.stdout
