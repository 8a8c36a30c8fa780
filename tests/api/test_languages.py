"""Languages as data: JavaScript, TypeScript and R built in, an operator's languages from
[language.NAME] sections, each running inside the session's sandbox with its
workspace and limits, warm and cold; GET /v1/languages says what a sandbox
found at start (docs/languages.md)."""
import base64
import importlib.metadata
import re

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
    assert list(by_name) == ["python", "bash", "c", "javascript", "typescript", "r", "java", "perl",
                             "long-language-name-over-15-bytes", "cpp"]
    assert by_name["python"]["default"] and by_name["python"]["version"].startswith("3.")
    assert by_name["javascript"]["version"].startswith("v")
    # The typescript module's version (Debian's node-typescript), and node's.
    assert re.fullmatch(r"TypeScript \d+\.\d+\.\d+ \(Node\.js v\d+\.\d+\.\d+\)",
                        by_name["typescript"]["version"]), by_name["typescript"]
    assert by_name["typescript"]["aliases"] == ["ts"]
    assert by_name["typescript"]["extensions"] == [".ts", ".cts"]
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


def test_typescript_runs_as_javascript_once_its_types_are_stripped(api):
    sid = api.session()
    # The last expression's value; an interface, annotations, generics and
    # `as` are gone; console output streams as JavaScript's does.
    code = ("interface Point { x: number; y: number }\n"
            "function norm<T extends Point>(p: T): number {\n"
            "  return Math.sqrt(p.x * p.x + p.y * p.y) as number;\n"
            "}\n"
            "const p: Point = { x: 3, y: 4 };\n"
            "console.log('norm of', p);\n"
            "norm(p)")
    res = run(api, sid, "typescript", code)
    assert res["status"] == "ok" and res["stdout"] == "norm of { x: 3, y: 4 }\n", res
    assert res["results"] == [{"text/plain": "5"}], res
    # No type checking: a type error still runs, as tsc would still emit it.
    res = run(api, sid, "ts", 'let n: number = "not a number" as any as string;\nn + 1')
    assert res["status"] == "ok" and res["results"] == [{"text/plain": "'not a number1'"}], res
    # What only TypeScript has: enums, namespaces, parameter properties; a
    # file whose only import is a type's is still a script, with its value.
    res = run(api, sid, "ts", 'import type { Server } from "http";\n'
              "enum Color { Red, Green }\n"
              "namespace Geo { export const unit = 'm'; }\n"
              "class Box { constructor(private side: number) {}\n"
              "  area() { return this.side ** 2; } }\n"
              "let s: Server | null = null;\n"
              "[Color[Color.Green], Geo.unit, new Box(3).area(), s]")
    assert res["results"] == [{"text/plain": "[ 'Green', 'm', 9, null ]"}], res
    # Top-level await: the value once it settles.
    res = run(api, sid, "typescript",
              "const x: number = await Promise.resolve(2);\nx * 21;")
    assert res["status"] == "ok" and res["results"] == [{"text/plain": "42"}], res
    res = run(api, sid, "ts", 'const message: string = "Hello World!"; console.log(message)')
    assert res["stdout"] == "Hello World!\n" and res["results"] == [], res
    assert run(api, sid, "ts", "process.cwd()")["results"] == [{"text/plain": "'/work'"}]
    # A module: import works, no last value.
    res = run(api, sid, "ts", "import os from 'os';\nconst f: string = typeof os.cpus;\n"
              "console.log(f)")
    assert res["status"] == "ok" and res["stdout"] == "function\n", res


def test_typescript_errors_name_the_typescripts_lines(api):
    sid = api.session()
    # A syntax error runs nothing: a SyntaxError naming the line and
    # column, each error with its line in the traceback.
    res = run(api, sid, "typescript", "console.log('ran');\nlet x: = 3;\nlet y = (;")
    assert res["status"] == "error" and res["stdout"] == "", res
    assert res["error"]["name"] == "SyntaxError", res
    assert res["error"]["message"] == "main.ts:2:8: Type expected.", res
    tb = res["error"]["traceback"]
    assert "main.ts:2:8: error TS1110: Type expected.\n    let x: = 3;\n           ^" in tb, tb
    assert "main.ts:3:10: error TS1109" in tb and tb in res["stderr"], res
    # An exception's stack names the TypeScript's places, not those of the
    # JavaScript it became (the types taken out, the lines rewritten).
    code = ("type T = { a: number }\n\n"
            "function f(a: T,\n"
            "           b: string): never {\n"
            "  throw new TypeError('bad ' + a.a + b)\n"
            "}\n"
            "f({ a: 1 }, 'x')")
    res = run(api, sid, "ts", code)
    assert res["error"]["name"] == "TypeError" and res["error"]["message"] == "bad 1x", res
    assert "at f (main.ts:5:9)" in res["error"]["traceback"], res
    assert "at main.ts:7:1" in res["error"]["traceback"], res
    assert "/opt/petri" not in res["error"]["traceback"]
    # ... so does the stack the code reads itself, after an await too.
    res = run(api, sid, "ts", "await null;\n\ntry { (null as any).x } catch (e: any) {\n"
              "  console.log(e.stack.split('\\n')[1]) }")
    assert res["stdout"] == "    at main.ts:3:21\n", res
    res = run(api, sid, "ts", "const later: number = 1;\n"
              "setTimeout(() => { throw new RangeError('late') }, later)")
    assert res["error"]["name"] == "RangeError" and "main.ts:2:26" in res["error"]["traceback"], res


