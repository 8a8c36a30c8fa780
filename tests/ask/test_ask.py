"""`petri ask` end to end against a scripted model: the exact requests
petri sends (tool schema, tool results, message order, Authorization) and
what it prints; retries, errors, malformed tool calls and the round limit."""
import json

import version  # tests/version.py
from askhelp import PETRI, reply_text, reply_tools, run_ask

CSV = "region,amount\nnorth,10\nsouth,20\neast,30\n"

BUGGY = ("import pandas as pd\n"
         "df = pd.read_csv('sales.csv')\n"
         "print(df['revenue'].sum())")
FIXED = ("import matplotlib.pyplot as plt\n"
         "print('total', df['amount'].sum())\n"
         "df.plot.bar(x='region', y='amount')\n"
         "df.to_csv('summary.csv', index=False)")


def test_question_to_verified_answer(fake_model, tmp_path):
    data = tmp_path / "sales.csv"
    data.write_text(CSV)
    seen = {}

    def first(body):
        seen["first"] = body
        return reply_tools(("call_1", "execute", {"code": BUGGY}))

    def second(body):
        seen["second"] = body
        return reply_tools(("call_2", "execute", {"code": FIXED, "language": "python"}),
                           content="The column is called amount; retrying.")

    def third(body):
        seen["third"] = body
        return reply_text("The total amount is 60 (north 10, south 20, east 30).")

    fake_model.script = [first, second, third]
    save = tmp_path / "out"
    p = run_ask(["--model", "test-model", "--api-base", fake_model.base, "--file", str(data),
                 "--save-dir", str(save), "What is the total amount?"],
                env={"PETRI_API_KEY": "sk-test-123"})
    assert p.returncode == 0, p.err

    # --- the requests ---
    assert len(fake_model.requests) == 3
    for path, headers, body, _ in fake_model.requests:
        assert path == "/v1/chat/completions"
        assert headers["Authorization"] == "Bearer sk-test-123"
        assert headers["Content-Type"] == "application/json"
        assert headers["User-Agent"] == f"petri/{version.reported(PETRI)}"
        assert body["model"] == "test-model"
        assert body["tool_choice"] == "auto"
    tools = seen["first"]["tools"]
    assert len(tools) == 1 and tools[0]["type"] == "function"
    fn = tools[0]["function"]
    assert fn["name"] == "execute"
    assert "Python 3." in fn["description"] and "pandas" in fn["description"]
    assert fn["parameters"]["type"] == "object"
    assert fn["parameters"]["additionalProperties"] is False
    assert fn["parameters"]["required"] == ["code"]
    assert set(fn["parameters"]["properties"]) == {"code", "language", "timeout_s", "env", "tests", "stdin"}

    m1 = seen["first"]["messages"]
    assert [m["role"] for m in m1] == ["system", "user"]
    assert "execute" in m1[0]["content"]
    user = m1[1]["content"]
    assert user.startswith("What is the total amount?")
    assert "sales.csv: 40 bytes, text" in user
    assert "region,amount\nnorth,10" in user

    m2 = seen["second"]["messages"]
    assert [m["role"] for m in m2] == ["system", "user", "assistant", "tool"]
    assert m2[2]["tool_calls"] == [{"id": "call_1", "type": "function", "function": {
        "name": "execute", "arguments": json.dumps({"code": BUGGY})}}]
    assert m2[2]["content"] is None
    assert m2[3]["tool_call_id"] == "call_1"
    assert "KeyError: 'revenue'" in m2[3]["content"]
    assert "Traceback" in m2[3]["content"]

    m3 = seen["third"]["messages"]
    assert [m["role"] for m in m3] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert m3[4]["content"] == "The column is called amount; retrying."
    assert m3[5]["tool_call_id"] == "call_2"
    tool_out = m3[5]["content"]
    assert "total 60" in tool_out
    assert "[image 1 was saved as chart-2-1.png and shown to the user]" in tool_out
    assert "/work/summary.csv" in tool_out                      # files written
    assert "/work/sales.csv" not in m2[3]["content"]            # uploaded, not written

    # --- what a person sees, in order ---
    out = p.out
    order = ["## round 1: the model runs python", "df['revenue']", "## result (error)",
             "KeyError: 'revenue'", "## the model says", "## round 2: the model runs python",
             "df['amount']", "## result\n", "total 60", "## chart saved: ", "## answer",
             "The total amount is 60"]
    pos = [out.find(s) for s in order]
    assert all(x >= 0 for x in pos), [(s, x) for s, x in zip(order, pos)]
    assert pos == sorted(pos), out

    # --- what was kept ---
    chart = save / "chart-2-1.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(chart) in out
    assert (save / "files" / "summary.csv").read_text() == "region,amount\nnorth,10\nsouth,20\neast,30\n"


