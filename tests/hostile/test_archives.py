"""Hostile archives against POST /v1/sessions/{id}/archive, and hostile
downloads of GET (docs/api.md#archives, docs/security.md#archives).

One `petri serve` (cold sessions) in a memory cgroup of the test's own
(tests/memcg.py) takes every archive.  Each one must be refused with the
right answer (400 invalid_archive naming the entry, or 413
archive_too_large), and then:

  - nothing was written: the session's /work is what it was, to the inode
    and the modification time, with no temporary file of the server left;
  - nothing was written outside /work inside the sandbox (/tmp, /), nor on
    the host (the traversal targets relative to every directory the daemon
    could have resolved them from, and host_guard's marker files);
  - the session still runs code, and the daemon still serves another one.

Archives are built in memory (tests/archives.py): TarInfo and ZipInfo made
by hand for hostile names, zips written field by field where they must lie,
bombs from blocks compressed once and repeated."""
import io
import os
import secrets
import socket
import tarfile

import pytest

import hostilehelp as H
from harness import cmdline, cpu_seconds, read_text

import memcg  # tests/memcg.py, shared by the tiers
import archives as A

pytestmark = pytest.mark.skipif(memcg.available() is not None, reason=str(memcg.available()))

CG_LIMIT = 1536 << 20          # the sandboxes of the test count here too
SANITIZED = os.environ.get('PETRI_SANITIZED') == '1'   # make SAN=1: RSS is not the daemon's own
# A name no test run on this host shares: what a traversal would create.
PWN = 'petri-hostile-archive-' + secrets.token_hex(6)
REG, DIR, SYM, LNK = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE


@pytest.fixture(scope='module')
def jailed(tmp_path_factory):
    with H.jailed_server(tmp_path_factory.mktemp('archives'), 'archives', CG_LIMIT) as pair:
        yield pair


def tar(*entries, compression=''):
    return A.tar_bytes([A.entry(*e) if isinstance(e, tuple) else A.entry(e, b'x') for e in entries],
                       compression)


def special(name, type, **kw):
    ti, data = A.entry(name, type=type)
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti, data


def zip_of(*entries):
    return A.zip_bytes([(A.zip_entry(name, mode), data) for name, mode, data in entries])


