"""A project's tests in a session (docs/projects.md): the session the page
shows is accepted under the default [max_limits], and the tools a project's
tests need run inside it, offline: git (commits with the sandbox's default
identity, overridden by the code's own), make with gcc and g++, pkg-config,
pytest, node and npm, jq, sqlite3, rg, patch and diff, tar and unzip.
GET /v1/languages says which tools a sandbox found."""
import json
import os
import re

import pytest

from apihelp import wait_for

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "projects.md")


def documented_session():
    """The session-create body of docs/projects.md, as the page shows it."""
    text = open(DOC, encoding="utf-8").read()
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    bodies = [json.loads(b) for b in blocks if '"limits"' in b]
    assert len(bodies) == 1, blocks
    return bodies[0]


@pytest.fixture(scope="module")
def project(server):
    api = server.api()
    r = api.post("/v1/sessions", documented_session())
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    yield api, sid
    api.delete(f"/v1/sessions/{sid}")


def run(project, code, **kw):
    api, sid = project
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": code, "language": "bash", **kw})
    assert r.status_code == 200, r.text
    return r.json()


def ok(project, code):
    res = run(project, code)
    assert res["status"] == "ok", res
    return res["stdout"]


def test_the_documented_session_fits_the_default_maxima(project):
    api, sid = project
    assert api.get(f"/v1/sessions/{sid}").json()["limits"] == documented_session()["limits"]


def test_git_commits_with_a_default_identity(project):
    out = ok(project, "rm -rf repo && git init -q repo && cd repo && echo one > a.txt && "
                      "git add a.txt && git commit -qm first && "
                      "git log --format='%an <%ae> %s' && git branch --show-current")
    assert out == "sandbox <sandbox@petri.invalid> first\nmain\n", out
    # The code's own configuration wins over the default.
    out = ok(project, "cd repo && git config user.name Agent && git config user.email a@b.c && "
                      "echo two >> a.txt && git commit -qam second && "
                      "git log -1 --format='%an <%ae>' && git diff HEAD~1 --stat | tail -1")
    assert out.startswith("Agent <a@b.c>\n") and "1 insertion" in out, out


def test_make_builds_c_and_cpp(project):
    ok(project, "rm -rf build && mkdir build && cd build && "
                "printf '#include <stdio.h>\\nint main(void){puts(\"c ok\");return 0;}\\n' > hi.c && "
                "printf '#include <iostream>\\nint main(){std::cout<<\"c++ ok\"<<std::endl;}\\n' "
                "> hi.cpp && "
                "printf 'all: hi hipp\\nhi: hi.c\\n\\tgcc -O2 -o $@ $<\\nhipp: hi.cpp\\n"
                "\\tg++ -O2 -o $@ $<\\ntest: all\\n\\t./hi && ./hipp\\n' > Makefile")
    out = ok(project, "cd build && make -s -j2 test")
    assert out == "c ok\nc++ ok\n", out
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?\n", ok(project, "pkg-config --modversion jansson"))


def test_pytest_reports_failures_and_junit(project):
    ok(project, "rm -rf py && mkdir py && cd py && printf 'def test_ok():\\n    assert 1\\n\\n"
                "def test_bad():\\n    assert 1 == 2\\n' > test_it.py")
    res = run(project, "cd py && python3 -m pytest -q -p no:cacheprovider --junitxml=report.xml")
    assert res["status"] == "error" and res["exit_code"] == 1, res
    assert "1 failed, 1 passed" in res["stdout"], res["stdout"]
    assert 'failures="1"' in ok(project, "cat py/report.xml")


def test_node_and_npm_offline(project):
    ok(project, "rm -rf js && mkdir js && cd js && "
                "printf '{\"name\": \"p\", \"version\": \"1.0.0\", \"scripts\": "
                "{\"test\": \"node --test\"}}\\n' > package.json && "
                "printf 'const test = require(\"node:test\");\\nconst assert = "
                "require(\"node:assert\");\\ntest(\"adds\", () => assert.strictEqual(1 + 1, 2));\\n'"
                " > add.test.js")
    assert re.fullmatch(r"\d+\.\d+\.\d+\n", ok(project, "npm --version"))
    out = ok(project, "cd js && npm test 2>&1")
    assert "# pass 1" in out and "# fail 0" in out, out


def test_jq_sqlite_rg_patch_diff(project):
    assert ok(project, "echo '{\"a\": [1, 2, 3]}' | jq '.a | add'") == "6\n"
    assert ok(project, "rm -f t.db && sqlite3 t.db 'create table t(x); insert into t "
                       "values (20), (22); select sum(x) from t;'") == "42\n"
    out = ok(project, "rm -rf tree && mkdir -p tree/sub && echo needle > tree/sub/f.txt && "
                      "rg -l needle tree")
    assert out == "tree/sub/f.txt\n", out
    res = run(project, "printf 'one\\ntwo\\n' > old.txt && printf 'one\\nthree\\n' > new.txt && "
                       "diff -u old.txt new.txt > change.patch; echo $?; "
                       "patch -s old.txt < change.patch && cat old.txt")
    assert res["stdout"] == "1\none\nthree\n", res


def test_tar_and_unzip(project):
    ok(project, "rm -rf arc && mkdir -p arc/src && echo data > arc/src/f.txt && "
                "python3 -c \"import zipfile; z = zipfile.ZipFile('arc.zip', 'w'); "
                "z.write('arc/src/f.txt'); z.close()\" && tar czf arc.tar.gz arc")
    out = ok(project, "rm -rf x y && mkdir x y && tar xzf arc.tar.gz -C x && "
                      "unzip -q arc.zip -d y && cat x/arc/src/f.txt y/arc/src/f.txt")
    assert out == "data\ndata\n", out


def test_languages_lists_the_tools_found(api):
    def found():
        body = api.get("/v1/languages").json()
        return body if body.get("tools") else None

    body = wait_for(found, 60)
    assert body, api.get("/v1/languages").text
    tools = {t["name"]: t["version"] for t in body["tools"]}
    assert list(tools) == ["git", "make", "gcc", "g++", "pkg-config", "pytest", "npm", "jq",
                           "sqlite3", "rg", "patch", "diff", "tar", "unzip"], tools
    assert all(tools.values()), tools
