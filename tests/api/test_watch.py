"""Watching a directory of a session (GET /v1/sessions/{id}/watch, docs/api.md
"Watching a directory"): Server-Sent Events of what is made, written,
removed and renamed, recursively when asked, in /work or /tmp; refusals
before the stream; the stream's end when the session ends.

Events are read as they come, each wait with a deadline far above what it
should take; nothing asserts on how long anything took.
"""
import json
import queue
import threading

import requests

from apihelp import wait_for


class Watch:
    """A watch's stream, read on a thread into a queue of (event, data)."""

    def __init__(self, url, **params):
        self.r = requests.get(url, params=params, stream=True, timeout=60)
        assert self.r.status_code == 200, self.r.text
        assert self.r.headers["Content-Type"].startswith("text/event-stream")
        self.q = queue.Queue()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        event = None
        try:
            for line in self.r.iter_lines(decode_unicode=True):
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    self.q.put((event, json.loads(line[6:])))
        except Exception:   # closed under it (requests' own errors, or its raw gone)
            pass
        self.q.put(("closed", None))

    def until(self, want, timeout=30):
        """Events until one equals want (event, data); all of them."""
        seen = []
        while True:
            ev = self.q.get(timeout=timeout)
            seen.append(ev)
            if ev == want or (want[1] is None and ev[0] == want[0]):
                return seen
            assert ev[0] != "closed", seen

    def close(self):
        self.r.close()


def test_changes_come_as_they_happen(server):
    api = server.api()
    sid = api.session()
    w = Watch(f"{server.url}/v1/sessions/{sid}/watch")
    try:
        assert w.until(("start", None))[-1][1] == {"path": ".", "recursive": False}
        assert api.put(f"/v1/sessions/{sid}/files/a.txt", data=b"hi").status_code == 201
        w.until(("change", {"type": "write", "name": "a.txt"}))
        api.execute(sid, "import os\nos.rename('a.txt', 'b.txt')\nos.chmod('b.txt', 0o600)")
        seen = w.until(("change", {"type": "chmod", "name": "b.txt"}))
        assert ("change", {"type": "rename", "name": "a.txt"}) in seen, seen
        assert ("change", {"type": "create", "name": "b.txt"}) in seen, seen
        assert api.delete(f"/v1/sessions/{sid}/files/b.txt").status_code == 204
        w.until(("change", {"type": "remove", "name": "b.txt"}))
    finally:
        w.close()


def test_recursively_and_outside_the_workspace(server):
    api = server.api()
    sid = api.session()
    api.execute(sid, "import os\nos.makedirs('/tmp/top/sub')")
    w = Watch(f"{server.url}/v1/sessions/{sid}/watch", path="/tmp/top", recursive="true")
    try:
        assert w.until(("start", None))[-1][1] == {"path": "/tmp/top", "recursive": True}
        api.execute(sid, "open('/tmp/top/sub/x.txt', 'w').write('x')")
        w.until(("change", {"type": "write", "name": "sub/x.txt"}))
        # A directory made while it is watched is watched too.
        api.execute(sid, "import os\nos.mkdir('/tmp/top/new')")
        w.until(("change", {"type": "create", "name": "new"}))
        api.execute(sid, "open('/tmp/top/new/y.txt', 'w').write('y')")
        w.until(("change", {"type": "write", "name": "new/y.txt"}))
    finally:
        w.close()


def test_refusals_come_before_the_stream(server):
    api = server.api()
    sid = api.session()
    api.execute(sid, "open('f.txt', 'w').write('x')")
    base = f"/v1/sessions/{sid}/watch"
    for params, status, code in [({"path": "nope"}, 404, "file_not_found"),
                                 ({"path": "f.txt"}, 400, "not_a_directory"),
                                 ({"path": "../x"}, 400, "invalid_path"),
                                 ({"path": "/etc"}, 400, "invalid_path"),
                                 ({"recursive": "maybe"}, 400, "invalid_request")]:
        r = api.get(base, params=params)
        assert r.status_code == status and r.json()["error"]["code"] == code, (params, r.text)
    assert api.post(base, {}).status_code == 405
    assert api.get("/v1/sessions/nope/watch").status_code == 404


def test_the_stream_ends_with_the_session(server):
    api = server.api()
    sid = api.session()
    w = Watch(f"{server.url}/v1/sessions/{sid}/watch")
    try:
        w.until(("start", None))
        assert api.delete(f"/v1/sessions/{sid}").status_code == 204
        seen = w.until(("closed", None))
        assert any(ev == "end" for ev, _ in seen), seen
    finally:
        w.close()
    assert wait_for(lambda: api.get(f"/v1/sessions/{sid}").status_code == 404, 30)