# (archive, status, code, what the message says)
REFUSED = {
    # traversal
    'dot-dot': (lambda: tar(f'../{PWN}'), 400, "'..' component"),
    'dot-dot deep': (lambda: tar(f'../../../../../../../../tmp/{PWN}'), 400, "'..' component"),
    'dot-dot inside': (lambda: tar('a/x', f'a/../../{PWN}'), 400, "'..' component"),
    'absolute': (lambda: tar(f'/tmp/{PWN}'), 400, 'absolute'),
    'absolute root': (lambda: tar(f'/{PWN}'), 400, 'absolute'),
    'zip dot-dot': (lambda: zip_of((f'../../{PWN}', 0o100644, b'x')), 400, "'..' component"),
    'zip absolute': (lambda: zip_of((f'/tmp/{PWN}', 0o100644, b'x')), 400, 'absolute'),
    'control character': (lambda: tar(f'a\nb/{PWN}'), 400, 'control character'),
    # symbolic links that lead out, and files written through links
    'symlink absolute': (lambda: tar(('l', b'', 0o777, A.MTIME, SYM, '/tmp'), f'l/{PWN}'), 400,
                         'absolute'),
    'symlink above work': (lambda: tar(('up', b'', 0o777, A.MTIME, SYM, '../../..')), 400,
                           'out of the workspace'),
    'symlink above work deep': (lambda: tar(('a/b/c', b'', 0o777, A.MTIME, SYM, '../../../../x')), 400,
                                'out of the workspace'),
    'symlink chained': (lambda: tar(('d/up', b'', 0o777, A.MTIME, SYM, '..'),
                                    ('d/up2', b'', 0o777, A.MTIME, SYM, 'up/..'),
                                    f'd/up2/{PWN}'), 400, "'..' after a name"),
    'symlink then a file through it': (lambda: tar(('d', b'', 0o755, A.MTIME, DIR),
                                                   ('l', b'', 0o777, A.MTIME, SYM, 'd'),
                                                   f'l/{PWN}'), 400, 'makes a symbolic link'),
    'symlink over a directory of the archive': (lambda: tar(f'd/{PWN}', ('d', b'', 0o777, A.MTIME, SYM,
                                                                       '.')), 400, 'twice'),
    'zip symlink out': (lambda: zip_of(('l', 0o120777, b'/etc'), (f'l/{PWN}', 0o100644, b'x')), 400,
                        'absolute'),
    'zip symlink above work': (lambda: zip_of(('l', 0o120777, b'../../../../etc/passwd')), 400,
                               'out of the workspace'),
    # hard links
    'hardlink to /etc/passwd': (lambda: tar(('h', b'', 0o644, A.MTIME, LNK, '/etc/passwd')), 400,
                                'hard link'),
    'hardlink up': (lambda: tar(('h', b'', 0o644, A.MTIME, LNK, f'../{PWN}')), 400, 'hard link'),
    'hardlink to a later name': (lambda: tar(('h', b'', 0o644, A.MTIME, LNK, 'later'), 'later'), 400,
                                 'not a file earlier'),
    'hardlink to a directory': (lambda: tar(('d', b'', 0o755, A.MTIME, DIR),
                                            ('h', b'', 0o644, A.MTIME, LNK, 'd')), 400,
                                'not a file earlier'),
    'hardlink to a symlink': (lambda: tar(('s', b'', 0o777, A.MTIME, SYM, 'keep.txt'),
                                          ('h', b'', 0o644, A.MTIME, LNK, 's')), 400,
                              'not a file earlier'),
    # devices and FIFOs
    'char device': (lambda: A.tar_bytes([special('null', tarfile.CHRTYPE, devmajor=1, devminor=3)]),
                    400, 'device'),
    'block device': (lambda: A.tar_bytes([special('sda', tarfile.BLKTYPE, devmajor=8)]), 400,
                     'device'),
    'fifo': (lambda: A.tar_bytes([A.entry('x', b'x'), special('fifo', tarfile.FIFOTYPE)]), 400,
             'FIFO'),
    'zip device': (lambda: zip_of(('null', 0o020666, b'')), 400, 'device'),
    'zip fifo': (lambda: zip_of(('fifo', 0o010644, b'')), 400, 'FIFO'),
    # bombs: refused from the headers, before a byte is written
    'zip bomb (deflate of zeros)': (lambda: A.zip_raw([('zeros', 8, A.deflate_zeros(300),
                                                        A.crc_zeros(300), 300 << 20, 0o100644)]),
                                    413, 'disk limit'),
    'gzip-tar bomb': (lambda: A.gzip_zeros_tar('zeros', 1024), 413, 'disk limit'),
    'zip claims 10**12 entries': (lambda: A.zip64_claims(10 ** 12), 413, 'entries'),
    'zip claims a 4 GiB central directory': (lambda: A.zip_claims_central(0xFFFFFFF0), 413,
                                             'central directory'),
    # corrupt and truncated
    'truncated tar.gz': (lambda: A.tar_bytes([A.entry('a', b'a'), A.entry('b', os.urandom(40_000))],
                                             'gz')[:30_000], 400, 'cannot be extracted'),
    'truncated tar': (lambda: A.tar_bytes([A.entry('a', b'a'), A.entry('b', os.urandom(40_000))])
                      [:20_000], 400, 'cannot be extracted'),
    'zip with a bad crc after a good entry': (lambda: A.zip_raw([
        ('good', 0, b'good', __import__('zlib').crc32(b'good'), 4, 0o100644),
        ('bad', 0, b'bad!', 12345, 4, 0o100644)]), 400, 'cannot be extracted'),
    'zip that lies about its size': (lambda: A.zip_raw([
        ('zeros', 8, A.deflate_zeros(50), A.crc_zeros(50), 1000, 0o100644)]), 400,
        'cannot be extracted'),
    'zip whose entries overlap': (lambda: A.zip_overlapping(10, 20), 413, 'compression bomb'),
}


