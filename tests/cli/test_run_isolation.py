"""Isolation, a first adversarial set: what the code inside can see and do.

Syscall numbers are x86_64.  A refused call must fail with EPERM or ENOSYS
(the seccomp policy's answers), never succeed."""

import errno
import json
import os
import socket
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _py(petri_json, code, *flags):
    """Run Python code that prints one JSON document; return it."""
    r = petri_json(code, *flags)
    assert r['status'] == 'ok', r.describe()
    return json.loads(r['stdout'])


# ---- the filesystem -----------------------------------------------------------

@pytest.fixture
def host_markers(tmp_path):
    """Uniquely named files on the host: in a tmp dir, in /root and in this
    project's directory (tests/cli).  None may be visible inside."""
    name = f'petri-marker-{uuid.uuid4().hex}'
    paths = [tmp_path / name, Path('/root') / name, Path(__file__).parent / name]
    for p in paths:
        p.write_text('host secret\n')
    yield name, paths
    for p in paths:
        p.unlink(missing_ok=True)


def test_host_files_are_not_visible_anywhere(petri_json, host_markers):
    name, paths = host_markers
    code = f'''
import json, os
hits, dirs = [], 0
for root, ds, fs in os.walk("/", onerror=lambda e: None):
    if root == "/":
        ds[:] = [d for d in ds if d != "proc"]
    dirs += 1
    hits += [os.path.join(root, n) for n in ds + fs if "{name}" in n]
opened = {{}}
for p in {[str(p) for p in paths]!r}:
    try:
        open(p).read(); opened[p] = "READ"
    except OSError as e:
        opened[p] = e.errno
print(json.dumps({{"hits": hits, "dirs": dirs, "opened": opened}}))
'''
    out = _py(petri_json, code, '--timeout', '30')
    assert out['dirs'] > 1000                   # the walk did see /usr
    assert out['hits'] == []
    assert all(v != 'READ' for v in out['opened'].values()), out['opened']


def test_project_directory_is_not_visible(petri_json):
    assert (ROOT / 'Makefile').exists()
    code = f'''
import json, os
print(json.dumps({{p: os.path.exists(p) for p in
    ["{ROOT}", "{ROOT}/Makefile", "/work/Makefile", "/work/main", "/work/src",
     "{ROOT}/build/petri"]}}))
'''
    out = _py(petri_json, code)
    assert not any(out.values()), out
    r = petri_json('ls -A /work', lang='bash')
    assert r['stdout'] == '', r.describe()      # /work starts empty


def test_home_holds_only_the_workspace(petri_json):
    """/home/user is /work under E2B's name: the sandbox's own files, nothing of
    the host's /home."""
    out = _py(petri_json, 'import json, os\n'
              'print(json.dumps([os.listdir("/home"), os.stat("/home/user").st_dev == '
              'os.stat("/work").st_dev, os.stat("/home/user").st_ino == os.stat("/work").st_ino]))')
    assert out == [['user'], True, True], out


@pytest.mark.parametrize('path', ['/etc/shadow', '/root', '/var', '/run',
                                  '/sys', '/boot', '/etc/ssh', '/etc/sudoers'])
def test_host_path_is_absent_or_unreadable(petri_json, path):
    code = f'''
import json, os
try:
    if os.path.isdir("{path}"):
        res = os.listdir("{path}")
    else:
        res = open("{path}").read()
    res = "READ:" + repr(res)[:200]
except OSError as e:
    res = e.errno
print(json.dumps(res))
'''
    out = _py(petri_json, code)
    assert out in (errno.ENOENT, errno.EACCES, errno.EPERM), out


def test_etc_passwd_is_synthesized(petri_json):
    r = petri_json('cat /etc/passwd /etc/group', lang='bash')
    text = r['stdout']
    assert 'sandbox:x:1000:1000' in text, r.describe()
    host_users = {line.split(':')[0] for line in Path('/etc/passwd').read_text().splitlines()}
    inside_users = {line.split(':')[0] for line in text.splitlines()}
    assert inside_users <= {'root', 'sandbox', 'nobody', 'nogroup'}, inside_users - host_users


@pytest.mark.parametrize('path', ['/usr/petri-test-file', '/usr/lib/petri-test', '/newfile',
                                  '/etc/passwd', '/opt/petri/driver.py'])
