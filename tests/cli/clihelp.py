"""Helpers of the black-box tests of `petri run` (and a few other CLI
commands); the fixtures that use them are in conftest.py.

Every test runs the real binary named by PETRI_BIN (default: build/petri of
this checkout) as a subprocess with a hard timeout.

run_json(code, *flags, lang=None, ...) -> Run  (fixture petri_json)
    `petri run --json [flags] -c CODE` (or FILE / `-`): checks that petri's
    stdout is exactly one line holding one JSON document, validates the
    result object's schema (docs/api.md, src/exec/result.h), checks that
    the exit status agrees with the result, and returns a Run with
    .result (the dict), .proc (the CompletedProcess, bytes), .wall (seconds)
    and .pid (host pid of the petri process).

spawn(args, input=None, timeout=...) -> Run  (fixture petri_raw)
    any petri command line, no parsing: for the non-JSON mode and for the
    other subcommands.  .result is None.

popen_petri(args), petri_running(), exclusive_petri()
    a petri process to watch while it runs; the shared and the exclusive
    hold of harness.petri_lock() around a start.

sandbox_procs(), procs_matching(token), leftover_cgroups(pids)
    host-side views used by the leak checks.

Every petri process started here is noted in STARTED_PIDS, for the
session's leak check (conftest.py).
"""

import base64
import codecs
import contextlib
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

from harness import (PETRI, SANDBOX_UID_MIN, command_line, ended, petri_lock, proc_status,
                     start_time, wait_for)

CGROUP_FS = Path('/sys/fs/cgroup')
CLK_TCK = os.sysconf('SC_CLK_TCK')
STATUSES = {'ok', 'error', 'timeout', 'oom', 'killed'}
OUTPUT_CAP = 1 << 20                     # BOX_OUTPUT_CAP_DEFAULT: 1 MiB per stream
DEFAULT_TIMEOUT = 60                     # subprocess timeout around petri itself

# Host pids of every petri process this worker started (for the cgroup check).
STARTED_PIDS = set()

# Every petri start sweeps the stale cgroups of dead petri processes.  A test
# that must see what a dead petri left behind holds harness.petri_lock()
# exclusively (fixture `no_other_petri`); every other run holds it shared.
_exclusive_held = False


@contextlib.contextmanager
def petri_running():
    if _exclusive_held:
        yield
        return
    with petri_lock():
        yield


@contextlib.contextmanager
def exclusive_petri():
    """Holds petri_lock() exclusively; petri_running() meanwhile does not
    take it again (fixture `no_other_petri`)."""
    global _exclusive_held
    with petri_lock(exclusive=True):
        _exclusive_held = True
        try:
            yield
        finally:
            _exclusive_held = False


@dataclass
class Run:
    proc: subprocess.CompletedProcess
    wall: float
    pid: int
    result: Optional[dict] = None
    args: list = field(default_factory=list)

    @property
    def rc(self):
        return self.proc.returncode

    @property
    def stdout(self):
        return self.proc.stdout

    @property
    def stderr(self):
        return self.proc.stderr

    # shortcuts into the result object
    def __getitem__(self, key):
        return self.result[key]

    def out_bytes(self, stream='stdout'):
        """The exact bytes the program wrote (as kept by petri)."""
        r = self.result
        if stream + '_base64' in r:
            return base64.b64decode(r[stream + '_base64'], validate=True)
        return r[stream].encode('utf-8')

    def describe(self):
        r = dict(self.result or {})
        for k in ('stdout', 'stderr', 'stdout_base64', 'stderr_base64'):
            if isinstance(r.get(k), str) and len(r[k]) > 400:
                r[k] = r[k][:200] + f'...<{len(r[k])} chars>...' + r[k][-100:]
        if r.get('results'):
            r['results'] = [{m: (v if len(v) < 200 else v[:80] + '...')
                             for m, v in b.items()} for b in r['results']]
        return (f'petri {" ".join(self.args)!r}\nrc={self.rc} wall={self.wall:.2f}s\n'
                f'result={json.dumps(r, indent=1)}\n'
                f'petri stderr={self.proc.stderr[-2000:]!r}')


