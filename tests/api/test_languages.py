"""Languages as data: JavaScript and R built in, an operator's languages from
[language.NAME] sections, each running inside the session's sandbox with its
workspace and limits, warm and cold; GET /v1/languages says what a sandbox
found at start (docs/languages.md)."""
import base64
import importlib.metadata

import pytest

from apihelp import Server

# It reads the whole record (empty until its own one-shot): a daemon of its own.
OWN_SERVER = True

OPERATOR = """
[language.perl]
file = main.pl
run = perl main.pl
aliases = pl
extensions = .pl
version = perl -e 'print "perl $^V"'

[language.long-language-name-over-15-bytes]
file = {tmp}/x.sh
run = /bin/bash {file}

[language.cpp]
file = {tmp}/main.cpp
compile = g++ -O1 -o prog main.cpp
run = {tmp}/prog
version = g++ --version
"""


@pytest.fixture(scope="module", params=["warm", "cold"])
def srv(request, tmp_path_factory):
    config = OPERATOR + ("" if request.param == "warm" else "[sessions]\nwarm = false\n")
    s = Server(tmp_path_factory.mktemp("lang"), config, light=True)
    yield s
    code, err = s.stop()
    assert code == 0, err[-3000:]
    assert not s.leaked, f"processes of petri serve outlived it: {s.leaked}"


@pytest.fixture
def api(srv):
    return srv.api()


def run(api, sid, language, code, **kw):
    return api.execute(sid, code, language=language, **kw)


def found(api):
    """GET /v1/languages once the probe has found out (each answer waits up
    to 20 s for it; a loaded machine may need more than one)."""
    for _ in range(6):
        r = api.get("/v1/languages")
        assert r.status_code == 200, r.text
        if r.json()["packages"] is not None:
            break
    return r.json()


def test_languages_lists_what_a_sandbox_found(api):
    name = "long-language-name-over-15-bytes"
    body = found(api)
    by_name = {lang["name"]: lang for lang in body["languages"]}
    assert list(by_name) == ["python", "bash", "c", "javascript", "r", "perl",
                             "long-language-name-over-15-bytes", "cpp"]
    assert by_name["python"]["default"] and by_name["python"]["version"].startswith("3.")
    assert by_name["javascript"]["version"].startswith("v")
    assert by_name["r"]["version"].startswith("R")
    assert by_name["perl"]["version"].startswith("perl v5")
    assert by_name["perl"]["aliases"] == ["pl"] and by_name["perl"]["extensions"] == [".pl"]
    assert all(lang["available"] for lang in body["languages"] if lang["name"] != name)
    assert "available" not in by_name[name]    # it has no version command: not known
    packages = {p["name"]: p["version"] for p in body["packages"]}
    for dist in ("numpy", "pandas", "seaborn", "scikit-learn", "statsmodels"):
        assert packages[dist] == importlib.metadata.version(dist), dist
    names = [p["name"].lower() for p in body["packages"]]
    assert names == sorted(names)
    # The probe is petri's own: not an execution of anyone's.
    assert api.get("/v1/executions").json()["executions"] == []


def test_the_operators_perl_prints_42_in_the_workspace(api):
    sid = api.session()
    res = run(api, sid, "perl", "print 6*7")
    assert res["status"] == "ok" and res["stdout"] == "42", res
    # Its file is written in the workspace, as the section says, and an
    # alias names it too.
    res = run(api, sid, "pl", 'open(my $f, "<", "main.pl") or die; print <$f>')
    assert res["stdout"].startswith('open(my $f'), res
    res = run(api, sid, "perl", "die 'broken'")
    assert res["status"] == "error" and res["error"]["name"] == "NonZeroExit", res
    assert "broken" in res["stderr"]


def test_a_compiled_language_of_the_operators(api):
    sid = api.session()
    res = run(api, sid, "cpp", "#include <iostream>\nint main() { std::cout << 6 * 7; }")
    assert res["status"] == "ok" and res["stdout"] == "42", res
    res = run(api, sid, "cpp", "int main() { return undefined_name; }")
    assert res["status"] == "error" and res["error"]["name"] == "CompileError", res
    assert "undefined_name" in res["error"]["message"]
    assert "main.cpp:1" in res["error"]["traceback"]
    # {tmp} is private to one execution and gone after it.
    assert run(api, sid, "bash", "ls /tmp")["stdout"].count("petri-") == 1


