"""Sessions: create, inspect, list, delete; state that persists from one
execution to the next; sessions that do not see each other."""
import re

import pytest


from apihelp import SSE, error_of

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def test_healthz(api):
    r = api.get("/healthz")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    j = r.json()
    assert j["status"] == "ok"
    assert isinstance(j["sessions"], int) and j["sessions"] >= 0


def test_create_get_list_delete(api):
    r = api.post("/v1/sessions", {})
    assert r.status_code == 201, r.text
    s = r.json()
    sid = s["id"]
    assert re.fullmatch(r"ses_[a-z0-9]{1,16}-[0-9a-f]{32}", sid)
    assert r.headers["Location"] == f"/v1/sessions/{sid}"
    assert s["language"] == "python"
    assert s["status"] == "idle"
    for k in ("created_at", "last_used_at", "expires_at"):
        assert ISO.match(s[k]), (k, s[k])
    assert set(s["limits"]) >= {"memory_mb", "cpu", "pids", "disk_mb", "timeout_s", "output_kb"}
    assert s["python_version"].startswith("3.")

    r = api.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200 and r.json()["id"] == sid

    r = api.get("/v1/sessions")
    assert r.status_code == 200
    assert sid in [x["id"] for x in r.json()["sessions"]]
    assert api.get("/healthz").json()["sessions"] >= 1

    r = api.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 204, r.text
    for method in ("GET", "DELETE"):
        r = api.request(method, f"/v1/sessions/{sid}")
        assert r.status_code == 404, (method, r.text)
        assert error_of(r.content)["code"] == "session_not_found"
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "1"})
    assert r.status_code == 404
    assert sid not in [x["id"] for x in api.get("/v1/sessions").json()["sessions"]]


def test_create_with_limits_and_env(api):
    sid = api.session(limits={"memory_mb": 128, "timeout_s": 5, "pids": 32},
                      env={"GREETING": "hello"})
    s = api.get(f"/v1/sessions/{sid}").json()
    assert s["limits"]["memory_mb"] == 128
    assert s["limits"]["timeout_s"] == 5
    assert s["limits"]["pids"] == 32
    res = api.execute(sid, "import os\nos.environ['GREETING']")
    assert res["results"][0]["text/plain"] == "'hello'"
    res = api.execute(sid, "echo $GREETING", language="bash")
    assert res["stdout"] == "hello\n"
    api.delete(f"/v1/sessions/{sid}")


def test_state_persists_variables(api):
    sid = api.session()
    api.execute(sid, "x = 41\nitems = [1, 2]")
    api.execute(sid, "x += 1\nitems.append(3)")
    res = api.execute(sid, "x, items")
    assert res["status"] == "ok", res
    assert res["results"] == [{"text/plain": "(42, [1, 2, 3])"}]
    api.delete(f"/v1/sessions/{sid}")


def test_state_persists_imports(api):
    sid = api.session()
    res = api.execute(sid, "import math as m\nimport collections")
    assert res["status"] == "ok" and res["results"] == []
    res = api.execute(sid, "m.sqrt(16), collections.Counter('aab')['a']")
    assert res["results"] == [{"text/plain": "(4.0, 2)"}], res
    api.delete(f"/v1/sessions/{sid}")


def test_state_persists_functions_and_classes(api):
    sid = api.session()
    api.execute(sid, "base = 10\ndef add(a):\n    return a + base\n"
                     "class Box:\n    def __init__(self, v):\n        self.v = v\n")
    api.execute(sid, "base = 100")
    res = api.execute(sid, "add(1), Box(7).v")
    assert res["results"] == [{"text/plain": "(101, 7)"}], res
    api.delete(f"/v1/sessions/{sid}")


def test_sessions_do_not_share_state_or_files(api):
    a, b = api.session(), api.session()
    api.execute(a, "secret = 'only-in-a'\nopen('a.txt', 'w').write('a')")
    res = api.execute(b, "'secret' in globals()")
    assert res["results"] == [{"text/plain": "False"}]
    res = api.execute(b, "import os\nos.path.exists('a.txt'), sorted(os.listdir('/work'))")
    assert res["results"] == [{"text/plain": "(False, [])"}], res
    r = api.get(f"/v1/sessions/{b}/files/a.txt")
    assert r.status_code == 404
    for sid in (a, b):
        api.delete(f"/v1/sessions/{sid}")


def test_bash_session_default_language(api):
    sid = api.session(language="bash")
    assert api.get(f"/v1/sessions/{sid}").json()["language"] == "bash"
    res = api.execute(sid, "echo from-bash; echo 42 > n.txt")
    assert res["status"] == "ok" and res["stdout"] == "from-bash\n", res
    res = api.execute(sid, "print(open('n.txt').read().strip())", language="python")
    assert res["stdout"] == "42\n"
    api.delete(f"/v1/sessions/{sid}")


def test_execute_touches_last_used(api):
    sid = api.session()
    before = api.get(f"/v1/sessions/{sid}").json()
    api.execute(sid, "import time; time.sleep(0.05)")
    after = api.get(f"/v1/sessions/{sid}").json()
    assert after["last_used_at"] > before["last_used_at"]
    assert after["expires_at"] >= before["expires_at"]
    api.delete(f"/v1/sessions/{sid}")


