"""Commands: processes a client starts beside the interpreter and comes back
to (POST/GET /v1/sessions/{id}/commands, docs/api.md "Commands"): a server
that runs while code runs, its output read later from where the reader got
to, stdin, deadlines, signals, bounds, and refusals.

Nothing asserts on how long anything took: a read waits for what it needs
(wait_for=output|end) with a deadline far above what it should take.
"""
import base64

from apihelp import wait_for


def start(api, sid, **body):
    r = api.post(f"/v1/sessions/{sid}/commands", body)
    assert r.status_code == 201, r.text
    return r.json()


def read(api, sid, pid, **query):
    r = api.get(f"/v1/sessions/{sid}/commands/{pid}", params=query)
    assert r.status_code == 200, r.text
    return r.json()


def refused(r, status, code):
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code, r.text
    return r.json()["error"]["message"]


def test_a_command_runs_to_its_end_and_says_how(server):
    api = server.api()
    sid = api.session()
    c = start(api, sid, command="echo hi; echo oops >&2; exit 3", wait_s=30)
    assert c["running"] is False and c["exit_code"] == 3 and c["signal"] is None, c
    assert (c["stdout"], c["stderr"]) == ("hi\n", "oops\n"), c
    assert c["stdout_offset"] == 0 and c["stdout_next"] == 3 and c["stderr_next"] == 5, c
    assert c["stdout_missed"] == 0 and c["timed_out"] is False and c["lost"] is False, c
    assert c["asked"] == {"command": "echo hi; echo oops >&2; exit 3", "cwd": "/work",
                          "stdin": False}, c
    assert c["started_at"].endswith("Z") and c["ended_at"].endswith("Z"), c
    # Read again from where that read got to: nothing new, the same end.
    again = read(api, sid, c["pid"], stdout_from=3, stderr_from=5)
    assert (again["stdout"], again["stderr"], again["exit_code"]) == ("", "", 3), again
    # Listed, without its output.
    listed = api.get(f"/v1/sessions/{sid}/commands").json()["commands"]
    assert [x["pid"] for x in listed] == [c["pid"]], listed
    assert "stdout" not in listed[0] and listed[0]["stdout_bytes"] == 3, listed


def test_a_server_runs_beside_the_code_and_stops_on_a_signal(server):
    api = server.api()
    sid = api.session()
    c = start(api, sid, args=["python3", "-u", "-m", "http.server", "8123", "--bind",
                              "127.0.0.1"], tag="web")
    assert c["running"] is True and c["exit_code"] is None, c
    # What it prints comes as it prints it: wait for its first line.
    got, at = "", 0
    while "Serving HTTP" not in got:
        r = read(api, sid, c["pid"], stdout_from=at, wait_s=30)
        assert r["running"], r
        got += r["stdout"]
        at = r["stdout_next"]
    # The interpreter reaches it while it runs, as its own code would.
    res = api.execute(sid, "import urllib.request\n"
                           "urllib.request.urlopen('http://127.0.0.1:8123/').status")
    assert res["status"] == "ok" and res["results"][0]["text/plain"] == "200", res
    # Its log of that request, read from where the last read ended.
    r = read(api, sid, c["pid"], stderr_from=0, stdout_from=at, wait_s=30)
    assert '"GET / HTTP/1.1" 200' in r["stderr"], r
    # A signal through the processes endpoint: its end says which.
    assert api.delete(f"/v1/sessions/{sid}/processes/{c['pid']}").status_code == 202
    end = read(api, sid, c["pid"], stdout_from=at, wait_for="end", wait_s=30)
    assert end["running"] is False and end["signal"] == 15 and end["exit_code"] is None, end
    assert end["asked"]["tag"] == "web", end


