# attack: list every process visible in /proc, looking for the daemon, the template or other sessions
# expect: only the sandbox's own processes: pid 1 and its descendants (a handful), nothing else
# status: ok
import os, sys
procs = {}
for d in os.listdir('/proc'):
    if d.isdigit():
        try:
            with open('/proc/%s/cmdline' % d, 'rb') as f:
                procs[int(d)] = f.read().replace(b'\0', b' ')[:120]
        except OSError:
            pass
bad = []
def ppid(p):
    with open('/proc/%d/stat' % p) as f:
        s = f.read()
    return int(s[s.rindex(')') + 2:].split()[1])
for p in procs:
    try:
        q, seen = p, 0
        while q != 1 and seen < 100:
            q = ppid(q); seen += 1
        if q != 1:
            bad.append((p, 'not under pid 1'))
    except OSError:
        pass
if bad or len(procs) > 10:
    print('ESCAPE: foreign processes visible:', bad, len(procs), file=sys.stderr)
else:
    print('CONTAINED: only', sorted(procs), file=sys.stderr)