def test_read_only_paths_are_not_writable(petri_json, path):
    code = f'''
import json
try:
    open("{path}", "a").close(); res = "WROTE"
except OSError as e:
    res = e.errno
print(json.dumps(res))
'''
    out = _py(petri_json, code)
    assert out != 'WROTE'
    if path.startswith('/usr/petri'):
        assert out == errno.EROFS, errno.errorcode.get(out)
    else:
        assert out in (errno.EROFS, errno.EACCES, errno.EPERM), errno.errorcode.get(out)


def test_usr_is_not_writable_from_bash(petri_json):
    r = petri_json('touch /usr/bin/evil; echo rc=$?', lang='bash')
    assert 'rc=1' in r['stdout'], r.describe()
    assert 'Read-only file system' in r['stderr'] or 'Permission denied' in r['stderr']
    assert not Path('/usr/bin/evil').exists()


def test_work_and_tmp_are_writable(petri_json):
    r = petri_json('echo a > /work/a && echo b > /tmp/b && echo c > /dev/shm/c && cat /work/a /tmp/b /dev/shm/c',
                   lang='bash')
    assert r['stdout'] == 'a\nb\nc\n', r.describe()


def test_proc_sys_is_not_writable(petri_json):
    code = '''
import json
res = {}
for p in ["/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/core_pattern"]:
    try:
        with open(p, "w") as f:
            f.write("x\\n")
        res[p] = "WROTE"
    except OSError as e:
        res[p] = e.errno
print(json.dumps(res))
'''
    out = _py(petri_json, code)
    assert 'WROTE' not in out.values(), out


def test_mount_table_does_not_mention_host_paths(petri_json, tmp_path):
    r = petri_json('cat /proc/self/mountinfo', lang='bash')
    text = r['stdout']
    assert ' /usr ' in text and ' /work ' in text, r.describe()
    work_dev = next(line.split()[2] for line in text.splitlines() if line.split()[4] == '/work')
    # /home/user is the sandbox's own /work again (same device, its root).
    lines = [line for line in text.splitlines()
             if not (line.split()[4] == '/home/user' and line.split()[3] == '/'
                     and line.split()[2] == work_dev)]
    text = '\n'.join(lines)
    for needle in (str(ROOT), ' /root', str(tmp_path), '/home', '/var/lib', 'docker', 'overlay'):
        assert needle not in text, f'{needle!r} in {text}'


# ---- network ------------------------------------------------------------------

def test_no_network_to_the_internet(petri_json):
    code = '''
import json, socket
res = {}
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("1.1.1.1", 53)); res["tcp"] = "CONNECTED"
except OSError as e:
    res["tcp"] = e.errno
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("1.1.1.1", 53)); res["udp"] = "SENT"
except OSError as e:
    res["udp"] = e.errno
try:
    socket.getaddrinfo("example.com", 80); res["dns"] = "RESOLVED"
except OSError as e:
    res["dns"] = str(e)
res["ifaces"] = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
print(json.dumps(res))
'''
    out = _py(petri_json, code, '--timeout', '15')
    assert out['tcp'] != 'CONNECTED' and out['udp'] != 'SENT' and out['dns'] != 'RESOLVED', out
    assert out['tcp'] in (errno.ENETUNREACH, errno.EPERM, errno.EACCES, errno.EHOSTUNREACH), out
    assert out['ifaces'] == ['lo'], out


def test_host_loopback_listener_is_unreachable(petri_json):
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(5)
    listener.settimeout(0)
    port = listener.getsockname()[1]
    try:
        code = f'''
import json, socket
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("127.0.0.1", {port})); s.sendall(b"escaped"); res = "CONNECTED"
except OSError as e:
    res = e.errno
print(json.dumps(res))
'''
        out = _py(petri_json, code, '--timeout', '15')
        assert out == errno.ECONNREFUSED, out     # the sandbox's own, empty loopback
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