def test_stdin_is_written_and_closed(server):
    api = server.api()
    sid = api.session()
    c = start(api, sid, args=["cat"], stdin=True)
    path = f"/v1/sessions/{sid}/commands/{c['pid']}/stdin"
    r = api.post(path, {"input": "hello\n"})
    assert r.status_code == 200 and r.json() == {"pid": c["pid"], "written": 6,
                                                  "closed": False}, r.text
    assert read(api, sid, c["pid"], wait_s=30)["stdout"] == "hello\n"
    raw = base64.b64encode(b"\x00bytes\xff").decode()
    assert api.post(path, {"input_base64": raw, "close": True}).json()["closed"] is True
    end = read(api, sid, c["pid"], wait_for="end", wait_s=30)
    assert end["exit_code"] == 0 and end["stdout"] == "hello\n\x00bytes\ufffd", end
    # Ended: nothing to write to.
    refused(api.post(path, {"input": "x"}), 404, "process_not_found")
    # Started without stdin: it read end of file, and takes none.
    d = start(api, sid, command="cat; sleep 30")
    message = refused(api.post(f"/v1/sessions/{sid}/commands/{d['pid']}/stdin",
                               {"input": "x"}), 409, "stdin_closed")
    assert "'stdin': true" in message
    api.delete(f"/v1/sessions/{sid}/processes/{d['pid']}?signal=KILL")


def test_output_past_what_is_kept_is_counted_and_said(server):
    api = server.api()
    sid = api.session()
    c = start(api, sid, command="head -c 200000 /dev/zero | tr '\\0' a; echo -n b",
              wait_s=30)
    kept = 64 * 1024
    assert c["stdout_bytes"] == 200001 and c["exit_code"] == 0, {
        k: v for k, v in c.items() if k != "stdout"}
    assert c["stdout_offset"] == 200001 - kept and c["stdout_missed"] == 200001 - kept
    assert len(c["stdout"]) == kept and c["stdout"].endswith("aab"), len(c["stdout"])
    tail = read(api, sid, c["pid"], stdout_from=200000)
    assert (tail["stdout"], tail["stdout_missed"], tail["stdout_next"]) == ("b", 0, 200001)


def test_a_character_is_never_cut_between_reads(server):
    api = server.api()
    sid = api.session()
    # An "é" in two writes, a second apart.
    c = start(api, sid, command="printf 'a\\303'; sleep 1; printf '\\251'")
    first = read(api, sid, c["pid"], wait_s=30)
    assert first["stdout"] == "a" and first["stdout_next"] == 1, first
    # Half a character is nothing to wait for: the read waits for the rest.
    rest = read(api, sid, c["pid"], stdout_from=1, wait_s=30)
    assert rest["stdout"] == "\u00e9" and rest["stdout_next"] == 3, rest


def test_a_deadline_kills_it_and_cwd_and_env_apply(server):
    api = server.api()
    sid = api.session()
    c = start(api, sid, command="echo $GREETING; pwd; exec sleep 60", timeout_s=1,
              cwd="/tmp", env={"GREETING": "hello"}, wait_s=30)
    assert c["running"] is False and c["timed_out"] is True and c["signal"] == 9, c
    assert c["stdout"] == "hello\n/tmp\n", c
    # What it was asked is shown back, the variables' values never.
    assert c["asked"]["env"] == ["GREETING"] and c["asked"]["timeout_s"] == 1, c
    long = start(api, sid, command="true #" + "x" * 5000, wait_s=30)
    assert long["asked"]["truncated"] is True and len(long["asked"]["command"]) == 1024
    api.execute(sid, "import os; os.makedirs('sub/dir')")
    assert start(api, sid, args=["pwd"], cwd="sub/dir", wait_s=30)["stdout"] == \
        "/work/sub/dir\n"


def test_ended_commands_are_kept_eight_deep(server):
    api = server.api()
    sid = api.session()
    pids = [start(api, sid, args=["true"], wait_s=30)["pid"] for _ in range(9)]
    listed = [x["pid"] for x in api.get(f"/v1/sessions/{sid}/commands").json()["commands"]]
    assert listed == pids[:0:-1], (listed, pids)
    refused(api.get(f"/v1/sessions/{sid}/commands/{pids[0]}"), 404, "process_not_found")


def test_a_long_running_command_outlives_later_short_ones(server):
    api = server.api()
    sid = api.session()
    long = start(api, sid, command="echo started; exec sleep 600")
    for _ in range(9):
        start(api, sid, args=["true"], wait_s=30)
    # It ends after them: the first of them to end is forgotten, not it.
    api.delete(f"/v1/sessions/{sid}/processes/{long['pid']}?signal=KILL")
    end = read(api, sid, long["pid"], wait_for="end", wait_s=30)
    assert end["signal"] == 9 and end["stdout"] == "started\n", end


