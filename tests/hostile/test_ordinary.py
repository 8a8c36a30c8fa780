"""Ordinary programs behave inside as outside (issue 12, part 6).

What CPython's own regression tests found (tests/cpython runs them): calls
that a sandbox may make because the namespaces already contain them must
reach the kernel, and calls it may not make must answer EPERM (or what a
kernel without the feature answers), never ENOSYS, which tells a program
its kernel is too old.  On every path (cold run, cold session, warm
session) with the same limits:

* extended attributes as on any Linux for an unprivileged user: user.* on
  its own files is written, read back and copied (shutil.copy2, `cp -a`,
  `sed -i` without a word), security.* and trusted.* answer EPERM;
* chown of one's own file works, of a bad fd EBADF, to anyone else EPERM;
  setreuid(-1, -1) and setuid(getuid()) work, setuid(0) and
  subprocess(user=65534) answer EPERM;
* os.openpty works in a devpts instance of the sandbox's own (nosuid,
  noexec, ptmx 0666, bounded), not the host's; TIOCSETD is refused;
* route netlink works in the sandbox's own network namespace (loopback
  only), audit/uevent/xfrm netlink do not;
* pidfd_open, splice work;
* the CA certificates and /etc/os-release are there, /etc/ssl/private
  is not;
* RLIMIT_NPROC is the session's pids limit, cold and warm alike;
* the ordinary scheduling policies can be set, real-time ones cannot
  (RLIMIT_RTPRIO 0).
"""
import json
import os

import pytest

import hostilehelp as H

LIMITS = dict(H.DEFAULT_LIMITS, timeout=30, pids=48)

PROBE = r'''
import errno, fcntl, json, os, resource, shutil, socket, ssl, struct, termios
out = {}
def err(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
open('/tmp/src', 'w').write('x')
out['listxattr'] = err(lambda: os.listxattr('/tmp/src'))
out['copy2'] = err(lambda: shutil.copy2('/tmp/src', '/tmp/dst'))
import subprocess
sed = subprocess.run(['sed', '-i', 's/x/y/', '/tmp/src'], capture_output=True, text=True)
out['sed_i'] = [sed.returncode, sed.stderr, open('/tmp/src').read()]
out['setxattr'] = err(lambda: os.setxattr('/tmp/src', 'user.x', b'1'))
def val(f):
    try:
        return repr(f())
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
out['getxattr'] = val(lambda: os.getxattr('/tmp/src', 'user.x'))
shutil.copy2('/tmp/src', '/tmp/dst2')
out['copy2_xattr'] = val(lambda: os.getxattr('/tmp/dst2', 'user.x'))
cpa = subprocess.run(['cp', '-a', '/tmp/src', '/tmp/dst3'], capture_output=True, text=True)
out['cp_a'] = [cpa.returncode, cpa.stderr, val(lambda: os.getxattr('/tmp/dst3', 'user.x'))]
out['removexattr'] = err(lambda: os.removexattr('/tmp/dst3', 'user.x'))
out['xattr_security'] = err(lambda: os.setxattr('/tmp/src', 'security.x', b'1'))
out['xattr_capability'] = err(lambda: os.setxattr('/tmp/src', 'security.capability',
                                                  bytes.fromhex('0100000200200000' + '00' * 12)))
out['xattr_trusted'] = err(lambda: os.setxattr('/tmp/src', 'trusted.x', b'1'))
out['xattr_system'] = err(lambda: os.setxattr('/usr/bin/env', 'user.x', b'1'))
out['chown_own'] = err(lambda: os.chown('/tmp/src', os.getuid(), os.getgid()))
out['fchown_badfd'] = err(lambda: os.fchown(999, os.getuid(), os.getgid()))
out['chown_root'] = err(lambda: os.chown('/tmp/src', 0, 0))
out['chown_nobody'] = err(lambda: os.chown('/tmp/src', 65534, -1))
out['setreuid'] = err(lambda: (os.setreuid(-1, -1), os.setregid(-1, -1)))
out['setuid_own'] = err(lambda: (os.setgid(os.getgid()), os.setuid(os.getuid())))
out['setuid_root'] = err(lambda: os.setuid(0))
import subprocess
out['subprocess_user'] = err(lambda: subprocess.run(['true'], user=65534))
m, s = os.openpty()
out['ttyname'] = os.ttyname(s)
os.write(m, b'hello\n')
out['pty_echo'] = os.read(s, 100).decode()
out['tiocsetd'] = err(lambda: fcntl.ioctl(s, termios.TIOCSETD, struct.pack('i', 21)))
out['pts'] = sorted(os.listdir('/dev/pts'))
out['ptmx_mode'] = oct(os.stat('/dev/pts/ptmx').st_mode & 0o7777)
out['dev_ptmx'] = os.readlink('/dev/ptmx')
out['pts_mount'] = [l.split() for l in open('/proc/self/mountinfo') if ' /dev/pts ' in l]
out['pts_dev'] = os.stat('/dev/pts').st_dev
out['if_nameindex'] = socket.if_nameindex()
for name, proto in (('audit', 9), ('uevent', 15), ('xfrm', 6), ('sock_diag', 4)):
    out['netlink_' + name] = err(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto))
pfd = os.pidfd_open(os.getpid())
out['pidfd'] = 'ok' if pfd >= 0 else 'bad'
r, w = os.pipe()
out['splice'] = err(lambda: os.splice(os.open('/tmp/src', os.O_RDONLY), w, 1))
out['certs'] = ssl.create_default_context().cert_store_stats()['x509_ca']
out['os_release'] = 'ID=debian' in open('/etc/os-release').read()
out['ssl_private'] = os.path.exists('/etc/ssl/private')
out['nproc'] = resource.getrlimit(resource.RLIMIT_NPROC)
out['rtprio'] = resource.getrlimit(resource.RLIMIT_RTPRIO)
out['sched_other'] = err(lambda: os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0)))
out['sched_fifo'] = err(lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
out['sched_rr_interval'] = err(lambda: os.sched_rr_get_interval(0))
print('PROBE ' + json.dumps(out))
'''


