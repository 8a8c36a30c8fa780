# attack: watch the host's shared tables and activity through /proc (cgroups' counts, pty/nr, file-nr, inode-nr, inode-state, dentry-state, aio-nr, fs/, stat, loadavg, meminfo, vmstat) and its boot time (btime, uptime, the clocks): each count moves as neighbours start sessions, open ptys and files, fork and allocate, and the boot time is the same in every sandbox of a boot; move them from here (ptys, files, processes, memory) and read them again
# expect: the table counts empty; stat, loadavg, meminfo, vmstat and cgroups the sandbox's own fixed view, the same before and after; the clocks start with the sandbox; os.cpu_count(), os.getloadavg(), ps, top, free, vmstat, psutil-style parsing and numpy/pandas still work
# status: ok
# limits: timeout=60 memory=512
import os, subprocess, sys, time

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
    if not before[n].startswith(b'<') and (before[n] or after[n]):
        bad.append((n, before[n][:60], after[n][:60]))
if os.path.isdir('/proc/fs') and os.listdir('/proc/fs'):
    bad.append(('/proc/fs lists', os.listdir('/proc/fs')))
for n in FAKED:
    if before[n] != after[n]:
        bad.append((n, 'moved', before[n][:200], after[n][:200]))
    # ours to read only: a read-only mount, a file of another user
    if not os.statvfs('/proc/' + n).f_flag & os.ST_RDONLY or os.access('/proc/' + n, os.W_OK):
        bad.append((n, 'writable'))
    try:
        os.chmod('/proc/' + n, 0o666)
        bad.append((n, 'chmod worked'))
    except OSError:
        pass
stat = after['stat'].decode()
fields = {}
for line in stat.splitlines():
    key, *vals = line.split()
    fields[key] = vals
    if key not in ('btime', 'procs_running') and any(v != '0' for v in vals):
        bad.append(('stat', line))
cpus = sum(1 for k in fields if k[:3] == 'cpu' and k[3:].isdigit())
if after['loadavg'] != b'0.00 0.00 0.00 1/1 1\n':
    bad.append(('loadavg', after['loadavg']))
for line in after['cgroups'].decode().splitlines()[1:]:
    if line.split('\t')[2] != '1':
        bad.append(('cgroups', line))
# psutil's way of reading meminfo (psutil is not installed here)
mem = {k: int(v.split()[0]) for k, v in
       (line.split(':', 1) for line in after['meminfo'].decode().splitlines())}
total = mem['MemTotal']
if mem['MemFree'] != total or mem['MemAvailable'] != total:
    bad.append(('meminfo free fields', mem['MemFree'], mem['MemAvailable']))

# The clocks: the sandbox's own, consistent with each other and with what
# ps adds up (btime + a process's start).  The host's boot is checked from
# the host (test_findings.py::test_proc_does_not_move_with_a_neighbour).
uptime = float(read('uptime').split()[0])
boot = time.clock_gettime(time.CLOCK_BOOTTIME)
btime = int(fields['btime'][0])
if abs(uptime - boot) > 2 or time.monotonic() > boot + 2:
    bad.append(('clocks disagree', uptime, boot, time.monotonic()))
if abs(time.time() - boot - btime) > 2:
    bad.append(('btime is not the clocks\' start', btime, time.time() - boot))
with open('/proc/self/stat') as f:
    start = int(f.read().rsplit(')', 1)[1].split()[19]) / os.sysconf('SC_CLK_TCK')
if not 0 <= start <= boot:
    bad.append(('own start time', start, boot))

broken = []
if os.cpu_count() != cpus or cpus != len(os.sched_getaffinity(0)):
    broken.append('os.cpu_count() is %r, /proc/stat lists %d, affinity %d'
                  % (os.cpu_count(), cpus, len(os.sched_getaffinity(0))))
if not 0 < total <= 512 * 1024:
    broken.append('MemTotal %d kB is not the 512 MiB limit' % total)
try:
    if len(os.getloadavg()) != 3:
        broken.append('os.getloadavg() %r' % (os.getloadavg(),))
except OSError as e:
    broken.append('os.getloadavg(): %s' % e)
for cmd in (['ps', 'aux'], ['ps', '-eo', 'pid,lstart,etime,args'], ['top', '-bn1'],
            ['free'], ['vmstat'], ['uptime'], ['nproc']):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout:
        broken.append('%s: %d %s' % (' '.join(cmd), r.returncode, r.stderr[:200]))
r = subprocess.run(['nproc'], capture_output=True, text=True)
if r.stdout.strip() != str(cpus):
    broken.append('nproc says %r' % r.stdout)
import numpy, pandas
if int(pandas.Series(numpy.arange(4)).sum()) != 6:
    broken.append('numpy/pandas')
if bad:
    print('ESCAPE: /proc moves with the host:', bad, file=sys.stderr)
elif broken:
    print('BROKEN:', broken, file=sys.stderr)
else:
    print('CONTAINED: /proc shows no host-wide count; the clocks are the sandbox\'s', file=sys.stderr)
