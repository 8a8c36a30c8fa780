# attack: read the host's files and directories: shadow, /root, /home, /var, /run, the checkout, ssh keys, the daemon's binary
# expect: none of them exists inside the sandbox (fresh tmpfs root; only /usr and a few /etc entries bound)
# status: ok
import os, sys
found = []
for p in ['/etc/shadow', '/etc/gshadow', '/etc/sudoers', '/etc/ssh', '/root', '/home', '/var', '/run',
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
