"""One host uid per live sandbox: a tenant that exhausts a per-user kernel
quota exhausts its own, never a neighbour's.

Every daemon here runs with a uid range of its own (`uid_base`, `uid_count`)
inside a memory cgroup of the test's own, warm and cold.  Checked from the
host: the uids of running sandboxes (/proc/<pid>/status) are distinct and
in the range; code inside is uid 1000 and owns /work; two daemons whose
ranges overlap never share a uid; no lease file outlives a daemon, and
after kill -9 the next start sweeps what the dead one left.
"""
import fcntl
import os
import secrets
import signal

import pytest

import hostilehelp as H

import memcg

LEASE_DIR = '/run/petri/uids'
COUNT = 50                      # max_sessions 40 + pool 1 + 2 templates + the probe, and room

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='uid ranges need root')


def new_base():
    """A uid_base of this test's own: far from the default and from other
    workers (an aligned random block of 10000 uids above 3.5e9)."""
    return 3_500_000_000 + secrets.randbelow(40_000) * 10_000


def range_config(base, count=COUNT):
    return f'\n[sandbox]\nuid_base = {base}\nuid_count = {count}\n'


def lease_files(base, count=COUNT):
    try:
        names = os.listdir(LEASE_DIR)
    except FileNotFoundError:
        return []
    first = base + 1000
    return sorted(int(n) for n in names if n.isdigit() and first <= int(n) < first + count)


def host_uids(pids):
    """{real uid} of the host processes pids (the gone ones left out)."""
    out = set()
    for p in pids:
        st = H.proc_status(p)
        if st and 'Uid' in st:
            out.add(int(st['Uid'].split()[0]))
    return out


def _rmdir(path):
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


class Daemon:
    """A petri serve with a range of its own, in a memory cgroup of its own."""

    def __init__(self, tmp_path, warm, base, count=COUNT):
        self.base, self.count = base, count
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.cg = memcg.MemoryCgroup('uids', 2 << 30)
        self.cg.__enter__()
        try:
            self.srv = H.Server(tmp_path, warm=warm, extra_config=range_config(base, count),
                                preexec_fn=self.cg.enter)
        except BaseException:
            self.cg.__exit__(None, None, None)
            raise
        self.api = self.srv.api

    def in_range(self, uid):
        return self.base + 1000 <= uid < self.base + 1000 + self.count

    def session_uid(self, sid, warm):
        """The one host uid of the session's processes."""
        w = H.SessionWatch(self.api, sid, warm=warm)
        uids = host_uids(w.host_procs())
        assert len(uids) == 1, f'a session runs as several host uids: {uids}'
        return uids.pop()

    def stop(self):
        code = self.srv.stop()
        oom = self.cg.oom_kills()
        # On cgroup v1 the daemon makes its sandboxes' memory cgroups under
        # its own: the empty parents it leaves must go first.
        for dirpath, _, _ in sorted(os.walk(self.cg.path), key=lambda w: -len(w[0])):
            if dirpath != self.cg.path:
                H.wait_until(lambda: _rmdir(dirpath), timeout=10)
        self.cg.__exit__(None, None, None)
        assert oom == 0, 'the daemon was OOM-killed in its own cgroup'
        return code


@pytest.fixture(scope='module', params=['cold', 'warm'])
def daemon(request, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp('uids'), request.param == 'warm', new_base())
    d.warm = request.param == 'warm'
    yield d
    code = d.stop()
    assert code == 0, d.srv.stderr_text()[-3000:]
    assert H.wait_until(lambda: not lease_files(d.base)), \
        f'lease files left after the daemon stopped: {lease_files(d.base)}'


def ok_text(r):
    assert r['status'] == 'ok', H.describe(r)
    return r['results'][0]['text/plain']


# ---------------------------------------------------------------- identity

