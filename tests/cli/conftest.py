"""Fixtures of the black-box tests of `petri run` (helpers: clihelp.py).

petri_json(code, *flags, lang=None, ...) -> Run
    clihelp.run_json: `petri run --json`, its output and exit status checked.

petri_raw(args, input=None, timeout=...) -> Run
    clihelp.spawn: any petri command line, no parsing.

no_other_petri
    holds harness.petri_lock() exclusively for a test that must see what a
    dead petri left behind (every other start holds it shared).

Session check (autouse, per xdist worker): after the run no sandbox process
(host uid >= 2000000000, see DEFAULT_UID_BASE in src/jail/jail.c) started
during the session is left without a live petri supervisor above it, no
cgroup p<pid>-... of a petri process this worker started remains under any
.../petri/ directory of /sys/fs/cgroup, and /proc/self/mountinfo lists the
same mounts as at the start.
"""
import os

import pytest

from clihelp import (CLK_TCK, DEFAULT_TIMEOUT, STARTED_PIDS, exclusive_petri, has_live_supervisor,
                     is_petri_supervisor, leftover_cgroups, run_json, sandbox_procs, spawn)
from harness import PETRI, runs, start_time, wait_for


@pytest.fixture
def no_other_petri():
    with exclusive_petri():
        yield


@pytest.fixture
def petri_json():
    return run_json


@pytest.fixture
def petri_raw():
    return lambda args, input=None, timeout=DEFAULT_TIMEOUT, env=None: spawn(
        [str(a) for a in args], input=input, timeout=timeout, env=env)


# ---- the session check ----------------------------------------------------

def uptime_ticks():
    with open('/proc/uptime') as f:
        return int(float(f.read().split()[0]) * CLK_TCK)


def _mounts():
    with open('/proc/self/mountinfo') as f:
        return sorted(f.read().splitlines())


@pytest.fixture(scope='session', autouse=True)
def no_leaks_after_session():
    assert os.access(PETRI, os.X_OK), f'PETRI_BIN {PETRI} is not an executable'
    start = uptime_ticks() - CLK_TCK    # a second of slack
    mounts_before = _mounts()
    yield
    problems = []

    # Sandbox processes with no petri supervisor above them are strays.
    # One that is seen so for a moment is not: its supervisor's teardown
    # may be in flight, in this worker or in another whose tests still
    # run (a process the kernel is killing with its namespace is handed
    # up, out of its supervisor's tree, until it is gone).  A stray is one
    # that stays so: the same process, still running, still unsupervised.
    def strays_now():
        return {(p[0], start_time(p[0])): p for p in sandbox_procs(start)
                if not has_live_supervisor(p[0])}

    def lasting(seen):
        return [p for (pid, st), p in seen.items() if runs(pid, st) and not has_live_supervisor(pid)]
    seen = strays_now()
    wait_for(lambda: not lasting(seen), 5, 0.2)
    strays = lasting(seen)
    if strays:
        problems.append(f'stray sandbox processes (pid, uid, cmdline): {strays}')

    running = {p for p in STARTED_PIDS if os.path.exists(f'/proc/{p}')
               and is_petri_supervisor(p)}
    left = leftover_cgroups(STARTED_PIDS - running)
    if left:
        problems.append(f'leftover cgroups: {left}')

    mounts_after = _mounts()
    if mounts_after != mounts_before:
        gone = sorted(set(mounts_before) - set(mounts_after))
        new = sorted(set(mounts_after) - set(mounts_before))
        problems.append(f'host mount table changed: gone {gone}, new {new}')
    assert not problems, '\n'.join(problems)
