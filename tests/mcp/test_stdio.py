"""`petri mcp` over stdio, at the level of raw JSON-RPC lines: framing,
errors, the lifecycle, version negotiation, batches, cancellation, expiry
and shutdown."""
import json
import os
import re
import secrets
import signal
import time

import pytest

from harness import naming, pids_named, poll, wait_for
from mcphelp import PETRI, VERSIONS, text_of
from version import of_source, reported  # tests/version.py

INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "pytest", "version": "1"}}


def test_malformed_json_is_a_parse_error_and_the_server_goes_on(make_mcp):
    m = make_mcp()
    m.send(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    r = m.recv()
    assert r["jsonrpc"] == "2.0" and r["id"] is None
    assert r["error"]["code"] == -32700
    m.send(b"\xff\xfe not utf-8\n")
    assert m.recv()["error"]["code"] == -32700
    assert m.initialize()["result"]["protocolVersion"] == "2025-06-18"


@pytest.mark.parametrize("line, code", [
    (b'42', -32600),                                                   # not an object
    (b'"ping"', -32600),
    (b'{"id": 1, "method": "ping"}', -32600),                          # no jsonrpc
    (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', -32600),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600),  # bad id
    (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600),     # MCP: never null
    (b'{"jsonrpc": "2.0", "id": 1, "method": 7}', -32600),
    (b'{"jsonrpc": "2.0", "id": 1}', -32600),                          # no method
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": 3}', -32600),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}', -32602),
    (b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}', -32700),  # duplicate key
])
def test_invalid_requests(make_mcp, line, code):
    m = make_mcp()
    m.send(line + b"\n")
    r = m.recv()
    assert r["error"]["code"] == code, r
    assert isinstance(r["error"]["message"], str) and r["error"]["message"]


def test_unknown_method_is_method_not_found_with_the_id(mcp):
    r = mcp.request("resources/frobnicate")
    assert r["error"]["code"] == -32601
    assert "resources/frobnicate" in r["error"]["message"]
    mcp.send({"jsonrpc": "2.0", "id": "str-id", "method": "nope"})
    r = mcp.recv()
    assert r["id"] == "str-id" and r["error"]["code"] == -32601


def test_notifications_and_client_responses_get_no_answer(mcp):
    mcp.notify("notifications/initialized")
    mcp.notify("notifications/roots/list_changed")
    mcp.notify("no/such/notification", {"x": 1})
    mcp.send({"jsonrpc": "2.0", "method": "ping"})       # a notification, not a request
    mcp.send({"jsonrpc": "2.0", "id": 77, "result": {}})  # a response to nothing of ours
    mcp.send({"jsonrpc": "2.0", "id": 78, "error": {"code": 1, "message": "x"}})
    r = mcp.request("ping")
    assert r["result"] == {}
    assert mcp.nothing_within(0.5)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_supported_version_is_answered_with_itself(make_mcp, version):
    m = make_mcp()
    r = m.initialize(version)["result"]
    assert r["protocolVersion"] == version
    assert r["capabilities"] == {"tools": {"listChanged": False}}
    # The server names itself as `petri --version` does (docs/releasing.md).
    assert r["serverInfo"]["name"] == "petri"
    assert r["serverInfo"]["version"] == reported(PETRI) == of_source()


@pytest.mark.parametrize("version", ["1999-01-01", "2025-12-31", "latest", ""])
def test_an_unknown_version_is_answered_with_the_latest(make_mcp, version):
    m = make_mcp()
    assert m.initialize(version)["result"]["protocolVersion"] == VERSIONS[0]


def test_initialize_needs_a_version_and_happens_once(make_mcp):
    m = make_mcp()
    r = m.request("initialize", {"capabilities": {}})
    assert r["error"]["code"] == -32602
    r = m.request("initialize", {**INIT, "protocolVersion": 20250618})
    assert r["error"]["code"] == -32602
    assert m.initialize()["result"]
    r = m.request("initialize", INIT)
    assert r["error"]["code"] == -32600


def test_only_ping_before_initialize(make_mcp):
    m = make_mcp()
    assert m.request("ping")["result"] == {}
    for method in ("tools/list", "tools/call"):
        r = m.request(method, {"name": "execute", "arguments": {"code": "1"}})
        assert r["error"]["code"] == -32600
        assert "initialize" in r["error"]["message"]


def test_batches_in_2025_03_26(make_mcp):
    m = make_mcp()
    m.initialize("2025-03-26")
    m.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "execute", "arguments": {"code": "6 * 7"}}},
            {"jsonrpc": "2.0", "id": 3, "method": "nope"},
            {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": INIT}])
    r = m.recv()
    assert isinstance(r, list)
    by_id = {x["id"]: x for x in r}
    assert set(by_id) == {1, 2, 3, 4}
    assert by_id[1]["result"] == {}
    assert "42" in text_of(by_id[2]["result"])
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[4]["error"]["code"] == -32600          # never batched
    m.send([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
    m.send(b"[]\n")
    assert m.recv()["error"]["code"] == -32600          # the notification-only batch: nothing
    m.send([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(65)])
    assert m.recv()["error"]["code"] == -32600


@pytest.mark.parametrize("version", [None, "2025-06-18", "2025-11-25", "2024-11-05"])
def test_no_batches_in_other_versions(make_mcp, version):
    m = make_mcp()
    if version:
        m.initialize(version)
    m.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    r = m.recv()
    assert r["id"] is None and r["error"]["code"] == -32600
    assert "batch" in r["error"]["message"]


def test_tools_call_params_are_checked(mcp):
    assert mcp.request("tools/call", {})["error"]["code"] == -32602
    assert mcp.request("tools/call", {"name": 3})["error"]["code"] == -32602
    r = mcp.request("tools/call", {"name": "execute", "arguments": "print(1)"})
    assert r["error"]["code"] == -32602
    r = mcp.request("tools/call", {"name": "run_code", "arguments": {}})
    assert r["error"]["code"] == -32602 and "run_code" in r["error"]["message"]
    # Wrong arguments are a tool error the model reads (isError), not a protocol one.
    for args, words in [({}, "'code' is required"), ({"code": 1}, "must be a string"),
                        ({"code": "1", "language": "ruby"}, "language"),
                        ({"code": "1", "timeout_s": -1}, "timeout_s"),
                        ({"code": "1", "timeout_s": "5"}, "timeout_s"),
                        ({"code": "1", "extra": True}, "unknown argument 'extra'")]:
        res = mcp.call("execute", args)
        assert res["isError"] is True, args
        assert words in text_of(res), (args, text_of(res))


def test_tools_list_schemas(mcp):
    tools = mcp.request("tools/list")["result"]["tools"]
    by_name = {t["name"]: t for t in tools}
    assert set(by_name) == {"execute", "write_file", "read_file", "list_files", "upload_archive",
                            "download_archive", "processes", "start_process",
                            "process_output", "process_input", "reset"}
    ex = by_name["execute"]["inputSchema"]
    assert ex == {
        "type": "object", "additionalProperties": False, "required": ["code"],
        "properties": {
            "code": {"type": "string", "description": ex["properties"]["code"]["description"]},
            "language": {"type": "string",
                         "enum": ["python", "bash", "c", "javascript", "typescript", "r",
                                  "java"],
                         "description": ex["properties"]["language"]["description"]},
            "timeout_s": {"type": "number", "minimum": 0.1, "maximum": 600.0, "default": 30.0,
                          "description": ex["properties"]["timeout_s"]["description"]},
            "env": {"type": "object", "additionalProperties": {"type": "string"},
                    "description": ex["properties"]["env"]["description"]},
            "tests": {"type": "string", "description": ex["properties"]["tests"]["description"]},
            "stdin": {"type": "string", "description": ex["properties"]["stdin"]["description"]},
        }}
    assert "junit:" in ex["properties"]["tests"]["description"]
    wf = by_name["write_file"]["inputSchema"]
    assert wf["required"] == ["path", "content"]
    assert wf["properties"]["encoding"]["enum"] == ["utf-8", "base64"]
    assert by_name["reset"]["inputSchema"] == {"type": "object", "properties": {},
                                               "additionalProperties": False}
    assert by_name["processes"]["inputSchema"]["properties"]["stop"]["type"] == "integer"
    assert by_name["processes"]["inputSchema"]["properties"]["signal"]["enum"] == ["TERM", "KILL"]
    assert by_name["read_file"]["annotations"]["readOnlyHint"] is True
    assert by_name["reset"]["annotations"]["destructiveHint"] is True
    desc = by_name["execute"]["description"]
    for words in ("Python 3.", "/work", "no network", "30 s", "1024 MB"):
        assert words in desc, words
    # The packages and the languages' versions, as a sandbox found them at
    # start: not a list written into petri.
    import importlib.metadata
    for dist in ("numpy", "pandas", "matplotlib", "scipy", "seaborn", "scikit-learn"):
        assert f"{dist} {importlib.metadata.version(dist)}" in desc, dist
    assert re.search(r"javascript \(v\d+\.", desc) and re.search(r"\br \(R", desc), desc
    assert re.search(r"typescript \(TypeScript \d+\.", desc), desc
    assert re.search(r"git \(git version \d", desc) and re.search(r"pytest \(pytest \d", desc)
    import jsonschema
    for t in tools:
        jsonschema.Draft202012Validator.check_schema(t["inputSchema"])


def test_processes_lists_and_stops_a_background_server(mcp):
    res = mcp.call("processes")
    assert res["isError"] is False and text_of(res).startswith("0 processes besides"), res
    res = mcp.execute("python3 -m http.server 8002 --bind 127.0.0.1 >/dev/null 2>&1 &\n"
                      "sleep 1000 &\necho ok", language="bash")
    assert res["isError"] is False, text_of(res)
    # Both children may still be in their execve when the call returns.
    t = poll(lambda: text_of(mcp.call("processes")),
             lambda t: "http.server 8002" in t and "sleep 1000" in t, 10, 0.05)
    assert t.startswith("2 processes besides petri's own"), t
    line = next(li for li in t.splitlines() if "http.server 8002" in li)
    pid = int(line.split()[0])
    assert "python3 -m http.server 8002 --bind 127.0.0.1" in line, line
    # A later call reaches it over loopback.
    fetch = ("import socket, time, urllib.request\n"
             "for _ in range(300):\n"
             "    try:\n"
             "        socket.create_connection(('127.0.0.1', 8002), timeout=1).close(); break\n"
             "    except OSError:\n"
             "        time.sleep(0.05)\n"
             "print(urllib.request.urlopen('http://127.0.0.1:8002/').status)")
    assert "200" in text_of(mcp.execute(fetch))
    res = mcp.call("processes", {"stop": pid, "signal": "KILL"})
    assert res["isError"] is False and f"Sent SIGKILL to process {pid}" in text_of(res), res
    # Gone once pid 1 has reaped it (a zombie until then).
    t = poll(lambda: text_of(mcp.call("processes")),
             lambda t: t.startswith("1 process besides"), 10, 0.05)
    assert "http.server" not in t and t.startswith("1 process besides"), t
    for args, words in (({"stop": 1}, "init"), ({"stop": 2}, "driver"),
                        ({"stop": 999999}, "no process 999999"),
                        ({"stop": "4"}, "must be a pid"), ({"stop": 0}, "must be a pid"),
                        ({"stop": 5, "signal": "HUP"}, "must be one of TERM, KILL")):
        res = mcp.call("processes", args)
        assert res["isError"] is True and words in text_of(res), (args, text_of(res))


def test_output_is_cut_for_a_model_with_head_tail_and_a_note(mcp):
    res = mcp.execute("print('A' * 10 + 'x' * 100000 + 'Z' * 10)")
    t = text_of(res)
    assert len(t) < 25000
    assert "AAAAAAAAAA" in t and "ZZZZZZZZZZ" in t
    assert "bytes left out here, of 100021 in all" in t
    res = mcp.execute("import sys\nfor i in range(300000): sys.stderr.write('%d\\n' % i)")
    t = text_of(res)
    # Beyond the 1 MiB stream cap petri keeps the head; the model sees the
    # head and tail of that, and is told both cuts.
    assert "--- stderr ---" in t and "\n0\n1\n2\n" in t and "left out" in t
    assert "the program wrote 1988890 bytes; petri kept the first 1048576" in t


def test_errors_timeouts_and_exit_statuses(mcp):
    res = mcp.execute("import json\njson.loads('{bad')")
    assert res["isError"] is True
    t = text_of(res)
    assert "JSONDecodeError" in t and "Traceback" in t and "<cell" in t
    res = mcp.execute("exit 3", language="bash")
    assert res["isError"] is True and "3" in text_of(res)
    res = mcp.execute("int main(void) { return nope; }", language="c")
    assert res["isError"] is True and "CompileError" in text_of(res)
    res = mcp.execute("while True: pass", timeout_s=0.5)
    assert res["isError"] is True and "--- timeout ---" in text_of(res)
    assert "2" in text_of(mcp.execute("1 + 1"))


def test_out_of_memory_restarts_the_interpreter_and_says_so(make_mcp, tmp_path):
    m = make_mcp(config="[limits]\nmemory_mb = 128\n")
    m.initialize()
    m.execute("x = 1\nopen('kept.txt', 'w').write('yes')")
    res = m.execute("b = bytearray(400 * 1024 * 1024)\nb[::4096] = b'x' * len(b[::4096])")
    assert res["isError"] is True
    t = text_of(res)
    assert "--- oom ---" in t and "a fresh interpreter took its place" in t, t
    res = m.execute("x")
    assert res["isError"] is True and "NameError" in text_of(res)
    assert "yes" in text_of(m.execute("print(open('kept.txt').read())"))
    # Ended by the code itself, with no limit: said as well.
    t = text_of(m.execute("import os\nos._exit(0)"))
    assert "--- restarted ---" in t and "exited with status 0" in t, t


def test_reset_restarts_the_runtime_and_keeps_the_files(mcp):
    mcp.execute("x = 1\nopen('kept.txt', 'w').write('yes')")
    res = mcp.call("reset")
    assert res["isError"] is False and "files in /work are kept" in text_of(res), res
    res = mcp.execute("print('x' in globals(), open('kept.txt').read())")
    assert "False yes" in text_of(res), text_of(res)
    # A sandbox that ended is replaced by a new one, as before.
    mcp.execute("import os\nos.kill(os.getppid(), 9)")
    res = mcp.call("reset")
    assert res["isError"] is False and "new, empty one" in text_of(res), res
    assert "False" in text_of(mcp.execute("import os\nprint(os.path.exists('kept.txt'))"))


def test_idle_expiry_is_reported_on_next_use(make_mcp):
    m = make_mcp(config="[sessions]\nidle_timeout_s = 1\n")
    m.initialize()
    assert "1" in text_of(m.execute("x = 1\nx"))
    # The idle timeout must pass (the reaper ticks every 0.5 s): petri mcp
    # has no view of its sandbox that is not a use of it.
    time.sleep(2.5)
    res = m.execute("x")
    assert res["isError"] is True
    t = text_of(res)
    assert "idle" in t and "new, empty sandbox" in t and "Nothing was run" in t
    res = m.execute("x")                              # the new sandbox is empty
    assert res["isError"] is True and "NameError" in text_of(res)
    assert text_of(m.execute("y = 2\ny")).strip().endswith("2")


def named_sleeper():
    """Code that names its process (pids_named() then finds it running)
    and sleeps 60 s; and that name."""
    name = f"nap{secrets.token_hex(6)}"
    return naming(name) + "import time\ntime.sleep(60)", name


def test_ping_is_answered_while_code_runs_and_cancel_stops_it(mcp):
    code, name = named_sleeper()
    mcp.send({"jsonrpc": "2.0", "id": "long", "method": "tools/call",
              "params": {"name": "execute", "arguments": {"code": code}}})
    assert wait_for(lambda: pids_named(name), 30), "the code never ran"
    t0 = time.monotonic()
    assert mcp.request("ping", timeout=30)["result"] == {}
    assert time.monotonic() - t0 < 30              # long before the 60 s sleep ends
    mcp.notify("notifications/cancelled", {"requestId": "long", "reason": "user"})
    # No answer for the cancelled request; the sandbox is free again soon.
    t0 = time.monotonic()
    res = mcp.execute("'after'")
    assert "after" in text_of(res)
    assert time.monotonic() - t0 < 40


def test_a_cancel_before_the_call_runs_drops_it(mcp):
    mcp.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "execute", "arguments": {"code": "import time; time.sleep(1)"}}})
    mcp.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "execute", "arguments": {"code": "dropped = 1"}}})
    mcp.notify("notifications/cancelled", {"requestId": 2})
    assert mcp.recv()["id"] == 1
    res = mcp.execute("'dropped' in globals()")
    assert "False" in text_of(res)


