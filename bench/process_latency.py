#!/usr/bin/python3
"""How soon a process's output reaches the client (issue 34's latency targets).

  first byte   E2B's envd process.Process/Start (Connect, server streaming,
               JSON) of `/bin/bash -l -c "echo x"`, as the SDK's
               commands.run() sends it: from the first byte of the request
               sent to the envelope with the first stdout byte read off the
               socket, the stream read as it arrives (a socket of our own, the
               chunked body and the envelopes parsed incrementally).  Also
               when the start event (the pid) came and when the stream ended.
               Target: p50 <= 10 ms.  Beside it, Start of /bin/echo x
               itself (no shell: what bash's start costs).
  native       the same command through the native API, for comparison:
               POST /v1/sessions/{id}/commands {"command": "echo x",
               "wait_s": 5} (answered when the command has ended, its stdout
               in the answer), and POST with wait_s 0 then
               GET .../commands/{pid}?wait_s=5 (answered at its first output)
               when the POST's answer had none yet.
  pty echo     E2B's pty.create(): Process.Start of `/bin/bash -i -l` with
               "pty": {"size": ...}; once its prompt is drawn, one key at a
               time with process.Process/SendInput ({"pty": base64}) on a
               second connection, from the request's first byte sent to the
               key's echo read on the start stream (and, apart, to
               SendInput's own answer).  Target: p50 <= 10 ms.
  floor        what petri does not add: GET /healthz on a kept-alive
               connection (the HTTP round trip of this client and the
               daemon), and bash -c 'echo x' spawned on the host, to its first
               stdout byte (fork, exec, bash's start).

It starts a `petri serve` of its own: 127.0.0.1:0, an API key shaped as the
SDKs want, a uid range of its own ([sandbox] uid_base, uid_count), a state
directory in a temporary directory it removes; one E2B sandbox (POST
/sandboxes), whose id is also its native session's.  SIGTERM at the end.
Every series runs after warm-ups that are not counted; the load average is
printed beside the numbers (a busy 2-core machine moves them by milliseconds).

    /usr/bin/python3 bench/process_latency.py --petri build/petri [--runs 50] [--json OUT]
"""
import argparse
import base64
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET_MS = 10.0
ENVD_PORT = "49983"
WARMUPS = 3


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def summary(values):
    return {"n": len(values), "p50": round(statistics.median(values), 2),
            "p90": round(pct(values, 90), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


# ---- a small HTTP/1.1 client that reads as bytes arrive -----------------------

class Conn:
    """One kept-alive connection (TCP_NODELAY).  request() sends a whole
    request in one write; the answer is read with head() then body pieces,
    each piece as soon as it is off the socket."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = f"{host}:{port}"
        self.buf = b""

    def close(self):
        self.sock.close()

    def request(self, method, path, headers, body=b""):
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}",
                 f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        data = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        t0 = time.perf_counter()
        self.sock.sendall(data)
        return t0

    def fill(self, timeout=None):
        """One recv into the buffer; False at end of file."""
        if timeout is not None:
            r, _, _ = select.select([self.sock], [], [], timeout)
            if not r:
                raise TimeoutError("no answer")
        d = self.sock.recv(65536)
        if not d:
            return False
        self.buf += d
        return True

    def pending(self):
        return bool(self.buf)

    def head(self):
        while b"\r\n\r\n" not in self.buf:
            if not self.fill(60):
                raise EOFError("the connection closed before an answer")
        raw, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        hdrs = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        return status, hdrs, Body(self, hdrs)


class Body:
    """An answer's body, chunked or of a length, taken out of the
    connection's buffer as it comes: take() gives what has arrived (b"" when
    nothing has yet), done says the body is whole."""

    def __init__(self, conn, hdrs):
        self.c = conn
        self.chunked = "chunked" in hdrs.get("transfer-encoding", "").lower()
        self.left = int(hdrs.get("content-length", "0")) if not self.chunked else 0
        self.done = not self.chunked and self.left == 0
        self.in_chunk = 0           # bytes of the current chunk still to take

    def take(self):
        out = b""
        c = self.c
        while not self.done and c.buf:
            if not self.chunked:
                piece, c.buf = c.buf[:self.left], c.buf[self.left:]
                self.left -= len(piece)
                out += piece
                self.done = self.left == 0
                continue
            if self.in_chunk < 0:           # the CRLF after a chunk's data
                if len(c.buf) < 2:
                    break
                c.buf = c.buf[2:]
                self.in_chunk = 0
                continue
            if self.in_chunk > 0:
                piece, c.buf = c.buf[:self.in_chunk], c.buf[self.in_chunk:]
                self.in_chunk -= len(piece)
                out += piece
                if self.in_chunk == 0:
                    self.in_chunk = -1
                continue
            if b"\r\n" not in c.buf:
                break
            line, c.buf = c.buf.split(b"\r\n", 1)
            size = int(line.split(b";")[0], 16)
            if size == 0:               # the last chunk; no trailers are sent
                if len(c.buf) < 2:
                    c.buf = line + b"\r\n" + c.buf  # wait for the final CRLF
                    break
                c.buf = c.buf[2:]
                self.done = True
            else:
                self.in_chunk = size
        return out

    def read_all(self, timeout=60):
        out = self.take()
        while not self.done:
            if not self.c.fill(timeout):
                raise EOFError("the connection closed in a body")
            out += self.take()
        return out


class Envelopes:
    """Connect's envelopes (a flag byte, a 32-bit big-endian length, the
    JSON) out of a stream's body, as they complete."""

    def __init__(self):
        self.buf = b""

    def feed(self, data):
        self.buf += data
        out = []
        while len(self.buf) >= 5:
            flags, n = struct.unpack(">BI", self.buf[:5])
            if len(self.buf) < 5 + n:
                break
            out.append((flags, json.loads(self.buf[5:5 + n])))
            self.buf = self.buf[5 + n:]
        return out


