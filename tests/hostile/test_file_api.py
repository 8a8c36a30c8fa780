"""The file API against a hostile workspace and hostile paths.

The code of a session controls /work completely (symlinks, FIFOs, sockets,
odd names, races) and the attacker controls the request paths.  Whatever
happens, a download never returns a host file, an upload never writes one,
nothing blocks the daemon, and every answer is valid JSON or the file's own
bytes.
"""
import os
import secrets
import threading
import time

import pytest
import requests

import hostilehelp as H

SERVE_PATHS = ('serve-cold', 'serve-warm')


def host_token(markers):
    with open(markers[1], 'rb') as f:
        return f.read().split()[-1]


TRAVERSALS = [
    '../../../../root/{m}', '..%2f..%2f..%2f..%2froot%2f{m}', '%2e%2e/%2e%2e/%2e%2e/root/{m}',
    '%2E%2E%2F%2E%2E%2Froot%2F{m}', '/root/{m}', '%2froot%2f{m}', 'a/../../../../root/{m}',
    '....//....//root/{m}', '..\\..\\..\\root\\{m}', '.%00./.%00./root/{m}', '%00/../../root/{m}',
    '..%c0%af..%c0%afroot%c0%af{m}', 'x%0a/../../../root/{m}', '/proc/1/root/root/{m}',
    '../proc/self/root/root/{m}', '{long}/../../../root/{m}',
]


@pytest.mark.parametrize('path', SERVE_PATHS)
def test_traversal_spellings(path, servers, markers, host_guard):
    srv = servers(path)
    sid = srv.api.session()
    token = host_token(markers)
    name = os.path.basename(markers[1])
    problems = []
    for spelling in TRAVERSALS:
        p = spelling.format(m=name, long='A' * 5000)
        r = srv.api.get(f'/v1/sessions/{sid}/files/{p}')
        if token in r.content or r.status_code == 200:
            problems.append(f'GET {p[:80]} -> {r.status_code} {r.content[:100]!r}')
        pw = spelling.format(m='petri-hostile-pwned', long='B' * 5000)
        r = srv.api.put(f'/v1/sessions/{sid}/files/{pw}', data=b'pwned')
        # a backslash is an ordinary character of a Linux name: a file named
        # '..\\..\\root\\x' inside /work is fine; a '..' component is not
        if r.status_code < 400 and '..' in requests.utils.unquote(pw).split('/'):
            problems.append(f'PUT {pw[:80]} -> {r.status_code}')
        r = srv.api.delete(f'/v1/sessions/{sid}/files/{p}')
        if r.status_code < 400:
            problems.append(f'DELETE {p[:80]} -> {r.status_code}')
    for host in ('/root/petri-hostile-pwned', '/petri-hostile-pwned', '/tmp/petri-hostile-pwned'):
        if os.path.exists(host):
            problems.append(f'an upload created the host file {host}')
            os.unlink(host)
    assert srv.api.get(f'/v1/sessions/{sid}/files').status_code == 200
    assert os.path.exists(markers[1])
    srv.api.delete(f'/v1/sessions/{sid}')
    assert not problems, '\n'.join(problems)


PLANT_LINKS = r'''
import os, socket
m = %r
os.symlink(m, 'tohost')
os.symlink('/', 'toroot')
os.symlink('/etc/passwd', 'toetc')
os.symlink('../../../../../../..' + m, 'relative')
os.symlink('/proc/1/root', 'pid1root')
os.symlink('/proc/self/root/etc', 'selfroot')
os.makedirs('dir', exist_ok=True)
os.symlink('/root', 'dir/sub')
os.mkfifo('result.png')
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind('/work/out.csv')
s.listen(1)
globals()['keep'] = s
os.link('/etc/hostname', 'hardlink') if False else None
'planted'
'''


