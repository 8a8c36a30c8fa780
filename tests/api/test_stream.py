"""Server-Sent Events: POST .../execute with Accept: text/event-stream."""
import time

import pytest

from apihelp import SSE, error_of, wait_for
from harness import poll


@pytest.fixture
def sid(api):
    s = api.session()
    yield s
    api.delete(f"/v1/sessions/{s}")


def test_first_stdout_event_arrives_before_the_code_finishes(server, api, sid):
    st = SSE(server.url, f"/v1/sessions/{sid}/execute",
             {"code": "import time\nprint('first')\ntime.sleep(2)\nprint('second')"})
    assert st.status == 200
    assert st.headers["content-type"].startswith("text/event-stream")
    events = list(st)
    st.close()
    kinds = [e for _, e, _ in events]
    assert kinds[-1] == "done" and kinds.count("done") == 1, kinds
    outs = [(t, d["text"]) for t, e, d in events if e == "stdout"]
    assert "".join(x for _, x in outs) == "first\nsecond\n", outs
    t_first = next(t for t, x in outs if "first" in x)
    t_done = events[-1][0]
    print(f"first stdout event after {t_first:.3f} s, done after {t_done:.3f} s")
    assert t_done >= 2.0
    assert t_first < t_done - 1.5, (t_first, t_done)
    # The done event carries the whole result object.
    done = events[-1][2]
    assert done["status"] == "ok" and done["exit_code"] == 0
    assert done["stdout"] == "first\nsecond\n"
    assert done["duration_ms"] >= 2000
    assert {"stderr", "results", "error", "files", "reason"} <= set(done)


def test_result_error_and_stderr_events(server, api, sid):
    code = ("import sys\nprint('to-err', file=sys.stderr)\n"
            "display(6 * 7)\nopen('made.txt', 'w').write('x')\nraise KeyError('nope')")
    st = SSE(server.url, f"/v1/sessions/{sid}/execute", {"code": code})
    events = list(st)
    st.close()
    by = {}
    for _, e, d in events:
        by.setdefault(e, []).append(d)
    assert "".join(d["text"] for d in by["stderr"]) == "to-err\n", by
    assert by["result"] == [{"text/plain": "42"}]
    assert len(by["error"]) == 1 and by["error"][0]["name"] == "KeyError"
    done = by["done"][0]
    assert done["status"] == "error"
    assert done["error"]["name"] == "KeyError" and "nope" in done["error"]["message"]
    assert done["results"] == [{"text/plain": "42"}]
    assert done["stderr"] == "to-err\n"
    assert any(f["path"] == "made.txt" for f in done["files"])
    assert [e for _, e, _ in events].index("error") < [e for _, e, _ in events].index("done")


def test_stream_to_busy_session_is_409_and_to_gone_session_410(server, api):
    sid = api.session(limits={"timeout_s": 5})
    first = SSE(server.url, f"/v1/sessions/{sid}/execute",
                {"code": "import time\nprint('busy', flush=True)\ntime.sleep(1.5)"})
    it = iter(first)
    assert next(it)[1] == "stdout"
    second = SSE(server.url, f"/v1/sessions/{sid}/execute", {"code": "1"})
    assert second.status == 409, second.status
    assert error_of(second.resp.read())["code"] == "session_busy"
    second.close()
    rest = list(it)
    first.close()
    assert rest[-1][1] == "done" and rest[-1][2]["status"] == "ok"
    # A session that died answers the stream with a real 410, not an event.
    api.execute(sid, "import os\nos.kill(os.getppid(), 9)")
    gone = SSE(server.url, f"/v1/sessions/{sid}/execute", {"code": "1"})
    assert gone.status == 410
    assert error_of(gone.resp.read())["code"] == "session_gone"
    gone.close()


def test_stream_validates_like_execute(server, api, sid):
    st = SSE(server.url, f"/v1/sessions/{sid}/execute", {"code": 5})
    assert st.status == 400
    st.close()
    st = SSE(server.url, f"/v1/sessions/{sid}/execute", {"code": "1", "language": "cobol"})
    assert st.status == 400
    st.close()
    st = SSE(server.url, "/v1/sessions/ses_00000000000000000000000000000000/execute", {"code": "1"})
    assert st.status == 404
    st.close()


