"""No cold path rebuilds a cache (issue 30): what matplotlib and fontconfig
build on first use is built once by petri, on the host, and every sandbox
sees it read-only at /opt/petri/cache (src/runtime/cache.h,
docs/security.md).  A cold `petri run` that draws a chart and lists the
fonts writes nothing of theirs: matplotlib says it generated no font list,
fontconfig writes no cache under XDG_CACHE_HOME, and the only file in /tmp
besides the chart is the link to petri's list.  No timing is asserted
(bench/caches.py measures)."""
import json
from pathlib import Path


SLOW = ('--timeout', '120')

CHART = r'''
import json, logging, os, subprocess, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.savefig('/tmp/chart.png')
subprocess.run(['fc-list'], stdout=subprocess.DEVNULL, check=True)
# The same in a program of the code's own: it finds the list through the link.
subprocess.run([sys.executable, '-c', 'import logging, sys; '
                'logging.basicConfig(level=logging.INFO, stream=sys.stderr); '
                'import matplotlib.font_manager'], check=True)
files = sorted(os.path.join(d, f) for d, _, fs in os.walk('/tmp') for f in fs
               if not d.startswith('/tmp/petri-'))
links = {f: os.readlink(f) for f in files if os.path.islink(f)}
print(json.dumps({'files': files, 'links': links}))
'''

READ_ONLY = r'''
import errno, json, os
refused = {}
for path in ['/opt/petri/cache/new', '/opt/petri/cache/matplotlib/new']:
    try:
        open(path, 'w')
        refused[path] = None
    except OSError as e:
        refused[path] = errno.errorcode[e.errno]
for path in os.listdir('/tmp/.matplotlib'):
    try:
        open('/tmp/.matplotlib/' + path, 'a')
        refused[path] = None
    except OSError as e:
        refused[path] = errno.errorcode[e.errno]
read_only = bool(os.statvfs('/opt/petri/cache/matplotlib').f_flag & os.ST_RDONLY)
print(json.dumps({'refused': refused, 'read_only': read_only,
                  'mountinfo': open('/proc/self/mountinfo').read(),
                  'owner': os.stat('/opt/petri/cache/matplotlib').st_uid}))
'''


def test_a_cold_chart_builds_no_cache(petri_json):
    r = petri_json(CHART, *SLOW)
    assert r['status'] == 'ok', r.describe()
    assert any('image/png' in x for x in r['results']), r.describe()
    assert 'building the font cache' not in r['stderr'], r.describe()
    assert 'generated new fontManager' not in r['stderr'], r.describe()
    assert 'could not save font_manager cache' not in r['stderr'].lower(), r.describe()
    seen = json.loads(r['stdout'])
    # fontconfig wrote no cache of its own (XDG_CACHE_HOME is /tmp/.cache),
    # matplotlib no list: only the link to petri's, and the chart.
    lists = [f for f in seen['files'] if f.startswith('/tmp/.matplotlib/')]
    assert sorted(seen['files']) == sorted(lists + ['/tmp/chart.png']), seen
    assert lists and all(seen['links'].get(f, '').startswith('/opt/petri/cache/matplotlib/')
                         for f in lists), seen


def test_the_cache_is_read_only_inside(petri_json):
    r = petri_json(READ_ONLY)
    assert r['status'] == 'ok', r.describe()
    seen = json.loads(r['stdout'])
    # New files: the mount refuses; the list through its link: its mode
    # (root's file) refuses first, the mount behind it.
    assert seen['refused'].pop('/opt/petri/cache/new') == 'EROFS', seen
    assert seen['refused'].pop('/opt/petri/cache/matplotlib/new') == 'EROFS', seen
    assert seen['refused'] and set(seen['refused'].values()) <= {'EROFS', 'EACCES'}, seen
    assert seen['read_only'], seen
    assert seen['owner'] != 1000, seen          # not the sandbox's user's
    # Files of the sandbox's root, not a bind: the host's path of the cache
    # (/var/cache/..., a home) is nowhere in its mounts.
    assert '/var/cache' not in seen['mountinfo'] and 'sandbox-' not in seen['mountinfo'], seen


def test_a_session_cannot_point_fontconfig_elsewhere(petri_json):
    code = 'import os; print(os.environ["FONTCONFIG_FILE"])'
    r = petri_json(code)
    assert r['status'] == 'ok' and r['stdout'] == '/opt/petri/fonts.conf\n', r.describe()


def _cache_dirs(base):
    return sorted(p.name for p in Path(base).iterdir())


def test_built_once_into_the_cache_directory(petri_json, tmp_path):
    """CACHE_DIRECTORY (systemd's CacheDirectory=) names where; the first
    run builds one directory, named by its key; the next run finds it and
    builds nothing; a directory of another key (fonts or matplotlib changed
    since) is removed with the next build, and nothing of a build is left.
    The sandboxes never reach it: a private directory serves."""
    base = tmp_path / 'cache'
    base.mkdir(mode=0o700)
    (base / 'sandbox-0000000000000000').mkdir()
    r = petri_json(CHART, *SLOW, env={'CACHE_DIRECTORY': str(base)})
    assert r['status'] == 'ok', r.describe()
    names = _cache_dirs(base)
    assert len(names) == 1 and names[0].startswith('sandbox-') and \
        names[0] != 'sandbox-0000000000000000', names
    built = base / names[0]
    ino = built.stat().st_ino
    assert sorted(p.name for p in built.iterdir()) == ['fontconfig', 'matplotlib']
    for p in built.rglob('*'):
        assert p.stat().st_mode & 0o777 in (0o644, 0o755), p
    assert 'generated new fontManager' not in r['stderr'], r.describe()
    r = petri_json(CHART, *SLOW, env={'CACHE_DIRECTORY': str(base)})
    assert r['status'] == 'ok', r.describe()
    assert _cache_dirs(base) == names and built.stat().st_ino == ino
    assert 'generated new fontManager' not in r['stderr'], r.describe()


def test_a_cache_that_cannot_be_made_is_said_and_survived(petri_json):
    """A cache directory petri cannot make: it says why on stderr, and the
    sandbox builds its own as before."""
    r = petri_json('print(1)', env={'CACHE_DIRECTORY': '/proc/petri-no-such-cache'})
    assert r['status'] == 'ok' and r['stdout'] == '1\n', r.describe()
    assert b"the sandboxes' caches under '/proc/petri-no-such-cache'" in r.proc.stderr, \
        r.describe()