def parse(text):
    for line in text.splitlines():
        if line.startswith('PROBE '):
            return json.loads(line[6:])
    raise AssertionError(f'no probe output: {text[-3000:]}')


def run_probe(path, servers, tmp_path, code=PROBE):
    if path == 'run':
        prog = tmp_path / 'probe.py'
        prog.write_text(code)
        result, _, _ = H.petri_run(prog, 'python', LIMITS)
    else:
        srv = servers(path)
        sid = srv.api.session(limits=H.api_limits(LIMITS))
        H.SessionWatch(srv.api, sid, warm=(path == 'serve-warm'))
        result = srv.api.execute(sid, code)
        srv.api.delete(f'/v1/sessions/{sid}')
    assert result['status'] == 'ok', H.describe(result)
    return parse(H.out_bytes(result, 'stdout').decode())


@pytest.mark.parametrize('path', H.PATHS)
def test_ordinary_calls(path, servers, tmp_path, host_guard):
    got = run_probe(path, servers, tmp_path)
    problems = []

    def want(key, ok, what):
        if not ok(got[key]):
            problems.append(f'{key}: {got[key]!r}, expected {what}')

    want('listxattr', lambda v: v in ('ok', 'ENOTSUP', 'ENODATA'), 'the kernel\'s own answer')
    want('copy2', lambda v: v == 'ok', 'shutil.copy2 to work')
    want('setxattr', lambda v: v == 'ok', 'user.* on its own file to be written')
    want('getxattr', lambda v: v == "b'1'", 'and read back')
    want('copy2_xattr', lambda v: v == "b'1'", 'shutil.copy2 to copy it')
    want('cp_a', lambda v: v == [0, '', "b'1'"], 'cp -a to copy it without a word')
    want('removexattr', lambda v: v == 'ok', 'and remove it')
    want('xattr_security', lambda v: v == 'EPERM', 'EPERM (CAP_SYS_ADMIN in its namespace)')
    want('xattr_capability', lambda v: v == 'EPERM', 'EPERM (CAP_SETFCAP)')
    want('xattr_trusted', lambda v: v == 'EPERM', 'EPERM (CAP_SYS_ADMIN)')
    want('xattr_system', lambda v: v == 'EROFS', 'EROFS (the read-only system)')
    want('sed_i', lambda v: v == [0, '', 'y'], 'sed -i to work without a word on stderr')
    want('chown_own', lambda v: v == 'ok', 'a chown that changes nothing to work')
    want('fchown_badfd', lambda v: v == 'EBADF', 'EBADF')
    # EPERM as outside, on both paths (the kernel would say EINVAL where
    # its user namespace does not map the id, as on the warm path)
    want('chown_root', lambda v: v == 'EPERM', 'EPERM')
    want('chown_nobody', lambda v: v == 'EPERM', 'EPERM')
    want('setreuid', lambda v: v == 'ok', 'setreuid(-1, -1) to work')
    want('setuid_own', lambda v: v == 'ok', 'setuid(getuid()) to work')
    want('setuid_root', lambda v: v == 'EPERM', 'EPERM')
    want('subprocess_user', lambda v: v == 'EPERM', 'EPERM (subprocess(user=65534))')
    want('ttyname', lambda v: v.startswith('/dev/pts/'), 'a pty')
    want('pty_echo', lambda v: v.strip() == 'hello', 'the pty to carry data')
    want('tiocsetd', lambda v: v == 'EPERM', 'EPERM')
    want('pts', lambda v: v == ['0', 'ptmx'], 'only its own pty (a fresh instance)')
    want('ptmx_mode', lambda v: v == '0o666', '0666')
    want('dev_ptmx', lambda v: v == 'pts/ptmx', 'a link into its own instance')
    mounts = got['pts_mount']
    if len(mounts) != 1:
        problems.append(f'/dev/pts mounts: {mounts}')
    else:
        m = mounts[0]
        opts = m[5].split(',')
        sep = m.index('-')
        super_opts = m[sep + 3].split(',')
        if m[sep + 1] != 'devpts' or 'nosuid' not in opts or 'noexec' not in opts:
            problems.append(f'/dev/pts is not a nosuid,noexec devpts: {m}')
        if 'ptmxmode=666' not in super_opts or not any(o.startswith('max=') for o in super_opts):
            problems.append(f'/dev/pts options: {super_opts}')
    if os.path.isdir('/dev/pts') and got['pts_dev'] == os.stat('/dev/pts').st_dev:
        problems.append('/dev/pts is the host\'s instance')
    want('if_nameindex', lambda v: v == [[1, 'lo']], 'loopback only (its own netns)')
    for name in ('audit', 'uevent', 'xfrm', 'sock_diag'):
        want('netlink_' + name, lambda v: v == 'EPROTONOSUPPORT', 'EPROTONOSUPPORT')
    want('pidfd', lambda v: v == 'ok', 'pidfd_open to work')
    want('splice', lambda v: v == 'ok', 'splice to work')
    want('certs', lambda v: v > 0, 'CA certificates')
    want('os_release', lambda v: v is True, '/etc/os-release')
    want('ssl_private', lambda v: v is False, 'no /etc/ssl/private')
    want('nproc', lambda v: v == [LIMITS['pids']] * 2, f'RLIMIT_NPROC = pids = {LIMITS["pids"]}')
    want('rtprio', lambda v: v == [0, 0], 'no real-time priority')
    want('sched_other', lambda v: v == 'ok', 'the ordinary policy to be settable')
    want('sched_fifo', lambda v: v == 'EPERM', 'EPERM from the kernel (RLIMIT_RTPRIO 0)')
    want('sched_rr_interval', lambda v: v == 'ok', 'sched_rr_get_interval to work')
    assert not problems, f'{path}:\n' + '\n'.join(problems)