def test_json_transcript(fake_model, tmp_path):
    fake_model.script = [lambda b: reply_tools(("c1", "execute", {"code": "21 * 2"})),
                         lambda b: reply_text("42")]
    p = run_ask(["--json", "-m", "m", "--api-base", fake_model.base, "what is 21*2?"])
    assert p.returncode == 0, p.err
    t = json.loads(p.out)
    assert t["status"] == "answered" and t["answer"] == "42" and t["error"] is None
    assert t["question"] == "what is 21*2?" and t["model"] == "m" and t["rounds"] == 2
    assert t["api_base"] == fake_model.base and t["files"] == []
    assert t["usage"] == {"prompt_tokens": 300, "completion_tokens": 40}
    step = t["steps"][0]["tool_calls"][0]
    assert step["id"] == "c1" and step["code"] == "21 * 2" and step["language"] == "python"
    assert step["is_error"] is False and "42" in step["output"]
    assert step["execution"]["status"] == "ok"
    assert step["execution"]["results"] == [{"text/plain": "42"}]
    assert t["steps"][1] == {"round": 2, "content": "42", "tool_calls": []}
    assert [m["role"] for m in t["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert "Authorization" not in fake_model.requests[0][1]       # no key: no header


def test_state_persists_and_other_languages(fake_model):
    fake_model.script = [
        lambda b: reply_tools(("a", "execute", {"code": "x = 6"}),
                              ("b", "execute", {"code": "echo $((6*7))", "language": "bash"})),
        lambda b: reply_tools(("c", "execute", {"code": "x * 7"})),
        lambda b: reply_text("done")]
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "go"])
    assert p.returncode == 0, p.err
    msgs = fake_model.bodies()[2]["messages"]
    tools = [m for m in msgs if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["a", "b", "c"]
    assert "42" in tools[1]["content"] and "42" in tools[2]["content"]
    assert "## round 1: the model runs bash" in p.out


def test_environment_variables_and_openai_key_fallback(fake_model):
    fake_model.script = [lambda b: reply_text("hi")]
    p = run_ask(["hello"], env={"PETRI_API_BASE": fake_model.base, "PETRI_MODEL": "env-model",
                                "OPENAI_API_KEY": "sk-openai"})
    assert p.returncode == 0, p.err
    _, headers, body, _ = fake_model.requests[0]
    assert body["model"] == "env-model"
    assert headers["Authorization"] == "Bearer sk-openai"


def test_rate_limit_waits_for_retry_after(fake_model):
    fake_model.script = [
        lambda b: (429, {"Retry-After": "2"}, {"error": {"message": "slow down"}}),
        lambda b: reply_text("ok")]
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "q"])
    assert p.returncode == 0, p.err
    times = [r[3] for r in fake_model.requests]
    assert len(times) == 2 and times[1] - times[0] >= 1.9
    assert "HTTP 429" in p.err and "slow down" in p.err and "retrying in 2.0 s" in p.err
    assert fake_model.bodies()[0] == fake_model.bodies()[1]      # the same request again


