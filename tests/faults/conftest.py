"""Fixtures of the load and fault tests (helpers: faulthelp.py)."""
import os
import signal

import pytest

from faulthelp import Daemon, cgroup_dirs, cgroup_procs, sandbox_procs_tagged, wait_for


def _cleanup(daemon):
    """After a test: nothing of this daemon may survive it, even if the test
    failed half-way.  Kill the daemon by pid; then kill by pid any sandbox
    process left in its cgroups and remove its empty cgroup directories (a
    killed daemon's cgroups stay until the next petri start sweeps them)."""
    daemon.kill()

    def none_left():
        """Kill what is left; True when nothing was."""
        procs = sandbox_procs_tagged(daemon.tag)
        for d, pids in cgroup_procs(cgroup_dirs(daemon.pid)).items():
            if f"/{daemon.tag}" in d:
                procs.update({p: None for p in pids})
        for p in procs:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        return not procs
    wait_for(none_left, 5)
    for d in sorted(cgroup_dirs(daemon.pid), key=len, reverse=True):
        if os.path.basename(d).startswith(daemon.tag):
            for sub, _, _ in sorted(os.walk(d), key=lambda x: len(x[0]), reverse=True):
                try:
                    os.rmdir(sub)
                except OSError:
                    pass


@pytest.fixture
def daemons(tmp_path):
    """start(config, name, lock=True, wait_warm=True) -> Daemon; every daemon
    started is killed (by pid) and cleaned up after the test."""
    started = []

    def start(config, name="petri", lock=True, wait_warm=True):
        d = Daemon(tmp_path, config, f"{name}-{len(started)}", lock=lock, wait_warm=wait_warm)
        started.append(d)
        return d

    yield start
    for d in started:
        _cleanup(d)
