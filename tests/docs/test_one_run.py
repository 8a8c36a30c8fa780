"""Any set of pytest tiers can be collected and run in one pytest process
(`pytest tests/driver tests/cli tests/api ...`), though `make test` runs
them one tier at a time.  A tier is a directory without `__init__.py`, so
pytest imports each of its files by its basename, with the tier's directory
put on sys.path, and the root conftest.py adds tests/.  That holds only if:

- no module imports `conftest`: with several tiers collected, that name is
  whichever tier's conftest.py pytest loaded last.  Fixtures stay in a
  conftest.py (pytest finds them per directory, unimported); helpers live in
  a module of their own (apihelp.py, clihelp.py...) or in tests/ (harness/,
  memcg.py, hostilehelp.py), imported by that name;
- no two modules share a name: two test_load.py in one run are pytest's
  "import file mismatch", and of two helpers of one name the first imported
  serves both tiers;
- nothing but the root conftest.py changes sys.path: one tier's insert would
  change what every other tier's imports find, and only when they run
  together.
"""

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The hostile corpus: programs that run inside a sandbox, never imported.
PROGRAMS = TESTS / 'hostile' / 'corpus'


def sources():
    """(path relative to tests/, parsed module) of every Python file a tier
    may import, node's packages left out."""
    for path in sorted(TESTS.rglob('*.py')):
        if 'node_modules' in path.parts or PROGRAMS in path.parents:
            continue
        yield path.relative_to(TESTS).as_posix(), ast.parse(path.read_bytes(), str(path))


def test_no_module_imports_conftest():
    wrong = []
    for rel, tree in sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            if any(n == 'conftest' or n.startswith('conftest.') for n in names):
                wrong.append(f'{rel}:{node.lineno}')
    assert not wrong, ('imports of conftest (move what they take into a helper module '
                       'of the tier and import that): ' + ', '.join(wrong))


def test_no_two_modules_share_a_name():
    by_name = defaultdict(list)
    for rel, _ in sources():
        path = TESTS / rel
        if path.name in ('conftest.py', '__init__.py') or (path.parent / '__init__.py').exists():
            continue                  # pytest's own, or a package's (imported by its dotted name)
        by_name[path.stem].append(rel)
    shared = {name: rels for name, rels in by_name.items() if len(rels) > 1}
    assert not shared, f'modules imported by the same name: {shared}'


def test_only_the_root_conftest_changes_sys_path():
    wrong = []
    for rel, tree in sources():
        if rel == 'conftest.py':
            continue
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                targets = [node.func.value]           # sys.path.insert(...), .append(...)
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = getattr(node, 'targets', None) or [node.target]
            if any(ast.unparse(t.value if isinstance(t, ast.Subscript) else t) == 'sys.path'
                   for t in targets):
                wrong.append(f'{rel}:{node.lineno}')
    assert not wrong, ('sys.path changed outside tests/conftest.py (put the module in '
                       'tests/, which is on the path): ' + ', '.join(wrong))