def test_server_errors_are_retried_with_backoff_then_given_up(fake_model):
    fake_model.script = [lambda b: (500, {}, {"error": {"message": "boom"}}),
                         lambda b: (503, {}, b"<html>busy</html>"),
                         lambda b: reply_text("fine")]
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "q"])
    assert p.returncode == 0, p.err
    t = [r[3] for r in fake_model.requests]
    assert t[1] - t[0] >= 0.9 and t[2] - t[1] >= 1.9              # 1 s, then 2 s
    assert "boom" in p.err and "busy" in p.err

    fake_model.requests.clear()
    fake_model.script = [lambda b: (502, {}, b"bad gateway")] * 2
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "--max-retries", "1", "q"])
    assert p.returncode == 3
    assert len(fake_model.requests) == 2
    assert "HTTP 502" in p.err and "gave up after 2 attempts" in p.err


def test_client_errors_fail_at_once_with_the_apis_message(fake_model):
    fake_model.script = [lambda b: (401, {}, {"error": {"message": "Incorrect API key \x1b[31m"}})]
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "q"], env={"PETRI_API_KEY": "bad"})
    assert p.returncode == 3
    assert len(fake_model.requests) == 1
    assert "HTTP 401" in p.err and "Incorrect API key" in p.err
    assert "\x1b" not in p.err                                     # no escapes reach a terminal


def test_malformed_responses_are_api_errors(fake_model):
    for bad in [lambda b: (200, {"Content-Type": "text/html"}, b"<html>hi</html>"),
                lambda b: {"choices": []},
                lambda b: {"choices": [{"message": "hi"}]},
                lambda b: {"choices": [{"message": {"tool_calls": [{"function": {"name": 7}}]}}]},
                lambda b: {"choices": [{"message": {"content": None}, "finish_reason": "length"}]},
                lambda b: {"error": {"message": "overloaded"}}]:
        fake_model.script = [bad]
        p = run_ask(["-m", "m", "--api-base", fake_model.base, "--max-retries", "0", "q"])
        assert p.returncode == 3, (p.out, p.err)
        assert p.err.startswith("petri ask: "), p.err


def test_malformed_tool_calls_are_explained_to_the_model(fake_model):
    fake_model.script = [
        lambda b: reply_tools(("bad_json", "execute", '{"code": "print(1)'),
                              ("no_tool", "shell", {"cmd": "ls"}),
                              ("not_obj", "execute", "[1, 2]"),
                              ("bad_arg", "execute", {"code": "1", "language": "ruby"}),
                              ("good", "execute", {"code": "print('fine')"})),
        lambda b: reply_text("recovered")]
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "q"])
    assert p.returncode == 0, p.err
    tools = {m["tool_call_id"]: m["content"] for m in fake_model.bodies()[1]["messages"]
             if m["role"] == "tool"}
    assert list(tools) == ["bad_json", "no_tool", "not_obj", "bad_arg", "good"]
    assert "not a JSON object" in tools["bad_json"] and '{"code":' in tools["bad_json"]
    assert "no tool named 'shell'" in tools["no_tool"] and "execute" in tools["no_tool"]
    assert "not a JSON object" in tools["not_obj"]
    assert "language" in tools["bad_arg"]
    assert "fine" in tools["good"]


def test_long_output_is_cut_for_the_model(fake_model):
    fake_model.script = [lambda b: reply_tools(("c", "execute", {"code": "print('y' * 500000)"})),
                         lambda b: reply_text("ok")]
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "q"])
    assert p.returncode == 0, p.err
    content = [m for m in fake_model.bodies()[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert len(content) < 25000
    assert "bytes left out here, of 500001 in all" in content


def test_round_limit(fake_model):
    fake_model.script = [lambda b: reply_tools(("c%d" % i, "execute", {"code": "1"}))
                         for i in range(5)]
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "--max-rounds", "2", "q"])
    assert p.returncode == 1
    assert len(fake_model.requests) == 2
    assert "no answer within 2 rounds" in p.err
    p = run_ask(["--json", "-m", "m", "--api-base", fake_model.base, "--max-rounds", "1", "q"])
    assert p.returncode == 1
    t = json.loads(p.out)
    assert t["status"] == "max_rounds" and t["answer"] is None and t["rounds"] == 1


