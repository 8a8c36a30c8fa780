"""`petri run` with what an operator adds (docs/configuration.md): a bind
that cannot work is refused when the configuration loads, naming its
setting (it used to pass, then fail every sandbox with "cannot plan the
sandbox's mounts: Invalid argument"); `[python] path` and an offline pip
from `[python] wheelhouse` in a one-shot (the cold path; tests/api/
test_packages.py covers the daemon's warm path too)."""
import os

import pytest

from wheels import make_wheel, operator_dir


@pytest.fixture(scope='module')
def operator():
    with operator_dir('wheels') as wh, operator_dir('path') as extra:
        make_wheel(wh, 'petricli', '2.0', {'petricli/__init__.py': 'VERSION = "2.0"\n'})
        with open(os.path.join(extra, 'clihelper.py'), 'w') as f:
            f.write('def hello():\n    return "hello from the operator"\n')
        os.chmod(os.path.join(extra, 'clihelper.py'), 0o644)
        yield wh, extra


def write_config(tmp_path, text):
    path = tmp_path / 'petri.ini'
    path.write_text(text)
    return path


def test_offline_pip_and_path_in_a_one_shot(petri_json, tmp_path, operator):
    wh, extra = operator
    cfg = write_config(tmp_path, f'[python]\npath = {extra}\nwheelhouse = {wh}\n')
    r = petri_json('%pip install petricli\nimport petricli, clihelper\n'
                   'print(petricli.VERSION, clihelper.hello())', '--config', cfg)
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'].endswith('2.0 hello from the operator\n'), r.describe()
    assert r['files'] == []


def test_pip_without_a_wheelhouse_fails_clearly(petri_json, tmp_path):
    cfg = write_config(tmp_path, '')
    r = petri_json('pip install petricli', '--config', cfg, lang='bash')
    assert r['exit_code'] != 0
    assert 'externally-managed' not in r['stderr'], r.describe()
    assert 'No matching distribution found for petricli' in r['stderr'], r.describe()


def test_a_failed_pip_in_python_is_an_error(petri_json, tmp_path):
    """`%pip install` and `!pip install` that fail raise, so that the
    result says error (IPython only prints pip's complaint, and a model
    read status ok); any other `!command` keeps IPython's `_exit_code`."""
    cfg = write_config(tmp_path, '')
    for line in ('%pip install petricli', '!pip install petricli',
                 '!python3 -m pip install petricli'):
        r = petri_json(f'before = 1\n{line}\nafter = 1', '--config', cfg)
        assert r['status'] == 'error', (line, r.describe())
        assert r['error']['name'].endswith('CalledProcessError'), (line, r.describe())
        assert 'pip install petricli' in r['error']['message'], r.describe()
        assert 'No matching distribution found for petricli' in r['stderr'], r.describe()
    r = petri_json('!false\n_exit_code', '--config', cfg)
    assert r['status'] == 'ok' and r['results'] == [{'text/plain': '1'}], r.describe()
    r = petri_json('!pip --version', '--config', cfg)
    assert r['status'] == 'ok', r.describe()


def test_a_symlinked_ro_bind_binds_what_it_points_to(petri_json, tmp_path, operator):
    wh, _ = operator
    link = wh + '-link'
    os.symlink(wh, link)
    try:
        cfg = write_config(tmp_path, f'[sandbox]\nro_bind = {link}\n')
        r = petri_json(f'ls {link}', '--config', cfg, lang='bash')
    finally:
        os.unlink(link)
    assert r['stdout'] == 'petricli-2.0-py3-none-any.whl\n', r.describe()


@pytest.mark.parametrize('setting, where, value, reason', [
    ('ro_bind', 'sandbox', '{tmp}', 'which every sandbox mounts itself'),
    ('ro_bind', 'sandbox', '/var/tmp/petri-no-such-dir', 'cannot be found'),
    ('ro_bind', 'sandbox', '/opt/petri', 'which every sandbox mounts itself'),
    ('path', 'python', '/var/lib/dpkg/status', 'not a directory'),
    ('path', 'python', '/work/lib', 'which every sandbox mounts itself'),
    ('wheelhouse', 'python', '/proc', 'which every sandbox mounts itself'),
    ('wheelhouse', 'python', '/root', 'cannot be read by the sandbox'),
])
def test_a_bind_that_cannot_work_is_refused_naming_it(petri_raw, tmp_path, setting, where,
                                                      value, reason):
    value = value.format(tmp=tmp_path)
    cfg = write_config(tmp_path, f'[{where}]\n{setting} = {value}\n')
    r = petri_raw(['run', '--config', cfg, '-c', 'print(1)'])
    err = r.stderr.decode()
    assert r.rc == 2, err
    assert f'{setting} = {value} in [{where}]' in err and reason in err, err
