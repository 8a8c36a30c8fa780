"""Fixtures of the analyst suite (the helpers are in analysthelp.py).

inputs -> {name: bytes}
    the input files (analysthelp.make_inputs), generated once per worker
    from fixed seeds.

servers -> {"preloaded": Daemon, "imported": Daemon}
    two `petri serve` (harness.Daemon, each in a memory cgroup of its own,
    its warm path settled before the tasks run): one with the default
    [python] preload, whose sessions find the data stack imported, and one
    with `preload =` (nothing), whose sessions import every library
    themselves.  Both are stopped at the end of the worker's session, and
    must exit 0 and leave no process or cgroup behind.
"""
import os

import pytest

import memcg
from analysthelp import make_inputs
from harness import Daemon


@pytest.fixture(scope='session')
def inputs():
    return make_inputs()


@pytest.fixture(scope='session')
def servers(tmp_path_factory):
    started = {}
    cgroups = []
    configs = {'preloaded': '', 'imported': '[python]\npreload =\n'}
    try:
        for name, config in configs.items():
            cg = memcg.MemoryCgroup('analyst-%s-%d' % (name, os.getpid()), 6 << 30)
            cgroups.append(cg)
            d = Daemon(tmp_path_factory.mktemp(name), config, name=name, preexec_fn=cg.enter)
            started[name] = d
            # The tasks run against the warm path's steady state; /healthz
            # says when it has settled (ready, off, failed).
            d.wait_warm(120)
        yield started
    finally:
        problems = []
        for name, d in started.items():
            code = d.stop()
            problems += ['%s: %s' % (name, p) for p in d.problems(code)]
        for cg in cgroups:
            cg.close()
        assert not problems, problems