# Netlink: only NETLINK_ROUTE, in the sandbox's own network namespace
# (tests/hostile/test_ordinary.py); these reach more of the host.
@pytest.mark.parametrize('family, kind, proto, name', [
    (16, socket.SOCK_RAW, 9, 'AF_NETLINK audit'),
    (16, socket.SOCK_DGRAM, 15, 'AF_NETLINK uevent'),
    (16, socket.SOCK_RAW, 6, 'AF_NETLINK xfrm'),
    (17, socket.SOCK_RAW, 0, 'AF_PACKET'),
    (socket.AF_INET, socket.SOCK_RAW, 0, 'AF_INET raw'),
], ids=['netlink-audit', 'netlink-uevent', 'netlink-xfrm', 'packet', 'raw-inet'])
def test_dangerous_socket_families_refused(petri_json, family, kind, proto, name):
    code = f'''
import json, socket
try:
    socket.socket({family}, {int(kind)}, {proto}); res = "CREATED"
except OSError as e:
    res = e.errno
print(json.dumps(res))
'''
    out = _py(petri_json, code)
    assert out != 'CREATED', name
    assert out in (errno.EPERM, errno.EACCES, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT,
                   errno.ENOSYS, errno.EINVAL), (name, errno.errorcode.get(out))


# ---- processes ------------------------------------------------------------------

def test_only_the_sandbox_processes_are_visible(petri_json):
    code = '''
import json, os
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
cmds = {}
for p in pids:
    try:
        cmds[p] = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace")
    except OSError:
        pass
print(json.dumps({"pids": pids, "me": os.getpid(), "cmds": cmds}))
'''
    out = _py(petri_json, code)
    assert 1 in out['pids']
    assert len(out['pids']) <= 4, out
    assert out['me'] <= 4
    assert os.getpid() not in out['pids'] or os.getpid() <= 4
    text = ' '.join(out['cmds'].values())
    assert 'pytest' not in text and 'process_api' not in text, out


def test_kill_cannot_reach_outside(petri_json):
    code = f'''
import json, os, errno
res = {{}}
for pid in ({os.getpid()}, {os.getppid()}, -1):
    try:
        os.kill(pid, 0); res[pid] = "SENT"
    except OSError as e:
        res[pid] = e.errno
print(json.dumps(res))
'''
    out = _py(petri_json, code)
    assert out[str(os.getpid())] != 'SENT' or os.getpid() <= 4
    assert out[str(os.getppid())] != 'SENT' or os.getppid() <= 4


SYSCALLS = {
    # name: (number, args)
    'unshare_newuser': (272, (0x10000000,)),
    'unshare_newns': (272, (0x00020000,)),
    'mount_tmpfs': (165, (b'none', b'/tmp', b'tmpfs', 0, None)),
    'ptrace_traceme': (101, (0, 0, 0, 0)),
    'ptrace_attach_pid1': (101, (16, 1, 0, 0)),
    'bpf': (321, (0, 0, 0)),
    'keyctl': (250, (0, 0, 0, 0, 0)),
    'add_key': (248, (b'user', b'petri', b'x', 1, 0xfffffffd)),
    'io_uring_setup': (425, (8, 'PARAMS')),
    'setns': (308, (0, 0)),
    'init_module': (175, (0, 0, b'')),
    'kexec_load': (246, (0, 0, 0, 0)),
    'perf_event_open': (298, (0, 0, -1, -1, 0)),
    'userfaultfd': (323, (0,)),
    'open_by_handle_at': (304, (0, 0, 0)),
    'chroot': (161, (b'/tmp',)),
    'pivot_root': (155, (b'/tmp', b'/tmp')),
    'reboot': (169, (0xfee1dead, 672274793, 0x4321fedc, 0)),
    'swapon': (167, (b'/work/x', 0)),
    'fsopen': (430, (b'tmpfs', 0)),
    'move_mount': (429, (0, b'', 0, b'', 0)),
}


@pytest.mark.parametrize('name', sorted(SYSCALLS))
def test_dangerous_syscall_refused(petri_json, name):
    nr, args = SYSCALLS[name]
    code = f'''
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
args = {args!r}
args = [ctypes.create_string_buffer(240) if a == "PARAMS" else
        (ctypes.c_long(a) if isinstance(a, int) else a) for a in args]
r = libc.syscall(ctypes.c_long({nr}), *args)
print(json.dumps([r, ctypes.get_errno()]))
'''
    ret, err = _py(petri_json, code)
    assert ret == -1, f'{name} returned {ret}'
    assert err in (errno.EPERM, errno.ENOSYS), f'{name}: errno {errno.errorcode.get(err, err)}'


