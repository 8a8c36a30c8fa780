"""`petri mcp` answers initialize and tools/list before it starts anything
heavy (docs/mcp.md "Start-up"): no sandbox, no probe, no template exists
until the client has its tools; the template then starts in the
background and the first execute uses it (waiting at most [sessions]
warm_wait_s); what the sandboxes have comes from what an earlier start
found (found.json in the state directory).  No timing is asserted
(bench/mcpstart.py measures).

Without the change: tools/list started the client's sandbox to learn
Python's version and waited up to 20 s for a probe that competed with the
template's imports (12.6-21.4 s to answer on a loaded machine); the
template, started with the process, was cancelled unused at every exit
("no warm path (cancelled)", a warning)."""
import json
import os
import re

from harness import process_tree
from mcphelp import text_of


def cmdlines(pid):
    out = []
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                out.append(f.read())
        except OSError:
            pass
    return out


def listed(m):
    r = m.request("tools/list")
    return {t["name"]: t for t in r["result"]["tools"]}


def test_initialize_and_tools_list_start_nothing(make_mcp):
    # A first run finds out what the sandboxes have and keeps it.
    first = make_mcp()
    first.initialize()
    assert "numpy" in listed(first)["execute"]["description"]
    code, err = first.close()
    assert code == 0, err
    state = os.environ.get("STATE_DIRECTORY")
    if state:
        with open(os.path.join(state, "found.json")) as f:
            kept = json.load(f)
        assert "numpy" in kept["found"]["packages"], list(kept)

    m = make_mcp()
    m.initialize()
    # Answered, and nothing below petri mcp: no template, no sandbox.
    assert cmdlines(m.proc.pid) == []
    desc = listed(m)["execute"]["description"]
    # Complete from what the last start found: packages, Python's version.
    import importlib.metadata
    assert f"numpy {importlib.metadata.version('numpy')}" in desc, desc
    assert re.search(r"Python 3\.\d+\.\d+", desc), desc
    code, err = m.close()
    assert code == 0, err
    assert "as found before" in err, err
    assert "no warm path" not in err and ": warning: " not in err, err


def test_the_first_execute_uses_the_template_started_after_tools_list(make_mcp):
    m = make_mcp(config="[sessions]\nwarm_wait_s = 300\n")
    m.initialize()
    listed(m)
    res = m.execute("import sys; 'numpy' in sys.modules")
    assert res["isError"] is False and "True" in text_of(res), res
    code, err = m.close()
    assert code == 0, err
    # Warm (it waited for the template, or the template was ready), never
    # cold, and nothing was stopped unused at exit.
    assert "went cold" not in err, err
    assert "still starting" not in err and "no warm path" not in err, err
    assert ": warning: " not in err, err


def test_without_warm_nothing_starts_a_template(make_mcp):
    m = make_mcp(config="[sessions]\nwarm = false\n")
    m.initialize()
    listed(m)
    res = m.execute("1 + 1")
    assert res["isError"] is False and "2" in text_of(res), res
    assert not any(b"--zygote" in c for c in cmdlines(m.proc.pid))
    code, err = m.close()
    assert code == 0, err
    assert "template" not in err, err