def test_stream_timeout_ends_with_done(server, api):
    sid = api.session(limits={"timeout_s": 1})
    st = SSE(server.url, f"/v1/sessions/{sid}/execute",
             {"code": "import time\nprint('a', flush=True)\ntime.sleep(10)"})
    events = list(st)
    st.close()
    done = events[-1]
    assert done[1] == "done" and done[2]["status"] == "timeout", events
    assert done[0] < 6
    api.delete(f"/v1/sessions/{sid}")


LOOP = ("import time\nprogress = 0\n"
        "for i in range(12):\n    print('tick', i, flush=True)\n    progress = i\n    time.sleep(0.5)\n"
        "open('late.txt', 'w').write('the code kept running')\n")


def disconnect_after_first_event(server, sid, code):
    st = SSE(server.url, f"/v1/sessions/{sid}/execute", {"code": code})
    it = iter(st)
    t, event, data = next(it)
    assert event == "stdout", (event, data)
    st.close()
    return time.monotonic()


def session_status(api, sid):
    r = api.get(f"/v1/sessions/{sid}")
    return r.json()["status"] if r.status_code == 200 else r.status_code


def test_disconnect_stops_the_execution(server, api):
    """The execution does not run on for nobody: soon after the client
    goes, the session is no longer busy and the code never reached its end."""
    sid = api.session(limits={"timeout_s": 20})
    t_closed = disconnect_after_first_event(server, sid, LOOP)
    st = wait_for(lambda: session_status(api, sid) != "busy", 5)
    waited = time.monotonic() - t_closed
    print(f"session stopped being busy {waited:.2f} s after the client left: {st}")
    assert st is True, "the execution still runs 5 s after the client disconnected"
    # The loop would have written late.txt 6 s after it started.
    time.sleep(max(0.0, t_closed + 7 - time.monotonic()))
    r = api.get(f"/v1/sessions/{sid}/files/late.txt")
    assert r.status_code in (404, 410), r.text
    api.delete(f"/v1/sessions/{sid}")


def test_disconnect_keeps_the_session_and_its_state(server, api):
    sid = api.session(limits={"timeout_s": 20})
    api.execute(sid, "keep = 42")
    t_closed = disconnect_after_first_event(server, sid, LOOP)
    # The next execute is not refused as busy for long, and it works.
    r = poll(lambda: api.post(f"/v1/sessions/{sid}/execute", {"code": "keep, progress < 11"}),
             lambda r: r.status_code != 409, max(0.0, t_closed + 5 - time.monotonic()))
    print(f"next execute answered {r.status_code} {time.monotonic() - t_closed:.2f} s after the disconnect")
    assert r.status_code == 200, r.text
    assert r.json()["results"] == [{"text/plain": "(42, True)"}], r.json()
    # The loop would have written late.txt 6 s after it started.
    time.sleep(max(0.0, t_closed + 7 - time.monotonic()))
    r = api.get(f"/v1/sessions/{sid}/files/late.txt")
    assert r.status_code == 404, "the interrupted code ran on and wrote late.txt"
    api.delete(f"/v1/sessions/{sid}")


def test_disconnect_while_the_code_is_silent(server, api):
    """A client that leaves while the code prints nothing: the server has
    nothing to write, yet it must notice soon."""
    sid = api.session(limits={"timeout_s": 60})
    code = "import time\nprint('start', flush=True)\ntime.sleep(50)\nopen('late.txt','w').write('x')"
    t_closed = disconnect_after_first_event(server, sid, code)
    st = wait_for(lambda: session_status(api, sid) != "busy", 5, 0.1)
    print(f"silent code: busy for {time.monotonic() - t_closed:.1f} s after the client left")
    api.delete(f"/v1/sessions/{sid}")
    assert st is True, "the execution still runs 5 s after the client disconnected"


def test_characters_cut_across_chunks_arrive_whole(server, api, sid):
    # "é€" written a byte at a time, then a byte that is no UTF-8: every
    # stdout event is whole UTF-8 (the stream holds a cut character back).
    code = ("import sys\nfor b in 'é€'.encode():\n"
            "    sys.stdout.buffer.write(bytes([b])); sys.stdout.flush()\n"
            "sys.stdout.buffer.write(b'\\xff!\\n'); sys.stdout.flush()")
    st = SSE(server.url, f"/v1/sessions/{sid}/execute", {"code": code})
    events = list(st)
    st.close()
    assert "".join(d["text"] for _, e, d in events if e == "stdout") == "é€\ufffd!\n"
