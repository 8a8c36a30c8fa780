"""MCP's archive tools: a project in (base64 archive, extracted by the
sandbox's driver) and out (a tar.gz resource), within the size caps."""
import base64
import io
import tarfile
import zipfile

from mcphelp import text_of


def tar_gz(files):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode='w:gz') as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith('.sh') else 0o644
            t.addfile(info, io.BytesIO(data))
    return base64.b64encode(bio.getvalue()).decode()


def test_project_in_tests_run_and_out(mcp):
    res = mcp.call('upload_archive', {'path': 'proj', 'content': tar_gz({
        'src/calc.py': b'def add(a, b):\n    return a - b\n',
        'tests/test_calc.py': b'import sys; sys.path.insert(0, "src")\n'
                              b'from calc import add\ndef test_add():\n    assert add(1, 2) == 3\n',
        'run.sh': b'#!/bin/sh\necho run\n'})})
    assert not res.get('isError'), res
    assert 'extracted 3 entries (3 files, 0 directories' in text_of(res), text_of(res)
    res = mcp.execute('cd proj && ./run.sh && python3 -m pytest -q tests | tail -1',
                      language='bash')
    assert 'run' in text_of(res) and '1 failed' in text_of(res), text_of(res)
    mcp.execute("cd proj && sed -i 's/a - b/a + b/' src/calc.py", language='bash')
    res = mcp.call('download_archive', {'path': '/work/proj'})
    assert not res.get('isError'), res
    blob = [c for c in res['content'] if c['type'] == 'resource'][0]['resource']
    assert blob['mimeType'] == 'application/gzip' and blob['uri'] == 'file:///work/proj.tar.gz'
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(blob['blob']))) as t:
        names = set(t.getnames())
        assert {'src/calc.py', 'tests/test_calc.py', 'run.sh'} <= names, names
        assert t.extractfile('src/calc.py').read() == b'def add(a, b):\n    return a + b\n'
        assert t.getmember('run.sh').mode & 0o111


def test_refused_archives_are_errors_and_write_nothing(mcp):
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, 'w') as z:
        z.writestr('ok.txt', 'fine')
        z.writestr('../escape.txt', 'no')
    res = mcp.call('upload_archive', {'content': base64.b64encode(bio.getvalue()).decode()})
    assert res.get('isError') and "'..'" in text_of(res), res
    res = mcp.call('upload_archive', {'content': 'not base64!'})
    assert res.get('isError') and 'base64' in text_of(res)
    res = mcp.call('upload_archive', {'content': base64.b64encode(b'plain text').decode()})
    assert res.get('isError') and 'not an archive' in text_of(res), text_of(res)
    res = mcp.call('upload_archive', {'content': tar_gz({'a': b'x'}), 'path': '../up'})
    assert res.get('isError') and 'invalid path' in text_of(res)
    listing = text_of(mcp.call('list_files', {}))
    assert 'ok.txt' not in listing and '.petri-' not in listing, listing
    res = mcp.call('download_archive', {'path': 'missing'})
    assert res.get('isError'), res
