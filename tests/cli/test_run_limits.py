"""Limits: wall and CPU time, memory, processes, disk, output; and that
nothing the code started outlives the run.  These tests need cgroups: they
never set PETRI_NO_CGROUPS (the harness removes it from the environment)."""

import os
import random
import select
import signal
import time
from pathlib import Path

import pytest

from clihelp import (OUTPUT_CAP, leftover_cgroups, popen_petri, procs_matching, spawn, wait_for,
                     wait_for_procs)

MiB = 1 << 20


def _token():
    # a float that `sleep` accepts and that no other process has in its argv
    return f'{random.randint(100000, 999999)}.{random.randint(100000, 999999)}'


# ---- time ------------------------------------------------------------------------

def test_timeout_busy_loop(petri_json):
    r = petri_json('while True: pass', '--timeout', '1')
    assert r['status'] == 'timeout', r.describe()
    assert r['exit_code'] is None
    assert 'time limit' in r['reason']
    assert r.wall < 5
    assert 900 <= r['duration_ms'] < 4000
    assert r.rc == 124


def test_timeout_sleep(petri_json):
    r = petri_json('import time\nprint("sleeping", flush=True)\ntime.sleep(100)', '--timeout', '1')
    assert r['status'] == 'timeout', r.describe()
    assert r['stdout'] == 'sleeping\n'      # output before the limit is kept
    assert r.wall < 5                         # far below the 100 s sleep
    assert r['cpu_ms'] < 900                  # sleeping costs no CPU


def test_timeout_of_a_bash_child_holding_the_pipes(petri_json):
    r = petri_json('sleep 100 | cat', '--timeout', '1', lang='bash')
    assert r['status'] == 'timeout', r.describe()
    assert r.wall < 5


def test_timeout_nonjson_exits_124_with_a_message(petri_raw):
    r = petri_raw(['run', '-t', '1', '-c', 'import time; time.sleep(100)'])
    assert r.rc == 124
    assert r.wall < 5
    assert b'timeout' in r.stderr


def test_cpu_time_limit(petri_json):
    r = petri_json('while True: pass', '--cpu-time', '1', '--timeout', '120')
    assert r['status'] == 'timeout', r.describe()
    # The CPU limit ended it, not the wall-clock one (no timing assertion:
    # a loaded machine stretches the wall time of one CPU second).
    assert 'cpu' in r['reason'].lower() and '120' not in r['reason'], r.describe()
    assert r['cpu_ms'] >= 900


def test_cpu_time_is_not_spent_by_sleeping(petri_json):
    r = petri_json('import time; time.sleep(1.5); print("done")', '--cpu-time', '1')
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'] == 'done\n'


# ---- memory ------------------------------------------------------------------------

MEMORY_BOMB = '''
chunks = bytearray()
while len(chunks) < 1 << 30:          # aims for 1 GB
    chunks += b"x" * (8 << 20)
print("survived", len(chunks))
'''


def test_memory_bomb_is_oom(petri_json):
    r = petri_json(MEMORY_BOMB, '--memory', '100', '--timeout', '20')
    assert r['status'] == 'oom', r.describe()
    assert 'survived' not in r['stdout']
    assert r['reason']
    assert r['memory_peak_bytes'] <= 110 * MiB
    assert r['memory_peak_bytes'] >= 50 * MiB
    assert r.rc == 137
    assert not leftover_cgroups([r.pid])


def test_memory_bomb_in_c_is_oom(petri_json):
    code = r'''
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
int main(void) {
    for (int i = 0; i < 256; i++) {
        char *p = malloc(4 << 20);
        if (!p) { puts("malloc failed"); return 2; }
        memset(p, 1, 4 << 20);
    }
    puts("survived");
    return 0;
}'''
    r = petri_json(code, '--memory', '100', '--timeout', '20', lang='c')
    assert 'survived' not in r['stdout'], r.describe()
    # The runtime (driver) may survive and report the child's SIGKILL; the
    # supervisor must still say it was the memory limit.
    assert r['status'] == 'oom', r.describe()


