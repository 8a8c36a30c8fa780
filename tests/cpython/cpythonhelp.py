"""CPython's own regression tests, bare and inside petri (issue 12, part 6):
the modules run (MODULES), and tests/cpython/runner.py's three runs, which
the fixture of conftest.py starts at once (the runs sleep a lot, so together
they take little more than the longest alone):

bare   /usr/bin/python3 on the host as `nobody` (the sandbox's user is
       unprivileged too: root runs and skips other tests), in a temporary
       directory of its own;
cold   `petri run` (a sandbox of its own);
warm   a session of a `petri serve` with a warm template, with a uid range
       of its own and a free port.

The helpers of the adversarial tier (tests/hostilehelp.py) start and stop
the daemon.
"""
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import hostilehelp as H

HERE = Path(__file__).resolve().parent

RUNNER = (HERE / 'runner.py').read_text()

# Chosen by measurement: the modules whose tests make the system calls and
# touch the files that the sandbox decides on (processes, signals, threads,
# files and their metadata, archives, ptys, sockets, polling, mappings,
# limits), 24 of them, ~3,200 test cases; the three runs at once take about
# 2.5 minutes on two busy cores.  Left out for time: test_asyncio (4
# minutes bare alone), test_ssl (a CPU-bound minute of handshakes;
# tests/hostile/test_ordinary.py checks the CA certificates), test_zipfile
# (pure Python over the file calls test_tarfile and test_shutil make).
MODULES = [
    'test_os', 'test_posix', 'test_subprocess', 'test_signal', 'test_threading',
    'test_tempfile', 'test_shutil', 'test_pathlib', 'test_glob', 'test_stat',
    'test_fileio', 'test_tarfile', 'test_mmap', 'test_fcntl', 'test_select',
    'test_poll', 'test_epoll', 'test_selectors', 'test_resource', 'test_pty',
    'test_platform', 'test_pwd', 'test_grp', 'test_socket',
]
LIMITS = {'timeout': 600, 'memory': 2048, 'pids': 512, 'disk': 1024, 'cpu': 2.0,
          'output_kb': 1024}
EXTRA_CONFIG = """
[max_limits]
timeout_s = 600
memory_mb = 2048
pids = 1024
disk_mb = 1024
output_kb = 8192

[sandbox]
uid_base = {base}
uid_count = 50
"""


def runner_code():
    return f'MODULES = {MODULES!r}\n' + RUNNER


def parse(text, where):
    for line in text.splitlines():
        if line.startswith('CPYTHON '):
            return json.loads(line[len('CPYTHON '):])
    raise AssertionError(f'{where}: no result line: {text[-3000:]}')


def run_bare():
    """The runner on the host as nobody, in a directory of its own (removed
    at the end: nobody cannot enter pytest's tmp_path under root's 0700
    directory)."""
    nobody = pwd.getpwnam('nobody')
    d = tempfile.mkdtemp(prefix='petri-cpython-')
    try:
        os.chown(d, nobody.pw_uid, nobody.pw_gid)

        def drop():
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
        env = {'PATH': '/usr/bin:/bin', 'HOME': d, 'TMPDIR': d, 'LANG': 'C.UTF-8'}
        p = subprocess.run(['/usr/bin/python3', '-c', runner_code()], cwd=d, env=env,
                           preexec_fn=drop, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=LIMITS['timeout'] + 60)
        return parse(p.stdout.decode('utf-8', 'replace'), 'bare')
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_cold(tmp):
    prog = Path(tmp) / 'cpython_runner.py'
    prog.write_text(runner_code())
    result, _, _ = H.petri_run(prog, 'python', LIMITS)
    assert result['status'] == 'ok', H.describe(result)
    return parse(H.out_bytes(result, 'stdout').decode('utf-8', 'replace'), 'cold')


def run_warm(srv):
    sid = srv.api.session(limits=H.api_limits(LIMITS))
    try:
        H.SessionWatch(srv.api, sid, warm=True)
        r = srv.api.post(f'/v1/sessions/{sid}/execute',
                         {'code': runner_code(), 'timeout_s': LIMITS['timeout']},
                         timeout=LIMITS['timeout'] + 60)
        assert r.status_code == 200, f'{r.status_code} {r.text[:2000]}'
        result = H.strict_json(r.text)
    finally:
        srv.api.delete(f'/v1/sessions/{sid}')
    assert result['status'] == 'ok', H.describe(result)
    return parse(H.out_bytes(result, 'stdout').decode('utf-8', 'replace'), 'warm')