def test_crlf_blank_lines_and_a_last_line_without_newline(make_mcp):
    m = make_mcp()
    m.send(b"\r\n   \n" + json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                     "params": INIT}).encode() + b"\r\n")
    assert m.recv()["id"] == 1
    m.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode())
    m.proc.stdin.close()
    assert m.recv()["id"] == 2
    assert m.proc.wait(timeout=30) == 0


def test_a_line_too_long_is_refused_and_skipped(make_mcp):
    m = make_mcp()
    m.initialize()
    m.send(b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": "'
           + b"a" * (97 << 20) + b'"}}\n')
    r = m.recv()
    assert r["error"]["code"] == -32600 and "longer than" in r["error"]["message"]
    assert m.request("ping")["result"] == {}


def test_stdout_carries_only_messages_and_logs_go_to_stderr(make_mcp):
    m = make_mcp("-v")
    m.initialize()
    m.execute("print('to the user')")
    m.send(b"garbage\n")
    m.recv()
    code, err = m.close()
    assert code == 0
    assert m.buf == b""
    assert "petri mcp" in err
    assert "to the user" not in err


def test_end_of_input_finishes_queued_calls_then_deletes_the_sandbox(make_mcp):
    m = make_mcp()
    m.initialize()
    m.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": "import time; time.sleep(1); 'done'"}}})
    m.proc.stdin.close()
    r = m.recv()
    assert r["id"] == 9 and "done" in text_of(r["result"])
    code, err = m.close()
    assert code == 0
    assert "deleted" in err or "ended with its client" in err