def test_small_allocation_under_the_limit_is_fine(petri_json):
    r = petri_json('b = bytearray(40 << 20)\nb[::4096] = b"y" * len(b[::4096])\nprint(len(b))',
                   '--memory', '100')
    assert r['status'] == 'ok', r.describe()
    assert r['memory_peak_bytes'] >= 40 * MiB


def test_oom_nonjson_exits_137(petri_raw):
    r = petri_raw(['run', '-m', '100', '-c', MEMORY_BOMB])
    assert r.rc == 137, r.stderr
    assert b'oom' in r.stderr


# ---- processes ------------------------------------------------------------------------

def test_pids_limit_caps_the_number_of_processes(petri_json):
    code = '''
import subprocess
procs = []
try:
    for _ in range(200):
        procs.append(subprocess.Popen(["sleep", "30"]))
except OSError as e:
    print("refused", e.errno)
print("started", len(procs))
'''
    r = petri_json(code, '--pids', '64', '--timeout', '20')
    assert r['status'] == 'ok', r.describe()
    lines = r['stdout'].splitlines()
    assert lines[0] == 'refused 11', r.describe()          # EAGAIN
    started = int(lines[1].split()[1])
    assert 10 <= started < 64


def test_python_fork_bomb_is_contained(petri_json):
    code = '''
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
'''
    r = petri_json(code, '--pids', '64', '--timeout', '2', timeout=40)
    assert r['status'] in ('timeout', 'error'), r.describe()
    assert r.wall < 15
    assert not leftover_cgroups([r.pid])


def test_bash_fork_bomb_is_contained(petri_json):
    r = petri_json(':(){ :|:& };:\nsleep 5', '--pids', '64', '--timeout', '2',
                   lang='bash', timeout=40)
    assert r['status'] in ('timeout', 'error'), r.describe()
    assert r.wall < 15
    assert not leftover_cgroups([r.pid])


def _read_line(proc, timeout):
    deadline = time.monotonic() + timeout
    buf = b''
    while not buf.endswith(b'\n'):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            break
        c = os.read(proc.stdout.fileno(), 1)
        if not c:
            break
        buf += c
    return buf


def _run_and_watch(args, token, state=None):
    """Run petri (non-JSON) with code that prints READY once its leftover
    process is running, then lives 3 s more (time for this loaded host to
    scan /proc); check from the host that a process with `token` in its
    argv exists then (and is in `state`), and is gone once petri exits."""
    with popen_petri(['run', *args]) as p:
        line = _read_line(p, 20)
        assert line == b'READY\n', (line, p.poll())
        seen = wait_for_procs(token)
        assert seen, 'the test did not see its own sandbox process from the host'
        if state:
            states = [Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
                      for pid, _, _ in seen]
            assert state in states, states
        rest, err = p.communicate(timeout=30)
    left = procs_matching(token)
    if left:
        time.sleep(2)       # for the report: are they still there 2 s later?
        pytest.fail(f'process(es) of the sandbox outlived the run: {left}; '
                    f'2 s later: {procs_matching(token)}')
    assert not leftover_cgroups([p.pid])
    return p.returncode


def test_double_forked_setsid_daemon_is_gone_after_the_run():
    token = _token()
    code = f'''
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        devnull = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.execvp("sleep", ["sleep", "{token}"])
    os._exit(0)
os.wait()
time.sleep(0.3)
print("READY", flush=True)
time.sleep(3)
'''
    assert _run_and_watch(['-c', code], token) == 0


def test_daemon_holding_stdout_does_not_keep_the_run_alive():
    token = _token()
    code = f'(setsid sleep {token} &)\nsleep 0.3\necho READY\nsleep 3\n'
    t0 = time.monotonic()
    assert _run_and_watch(['-l', 'bash', '-t', '20', '-c', code], token) == 0
    assert time.monotonic() - t0 < 10


