"""[python] preload: what the warm template imports before it forks
(docs/configuration.md).  A fresh session finds exactly those modules
imported; one that cannot be imported is logged and changes nothing else;
a value that is not a module name is refused at start, naming the key."""
import json
import subprocess
import time

from conftest import PETRI

PROBE = ('import sys, json\n'
         'print(json.dumps({m: m in sys.modules for m in %r}))')


def imported(api, modules):
    r = api.post('/v1/execute', {'code': PROBE % (modules,)}).json()
    assert r['status'] == 'ok', r
    return json.loads(r['stdout'])


def test_the_sessions_get_what_the_config_preloads(make_server):
    srv = make_server('[python]\npreload = colorsys, nosuchmodule_for_petri\n'
                      'preload = xml.dom.minidom\n')
    got = imported(srv.api(), ['colorsys', 'xml.dom.minidom', 'pandas', 'numpy'])
    assert got == {'colorsys': True, 'xml.dom.minidom': True, 'pandas': False,
                   'numpy': False}, got
    # The module that is not there: in the log, named, not fatal.
    err = srv.stderr_text()
    assert 'cannot preload nosuchmodule_for_petri' in err, err
    assert "No module named 'nosuchmodule_for_petri'" in err, err
    assert 'warm template ready' in err, err


def test_an_empty_preload_imports_nothing(make_server):
    srv = make_server('[python]\npreload =\n')
    assert 'warm template ready' in srv.stderr_text()
    got = imported(srv.api(), ['numpy', 'pandas', 'matplotlib'])
    assert not any(got.values()), got


def test_the_default_preloads_the_data_stack(server):
    # The default preload takes seconds to import on a loaded machine: a
    # one-shot before the template is up would start cold.
    for _ in range(600):
        if 'warm template ready' in server.stderr_text():
            break
        time.sleep(0.2)
    got = imported(server.api(), ['numpy', 'pandas', 'matplotlib.pyplot', 'scipy.stats',
                                  'seaborn', 'sklearn', 'statsmodels'])
    assert all(got.values()), got


def test_a_name_that_is_not_a_module_is_refused_at_start(tmp_path):
    for value in ('os; import shutil', '-c', 'a..b', 'x' * 129):
        cfg = tmp_path / 'petri.ini'
        cfg.write_text('[python]\npreload = json, %s\n' % value)
        p = subprocess.run([PETRI, 'serve', '--listen', '127.0.0.1:0', '--config', str(cfg)],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, (value, p.stdout, p.stderr)
        assert "[python]" in p.stderr and 'preload' in p.stderr, p.stderr