@pytest.mark.parametrize('path', SERVE_PATHS)
def test_planted_links_fifos_and_sockets(path, servers, markers, host_guard):
    srv = servers(path)
    sid = srv.api.session()
    token = host_token(markers)
    r = srv.api.execute(sid, PLANT_LINKS % markers[1])
    assert r['status'] == 'ok', H.describe(r)
    problems = []
    for p in ('tohost', 'relative', 'toroot/root/' + os.path.basename(markers[1]), 'toetc',
              'pid1root/etc/shadow', 'selfroot/passwd', 'dir/sub/' + os.path.basename(markers[1]),
              'toroot', 'dir/sub', 'result.png', 'out.csv'):
        t0 = time.monotonic()
        try:
            g = srv.api.get(f'/v1/sessions/{sid}/files/{p}', timeout=30)
        except requests.RequestException as e:
            problems.append(f'GET {p}: {e}')
            continue
        if token in g.content or b'root:x:0:0:root:/root' in g.content:
            problems.append(f'GET {p} returned a host file: {g.content[:80]!r}')
        if g.status_code == 200 and p in ('result.png', 'out.csv'):
            problems.append(f'GET {p} served a FIFO or socket')
        if time.monotonic() - t0 > 20:
            problems.append(f'GET {p} blocked')
        pw = srv.api.put(f'/v1/sessions/{sid}/files/{p}/petri-hostile-pwned', data=b'x', timeout=30)
        pw2 = srv.api.put(f'/v1/sessions/{sid}/files/{p}', data=b'overwrite', timeout=30)
        if p == 'tohost' and pw2.status_code < 400:
            with open(markers[1], 'rb') as f:
                if b'overwrite' in f.read():
                    problems.append('PUT through a symlink overwrote a host file')
    listing = srv.api.get(f'/v1/sessions/{sid}/files')
    assert listing.status_code == 200
    H.strict_json(listing.text)
    for host in ('/root/petri-hostile-pwned', '/petri-hostile-pwned', '/etc/petri-hostile-pwned'):
        if os.path.exists(host):
            problems.append(f'an upload through a symlink created {host}')
    assert srv.neighbour_ok() is None
    srv.api.delete(f'/v1/sessions/{sid}')
    assert not problems, '\n'.join(problems)


SWAPPER = r'''
import os, subprocess, sys
m = %r
with open('/work/big', 'wb') as f:
    f.write(b'S' * (32 << 20))
os.symlink(m, '/work/link')
code = """
import os, time
end = time.time() + %d
os.link('/work/big', '/work/big.file')
while time.time() < end:
    os.rename('/work/link', '/work/tmp'); os.symlink(%r, '/work/link.new'); os.rename('/work/link.new', '/work/big')
    os.rename('/work/big.file', '/work/big2'); os.link('/work/big2', '/work/big.file'); os.rename('/work/big2', '/work/big')
    os.rename('/work/tmp', '/work/link')
"""
subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL, start_new_session=True)
'racing'
'''


@pytest.mark.slow
@pytest.mark.parametrize('path', SERVE_PATHS)
def test_symlink_swapped_during_download(path, servers, markers, host_guard):
    """/work/big alternates, as fast as rename allows, between a 32 MiB file
    and a symlink to a host file while the test downloads it over and over."""
    srv = servers(path)
    sid = srv.api.session(limits={'disk_mb': 256, 'memory_mb': 512})
    token = host_token(markers)
    seconds = 12
    r = srv.api.execute(sid, SWAPPER % (markers[1], seconds, markers[1]))
    assert r['status'] == 'ok', H.describe(r)
    outcomes = {}
    end = time.monotonic() + seconds - 1
    n = 0
    while time.monotonic() < end and n < 400:
        g = srv.api.get(f'/v1/sessions/{sid}/files/big', timeout=60)
        n += 1
        outcomes[g.status_code] = outcomes.get(g.status_code, 0) + 1
        assert token not in g.content, 'a download followed the swapped-in symlink to a host file'
        if g.status_code == 200:
            assert set(g.content) <= {ord('S')}, g.content[:100]
    assert srv.neighbour_ok() is None
    srv.api.delete(f'/v1/sessions/{sid}')
    assert n >= 3, outcomes


MANY = r'''
import os
os.makedirs('/work/many', exist_ok=True)
n = 0
names = [b'plain', b'new\nline', b'bad\xff\xfeutf8', b'tab\tand "quotes" and \\', b'\x1b[31mred', b'x' * 255]
for name in names:
    with open(b'/work/many/' + name, 'w') as f:
        f.write('x')
try:
    while n < 1_000_000:
        os.close(os.open('/work/many/f%%07d' %% n, os.O_CREAT | os.O_WRONLY))
        n += 1
except OSError as e:
    pass
n
'''


@pytest.mark.parametrize('path', SERVE_PATHS)
def test_listing_of_the_inode_limit_with_hostile_names(path, servers, host_guard):
    """As many files as the inode cap allows (a million is the ask), with
    newline, invalid UTF-8, quotes and escapes among the names, then a
    listing: it comes back as valid JSON in bounded time and the daemon
    keeps serving."""
    srv = servers(path)
    sid = srv.api.session(limits={'timeout_s': 60, 'memory_mb': 1024})
    r = srv.api.execute(sid, MANY % ())
    assert r['status'] == 'ok', H.describe(r)
    created = int(r['results'][0]['text/plain'])
    assert created > 10000, created
    t0 = time.monotonic()
    listing = srv.api.get(f'/v1/sessions/{sid}/files', params={'path': 'many'}, timeout=120)
    took = time.monotonic() - t0
    assert listing.status_code in (200, 413, 507), listing.text[:300]
    doc = H.strict_json(listing.text)
    if listing.status_code == 200:
        assert 'files' in doc or isinstance(doc, (list, dict))
    assert srv.neighbour_ok() is None, f'after a listing of {created} files ({took:.1f} s)'
    srv.api.delete(f'/v1/sessions/{sid}')