def test_process_ignoring_sigterm_is_gone_after_the_run():
    token = _token()
    code = f'''
import subprocess, time
child = subprocess.Popen(["/usr/bin/python3", "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "signal.signal(signal.SIGHUP, signal.SIG_IGN); print('ok', flush=True); time.sleep(1000)",
    "{token}"], stdout=subprocess.PIPE, start_new_session=True)
child.stdout.readline()
print("READY", flush=True)
time.sleep(3)
'''
    assert _run_and_watch(['-c', code], token) == 0


def test_stopped_process_is_gone_after_the_run():
    token = _token()
    code = f'''
import subprocess, time
child = subprocess.Popen(["/usr/bin/python3", "-c",
    "import os, signal; os.kill(os.getpid(), signal.SIGSTOP)", "{token}"],
    start_new_session=True)
for _ in range(100):
    with open(f"/proc/{{child.pid}}/stat") as f:
        if f.read().rsplit(")", 1)[1].split()[0] == "T":
            break
    time.sleep(0.05)
print("READY", flush=True)
time.sleep(3)
'''
    assert _run_and_watch(['-c', code], token, state='T') == 0


def test_timeout_kills_everything(petri_json):
    token = _token()
    r = petri_json(f'sleep {token} &\nsleep {token} &\nwait', '--timeout', '1',
                   lang='bash')
    assert r['status'] == 'timeout', r.describe()
    assert procs_matching(token) == []


# ---- disk --------------------------------------------------------------------------------

def test_disk_limit_many_files_enospc(petri_json):
    code = '''
for i in range(50):
    with open(f"/work/part{i}", "wb") as f:
        f.write(b"x" * (1 << 20))
'''
    r = petri_json(code, '--disk', '5')
    assert r['status'] == 'error', r.describe()
    assert r['error']['name'] == 'OSError'
    assert 'No space left on device' in r['error']['message']
    assert sum(f['size'] for f in r['files']) <= 5 * MiB


def test_disk_limit_one_large_file_enospc(petri_json):
    code = '''
with open("/work/big", "wb") as f:
    for _ in range(50):
        f.write(b"x" * (1 << 20))
'''
    r = petri_json(code, '--disk', '5')
    assert r['status'] == 'error', r.describe()
    assert r['error']['name'] == 'OSError'
    assert 'No space left on device' in r['error']['message'], r.describe()


def test_disk_limit_does_not_cap_files_in_tmp(petri_json):
    # /tmp is a tmpfs of its own, sized from /work's (half of it + 16 MiB,
    # as for every session): 10 MiB fit there although /work holds 5.
    r = petri_json('open("/tmp/big", "wb").write(b"x" * (10 << 20))\nNone', '--disk', '5')
    assert r['status'] == 'ok', r.describe()
    r = petri_json('open("/tmp/big", "wb").write(b"x" * (20 << 20))\nNone', '--disk', '5')
    assert 'No space left on device' in r['error']['message'], r.describe()


def test_disk_limit_from_bash_enospc(petri_json):
    r = petri_json('for i in $(seq 50); do head -c 1048576 /dev/zero > /work/f$i || exit 9; done',
                   '--disk', '5', lang='bash')
    assert r['exit_code'] == 9, r.describe()
    assert 'No space left on device' in r['stderr']


# ---- output ------------------------------------------------------------------------------

def _check_capped(r, stream, expected_prefix_char):
    data = r.out_bytes(stream)
    assert r[f'{stream}_truncated'] is True, r.describe()
    assert 0 < len(data) <= OUTPUT_CAP
    assert len(data) >= OUTPUT_CAP - 4096      # keeps (nearly) the whole cap
    assert set(data) <= set(expected_prefix_char + b'\n')