def host_targets(srv):
    """Where a traversal could have landed on the host: PWN in the
    directories the daemon could resolve a name from, and above them."""
    dirs = {'/', '/tmp', '/root', '/etc', os.path.dirname(str(srv.config_path))}
    try:
        dirs.add(os.readlink(f'/proc/{srv.proc.pid}/cwd'))
    except OSError:
        pass
    for d in list(dirs):
        dirs.add(os.path.dirname(d))
    return [os.path.join(d, PWN) for d in dirs]


PLANT = r"""
mkdir -p d sub && echo keep > keep.txt && echo in-d > d/f && ln -s keep.txt link
"""
OUTSIDE = f"""
import os
[p for p in ('/{PWN}', '/etc/{PWN}', '/work/{PWN}') if os.path.lexists(p)] + \
    [os.path.join(r, n) for r, ds, fs in os.walk('/tmp') for n in ds + fs if '{PWN}' in n]
"""


def attack(srv, sid, body, path=None):
    """Post body; return (response, what changed in /work, what appeared
    outside /work in the sandbox)."""
    execute = lambda code: srv.api.execute(sid, code)   # noqa: E731
    before = A.snapshot(execute)
    r = srv.api.post(f'/v1/sessions/{sid}/archive', data=body,
                     params={'path': path} if path else None, timeout=300)
    H.strict_json(r.text)
    # an aborted upload's temporary file is removed by the waiter: poll
    H.wait_until(lambda: not A.leftovers(os.path.basename(p) for p in A.snapshot(execute)),
                 timeout=30)
    after = A.snapshot(execute)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    res = srv.api.execute(sid, OUTSIDE)
    assert res['status'] == 'ok', H.describe(res)
    return r, changed, res['results'][0]['text/plain']


@pytest.mark.parametrize('name', sorted(REFUSED))
def test_hostile_archive_is_refused_and_nothing_is_written(jailed, host_guard, name):
    srv, _ = jailed
    make, status, words = REFUSED[name]
    body = make()
    sid = srv.api.session()
    assert srv.api.execute(sid, PLANT, language='bash')['exit_code'] == 0
    for path in (None, 'sub'):
        r, changed, outside = attack(srv, sid, body, path)
        assert r.status_code == status, f'{name} into {path!r}: {r.status_code} {r.text[:500]}'
        err = r.json()['error']
        assert err['code'] == ('invalid_archive' if status == 400 else 'archive_too_large'), err
        assert words in err['message'], err
        assert not changed, f'{name}: /work changed: {changed}'
        assert outside == '[]', f'{name}: written outside /work in the sandbox: {outside}'
    landed = [p for p in host_targets(srv) if os.path.lexists(p)]
    assert not landed, f'{name}: created on the host: {landed}'
    assert srv.api.execute(sid, '6 * 7')['results'] == [{'text/plain': '42'}]
    assert srv.neighbour_ok() is None
    srv.api.delete(f'/v1/sessions/{sid}')


def test_bomb_past_the_ratio_in_a_roomy_session(jailed, host_guard):
    """With room for it on disk, a bomb is refused by its expansion."""
    srv, _ = jailed
    sid = srv.api.session(limits={'disk_mb': 1024, 'memory_mb': 512})
    for body in (A.zip_raw([('zeros', 8, A.deflate_zeros(300), A.crc_zeros(300), 300 << 20,
                             0o100644)]),
                 A.gzip_zeros_tar('zeros', 300)):
        r, changed, outside = attack(srv, sid, body)
        assert r.status_code == 413, r.text
        assert r.json()['error']['code'] == 'archive_too_large'
        assert 'compression bomb' in r.json()['error']['message'], r.text
        assert not changed and outside == '[]'
    assert srv.neighbour_ok() is None
    srv.api.delete(f'/v1/sessions/{sid}')


def test_a_million_tiny_entries(jailed, host_guard):
    """A million empty files (5 MB of tar.gz): refused at
    archive_max_entries (100000) without writing one, the daemon unharmed,
    the session usable after."""
    srv, cg = jailed
    body = A.many_entries_tgz(1_000_000)
    sid = srv.api.session(limits={'timeout_s': 120})
    rss0 = rss(srv.proc.pid)
    r, changed, outside = attack(srv, sid, body)
    assert r.status_code == 413, r.text
    assert r.json()['error']['code'] == 'archive_too_large'
    assert 'more than 100000 entries' in r.json()['error']['message'], r.text
    assert not changed and outside == '[]'
    grew = rss(srv.proc.pid) - rss0
    print(f'daemon RSS grew by {grew >> 20} MiB')
    assert grew < 64 << 20, grew
    assert srv.api.execute(sid, 'open("ok", "w").write("fine")')['status'] == 'ok'
    assert srv.neighbour_ok() is None
    assert cg.oom_kills() == 0
    srv.api.delete(f'/v1/sessions/{sid}')


