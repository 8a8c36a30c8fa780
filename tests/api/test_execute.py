"""Executions in a session: rich results, errors, several languages, and
the limits (timeout with interrupt, SIGINT ignored, OOM); the one-shot
POST /v1/execute."""
import base64
import io
import os
import secrets
import time

import pytest

from apihelp import error_of, png_size
from harness import naming, pids_named, read_text, wait_for

RESULT_KEYS = {"status", "exit_code", "signal", "stdout", "stderr", "stdout_truncated",
               "stderr_truncated", "results", "error", "files", "duration_ms", "cpu_ms",
               "memory_peak_bytes", "reason"}


def check_result(res):
    assert RESULT_KEYS <= set(res), set(res) ^ RESULT_KEYS
    assert res["status"] in ("ok", "error", "timeout", "oom", "killed")
    for k in ("duration_ms", "cpu_ms", "memory_peak_bytes"):
        assert isinstance(res[k], int) and res[k] >= 0, (k, res[k])
    return res


@pytest.fixture
def sid(api):
    s = api.session()
    yield s
    api.delete(f"/v1/sessions/{s}")


def test_result_object_shape(api, sid):
    res = check_result(api.execute(sid, "print('hi')\nimport sys\nprint('err', file=sys.stderr)\n6*7"))
    assert res["status"] == "ok"
    assert res["exit_code"] == 0
    assert res["stdout"] == "hi\n" and res["stderr"] == "err\n"
    assert res["results"] == [{"text/plain": "42"}]
    assert res["error"] is None and res["reason"] is None and res["signal"] is None


