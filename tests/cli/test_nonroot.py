"""petri without root, as the README promises: as an ordinary user (nobody
here, through `runuser`) petri runs, checks and serves.

Without a cgroup subtree of its own it falls back to rlimits and says so
once on stderr; with a delegated one it uses it with full limits.  This
host mounts the cgroup v1 controllers, so the delegated subtree built here
is a v1 one; the v2 delegated path (the user's own cgroup, petri moving
itself into a leaf) runs live in tests/unit/test_cgroup.c on the v2 mount,
which has no controllers here, and below only on a host whose v2 root has
them.

The petri binary and the programs are copied into a directory of our own
(mode 0755: pytest's tmp_path is 0700 under root's) with a home for nobody,
where petri keeps its record; it is removed afterwards.
"""

import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
import requests

from clihelp import petri_running
from harness import PETRI

NOBODY = 'nobody'
MiB = 1 << 20
TIMEOUT = 120
FALLBACK = 'cgroups are off ('            # src/cli/main.c, once at start
MEMORY_BOMB = '''
chunks = bytearray()
while len(chunks) < 1 << 30:          # aims for 1 GB
    chunks += b"x" * (8 << 20)
print("survived", len(chunks))
'''


def _why_not():
    if os.geteuid() != 0:
        return 'needs root, to become nobody'
    if not shutil.which('runuser'):
        return 'runuser (util-linux) is not installed'
    try:
        pwd.getpwnam(NOBODY)
    except KeyError:
        return 'no user nobody'
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


