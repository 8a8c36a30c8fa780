# attack: read the mount table for host paths (the host's /root, /home, /var, /run, the checkout, the daemon's config)
# expect: only the sandbox's own mounts: / is a tmpfs, /usr etc. bound at the same name, /work again at /home/user; no other host path
# status: ok
import sys
bad = []
with open('/proc/self/mountinfo') as f:
    lines = f.read().splitlines()
work_dev = next((l.split()[2] for l in lines if l.split()[4] == '/work'), None)
for line in lines:
    fields = line.split()
    root, mnt = fields[3], fields[4]
    if mnt == '/home/user' and root == '/' and fields[2] == work_dev:
        continue        # the sandbox's own /work again, under E2B's name
    for p in (root, mnt):
        for host in ('/root', '/home', '/var', '/run', '/work/main', '/srv', '/mnt', '/boot', '/tmp/pytest'):
            if p == host or p.startswith(host + '/'):
                bad.append(line)
if lines[0].split()[4] != '/' or ' - tmpfs ' not in lines[0]:
    bad.append('the root is not a tmpfs: ' + lines[0])
if bad:
    print('ESCAPE: host paths in the mount table:', bad, file=sys.stderr)
else:
    print('CONTAINED:', len(lines), 'mounts, none a host path', file=sys.stderr)