def _check_stopped(r, stream):
    """Past the cap and 4 MiB more, petri stops reading: the writer blocks,
    and a one-shot is killed for it, the reason naming the limit."""
    assert r['status'] == 'timeout', r.describe()
    assert f'output limit of {OUTPUT_CAP >> 10} KiB exceeded on {stream}' in r['reason'], \
        r.describe()
    assert r['reason'].endswith('the sandbox was killed'), r.describe()


def test_stdout_flood_is_truncated(petri_json):
    r = petri_json('for _ in range(20 * 1024):\n    print("x" * 1023)', '--timeout', '20')
    _check_stopped(r, 'stdout')
    _check_capped(r, 'stdout', b'x')
    assert r['stderr_truncated'] is False
    assert r.wall < 15


def test_stderr_flood_is_truncated(petri_json):
    r = petri_json('import sys\nfor _ in range(20 * 1024):\n    print("e" * 1023, file=sys.stderr)',
                   '--timeout', '20')
    _check_stopped(r, 'stderr')
    _check_capped(r, 'stderr', b'e')
    assert r['stdout_truncated'] is False
    assert r.wall < 15


def test_giant_line_without_newline_is_truncated(petri_json):
    r = petri_json('import sys\nsys.stdout.write("y" * (20 << 20))\nNone', '--timeout', '20')
    _check_stopped(r, 'stdout')
    _check_capped(r, 'stdout', b'y')
    assert b'\n' not in r.out_bytes('stdout')


def test_stdout_flood_from_bash_is_truncated(petri_json):
    r = petri_json('head -c 20000000 /dev/zero | tr "\\0" b', '--timeout', '20', lang='bash')
    _check_stopped(r, 'stdout')
    _check_capped(r, 'stdout', b'b')


def test_output_a_little_past_the_cap_runs_to_its_end(petri_json):
    # Half a MiB past the cap is read and dropped: the code is not stopped.
    r = petri_json('import sys\nsys.stdout.write("o" * (OUT + (512 << 10)))\n"end"'
                   .replace('OUT', str(OUTPUT_CAP)), '--timeout', '20')
    assert r['status'] == 'ok' and r['reason'] is None, r.describe()
    assert r['results'] == [{'text/plain': "'end'"}], r.describe()
    _check_capped(r, 'stdout', b'o')


def test_endless_output_ends_with_the_timeout(petri_json):
    r = petri_json('while True:\n    print("z" * 1000)', '--timeout', '2', timeout=40)
    assert r['status'] == 'timeout', r.describe()
    assert r['stdout_truncated'] is True
    assert len(r.out_bytes()) <= OUTPUT_CAP
    assert r.wall < 15


def test_cgroup_limits_follow_the_flags():
    """From the host: the run's cgroups exist while it runs, carry the limits
    given on the command line, hold the sandbox's processes, and are removed
    afterwards."""
    token = _token()
    code = f'sleep {token} &\necho READY\nsleep 1\n'
    with popen_petri(['run', '-l', 'bash', '--memory', '100', '--pids', '48',
                      '--cpus', '0.5', '-c', code]) as p:
        assert _read_line(p, 20) == b'READY\n'
        dirs = [Path(d) for d in leftover_cgroups([p.pid])]
        assert dirs, 'no cgroup p<pid>-... for the running sandbox'
        files = {}
        for d in dirs:
            for name in ('memory.limit_in_bytes', 'memory.memsw.limit_in_bytes',
                         'memory.max', 'memory.swap.max', 'pids.max',
                         'cpu.cfs_quota_us', 'cpu.cfs_period_us', 'cpu.max'):
                if (d / name).exists():
                    files[name] = (d / name).read_text().split()
        if 'memory.limit_in_bytes' in files:          # cgroup v1
            assert files['memory.limit_in_bytes'] == [str(100 * MiB)], files
            if 'memory.memsw.limit_in_bytes' in files:
                assert files['memory.memsw.limit_in_bytes'] == [str(100 * MiB)], files
            quota = int(files['cpu.cfs_quota_us'][0])
            period = int(files['cpu.cfs_period_us'][0])
        else:                                          # cgroup v2
            assert files['memory.max'] == [str(100 * MiB)], files
            quota, period = (int(x) for x in files['cpu.max'])
        assert files['pids.max'] == ['48'], files
        assert abs(quota / period - 0.5) < 0.01, files
        # the sandbox's processes are inside
        (pid, _, _), = wait_for_procs(token)
        cg = Path(f'/proc/{pid}/cgroup').read_text()
        assert f'/p{p.pid}-' in cg, cg
        p.communicate(timeout=30)
    assert p.returncode == 0
    assert not leftover_cgroups([p.pid])
    assert not procs_matching(token)


