# attack: learn the host's cgroup layout (and so petri's name and pid) from /proc/self/cgroup and /proc/1/cgroup
# expect: every hierarchy shows "/" (the sandbox's own cgroup namespace)
# status: ok
import sys
bad = []
for p in ('/proc/self/cgroup', '/proc/1/cgroup'):
    with open(p) as f:
        for line in f:
            if line.rstrip('\n').split(':', 2)[2] != '/':
                bad.append((p, line.strip()))
if bad:
    print('ESCAPE: host cgroup paths visible:', bad, file=sys.stderr)
else:
    print('CONTAINED: cgroup root only', file=sys.stderr)