def test_usage_errors(fake_model, tmp_path):
    p = run_ask(["q"], env={"PETRI_API_BASE": fake_model.base})
    assert p.returncode == 2 and "model" in p.err
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "--file", "/nonexistent/x.csv", "q"])
    assert p.returncode == 2 and "x.csv" in p.err
    p = run_ask(["-m", "m", "--api-base", "ftp://x", "q"])
    assert p.returncode == 2
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "--max-rounds", "0", "q"])
    assert p.returncode == 2
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "d.csv").write_text("1"), (b / "d.csv").write_text("2")
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "-f", str(a / "d.csv"),
                 "-f", str(b / "d.csv"), "q"])
    assert p.returncode == 2 and "two files" in p.err
    assert fake_model.requests == []


def test_question_from_stdin_and_binary_file_preview(fake_model, tmp_path):
    blob = tmp_path / "img.png"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    fake_model.script = [lambda b: reply_text("seen")]
    p = run_ask(["-m", "m", "--api-base", fake_model.base, "-f", str(blob), "-"],
                input="what is in the file?\n".encode())
    assert p.returncode == 0, p.err
    user = fake_model.bodies()[0]["messages"][1]["content"]
    assert user.startswith("what is in the file?")
    assert "img.png: 264 bytes, binary (image/png)" in user


def test_unreachable_api(tmp_path):
    p = run_ask(["-m", "m", "--api-base", "http://127.0.0.1:9/v1", "--max-retries", "0", "q"])
    assert p.returncode == 3
    assert "127.0.0.1:9" in p.err


def test_json_transcript_holds_the_record_of_what_ran(fake_model):
    """--json carries the execution record of the question's sandbox: each
    entry's code is what the model sent; when the sandbox ended with an
    execution, the next one ran in a new session, and the record of both is
    there, each entry naming its session."""
    sent = [("python", "x = 6\nprint(x * 7)"), ("bash", "echo from bash"),
            ("python", "import os\nos.kill(os.getppid(), 9)"), ("python", "print('new sandbox')")]

    def call(i):
        lang, code = sent[i]
        return ("c%d" % i, "execute", {"code": code, "language": lang})

    fake_model.script = [lambda b: reply_tools(call(0), call(1)),
                         lambda b: reply_tools(call(2)),
                         lambda b: reply_tools(("bad", "execute", {"language": "python"})),
                         lambda b: reply_tools(call(3)),
                         lambda b: reply_text("done")]
    p = run_ask(["--json", "-m", "m", "--api-base", fake_model.base, "go"])
    assert p.returncode == 0, p.err
    t = json.loads(p.out)
    steps = [c for s in t["steps"] for c in s["tool_calls"]]
    assert [c["id"] for c in steps] == ["c0", "c1", "c2", "bad", "c3"]
    first, second = steps[0]["session"], steps[4]["session"]
    assert first.startswith("ses_") and second.startswith("ses_") and first != second
    assert [c["session"] for c in steps] == [first, first, first, None, second]
    assert t["session"] == second
    record = t["executions"]
    assert [(e["language"], e["code"]) for e in record] == sent
    assert [e["session"] for e in record] == [first, first, first, second]
    seqs = [e["seq"] for e in record]
    assert seqs == sorted(seqs)
    assert [e["result"]["stdout"] for e in record[:2]] == ["42\n", "from bash\n"]
    assert record[3]["status"] == "ok" and record[3]["result"]["stdout"] == "new sandbox\n"
    assert all(e["limits"]["memory_mb"] > 0 and e["started_at"] for e in record)


def test_json_transcript_without_code_has_an_empty_record(fake_model):
    fake_model.script = [lambda b: reply_text("no code needed")]
    p = run_ask(["--json", "-m", "m", "--api-base", fake_model.base, "hi"])
    assert p.returncode == 0, p.err
    t = json.loads(p.out)
    assert t["session"] is None and t["executions"] == []
