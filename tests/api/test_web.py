"""The web page's files and the event stream (docs/web.md): the page is
served with a strict Content-Security-Policy and without a key, nothing else
is; GET /v1/events tells what the record committed, is authorized like the
API, bounded in number and shared between keys (or addresses), and ends
at shutdown.  tests/web drives the page itself in a browser."""
import http.client
import json
import os
import re
import threading

import requests

from harness import poll

CSP_DIRECTIVES = ["default-src 'none'", "script-src 'self'", "style-src 'self'",
                  "img-src 'self' data:", "connect-src 'self'", "frame-ancestors 'none'",
                  "base-uri 'none'", "form-action 'none'"]
ASSETS = {"/": "text/html", "/ui/app.js": "text/javascript", "/ui/app.css": "text/css"}


def read_events(resp, until, limit=50):
    """(name, data) events of a streamed response until until(name, data).
    One line iterator per response: iter_lines() buffers what it read."""
    if not hasattr(resp, "_web_lines"):
        resp._web_lines = resp.iter_lines(decode_unicode=True)
    name, seen = None, []
    for line in resp._web_lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
            seen.append((name, data))
            if until(name, data) or len(seen) >= limit:
                return seen
    return seen


def page_and_script(server, page, scripts, script):
    """The text of script, once page was found to hold nothing inline for a
    policy to refuse: these scripts by src, no style, no handler attributes."""
    html = requests.get(server.url + page, timeout=30).text
    assert re.findall(r"<script\b[^>]*>", html) == scripts
    assert not re.search(r"<style\b|\sstyle=|\son[a-z]+=", html, re.I)
    return requests.get(server.url + script, timeout=30).text


def test_the_page_is_served_with_a_strict_policy(server):
    for path, ctype in ASSETS.items():
        r = requests.get(server.url + path, timeout=30)
        assert r.status_code == 200, path
        assert r.headers["Content-Type"].startswith(ctype), path
        csp = r.headers["Content-Security-Policy"]
        for d in CSP_DIRECTIVES:
            assert d in [p.strip() for p in csp.split(";")], (path, d, csp)
        assert "unsafe" not in csp and "*" not in csp and "http" not in csp
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Referrer-Policy"] == "no-referrer"
        assert r.headers["X-Frame-Options"] == "DENY"
    js = page_and_script(server, "/", ['<script src="/ui/app.js" defer>'], "/ui/app.js")
    assert "innerHTML" not in js.replace("never innerHTML", "")
    assert "eval(" not in js and "new Function" not in js


PLOTLY_JS = "/usr/lib/R/site-library/plotly/htmlwidgets/lib/plotlyjs/plotly-latest.min.js"
FRAME_ASSETS = {"/ui/plotly-frame.html": "text/html", "/ui/plotly-frame.js": "text/javascript",
                "/ui/plotly.min.js": "text/javascript"}


def test_the_plotly_frame_has_a_policy_of_its_own(server):
    """The frame that draws plotly figures runs script in an opaque origin
    (its requests say Origin: null); its policy runs its own scripts only
    and lets it be framed by the page alone.  The page's stays as strict."""
    for path, ctype in FRAME_ASSETS.items():
        r = requests.get(server.url + path, headers={"Origin": "null"}, timeout=30)
        if path == "/ui/plotly.min.js" and not os.path.exists(PLOTLY_JS):
            assert r.status_code == 404 and "r-cran-plotly" in r.json()["error"]["message"]
            continue
        assert r.status_code == 200, (path, r.text[:300])
        assert r.headers["Content-Type"].startswith(ctype), path
        csp = [d.strip() for d in r.headers["Content-Security-Policy"].split(";")]
        for d in ("default-src 'none'", "script-src 'self' 'unsafe-eval'", "frame-ancestors 'self'",
                  "base-uri 'none'", "form-action 'none'"):
            assert d in csp, (path, d, csp)
        assert not any(d.startswith("connect-src") for d in csp)   # default: none
        assert "*" not in r.headers["Content-Security-Policy"]
        assert r.headers["Cross-Origin-Resource-Policy"] == "cross-origin"
    if os.path.exists(PLOTLY_JS):
        body = requests.get(server.url + "/ui/plotly.min.js", timeout=30).content
        with open(PLOTLY_JS, "rb") as f:
            assert body == f.read()
    html = requests.get(server.url + "/ui/plotly-frame.html", timeout=30).text
    assert re.findall(r"<script\b[^>]*>", html) == ['<script src="/ui/plotly.min.js">',
                                                    '<script src="/ui/plotly-frame.js">']
    # An opaque origin gets the files, and nothing else.
    assert requests.post(server.url + "/ui/plotly-frame.html", headers={"Origin": "null"},
                         timeout=30).status_code == 403
    assert requests.get(server.url + "/v1/sessions", headers={"Origin": "null"},
                        timeout=30).status_code == 403
    csp = requests.get(server.url + "/", timeout=30).headers["Content-Security-Policy"]
    assert "unsafe" not in csp


HTML_FRAME_CSP = ["default-src 'none'", "script-src 'self'", "img-src data:", "frame-ancestors 'self'",
                  "base-uri 'none'", "form-action 'none'"]