def envelope(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">BI", 0, len(data)) + data


# ---- the daemon -------------------------------------------------------------

class Petri:
    def __init__(self, binary, tmp, uid_base, uid_count):
        self.key = "e2b_" + secrets.token_hex(16)
        cfg = os.path.join(tmp, "petri.ini")
        with open(cfg, "w") as f:
            f.write(f"[server]\napi_keys = {self.key}\n"
                    f"[sandbox]\nuid_base = {uid_base}\nuid_count = {uid_count}\n")
        self.log_path = os.path.join(tmp, "petri.log")
        out_path = os.path.join(tmp, "petri.out")
        env = {**os.environ, "STATE_DIRECTORY": os.path.join(tmp, "state")}
        with open(out_path, "wb") as out, open(self.log_path, "wb") as err:
            self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0",
                                          "--config", cfg], stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, env=env,
                                         start_new_session=True)
        self.out_path = out_path

    def wait_ready(self):
        """Its address, then its warm template settled (or 120 s)."""
        out_path = self.out_path
        self.url = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            with open(out_path) as f:
                m = re.search(r"listening on (http://\S+)", f.read())
            if m:
                self.url = m.group(1)
                break
            time.sleep(0.1)
        if not self.url:
            raise RuntimeError(f"petri serve did not start: {self.log()[-3000:]}")
        m = re.match(r"http://([^:/]+):(\d+)", self.url)
        self.host, self.port = m.group(1), int(m.group(2))
        self.warm = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5) as r:
                    self.warm = json.load(r).get("warm")
            except (OSError, ValueError):
                pass
            if self.warm in ("ready", "off", "failed"):
                break
            time.sleep(0.2)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def conn(self):
        return Conn(self.host, self.port)


