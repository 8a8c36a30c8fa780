"""One table of languages behind every front end (src/exec/languages.c):
the same unknown language gets the same message from `petri run -l`, the
HTTP API and MCP, and an alias runs the language it names everywhere."""
import subprocess

import requests

from mcphelp import PETRI, text_of

# What every front end says, whatever else it wraps around the message.
UNKNOWN = {
    "ruby": "unknown language 'ruby': must be python, bash, c, javascript, typescript, r or java",
    # A value with a quote, a newline or too long is not echoed back.
    "x'\nrm -rf /": "unknown language: must be python, bash, c, javascript, typescript, r or java",
    "p" * 200: "unknown language: must be python, bash, c, javascript, typescript, r or java",
}


def petri_run(*args):
    return subprocess.run([PETRI, "run", *args], capture_output=True, timeout=120, text=True)


def http_messages(url, lang):
    """The error messages of the three HTTP requests that take a language."""
    sid = requests.post(f"{url}/v1/sessions", json={}, timeout=60).json()["id"]
    try:
        out = []
        for path, body in [("/v1/sessions", {"language": lang}),
                           ("/v1/execute", {"code": "1", "language": lang}),
                           (f"/v1/sessions/{sid}/execute", {"code": "1", "language": lang})]:
            r = requests.post(url + path, json=body, timeout=60)
            assert r.status_code == 400, (path, r.text)
            assert r.json()["error"]["code"] == "invalid_request"
            out.append(r.json()["error"]["message"])
        return out
    finally:
        requests.delete(f"{url}/v1/sessions/{sid}", timeout=60)


def test_an_unknown_language_gets_one_message_everywhere(mcp, http_server):
    for lang, message in UNKNOWN.items():
        cli = petri_run("-l", lang, "-c", "1")
        assert cli.returncode == 2 and message in cli.stderr, (lang, cli.stderr)
        for got in http_messages(http_server.url, lang):
            assert got == message, (lang, got)
        res = mcp.execute("1", language=lang)
        assert res["isError"] is True
        assert text_of(res) == f"invalid arguments for execute: {message}", lang


def test_a_language_that_is_not_a_string(mcp, http_server):
    message = "'language' must be a string: python, bash, c, javascript, typescript, r or java"
    r = requests.post(http_server.url + "/v1/execute", json={"code": "1", "language": 3},
                      timeout=60)
    assert r.status_code == 400 and r.json()["error"]["message"] == message
    res = mcp.execute("1", language=3)
    assert res["isError"] is True and "must be a string" in text_of(res)


BASH = "echo ${BASH_VERSION:+bash}"
PYTHON = "import sys; print(sys.implementation.name)"


def test_aliases_run_the_language_they_name(mcp, http_server):
    # petri run
    assert petri_run("-l", "sh", "-c", BASH).stdout == "bash\n"
    assert petri_run("-l", "py", "-c", PYTHON).stdout == "cpython\n"
    # HTTP: a session's language comes back as the name
    url = http_server.url
    s = requests.post(f"{url}/v1/sessions", json={"language": "sh"}, timeout=60).json()
    try:
        assert s["language"] == "bash"
        r = requests.post(f"{url}/v1/sessions/{s['id']}/execute", json={"code": BASH},
                          timeout=60).json()
        assert r["stdout"] == "bash\n", r
        r = requests.post(f"{url}/v1/sessions/{s['id']}/execute",
                          json={"code": PYTHON, "language": "python3"}, timeout=60).json()
        assert r["stdout"] == "cpython\n", r
    finally:
        requests.delete(f"{url}/v1/sessions/{s['id']}", timeout=60)
    r = requests.post(f"{url}/v1/execute", json={"code": BASH, "language": "sh"},
                      timeout=60).json()
    assert r["stdout"] == "bash\n", r
    # MCP
    res = mcp.execute(BASH, language="sh")
    assert res["isError"] is False and "bash" in text_of(res), res
    res = mcp.execute(PYTHON, language="py")
    assert res["isError"] is False and "cpython" in text_of(res), res


def test_the_operators_languages_and_wheelhouse_reach_the_model(make_mcp):
    """A model sees what this server has: an operator's language in the
    enum and running, and that pip installs from the wheelhouse."""
    from wheels import make_wheel, operator_dir
    with operator_dir("wheels") as wh:
        make_wheel(wh, "petrimcp", "1.0", {"petrimcp/__init__.py": "ANSWER = 42\n"})
        m = make_mcp(config=f"[python]\nwheelhouse = {wh}\n"
                            "[language.perl]\nfile = main.pl\nrun = perl main.pl\n")
        m.initialize()
        tools = {t["name"]: t for t in m.request("tools/list")["result"]["tools"]}
        ex = tools["execute"]
        assert "perl" in ex["inputSchema"]["properties"]["language"]["enum"]
        assert "%pip install NAME" in ex["description"], ex["description"]
        assert "--- stdout ---\n42\n" in text_of(m.execute("print 6*7", language="perl"))
        res = m.execute("%pip install petrimcp\nimport petrimcp\npetrimcp.ANSWER")
        assert res["isError"] is False and "42" in text_of(res), text_of(res)


def test_without_a_wheelhouse_the_model_is_told_pip_cannot(mcp):
    desc = {t["name"]: t for t in mcp.request("tools/list")["result"]["tools"]}["execute"]
    assert "nothing can be downloaded or pip-installed" in desc["description"]
