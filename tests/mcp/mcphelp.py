"""Helpers for the raw-protocol tests of petri's MCP server (docs/mcp.md);
the fixtures are in conftest.py.

McpProc starts `petri mcp` (stdio) and speaks newline-delimited JSON-RPC to
it byte by byte; HttpServer is harness.Daemon, `petri serve` for the
Streamable HTTP transport at /mcp.  Every petri process started here must
leave no sandbox process behind: the processes of its tree are recorded
while it runs and checked after it exits.
"""
import json
import os
import select
import subprocess
import time

import requests

from harness import PETRI, Daemon, process_tree, still_alive, wait_for

VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


def assert_no_leftovers(tree, timeout=5):
    """None of {pid: start time} runs once timeout seconds have passed."""
    wait_for(lambda: not still_alive(tree), timeout)
    left = still_alive(tree)
    assert not left, f"processes left behind: {left}"


class McpProc:
    """`petri mcp` with pipes; messages are dicts, or raw bytes when given."""

    def __init__(self, args=(), config=None, tmp_path=None):
        argv = [PETRI, "mcp", *args]
        if config is not None:
            path = tmp_path / "petri.ini"
            path.write_text(config)
            argv += ["--config", str(path)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.buf = b""
        self.seen = {}
        self.next_id = 1000

    def send(self, msg):
        data = msg if isinstance(msg, bytes) else json.dumps(msg).encode() + b"\n"
        self.proc.stdin.write(data)
        self.proc.stdin.flush()
        self.seen |= process_tree(self.proc.pid)

    def recv(self, timeout=60):
        """The next message; every line on stdout must be one."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no message within {timeout} s")
            r, _, _ = select.select([self.proc.stdout], [], [], min(left, 0.2))
            self.seen |= process_tree(self.proc.pid)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise EOFError(f"petri mcp closed stdout; buffered {self.buf[:200]!r}")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def nothing_within(self, seconds):
        try:
            msg = self.recv(timeout=seconds)
        except TimeoutError:
            return True
        raise AssertionError(f"unexpected message {msg}")

    def request(self, method, params=None, timeout=60):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        resp = self.recv(timeout)
        assert resp.get("id") == self.next_id, resp
        return resp

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def initialize(self, version="2025-06-18"):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "pytest", "version": "1"}})
        self.notify("notifications/initialized")
        return r

    def call(self, name, arguments=None, timeout=90):
        r = self.request("tools/call", {"name": name, "arguments": arguments or {}}, timeout)
        assert "result" in r, r
        return r["result"]

    def execute(self, code, **kw):
        return self.call("execute", {"code": code, **kw})

    def close(self, timeout=30):
        """Close stdin; returns (exit status, stderr)."""
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        err = self.proc.stderr.read().decode("utf-8", "replace")
        self.proc.stdout.close()
        self.proc.stderr.close()
        assert_no_leftovers(self.seen)
        return code, err


def text_of(result):
    return "\n".join(c["text"] for c in result["content"] if c["type"] == "text")


class HttpServer(Daemon):
    def __init__(self, tmp_path, config=""):
        super().__init__(tmp_path, config, name="mcp-serve")
        self.mcp = self.url + "/mcp"

    def stop(self):
        """SIGTERM; (exit code, stderr).  Nothing of its tree may outlive it."""
        code = super().stop(30)
        assert not self.leaked, f"processes left behind: {self.leaked}"
        assert not self.leaked_cgroups, f"cgroups left behind: {self.leaked_cgroups}"
        return code, self.stderr_text()


JSON_HEADERS = {"Content-Type": "application/json",
                "Accept": "application/json, text/event-stream"}


def http_init(url, version="2025-06-18", headers=None):
    """initialize over HTTP: (session id, response)."""
    r = requests.post(url, headers={**JSON_HEADERS, **(headers or {})}, timeout=60, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "pytest", "version": "1"}}})
    return r.headers.get("Mcp-Session-Id"), r


def http_post(url, sid, msg, version=None, headers=None, timeout=90):
    h = dict(JSON_HEADERS)
    if sid:
        h["Mcp-Session-Id"] = sid
    if version:
        h["MCP-Protocol-Version"] = version
    h.update(headers or {})
    data = msg if isinstance(msg, (bytes, str)) else json.dumps(msg)
    return requests.post(url, headers=h, data=data, timeout=timeout)