def test_sessions_are_uid_1000_inside_and_distinct_outside(daemon):
    sids = [daemon.api.session() for _ in range(3)]
    try:
        uids = []
        for sid in sids:
            text = ok_text(daemon.api.execute(
                sid, "import os\n(os.getuid(), os.getgid(), os.stat('/work').st_uid, "
                     "[l.split()[2] for l in open('/proc/self/uid_map') "
                     "if l.split()[0] == '1000'])"))
            # uid 1000 is one host uid: the session sees no other.
            assert text == "(1000, 1000, 1000, ['1'])", text
            uids.append(daemon.session_uid(sid, daemon.warm))
        assert len(set(uids)) == len(uids), f'sessions share a host uid: {uids}'
        assert all(daemon.in_range(u) for u in uids), (uids, daemon.base)
        # Their lease files are there while they live.
        assert set(uids) <= set(lease_files(daemon.base))
    finally:
        for sid in sids:
            daemon.api.delete(f'/v1/sessions/{sid}')


def test_files_api_writes_as_the_sessions_own_uid(daemon):
    """A file the API writes belongs to the session's own host uid (uid
    1000 inside), not to a uid that every session shares."""
    sids = [daemon.api.session() for _ in range(2)]
    try:
        owners = []
        for sid in sids:
            r = daemon.api.put(f'/v1/sessions/{sid}/files/up.txt', data=b'hello')
            assert r.status_code == 201, r.text
            text = ok_text(daemon.api.execute(
                sid, "import os\nst = os.stat('/work/up.txt')\n(st.st_uid, st.st_gid, "
                     "open('/work/up.txt').read())"))
            assert text == "(1000, 1000, 'hello')", text
            ok_text(daemon.api.execute(sid, "open('/work/out.txt', 'w').write('made inside')"))
            r = daemon.api.get(f'/v1/sessions/{sid}/files/out.txt')
            assert r.status_code == 200 and r.content == b'made inside', r.text
            w = H.SessionWatch(daemon.api, sid, warm=daemon.warm)
            uid = daemon.session_uid(sid, daemon.warm)
            st = os.stat(f'/proc/{w.host_procs()[0]}/root/work/up.txt')
            assert (st.st_uid, st.st_gid) == (uid, uid), (st.st_uid, st.st_gid, uid)
            owners.append(st.st_uid)
        assert len(set(owners)) == len(owners), owners
    finally:
        for sid in sids:
            daemon.api.delete(f'/v1/sessions/{sid}')


# ---------------------------------------------------------------- quotas

# Park fds in unread unix messages until the kernel says ETOOMANYREFS: the
# fds in flight of a host uid may not exceed its RLIMIT_NOFILE.
PARK_FDS = """
import errno, os, socket
parked = []
def park():
    r, _w = os.pipe()
    sent = 0
    while True:
        a, b = socket.socketpair()
        a.setblocking(False)
        parked.append((a, b))
        try:
            while True:
                socket.send_fds(a, [b'x'], [r] * 250)
                sent += 250
        except BlockingIOError:
            continue
        except OSError as e:
            return sent, errno.errorcode[e.errno]
park()
"""

PASS_ONE_FD = """
import os, socket
a, b = socket.socketpair()
r, w = os.pipe()
try:
    socket.send_fds(a, [b'x'], [r])
    _, fds, _, _ = socket.recv_fds(b, 1, 1)
    out = 'passed %d' % len(fds)
except OSError as e:
    out = 'failed: %s' % e
out
"""

# Grow pipes to 1 MiB until the host uid is over fs.pipe-user-pages-soft.
FILL_PIPES = """
import errno, fcntl, os
pipes = []
def fill():
    for i in range(200):
        r, w = os.pipe()
        pipes.append((r, w))
        try:
            fcntl.fcntl(w, 1031, 1 << 20)          # F_SETPIPE_SZ
        except OSError as e:
            return i, errno.errorcode[e.errno]
    return 200, None
fill()
"""

NEW_PIPE = """
import fcntl, os
r, w = os.pipe()
before = fcntl.fcntl(w, 1032)                       # F_GETPIPE_SZ
try:
    after = fcntl.fcntl(w, 1031, 1 << 20)
except OSError as e:
    after = str(e)
(before, after)
"""


