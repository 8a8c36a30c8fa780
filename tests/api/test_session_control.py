"""A live session's lifetime (PATCH, keepalive) and an execution's own
environment (the "env" of an execution request)."""
import time

from apihelp import SSE, error_of, wait_for


# ---- lifetime --------------------------------------------------------------

def test_patch_extends_a_session_past_its_old_expiry(api):
    sid = api.session(idle_timeout_s=2)
    r = api.request("PATCH", f"/v1/sessions/{sid}", json={"idle_timeout_s": 300})
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["id"] == sid and s["idle_timeout_s"] == 300, s
    assert set(s) == set(api.get(f"/v1/sessions/{sid}").json()), s
    # Well past the old expiry (2 s): the reaper looks several times a second.
    time.sleep(5)
    assert api.get(f"/v1/sessions/{sid}").status_code == 200
    assert api.execute(sid, "'alive'")["results"] == [{"text/plain": "'alive'"}]


def test_patch_can_shorten_and_change_both(api):
    sid = api.session()
    r = api.request("PATCH", f"/v1/sessions/{sid}",
                    json={"idle_timeout_s": 1, "max_lifetime_s": 100})
    assert r.status_code == 200, r.text
    assert (r.json()["idle_timeout_s"], r.json()["max_lifetime_s"]) == (1, 100)
    assert wait_for(lambda: api.get(f"/v1/sessions/{sid}").status_code != 200, 30, 0.2), \
        "a session shortened to 1 s idle never expired"
    r = api.get(f"/v1/sessions/{sid}")
    assert r.status_code == 410 and "idle" in error_of(r.content)["message"], r.text
    # An expired session stays expired.
    r = api.request("PATCH", f"/v1/sessions/{sid}", json={"idle_timeout_s": 300})
    assert r.status_code == 410, r.text


def test_patch_refuses_past_the_maxima_and_bad_fields(api):
    sid = api.session(idle_timeout_s=30)
    for body, word in (({"idle_timeout_s": 1e9}, "idle_timeout_s"),
                       ({"max_lifetime_s": 1e9}, "max_lifetime_s"),
                       ({"idle_timeout_s": 0}, "idle_timeout_s"),
                       ({"idle_timeout_s": "60"}, "idle_timeout_s"),
                       ({"language": "bash"}, "language")):
        r = api.request("PATCH", f"/v1/sessions/{sid}", json=body)
        assert r.status_code == 400, (body, r.text)
        e = error_of(r.content)
        assert e["code"] == "invalid_request" and word in e["message"], (body, e)
    # Same words as creation uses.
    r = api.post("/v1/sessions", {"idle_timeout_s": 1e9})
    r2 = api.request("PATCH", f"/v1/sessions/{sid}", json={"idle_timeout_s": 1e9})
    assert error_of(r.content)["message"] == error_of(r2.content)["message"]
    # Nothing changed.
    assert api.get(f"/v1/sessions/{sid}").json()["idle_timeout_s"] == 30
    r = api.request("PATCH", "/v1/sessions/ses_00000000000000000000000000000000",
                    json={"idle_timeout_s": 10})
    assert r.status_code == 404, r.text


def test_keepalive_counts_as_activity(api):
    sid = api.session(idle_timeout_s=3)
    api.execute(sid, "x = 42")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 6:
        r = api.post(f"/v1/sessions/{sid}/keepalive")
        assert r.status_code == 204, r.text
        assert r.content == b""
        time.sleep(0.5)     # 6 s of keepalives, twice the idle timeout, must pass
    assert api.execute(sid, "x")["results"] == [{"text/plain": "42"}]
    r = api.post(f"/v1/sessions/{sid}/keepalive", {"idle_timeout_s": 10})
    assert r.status_code == 400 and "PATCH" in error_of(r.content)["message"], r.text
    r = api.get(f"/v1/sessions/{sid}/keepalive")
    assert r.status_code == 405 and r.headers["Allow"] == "POST", r.text
    api.delete(f"/v1/sessions/{sid}")
    assert api.post(f"/v1/sessions/{sid}/keepalive").status_code == 404


# ---- an execution's environment ----------------------------------------------

def out(res):
    assert res["status"] == "ok", res
    return res["stdout"]


def test_execution_env_is_for_that_execution_only(api):
    sid = api.session(env={"KEPT": "session"})
    show = "import os; print(os.environ.get('ONCE'), os.environ.get('KEPT'))"
    assert out(api.execute(sid, show, env={"ONCE": "1", "KEPT": "exec"})) == "1 exec\n"
    assert out(api.execute(sid, show)) == "None session\n"
    # What the code sets of those names is undone too; other names stay.
    api.execute(sid, "import os; os.environ['ONCE'] = 'mine'; os.environ['OTHER'] = 'o'",
                env={"ONCE": "1"})
    assert out(api.execute(sid, show + "; print(os.environ['OTHER'])")) == "None session\no\n"


def test_execution_env_reaches_bash_and_c(api):
    sid = api.session()
    assert out(api.execute(sid, 'echo "$ONCE"', language="bash", env={"ONCE": "b"})) == "b\n"
    assert out(api.execute(sid, 'echo "[$ONCE]"', language="bash")) == "[]\n"
    c = ('#include <stdio.h>\n#include <stdlib.h>\n'
         'int main(void) { const char *v = getenv("ONCE"); puts(v ? v : "unset"); }\n')
    assert out(api.execute(sid, c, language="c", env={"ONCE": "c"})) == "c\n"
    assert out(api.execute(sid, c, language="c")) == "unset\n"


def test_execution_env_is_checked_as_the_sessions(api):
    sid = api.session()
    for env, word in (({"PATH": "/evil"}, "set by petri"), ({"1X": "v"}, "names are"),
                      ({"X": 1}, "strings"), ("X=1", "object")):
        r = api.post(f"/v1/sessions/{sid}/execute", {"code": "1", "env": env})
        assert r.status_code == 400, (env, r.text)
        assert word in error_of(r.content)["message"], (env, r.text)
        r2 = api.post("/v1/sessions", {"env": env})
        assert error_of(r.content) == error_of(r2.content)
    assert out(api.execute(sid, "import os; print(os.environ['PATH'] != '/evil')")) == "True\n"


def test_oneshot_and_streamed_execution_env(server, api):
    r = api.post("/v1/execute", {"code": "import os; print(os.environ['ONCE'])",
                                 "env": {"ONCE": "one-shot"}})
    assert r.status_code == 200 and r.json()["stdout"] == "one-shot\n", r.text
    r = api.post("/v1/execute", {"code": "1", "env": {"HOME": "/"}})
    assert r.status_code == 400, r.text
    sid = api.session()
    st = SSE(server.url, f"/v1/sessions/{sid}/execute",
             {"code": "import os; print(os.environ['ONCE'])", "env": {"ONCE": "streamed"}})
    assert st.status == 200
    events = list(st)
    st.close()
    assert "".join(d["text"] for _, ev, d in events if ev == "stdout") == "streamed\n", events
    assert events[-1][1] == "done" and events[-1][2]["status"] == "ok", events
    assert out(api.execute(sid, "import os; print(os.environ.get('ONCE'))")) == "None\n"
