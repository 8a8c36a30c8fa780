"""The fixture of the CPython tier: the three runs at once (cpythonhelp.py
says what each is)."""
import secrets
import threading
import time

import pytest

import hostilehelp as H
from cpythonhelp import EXTRA_CONFIG, run_bare, run_cold, run_warm


@pytest.fixture(scope='session')
def results(tmp_path_factory):
    """{'bare': ..., 'cold': ..., 'warm': ...}: each the runner's result, or
    the exception its run raised."""
    tmp = tmp_path_factory.mktemp('cpython')
    base = 3_600_000_000 + secrets.randbelow(40_000) * 10_000
    srv = H.Server(tmp, warm=True, extra_config=EXTRA_CONFIG.format(base=base))
    out = {}

    def collect(name, fn, *args):
        t0 = time.monotonic()
        try:
            out[name] = fn(*args)
            out[name]['wall_s'] = round(time.monotonic() - t0, 1)
        except BaseException as e:      # reported by the test that needs it
            out[name] = e
    try:
        threads = [threading.Thread(target=collect, args=a) for a in
                   (('bare', run_bare), ('cold', run_cold, tmp), ('warm', run_warm, srv))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        code = srv.stop()
    assert code == 0, f'petri serve exited {code}: {srv.stderr_text()[-3000:]}'
    return out
