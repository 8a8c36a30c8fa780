"""Helpers of the load and fault tests of `petri serve` (tests/faults; the
fixture lives in conftest.py): Daemon, Api, the /proc and cgroup views and
the leak checks.

Load and fault tests of `petri serve`: a hundred sessions with hostile
neighbours, kill -9 of the daemon, the warm template killed under load,
SIGTERM under load.

The machine is shared and noisy (other developers run petri daemons and
test suites on it): nothing here asserts tight timings.  Numbers are printed
(pytest -s) and written to tests/faults/out/*.txt; the assertions are about
correctness, zero errors and what is left behind.

Every leak check is scoped to the daemons this module started: their
sandboxes' cgroups are named p<daemon-pid>-<starttime>-<n>, so a sandbox
process (host uid >= 2000000000) is ours when its /proc/<pid>/cgroup names
one of them.  Other daemons' sandboxes run under the same uids.

Daemons are stopped by pid only (never by name); the `daemons` fixture
(conftest.py) kills whatever is still running at the end of a test, even on
failure, and removes what a killed daemon may have left (its sandboxes'
processes, found by cgroup name, and its empty cgroup directories).
"""
import os
import re
import time
from pathlib import Path

import requests

import harness
from harness import SSE, metric  # noqa: F401 -- for the tier's tests
from harness import SANDBOX_UID_MIN, Api, cgroup_dirs, proc_status, read_text, still_alive, wait_for

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "out"


# ---------------------------------------------------------------- /proc views

def mountinfo():
    """The mount points of our mount namespace, as a sorted list of their
    descriptions (mount ids left out)."""
    with open("/proc/self/mountinfo") as f:
        return sorted(line.split(" ", 4)[4] for line in f)


# ---------------------------------------------------------------- daemons

class Daemon(harness.Daemon):
    """One `petri serve` (harness.Daemon) whose warm template is up, unless
    its config turns the warm path off or wait_warm=False.

    .tag ("p<pid>-<starttime>-": the prefix of its sandboxes' cgroups),
    .api(), .metrics(), .log_matches() and .wait_log() (its log lines, each
    with the monotonic time it was first seen)."""

    def __init__(self, tmp_path, config, name, lock=True, wait_warm=True, preexec_fn=None):
        self._seen = []
        super().__init__(tmp_path, config, name=name, lock=lock, preexec_fn=preexec_fn)
        self.warm_expected = not re.search(r"^\s*warm\s*=\s*(false|no|off|0)\s*$", config,
                                           re.M | re.I)
        if wait_warm and self.warm_expected:
            state = self.wait_warm(60)
            assert state == "ready", \
                f"no warm template within 60 s ({state}): {self.stderr_text()[-3000:]}"

    def api(self):
        return Api(self.url)

    def log_matches(self, pattern):
        """[(time, line)] of the log lines containing pattern; the time is
        when a call here first saw the line."""
        lines = self.stderr_text().split("\n")[:-1]
        now = time.monotonic()
        self._seen += [(now, line + "\n") for line in lines[len(self._seen):]]
        return [(t, line) for t, line in self._seen if pattern in line]

    def wait_log(self, pattern, timeout, count=1):
        """Wait until `pattern` was logged `count` times; returns the
        (time, line) of the count-th, or None."""
        hits = wait_for(lambda: len(self.log_matches(pattern)) >= count or not self.running(),
                        timeout, 0.05)
        got = self.log_matches(pattern)
        return got[count - 1] if hits and len(got) >= count else None

    def metrics(self):
        return requests.get(self.url + "/metrics", timeout=30).text


# ---------------------------------------------------------------- leftovers

def sandbox_procs_tagged(tag):
    """{pid: (comm, state)} of host processes running as a sandbox uid that
    are in a cgroup named tag* (zombies included)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = proc_status(d)
        if not st or "Uid" not in st or int(st["Uid"].split()[0]) < SANDBOX_UID_MIN:
            continue
        cg = read_text(f"/proc/{d}/cgroup") or ""
        if f"/petri/{tag}" in cg:
            out[int(d)] = (st.get("Name"), st.get("State"))
    return out


def sandbox_tree(tree):
    """Those of {pid: starttime} running as a sandbox uid."""
    out = {}
    for pid, start in tree.items():
        st = proc_status(pid)
        if st and "Uid" in st and int(st["Uid"].split()[0]) >= SANDBOX_UID_MIN:
            out[pid] = start
    return out


def cgroup_procs(dirs):
    """{dir: [pids]} of the given cgroup directories that still hold a
    process (a directory that is gone holds none)."""
    out = {}
    for d in dirs:
        text = read_text(os.path.join(d, "cgroup.procs"))
        if text and text.split():
            out[d] = [int(x) for x in text.split()]
    return out


def leftovers(daemon, tree):
    """What remains of a daemon that is gone: its processes (from a
    snapshot of its tree), sandbox processes in its cgroups, and processes
    still in its cgroups (by cgroup.procs).  Empty when nothing is left."""
    out = {}
    alive = still_alive(tree)
    if alive:
        out["tree"] = {p: (proc_status(p) or {}).get("Name") for p in alive}
    tagged = sandbox_procs_tagged(daemon.tag)
    if tagged:
        out["by_uid_and_cgroup"] = tagged
    procs = cgroup_procs(cgroup_dirs(daemon.pid))
    if procs:
        out["cgroup.procs"] = procs
    return out


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def write_out(name, text):
    OUT.mkdir(exist_ok=True)
    (OUT / name).write_text(text)
