"""Test failures as data: a session runs real pytest (and node --test) with
a JUnit XML reporter, and the result's "tests" carries the counts and the
failing cases with their place and message; "tests": "junit:PATH" names
the report; a report that is missing, hostile or too large is said so in
"tests", and the execution's result is still whole."""
import base64
import json
import os
import shutil

import pytest
from jsonschema import Draft202012Validator, RefResolver

from apihelp import error_of

DOC_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.json")
with open(DOC_PATH) as _f:
    DOC = json.load(_f)
RESULT_SCHEMA = Draft202012Validator({"$ref": "#/components/schemas/Result"},
                                     resolver=RefResolver("", DOC))

TEST_CALC = b'''import pytest

def add(a, b):
    return a + b

def test_ok():
    assert add(1, 2) == 3

def test_bad():
    print("hello out")
    assert add(1, 2) == 4

@pytest.mark.skip(reason="not now")
def test_skip():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_fixture(broken):
    pass
'''

PYTEST = "python3 -m pytest -q -p no:cacheprovider --junitxml={} test_calc.py"

NODE_TEST = b'''import test from 'node:test';
import assert from 'node:assert';
test('adds', () => { assert.strictEqual(1 + 2, 3); });
test('fails', () => {
  assert.strictEqual(1 + 2, 4);
});
'''


@pytest.fixture
def sid(api):
    s = api.session()
    yield s
    api.delete(f"/v1/sessions/{s}")


def put(api, sid, path, data):
    r = api.put(f"/v1/sessions/{sid}/files/{path}", data=data)
    assert r.status_code == 201, r.text


def checked(res):
    errors = sorted(RESULT_SCHEMA.iter_errors(res), key=lambda e: list(e.path))
    assert not errors, f"{errors[0].message} at {list(errors[0].path)}"
    return res


def by_name(tests):
    return {c["name"]: c for c in tests["cases"]}


def test_pytest_failures_as_data(api, sid):
    put(api, sid, "test_calc.py", TEST_CALC)
    res = checked(api.execute(sid, PYTEST.format("report.xml"), language="bash"))
    assert res["status"] == "error" and res["exit_code"] == 1, res
    tests = res["tests"]
    assert tests is not None, res
    assert (tests["passed"], tests["failed"], tests["errors"], tests["skipped"]) == (1, 1, 1, 1), tests
    assert tests["reports"] == ["report.xml"] and tests["truncated"] is False
    assert "error" not in tests
    cases = by_name(tests)
    bad = cases["test_bad"]
    assert bad["status"] == "failed" and bad["classname"] == "test_calc"
    assert bad["file"] == "test_calc.py" and bad["line"] == 11, bad
    assert "assert 3 == 4" in bad["message"], bad
    assert "where 3 = add(1, 2)" in bad["details"], bad
    fixture = cases["test_fixture"]
    assert fixture["status"] == "error" and "fixture broke" in fixture["message"], fixture
    assert fixture["file"] == "test_calc.py" and fixture["line"] == 19, fixture
    assert cases["test_skip"]["status"] == "skipped" and cases["test_skip"]["message"] == "not now"
    assert cases["test_ok"]["status"] == "passed"

    # The next execution writes no report: no tests.  (An upload first: the
    # next execution then starts a clock tick after the report was written,
    # so the report is not among the files it changed.)
    put(api, sid, "note.txt", b"x")
    res = checked(api.execute(sid, "print(1)"))
    assert res["tests"] is None, res


def test_named_report(api, sid):
    """"tests": "junit:PATH" reads that report, even one an earlier
    execution wrote, and no other."""
    put(api, sid, "test_calc.py", TEST_CALC)
    res = api.execute(sid, "mkdir -p out && " + PYTEST.format("out/r.xml") + " >/dev/null; "
                      "echo '<testsuite><testcase name=\"other\"/></testsuite>' > other.xml",
                      language="bash")
    assert sorted(res["tests"]["reports"]) == ["other.xml", "out/r.xml"], res["tests"]
    assert res["tests"]["passed"] == 2 and res["tests"]["failed"] == 1

    res = checked(api.execute(sid, "true", language="bash", tests="junit:out/r.xml"))
    assert res["tests"]["reports"] == ["out/r.xml"], res["tests"]
    assert (res["tests"]["passed"], res["tests"]["failed"]) == (1, 1)
    # As a model would write it: under /work/.
    res = api.execute(sid, "true", language="bash", tests="junit:/work/other.xml")
    assert res["tests"]["reports"] == ["other.xml"] and res["tests"]["passed"] == 1


def test_missing_and_invalid_reports(api, sid):
    # An XML file that is not a report, written by the code: nothing to say.
    res = checked(api.execute(sid, "open('data.xml', 'w').write('<rows><row/></rows>')"))
    assert res["tests"] is None, res

    res = checked(api.execute(sid, "print('ran')", tests="junit:missing.xml"))
    assert res["status"] == "ok" and res["stdout"] == "ran\n", res
    assert res["tests"]["reports"] == []
    assert "missing.xml" in res["tests"]["error"] and "No such file" in res["tests"]["error"]
    assert "passed" not in res["tests"]

    put(api, sid, "page.xml", b"<html><body>not a report</body></html>")
    res = checked(api.execute(sid, "1", tests="junit:page.xml"))
    assert "not a JUnit XML report" in res["tests"]["error"], res["tests"]

    res = checked(api.execute(sid, "open('cut.xml', 'w').write('<testsuites><testcase name=\"a\">')"))
    assert "cut.xml" in res["tests"]["error"] and "cut short" in res["tests"]["error"], res["tests"]