def spawn(args, input=None, timeout=DEFAULT_TIMEOUT, env=None):
    full_env = dict(os.environ)
    full_env.pop('PETRI_NO_CGROUPS', None)   # the suite runs WITH cgroups
    if env:
        full_env.update(env)
    with petri_running():
        t0 = time.monotonic()
        p = subprocess.Popen([PETRI, *args], stdin=subprocess.PIPE if input is not None
                             else subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=full_env)
        STARTED_PIDS.add(p.pid)
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()                     # its cgroups stay until the next sweep:
            STARTED_PIDS.discard(p.pid)  # this test fails anyway, do not blame others
            out, err = p.communicate()
            pytest.fail(f'petri {args!r} did not finish within {timeout} s '
                        f'(stdout {out[-500:]!r}, stderr {err[-500:]!r})')
        wall = time.monotonic() - t0
    proc = subprocess.CompletedProcess([PETRI, *args], p.returncode, out, err)
    return Run(proc=proc, wall=wall, pid=p.pid, args=list(args))


@contextlib.contextmanager
def popen_petri(args, **kw):
    """A petri process to watch while it runs (Popen, stdout/stderr pipes);
    killed on the way out if it is still running."""
    kw.setdefault('stdout', subprocess.PIPE)
    kw.setdefault('stderr', subprocess.PIPE)
    env = dict(os.environ)
    env.pop('PETRI_NO_CGROUPS', None)
    with petri_running():
        p = subprocess.Popen([PETRI, *[str(a) for a in args]], env=env, **kw)
        STARTED_PIDS.add(p.pid)
        try:
            yield p
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
                STARTED_PIDS.discard(p.pid)   # the test failed already
            for f in (p.stdin, p.stdout, p.stderr):
                if f:
                    f.close()


def _fffd_per_byte(err):
    """Decoding error handler: one U+FFFD for each invalid byte (as
    utf8_sanitize() in src/util/utf8.c does); 'replace' gives one for each
    maximal subpart."""
    return '\ufffd' * (err.end - err.start), err.end


codecs.register_error('petri-fffd-per-byte', _fffd_per_byte)


def _reject_constant(name):
    raise ValueError(f'non-standard JSON constant {name}')


def validate_result(r, where=''):
    """Schema of the result object; any violation is a petri bug."""
    assert isinstance(r, dict), where
    required = {
        'status': str, 'stdout': str, 'stderr': str, 'stdout_truncated': bool,
        'stderr_truncated': bool, 'results': list, 'files': list,
        'duration_ms': int, 'cpu_ms': int, 'memory_peak_bytes': int,
    }
    for key, kind in required.items():
        assert key in r, f'missing "{key}" {where}'
        assert isinstance(r[key], kind), f'"{key}" is {type(r[key]).__name__} {where}'
    for key in ('exit_code', 'signal', 'error', 'reason'):
        assert key in r, f'missing "{key}" {where}'
    assert r['status'] in STATUSES, where
    for key in ('exit_code', 'signal'):
        assert r[key] is None or (isinstance(r[key], int) and not isinstance(r[key], bool)), where
    assert r['reason'] is None or isinstance(r['reason'], str), where
    for key in ('duration_ms', 'cpu_ms', 'memory_peak_bytes'):
        assert r[key] >= 0, where
    for stream in ('stdout', 'stderr'):
        if stream + '_base64' in r:
            raw = base64.b64decode(r[stream + '_base64'], validate=True)
            # the text form is the same bytes with invalid ones replaced by
            # U+FFFD (one per byte or one per maximal subpart: both are
            # fine).  A U+FFFD the program wrote itself (EF BF BD) stays.
            assert r[stream] in (raw.decode('utf-8', 'petri-fffd-per-byte'),
                                 raw.decode('utf-8', 'replace')), \
                f'{stream} text != base64 {where}'
            try:                     # only sent when the bytes are not UTF-8
                raw.decode('utf-8')
                pytest.fail(f'{stream}_base64 sent for valid UTF-8 {where}')
            except UnicodeDecodeError:
                pass
    for bundle in r['results']:
        assert isinstance(bundle, dict) and bundle, where
        for mime, value in bundle.items():
            assert isinstance(mime, str) and '/' in mime, where
            assert isinstance(value, str), where
    if r['error'] is not None:
        for key in ('name', 'message', 'traceback'):
            assert isinstance(r['error'].get(key), str), f'error.{key} {where}'
    for f in r['files']:
        assert isinstance(f, dict), where
        assert isinstance(f.get('path'), str) and isinstance(f.get('size'), int), where
        assert not f['path'].startswith('/') and '..' not in f['path'].split('/'), where
    if r['status'] in ('timeout', 'oom', 'killed'):
        assert r['reason'], f'a {r["status"]} result needs a reason {where}'


