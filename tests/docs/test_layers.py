"""The source is layered as docs/architecture.md draws it: the table under
"Who may include whom" lists, for each directory of src/, the other
directories whose headers it includes, and this checks it both ways (an
include the table does not allow fails, and so does a row that allows what
nothing includes, so the drawing never goes stale).

One rule holds whatever the table says: a front end (the HTTP API, E2B's
adapter, MCP, petri ask, the cluster agent) reaches a sandbox only through
the session layer, so it includes nothing of jail/, runtime/ or workspace/.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / 'src'
DOC = ROOT / 'docs' / 'architecture.md'

FRONT_ENDS = {'api', 'e2b', 'mcp', 'agent', 'cluster'}
BELOW_THE_DOOR = {'jail', 'runtime', 'workspace'}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z0-9_]+)/[^"]+"', re.M)
ROW = re.compile(r'^\|\s*`([a-z0-9_]+)/`\s*\|\s*(.*?)\s*\|\s*$')


def table():
    """{directory: set of directories it may include}, from the doc."""
    text = DOC.read_text()
    start = text.index('### Who may include whom')
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith('#'):
            break
        m = ROW.match(line)
        if m:
            allowed = {d.strip().strip('`').rstrip('/') for d in m.group(2).split(',')}
            rows[m.group(1)] = allowed - {'', '—'}
    return rows


def graph():
    """{directory: {included directory: [file naming it first]}} of src/."""
    edges = {}
    for path in sorted(SRC.rglob('*')):
        if path.suffix not in ('.c', '.h') or not path.is_file():
            continue
        here = path.relative_to(SRC).parts[0]
        found = edges.setdefault(here, {})
        for there in INCLUDE.findall(path.read_text(errors='replace')):
            if there != here:
                found.setdefault(there, str(path.relative_to(ROOT)))
    return edges


def test_the_table_names_every_directory_of_src():
    rows, edges = table(), graph()
    assert rows, f'no table under "Who may include whom" in {DOC}'
    assert set(edges) == set(rows), (
        f'directories with C files: {sorted(edges)}; rows: {sorted(rows)}')


def test_no_include_the_table_does_not_allow():
    rows, edges = table(), graph()
    wrong = [f'{file} includes {there}/ ({here}/ may include {sorted(rows.get(here, ()))})'
             for here, found in edges.items() for there, file in found.items()
             if there not in rows.get(here, ())]
    assert not wrong, '\n'.join(wrong)


def test_the_table_allows_nothing_unused():
    rows, edges = table(), graph()
    stale = [f'{here}/ may include {there}/, and nothing there does'
             for here, allowed in rows.items() for there in allowed
             if there not in edges.get(here, {})]
    assert not stale, '\n'.join(stale)


def test_front_ends_reach_a_sandbox_only_through_the_session_layer():
    rows, edges = table(), graph()
    for here in FRONT_ENDS:
        assert here in edges, f'src/{here}/ is gone: update FRONT_ENDS'
        below = {there: file for there, file in edges[here].items() if there in BELOW_THE_DOOR}
        assert not below, f'{here}/ includes {below}: front ends use session/ only'
        assert not rows[here] & BELOW_THE_DOOR, f'the table lets {here}/ past the door'