def test_typescript_from_the_projects_own_module(api):
    """A working directory with its own typescript module (npm install
    typescript) transpiles with that one: a project's TypeScript 5 syntax
    works; here a stand-in that says it was used."""
    sid = api.session()
    fake = ("module.exports = { version: '9.9.9', ScriptTarget: {}, ModuleKind: {},\n"
            "  NewLineKind: {}, transpileModule: (src) => ({ diagnostics: [],\n"
            "    outputText: JSON.stringify('the project: ' + src), sourceMapText:\n"
            "      JSON.stringify({ version: 3, sources: ['main.ts'], names: [], mappings: '' }),\n"
            "  }) };\n")
    res = run(api, sid, "bash", "mkdir -p node_modules/typescript && cd node_modules/typescript"
              " && echo '{\"name\": \"typescript\", \"main\": \"index.js\", \"version\": "
              "\"9.9.9\"}' > package.json && cat > index.js", stdin=fake)
    assert res["status"] == "ok", res
    res = run(api, sid, "ts", "1 satisfies number")
    assert res["results"] == [{"text/plain": "'the project: 1 satisfies number'"}], res
    res = run(api, sid, "bash", "node /opt/petri/run.js --typescript-version")
    assert res["stdout"].startswith("TypeScript 9.9.9 (Node.js v"), res
    # Without it, the system's again.
    run(api, sid, "bash", "rm -r node_modules")
    res = run(api, sid, "ts", "'x' as string")
    assert res["results"] == [{"text/plain": "'x'"}], res


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


def test_java_values_output_properties_and_errors(api):
    sid = api.session()
    res = run(api, sid, "java", "int x = 20;\nSystem.out.println(\"hi \" + x);\n"
              "String twice(String s) { return s + s; }\ntwice(\"ab\") + (x + 22)",
              env={"FOO": "bar"})
    assert res["status"] == "ok" and res["stdout"] == "hi 20\n", res
    assert res["results"] == [{"text/plain": "abab42"}], res
    # The environment's variables are system properties too, as E2B's kernel
    # has them; a declaration last leaves no value.
    res = run(api, sid, "jshell", 'System.getProperty("FOO", "none")', env={"FOO": "bar"})
    assert res["results"][0]["text/plain"] == "bar", res
    res = run(api, sid, "java", 'System.getProperty("FOO", "none")')
    assert res["results"][0]["text/plain"] == "none", res
    assert run(api, sid, "java", "int y = 3;")["results"] == []
    # An exception: its name, message and trace; what ran before printed.
    res = run(api, sid, "java", 'System.out.println("before");\nint[] a = new int[2];\na[5] = 1;')
    assert res["status"] == "error" and res["stdout"] == "before\n", res
    assert res["error"]["name"] == "ArrayIndexOutOfBoundsException", res
    assert res["error"]["message"] == "Index 5 out of bounds for length 2", res
    assert "ArrayIndexOutOfBoundsException" in res["stderr"], res
    # Code that does not compile runs nothing from there.
    res = run(api, sid, "java", 'System.out.println("ran");\nint z = ;\nSystem.out.println("not")')
    assert res["error"]["name"] == "CompilationError" and res["stdout"] == "ran\n", res
    # It writes where the other languages read.
    res = run(api, sid, "java", 'java.nio.file.Files.writeString(java.nio.file.Path.of("j.txt"), '
              '"from java")')
    assert api.get(f"/v1/sessions/{sid}/files/j.txt").text == "from java"


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
    res = run(api, sid, "ts", "import { readFileSync } from 'fs';\n"
              "const n: number = readFileSync('t.csv', 'utf8').trim().split('\\n').length;\n"
              "console.log(n)")
    assert res["stdout"] == "4\n", res


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
        "unknown language 'cobol': must be python, bash, c, javascript, typescript, r, java, perl, " \
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