@pytest.mark.parametrize('path', ('serve-cold', 'serve-warm'))
def test_ptys_are_private_to_a_session(path, servers, host_guard):
    """A pty that one session holds open is invisible to the next (on the
    warm path both are forks of one template, whose instance neither
    shares)."""
    srv = servers(path)
    holder = srv.api.session()
    r = srv.api.execute(holder, "import os\nheld = [os.openpty() for _ in range(3)]\n"
                                "sorted(os.listdir('/dev/pts'))")
    assert r['status'] == 'ok', H.describe(r)
    assert r['results'][0]['text/plain'] == "['0', '1', '2', 'ptmx']", H.describe(r)
    other = srv.api.session()
    r = srv.api.execute(other, "import os\nsorted(os.listdir('/dev/pts'))")
    assert r['status'] == 'ok', H.describe(r)
    assert r['results'][0]['text/plain'] == "['ptmx']", H.describe(r)
    for sid in (holder, other):
        srv.api.delete(f'/v1/sessions/{sid}')


def test_ptys_are_bounded(servers, host_guard):
    """One sandbox cannot take every pty of the machine (pty.max is shared
    by all instances but the host's): it gets [sandbox] ptys, 16 by
    default."""
    srv = servers('serve-warm')
    sid = srv.api.session()
    r = srv.api.execute(sid, "import os, errno\nheld = []\ntry:\n"
                             "    for _ in range(10000):\n        held.append(os.openpty())\n"
                             "except OSError as e:\n    print(len(held), errno.errorcode[e.errno])\n")
    srv.api.delete(f'/v1/sessions/{sid}')
    assert r['status'] == 'ok', H.describe(r)
    n, code = r['stdout'].split()
    assert int(n) == 16 and code == 'ENOSPC', H.describe(r)


def test_nproc_counts_each_session_apart(servers, host_guard):
    """Warm sandboxes are forks of one template, but RLIMIT_NPROC counts
    each one's processes in its own user namespace: two sessions can each
    hold most of their limit at once (one shared count would stop the
    second at the first's leftover)."""
    srv = servers('serve-warm')
    limits = H.api_limits(dict(LIMITS, timeout=30))
    hold = ("import subprocess, resource\n"
            "held = [subprocess.Popen(['sleep', '120']) for _ in range(30)]\n"
            "(len(held), resource.getrlimit(resource.RLIMIT_NPROC)[0])")
    sids = [srv.api.session(limits=limits) for _ in range(2)]
    try:
        for sid in sids:
            r = srv.api.execute(sid, hold)
            assert r['status'] == 'ok', H.describe(r)
            assert r['results'][0]['text/plain'] == f"(30, {LIMITS['pids']})", H.describe(r)
    finally:
        for sid in sids:
            srv.api.delete(f'/v1/sessions/{sid}')
