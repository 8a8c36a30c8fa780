"""Helpers for the black-box tests of `petri serve` (imported by the test
modules; fixtures live in conftest.py).

raw()        one HTTP request with the path sent exactly as given (no
             normalisation of "..", "%2e" or "//" by a client library)
sse()        POST an execution with Accept: text/event-stream and yield
             (seconds since the request, event, data) as events arrive
unix_request() one request over a unix socket
png_size()   check a PNG signature and IHDR chunk, return (width, height)
metric()     one sample of the Prometheus text /metrics returns
wait_for()   poll a condition
healthz()    GET /healthz as a dict (http:// or unix:), None when it does not answer
wait_warm()  poll /healthz until the warm path has settled (ready, off, failed)
process_tree(), still_alive(), cgroup_dirs(), petri_lock(): leak checks
"""
import base64
import contextlib
import fcntl
import http.client
import json
import os
import socket
import struct
import time
import urllib.parse

PETRI = os.environ.get("PETRI_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "petri"))


def _conn(url, timeout):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


def raw(url, method, path, body=None, headers=None, timeout=30):
    """(status, headers dict with lower-case names, body bytes)."""
    c = _conn(url, timeout)
    try:
        c.putrequest(method, path, skip_accept_encoding=True)
        hdrs = dict(headers or {})
        if body is not None:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                hdrs.setdefault("Content-Type", "application/json")
            hdrs.setdefault("Content-Length", str(len(body)))
        for k, v in hdrs.items():
            c.putheader(k, v)
        c.endheaders(body)
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def answer_on(sock, limit=1 << 20):
    """The whole answer (head and body, bytes) that arrives on a raw socket
    after a hand-written request: read until the body's Content-Length (0
    without one) is in, the peer closes, or the socket's timeout.  One
    recv() may hold only the head: the body can come in a segment of its
    own.  What came after the answer is returned too."""
    data = b""
    while len(data) < limit:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if len(body) >= length:
                return data
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def error_of(body):
    """The {"code", "message"} of an error body."""
    j = json.loads(body) if isinstance(body, (bytes, str)) else body
    assert set(j) == {"error"}, j
    assert isinstance(j["error"]["code"], str) and isinstance(j["error"]["message"], str), j
    return j["error"]


class SSE:
    """A streamed execution.  Iterate for (t, event, data); .close() drops
    the connection (shutdown + close: the server sees it at once)."""

    def __init__(self, url, path, body, key=None, timeout=60):
        self.t0 = time.monotonic()
        self.c = _conn(url, timeout)
        payload = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                   "Content-Length": str(len(payload))}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self.c.request("POST", path, payload, headers)
        self.resp = self.c.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}

    def __iter__(self):
        event, data = None, []
        while True:
            line = self.resp.readline()
            if not line:
                return
            line = line.decode("utf-8").rstrip("\r\n")
            if line == "":
                if event is not None or data:
                    yield (time.monotonic() - self.t0, event or "message",
                           json.loads("\n".join(data)) if data else None)
                event, data = None, []
            elif line.startswith(":"):
                continue
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))

    def close(self):
        sock = self.c.sock
        try:
            if sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.resp.close()
        self.c.close()


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def unix_request(sock_path, method, path, body=None, timeout=30):
    c = UnixHTTPConnection(sock_path, timeout)
    try:
        headers = {}
        if body is not None:
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json"}
        c.request(method, path, body, headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def png_size(data):
    """Width and height of a PNG; asserts the signature and the IHDR chunk."""
    if isinstance(data, str):
        data = base64.b64decode(data, validate=True)
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13, (length, kind)
    w, h = struct.unpack(">II", data[16:24])
    assert data[-8:-4] == b"IEND", "no IEND chunk at the end"
    return w, h


def metric(text, name, **labels):
    """Value of the sample `name{labels}` in Prometheus text, or None."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    key = f"{name}{{{want}}}" if want else name
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        k, _, v = line.rpartition(" ")
        if k == key:
            return float(v)
    return None


def wait_for(cond, timeout, interval=0.1):
    """Poll cond() until it returns a true value; returns it, or the last
    false value after timeout seconds."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(interval)


def healthz(url, timeout=5):
    """GET /healthz of a daemon at url (http://host:port or unix:/path) as a
    dict; None when it does not answer (not up yet, or gone)."""
    try:
        if url.startswith("unix:"):
            status, body = unix_request(url[5:], "GET", "/healthz", timeout=timeout)
        else:
            status, _, body = raw(url, "GET", "/healthz", timeout=timeout)
        return json.loads(body) if status == 200 else None
    except (OSError, ValueError, http.client.HTTPException):
        return None


# The states of /healthz's "warm" that do not change by waiting: the
# template is up (ready), there is none (off: warm = false), or it could not
# start (failed: every sandbox starts cold).
WARM_SETTLED = ("ready", "off", "failed")


def wait_warm(url, timeout=120, alive=lambda: True):
    """Poll /healthz until "warm" is settled (WARM_SETTLED) or timeout
    seconds pass, or alive() turns false (the daemon exited).  Returns the
    last "warm" seen ("starting", or None when /healthz never answered):
    tests wait on this fact, never on a line of the log."""
    end = time.monotonic() + timeout
    warm = None
    while alive():
        h = healthz(url)
        warm = h.get("warm") if h else warm
        if warm in WARM_SETTLED or time.monotonic() >= end:
            break
        time.sleep(0.1)
    return warm


# Shared with tests/cli/conftest.py: petri starts hold it shared; a test that
# must see what a dead petri left behind holds it exclusively.
LOCK_PATH = "/run/lock/petri-tests.lock"


@contextlib.contextmanager
def petri_lock(exclusive=False):
    with open(LOCK_PATH, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def process_tree(root):
    """Host pids of root's descendants, each with its start time (to tell
    a pid that was reused): {pid: starttime}."""
    children = {}
    starts = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            # A command name may be any bytes (cut at 15, even inside a
            # UTF-8 character): only the fields after it are read.
            with open(f"/proc/{d}/stat", errors="replace") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(d))
        starts[int(d)] = int(fields[19])
    out, todo = {}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out[c] = starts[c]
                todo.append(c)
    return out


def still_alive(tree):
    """Those of {pid: starttime} that still run (same pid, same start)."""
    alive = []
    for pid, start in tree.items():
        try:
            with open(f"/proc/{pid}/stat", errors="replace") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[19]) == start and fields[0] != "Z":
            alive.append(pid)
    return alive


def cgroup_dirs(pid, root="/sys/fs/cgroup"):
    """Cgroup directories p<pid>-... under any .../petri/ of the hierarchy."""
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        if os.path.basename(dirpath) == "petri":
            found += [os.path.join(dirpath, d) for d in dirnames if d.startswith(f"p{pid}-")]
            dirnames[:] = []
    return found