class Nobody:
    """A directory nobody can read and a home it can write; run() runs the
    copied petri as nobody there."""

    def __init__(self):
        pw = pwd.getpwnam(NOBODY)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.dir = Path(tempfile.mkdtemp(prefix='petri-nonroot-'))
        self.dir.chmod(0o755)
        self.petri = self.dir / 'petri'
        shutil.copy(PETRI, self.petri)
        self.petri.chmod(0o755)
        self.home = self.dir / 'home'
        self.home.mkdir()
        os.chown(self.home, self.uid, self.gid)

    def file(self, name, text):
        p = self.dir / name
        p.write_text(text)
        p.chmod(0o644)
        return p

    def argv(self, *args):
        # HOME and XDG_STATE_HOME: petri keeps its record there (the
        # test run's STATE_DIRECTORY belongs to root).
        env = [f'HOME={self.home}', f'XDG_STATE_HOME={self.home}',
               f'STATE_DIRECTORY={self.home}/state', 'PATH=/usr/bin:/bin']
        return ['runuser', '-u', NOBODY, '--', 'env', '-i', *env, str(self.petri),
                *[str(a) for a in args]]

    def run(self, *args, preexec_fn=None, timeout=TIMEOUT):
        with petri_running():
            p = subprocess.run(self.argv(*args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, errors='replace',
                               cwd=self.dir, preexec_fn=preexec_fn, timeout=timeout)
        return p

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def nobody():
    n = Nobody()
    try:
        yield n
    finally:
        n.cleanup()


def _root_parent_exists():
    """A run as root first: root's cgroup parent then exists, as it does on
    any host where a root petri ran; without root that parent is there but
    not ours (the case that used to fail with 'cannot create a cgroup')."""
    with petri_running():
        p = subprocess.run([PETRI, 'run', '-c', 'pass'], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
                           env={k: v for k, v in os.environ.items()
                                if k != 'PETRI_NO_CGROUPS'})
    assert p.returncode == 0, p.stderr


def _said_once(stderr, what=FALLBACK):
    assert stderr.count(what) == 1, stderr
    line = next(l for l in stderr.splitlines() if what in l)
    # What is lost, in so many words.
    for lost in ('falling back to rlimits', 'RLIMIT_DATA', 'not per sandbox',
                 'no peak memory', 'RLIMIT_NPROC', 'no CPU quota',
                 'no cgroup kills the whole process tree'):
        assert lost in line, line
    return line


# ---- the fallback: no cgroup of our own ---------------------------------------

def test_run_as_nobody_falls_back_and_says_so_once(nobody):
    _root_parent_exists()
    p = nobody.run('run', '-c', 'print(1)')
    assert p.returncode == 0, p.stderr
    assert p.stdout == '1\n'
    line = _said_once(p.stderr)
    assert 'Permission denied' in line          # why: not ours to write
    assert '/sys/fs/cgroup/' in line            # which hierarchy


def test_memory_bomb_as_nobody_is_stopped_by_the_rlimit(nobody):
    _root_parent_exists()
    bomb = nobody.file('bomb.py', MEMORY_BOMB)
    p = nobody.run('run', '--json', '-m', '100', '-t', '60', bomb)
    r = json.loads(p.stdout)
    assert 'survived' not in r['stdout'], r
    # RLIMIT_DATA: the allocation fails in the process (MemoryError), where
    # a memory cgroup would have killed it (oom).
    assert r['status'] == 'error', r
    assert r['error']['name'] == 'MemoryError', r
    assert p.returncode == 1


def test_infinite_loop_as_nobody_is_stopped_by_the_timeout(nobody):
    _root_parent_exists()
    p = nobody.run('run', '--json', '-t', '1', '-c', 'while True: pass')
    r = json.loads(p.stdout)
    assert r['status'] == 'timeout', r
    assert 'time limit' in r['reason']
    assert p.returncode == 124


def test_no_cgroups_stays_an_explicit_choice():
    p = subprocess.run([PETRI, 'run', '-c', 'print(2)'], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
                       env={**os.environ, 'PETRI_NO_CGROUPS': '1'})
    assert p.returncode == 0 and p.stdout == '2\n', p.stderr
    assert 'cgroups are off (cgroups disabled by configuration)' in _said_once(p.stderr)


def test_check_as_nobody_tells_the_cgroup_layer_before_the_sandbox(nobody):
    _root_parent_exists()
    p = nobody.run('check')
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    cg = out.index('cgroups:         off: ')
    sandbox = out.index('\nsandbox:')
    assert cg < sandbox
    layer = out[cg:sandbox]
    assert 'Permission denied' in layer and '/sys/fs/cgroup/' in layer, layer
    assert 'the fallback is used, rlimits:' in layer, layer
    assert out[sandbox:].startswith('\nsandbox:         works: Python'), out
    assert 'FAILED' not in out
    assert 'warm path:       not available (the warm path needs root' in out
    _said_once(p.stderr)


# ---- petri serve as nobody -----------------------------------------------------

@contextlib.contextmanager
def serve_as_nobody(nobody):
    cfg = nobody.file('petri.ini', '[server]\nlisten = 127.0.0.1:0\n')
    with petri_running():
        proc = subprocess.Popen(nobody.argv('serve', '--config', cfg), cwd=nobody.dir,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors='replace')
        err = []
        drain = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
        drain.start()
        line = proc.stdout.readline()
    try:
        m = re.search(r'listening on (http://\S+)', line)
        assert m, f'{line!r} {"".join(err)}'
        yield m.group(1), err
    finally:
        # petri is runuser's child; runuser exits with its status (a
        # SIGTERM to runuser itself would end it by that signal).
        kids = Path(f'/proc/{proc.pid}/task/{proc.pid}/children').read_text().split()
        assert len(kids) == 1, kids
        os.kill(int(kids[0]), signal.SIGTERM)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        drain.join(10)
        proc.stdout.close()
        proc.stderr.close()
        assert code == 0, ''.join(err)[-3000:]


def test_serve_as_nobody_answers_and_says_cgroups_are_off(nobody):
    _root_parent_exists()
    with serve_as_nobody(nobody) as (url, err):
        h = requests.get(url + '/healthz', timeout=30).json()
        assert h['status'] == 'ok' and h['sessions'] == 0 and h['cgroups'] is False, h
        # One-shots, each a cold sandbox opened by a supervisor without
        # root: every one must start (pid 1 waits until its workspace is
        # open before it stops being dumpable).
        for i in range(20):
            r = requests.post(url + '/v1/execute', json={'code': f'print({i} * 7)'},
                              timeout=TIMEOUT)
            assert r.status_code == 200, r.text
            assert r.json()['stdout'] == f'{i * 7}\n', r.text
        sid = requests.post(url + '/v1/sessions', json={}, timeout=TIMEOUT).json()['id']
        r = requests.put(f'{url}/v1/sessions/{sid}/files/in.txt', data=b'hello',
                         timeout=TIMEOUT)
        assert r.status_code == 201, r.text
        r = requests.post(f'{url}/v1/sessions/{sid}/execute',
                          json={'code': 'print(open("in.txt").read())'}, timeout=TIMEOUT)
        assert r.json()['stdout'] == 'hello\n', r.text
    text = ''.join(err)
    _said_once(text)
    assert 'cannot fork a warm sandbox' not in text


# ---- a delegated cgroup subtree --------------------------------------------------

V1 = Path('/sys/fs/cgroup')
V1_CTRLS = ('memory', 'pids', 'cpu', 'cpuacct', 'freezer')


def _own_v1(ctrl):
    for line in Path('/proc/self/cgroup').read_text().splitlines():
        _, ctrls, path = line.split(':', 2)
        if ctrl in ctrls.split(','):
            return path.rstrip('/')
    return ''


def _remove_tree(d):
    for sub in sorted((p for p in d.rglob('*') if p.is_dir()), key=lambda p: -len(p.parts)):
        sub.rmdir()
    d.rmdir()


@contextlib.contextmanager
def delegated_v1(nobody):
    """What an administrator does to give a user cgroups on a v1 host: a
    directory in each hierarchy, owned by the user, with the user's petri
    started in it."""
    if not (V1 / 'memory' / 'cgroup.procs').exists():
        pytest.skip('cgroup v1 is not mounted here')
    name = f'petri-nonroot-{secrets.token_hex(4)}'
    dirs = []
    try:
        for ctrl in V1_CTRLS:
            if not (V1 / ctrl / 'cgroup.procs').exists():
                continue
            d = V1 / ctrl / _own_v1(ctrl).lstrip('/') / name
            d.mkdir()
            dirs.append(d)
            for f in (d, d / 'cgroup.procs', d / 'tasks'):
                os.chown(f, nobody.uid, nobody.gid)

        def enter():
            for d in dirs:
                (d / 'cgroup.procs').write_text('0')
        yield dirs, enter
    finally:
        for d in dirs:
            _remove_tree(d)


def test_delegated_v1_subtree_gives_nobody_full_limits(nobody):
    _root_parent_exists()
    bomb = nobody.file('bomb.py', MEMORY_BOMB)
    with delegated_v1(nobody) as (dirs, enter):
        p = nobody.run('check', preexec_fn=enter)
        assert p.returncode == 0, p.stdout + p.stderr
        assert f'cgroups:         v1 under {dirs[0]}/petri\n' in p.stdout, p.stdout
        assert 'memory yes, swap accounting' in p.stdout and 'pids yes, cpu yes' in p.stdout
        assert '\nsandbox:         works' in p.stdout
        # Cgroups without root, still no warm path: that needs more uids
        # than ours (it used to be tried, and fail for ever).
        assert 'warm path:       not available (the warm path needs root' in p.stdout
        assert FALLBACK not in p.stderr and 'cgroups lack' not in p.stderr, p.stderr

        p = nobody.run('run', '--json', '-m', '100', '-t', '60', bomb, preexec_fn=enter)
        r = json.loads(p.stdout)
        assert r['status'] == 'oom', r                # the memory cgroup's kill
        assert 50 * MiB <= r['memory_peak_bytes'] <= 110 * MiB, r
        assert p.returncode == 137
        assert FALLBACK not in p.stderr, p.stderr
        # Every sandbox cgroup went with its run.
        assert not [c for c in (dirs[0] / 'petri').iterdir() if c.is_dir()]


def _v2_root_controllers():
    try:
        return (V1 / 'cgroup.controllers').read_text().split()
    except OSError:
        return []


def test_delegated_v2_subtree_gives_nobody_full_limits(nobody):
    """As systemd delegates a cgroup (Delegate=yes): the directory and its
    cgroup.procs, cgroup.subtree_control and cgroup.threads belong to the
    user, petri the only process in it.  petri moves itself into a leaf and
    enables the controllers for its sandboxes."""
    if 'memory' not in _v2_root_controllers():
        pytest.skip('the cgroup v2 root here offers no memory controller (cgroup v1 '
                    'holds them), so a delegated v2 subtree cannot have limits; '
                    'tests/unit/test_cgroup.c runs the v2 delegated path live '
                    'without controllers and on fake trees with them')
    d = V1 / f'petri-nonroot-{secrets.token_hex(4)}'
    d.mkdir()
    try:
        for f in (d, d / 'cgroup.procs', d / 'cgroup.subtree_control', d / 'cgroup.threads'):
            os.chown(f, nobody.uid, nobody.gid)

        def enter():
            # petri alone in the delegated cgroup: no runuser beside it.
            (d / 'cgroup.procs').write_text('0')
            os.setgroups([])
            os.setgid(nobody.gid)
            os.setuid(nobody.uid)

        bomb = nobody.file('bomb.py', MEMORY_BOMB)
        env = {'HOME': str(nobody.home), 'XDG_STATE_HOME': str(nobody.home),
               'PATH': '/usr/bin:/bin'}
        with petri_running():
            p = subprocess.run([str(nobody.petri), 'run', '--json', '-m', '100', bomb],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=nobody.dir, env=env, preexec_fn=enter, timeout=TIMEOUT)
        r = json.loads(p.stdout)
        assert r['status'] == 'oom', (r, p.stderr)
        assert FALLBACK not in p.stderr, p.stderr
        assert (d / 'petri-supervisor').is_dir() and (d / 'petri').is_dir()
    finally:
        _remove_tree(d)
