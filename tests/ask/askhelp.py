"""Helpers for the tests of `petri ask` (fixtures in conftest.py).

FakeModel is a Chat Completions endpoint in this process
(http.server): each request POSTed to /v1/chat/completions is recorded
(headers and JSON body) and answered by the next step of a script: a
callable taking the request body and returning either a dict (a 200 JSON
answer) or a (status, headers, body) tuple.  The test then checks the
exact requests petri sent, and what petri printed.
"""
import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PETRI = os.environ.get("PETRI_BIN") or os.path.join(ROOT, "build", "petri")


class FakeModel:
    def __init__(self):
        self.script = []
        self.requests = []          # (path, headers dict, body dict, monotonic time)
        self.lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                with model.lock:
                    model.requests.append((self.path, dict(self.headers), body, time.monotonic()))
                    step = model.script.pop(0) if model.script else None
                if self.path != "/v1/chat/completions":
                    self._send(404, {}, b'{"error": {"message": "no such path"}}')
                    return
                if step is None:
                    self._send(500, {}, b'{"error": {"message": "the script is over"}}')
                    return
                out = step(body)
                if isinstance(out, tuple):
                    status, headers, data = out
                    self._send(status, headers, data if isinstance(data, bytes) else
                               json.dumps(data).encode())
                else:
                    self._send(200, {}, json.dumps(out).encode())

            def _send(self, status, headers, data):
                self.send_response(status)
                self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def bodies(self):
        return [r[2] for r in self.requests]


def reply_text(text, **extra):
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}, **extra}


def reply_tools(*calls, content=None):
    """calls: (id, name, arguments) with arguments a dict (sent as JSON text)
    or a str (sent as is)."""
    return {"id": "chatcmpl-2", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": content, "tool_calls": [
                             {"id": cid, "type": "function",
                              "function": {"name": name, "arguments": args if isinstance(
                                  args, str) else json.dumps(args)}}
                             for cid, name, args in calls]}}],
            "usage": {"prompt_tokens": 200, "completion_tokens": 30}}


def run_ask(args, env=None, timeout=180, input=None):
    full = {k: v for k, v in os.environ.items()
            if k not in ("PETRI_API_BASE", "PETRI_MODEL", "PETRI_API_KEY", "OPENAI_API_KEY")}
    full.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([PETRI, "ask", *args], capture_output=True, timeout=timeout, env=full,
                       input=input)
    p.wall = time.monotonic() - t0
    p.out = p.stdout.decode("utf-8")
    p.err = p.stderr.decode("utf-8")
    return p