def rss(pid):
    return int((H.proc_status(pid) or {}).get('VmRSS', '0 kB').split()[0]) * 1024


# ---- downloads: what a hostile workspace and slow clients cost the daemon ----

# 7800 files whose paths are 4016 bytes long (31.5 MiB of names, just under
# the 32 MiB a listing may hold), then a sparse file of 48 MiB that sorts
# last, so that a download stalls with its whole listing held.
DEEP = r'''
import os
d = '/work/deep/' + '/'.join(['D' * 250] * 15)
os.makedirs(d)
for i in range(7800):
    open(os.path.join(d, '%06d' % i + 'F' * 240), 'w').close()
with open('/work/zz', 'wb') as f:
    f.truncate(48 << 20)
'''


def stalled_download(port, sid, params='format=tar'):
    """A GET of the archive by a client that reads its status line and
    nothing more: (socket, status)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(60)
    s.connect(('127.0.0.1', port))
    s.sendall(f'GET /v1/sessions/{sid}/archive?{params} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'.encode())
    head = s.recv(64)
    return s, int(head.split()[1])


def test_stalled_downloads_of_a_huge_listing_hold_a_bounded_amount(jailed, host_guard):
    """Eight clients that never read a download of a workspace of 31.5 MiB
    of names: the listings are held by the archives' writers, in the
    session's memory, not the daemon's (a writer over ARCHIVE_HELD_MAX is
    503 busy), and the room comes back when they hang up.  (Each held its
    listing in the daemon before: +36 MiB of RSS per client, without a
    bound; then 128 MiB in all.)"""
    srv, _ = jailed
    sid = srv.api.session(limits={'timeout_s': 60, 'memory_mb': 512})
    res = srv.api.execute(sid, DEEP, timeout_s=60)
    assert res['status'] == 'ok', res['error']
    rss0 = rss(srv.proc.pid)
    socks, statuses = [], []
    try:
        for _ in range(8):
            s, status = stalled_download(srv.port, sid)
            socks.append(s)
            statuses.append(status)
        grew = rss(srv.proc.pid) - rss0
        print(f'statuses {statuses}; daemon RSS +{grew >> 20} MiB')
        assert 200 in statuses and set(statuses) <= {200, 503}, statuses
        # Under ASan the daemon's RSS holds its quarantine and shadow too.
        assert SANITIZED or grew < 200 << 20, \
            f'+{grew >> 20} MiB for {statuses.count(200)} downloads'
        r = srv.api.get(f'/v1/sessions/{sid}/archive', timeout=60)
        if r.status_code == 503:
            assert r.json()['error']['code'] == 'busy', r.text
        assert srv.neighbour_ok() is None
    finally:
        for s in socks:
            s.close()
    # the room is given back when the clients are gone
    ok = H.wait_until(lambda: srv.api.get(f'/v1/sessions/{sid}/archive',
                                          params={'path': 'deep'}).status_code == 200)
    assert ok, 'the listings of closed downloads are still charged'
    srv.api.delete(f'/v1/sessions/{sid}')


def archive_writers(daemon):
    """The daemon's archive writers (src/workspace/archive.h)."""
    return [p for p in H.all_pids() if daemon in H.ancestors(p) and
            cmdline(p)[1:2] == [b'__archive-writer']]