def test_the_html_frame_has_the_narrowest_policy(server):
    """HTML results are shown by /ui/html-frame.html in an opaque origin with
    scripts: its policy runs its own script file and nothing inline, takes
    images as data: only and asks nothing of anyone, the server included."""
    for path, ctype in {"/ui/html-frame.html": "text/html",
                        "/ui/html-frame.js": "text/javascript"}.items():
        r = requests.get(server.url + path, headers={"Origin": "null"}, timeout=30)
        assert r.status_code == 200, (path, r.text[:300])
        assert r.headers["Content-Type"].startswith(ctype), path
        csp = [d.strip() for d in r.headers["Content-Security-Policy"].split(";")]
        assert sorted(csp) == sorted(HTML_FRAME_CSP), (path, csp)
        assert r.headers["X-Frame-Options"] == "SAMEORIGIN"
        assert r.headers["Cross-Origin-Resource-Policy"] == "cross-origin"
    js = page_and_script(server, "/ui/html-frame.html", ['<script src="/ui/html-frame.js">'],
                         "/ui/html-frame.js")
    assert "DOMParser" in js
    assert "innerHTML" not in js and "document.write" not in js and "eval(" not in js


def test_an_opaque_origin_reads_the_frames_files_only(server):
    """Origin: null (the frames) may GET or HEAD the files under /ui/; not
    the page itself, not another method, not the API."""
    null = {"Origin": "null"}
    for path in ("/ui/html-frame.html", "/ui/html-frame.js", "/ui/app.js"):
        assert requests.head(server.url + path, headers=null, timeout=30).status_code == 200, path
    assert requests.get(server.url + "/", headers=null, timeout=30).status_code == 403
    assert requests.post(server.url + "/ui/html-frame.html", headers=null,
                         timeout=30).status_code == 403
    for path in ("/v1/sessions", "/v1/executions", "/v1/events"):
        assert requests.get(server.url + path, headers=null, timeout=30).status_code == 403, path
    assert requests.get(server.url + "/ui/other.js", headers=null, timeout=30).status_code == 403


def test_other_paths_are_not_the_page(server):
    assert requests.get(server.url + "/index.html", timeout=30).status_code == 404
    assert requests.get(server.url + "/ui/other.js", timeout=30).status_code == 404
    r = requests.post(server.url + "/", timeout=30)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"


def test_keys_the_page_is_free_the_data_and_the_events_are_not(make_server):
    srv = make_server("[server]\napi_keys = web-key-1\n")
    for path in ASSETS:
        assert requests.get(srv.url + path, timeout=30).status_code == 200, path
    for path in ("/v1/events", "/v1/sessions", "/v1/executions", "/ui/other.js"):
        assert requests.get(srv.url + path, timeout=30).status_code == 401, path
        r = requests.get(srv.url + path, headers={"Authorization": "Bearer nope"}, timeout=30)
        assert r.status_code == 401, path
    with requests.get(srv.url + "/v1/events", headers={"Authorization": "Bearer web-key-1"},
                      stream=True, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"] == "text/event-stream"
        assert read_events(r, lambda n, d: True) == [("heartbeat", {"sessions": 0})]


def test_the_browser_rules_hold_for_the_page_and_the_events(server):
    port = server.url.rsplit(":", 1)[1]
    evil_origin = {"Origin": "http://evil.example"}
    assert requests.get(server.url + "/v1/events", headers=evil_origin, timeout=30).status_code == 403
    assert requests.get(server.url + "/", headers={"Host": f"evil.example:{port}"},
                        timeout=30).status_code == 403
    same = {"Origin": server.url}
    with requests.get(server.url + "/v1/events", headers=same, stream=True, timeout=30) as r:
        assert r.status_code == 200


def test_events_say_what_the_record_committed(server, api):
    with requests.get(server.url + "/v1/events", stream=True, timeout=60) as r:
        assert r.status_code == 200
        first = read_events(r, lambda n, d: n == "heartbeat")
        assert first[-1][0] == "heartbeat"
        out = api.post("/v1/execute", {"code": "print('web-1')"})
        assert out.status_code == 200
        sid = api.session()
        api.execute(sid, "1/0")
        assert api.delete(f"/v1/sessions/{sid}").status_code == 204
        seen = read_events(r, lambda n, d: n == "session" and d["state"] == "deleted")
    got = [(n, d) for n, d in seen if n != "heartbeat"]
    assert [n for n, _ in got] == ["execution", "session", "execution", "session"]
    one, created, run, deleted = (d for _, d in got)
    assert one["session"] is None and one["status"] == "ok" and one["language"] == "python"
    assert created == {"id": sid, "state": "created"}
    assert run["session"] == sid and run["status"] == "error" and run["seq"] > one["seq"]
    assert deleted == {"id": sid, "state": "deleted"}
    # seq is the record's own.
    listed = api.get("/v1/executions?limit=2").json()["executions"]
    assert [e["seq"] for e in listed] == [run["seq"], one["seq"]]


def test_events_announce_every_session_whoever_made_or_ended_it(make_server):
    """Sessions made by another front end (E2B here), and ended by expiry
    rather than a client, are announced as the API's own are."""
    key = "e2b_" + "5" * 40
    srv = make_server(f"[server]\napi_keys = {key}\n")
    auth = {"Authorization": f"Bearer {key}"}
    with requests.get(srv.url + "/v1/events", headers=auth, stream=True, timeout=60) as r:
        assert r.status_code == 200
        read_events(r, lambda n, d: n == "heartbeat")
        made = requests.post(srv.url + "/sandboxes", json={"templateID": "code-interpreter-v1"},
                             headers={"X-API-KEY": key}, timeout=60)
        assert made.status_code == 201, made.text
        seen = read_events(r, lambda n, d: n == "session")
        e2b_created = seen[-1][1]
        assert e2b_created["state"] == "created" and "reason" not in e2b_created, seen
        assert requests.delete(f"{srv.url}/sandboxes/{made.json()['sandboxID']}",
                               headers={"X-API-KEY": key}, timeout=60).status_code == 204
        seen = read_events(r, lambda n, d: n == "session")
        assert seen[-1][1] == {"id": e2b_created["id"], "state": "deleted"}, seen
        short = requests.post(srv.url + "/v1/sessions", json={"idle_timeout_s": 1},
                              headers=auth, timeout=60)
        assert short.status_code == 201, short.text
        sid = short.json()["id"]
        seen = read_events(r, lambda n, d: n == "session" and d["state"] == "ended")
    got = [d for n, d in seen if n == "session"]
    assert got == [{"id": sid, "state": "created"},
                   {"id": sid, "state": "ended",
                    "reason": "the session was idle too long and was ended"}], got


def open_stream(srv, src="127.0.0.1", key=None):
    """GET /v1/events from address src: (status, connection).  The caller
    closes the connection."""
    port = int(srv.url.rsplit(":", 1)[1])
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(src, 0))
    c.request("GET", "/v1/events", headers={"Authorization": f"Bearer {key}"} if key else {})
    r = c.getresponse()
    if r.status != 200:
        r.body = json.loads(r.read())
    r.conn = c
    return r


