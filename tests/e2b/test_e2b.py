"""The official E2B JS SDKs against `petri serve` (issue 11).

One daemon per xdist worker (`make e2b-test` runs the three SDK sets at
once, a worker each), on a port of its own, in a memory cgroup of its own
(the isolation probes of sdk.test.mjs attack it from inside its sandboxes,
and their memory counts there too); node's test runner runs sdk.test.mjs
once per pinned SDK set (tests/e2b/new, tests/e2b/old, installed by `make
e2b-test` with npm ci).  The daemon must leave no process behind.
"""
import os
import re
import secrets
import signal
import subprocess
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'mcp'))
import memcg  # noqa: E402
from mcphelp import assert_no_leftovers, descendants  # noqa: E402

PETRI = os.environ.get('PETRI_BIN') or os.path.join(ROOT, 'build', 'petri')
# The SDK sets, and the directory whose node_modules each needs.
SDKS = {'new': 'new', 'old': 'old', '2.14': 'old'}
CG_LIMIT = 6 << 30        # the daemon and the few sandboxes a run holds at once
RUN_TIMEOUT_S = 900       # one node --test run (every test inside has its own, shorter)


class Daemon:
    def __init__(self, tmp_path, cg):
        # A key shaped as e2b 2.28 insists (e2b_ and lowercase hex).
        self.key = 'e2b_' + secrets.token_hex(20)
        cfg = tmp_path / 'e2b.ini'
        cfg.write_text(f'[server]\napi_keys = {self.key}\n')
        self.proc = subprocess.Popen(
            [PETRI, 'serve', '--listen', '127.0.0.1:0', '--config', str(cfg)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors='replace',
            preexec_fn=cg.enter)
        self.err = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()
        line = self.proc.stdout.readline()
        m = re.search(r'listening on (http://\S+)', line)
        if not m:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f'petri serve did not start: {line!r} {"".join(self.err)[-2000:]}')
        self.url = m.group(1)
        self.seen = set()

    def stop(self):
        self.seen |= descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        assert_no_leftovers(self.seen)
        return code


@pytest.fixture(scope='module')
def daemon(tmp_path_factory):
    why = memcg.available()
    if why:
        pytest.skip(why)
    with memcg.MemoryCgroup('e2b', CG_LIMIT) as cg:
        d = Daemon(tmp_path_factory.mktemp('e2b'), cg)
        try:
            yield d
        finally:
            code = d.stop()
            assert cg.oom_kills() == 0, 'the daemon was OOM-killed in its own cgroup'
            assert code == 0, ''.join(d.err)[-3000:]


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
        daemon.seen |= descendants(daemon.proc.pid)
    assert daemon.proc.poll() is None, f'petri serve died: {"".join(daemon.err)[-3000:]}'
    assert proc.returncode == 0, f'E2B SDK {sdk} failed:\n{out[-20000:]}'