def test_the_writer_is_confined_while_it_reads_the_sandboxs_files(jailed, host_guard):
    """A download's writer reads what the sandbox made (names, links, sizes)
    with libarchive and zlib: while it does, it is under a seccomp filter of
    its own (an allow-list without socket, exec or namespaces:
    tests/unit/test_policy.c) and in an empty network namespace, not the
    daemon's.  (It had neither: a bug those libraries have for a hostile
    file would have run with the host's network.)"""
    srv, _ = jailed
    sid = srv.api.session(limits={'disk_mb': 1024})
    res = srv.api.execute(sid, "open('/work/hole', 'wb').truncate(512 << 20)")
    assert res['status'] == 'ok', H.describe(res)
    s, status = stalled_download(srv.port, sid)
    try:
        assert status == 200
        assert H.wait_until(lambda: archive_writers(srv.proc.pid)), 'no writer'
        writer, = archive_writers(srv.proc.pid)
        st = H.proc_status(writer)
        assert st['Seccomp'] == '2' and int(st['Seccomp_filters']) >= 1, st
        assert st['NoNewPrivs'] == '1' and st['CapEff'] == '0' * 16, st
        net = H.ns_inode(writer, 'net')
        assert net and net != H.ns_inode(srv.proc.pid, 'net'), 'the daemon\'s network'
        links = [line.split(':')[0].strip()
                 for line in read_text(f'/proc/{writer}/net/dev').splitlines()[2:]]
        assert links == ['lo'], links
    finally:
        s.close()
    assert H.wait_until(lambda: not archive_writers(srv.proc.pid)), 'the writer outlived its client'
    srv.api.delete(f'/v1/sessions/{sid}')


def test_a_big_download_streams_in_bounded_memory(jailed, host_guard):
    """512 MiB of tar read as fast as the client can: the daemon holds a
    step of it at a time (it used to keep everything it had sent)."""
    srv, _ = jailed
    sid = srv.api.session(limits={'disk_mb': 1024})
    res = srv.api.execute(sid, "open('/work/big', 'wb').truncate(512 << 20)")
    assert res['status'] == 'ok', H.describe(res)
    rss0, peak, got = rss(srv.proc.pid), 0, 0
    with srv.api.get(f'/v1/sessions/{sid}/archive', params={'format': 'tar'}, stream=True,
                     timeout=120) as r:
        assert r.status_code == 200
        for i, chunk in enumerate(r.iter_content(1 << 20)):
            got += len(chunk)
            if i % 8 == 0:
                peak = max(peak, rss(srv.proc.pid) - rss0)
    print(f'{got >> 20} MiB sent; daemon RSS at most +{peak >> 20} MiB')
    assert got > 512 << 20
    assert peak < 64 << 20, f'+{peak >> 20} MiB while sending {got >> 20} MiB'
    srv.api.delete(f'/v1/sessions/{sid}')



# A 60 MiB hole (RLIMIT_FSIZE keeps one file within the disk limit) and
# hard links to it: 64 MiB of /work whose files add up to 1.2 GB.
AMPLIFY = r'''
import os
with open('/work/hole', 'wb') as f:
    f.truncate(60 << 20)
for i in range(20):
    os.link('/work/hole', '/work/link%02d' % i)
'''


@pytest.mark.parametrize('fmt', ['tar', 'tar.gz'])
def test_holes_and_hard_links_do_not_amplify_a_download(jailed, host_guard, fmt):
    """A download carries at most what the session's /work can hold (its
    disk limit): a workspace of hard links to a hole was a 1.2 GB stream
    per 64 MiB (6 TB with archive_max_entries links), made by the daemon's
    CPU, not the session's, for as long as the client read."""
    srv, _ = jailed
    sid = srv.api.session()
    res = srv.api.execute(sid, AMPLIFY)
    assert res['status'] == 'ok', H.describe(res)
    with srv.api.get(f'/v1/sessions/{sid}/archive', params={'format': fmt}, stream=True,
                     timeout=60) as r:
        assert r.status_code == 413, f'{r.status_code}: streamed instead of refused'
        err = r.json()['error']
    assert err['code'] == 'too_large' and 'disk limit' in err['message'], err
    # within the disk limit, the same tree downloads
    assert srv.api.execute(sid, "import os\nfor i in range(20): os.unlink('/work/link%02d' % i)"
                           )['status'] == 'ok'
    r = srv.api.get(f'/v1/sessions/{sid}/archive', params={'format': fmt}, timeout=120)
    assert r.status_code == 200, r.text[:500]
    assert srv.neighbour_ok() is None
    srv.api.delete(f'/v1/sessions/{sid}')


