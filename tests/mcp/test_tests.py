"""Test results as a model reads them over MCP: a summary line, then the
failing cases with their place and message, passed cases only counted."""
from mcphelp import text_of

TEST_CALC = '''import pytest

def add(a, b):
    return a + b

def test_ok():
    assert add(1, 2) == 3

def test_bad():
    assert add(1, 2) == 4

@pytest.mark.skip(reason="not now")
def test_skip():
    pass

def test_err():
    raise ValueError("boom")
'''


def test_pytest_results_rendered_for_a_model(mcp):
    mcp.initialize()
    res = mcp.call("write_file", {"path": "/work/test_calc.py", "content": TEST_CALC})
    assert res["isError"] is False, res
    res = mcp.execute("python3 -m pytest -q -p no:cacheprovider --junitxml=report.xml",
                      language="bash")
    t = text_of(res)
    assert res["isError"] is True
    assert "--- tests ---\ntests: 1 passed, 2 failed, 0 errors, 1 skipped\n" in t, t
    bad = t.index("FAILED test_calc::test_bad (test_calc.py:10)\n    assert 3 == 4\n")
    err = t.index("FAILED test_calc::test_err (test_calc.py:17)\n    ValueError: boom\n")
    assert bad < err, t
    # Passed and skipped cases only as their counts.
    assert "test_ok" not in t.split("--- tests ---")[1] and "test_skip" not in t.split("--- tests ---")[1]

    res = mcp.execute("print('ran')", tests="junit:missing.xml")
    t = text_of(res)
    assert res["isError"] is False and "ran" in t
    assert "--- tests ---\n[cannot read the test report 'missing.xml'" in t, t

    res = mcp.execute("1", tests="junit:../x.xml")
    assert res["isError"] is True and "'tests'" in text_of(res), text_of(res)
