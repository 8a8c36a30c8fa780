"""The programming agent's loop end to end: a small project with a failing
test goes in as an archive (`petri ask --dir`), a scripted model runs its
tests, reads the failure as data (the result's `tests`, rendered for the
model: the failing case, its location and message), writes the fix, runs
the tests again and answers; the fixed project comes out as an archive
(`--save-dir DIR` -> DIR/workspace.tar.gz), which is checked here."""
import json
import os
import subprocess
import sys
import tarfile

import pytest

from askhelp import PETRI, reply_text, reply_tools, run_ask

TEST = ('from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n'
        'def test_zero():\n    assert add(0, 0) == 0\n')
RUN = 'python3 -m pytest -q -p no:cacheprovider --junitxml=report.xml tests'
FIX = "sed -i 's/return a - b/return a + b/' calc.py && " + RUN


def make_project(root):
    (root / 'tests').mkdir(parents=True)
    (root / 'calc.py').write_text('def add(a, b):\n    return a - b\n')
    (root / 'tests' / 'conftest.py').write_text(
        'import os, sys\nsys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))\n')
    (root / 'tests' / 'test_calc.py').write_text(TEST)
    return root


def tool_message(body):
    return [m for m in body['messages'] if m['role'] == 'tool'][-1]['content']


def test_fix_a_failing_test_from_the_structured_failure(fake_model, tmp_path):
    proj = make_project(tmp_path / 'proj')
    seen = {}

    def run_tests(body):
        seen['intro'] = body['messages'][1]['content']
        return reply_tools(('call_1', 'execute', {'code': RUN, 'language': 'bash'}))

    def read_failure(body):
        text = seen['failure'] = tool_message(body)
        # The failure as data (the result's "tests", rendered for the model),
        # not only pytest's own text: which case, where, why.
        assert '--- tests ---' in text, text
        tests = text.split('--- tests ---', 1)[1]
        assert tests.splitlines()[1] == 'tests: 1 passed, 1 failed, 0 errors, 0 skipped', tests
        assert 'FAILED tests.test_calc::test_add (tests/test_calc.py:5)' in tests, tests
        assert 'assert -1 == 5' in tests and 'test_zero' not in tests, tests
        return reply_tools(('call_2', 'execute', {'code': FIX, 'language': 'bash'}),
                           content='add subtracts; fixing calc.py.')

    def answer(body):
        seen['fixed'] = tool_message(body)
        return reply_text('Fixed: add() subtracted instead of adding; both tests pass.')

    fake_model.script = [run_tests, read_failure, answer]
    save = tmp_path / 'out'
    p = run_ask(['--model', 'm', '--api-base', fake_model.base, '--dir', str(proj),
                 '--save-dir', str(save), '--json', 'Make the tests pass.'])
    assert p.returncode == 0, p.err
    assert len(fake_model.requests) == 3, p.err
    assert 'A project is in /work' in seen['intro'] and '3 files' in seen['intro']
    assert 'tests: 2 passed, 0 failed, 0 errors, 0 skipped' in seen['fixed'], seen['fixed']
    transcript = json.loads(p.out)
    archive = transcript['workspace_archive']
    assert archive == str(save / 'workspace.tar.gz')
    # The project on the host is as it was; the one that came out is fixed.
    assert 'a - b' in (proj / 'calc.py').read_text()
    out = tmp_path / 'fixed'
    with tarfile.open(archive) as t:
        names = set(t.getnames())
        assert {'calc.py', 'tests/test_calc.py', 'report.xml'} <= names, names
        t.extractall(out, filter='data') if hasattr(tarfile, 'data_filter') else \
            t.extractall(out)
    assert 'return a + b' in (out / 'calc.py').read_text()
    check = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
                            str(out / 'tests')], capture_output=True, text=True, cwd=out)
    assert check.returncode == 0 and '2 passed' in check.stdout, check.stdout + check.stderr


def test_a_project_that_cannot_go_in_is_a_clear_error(fake_model, tmp_path):
    p = run_ask(['--model', 'm', '--api-base', fake_model.base, '--dir',
                 str(tmp_path / 'missing'), 'Q'])
    assert p.returncode == 2 and '--dir' in p.err, p.err
    assert fake_model.requests == []


def test_a_project_that_cannot_go_in_leaves_nothing_in_tmp(fake_model, tmp_path):
    """The charts' directory (/tmp/petri-ask-XXXXXX, without --save-dir) is
    made after the project went in: a --dir refused left one behind per run.
    /tmp is a tmpfs of this run's own (a mount namespace), so what is left
    there is this run's."""
    import shutil
    if os.geteuid() != 0 or not shutil.which('unshare'):
        pytest.skip('a private /tmp needs root and unshare')
    script = ('mount -t tmpfs petri-test /tmp && "$0" ask --model m --api-base "$1" --dir "$2" Q; '
              'echo "rc=$?"; ls -A /tmp')
    p = subprocess.run(['unshare', '-m', '--propagation', 'private', 'sh', '-c', script, PETRI,
                        fake_model.base, str(tmp_path / 'missing')], capture_output=True, timeout=120)
    out = p.stdout.decode().split()
    assert out[0] == 'rc=2', p.stderr.decode()
    assert out[1:] == [], f'left in /tmp: {out[1:]}'
    assert fake_model.requests == []
