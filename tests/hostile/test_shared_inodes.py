"""What the read-only binds share: their inodes and their page cache.

/usr (and a few /etc entries) are bound read-only into every sandbox, so a
file there is the same inode, with the same cached pages, for the host and
for every session.  A watch on such an inode, or an eviction of its pages,
reaches the host and the neighbours: these tests need a second session or
the host's view, which a corpus program alone cannot give.
"""
import glob
import subprocess

import pytest

import hostilehelp as H

SERVE_PATHS = ('serve-cold', 'serve-warm')
PYLIB = sorted(glob.glob('/usr/lib/python3.*/sqlite3'))[0].rsplit('/', 1)[0]


def result_text(r):
    assert r['status'] == 'ok', H.describe(r)
    return r['results'][0]['text/plain'] if r['results'] else None


# Found in the audit for "one tenant cannot hurt the server or its
# neighbours": fcntl(F_NOTIFY) passed the filter, and session A's dnotify
# watch on .../sqlite3 saw session B's `import sqlite3` the same second.
WATCH = f"""
import errno, fcntl, os, signal
events = []
signal.signal(signal.SIGIO, lambda *a: events.append(1))
wfd = os.open({PYLIB + '/sqlite3'!r}, os.O_RDONLY | os.O_DIRECTORY)
try:
    fcntl.fcntl(wfd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)
    setup = 'watching'
except OSError as e:
    setup = errno.errorcode[e.errno]
setup
"""
NEIGHBOUR = f"""
open({PYLIB + '/sqlite3/__init__.py'!r}, 'rb').read()
import sqlite3
sqlite3.sqlite_version
"""
COLLECT = """
import time
deadline = time.monotonic() + 1
while not events and time.monotonic() < deadline:
    time.sleep(0.05)
len(events)
"""


@pytest.mark.parametrize('path', SERVE_PATHS)
def test_no_watch_sees_a_neighbour_or_the_host(path, servers, host_guard):
    srv = servers(path)
    a = srv.api.session()
    b = srv.api.session()
    try:
        setup = result_text(srv.api.execute(a, WATCH))
        result_text(srv.api.execute(b, NEIGHBOUR))
        with open(PYLIB + '/sqlite3/dbapi2.py', 'rb') as f:   # the host reads too
            f.read()
        seen = result_text(srv.api.execute(a, COLLECT))
    finally:
        srv.api.delete(f'/v1/sessions/{a}')
        srv.api.delete(f'/v1/sessions/{b}')
    assert (setup, seen) == ("'EPERM'", '0'), \
        f'F_NOTIFY: {setup}; SIGIO from the neighbour and the host: {seen}'


# posix_fadvise(DONTNEED) dropped the host's cached pages of a shared file.
VICTIM = PYLIB + '/pydoc_data/topics.py'   # read by no one, mapped by no one
EVICT = f"""
import os
fd = os.open({VICTIM!r}, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
'advised'
"""


def resident_bytes(path):
    out = subprocess.run(['fincore', '--bytes', '--noheadings', '--output', 'RES', path],
                         capture_output=True, text=True, check=True).stdout
    return int(out.strip())


@pytest.mark.parametrize('path', H.PATHS)
def test_fadvise_dontneed_keeps_the_host_page_cache(path, servers, host_guard, tmp_path):
    with open(VICTIM, 'rb') as f:
        size = len(f.read())
    before = resident_bytes(VICTIM)
    assert before >= size, f'{VICTIM}: only {before} of {size} bytes cached after a read'
    if path == 'run':
        prog = tmp_path / 'evict.py'
        prog.write_text(EVICT)
        r = H.petri_run(prog, 'python', H.DEFAULT_LIMITS)[0]
        assert r['status'] == 'ok', H.describe(r)
    else:
        srv = servers(path)
        sid = srv.api.session()
        try:
            assert result_text(srv.api.execute(sid, EVICT)) == "'advised'"
        finally:
            srv.api.delete(f'/v1/sessions/{sid}')
    after = resident_bytes(VICTIM)
    # DONTNEED drops every clean page of the file.  A page or two may go
    # meanwhile for another reason: a page is charged to the memory cgroup
    # that first read it, and one of the suite's cgroups at its limit
    # reclaims it (seen once in CI, 4 KiB of 740 KiB).
    assert before - after <= 2 * 4096, f'the sandbox evicted {before - after} bytes of ' \
        f'{VICTIM} from the host page cache'
