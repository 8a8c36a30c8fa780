"""No warm path rebuilds a cache either (issue 30): a session forked from
the template, with matplotlib preloaded or not, finds petri's font list
through the link in its own MPLCONFIGDIR and fontconfig's caches in
/opt/petri/cache, read-only, and writes neither (tests/cli/test_caches.py
has the cold path)."""
import importlib.util
import json
from pathlib import Path

import pytest

# The cold path's program, from its own file (its conftest is not ours).
_spec = importlib.util.spec_from_file_location(
    'cli_caches', Path(__file__).resolve().parents[1] / 'cli' / 'test_caches.py',
    submodule_search_locations=None)
_cli = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cli)
CHART = _cli.CHART


@pytest.mark.parametrize('preload', ['', 'matplotlib.pyplot'])
def test_a_warm_chart_builds_no_cache(make_server, preload):
    srv = make_server('[python]\npreload = %s\n' % preload)
    api = srv.api()
    sid = api.post('/v1/sessions', {'limits': {'timeout_s': 120}}).json()['id']
    try:
        r = api.post(f'/v1/sessions/{sid}/execute', {'code': CHART, 'timeout_s': 120}).json()
        assert r['status'] == 'ok', r
        assert any('image/png' in x for x in r['results']), r
        assert 'generated new fontManager' not in r['stderr'], r
        seen = json.loads(r['stdout'])
        lists = [f for f in seen['files'] if f.startswith('/tmp/.matplotlib/')]
        assert sorted(seen['files']) == sorted(lists + ['/tmp/chart.png']), seen
        assert lists and all(seen['links'].get(f, '').startswith('/opt/petri/cache/')
                             for f in lists), seen
        r = api.post(f'/v1/sessions/{sid}/execute',
                     {'code': 'open("/opt/petri/cache/x", "w")'}).json()
        assert r['status'] == 'error' and 'Read-only file system' in r['error']['message'], r
    finally:
        api.delete(f'/v1/sessions/{sid}')
    assert 'the sandboxes\' caches' not in srv.stderr_text()