def test_capabilities_and_seccomp_status(petri_json):
    r = petri_json('grep -E "^(Cap|NoNewPrivs|Seccomp)" /proc/self/status', lang='bash')
    fields = dict(line.split(':\t') for line in r['stdout'].splitlines())
    for cap in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'):
        assert fields[cap] == '0000000000000000', (cap, fields)
    assert fields['NoNewPrivs'] == '1'
    assert fields['Seccomp'] == '2'


def test_capabilities_of_the_python_runtime(petri_json):
    r = petri_json('print(open("/proc/self/status").read())')
    fields = dict(line.split(':\t', 1) for line in r['stdout'].splitlines() if ':\t' in line)
    assert fields['CapEff'] == '0000000000000000'
    assert fields['CapBnd'] == '0000000000000000'
    assert fields['NoNewPrivs'] == '1'
    assert fields['Seccomp'] == '2'


def test_uid_gid_and_groups(petri_json):
    r = petri_json('id; id -u; id -g; id -G', lang='bash')
    lines = r['stdout'].splitlines()
    assert lines[0].startswith('uid=1000(sandbox) gid=1000(sandbox)'), r.describe()
    assert lines[1:3] == ['1000', '1000']
    assert set(lines[3].split()) == {'1000'}        # no supplementary groups
    assert 'groups=1000(sandbox)' in lines[0] and ',' not in lines[0].split('groups=')[1]
    status = petri_json('grep -E "^(Uid|Gid|Groups)" /proc/self/status', lang='bash')['stdout']
    assert 'Uid:\t1000\t1000\t1000\t1000' in status
    assert 'Gid:\t1000\t1000\t1000\t1000' in status
    assert set(status.split('Groups:')[1].split()) <= {'1000'}


def test_setuid_to_root_fails(petri_json):
    code = '''
import json, os
res = {}
for name, fn in [("setuid", lambda: os.setuid(0)), ("setgid", lambda: os.setgid(0)),
                 ("setgroups", lambda: os.setgroups([0]))]:
    try:
        fn(); res[name] = "OK"
    except OSError as e:
        res[name] = e.errno
print(json.dumps(res))
'''
    out = _py(petri_json, code)
    assert 'OK' not in out.values(), out


def test_bash_child_has_only_fds_0_to_2(petri_json):
    r = petri_json('ls /proc/self/fd', lang='bash')
    fds = sorted(int(x) for x in r['stdout'].split())
    # 0-2 and the directory fd that ls itself opened to list /proc/self/fd
    assert fds[:3] == [0, 1, 2] and len(fds) == 4, fds


def test_c_child_has_only_fds_0_to_2(petri_json):
    code = r'''
#include <fcntl.h>
#include <stdio.h>
int main(void) {
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) != -1) printf("%d\n", fd);
    return 0;
}'''
    r = petri_json(code, lang='c')
    assert r['stdout'].split() == ['0', '1', '2'], r.describe()


def test_python_has_only_the_control_socket_beyond_fd_2(petri_json):
    code = '''
import json, os, socket, stat
fds = {}
for fd in range(3, 1024):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    fds[fd] = "socket" if stat.S_ISSOCK(st.st_mode) else oct(st.st_mode)
fam = socket.socket(fileno=os.dup(3)).family if 3 in fds else None
print(json.dumps({"fds": fds, "family": int(fam) if fam is not None else None}))
'''
    out = _py(petri_json, code)
    assert out['fds'] == {'3': 'socket'}, out
    assert out['family'] == socket.AF_UNIX


def test_hostname_is_petri(petri_json):
    r = petri_json('hostname; uname -n; cat /etc/hostname', lang='bash')
    assert r['stdout'] == 'petri\npetri\npetri\n', r.describe()


def test_sethostname_does_not_reach_the_host(petri_json):
    before = socket.gethostname()
    r = petri_json('hostname evil 2>/dev/null; hostname', lang='bash')
    assert r['stdout'].strip() in ('petri', 'evil'), r.describe()
    assert socket.gethostname() == before