def test_matplotlib_chart_is_png(api, sid):
    res = check_result(api.execute(
        sid, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\nNone"))
    assert res["status"] == "ok", res
    pngs = [b["image/png"] for b in res["results"] if "image/png" in b]
    assert len(pngs) == 1, res["results"]
    data = base64.b64decode(pngs[0], validate=True)
    w, h = png_size(data)
    assert 200 <= w <= 4000 and 200 <= h <= 4000, (w, h)
    # And it decodes as an image, not just a header.
    from PIL import Image
    img = Image.open(io.BytesIO(data))
    img.load()
    assert img.size == (w, h)
    assert len(set(img.convert("L").getdata())) > 2, "the chart is blank"
    # Figures are closed after being sent: the next execution sends none.
    res = api.execute(sid, "1")
    assert all("image/png" not in b for b in res["results"])


def test_dataframe_has_html(api, sid):
    res = check_result(api.execute(
        sid, "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, 19.25]})\ndf"))
    assert res["status"] == "ok", res
    assert len(res["results"]) == 1
    bundle = res["results"][0]
    assert "text/html" in bundle and "text/plain" in bundle
    html = bundle["text/html"]
    assert "<table" in html and "dataframe" in html
    for cell in ("city", "temp", "Oslo", "Lima", "19.25"):
        assert cell in html
    assert "Oslo" in bundle["text/plain"]


def test_exception_is_structured(api, sid):
    code = "a = 1\nb = 0\nc = a / b\nprint('never')"
    res = check_result(api.execute(sid, code))
    assert res["status"] == "error"
    assert res["exit_code"] == 1
    assert res["stdout"] == ""
    err = res["error"]
    assert err["name"] == "ZeroDivisionError"
    assert err["message"] == "division by zero"
    tb = err["traceback"]
    assert 'line 3, in <module>' in tb, tb
    assert "c = a / b" in tb
    assert "driver.py" not in tb and "/opt/petri" not in tb, tb
    assert tb.rstrip().endswith("ZeroDivisionError: division by zero")
    # The session survives an exception, with what ran before it.
    res = api.execute(sid, "a, b")
    assert res["results"] == [{"text/plain": "(1, 0)"}]


def test_exception_in_function_from_earlier_cell(api, sid):
    api.execute(sid, "def parse(s):\n    # a comment\n    return int(s)\n")
    res = api.execute(sid, "x = 5\nparse('five')")
    err = res["error"]
    assert err["name"] == "ValueError"
    assert "invalid literal for int()" in err["message"]
    tb = err["traceback"]
    # Both the calling line and the line inside the function are shown.
    assert "line 2, in <module>" in tb and "parse('five')" in tb, tb
    assert "line 3, in parse" in tb and "return int(s)" in tb, tb


def test_syntax_error(api, sid):
    res = api.execute(sid, "x = 1\nif x\n  pass")
    assert res["status"] == "error"
    assert res["error"]["name"] == "SyntaxError"
    assert "if x" in res["error"]["traceback"]


def test_bash_and_c_read_what_python_wrote(api, sid):
    res = api.execute(sid, "open('data.txt', 'w').write('3\\n4\\n5\\n')")
    assert res["status"] == "ok", res
    assert any(f["path"] == "data.txt" and f["size"] == 6 for f in res["files"]), res["files"]

    res = api.execute(sid, "total=0; while read n; do total=$((total+n)); done < data.txt; "
                           "echo bash-sum=$total", language="bash")
    assert res["status"] == "ok" and res["stdout"] == "bash-sum=12\n", res

    c = r'''
#include <stdio.h>
int main(void) {
    FILE *f = fopen("data.txt", "r");
    int n, total = 0;
    if (!f) { perror("fopen"); return 2; }
    while (fscanf(f, "%d", &n) == 1) total += n * n;
    fclose(f);
    printf("c-sumsq=%d\n", total);
    FILE *o = fopen("from_c.txt", "w");
    fprintf(o, "%d\n", total);
    fclose(o);
    return 0;
}
'''
    res = api.execute(sid, c, language="c")
    assert res["status"] == "ok", res
    assert res["stdout"] == "c-sumsq=50\n"

    res = api.execute(sid, "cat from_c.txt > from_bash.txt; echo bash-wrote >> from_bash.txt",
                      language="bash")
    assert res["status"] == "ok", res
    res = api.execute(sid, "open('from_bash.txt').read().split()")
    assert res["results"] == [{"text/plain": "['50', 'bash-wrote']"}], res


def test_bash_nonzero_exit_and_c_compile_error(api, sid):
    res = api.execute(sid, "echo out; echo oops >&2; exit 3", language="bash")
    assert res["status"] == "error"
    assert res["exit_code"] == 3
    assert res["stdout"] == "out\n" and res["stderr"] == "oops\n"
    assert res["error"]["name"] == "NonZeroExit"
    res = api.execute(sid, "int main(void) { return undefined_thing; }", language="c")
    assert res["status"] == "error"
    assert res["error"]["name"] == "CompileError"
    assert "undefined_thing" in res["error"]["traceback"]


def test_timeout_interrupts_and_keeps_state(api):
    sid = api.session(limits={"timeout_s": 1})
    api.execute(sid, "before = 'kept'")
    t0 = time.monotonic()
    res = check_result(api.execute(sid, "import time\nstep = 1\ntime.sleep(30)\nstep = 2"))
    took = time.monotonic() - t0
    assert res["status"] == "timeout", res
    assert "interrupt" in res["reason"], res["reason"]
    assert "kept" in res["reason"], res["reason"]
    assert took < 6, took
    res = api.execute(sid, "before, step")
    assert res["status"] == "ok"
    assert res["results"] == [{"text/plain": "('kept', 1)"}], res
    # A per-execution timeout_s below the session's works the same way.
    res = api.execute(sid, "import time\ntime.sleep(5)", timeout_s=0.3)
    assert res["status"] == "timeout" and res["duration_ms"] < 3000
    api.delete(f"/v1/sessions/{sid}")


def test_sigint_ignored_is_killed_after_grace_and_the_interpreter_replaced(api):
    sid = api.session(limits={"timeout_s": 1})
    t0 = time.monotonic()
    res = check_result(api.execute(
        sid, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
             "while True:\n    time.sleep(0.05)"))
    took = time.monotonic() - t0
    assert res["status"] == "timeout" and res["restarted"], res
    assert res["reason"] == ("time limit of 1 s exceeded; the code did not stop when "
                             "interrupted; a fresh interpreter took its place: variables "
                             "are lost, files in /work are kept"), res["reason"]
    assert 1.5 < took < 10, took          # the timeout, then the grace
    # The session lives on, with a fresh interpreter and nothing of the
    # old one's processes.
    res = check_result(api.execute(sid, "import os\nprint(sorted(int(p) for p in "
                                        "os.listdir('/proc') if p.isdigit()) == [1, 2, os.getpid()])"))
    assert res["status"] == "ok" and res["stdout"] == "True\n", res


def flavours(bug=None):
    """Run on the default server (warm sandboxes) and on a cold one; bug:
    the warm variant is a known failure."""
    warm = pytest.param("warm", marks=pytest.mark.xfail(reason=bug, strict=True)) if bug else "warm"
    return pytest.mark.parametrize("flavour", [warm, "cold"])


@pytest.fixture
def fapi(request, flavour):
    """Api of the default (warm) server or of the cold one."""
    srv = request.getfixturevalue("server" if flavour == "warm" else "cold_server")
    return srv.api()


def expect_gone(api, sid, words):
    for method, path, body in (("POST", f"/v1/sessions/{sid}/execute", {"code": "1"}),
                               ("GET", f"/v1/sessions/{sid}", None),
                               ("GET", f"/v1/sessions/{sid}/files", None)):
        r = api.request(method, path, json=body)
        assert r.status_code == 410, (path, r.text)
        e = error_of(r.content)
        assert e["code"] == "session_gone"
        assert words in e["message"], e


def expect_fresh(api, sid, file="kept.txt"):
    """The session lives on with a fresh interpreter: its file is there,
    its variable is not."""
    res = check_result(api.execute(sid, f"print(open({file!r}).read(), 'kept' in dir())"))
    assert res["status"] == "ok" and res["stdout"] == "yes False\n", res
    assert res["restarted"] is False, res


def keep_a_file(api, sid):
    res = api.execute(sid, "kept = open('kept.txt', 'w').write('yes')")
    assert res["status"] == "ok" and res["restarted"] is False, res


@flavours()
def test_oom_restarts_the_interpreter_and_keeps_the_files(fapi, flavour):
    sid = fapi.session(limits={"memory_mb": 64, "timeout_s": 4})
    keep_a_file(fapi, sid)
    t0 = time.monotonic()
    res = check_result(fapi.execute(sid, "print('before', flush=True)\nblocks = []\n"
                                         "while True:\n    blocks.append(bytearray(8 << 20))"))
    assert res["status"] == "oom" and res["restarted"] is True, res
    assert res["stdout"] == "before\n", res
    assert res["reason"].startswith("the memory limit was reached and the interpreter was "
                                    "killed; a fresh interpreter took its place"), res
    assert time.monotonic() - t0 < 3.5
    expect_fresh(fapi, sid)
    # Again: the fresh one is as good as the first.
    res = fapi.execute(sid, "blocks = [bytearray(8 << 20) for _ in range(100)]")
    assert res["status"] == "oom" and res["restarted"] is True, res
    expect_fresh(fapi, sid)


@flavours()
def test_the_interpreter_exiting_is_a_restart(fapi, flavour):
    sid = fapi.session(limits={"timeout_s": 4})
    keep_a_file(fapi, sid)
    t0 = time.monotonic()
    res = check_result(fapi.execute(sid, "import os\nos._exit(3)"))
    assert res["status"] == "error" and res["exit_code"] == 3, res
    assert res["reason"] == ("the interpreter exited with status 3; a fresh interpreter took "
                             "its place: variables are lost, files in /work are kept"), res
    assert res["restarted"] is True
    assert time.monotonic() - t0 < 3.5
    expect_fresh(fapi, sid)


@flavours()
def test_the_interpreter_killed_by_a_signal_is_a_restart(fapi, flavour):
    sid = fapi.session(limits={"timeout_s": 4})
    keep_a_file(fapi, sid)
    res = check_result(fapi.execute(sid, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"))
    assert res["status"] == "killed" and res["signal"] == 11, res
    assert res["restarted"] is True and "signal 11" in res["reason"], res
    expect_fresh(fapi, sid)


@flavours()
def test_the_interpreter_ending_between_executions(fapi, flavour):
    # A thread ends the interpreter after the execution's "done": the next
    # execution runs in a fresh one, and says so.
    sid = fapi.session(limits={"timeout_s": 4})
    keep_a_file(fapi, sid)
    name = f"die{secrets.token_hex(6)}"
    res = fapi.execute(sid, "import os, threading, time\n"
                            + naming(name) +
                            "threading.Thread(target=lambda: (time.sleep(0.3), os._exit(7))).start()")
    assert res["status"] == "ok" and res["restarted"] is False, res
    # The keeper has reaped the interpreter: no process has its name (a
    # zombie would).
    assert wait_for(lambda: not pids_named(name), 30), "the interpreter did not end"
    res = check_result(fapi.execute(sid, "print(open('kept.txt').read(), 'kept' in dir())"))
    assert res["status"] == "ok" and res["stdout"] == "yes False\n", res
    assert res["restarted"] is True, res
    assert res["reason"].startswith("the interpreter exited with status 7 after the last "
                                    "execution; a fresh one ran this code"), res
    expect_fresh(fapi, sid)


def hogging(name):
    """Each process named name has a thread named "hogging" (so too once
    it has ended)."""
    for pid in pids_named(name):
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        if not any(read_text(f"/proc/{pid}/task/{t}/comm") == "hogging\n" for t in tasks):
            return False
    return True


@flavours()
def test_an_execution_the_dying_interpreter_never_started_runs_in_the_next(fapi, flavour):
    # A thread starves the main thread (which would read the next exec) and
    # then ends the interpreter: the exec it never started is not reported
    # as ended with it, it runs in the fresh interpreter.
    sid = fapi.session(limits={"timeout_s": 10})
    keep_a_file(fapi, sid)
    name = f"calm{secrets.token_hex(5)}"
    res = fapi.execute(sid, "import os, sys, threading, time\n"
                            + naming(name) +
                            "def hog():\n"
                            "    time.sleep(0.2)\n"
                            "    sys.setswitchinterval(100)\n"
                            "    " + naming("hogging") +
                            "    t = time.monotonic()\n"
                            "    while time.monotonic() - t < 1.5: pass\n"
                            "    os._exit(0)\n"
                            "threading.Thread(target=hog).start()")
    assert res["status"] == "ok", res
    # The next exec goes once the thread hogs: it names itself then (or
    # has already ended the process).
    assert wait_for(lambda: hogging(name), 30, 0.05), "the thread never began to hog"
    res = check_result(fapi.execute(sid, "open('ran.txt', 'w').write('yes')\nprint('ran')"))
    assert res["status"] == "ok" and res["stdout"] == "ran\n" and res["restarted"], res
    assert "exited with status 0 after the last execution" in res["reason"], res
    assert fapi.execute(sid, "print(open('ran.txt').read())")["stdout"] == "yes\n"


@flavours()
def test_the_interpreter_dies_after_large_results(fapi, flavour):
    # Whole frames written before the end are kept; the one it was writing
    # is dropped by the keeper, never half-passed on.
    sid = fapi.session(limits={"timeout_s": 8})
    keep_a_file(fapi, sid)
    res = check_result(fapi.execute(sid, "class Big:\n"
                                         "    def _repr_html_(self): return 'a' * (3 << 20)\n"
                                         "display(Big())\ndisplay(Big())\n"
                                         "import os\nos._exit(5)"))
    assert res["status"] == "error" and res["exit_code"] == 5 and res["restarted"], res
    assert [len(r["text/html"]) for r in res["results"]] == [3 << 20] * 2, \
        [len(r.get("text/html", "")) for r in res["results"]]
    expect_fresh(fapi, sid)
    # Half a frame, then the end: the half never reaches the supervisor.
    res = check_result(fapi.execute(sid, "import os\n"
                                         "os.write(3, (1000).to_bytes(4, 'big') + b'{\"type\":\"result\"')\n"
                                         "os._exit(4)"))
    assert res["status"] == "error" and res["exit_code"] == 4 and res["restarted"], res
    expect_fresh(fapi, sid)


@flavours()
def test_what_a_dead_interpreter_left_is_killed(fapi, flavour):
    # A child of the interpreter holds its end of the control socket and
    # goes on running: the keeper kills it before the fresh one starts.
    sid = fapi.session(limits={"timeout_s": 6})
    keep_a_file(fapi, sid)
    res = check_result(fapi.execute(sid, "import os, time\n"
                                         "if os.fork() == 0:\n"
                                         "    while True: time.sleep(0.01)\n"
                                         "os._exit(0)"))
    assert res["status"] == "ok" and res["restarted"], res
    res = check_result(fapi.execute(sid, "import os\nprint(sorted(int(p) for p in os.listdir('/proc') "
                                         "if p.isdigit()) == [1, 2, os.getpid()])"))
    assert res["stdout"] == "True\n", res
    expect_fresh(fapi, sid)


@flavours()
@pytest.mark.parametrize("cut", ["close", "shutdown_wr", "shutdown_rdwr"])
def test_an_interpreter_that_cuts_its_control_socket_is_replaced(fapi, flavour, cut):
    sid = fapi.session(limits={"timeout_s": 6})
    keep_a_file(fapi, sid)
    code = {"close": "os.close(3)",
            "shutdown_wr": "socket.socket(fileno=os.dup(3)).shutdown(socket.SHUT_WR)",
            "shutdown_rdwr": "socket.socket(fileno=os.dup(3)).shutdown(socket.SHUT_RDWR)"}[cut]
    t0 = time.monotonic()
    res = check_result(fapi.execute(sid, f"import os, socket, time\n{code}\ntime.sleep(30)"))
    assert res["status"] == "killed" and res["signal"] == 9 and res["restarted"], res
    assert res["reason"].startswith("the interpreter closed its control socket and was "
                                    "killed; a fresh interpreter took its place"), res
    assert time.monotonic() - t0 < 5
    expect_fresh(fapi, sid)


@flavours()
@pytest.mark.parametrize("frame", ['{"type":"ready","python":"9.9.9","pid":1}',
                                   '{"type":"died","id":1,"status":0}',
                                   ' { "type" : "died" , "id" : 99, "status": 0}'])
def test_frames_only_the_keeper_sends_end_the_session(fapi, flavour, frame):
    sid = fapi.session(limits={"timeout_s": 6})
    body = frame.encode()
    res = check_result(fapi.execute(
        sid, f"import os\nbody = {body!r}\nos.write(3, len(body).to_bytes(4, 'big') + body)\n"
             "import time\ntime.sleep(5)"))
    assert res["status"] == "killed", res
    assert res["reason"] == ("protocol violation: the interpreter sent a frame only its "
                             "keeper sends"), res
    expect_gone(fapi, sid, "protocol violation")


@flavours()
def test_an_oversized_frame_ends_the_session(fapi, flavour):
    sid = fapi.session(limits={"timeout_s": 6})
    res = check_result(fapi.execute(
        sid, "import os, time\nos.write(3, ((16 << 20) + 1).to_bytes(4, 'big') + b'{')\n"
             "time.sleep(5)"))
    assert res["status"] == "killed", res
    assert res["reason"] == "protocol violation: the interpreter sent a frame over 16 MiB", res
    expect_gone(fapi, sid, "protocol violation")


@flavours()
def test_the_keeper_killed_ends_the_session(fapi, flavour):
    # The keeper is the sandbox's main process: the code can end it (as the
    # same user), and then the sandbox ends with it.
    sid = fapi.session(limits={"timeout_s": 4})
    res = check_result(fapi.execute(sid, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"))
    assert res["status"] == "killed" and res["signal"] == 9 and not res["restarted"], res
    expect_gone(fapi, sid, "signal 9")


@flavours()
def test_oom_of_a_child_process_keeps_the_interpreter(fapi, flavour):
    # The kernel kills the process that grew (its oom_score_adj is the
    # interpreter's, 1000, as large as the interpreter's shared pages of
    # the template make it): the interpreter and its variables live on.
    sid = fapi.session(limits={"memory_mb": 256, "timeout_s": 6})
    keep_a_file(fapi, sid)
    res = fapi.execute(sid, "python3 -c 'b = bytearray(400 << 20); print(len(b))'", language="bash")
    assert res["status"] == "oom" and res["restarted"] is False, res
    assert "400" not in res["stdout"]
    assert res["reason"] == ("the memory limit was reached and a process the code started was "
                             "killed; the session was kept"), res
    res = fapi.execute(sid, "print(kept)")
    assert res["status"] == "ok" and res["stdout"] == "3\n", res


@flavours()
def test_oneshot_memory_limit(fapi, flavour):
    r = fapi.post("/v1/execute", {"code": "b = bytearray(300 << 20)\nb[::4096] = b'x' * len(b[::4096])",
                                  "limits": {"memory_mb": 64, "timeout_s": 4}})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "oom", r.json()


def test_oneshot_with_files_and_limits(api):
    before = api.get("/healthz").json()["sessions"]
    csv = b"x,y\n1,10\n2,20\n3,60\n"
    r = api.post("/v1/execute", {
        "code": "import pandas as pd\ndf = pd.read_csv('in/data.csv')\n"
                "open('out.txt', 'w').write(str(df.y.mean()))\nprint(df.y.mean())\n"
                "df.x.sum()",
        "files": [{"path": "in/data.csv", "content_base64": base64.b64encode(csv).decode()},
                  {"path": "empty.bin", "content_base64": ""}],
        "limits": {"memory_mb": 256, "timeout_s": 20},
    })
    assert r.status_code == 200, r.text
    res = check_result(r.json())
    assert res["status"] == "ok", res
    assert res["stdout"] == "30.0\n"
    assert res["results"] == [{"text/plain": "6"}]
    assert any(f["path"] == "out.txt" and f["size"] == 4 for f in res["files"]), res["files"]
    # One-shots leave no session behind.
    assert api.get("/healthz").json()["sessions"] == before


def test_oneshot_stdin(api):
    r = api.post("/v1/execute", {"code": "print(sum(int(x) for x in input().split()))",
                                 "stdin": "1 2 3\n"})
    assert r.status_code == 200 and r.json()["stdout"] == "6\n", r.text
    r = api.post("/v1/execute", {"code": "tr a-z A-Z", "language": "bash", "stdin": "shout"})
    assert r.status_code == 200 and r.json()["stdout"] == "SHOUT", r.text
    r = api.post("/v1/execute", {"code": "1", "stdin": "x" * ((1 << 20) + 1)})
    assert r.status_code == 400 and "'stdin'" in error_of(r.content)["message"], r.text


def test_oneshot_languages_and_timeout(api):
    r = api.post("/v1/execute", {"code": "echo $((6*7))", "language": "bash"})
    assert r.status_code == 200 and r.json()["stdout"] == "42\n", r.text
    t0 = time.monotonic()
    r = api.post("/v1/execute", {"code": "import time\ntime.sleep(30)", "limits": {"timeout_s": 0.5}})
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["status"] == "timeout", res
    assert res["reason"]
    assert time.monotonic() - t0 < 8


def test_oneshot_bad_files(api):
    for files, code in (([{"path": "../x", "content_base64": ""}], "invalid_path"),
                        ([{"path": "/etc/x", "content_base64": ""}], "invalid_path"),
                        ([{"path": "a", "content_base64": "!!!"}], "invalid_request"),
                        ([{"path": "a"}], "invalid_request"),
                        ([{"path": "a", "content_base64": "", "mode": 7}], "invalid_request"),
                        ("nope", "invalid_request")):
        r = api.post("/v1/execute", {"code": "1", "files": files})
        assert r.status_code == 400, (files, r.text)
        assert error_of(r.content)["code"] == code, (files, r.text)


def test_output_is_capped_and_flagged(api):
    sid = api.session(limits={"output_kb": 2})
    res = api.execute(sid, "print('x' * 10000)\nimport sys\nsys.stderr.write('e' * 5000)\n'done'")
    assert res["status"] == "ok", res
    assert res["stdout_truncated"] is True and res["stderr_truncated"] is True
    assert 0 < len(res["stdout"]) <= 2048 and 0 < len(res["stderr"]) <= 2048
    assert res["results"] == [{"text/plain": "'done'"}]
    res = api.execute(sid, "print('short')")
    assert res["stdout"] == "short\n" and res["stdout_truncated"] is False
    api.delete(f"/v1/sessions/{sid}")


def test_non_utf8_output_comes_with_exact_bytes(api, sid):
    res = api.execute(sid, "printf 'ok\\377\\376end'", language="bash")
    assert res["status"] == "ok", res
    assert base64.b64decode(res["stdout_base64"]) == b"ok\xff\xfeend"
    assert res["stdout"].startswith("ok") and res["stdout"].endswith("end")


def test_c_session(api):
    sid = api.session(language="c")
    res = api.execute(sid, '#include <stdio.h>\nint main(void) { puts("from C"); return 0; }')
    assert res["status"] == "ok" and res["stdout"] == "from C\n", res
    res = api.execute(sid, "int main(void) { int *p = 0; return *p; }")
    assert res["status"] == "error" and res["error"]["name"] == "Signal", res
    assert api.execute(sid, "print('python too')", language="python")["stdout"] == "python too\n"
    api.delete(f"/v1/sessions/{sid}")


def test_oneshot_return_files(api):
    code = ("import os\nos.makedirs('out', exist_ok=True)\n"
            "open('out/a.csv', 'w').write('x\\n1\\n')\nopen('b.txt', 'wb').write(b'\\x00\\xffhi')\n"
            "open('in.csv', 'a').write('2\\n')\n")
    up = [{"path": "in.csv", "content_base64": base64.b64encode(b"x\n").decode()}]
    res = check_result(api.post("/v1/execute", {"code": code, "files": up,
                                                "return_files": True}).json())
    got = {f["path"]: f for f in res["files"]}
    assert set(got) == {"b.txt", "in.csv", "out/a.csv"}, res
    assert base64.b64decode(got["out/a.csv"]["content_base64"]) == b"x\n1\n"
    assert base64.b64decode(got["b.txt"]["content_base64"]) == b"\x00\xffhi"
    assert base64.b64decode(got["in.csv"]["content_base64"]) == b"x\n2\n"
    assert not any(f["truncated"] for f in got.values())

    # Globs select which come back; the others are still listed.
    res = api.post("/v1/execute", {"code": code, "files": up,
                                   "return_files": ["*.csv"]}).json()
    got = {f["path"]: f for f in res["files"]}
    assert "content_base64" in got["out/a.csv"] and "content_base64" in got["in.csv"]
    assert got["b.txt"] == {"path": "b.txt", "size": 4}
    # Without it nothing changes.
    res = api.post("/v1/execute", {"code": code}).json()
    assert all(set(f) == {"path", "size"} for f in res["files"])

    for bad in ("yes", [1], ["*"] * 65, {"a": 1}):
        r = api.post("/v1/execute", {"code": "1", "return_files": bad})
        assert r.status_code == 400 and error_of(r.text)["code"] == "invalid_request", bad


def test_oneshot_return_files_capped(make_server):
    srv = make_server("[server]\nmax_return_file_kb = 600\nmax_return_files_mb = 1\n")
    api = srv.api()
    code = ("for name, kib in (('a', 500), ('b', 500), ('c', 700), ('d', 1), ('e', 100)):\n"
            "    open(name + '.bin', 'wb').write(b'z' * (kib << 10))\n"
            "import os\nos.symlink('/etc/passwd', 'link')\n")
    r = api.post("/v1/execute", {"code": code, "return_files": True})
    assert r.status_code == 200, r.text
    got = {f["path"]: f for f in check_result(r.json())["files"]}
    assert sorted(got) == ["a.bin", "b.bin", "c.bin", "d.bin", "e.bin"]
    for name in ("a.bin", "b.bin", "d.bin"):
        assert len(base64.b64decode(got[name]["content_base64"])) == got[name]["size"]
        assert got[name]["truncated"] is False
    for name, why in (("c.bin", "max_return_file_kb"), ("e.bin", "max_return_files_mb")):
        assert got[name]["truncated"] is True and why in got[name]["reason"], got[name]
        assert "content_base64" not in got[name] and got[name]["size"] > 0