# ---- stdin ------------------------------------------------------------------

@pytest.fixture(params=["warm", "cold"])
def wapi(request):
    """Api of the default (warm) server or of the cold one."""
    return request.getfixturevalue("server" if request.param == "warm" else "cold_server").api()


def test_stdin_is_what_the_code_reads(wapi):
    sid = wapi.session()
    res = wapi.execute(sid, "name = input()\nrest = __import__('sys').stdin.read()\n"
                       "print('hello', name)\nrest", stdin="ada\nline 2\nline 3\n")
    assert res["status"] == "ok", res
    assert res["stdout"] == "hello ada\n"
    assert res["results"] == [{"text/plain": "'line 2\\nline 3\\n'"}], res
    # Without stdin, reading it gives end of file, as before; fd 0 is
    # /dev/null again and sys.stdin the usual one.
    res = wapi.execute(sid, "input()")
    assert res["error"]["name"] == "EOFError", res
    res = wapi.execute(sid, "import os, sys\n(os.readlink('/proc/self/fd/0'), "
                       "sys.stdin is sys.__stdin__)")
    assert res["results"] == [{"text/plain": "('/dev/null', True)"}], res
    # Programs read it as their standard input: bash, C.
    res = wapi.execute(sid, "read a; echo \"got $a\"; wc -l", language="bash", stdin="x\ny\nz\n")
    assert res["stdout"] == "got x\n2\n", res
    res = wapi.execute(sid, "#include <stdio.h>\nint main(void) { int a, b;\n"
                       "if (scanf(\"%d %d\", &a, &b) != 2) return 1;\n"
                       "printf(\"%d\\n\", a + b); return 0; }", language="c", stdin="40 2")
    assert res["status"] == "ok" and res["stdout"] == "42\n", res
    # Unicode, and a subprocess of Python code inherits it.
    res = wapi.execute(sid, "import subprocess\nsubprocess.run(['cat'])", stdin="ünïcødé ✓\n")
    assert res["stdout"] == "ünïcødé ✓\n", res
    wapi.delete(f"/v1/sessions/{sid}")


def test_stdin_of_a_streamed_execution(server):
    # The stream's execution outlives the request's body: stdin too.
    api = server.api()
    sid = api.session()
    st = SSE(server.url, f"/v1/sessions/{sid}/execute",
             {"code": "import time; time.sleep(0.2); print(input()[::-1])", "stdin": "desrever"})
    assert st.status == 200
    events = list(st)
    st.close()
    assert "".join(d["text"] for _, ev, d in events if ev == "stdout") == "reversed\n", events
    api.delete(f"/v1/sessions/{sid}")


def test_stdin_is_refused_when_not_a_string_or_too_large(wapi):
    sid = wapi.session()
    for body in ({"code": "1", "stdin": 3}, {"code": "1", "stdin": ["a"]},
                 {"code": "1", "stdin": "x" * ((1 << 20) + 1)}):
        r = wapi.post(f"/v1/sessions/{sid}/execute", body)
        assert r.status_code == 400, r.text
        e = error_of(r.content)
        assert e["code"] == "invalid_request" and "'stdin'" in e["message"], e
    # 1 MiB exactly is read whole; the session goes on.
    res = wapi.execute(sid, "len(__import__('sys').stdin.read())", stdin="y" * (1 << 20))
    assert res["results"] == [{"text/plain": str(1 << 20)}], res
    wapi.delete(f"/v1/sessions/{sid}")


# ---- interrupt --------------------------------------------------------------

def execute_in_thread(api, sid, body):
    """Start an execution; returns a function that waits for its response."""
    import threading
    box = {}
    t = threading.Thread(target=lambda: box.update(r=api.post(f"/v1/sessions/{sid}/execute", body)))
    t.start()

    def wait():
        t.join(120)
        return box["r"]
    return wait


def wait_busy(api, sid):
    assert api.wait_busy(sid, 60), "the execution never started"


def test_interrupt_stops_the_execution_and_keeps_the_session(wapi):
    sid = wapi.session()
    wapi.execute(sid, "kept = 41\nopen('f.txt', 'w').write('here')")
    r = wapi.post(f"/v1/sessions/{sid}/interrupt")
    assert r.status_code == 200 and r.json() == {"interrupted": False}, r.text
    for code, language, name in (
            ("import sys, time\nprint('started', flush=True)\ntime.sleep(60)", "python",
             "KeyboardInterrupt"),
            ("echo started; sleep 60", "bash", "KeyboardInterrupt")):
        wait = execute_in_thread(wapi, sid, {"code": code, "language": language})
        wait_busy(wapi, sid)
        r = wapi.post(f"/v1/sessions/{sid}/interrupt")
        assert r.status_code == 200 and r.json() == {"interrupted": True}, r.text
        r = wait()
        assert r.status_code == 200, r.text
        res = r.json()
        assert res["status"] == "error" and res["error"]["name"] == name, res
        assert res["reason"].startswith("interrupted;") and "session was kept" in res["reason"], res
        assert res["duration_ms"] < 30000, res
    # State, files and later executions as before; no interrupt left over.
    res = wapi.execute(sid, "import time; time.sleep(0.5); kept + 1, open('f.txt').read()")
    assert res["status"] == "ok" and res["results"] == [{"text/plain": "(42, 'here')"}], res
    wapi.delete(f"/v1/sessions/{sid}")