def test_waiting_reads_are_bounded_and_a_hang_up_frees_one(make_server):
    import select
    import socket
    # Two workers beside the executions: one read may wait at a time.
    srv = make_server("[server]\nmax_executions = 4\nhttp_workers = 6\n")
    api = srv.api()
    sid = api.session()
    c = start(api, sid, command="exec sleep 600")
    path = f"/v1/sessions/{sid}/commands/{c['pid']}"
    # A raw request that waits, then hangs up.
    host, port = srv.url.split("//")[1].split(":")
    waiting = []

    def wait_raw():
        sock = socket.create_connection((host, int(port)))
        sock.sendall(f"GET {path}?wait_s=60 HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
                     .encode())
        waiting.append(sock)

    def second_refused():
        # The raw one lost the race for the slot (answered already): again.
        if select.select([waiting[-1]], [], [], 0)[0]:
            waiting[-1].close()
            wait_raw()
            return False
        r = api.get(path, params={"wait_s": 0.2})
        return r.status_code == 429 and r.json()["error"]["code"] == "over_capacity"
    wait_raw()
    assert wait_for(second_refused, 30)
    # Not waiting needs no slot.
    assert read(api, sid, c["pid"])["running"] is True
    waiting[-1].close()
    # Its slot is let go within a moment of the hang-up.
    assert wait_for(lambda: api.get(path, params={"wait_s": 0.2}).status_code == 200, 30)
    api.delete(f"/v1/sessions/{sid}/processes/{c['pid']}?signal=KILL")


def test_unread_output_does_not_keep_a_session_alive(make_server):
    srv = make_server()
    api = srv.api()
    sid = api.session(idle_timeout_s=2)
    start(api, sid, command="while :; do echo tick; sleep 0.1; done")
    # Its output goes on, but nobody reads it: the session expires.
    assert wait_for(lambda: api.get(f"/v1/sessions/{sid}").status_code == 410, 60)


def test_bad_requests_are_refused_and_lose_nothing(server):
    api = server.api()
    sid = api.session()
    base = f"/v1/sessions/{sid}/commands"
    refused(api.post(base, {"command": "true", "args": ["true"]}), 400, "invalid_request")
    refused(api.post(base, {}), 400, "invalid_request")
    refused(api.post(base, {"args": []}), 400, "invalid_request")
    refused(api.post(base, {"args": ["x", 1]}), 400, "invalid_request")
    refused(api.post(base, {"command": "true", "shell": True}), 400, "invalid_request")
    refused(api.post(base, {"command": "true", "wait_s": 61}), 400, "invalid_request")
    refused(api.post(base, {"command": "true", "timeout_s": 0}), 400, "invalid_request")
    refused(api.post(base, {"command": "true", "cwd": "../.."}), 400, "invalid_path")
    refused(api.post(base, {"command": "true", "tag": "x" * 300}), 400, "invalid_request")
    refused(api.post(base, {"command": "true", "cwd": "/work/nowhere"}), 400,
            "invalid_request")
    refused(api.post(base, {"command": "true", "env": {"PATH": "/x"}}), 400,
            "invalid_request")
    refused(api.get(f"{base}/99999"), 404, "process_not_found")
    refused(api.get(f"{base}/0"), 400, "invalid_request")
    refused(api.get(f"{base}/abc"), 400, "invalid_request")
    refused(api.get(f"{base}/1?stdout_from=-1"), 400, "invalid_request")
    refused(api.get(f"{base}/1?wait_for=never"), 400, "invalid_request")
    refused(api.get(f"{base}/1/nothing"), 404, "not_found")
    refused(api.post(f"{base}/1/stdin", {}), 400, "invalid_request")
    refused(api.post(f"{base}/1/stdin", {"input_base64": "!!"}), 400, "invalid_request")
    assert api.put(base).status_code == 405
    refused(api.post("/v1/sessions/nope/commands", {"command": "true"}), 404,
            "session_not_found")
    # The session works on.
    assert start(api, sid, args=["echo", "ok"], wait_s=30)["stdout"] == "ok\n"


