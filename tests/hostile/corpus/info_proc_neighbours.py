# attack: watch the host's shared tables and activity through /proc (cgroups' counts, pty/nr, file-nr, inode-nr, inode-state, dentry-state, aio-nr, stat, loadavg, meminfo, vmstat): each moves as neighbours start sessions, open ptys and files, fork and allocate; move them from here (ptys, files, processes, memory) and read them again
# expect: the table counts empty; stat, loadavg, meminfo, vmstat and cgroups the sandbox's own fixed view, the same before and after; os.cpu_count() and the memory limit in them; ps and top still work
# status: ok
import os, subprocess, sys

MASKED = ['sys/kernel/pty/nr', 'sys/fs/file-nr', 'sys/fs/inode-nr', 'sys/fs/inode-state',
          'sys/fs/dentry-state', 'sys/fs/aio-nr']
FAKED = ['stat', 'loadavg', 'meminfo', 'vmstat', 'cgroups']


def read(name):
    try:
        with open('/proc/' + name, 'rb') as f:
            return f.read()
    except OSError as e:
        return ('<%s>' % e.strerror).encode()


def snapshot():
    return {n: read(n) for n in MASKED + FAKED}


bad = []
before = snapshot()
# Move every host-wide count we can from here: ptys, open files, inodes,
# dentries, processes, memory.
held = [os.openpty() for _ in range(4)]
files = [open('/proc/self/status', 'rb') for _ in range(200)]
for i in range(200):
    open('/tmp/f%d' % i, 'w').close()
procs = [subprocess.Popen(['sleep', '5']) for _ in range(10)]
ballast = bytearray(64 << 20)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1
after = snapshot()
for p in procs:
    p.kill()
    p.wait()

for n in MASKED:
    if before[n] or after[n]:
        bad.append((n, before[n][:60], after[n][:60]))
for n in FAKED:
    if before[n] != after[n]:
        bad.append((n, 'moved', before[n][:200], after[n][:200]))
stat = after['stat'].decode()
for line in stat.splitlines():
    key, *vals = line.split()
    if key != 'btime' and key not in ('processes', 'procs_running') and any(v != '0' for v in vals):
        bad.append(('stat', line))
cpus = sum(1 for line in stat.splitlines() if line[:3] == 'cpu' and line[3:4].isdigit())
if after['loadavg'] != b'0.00 0.00 0.00 1/1 1\n':
    bad.append(('loadavg', after['loadavg']))
for line in after['cgroups'].decode().splitlines()[1:]:
    if line.split('\t')[2] != '1':
        bad.append(('cgroups', line))
mem = {k: int(v.split()[0]) for k, v in
       (line.split(':', 1) for line in after['meminfo'].decode().splitlines())}
total = mem['MemTotal']
if mem['MemFree'] != total or mem['MemAvailable'] != total:
    bad.append(('meminfo free fields', mem['MemFree'], mem['MemAvailable']))

broken = []
if not os.cpu_count() or os.cpu_count() != cpus:
    broken.append('os.cpu_count() is %r, /proc/stat lists %d' % (os.cpu_count(), cpus))
if not 0 < total <= 256 * 1024:
    broken.append('MemTotal %d kB is not the 256 MiB limit' % total)
for cmd in (['ps', 'aux'], ['top', '-bn1']):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or 'PID' not in r.stdout:
        broken.append('%s: %d %s' % (cmd[0], r.returncode, r.stderr[:200]))
if bad:
    print('ESCAPE: /proc moves with the host:', bad, file=sys.stderr)
elif broken:
    print('BROKEN:', broken, file=sys.stderr)
else:
    print('CONTAINED: /proc shows no host-wide count', file=sys.stderr)
