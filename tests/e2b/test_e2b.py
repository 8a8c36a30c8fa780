"""The official E2B JS SDKs against `petri serve` (issue 11).

One daemon per xdist worker (`make e2b-test` runs the three SDK sets at
once, a worker each), on a port of its own, in a memory cgroup of its own
(the isolation probes of sdk.test.mjs attack it from inside its sandboxes,
and their memory counts there too); node's test runner runs sdk.test.mjs
once per pinned SDK set (tests/e2b/new, tests/e2b/old, installed by `make
e2b-test` with npm ci).  The daemon must leave no process behind.
"""
import os
import secrets
import subprocess

import pytest

import memcg
from harness import Daemon, process_tree, still_alive, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
# The SDK sets, and the directory whose node_modules each needs.
SDKS = {'new': 'new', 'old': 'old', '2.14': 'old'}
CG_LIMIT = 6 << 30        # the daemon and the few sandboxes a run holds at once
RUN_TIMEOUT_S = 900       # one node --test run (every test inside has its own, shorter)


class E2bDaemon(Daemon):
    """harness.Daemon with an E2B API key, noting every process of its tree
    seen while the SDKs ran (.seen, {pid: start time}): none may outlive it."""

    def __init__(self, tmp_path, cg):
        # A key shaped as e2b 2.28 insists (e2b_ and lowercase hex).
        self.key = 'e2b_' + secrets.token_hex(20)
        super().__init__(tmp_path, f'[server]\napi_keys = {self.key}\n', name='e2b',
                         preexec_fn=cg.enter)
        self.seen = {}

    def look(self):
        self.seen |= process_tree(self.pid)

    def stop(self):
        self.look()
        code = super().stop(60)
        # What ran below it during the runs, not only at the end; a
        # moment's grace for what the kernel is still tearing down.
        wait_for(lambda: not still_alive(self.seen), 5)
        self.leaked = sorted(set(self.leaked) | set(still_alive(self.seen)))
        return code


@pytest.fixture(scope='module')
def daemon(tmp_path_factory):
    why = memcg.available()
    if why:
        pytest.skip(why)
    with memcg.MemoryCgroup('e2b', CG_LIMIT) as cg:
        d = E2bDaemon(tmp_path_factory.mktemp('e2b'), cg)
        try:
            yield d
        finally:
            code = d.stop()
            assert cg.oom_kills() == 0, 'the daemon was OOM-killed in its own cgroup'
            assert d.problems(code) == []


@pytest.mark.parametrize('sdk', list(SDKS))
def test_sdk(daemon, sdk):
    modules = os.path.join(HERE, SDKS[sdk], 'node_modules')
    assert os.path.isdir(modules), f'{modules} is missing: run make e2b-test (npm ci)'
    env = dict(os.environ, PETRI_URL=daemon.url, E2B_SDK=sdk, E2B_API_KEY=daemon.key)
    for var in ('E2B_DEBUG', 'E2B_DOMAIN', 'E2B_ACCESS_TOKEN', 'E2B_USER_AGENT_SOURCE'):
        env.pop(var, None)
    proc = subprocess.Popen(['node', '--test', '--test-reporter=spec', 'sdk.test.mjs'],
                            cwd=HERE, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors='replace')
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        daemon.look()
    assert daemon.running(), f'petri serve died: {daemon.stderr_text()[-3000:]}'
    assert proc.returncode == 0, f'E2B SDK {sdk} failed:\n{out[-20000:]}'