def test_interrupt_of_code_that_ignores_it_restarts_the_interpreter(wapi):
    sid = wapi.session()
    wait = execute_in_thread(wapi, sid, {"code": "import signal, time\n"
                                         "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                         "time.sleep(60)"})
    wait_busy(wapi, sid)
    assert wapi.post(f"/v1/sessions/{sid}/interrupt").json() == {"interrupted": True}
    res = wait().json()
    assert res["status"] == "killed" and res["restarted"], res
    assert res["reason"].startswith("interrupted; the code did not stop when interrupted; "
                                    "a fresh interpreter took its place"), res
    assert wapi.execute(sid, "1")["status"] == "ok"


def test_interrupt_of_unknown_session_and_bad_requests(api):
    r = api.post("/v1/sessions/ses_00000000000000000000000000000000/interrupt")
    assert r.status_code == 404 and error_of(r.content)["code"] == "session_not_found", r.text
    sid = api.session()
    r = api.get(f"/v1/sessions/{sid}/interrupt")
    assert r.status_code == 405, r.text
    r = api.post(f"/v1/sessions/{sid}/interrupt", {"now": True})
    assert r.status_code == 400, r.text
    api.delete(f"/v1/sessions/{sid}")
    r = api.post(f"/v1/sessions/{sid}/interrupt")
    assert r.status_code == 404, r.text


# ---- restart ----------------------------------------------------------------

def test_restart_keeps_files_and_forgets_variables_and_processes(wapi):
    sid = wapi.session(env={"GREETING": "hi"})
    res = wapi.execute(sid, "import os, subprocess\nx = 41\nopen('kept.txt', 'w').write('yes')\n"
                       "os.environ['GREETING'] = 'changed'\nos.environ['ADDED'] = '1'\n"
                       "subprocess.Popen(['sleep', '600'])\nos.chdir('/tmp')\nos.getpid()")
    pid = res["results"][0]["text/plain"]
    assert pid == "3", res         # the keeper's child
    assert len(wapi.get(f"/v1/sessions/{sid}/processes").json()["processes"]) == 1
    r = wapi.post(f"/v1/sessions/{sid}/restart")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == sid and r.json()["status"] == "idle", r.text
    res = wapi.execute(sid, "import os\n('x' in globals(), open('kept.txt').read(), os.getcwd(), "
                       "os.environ['GREETING'], os.environ.get('ADDED'), os.getppid(), "
                       "os.getpid() != 3)")
    assert res["status"] == "ok", res
    # A fresh interpreter (another process), forked by the same keeper.
    assert res["results"] == [{"text/plain": "(False, 'yes', '/work', 'hi', None, 2, True)"}], res
    assert wapi.get(f"/v1/sessions/{sid}/processes").json()["processes"] == [], "a process outlived"
    # Everything works as in a fresh session: the languages, stdin, imports.
    assert wapi.execute(sid, "echo $GREETING", language="bash")["stdout"] == "hi\n"
    assert wapi.execute(sid, "input()", stdin="again\n")["results"] == [{"text/plain": "'again'"}]
    assert wapi.execute(sid, "import json; json.dumps([1])")["results"] == [{"text/plain": "'[1]'"}]
    wapi.delete(f"/v1/sessions/{sid}")


def test_restart_interrupts_a_running_execution_first(wapi):
    sid = wapi.session()
    wapi.execute(sid, "y = 1")
    wait = execute_in_thread(wapi, sid, {"code": "import time\ntime.sleep(60)"})
    wait_busy(wapi, sid)
    r = wapi.post(f"/v1/sessions/{sid}/restart")
    assert r.status_code == 200, r.text
    res = wait().json()
    assert res["status"] == "error" and res["error"]["name"] == "KeyboardInterrupt", res
    res = wapi.execute(sid, "'y' in globals()")
    assert res["results"] == [{"text/plain": "False"}], res
    wapi.delete(f"/v1/sessions/{sid}")


def test_restart_of_unknown_session_and_bad_requests(api):
    r = api.post("/v1/sessions/ses_00000000000000000000000000000000/restart")
    assert r.status_code == 404 and error_of(r.content)["code"] == "session_not_found", r.text
    sid = api.session()
    assert api.get(f"/v1/sessions/{sid}/restart").status_code == 405
    assert api.post(f"/v1/sessions/{sid}/restart", {"x": 1}).status_code == 400
    api.execute(sid, "import os\nos.kill(os.getppid(), 9)")
    r = api.post(f"/v1/sessions/{sid}/restart")
    assert r.status_code == 410 and "signal 9" in error_of(r.content)["message"], r.text