def with_neighbour(daemon, attack, check_attack, probe, expect):
    """A neighbour session exhausts a quota; a bystander's probe must see
    nothing of it."""
    bystander = daemon.api.session()
    neighbour = daemon.api.session()
    try:
        assert ok_text(daemon.api.execute(bystander, probe)) == expect
        got = ok_text(daemon.api.execute(neighbour, attack))
        check_attack(got)
        # The neighbour is at its limit: the same probe fails there...
        assert ok_text(daemon.api.execute(neighbour, probe)) != expect
        # ...and nowhere else.
        assert ok_text(daemon.api.execute(bystander, probe)) == expect
        fresh = daemon.api.session()
        try:
            assert ok_text(daemon.api.execute(fresh, probe)) == expect
        finally:
            daemon.api.delete(f'/v1/sessions/{fresh}')
        assert daemon.srv.neighbour_ok() is None
    finally:
        daemon.api.delete(f'/v1/sessions/{neighbour}')
        daemon.api.delete(f'/v1/sessions/{bystander}')


def test_fds_in_flight_of_a_neighbour(daemon):
    def check(got):
        assert got.endswith("'ETOOMANYREFS')"), got
    with_neighbour(daemon, PARK_FDS, check, PASS_ONE_FD, "'passed 1'")


def test_pipe_pages_of_a_neighbour(daemon):
    def check(got):
        assert got.endswith("'EPERM')"), got
    with_neighbour(daemon, FILL_PIPES, check, NEW_PIPE, '(65536, 1048576)')


# ---------------------------------------------------------------- daemons

def test_two_daemons_with_one_range_never_share_a_uid(tmp_path):
    """Same uid_base and uid_count, one warm and one cold: the leases keep
    their sandboxes apart."""
    base = new_base()
    a = Daemon(tmp_path / 'a', True, base)
    try:
        b = Daemon(tmp_path / 'b', False, base)
        try:
            uids = {'a': [], 'b': []}
            for name, d, warm in (('a', a, True), ('b', b, False)):
                uids[name].append(d.session_uid(d.srv.neighbour, warm))
                for _ in range(2):
                    uids[name].append(d.session_uid(d.api.session(), warm))
            everything = uids['a'] + uids['b']
            assert len(set(everything)) == len(everything), uids
            assert all(a.in_range(u) for u in everything), uids
        finally:
            assert b.stop() == 0
    finally:
        assert a.stop() == 0
    assert H.wait_until(lambda: not lease_files(base)), lease_files(base)


def test_kill_9_leaves_nothing_the_next_start_keeps(tmp_path):
    base = new_base()
    d = Daemon(tmp_path / 'a', False, base)
    try:
        held = lease_files(base)
        assert held, 'a running daemon holds no lease'
        tag = H.cgroup_tag(d.srv.proc.pid)
        d.srv.proc.send_signal(signal.SIGKILL)
    finally:
        d.stop()
    # Its sandboxes die with it; its files stay, unlocked.
    assert H.wait_until(lambda: not [p for p, st in H.sandbox_procs().items()
                                     if d.in_range(int(st['Uid'].split()[0]))])
    # No process of it is left; its empty cgroups and its lease files stay
    # until a daemon starts and sweeps them (the next one here, or another
    # test's: the cgroup parent and the lease directory are the host's).
    assert H.wait_until(lambda: not [p for p in H.run_leftovers(tag) if isinstance(p, int)]), \
        H.run_leftovers(tag)
    # Its files stay, unlocked, until a daemon starts and sweeps them (another
    # test's daemon may have done it already: the directory is the host's).
    for uid in lease_files(base):
        assert uid in held, (uid, held)
        with open(f'{LEASE_DIR}/{uid}') as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)     # nobody holds it
    # One more stale file, of a uid the next daemon will not lease.
    last = base + 1000 + COUNT - 1
    open(f'{LEASE_DIR}/{last}', 'w').close()
    e = Daemon(tmp_path / 'b', False, base)
    try:
        # Swept at its start: what is there is what it holds (its one
        # neighbour session, once the probe it starts with, a one-shot of
        # its own, has given its uid back).
        assert last not in lease_files(base)
        assert H.wait_until(lambda: len(lease_files(base)) == 1), lease_files(base)
        assert not H.run_leftovers(tag), H.run_leftovers(tag)
    finally:
        assert e.stop() == 0
    assert H.wait_until(lambda: not lease_files(base)), lease_files(base)