def test_javascript_value_output_and_errors(api):
    sid = api.session()
    res = run(api, sid, "javascript", "console.log('hi'); const xs = [1, 2, 3];\nxs.map(x => x * 2)")
    assert res["status"] == "ok" and res["stdout"] == "hi\n", res
    assert res["results"] == [{"text/plain": "[ 2, 4, 6 ]"}]
    res = run(api, sid, "js", "function f() { throw new TypeError('bad value') }\nf()")
    assert res["status"] == "error", res
    assert res["error"]["name"] == "TypeError" and res["error"]["message"] == "bad value"
    assert "at f (main.js:1:" in res["error"]["traceback"]
    assert "/opt/petri" not in res["error"]["traceback"]
    res = run(api, sid, "javascript", "let x = ;")
    assert res["error"]["name"] == "SyntaxError", res
    # Top-level await: the value of the last expression, once it settles;
    # errors keep the code's own line numbers.
    res = run(api, sid, "javascript", "const x = await Promise.resolve(2);\nx * 21;")
    assert res["status"] == "ok" and res["results"] == [{"text/plain": "42"}], res
    res = run(api, sid, "js", 'await Promise.resolve("Hello World!")')
    assert res["results"] == [{"text/plain": "'Hello World!'"}], res
    res = run(api, sid, "js", "await null\n\nthrow new RangeError('late')")
    assert res["error"]["name"] == "RangeError" and "main.js:3:" in res["error"]["traceback"], res
    # A module: import works; no last value.
    res = run(api, sid, "javascript", "import os from 'os';\nconsole.log(typeof os.cpus)")
    assert res["status"] == "ok" and res["stdout"] == "function\n", res
    # An async error is the program's error too.
    res = run(api, sid, "javascript", "setTimeout(() => { null.x }, 1)")
    assert res["error"]["name"] == "TypeError", res


def test_r_values_and_plots(api):
    sid = api.session()
    res = run(api, sid, "r", "x <- c(1, 2, 3)\nmean(x)\nplot(x)\nhist(x)")
    assert res["status"] == "ok" and res["stdout"] == "", res
    assert res["results"][0] == {"text/plain": "[1] 2"}, res
    pngs = [r["image/png"] for r in res["results"] if "image/png" in r]
    assert len(pngs) == 2 and len(res["results"]) == 3
    assert all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    res = run(api, sid, "R", "f <- function() stop('nope')\nf()\nprint('not reached')")
    assert res["status"] == "error" and res["error"]["message"] == "nope", res
    assert "not reached" not in res["stdout"]
    res = run(api, sid, "r", "tryCatch(stop('caught'), error = function(e) cat('handled\\n'))")
    assert res["status"] == "ok" and res["stdout"] == "handled\n", res


def test_r_values_are_results_as_irkernel_gives_them(api):
    """Each value R's prompt would print is a result of its own, in order,
    and not on stdout too (E2B's R kernel, IRkernel, displays them so);
    print(), an assignment and invisible() keep their meaning in R, and so
    do R's own reports of warnings and errors."""
    sid = api.session()
    res = run(api, sid, "r", "getwd()")
    assert res["status"] == "ok" and res["stdout"] == "", res
    assert res["results"] == [{"text/plain": '[1] "/work"'}], res
    code = ('x <- 1; x\nprint("printed")\ninvisible(2)\ny = 3\n(y)\nif (FALSE) 4\n'
            'f <- function() { warning("careful"); "\u00e9 \u00fc" }; f()\n'
            'rm(list = ls(all.names = TRUE))\nsummary(c(1, 2, 3, 4))\n'
            'plus <- function(a) a + 1\nplus')
    res = run(api, sid, "r", code)
    assert res["status"] == "ok" and res["stdout"] == '[1] "printed"\n', res
    texts = [r["text/plain"] for r in res["results"]]
    assert texts[:3] == ["[1] 1", "[1] 3", '[1] "\u00e9 \u00fc"'], res
    assert texts[3].split()[:3] == ["Min.", "1st", "Qu."], res
    assert texts[4] == "function (a) \na + 1" and len(texts) == 5, res
    assert "Warning message:\nIn f() : careful" in res["stderr"], res
    # An error at top level is R's own, without petri's wrapping; the
    # values before it are there.
    res = run(api, sid, "r", "1\nstop('top')\n2")
    assert res["status"] == "error" and res["error"]["traceback"] == "Error: top", res
    assert res["results"] == [{"text/plain": "[1] 1"}], res
    res = run(api, sid, "r", "g <- function() stop('deep')\nh <- function() g()\nh()")
    assert res["error"]["traceback"] == "Error in g() : deep\nCalls: h -> g", res
    # Code that does not parse runs not at all, and says where.
    res = run(api, sid, "r", "cat('ran')\nx y")
    assert res["status"] == "error" and res["stdout"] == "", res
    assert res["error"]["message"].startswith("main.R:2:3: unexpected symbol"), res


def test_r_values_are_bounded(api):
    sid = api.session()
    res = run(api, sid, "r", "strrep('a', 100000)")
    [text] = [r["text/plain"] for r in res["results"]]
    assert text.startswith('[1] "aaa') and len(text.encode()) < (64 << 10) + 64, len(text)
    assert text.endswith("\n... [text/plain cut at 64 KiB of 100007 bytes]"), text[-80:]
    res = run(api, sid, "r", "\n".join(str(i) for i in range(1, 104)))
    assert [r["text/plain"] for r in res["results"]] == [
        "[1] %d" % i for i in range(1, 101)], res["results"][-3:]
    assert res["stdout"] == "[1] 101\n[1] 102\n[1] 103\n", res
    assert "[petri] more than 100 values: the rest are printed on stdout" in res["stderr"]