def test_sigterm_stops_a_running_call_at_once(make_mcp):
    m = make_mcp()
    m.initialize()
    code, name = named_sleeper()
    m.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": code}}})
    assert wait_for(lambda: pids_named(name), 30), "the code never ran"
    t0 = time.monotonic()
    m.proc.send_signal(signal.SIGTERM)
    assert m.proc.wait(timeout=40) == 0
    assert time.monotonic() - t0 < 40
    m.close()


def test_two_processes_have_separate_sandboxes(make_mcp):
    a, b = make_mcp(), make_mcp()
    a.initialize()
    b.initialize()
    a.execute("secret = 'a'")
    a.call("write_file", {"path": "a.txt", "content": "a"})
    assert "NameError" in text_of(b.execute("secret"))
    assert "no such file" in text_of(b.call("read_file", {"path": "a.txt"}))


def test_file_tools_refuse_paths_outside_the_sandboxs_own_filesystems(mcp):
    for path in ("/etc/passwd", "../x", "a/../../x", "", "a\nb", "/proc/1/environ",
                 "/tmp/../etc/passwd", "/usr/bin/python3", "/"):
        res = mcp.call("read_file", {"path": path})
        assert res["isError"] is True, path
        res = mcp.call("write_file", {"path": path, "content": "x"})
        assert res["isError"] is True, path
    res = mcp.call("read_file", {"path": "/etc/passwd"})
    assert "not on a filesystem of the sandbox's own" in text_of(res)
    mcp.execute("import os; os.symlink('/etc/passwd', 'link')")
    res = mcp.call("read_file", {"path": "link"})
    assert res["isError"] is True or "root:" not in text_of(res)
    res = mcp.call("write_file", {"path": "x.bin", "content": "not base64!", "encoding": "base64"})
    assert res["isError"] is True and "base64" in text_of(res)
    res = mcp.call("list_files", {"path": "/work"})
    assert res["isError"] is False and "link" in text_of(res)


def test_file_tools_reach_the_sandboxs_tmp(mcp):
    res = mcp.call("write_file", {"path": "/tmp/notes/a.txt", "content": "scratch"})
    assert res["isError"] is False and "/tmp/notes/a.txt" in text_of(res), res
    assert not os.path.exists("/tmp/notes/a.txt") or open("/tmp/notes/a.txt").read() != "scratch"
    assert "scratch" in text_of(mcp.execute("print(open('/tmp/notes/a.txt').read())"))
    mcp.execute("open('/tmp/notes/b.txt', 'w').write('made by code')")
    assert text_of(mcp.call("read_file", {"path": "/tmp/notes/b.txt"})) == "made by code"
    listing = text_of(mcp.call("list_files", {"path": "/tmp/notes/"}))
    assert listing.startswith("/tmp/notes: 2 entries"), listing
    assert "/tmp/notes/a.txt" in listing and "/tmp/notes/b.txt" in listing
    res = mcp.call("read_file", {"path": "/tmp/notes/none"})
    assert res["isError"] is True and "cannot read '/tmp/notes/none'" in text_of(res)
