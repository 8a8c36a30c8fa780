# attack: read the host's files and directories: shadow, /root, /home, /var, /run, the checkout, ssh keys, the daemon's binary
# expect: none of them exists inside the sandbox (fresh tmpfs root; only /usr and a few /etc entries bound)
# status: ok
import os, sys
found = []
# /home holds one entry, the workspace under E2B's name (/work again)
if os.path.isdir('/home') and (os.listdir('/home') != ['user'] or
                               os.stat('/home/user').st_ino != os.stat('/work').st_ino or
                               os.stat('/home/user').st_dev != os.stat('/work').st_dev):
    found.append('/home holds %s' % os.listdir('/home'))
for p in ['/etc/shadow', '/etc/gshadow', '/etc/sudoers', '/etc/ssh', '/root', '/var', '/run',
          '/srv', '/boot', '/mnt', '/media', '/sys', '/work/main', '/etc/machine-id',
          '/var/lib/dbus/machine-id', '/etc/hostname-host', '/lost+found', '/snap', '/opt/petri/petri',
          '/usr/local/bin/petri', '/etc/resolv.conf', '/etc/apt', '/etc/passwd-', '/etc/crontab',
          '/proc/1/root/etc/shadow', '/.dockerenv']:
    if os.path.lexists(p):
        found.append(p)
# the synthesized passwd holds no host account
with open('/etc/passwd') as f:
    users = [line.split(':')[0] for line in f if line.strip()]
if set(users) - {'root', 'sandbox', 'nobody'}:
    found.append('/etc/passwd lists host users %s' % users)
if 'host-marker' in ' '.join(os.listdir('/tmp')):
    found.append('the host /tmp')
if found:
    print('ESCAPE: host paths visible:', found, file=sys.stderr)
else:
    print('CONTAINED: no host path visible; / holds', sorted(os.listdir('/')), file=sys.stderr)