@pytest.mark.parametrize("tests, code", [
    ("junit:../etc/passwd", "invalid_path"),
    ("junit:/etc/passwd", "invalid_path"),
    ("junit:", "invalid_path"),
    ("tap:out.tap", "invalid_request"),
    (True, "invalid_request"),
    (["junit:a.xml"], "invalid_request"),
])
def test_tests_refused(api, sid, tests, code):
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "1", "tests": tests})
    assert r.status_code == 400, r.text
    err = error_of(r.text)
    assert err["code"] == code and "'tests'" in err["message"], err


def test_hostile_reports(api, sid):
    """What the sandbox writes as a report is untrusted: entities are never
    expanded nor read from the host, a report over 4 MiB is not read."""
    xxe = (b'<?xml version="1.0"?>\n<!DOCTYPE testsuite [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
           b'<testsuite><testcase name="&x;"><failure message="&x;">&x;</failure></testcase></testsuite>')
    put(api, sid, "xxe.xml", xxe)
    r = api.post(f"/v1/sessions/{sid}/execute", {"code": "1", "tests": "junit:xxe.xml"})
    assert r.status_code == 200 and "root:" not in r.text, r.text
    assert "DOCTYPE" in r.json()["tests"]["error"]

    entities = [b'<!ENTITY e0 "%s">' % (b"a" * 64)]
    entities += [b'<!ENTITY e%d "%s">' % (i, b"&e%d;" % (i - 1) * 16) for i in range(1, 9)]
    laughs = (b'<?xml version="1.0"?>\n<!DOCTYPE testsuites [' + b"".join(entities) + b']>\n'
              b'<testsuites><testcase name="&e8;"><failure message="&e8;">&e8;</failure>'
              b'</testcase></testsuites>')
    put(api, sid, "laughs.xml", laughs)
    res = api.execute(sid, "1", tests="junit:laughs.xml")
    assert "DOCTYPE" in res["tests"]["error"], res["tests"]

    # 5 MiB of a valid report, written by the code: named, not read.
    res = checked(api.execute(sid, "with open('big.xml', 'w') as f:\n"
                                   "    f.write('<testsuites>')\n"
                                   "    for i in range(90000):\n"
                                   "        f.write('<testcase classname=\"c\" name=\"t%05d\" time=\"0.001\"/>\\n' % i)\n"
                                   "    f.write('</testsuites>')\n"
                                   "import os; os.path.getsize('big.xml') > 4 << 20"))
    assert res["results"] == [{"text/plain": "True"}], res
    assert "big.xml" in res["tests"]["error"] and "4 MiB" in res["tests"]["error"], res["tests"]


def test_reports_read_together_are_bounded(api, sid):
    """Three reports of 3.5 MiB: two are read, the third is named."""
    res = checked(api.execute(sid, "for n in (1, 2, 3):\n"
                                   "    with open('r%d.xml' % n, 'w') as f:\n"
                                   "        f.write('<testsuites>')\n"
                                   "        for i in range(65000):\n"
                                   "            f.write('<testcase classname=\"c\" name=\"t%05d\" time=\"0.001\"/>\\n' % i)\n"
                                   "        f.write('</testsuites>')\n"))
    tests = res["tests"]
    assert tests["reports"] == ["r1.xml", "r2.xml"], {k: v for k, v in tests.items() if k != "cases"}
    assert tests["passed"] == 130000 and len(tests["cases"]) == 1000 and tests["truncated"]
    assert "r3.xml" in tests["error"] and "8 MiB together" in tests["error"], tests["error"]


def test_many_cases_bounded(api, sid):
    """3000 cases and 40 failures: the counts are whole, the failures all
    kept, the list bounded."""
    res = checked(api.execute(sid, "with open('many.xml', 'w') as f:\n"
                                   "    f.write('<testsuites><testsuite name=\"s\">')\n"
                                   "    for i in range(3000):\n"
                                   "        f.write('<testcase classname=\"m\" name=\"ok%d\"/>' % i)\n"
                                   "    for i in range(40):\n"
                                   "        f.write('<testcase classname=\"m\" name=\"bad%d\"><failure message=\"no\">'\n"
                                   "                'm.py:%d: AssertionError</failure></testcase>' % (i, i + 1))\n"
                                   "    f.write('</testsuite></testsuites>')\n"))
    tests = res["tests"]
    assert (tests["passed"], tests["failed"]) == (3000, 40), {k: v for k, v in tests.items() if k != "cases"}
    assert tests["truncated"] is True and len(tests["cases"]) == 1000
    bad = [c for c in tests["cases"] if c["status"] == "failed"]
    assert len(bad) == 40 and bad[-1]["file"] == "m.py" and bad[-1]["line"] == 40


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_node_test_junit(api, sid):
    put(api, sid, "calc.test.mjs", NODE_TEST)
    res = checked(api.execute(sid, "node --test --test-reporter=junit "
                                   "--test-reporter-destination=node.xml calc.test.mjs",
                              language="bash"))
    tests = res["tests"]
    assert tests and tests["reports"] == ["node.xml"], res
    assert (tests["passed"], tests["failed"]) == (1, 1), tests
    fails = by_name(tests)["fails"]
    assert fails["status"] == "failed" and "strictly equal" in fails["message"], fails
    assert fails["file"] == "calc.test.mjs" and fails["line"] == 5, fails


def test_oneshot_tests(api):
    r = api.post("/v1/execute", {
        "code": PYTEST.format("report.xml"), "language": "bash", "tests": "junit:report.xml",
        "files": [{"path": "test_calc.py", "content_base64": base64.b64encode(TEST_CALC).decode()}],
    })
    assert r.status_code == 200, r.text
    tests = checked(r.json())["tests"]
    assert (tests["passed"], tests["failed"], tests["errors"], tests["skipped"]) == (1, 1, 1, 1), tests
