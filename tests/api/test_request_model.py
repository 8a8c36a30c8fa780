"""One request model behind every front end (src/exec/request.h): the same
request gets the same answer, with the same words, from `petri run`, the
HTTP API (sessions and one-shots) and MCP, under the same configuration
file."""
import subprocess

import pytest
import requests

from apihelp import PETRI

CONFIG = ("[limits]\nmemory_mb = 256\n[max_limits]\nmemory_mb = 512\ntimeout_s = 60\n"
          "[sessions]\nwarm = false\n")


def run_cli(config_path, *flags, env=None):
    return subprocess.run([PETRI, "run", "--config", str(config_path), *flags, "-c", "print(1)"],
                          capture_output=True, text=True, timeout=120, env=env)


class Mcp:
    HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def __init__(self, url):
        self.url = url + "/mcp"
        r = requests.post(self.url, headers=self.HEADERS, timeout=60, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "test", "version": "1"}}})
        assert r.status_code == 200, r.text
        self.headers = {**self.HEADERS, "Mcp-Session-Id": r.headers["Mcp-Session-Id"]}

    def execute(self, **args):
        r = requests.post(self.url, headers=self.headers, timeout=120, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute", "arguments": args}})
        assert r.status_code == 200, r.text
        return r.json()["result"]

    def close(self):
        requests.delete(self.url, headers=self.headers, timeout=60)


def text_of(result):
    return "\n".join(c.get("text", "") for c in result["content"])


@pytest.fixture
def srv(make_server):
    return make_server(CONFIG)


@pytest.mark.parametrize("flag,value,field", [
    ("--memory", "16", "memory_mb"),      # below the minimum
    ("--memory", "1024", "memory_mb"),    # above this configuration's maximum
    ("--pids", "4", "pids"),
    ("--memory", "64.5", "memory_mb"),    # not an integer
    ("--timeout", "61", "timeout_s"),
    ("--cpus", "0", "cpu"),
])
def test_limits_same_answer_from_cli_and_http(srv, flag, value, field):
    num = float(value)
    num = int(num) if num == int(num) else num
    api = srv.api()
    as_session = api.post("/v1/sessions", {"limits": {field: num}})
    as_oneshot = api.post("/v1/execute", {"code": "1", "limits": {field: num}})
    cli = run_cli(srv.config_path, flag, value)
    assert as_session.status_code == 400, as_session.text
    assert as_oneshot.status_code == 400, as_oneshot.text
    message = as_session.json()["error"]["message"]
    assert f"'limits.{field}'" in message
    assert as_oneshot.json()["error"]["message"] == message
    assert cli.returncode == 2, cli.stderr
    assert message in cli.stderr, (message, cli.stderr)


def test_limits_within_the_configuration_work_everywhere(srv):
    api = srv.api()
    r = api.post("/v1/execute", {"code": "print(7)", "limits": {"memory_mb": 512}})
    assert r.status_code == 200 and r.json()["stdout"] == "7\n", r.text
    cli = run_cli(srv.config_path, "--memory", "512")
    assert cli.returncode == 0 and cli.stdout == "1\n", cli.stderr


def test_execution_timeout_same_rule_for_http_and_mcp(srv):
    """A timeout above the server's maximum is refused with one message;
    one above a session's own limit is refused for that session."""
    api = srv.api()
    sid = api.session()
    http = api.post(f"/v1/sessions/{sid}/execute", {"code": "1", "timeout_s": 61})
    assert http.status_code == 400
    message = http.json()["error"]["message"]
    assert "'timeout_s' must be a number from 0.1 to 30" in message   # the session's limit
    short = api.session(limits={"timeout_s": 5})
    r = api.post(f"/v1/sessions/{short}/execute", {"code": "1", "timeout_s": 6})
    assert "from 0.1 to 5 " in r.json()["error"]["message"], r.text

    mcp = Mcp(srv.url)
    try:
        res = mcp.execute(code="1", timeout_s=61)
        assert res["isError"] is True
        # An MCP sandbox's limit is the configuration's maximum (60 here).
        assert "'timeout_s' must be a number from 0.1 to 60" in text_of(res), text_of(res)
        res = mcp.execute(code="print(3)", timeout_s=60)
        assert res["isError"] is False and "3" in text_of(res), text_of(res)
    finally:
        mcp.close()


def test_env_same_rule_for_http_and_mcp(srv):
    api = srv.api()
    sid = api.session()
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "1", "env": {"PATH": "/evil"}})
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    mcp = Mcp(srv.url)
    try:
        res = mcp.execute(code="1", env={"PATH": "/evil"})
        assert res["isError"] is True and message in text_of(res), text_of(res)
        # And per-call variables reach the code, for this call only.
        res = mcp.execute(code="import os; print(os.environ.get('TOKEN'))", env={"TOKEN": "t1"})
        assert "t1" in text_of(res), text_of(res)
        res = mcp.execute(code="import os; print(os.environ.get('TOKEN'))")
        assert "None" in text_of(res), text_of(res)
    finally:
        mcp.close()


def test_petri_run_reads_the_default_configuration(tmp_path):
    """Without --config, petri run reads the file PETRI_CONFIG names (the
    default path's override), so its limits are the operator's."""
    import os
    conf = tmp_path / "petri.ini"
    conf.write_text("[max_limits]\nmemory_mb = 100\n[limits]\nmemory_mb = 64\n")
    env = {**os.environ, "PETRI_CONFIG": str(conf)}
    r = subprocess.run([PETRI, "run", "--memory", "200", "-c", "1"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 2 and "from 32 to 100 MiB" in r.stderr, r.stderr
    # The default memory limit is the file's: 64 MiB, which 100 MiB exceeds.
    r = subprocess.run([PETRI, "run", "--json", "-c", "b = bytearray(100 << 20)"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert '"status":"oom"' in r.stdout, (r.stdout, r.stderr)
    conf.write_text("[limits]\nmemory_mb = 8\n")
    r = subprocess.run([PETRI, "run", "-c", "1"], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 2 and "memory_mb" in r.stderr, r.stderr


def test_stdin_same_rule_for_http_mcp_and_cli(srv, tmp_path):
    api = srv.api()
    r = api.post("/v1/execute", {"code": "1", "stdin": "x" * ((1 << 20) + 1)})
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    mcp = Mcp(srv.url)
    try:
        res = mcp.execute(code="1", stdin="x" * ((1 << 20) + 1))
        assert res["isError"] is True and message in text_of(res), text_of(res)
        res = mcp.execute(code="print(input()[::-1])", stdin="olleh")
        assert res["isError"] is False and "hello" in text_of(res), text_of(res)
    finally:
        mcp.close()
    data = tmp_path / "in.txt"
    data.write_text("from a file\n")
    cli = subprocess.run([PETRI, "run", "--config", str(srv.config_path), "--stdin", str(data),
                          "-c", "print(input().upper())"], capture_output=True, text=True,
                         timeout=120)
    assert cli.returncode == 0 and cli.stdout == "FROM A FILE\n", cli.stderr
    cli = subprocess.run([PETRI, "run", "--config", str(srv.config_path), "--stdin", "-",
                          "-l", "bash", "-c", "cat"], input="piped", capture_output=True,
                         text=True, timeout=120)
    assert cli.returncode == 0 and cli.stdout == "piped", cli.stderr
