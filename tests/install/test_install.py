"""`make install` and `make uninstall`: every file in its place, and
nothing else; uninstall takes back exactly that.  The example configuration
is checked against what petri accepts (config.c) and the defaults
docs/configuration.md gives."""
import configparser
import os
import re
import subprocess

from harness import ROOT, petri_lock
from installhelp import BUILD, make, repo_man_pages, tree, unit_file

DOCS = ['README.md', *sorted(f'docs/{p.name}' for p in (ROOT / 'docs').iterdir()
                             if p.suffix in ('.md', '.png') or p.name == 'openapi.json')]


def expected(prefix='usr', unitdir=None):
    files = {f'{prefix}/bin/petri': 0o755,
             f'{unitdir or prefix + "/lib/systemd/system"}/petri.service': 0o644,
             'etc/petri/petri.ini.example': 0o644}
    for page in repo_man_pages():
        files[f'{prefix}/share/man/man{page[-1]}/{os.path.basename(page)}'] = 0o644
    for doc in DOCS:
        files[f'{prefix}/share/doc/petri/{doc}'] = 0o644
    return files


def test_install_writes_every_file_and_nothing_else(installed):
    assert tree(installed) == expected()
    for rel in expected():
        if rel.endswith('/petri.service'):
            want = (ROOT / 'packaging/petri.service').read_bytes().replace(
                b'ExecStart=/usr/local/bin/petri', b'ExecStart=/usr/bin/petri')
        elif rel.startswith('etc/'):
            want = (ROOT / 'packaging/petri.ini.example').read_bytes()
        elif '/man/man' in rel:
            want = (ROOT / 'man' / os.path.basename(rel)).read_bytes()
        elif '/doc/' in rel:
            want = (ROOT / rel.removeprefix('usr/share/doc/petri/')).read_bytes()
        else:
            want = (ROOT / BUILD / 'petri').read_bytes()
        assert (installed / rel).read_bytes() == want, rel
    v = subprocess.run([installed / 'usr/bin/petri', '--version'], capture_output=True, text=True)
    assert v.returncode == 0 and re.fullmatch(r'petri \S+\n', v.stdout), v
    # The unit runs the installed binary, not the one of the default prefix.
    assert re.search(r'^ExecStart=/usr/bin/petri serve$', unit_file(installed).read_text(), re.M)


def test_default_prefix_is_usr_local_and_config_stays_in_etc(tmp_path):
    make('install', f'DESTDIR={tmp_path}')
    assert tree(tmp_path) == expected('usr/local')
    assert re.search(r'^ExecStart=/usr/local/bin/petri serve$',
                     unit_file(tmp_path, 'usr/local/lib/systemd/system').read_text(), re.M)


def test_uninstall_removes_exactly_what_install_wrote(tmp_path):
    make('install', f'DESTDIR={tmp_path}', 'PREFIX=/usr')
    make('uninstall', f'DESTDIR={tmp_path}', 'PREFIX=/usr')
    assert tree(tmp_path) == {}, 'files left behind'
    for own in ('usr/share/doc/petri', 'etc/petri'):
        assert not (tmp_path / own).exists(), own

    # An administrator's configuration beside the example is not ours.
    make('install', f'DESTDIR={tmp_path}', 'PREFIX=/usr')
    (tmp_path / 'etc/petri/petri.ini').write_text('[server]\n')
    (tmp_path / 'usr/bin/other').write_text('not petri\n')
    make('uninstall', f'DESTDIR={tmp_path}', 'PREFIX=/usr')
    assert tree(tmp_path) == {'etc/petri/petri.ini': 0o644, 'usr/bin/other': 0o644}


# ---- the example configuration -------------------------------------------

DEFAULT = re.compile(r'^; (\w+) = ?(.*?)\s*$')             # "; key = default"
EXAMPLE = re.compile(r'^#   (\w+) = ?(.*?)(\s+;.*)?$')     # "#   key = example"


def example_lines():
    """[(section, key, value, is_default)] of the example, in order."""
    out, section = [], None
    for line in (ROOT / 'packaging' / 'petri.ini.example').read_text().splitlines():
        m = re.match(r'^(?:#   )?\[([\w.]+)\]', line)
        if m:
            section = m.group(1)
            continue
        for rx, default in ((DEFAULT, True), (EXAMPLE, False)):
            m = rx.match(line)
            if m:
                out.append((section, m.group(1), m.group(2), default))
    return out


def docs_defaults():
    """{(section, key): [values]} of the ini block in docs/configuration.md."""
    text = (ROOT / 'docs' / 'configuration.md').read_text()
    block = re.search(r'```ini\n(\[server\].*?)```', text, re.S).group(1)
    out, section = {}, None
    for line in block.splitlines():
        m = re.match(r'^\[([\w.]+)\]', line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r'^(\w+) = ?(.*?)(\s*;.*)?$', line)
        if m:
            out.setdefault((section, m.group(1)), []).append(m.group(2).strip())
    return out


def test_example_names_every_key_petri_reads():
    src = (ROOT / 'src' / 'config' / 'config.c').read_text()
    keys = set(re.findall(r'strcmp\(name, "(\w+)"\)', src))
    # [limits] and [max_limits]: the table of src/exec/limits.c.
    keys |= set(re.findall(r'^\t\{ "(\w+)",', (ROOT / 'src/exec/limits.c').read_text(), re.M))
    shown = {key for _, key, _, _ in example_lines()}
    assert keys - shown == set(), 'keys of config.c missing from packaging/petri.ini.example'
    assert shown - keys == set(), 'keys in the example that petri does not read'


def test_example_defaults_are_the_documented_ones():
    docs = docs_defaults()
    mine = {}
    for section, key, value, default in example_lines():
        if default:
            mine.setdefault((section, key), []).append(value)
    compared = 0
    for where, values in mine.items():
        if where in docs and any(docs[where]):
            assert values == docs[where], where
            compared += 1
    assert compared >= 40


def test_example_defaults_uncommented_are_accepted(installed, tmp_path):
    """Every "; key = default" line uncommented: a file petri takes, and
    runs a sandbox with."""
    lines = []
    for line in (installed / 'etc/petri/petri.ini.example').read_text().splitlines():
        lines.append(line[2:] if DEFAULT.match(line) else line)
    ini = tmp_path / 'petri.ini'
    ini.write_text('\n'.join(lines) + '\n')
    parsed = configparser.ConfigParser(comment_prefixes=('#', ';'), inline_comment_prefixes=(';',),
                                       strict=False)
    parsed.read_string(ini.read_text())
    assert parsed.get('limits', 'memory_mb') == '1024'
    with petri_lock():
        r = subprocess.run([installed / 'usr/bin/petri', 'run', '-c', 'print(6 * 7)'],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, 'PETRI_CONFIG': str(ini)})
    assert r.returncode == 0 and r.stdout == '42\n', r