SWAP = r'''
import os
os.rename('/work/d', '/work/real')
os.mkdir('/work/x')
prev = 'real'
for k in range(39):        # 39 links of 790 'x/..' hops each, then the directory
    os.symlink('x/../' * 790 + prev, '/work/c' + str(k))
    prev = 'c' + str(k)
os.symlink(prev, '/work/d')
'''


def test_links_swapped_in_during_a_download_cost_the_daemon_nothing(jailed, host_guard):
    """Listed, then its directory swapped for a chain of 39 symbolic links
    of 790 '..' hops each: every file after it was opened through 62 000
    path steps, on the thread that streams the archive (8 ms of the
    daemon's CPU a file, 800 s for archive_max_entries files).  Files are
    opened through no link now: what changed since the listing is left
    out at the cost of one lookup."""
    srv, _ = jailed
    sid = srv.api.session(limits={'timeout_s': 60})
    res = srv.api.execute(sid, "import os\nos.mkdir('/work/d')\n"
                          "for i in range(5000): open('/work/d/f%d' % i, 'w').close()")
    assert res['status'] == 'ok', H.describe(res)
    with srv.api.get(f'/v1/sessions/{sid}/archive', params={'format': 'tar'}, stream=True,
                     timeout=300) as r:
        assert r.status_code == 200
        chunks = r.iter_content(4096)
        next(chunks)                    # listed, and started
        res = srv.api.execute(sid, SWAP, timeout_s=60)
        assert res['status'] == 'ok', H.describe(res)
        cpu0 = cpu_seconds(srv.proc.pid)
        got = sum(len(c) for c in chunks)
        spent = cpu_seconds(srv.proc.pid) - cpu0
    print(f'the rest: {got >> 10} KiB for {spent:.2f} s of the daemon\'s CPU')
    assert spent < 2, f'{spent:.1f} s of the daemon\'s CPU for the rest of the download'
    # a directory reached through a link is still archived (resolved once)
    res = srv.api.execute(sid, "import os\nos.makedirs('/work/t/sub')\n"
                          "open('/work/t/sub/f', 'w').write('in')\nos.symlink('t', '/work/lt')")
    assert res['status'] == 'ok', H.describe(res)
    r = srv.api.get(f'/v1/sessions/{sid}/archive', params={'path': 'lt/sub', 'format': 'tar'})
    assert r.status_code == 200, r.text[:300]
    with tarfile.open(fileobj=io.BytesIO(r.content)) as t:
        assert t.extractfile('f').read() == b'in'
    assert srv.neighbour_ok() is None
    srv.api.delete(f'/v1/sessions/{sid}')

FORGE = r'''
import gc, json
g = next(o for o in gc.get_objects()
         if getattr(o, '__name__', '') == 'run_unpack' and hasattr(o, '__globals__')).__globals__
def forged(job):
    g['publish']({'application/json': json.dumps(%s)}, main=True)
    return 0
g['run_unpack'] = forged
'forged'
'''


@pytest.mark.parametrize('account', [
    {'format': 'rar', 'entries': 1, 'files': 1, 'directories': 0, 'links': 0, 'bytes': 1},
    {'format': 'tar', 'entries': 1, 'files': 1, 'directories': 0, 'links': 0, 'bytes': 1,
     'path': 5, 'evil': 7},
    {'format': 'tar', 'entries': -1, 'files': 1, 'directories': 0, 'links': 0, 'bytes': 1},
    {'format': 'tar', 'entries': 1},
    ['not', 'an', 'object'],
], ids=['format', 'extra keys', 'negative', 'missing counts', 'array'])
def test_a_forged_account_of_the_archive_is_refused(jailed, account):
    """The session's code shares the driver's interpreter: it can answer
    for the driver.  The server takes the five counts and one of the five
    formats, nothing else."""
    srv, _ = jailed
    sid = srv.api.session()
    assert srv.api.execute(sid, FORGE % repr(account))['status'] == 'ok'
    r = srv.api.post(f'/v1/sessions/{sid}/archive', data=tar('a'))
    assert r.status_code == 400, r.text
    assert r.json()['error'] == {'code': 'invalid_archive',
                                 'message': 'the sandbox gave no account of the archive'}
    srv.api.delete(f'/v1/sessions/{sid}')