def close_all(streams):
    for r in streams:
        r.conn.close()


def test_event_streams_are_bounded(make_server):
    """Without keys each address holds at most a quarter of the 32 streams;
    all addresses together at most 32."""
    srv = make_server()
    opened = []
    try:
        for _ in range(8):
            r = open_stream(srv)
            assert r.status == 200
            opened.append(r)
        r = open_stream(srv)
        assert r.status == 429, f"got {r.status}"
        assert r.body["error"]["code"] == "too_many_streams", r.body
        assert "share" in r.body["error"]["message"]
        assert r.getheader("Retry-After") == "1"
        r.conn.close()
        # Other addresses have their own shares, up to the server's 32.
        for src in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
            for _ in range(8):
                r = open_stream(srv, src)
                assert r.status == 200, (src, r.status)
                opened.append(r)
        r = open_stream(srv, "127.0.0.5")
        assert r.status == 429, f"got {r.status}"
        assert r.body["error"]["code"] == "too_many_streams", r.body
        assert "at most 32" in r.body["error"]["message"]
        r.conn.close()
        # The API still answers, and a closed stream makes room (the
        # server notices the hang-up within about a second).
        assert requests.get(srv.url + "/v1/sessions", timeout=30).status_code == 200
        opened.pop().conn.close()

        def stream():
            r = open_stream(srv, "127.0.0.4")
            if r.status != 200:
                r.conn.close()
            return r
        r = poll(stream, lambda r: r.status == 200, 30, 0.2)
        assert r.status == 200, "a closed stream never made room"
        opened.append(r)
    finally:
        close_all(opened)


def test_one_key_cannot_hold_every_event_stream(make_server):
    """Two keys: each may hold half of the streams, so the other always
    gets one, from whatever addresses the first connects."""
    srv = make_server("[server]\napi_keys = k-one, k-two\n")
    opened = []
    try:
        for i in range(16):
            r = open_stream(srv, f"127.0.0.{2 + i % 4}", key="k-one")
            assert r.status == 200, (i, r.status)
            opened.append(r)
        r = open_stream(srv, "127.0.0.9", key="k-one")
        assert r.status == 429, f"got {r.status}"
        assert r.body["error"]["code"] == "too_many_streams", r.body
        assert "this API key has 16 event streams open" in r.body["error"]["message"]
        r.conn.close()
        r = open_stream(srv, key="k-two")
        assert r.status == 200
        opened.append(r)
    finally:
        close_all(opened)


def test_event_streams_end_at_shutdown(make_server):
    srv = make_server()
    r = requests.get(srv.url + "/v1/events", stream=True, timeout=60)
    assert r.status_code == 200
    ended = threading.Event()

    def drain():
        for _ in r.iter_lines():
            pass
        ended.set()

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    code, err = srv.stop()
    t.join(30)
    assert ended.is_set(), "the event stream outlived the server"
    assert code == 0, err[-3000:]
    r.close()