def json_call(conn, method, path, headers, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    h = dict(headers)
    if body is not None:
        h["Content-Type"] = "application/json"
    conn.request(method, path, h, data)
    status, _, b = conn.head()
    raw = b.read_all()
    return status, json.loads(raw) if raw else None


class Sandbox:
    """An E2B sandbox: its id, its envd headers."""

    def __init__(self, petri, conn):
        status, j = json_call(conn, "POST", "/sandboxes", {"X-API-KEY": petri.key},
                              {"templateID": "base", "timeout": 600})
        if status != 201:
            raise RuntimeError(f"POST /sandboxes: {status} {j}")
        self.id, self.token = j["sandboxID"], j["envdAccessToken"]
        self.envd = {"E2b-Sandbox-Id": self.id, "E2b-Sandbox-Port": ENVD_PORT,
                     "X-Access-Token": self.token}

    def kill(self, petri, conn):
        json_call(conn, "DELETE", f"/sandboxes/{self.id}", {"X-API-KEY": petri.key})


# ---- the measurements -------------------------------------------------------

def start_stream(conn, sbx, body, timeout_ms=60000):
    """Send a Process.Start; (the time it was sent, the body reader)."""
    h = {**sbx.envd, "Content-Type": "application/connect+json",
         "Connect-Protocol-Version": "1", "Connect-Timeout-Ms": str(timeout_ms)}
    t0 = conn.request("POST", "/process.Process/Start", h, envelope(body))
    status, hdrs, b = conn.head()
    if status != 200 or not hdrs.get("content-type", "").startswith("application/connect+json"):
        raise RuntimeError(f"Process.Start: {status} {b.read_all()!r}")
    return t0, b


def events(conn, body, env, timeout=30):
    """The envelopes that arrive next (waiting for at least one), each with
    the time its last byte was read."""
    while True:
        got = env.feed(body.take())
        if got:
            now = time.perf_counter()
            return [(now, f, e) for f, e in got]
        if body.done:
            return []
        if not conn.fill(timeout):
            raise EOFError("the stream's connection closed")


SDK_ECHO = {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo x"], "envs": {}},
            "stdin": False}
BARE_ECHO = {"process": {"cmd": "/bin/echo", "args": ["x"], "envs": {}}, "stdin": False}


def e2b_first_byte(conn, sbx, req=SDK_ECHO):
    """One commands.run('echo x') (or another Start req that prints x):
    ms to the start event, to the first stdout byte, to the stream's end."""
    t0, body = start_stream(conn, sbx, req)
    env = Envelopes()
    t_start = t_first = None
    stdout = b""
    end = None
    while True:
        evs = events(conn, body, env)
        if not evs:
            break
        for t, flags, e in evs:
            if flags & 0x02:
                if e.get("error"):
                    raise RuntimeError(f"the stream ended with {e['error']}")
                continue
            ev = e["event"]
            if "start" in ev and t_start is None:
                t_start = t
            elif "data" in ev and "stdout" in ev["data"]:
                stdout += base64.b64decode(ev["data"]["stdout"])
                if t_first is None:
                    t_first = t
            elif "end" in ev:
                end = ev["end"]
    t_done = time.perf_counter()
    if stdout != b"x\n" or not end or end.get("exitCode", 0) != 0:
        raise RuntimeError(f"echo x gave {stdout!r}, end {end}")
    return {"start_ms": (t_start - t0) * 1000, "first_byte_ms": (t_first - t0) * 1000,
            "end_ms": (t_done - t0) * 1000}


def native_wait(conn, sbx, key):
    """POST .../commands {"command": "echo x", "wait_s": 5}: ms to the
    answer, which has the stdout of the ended command."""
    h = {"Authorization": f"Bearer {key}"}
    t0 = time.perf_counter()
    status, j = json_call(conn, "POST", f"/v1/sessions/{sbx.id}/commands", h,
                          {"command": "echo x", "wait_s": 5})
    t1 = time.perf_counter()
    if status != 201 or j.get("stdout") != "x\n":
        raise RuntimeError(f"POST commands: {status} {j}")
    return {"answer_ms": (t1 - t0) * 1000}


def native_poll(conn, sbx, key):
    """POST .../commands with wait_s 0, then (when it had no output yet)
    GET .../commands/{pid}?wait_s=5: ms to the first answer holding x."""
    h = {"Authorization": f"Bearer {key}"}
    t0 = time.perf_counter()
    status, j = json_call(conn, "POST", f"/v1/sessions/{sbx.id}/commands", h,
                          {"command": "echo x"})
    t_post = time.perf_counter()
    if status != 201:
        raise RuntimeError(f"POST commands: {status} {j}")
    gets = 0
    while not j.get("stdout"):
        gets += 1
        status, j = json_call(conn, "GET", f"/v1/sessions/{sbx.id}/commands/{j['pid']}"
                              "?wait_s=5&wait_for=output", h)
        if status != 200:
            raise RuntimeError(f"GET command: {status} {j}")
    t1 = time.perf_counter()
    if j["stdout"] != "x\n":
        raise RuntimeError(f"echo x gave {j['stdout']!r}")
    return {"post_ms": (t_post - t0) * 1000, "first_byte_ms": (t1 - t0) * 1000, "gets": gets}


def drain(conn, body, env, quiet_s):
    """Read the stream until it has been silent for quiet_s: what came."""
    out = b""
    while True:
        got = env.feed(body.take())
        for f, e in got:
            if f & 0x02:
                raise RuntimeError(f"the pty's stream ended: {e}")
            d = e["event"].get("data", {})
            if "pty" in d:
                out += base64.b64decode(d["pty"])
        if got:
            continue
        r, _, _ = select.select([conn.sock], [], [], quiet_s)
        if not r:
            return out
        if not conn.fill():
            raise EOFError("the pty's stream closed")


def pty_echo(petri, sbx, runs):
    """Keys typed into bash -i on a terminal: per key, ms from SendInput's
    request to the echo on the start stream, and to SendInput's answer."""
    stream_conn, input_conn = petri.conn(), petri.conn()
    req = {"process": {"cmd": "/bin/bash", "args": ["-i", "-l"],
                       "envs": {"TERM": "xterm-256color", "LANG": "C.UTF-8"}},
           "pty": {"size": {"rows": 24, "cols": 200}}, "stdin": True}
    echo, answer = [], []
    try:
        _, body = start_stream(stream_conn, sbx, req, timeout_ms=0)
        env = Envelopes()
        pid = None
        while pid is None:
            for _, f, e in events(stream_conn, body, env):
                if f & 0x02:
                    raise RuntimeError(f"the pty did not start: {e}")
                pid = e["event"].get("start", {}).get("pid", pid)
        prompt = drain(stream_conn, body, env, 0.5)   # bash's prompt
        h = {**sbx.envd, "Connect-Protocol-Version": "1"}

        def send(keys):
            data = json.dumps({"process": {"pid": pid},
                               "input": {"pty": base64.b64encode(keys).decode()}}).encode()
            return input_conn.request("POST", "/process.Process/SendInput",
                                      {**h, "Content-Type": "application/json"}, data)

        def answer_of():
            status, _, b = input_conn.head()
            raw = b.read_all()
            if status != 200:
                raise RuntimeError(f"SendInput: {status} {raw!r}")

        typed = 0
        for i in range(runs + WARMUPS):
            if typed == 40:     # a fresh line now and then: ^U, untimed
                send(b"\x15")
                answer_of()
                drain(stream_conn, body, env, 0.05)
                typed = 0
            key = b"abcdefghijklmnopqrstuvwxyz"[i % 26:i % 26 + 1]
            t0 = send(key)
            typed += 1
            t_echo = t_answer = None
            seen = b""
            while t_echo is None or t_answer is None:
                # whatever is buffered first, then whichever socket speaks
                if t_answer is None and b"\r\n\r\n" in input_conn.buf:
                    answer_of()
                    t_answer = time.perf_counter()
                    continue
                got = env.feed(body.take())
                for f, e in got:
                    d = e["event"].get("data", {})
                    if "pty" in d:
                        seen += base64.b64decode(d["pty"])
                if t_echo is None and key in seen:
                    t_echo = time.perf_counter()
                    continue
                if got:
                    continue
                socks = ([stream_conn.sock] if t_echo is None else []) + \
                        ([input_conn.sock] if t_answer is None else [])
                r, _, _ = select.select(socks, [], [], 10)
                if not r:
                    raise TimeoutError(f"no echo of {key!r} (saw {seen!r})")
                for s in r:
                    c = stream_conn if s is stream_conn.sock else input_conn
                    if not c.fill():
                        raise EOFError("a connection closed")
            if i >= WARMUPS:
                echo.append((t_echo - t0) * 1000)
                answer.append((t_answer - t0) * 1000)
        send(b"\x15exit\r")
        answer_of()
    finally:
        stream_conn.close()
        input_conn.close()
    return {"echo_ms": echo, "sendinput_answer_ms": answer,
            "prompt": prompt.decode("utf-8", "replace")[-80:]}


def healthz(conn):
    t0 = conn.request("GET", "/healthz", {})
    status, _, b = conn.head()
    b.read_all()
    return (time.perf_counter() - t0) * 1000


def host_spawn():
    t0 = time.perf_counter()
    p = subprocess.Popen(["/bin/bash", "-c", "echo x"], stdout=subprocess.PIPE)
    os.read(p.stdout.fileno(), 1)
    t1 = time.perf_counter()
    p.stdout.read()
    p.wait()
    return (t1 - t0) * 1000


def series(fn, runs):
    for _ in range(WARMUPS):
        fn()
    return [fn() for _ in range(runs)]


def column(rows, key):
    return summary([r[key] for r in rows])


def report(res):
    lines = [f"process output latency (issue 34), {res['date']}, {res['host']}, "
             f"{res['version']}",
             f"load average before {res['load_before']}, after {res['load_after']}; "
             f"{res['runs']} runs per series after {WARMUPS} warm-ups; "
             f"template {res['warm']}", "",
             f"{'series':<58} {'p50 ms':>8} {'p90 ms':>8} {'min':>7} {'max':>7}"]

    def row(name, s, target=False):
        mark = ""
        if target:
            mark = "  PASS" if s["p50"] <= TARGET_MS else "  MISS"
            mark += f" (target p50 <= {TARGET_MS:g} ms)"
        lines.append(f"{name:<58} {s['p50']:>8.2f} {s['p90']:>8.2f} {s['min']:>7.2f} "
                     f"{s['max']:>7.2f}{mark}")

    s = res["series"]
    row("E2B Process.Start echo x: first stdout byte", s["e2b_first_byte"], True)
    row("  ... its start event (pid)", s["e2b_start"])
    row("  ... the stream's end", s["e2b_end"])
    row("E2B Process.Start /bin/echo x (no shell): first byte", s["e2b_bare_first_byte"])
    row("  ... its start event (pid)", s["e2b_bare_start"])
    row("native POST commands wait_s=5: answer (ended, stdout)", s["native_wait"])
    row("native POST commands, GET wait_for=output: first byte", s["native_poll"])
    row("  ... the POST's answer alone", s["native_post"])
    row("E2B pty: SendInput key to its echo on the stream", s["pty_echo"], True)
    row("  ... SendInput's own answer", s["pty_sendinput_answer"])
    row("floor: GET /healthz, kept-alive connection", s["healthz"])
    row("floor: host bash -c 'echo x', spawn to first byte", s["host_spawn"])
    lines.append("")
    lines.append(f"native GETs needed (POST had no output yet): {res['native_gets']}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--petri", default=os.path.join(ROOT, "build", "petri"))
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json", metavar="OUT", help="write every number here")
    ap.add_argument("--uid-base", type=int, default=1800000000)
    ap.add_argument("--uid-count", type=int, default=2000)
    a = ap.parse_args()
    petri_bin = os.path.abspath(a.petri)
    res = {"date": time.strftime("%Y-%m-%d %H:%M"), "host": socket.gethostname(),
           "runs": a.runs, "load_before": loadavg(),
           "version": subprocess.run([petri_bin, "--version"], capture_output=True,
                                     text=True).stdout.strip()}
    # SIGTERM (a timeout's) stops the daemon too: it runs in a session of its own
    def interrupted(signo, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    tmp = tempfile.mkdtemp(prefix="petri-bench-latency-")
    petri = None
    try:
        petri = Petri(petri_bin, tmp, a.uid_base, a.uid_count)
        petri.wait_ready()
        res["warm"] = petri.warm
        ctl = petri.conn()
        sbx = Sandbox(petri, ctl)
        conn = petri.conn()
        e2b = series(lambda: e2b_first_byte(conn, sbx), a.runs)
        bare = series(lambda: e2b_first_byte(conn, sbx, BARE_ECHO), a.runs)
        wait = series(lambda: native_wait(conn, sbx, petri.key), a.runs)
        poll = series(lambda: native_poll(conn, sbx, petri.key), a.runs)
        pty = pty_echo(petri, sbx, a.runs)
        hz = series(lambda: healthz(conn), a.runs)
        spawn = series(host_spawn, a.runs)
        conn.close()
        sbx.kill(petri, ctl)
        ctl.close()
        res["series"] = {
            "e2b_first_byte": column(e2b, "first_byte_ms"),
            "e2b_start": column(e2b, "start_ms"),
            "e2b_end": column(e2b, "end_ms"),
            "e2b_bare_first_byte": column(bare, "first_byte_ms"),
            "e2b_bare_start": column(bare, "start_ms"),
            "native_wait": column(wait, "answer_ms"),
            "native_poll": column(poll, "first_byte_ms"),
            "native_post": column(poll, "post_ms"),
            "pty_echo": summary(pty["echo_ms"]),
            "pty_sendinput_answer": summary(pty["sendinput_answer_ms"]),
            "healthz": summary(hz),
            "host_spawn": summary(spawn),
        }
        res["native_gets"] = {str(k): sum(1 for r in poll if r["gets"] == k)
                              for k in sorted({r["gets"] for r in poll})}
        res["raw"] = {"e2b": e2b, "e2b_bare": bare, "native_wait": wait, "native_poll": poll,
                      "pty_echo_ms": pty["echo_ms"],
                      "pty_sendinput_answer_ms": pty["sendinput_answer_ms"],
                      "healthz_ms": hz, "host_spawn_ms": spawn}
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)     # the cleanup is not cut short
        if petri:
            code = petri.stop()
            if code not in (0, -signal.SIGTERM):
                print(f"petri serve exited with {code}: {petri.log()[-2000:]}")
        shutil.rmtree(tmp, ignore_errors=True)
    res["load_after"] = loadavg()
    print(report(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