def expected_cli_code(r):
    """petri run's exit status for a result (src/exec/result.h)."""
    if r['status'] == 'timeout':
        return 124
    if r['status'] == 'oom':
        return 137
    if r['status'] in ('ok', 'error') and r['exit_code'] is not None:
        return r['exit_code']
    return None


def run_json(code=None, *flags, lang=None, file=None, stdin=None,
             timeout=DEFAULT_TIMEOUT, env=None):
    args = ['run', '--json']
    if lang:
        args += ['-l', lang]
    args += [str(f) for f in flags]
    if code is not None:
        args += ['-c', code]
    elif file is not None:
        args.append(str(file))
    else:
        args.append('-')
    run = spawn(args, input=stdin, timeout=timeout, env=env)
    out = run.proc.stdout
    assert out.endswith(b'\n') and out.count(b'\n') == 1, (
        f'--json must print exactly one line; got {out[:300]!r}...{out[-300:]!r} '
        f'(rc={run.rc}, stderr={run.proc.stderr[-1000:]!r})')
    text = out.decode('utf-8')              # must be UTF-8 (it is even ASCII)
    run.result = json.loads(text, parse_constant=_reject_constant)
    validate_result(run.result, where=f'(petri {" ".join(args)[:200]!r})')
    want = expected_cli_code(run.result)
    if want is not None:
        assert run.rc == want, f'exit status {run.rc}, expected {want}\n{run.describe()}'
    return run


# ---- host-side views -------------------------------------------------------

def _status_field(pid, name):
    v = (proc_status(pid) or {}).get(name)
    return v.split() if v is not None else None


def _proc_uid(pid):
    v = _status_field(pid, 'Uid')
    return int(v[0]) if v else None


def _proc_ppid(pid):
    v = _status_field(pid, 'PPid')
    return int(v[0]) if v else None


def is_petri_supervisor(pid):
    """A live, host-uid process running a petri binary."""
    uid = _proc_uid(pid)
    if uid is None or uid >= SANDBOX_UID_MIN:
        return False
    try:
        exe = os.readlink(f'/proc/{pid}/exe')
    except OSError:
        return False
    return os.path.basename(exe).startswith('petri')


def sandbox_procs(since_ticks=0):
    """Live (non-zombie) host processes whose real uid is in the sandbox
    range, started at or after since_ticks: [(pid, uid, cmdline)]."""
    found = []
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        pid = int(name)
        uid = _proc_uid(pid)
        if uid is None or uid < SANDBOX_UID_MIN:
            continue
        st = start_time(pid)
        if st is None or st < since_ticks or ended(pid):
            continue
        found.append((pid, uid, command_line(pid)))
    return found


def has_live_supervisor(pid):
    seen = set()
    while pid and pid not in seen:
        seen.add(pid)
        if is_petri_supervisor(pid):
            return True
        pid = _proc_ppid(pid)
    return False


def _runs_petri(pid):
    try:
        return os.path.basename(os.readlink(f'/proc/{pid}/exe')).startswith('petri')
    except OSError:
        return False


def procs_matching(token):
    """Sandbox-uid processes whose command line contains token, leaving out
    the sandbox's pid 1 (a fork of petri: its argv holds the -c code)."""
    return [p for p in sandbox_procs() if token in p[2] and not _runs_petri(p[0])]


def wait_for_procs(token, timeout=5):
    """procs_matching(token), waiting for it to be non-empty: a child that
    has just been started may not show its new argv for a moment."""
    return wait_for(lambda: procs_matching(token), timeout, 0.05)


def cgroup_petri_dirs():
    """Every .../petri directory under /sys/fs/cgroup (a few levels deep)."""
    found = []

    def walk(d, depth):
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            if not e.is_dir(follow_symlinks=False):
                continue
            if e.name == 'petri':
                found.append(Path(e.path))
            elif depth < 5 and not (e.name.startswith('p') and '-' in e.name):
                walk(e.path, depth + 1)
    walk(CGROUP_FS, 0)
    return found


def leftover_cgroups(pids, dirs=None):
    """cgroup directories p<pid>-... of the given petri pids."""
    pids = {int(p) for p in pids}
    left = []
    for d in dirs if dirs is not None else cgroup_petri_dirs():
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if n.startswith('p') and '-' in n:
                head = n[1:].split('-', 1)[0]
                if head.isdigit() and int(head) in pids:
                    left.append(str(d / n))
    return left