def test_every_language_shares_the_workspace(api):
    sid = api.session()
    api.execute(sid, "import pandas as pd\npd.DataFrame({'a': [1, 2, 3]}).to_csv('t.csv', index=False)")
    res = run(api, sid, "r", "d <- read.csv('t.csv')\ncat(sum(d$a), '\\n')")
    assert res["stdout"] == "6 \n", res
    res = run(api, sid, "javascript",
              "require('fs').readFileSync('t.csv', 'utf8').trim().split('\\n').length")
    assert res["results"] == [{"text/plain": "4"}], res
    res = run(api, sid, "perl", "open(my $f, '<', 't.csv'); my @l = <$f>; print scalar(@l)")
    assert res["stdout"] == "4", res


def test_a_program_is_held_by_the_sessions_limits(api):
    sid = api.session(limits={"memory_mb": 128})
    res = run(api, sid, "r", "Sys.sleep(30)", timeout_s=1)
    assert res["status"] == "timeout", res
    assert run(api, sid, "javascript", "1 + 1")["results"] == [{"text/plain": "2"}]
    api.execute(sid, "x = 1")
    res = run(api, sid, "javascript", "const b = []; for (;;) b.push(Buffer.alloc(16 << 20, 1))")
    assert res["status"] == "oom", res
    # node, the largest process, is the one killed: the session and the
    # interpreter's variables live on.
    assert not res["restarted"] and "session was kept" in res["reason"], res
    assert api.execute(sid, "print(x)")["stdout"] == "1\n"


def test_what_a_program_leaves_as_results_is_bounded(api):
    sid = api.session()
    code = """
const fs = require('fs'), path = require('path'), dir = process.env.PETRI_RESULTS;
for (let i = 0; i < 3000; i++) fs.writeFileSync(path.join(dir, `n${String(i).padStart(4, '0')}.txt`), 'x');
fs.symlinkSync('/etc/passwd', path.join(dir, 'a-link.txt'));
fs.mkdirSync(path.join(dir, 'b-dir.txt'));
fs.writeFileSync(path.join(dir, 'error.json'), '{"name": 5}');
"""
    res = run(api, sid, "javascript", code)
    assert res["status"] == "ok", res
    texts = [r.get("text/plain") for r in res["results"]]
    assert "root:x:0:0" not in "".join(t or "" for t in texts)    # never followed
    assert len(res["results"]) <= 1001     # at most results_max, and a note
    # A malformed error.json is no error of the program's.
    res = run(api, sid, "javascript",
              "require('fs').writeFileSync(process.env.PETRI_RESULTS + '/error.json', '[')\n"
              "process.exitCode = 3")
    assert res["error"]["name"] == "NonZeroExit" and res["exit_code"] == 3, res
    assert api.execute(sid, "1 + 1")["results"][0]["text/plain"] == "2"


def test_an_unknown_language_names_every_language(api):
    sid = api.session()
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "x", "language": "cobol"})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == \
        "unknown language 'cobol': must be python, bash, c, javascript, r, perl, " \
        "long-language-name-over-15-bytes or cpp"


@pytest.mark.parametrize("section, words", [
    ("[language.perl]\nrun = perl x\nfile = ../x.pl\n", "[language.perl]: 'file'"),
    ("[language.perl]\nfile = x.pl\n", "[language.perl]: 'run' is required"),
    ("[language.js2]\nfile = x.js\nrun = node x.js\naliases = js\n",
     "[language.js2]: the name 'js' is already a language's"),
])
def test_a_bad_language_section_is_refused_at_start(tmp_path, section, words):
    with pytest.raises(RuntimeError) as e:
        Server(tmp_path, section)
    assert words in str(e.value)


def test_a_session_in_a_long_named_language(api):
    name = "long-language-name-over-15-bytes"
    r = api.post("/v1/sessions", {"language": name})
    assert r.status_code == 201 and r.json()["language"] == name, r.text
    res = api.execute(r.json()["id"], "echo $((6 * 7))")      # the session's language
    assert res["stdout"] == "42\n", res


@pytest.mark.slow
def test_the_probe_takes_no_clients_slot(make_server):
    """While the probe runs (a version command that takes its 10 s), a
    server of one session and one execution still serves its client, and
    a version command that never ends is killed, not waited for."""
    srv = make_server("[server]\nmax_sessions = 1\nmax_executions = 1\n"
                      "[language.slow]\nfile = x\nrun = true\nversion = sleep 600 & sleep 600\n")
    api = srv.api()
    sid = api.session()
    assert api.execute(sid, "6 * 7")["results"][0]["text/plain"] == "42"
    r = api.post("/v1/sessions", {})
    assert r.status_code == 429, r.text         # the one slot is the client's own
    body = found(api)
    slow = {lang["name"]: lang for lang in body["languages"]}["slow"]
    assert slow["version"] is None and slow["available"] is False, body
    assert body["packages"], body