# ---- petri itself interrupted or killed --------------------------------------------

SLEEPER = ('import subprocess, time\nsubprocess.Popen(["sleep", "{token}"])\n'
           'print("READY", flush=True)\ntime.sleep(60)\n')


def _sweep():
    """Any petri start sweeps the stale cgroups of dead petri processes."""
    spawn(['run', '-c', 'pass'])


def _wait_gone(token, seconds=3):
    wait_for(lambda: not procs_matching(token), seconds, 0.05)
    return procs_matching(token)


def _signal_petri(sig, token):
    """Start a run with a sleeper child, send sig to petri once it runs,
    wait for petri to end; returns petri's pid."""
    with popen_petri(['run', '-t', '90', '-c', SLEEPER.format(token=token)]) as p:
        assert _read_line(p, 20) == b'READY\n'
        assert wait_for_procs(token)
        p.send_signal(getattr(signal, sig))
        p.communicate(timeout=30)
    return p.pid


@pytest.mark.parametrize('sig', ['SIGINT', 'SIGTERM', 'SIGKILL'])
def test_signalled_petri_leaves_no_sandbox_process(sig):
    token = _token()
    try:
        _signal_petri(sig, token)
        assert _wait_gone(token) == [], f'sandbox processes survived {sig} to petri'
    finally:
        _sweep()


@pytest.mark.parametrize('sig', ['SIGINT', 'SIGTERM'])
def test_interrupted_petri_removes_its_cgroups(sig, no_other_petri):
    # no_other_petri: no concurrent petri start may sweep in between
    token = _token()
    pid = None
    try:
        pid = _signal_petri(sig, token)
        assert leftover_cgroups([pid]) == []
    finally:
        _sweep()
        assert pid is None or leftover_cgroups([pid]) == []


def test_cgroups_of_a_killed_petri_are_swept_by_the_next_start():
    token = _token()
    pid = _signal_petri('SIGKILL', token)
    assert _wait_gone(token) == []
    _sweep()
    assert leftover_cgroups([pid]) == []


def test_petri_piped_into_head_leaves_no_sandbox_process():
    """`petri run ... | head -1`: petri's stdout closes under it."""
    token = _token()
    code = (f'import subprocess\nsubprocess.Popen(["sleep", "{token}"])\n'
            f'import time\ntime.sleep(0.2)\nfor i in range(10**7):\n    print(i)\n')
    with popen_petri(['run', '-t', '60', '-c', code]) as p:
        assert p.stdout.readline() == b'0\n'
        p.stdout.close()
        p.wait(timeout=30)
    try:
        assert _wait_gone(token) == []
    finally:
        _sweep()


def test_petri_piped_into_head_removes_its_cgroups(no_other_petri):
    code = 'for i in range(10**7):\n    print(i)\n'
    pid = None
    try:
        with popen_petri(['run', '-t', '60', '-c', code]) as p:
            pid = p.pid
            assert p.stdout.readline() == b'0\n'
            p.stdout.close()
            p.wait(timeout=30)
        assert leftover_cgroups([pid]) == []
    finally:
        _sweep()
