# attack: write extended attributes a privileged process could: file capabilities (security.capability, v2 and v3 with root id 0), an LSM's label, trusted.* (overlayfs' opaque marks), on its own files; any attribute on the system's files, device nodes and /proc
# expect: every privileged namespace answers EPERM (no capability in any namespace), the system's files EROFS or EPERM, /proc EACCES/EPERM; user.* on its own file works, and gives nothing; security.selinux is the host's LSM's to decide, as for an unprivileged user outside (with no policy loaded, the owner may write it: it gives nothing either)
# status: ok
import errno, os, shutil, subprocess, sys
bad = []
own = '/tmp/own'
shutil.copy('/usr/bin/python3', own)
os.chmod(own, 0o755)


def attempt(path, name, value, allowed):
    try:
        os.setxattr(path, name, value, follow_symlinks=False)
        got = 'ok'
    except OSError as e:
        got = errno.errorcode.get(e.errno, str(e.errno))
    if got not in allowed:
        bad.append(f'{name} on {path}: {got}')


# VFS_CAP_REVISION_2 (permitted: everything) and _3 with rootid 0
cap2 = bytes.fromhex('01000002') + b'\xff' * 8 + b'\x00' * 8
cap3 = bytes.fromhex('01000003') + b'\xff' * 8 + b'\x00' * 8 + b'\x00' * 4
for name, value in [('security.capability', cap2), ('security.capability', cap3),
                    ('security.apparmor', b'unconfined'), ('security.ima', b'\x03'),
                    ('security.SMACK64EXEC', b'_'), ('security.x', b'1'),
                    ('trusted.overlay.opaque', b'y'), ('trusted.x', b'1')]:
    attempt(own, name, value, {'EPERM'})
attempt(own, 'security.selinux', b'system_u:object_r:bin_t:s0\x00', {'EPERM', 'EACCES', 'ok'})
for path in ('/usr/bin/python3', '/etc/passwd', '/', '/usr'):
    attempt(path, 'user.x', b'1', {'EROFS', 'EPERM', 'EACCES'})
for path in ('/dev/null', '/dev/zero', '/dev/pts/ptmx', '/proc/self/status', '/proc/1/environ',
             '/proc/sys/kernel/hostname', '/sys/kernel'):
    attempt(path, 'user.x', b'1', {'EPERM', 'EACCES', 'EROFS', 'ENOENT', 'ENOTSUP'})
attempt(own, 'user.x', b'1', {'ok'})
# the copy runs as it did: no capability came with any attribute
r = subprocess.run([own, '-c', 'import socket\n'
                    'socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'],
                   capture_output=True, text=True)
if r.returncode == 0:
    bad.append('the copy opened a raw socket')
if os.getxattr(own, 'user.x') != b'1':
    bad.append('user.x did not read back')
if bad:
    print('ESCAPE:', '; '.join(bad), file=sys.stderr)
else:
    print('CONTAINED: security.* and trusted.* refused, the system read-only', file=sys.stderr)