def follow(api, sid, pid, until, wait=30):
    """Read pid's output from the start until it holds until."""
    said, at = "", 0
    while until not in said:
        got = read(api, sid, pid, stdout_from=at, wait_s=wait)
        assert got["stdout_next"] > at or got["running"], (said, got)
        said, at = said + got["stdout"], got["stdout_next"]
    return said


def test_a_command_on_a_terminal(server):
    api = server.api()
    sid = api.session()
    c = start(api, sid, command="exec bash --norc -i", pty={"rows": 30, "cols": 100})
    assert c["asked"]["pty"] == {"rows": 30, "cols": 100} and c["asked"]["stdin"] is True, c
    path = f"/v1/sessions/{sid}/commands/{c['pid']}"
    assert api.post(path + "/stdin", {"input": "stty size; tty\n"}).status_code == 200
    out = follow(api, sid, c["pid"], "30 100")
    assert "/dev/pts/" in follow(api, sid, c["pid"], "/dev/pts/"), out
    r = api.post(path + "/resize", {"rows": 40, "cols": 120})
    assert r.status_code == 200 and r.json() == {"pid": c["pid"], "rows": 40, "cols": 120}
    api.post(path + "/stdin", {"input": "stty size\n"})
    follow(api, sid, c["pid"], "40 120")
    api.post(path + "/stdin", {"input": "exit 7\n"})
    assert read(api, sid, c["pid"], wait_for="end", wait_s=30)["exit_code"] == 7
    # Sizes out of bounds; a command without a terminal has none to resize.
    refused(api.post(f"/v1/sessions/{sid}/commands", {"command": "true", "pty": {"rows": 0}}),
            400, "invalid_request")
    refused(api.post(f"/v1/sessions/{sid}/commands", {"command": "true", "pty": [1]}),
            400, "invalid_request")
    assert "unknown field 'width'" in refused(api.post(
        f"/v1/sessions/{sid}/commands", {"command": "true", "pty": {"width": 3}}),
        400, "invalid_request")
    d = start(api, sid, command="exec sleep 60")
    refused(api.post(f"/v1/sessions/{sid}/commands/{d['pid']}/resize", {"rows": 1, "cols": 1}),
            409, "not_a_terminal")
    refused(api.post(f"/v1/sessions/{sid}/commands/{d['pid']}/resize", {"rows": 1}),
            400, "invalid_request")
    api.delete(f"/v1/sessions/{sid}/processes/{d['pid']}?signal=KILL")


def test_what_a_session_uses_now(server):
    api = server.api()
    sid = api.session(limits={"memory_mb": 512})
    before = api.get(f"/v1/sessions/{sid}/usage").json()
    assert before["memory_limit_bytes"] == 512 << 20 and before["memory_bytes"] > 0, before
    assert before["work_total_bytes"] > 0 and before["at"].endswith("Z"), before
    api.execute(sid, "x = sum(i * i for i in range(3_000_000))\n"
                     "open('big', 'wb').write(b'x' * (4 << 20))")
    after = api.get(f"/v1/sessions/{sid}/usage").json()
    assert after["cpu_ms"] > before["cpu_ms"], (before, after)
    assert after["work_used_bytes"] >= before["work_used_bytes"] + (4 << 20), (before, after)
    assert api.post(f"/v1/sessions/{sid}/usage", {}).status_code == 405


def test_one_api_key_cannot_take_every_process_of_the_server(make_server):
    from harness import Api
    # Four keys: each may hold a quarter of the server's 1024 processes.
    srv = make_server("[server]\napi_keys = key-a, key-b, key-c, key-d\n")
    a, b = Api(srv.url, key="key-a"), Api(srv.url, key="key-b")
    held = 0
    for _ in range(8):
        sid = a.session()
        for _ in range(32):
            r = a.post(f"/v1/sessions/{sid}/commands", {"args": ["sleep", "600"]})
            assert r.status_code == 201, (held, r.text)
            held += 1
    sid = a.session()
    message = refused(a.post(f"/v1/sessions/{sid}/commands", {"args": ["true"]}), 429,
                      "over_capacity")
    assert "API key" in message and "256" in message, message
    # Another key's sessions start theirs.
    other = b.session()
    assert start(b, other, args=["echo", "mine"], wait_s=30)["stdout"] == "mine\n"
