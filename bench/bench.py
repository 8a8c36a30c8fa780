#!/usr/bin/python3
"""petri's benchmark suite: petri side by side with its peers, on this machine.

Run it with `make bench` (or `bench/deps && /usr/bin/python3 bench/bench.py`);
BENCH_QUICK=1 for a short run.  bench/README.md says what each benchmark
measures and how.  Standard library only (plus jupyter_client from Debian for
the Jupyter kernel peer).

It starts its own `petri serve` (a copy of the binary, temporary configs,
127.0.0.1:0), one warm (the template + pool) and one cold (warm = false),
stops both with SIGTERM at the end and checks that nothing of them is left.
Results: a table on stdout, bench/results/<date>-<host>[-quick].md and .json.
"""
import argparse
import collections
import contextlib
import datetime
import http.client
import json
import multiprocessing
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = '/usr/bin/python3'
QUICK = os.environ.get('BENCH_QUICK', '') not in ('', '0')

# Iteration counts: (full, quick).  A round runs every system a few times,
# in a shuffled order, so that load from other users of the machine falls
# on all of them alike.
SCALE = {
    'healthz': (300, 100),
    'spawn_probe': (40, 15),
    's1_rounds': (20, 8),
    's2_rounds': (10, 2),
    's3_rounds': (40, 15),         # x 10 round trips per system
    's1c_rounds': (10, 4),          # x 4 blocks (petri, bwrap; back to back, paced)
    's4_seconds': (10.0, 3.0),
    's5_sessions': (100, 100),
    's6_pairs': (7, 2),
    's7_trips': (300, 100),         # good session's round trips, idle and beside hogs
    'profile_seconds': (8.0, 4.0),
}


def n_of(key):
    return SCALE[key][1 if QUICK else 0]


# ------------------------------------------------------------------ stats

def percentile(values, p):
    v = sorted(values)
    if not v:
        return float('nan')
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summary(values):
    if not values:
        return {'n': 0}
    return {
        'n': len(values),
        'p50': percentile(values, 50),
        'p90': percentile(values, 90),
        'min': min(values),
        'max': max(values),
        'mean': statistics.fmean(values),
    }


def ms(x):
    """Seconds -> a short millisecond string."""
    if x is None or x != x:
        return '—'
    v = x * 1000.0
    if v < 10:
        return '%.2f ms' % v
    if v < 100:
        return '%.1f ms' % v
    return '%.0f ms' % v


def log(msg):
    print(msg, flush=True)


# ------------------------------------------------------------------ machine

def bwrap_base():
    """bwrap with every namespace of its own, no capabilities, /usr and the
    root's links to it (/bin, /lib...) read-only: what each peer run adds
    to (also bench/languages.py)."""
    a = ['bwrap', '--unshare-all', '--die-with-parent', '--new-session',
         '--cap-drop', 'ALL',
         '--ro-bind', '/usr', '/usr']
    for link in ('bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'):
        p = '/' + link
        if os.path.islink(p):
            a += ['--symlink', os.readlink(p), p]
        elif os.path.isdir(p):
            a += ['--ro-bind', p, p]
    return a


@contextlib.contextmanager
def small_serve(petri, prefix):
    """A `petri serve` of a bench's own (its default configuration, warm, at
    most 10 sessions, on a free loopback port), once its probe is done and
    its warm template up: (url, pid); SIGTERM when the bench is done (also
    bench/languages.py and bench/projects.py)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        cfg = os.path.join(tmp, 'petri.ini')
        with open(cfg, 'w') as f:
            f.write('[server]\nmax_sessions = 10\n[sandbox]\nuid_count = 64\n')
        proc = subprocess.Popen([petri, 'serve', '--listen', '127.0.0.1:0', '--config', cfg],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            url = re.search(r'(http://\S+)', proc.stdout.readline()).group(1)
            urllib.request.urlopen(url + '/v1/languages', timeout=60).read()  # the probe
            time.sleep(3)       # the warm template is up
            yield url, proc.pid
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


def read(path, default=''):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def loadavg():
    parts = read('/proc/loadavg', '0 0 0 0/0 0').split()
    return [float(parts[0]), float(parts[1]), float(parts[2])], parts[3]


def cpu_times():
    """(busy, total) jiffies of the whole machine."""
    fields = read('/proc/stat').splitlines()[0].split()[1:]
    v = [int(x) for x in fields]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    total = sum(v[:8])
    return total - idle, total


def cgroup_setup():
    v1, v2 = [], []
    for line in read('/proc/mounts').splitlines():
        dev, mnt, fstype, opts = line.split()[:4]
        if fstype == 'cgroup':
            ctrls = [o for o in opts.split(',') if o in (
                'memory', 'pids', 'cpu', 'cpuacct', 'cpuset', 'freezer', 'blkio',
                'devices', 'io') or o.startswith('name=')]
            v1.append('%s (%s)' % (mnt, ','.join(ctrls)))
        elif fstype == 'cgroup2':
            ctrl = read(os.path.join(mnt, 'cgroup.controllers')).strip() or 'no controllers'
            v2.append('%s (%s)' % (mnt, ctrl))
    parts = []
    if v1:
        parts.append('cgroup v1: ' + '; '.join(v1))
    if v2:
        parts.append('cgroup v2: ' + '; '.join(v2))
    return ' | '.join(parts) or 'no cgroup file system mounted'


def top_cpu(n=6):
    try:
        out = subprocess.run(['ps', '-eo', 'pcpu,comm', '--sort=-pcpu', '--no-headers'],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in out.splitlines()[:n]:
        p = line.split(None, 1)
        if len(p) == 2:
            rows.append('%s %s%%' % (p[1].strip(), p[0]))
    return rows


def version_of(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        out = (r.stdout or r.stderr).strip().splitlines()
        return out[0].strip() if out else '?'
    except (OSError, subprocess.SubprocessError):
        return 'not installed'


def machine_description(petri_bin):
    cpu = '?'
    for line in read('/proc/cpuinfo').splitlines():
        if line.startswith('model name'):
            cpu = line.split(':', 1)[1].strip()
            break
    mem_kb = 0
    for line in read('/proc/meminfo').splitlines():
        if line.startswith('MemTotal:'):
            mem_kb = int(line.split()[1])
    osname = '?'
    for line in read('/etc/os-release').splitlines():
        if line.startswith('PRETTY_NAME='):
            osname = line.split('=', 1)[1].strip('"')
    la, running = loadavg()
    try:
        head = subprocess.run(['git', '-C', REPO, 'rev-parse', '--short', 'HEAD'],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(['git', '-C', REPO, 'status', '--porcelain', '--', 'src'],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        rev = head + (' + uncommitted changes in src/' if dirty else '')
    except (OSError, subprocess.SubprocessError):
        rev = '?'
    virt = ''
    if 'hypervisor' in read('/proc/cpuinfo'):
        virt = ' (virtual machine)'
    try:
        import jupyter_client
        import ipykernel
        jup = 'jupyter_client %s, ipykernel %s' % (jupyter_client.__version__,
                                                   ipykernel.__version__)
    except ImportError:
        jup = 'not installed'
    return {
        'host': socket.gethostname(),
        'date': datetime.datetime.now().astimezone().isoformat(timespec='seconds'),
        'cpu': cpu + virt,
        'cores': os.cpu_count(),
        'cores_usable': len(os.sched_getaffinity(0)),
        'memory_gib': round(mem_kb / 1048576, 1),
        'kernel': platform.release(),
        'os': osname,
        'cgroups': cgroup_setup(),
        'loadavg_start': la,
        'runnable_start': running,
        'top_cpu_start': top_cpu(),
        'python': '%s (%s)' % (PY, version_of([PY, '--version'])),
        'petri': '%s at %s' % (petri_bin, rev),
        'bwrap': version_of(['bwrap', '--version']),
        'firejail': version_of(['firejail', '--version']),
        'runsc': version_of(['runsc', '--version']),
        'perf': version_of(['perf', '--version']),
        'jupyter': jup,
        'quick': QUICK,
    }


class LoadSampler(threading.Thread):
    """Samples the load average and the machine's CPU use twice a second,
    so that every section can say how busy the machine was meanwhile."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = []       # (t, load1, busy fraction since last sample)
        self.stop_ev = threading.Event()

    def run(self):
        last = cpu_times()
        while not self.stop_ev.wait(0.5):
            cur = cpu_times()
            dt = cur[1] - last[1]
            busy = (cur[0] - last[0]) / dt if dt > 0 else 0.0
            last = cur
            self.samples.append((time.monotonic(), loadavg()[0][0], busy))

    def window(self, t0, t1):
        s = [x for x in self.samples if t0 <= x[0] <= t1]
        if not s:
            la = loadavg()[0][0]
            return {'load1_mean': la, 'load1_max': la, 'cpu_busy_mean': None}
        return {
            'load1_mean': round(statistics.fmean(x[1] for x in s), 2),
            'load1_max': round(max(x[1] for x in s), 2),
            'cpu_busy_mean': round(statistics.fmean(x[2] for x in s), 3),
        }


def spin_probe():
    """A fixed amount of pure-Python work; its time shows how much CPU this
    process gets (other users of the machine slow it down)."""
    t = []
    for _ in range(5):
        t0 = time.perf_counter()
        s = 0
        for i in range(200000):
            s += i
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


FLOOR_CODE = r"""
import gc, os, resource, sys
import numpy, pandas, matplotlib, matplotlib.pyplot, scipy, scipy.stats
gc.freeze()
n = int(sys.argv[1])
def cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
t0 = cpu()
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print((cpu() - t0) / n)
"""


def fork_floor(n=100):
    """The floor of a fork design on this machine, now: CPU seconds of one
    fork + exit of a /usr/bin/python3 holding the data stack (numpy,
    pandas, matplotlib, scipy; gc.freeze()), parent and child, the mean of
    n; None if it cannot run."""
    try:
        out = subprocess.run(['/usr/bin/python3', '-c', FLOOR_CODE, str(n)],
                             capture_output=True, timeout=300, check=True)
        return float(out.stdout)
    except (subprocess.SubprocessError, ValueError, OSError):
        return None


# ------------------------------------------------------------------ HTTP

class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.conn = None
        self.reconnects = 0

    def _connect(self):
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(self, method, path, body=None):
        """(status, body bytes).  A connection the server closed while idle
        is reopened once (and counted)."""
        data = None if body is None else (body if isinstance(body, bytes)
                                          else json.dumps(body).encode())
        fresh = self.conn is None
        if fresh:
            self._connect()
        try:
            self.conn.request(method, path, body=data,
                              headers={'Content-Type': 'application/json'} if data else {})
            resp = self.conn.getresponse()
            return resp.status, resp.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.close()
            if fresh:
                raise
            self.reconnects += 1
            self._connect()
            self.conn.request(method, path, body=data,
                              headers={'Content-Type': 'application/json'} if data else {})
            resp = self.conn.getresponse()
            return resp.status, resp.read()

    def json(self, method, path, body=None):
        st, data = self.request(method, path, body)
        try:
            return st, json.loads(data) if data else None
        except ValueError:
            return st, {'_raw': data[:300].decode('utf-8', 'replace')}

    def close(self):
        if self.conn:
            self.conn.close()
        self.conn = None


# ------------------------------------------------------------------ petri serve

class BenchCgroup:
    """A cgroup of the bench's own, in the cpu and cpuacct hierarchies of
    cgroup v1 only, for one `petri serve`: as a service manager gives a
    service its own cgroup.  petri makes its sandboxes' cgroups under the
    cgroup it runs in, so (1) its sandboxes compete for CPU as one group,
    apart from the sandboxes of any other petri on the machine (which
    share the default /petri), and (2) cpuacct.usage is the CPU time of
    the server and all its sandboxes.  Other hierarchies (memory...) are
    left as they are.  Unavailable (None) elsewhere (cgroup v2, no root)."""

    def __init__(self, name):
        self.dirs = []
        self.acct = None
        own = {}
        for line in read('/proc/self/cgroup').splitlines():
            _, ctrls, path = line.split(':', 2)
            for ctl in ctrls.split(','):
                own[ctl] = path
        for line in read('/proc/mounts').splitlines():
            dev, mnt, fstype, opts = line.split()[:4]
            if fstype != 'cgroup':
                continue
            ctrls = [c for c in opts.split(',') if c in ('cpu', 'cpuacct')]
            if not ctrls:
                continue
            d = os.path.join(mnt + own.get(ctrls[0], '/'), name)
            os.mkdir(d)
            self.dirs.append(d)
            if 'cpuacct' in ctrls:
                self.acct = d
        if not self.acct:
            self.remove()
            raise OSError('no cgroup v1 cpuacct hierarchy')

    def usage_s(self):
        v = read(os.path.join(self.acct, 'cpuacct.usage')).strip()
        return int(v) / 1e9 if v.isdigit() else None

    def wrap(self, argv):
        """argv, run from a shell that first moves itself into the cgroup."""
        script = ''.join('echo $$ > %s/cgroup.procs && ' % d for d in self.dirs)
        return ['/bin/sh', '-c', script + 'exec "$@"', 'petri-bench'] + argv

    def remove(self):
        """rmdir bottom-up (only empty cgroups can go); what is left."""
        left = []
        for d in self.dirs:
            for root, dirs, _ in os.walk(d, topdown=False):
                try:
                    os.rmdir(root)
                except OSError:
                    left.append(root)
        return left


class PetriServer:
    """A `petri serve` of our own: temporary config, 127.0.0.1:0; extra:
    more of the config file (e.g. a [python] or [sandbox] section)."""

    def __init__(self, binary, workdir, name, warm, pool_size, extra=''):
        self.name = name
        self.warm = warm
        self.pool_size = pool_size if warm else 0
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir)
        self.config = os.path.join(self.dir, 'petri.ini')
        with open(self.config, 'w') as f:
            # pool_size ready in the main pool when idle, and as many for
            # the light template's one-shots (docs/configuration.md, "The
            # light template": the two share pool_max, the main one first).
            f.write('[server]\nlisten = 127.0.0.1:0\nmax_sessions = 150\n'
                    'max_executions = 32\nlog_level = warning\n'
                    '[sessions]\npool_min = %d\npool_max = %d\nwarm = %s\n'
                    # 150 sessions must fit the host's pid and pty tables
                    # (petri refuses to start otherwise): the benches' code
                    # runs a few processes and no terminal.
                    '[limits]\npids = 128\n[sandbox]\nptys = 8\n'
                    % (pool_size, 2 * pool_size, 'true' if warm else 'false'))
            f.write(extra)
        self.log_path = os.path.join(self.dir, 'serve.log')
        self.logf = open(self.log_path, 'w')
        argv = [binary, 'serve', '--config', self.config]
        self.cg = None
        try:
            self.cg = BenchCgroup('petri-bench-%d-%s' % (os.getpid(), name))
            argv = self.cg.wrap(argv)
        except OSError as e:
            self.cg_error = str(e)
        self.proc = subprocess.Popen(argv,
                                     stdout=subprocess.PIPE, stderr=self.logf,
                                     stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid
        self.stopped = False
        line = self._first_line(30)
        m = re.search(r'http://([0-9.]+):(\d+)', line or '')
        if not m:
            self.stop()
            raise RuntimeError('%s: petri serve did not say where it listens (%r); log: %s'
                               % (name, line, self.log_tail()))
        self.host, self.port = m.group(1), int(m.group(2))
        self.client = Client(self.host, self.port)

    def _first_line(self, timeout):
        import select
        fd = self.proc.stdout.fileno()
        buf = b''
        end = time.monotonic() + timeout
        while b'\n' not in buf and time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                buf += chunk
        return buf.decode('utf-8', 'replace').strip()

    def log_tail(self, n=2000):
        return read(self.log_path)[-n:]

    def metrics(self):
        st, data = self.client.request('GET', '/metrics')
        out = {}
        for line in data.decode().splitlines():
            if line.startswith('#') or not line.strip():
                continue
            k, _, v = line.rpartition(' ')
            try:
                out[k] = float(v)
            except ValueError:
                pass
        return out

    def wait_pool(self, timeout=120.0, want=None):
        """Until the pool holds `want` (default pool_size) ready sandboxes,
        and the light template's (if any) what it aims at."""
        want = self.pool_size if want is None else want
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = self.metrics()
            if m.get('petri_pool_ready', 0) >= want and \
                    m.get('petri_light_pool_ready', 0) >= m.get('petri_light_pool_target', 0):
                return True
            time.sleep(0.1)
        return False

    def cgroups(self):
        return petri_cgroups(self.pid)

    def expected_cgroups(self):
        """The sandbox cgroups an idle server has: its templates' and its
        pools' (the light template's too, docs/configuration.md)."""
        m = self.metrics()
        _, health = self.client.json('GET', '/healthz')
        light = (health or {}).get('light', 'off') != 'off'
        return int(m.get('petri_pool_ready', 0) + m.get('petri_light_pool_ready', 0)) + 1 + light

    def idle_cpu_rate(self, seconds=2.0):
        """CPU seconds per second this server spends with nothing to do,
        once its pool is full: what a run's cpu_s() delta is corrected by."""
        self.wait_pool(30)
        time.sleep(0.5)
        u0, t0 = self.cpu_s(), time.monotonic()
        time.sleep(seconds)
        return (self.cpu_s() - u0) / (time.monotonic() - t0)

    def settled_cpu_s(self):
        """(cpu_s(), monotonic time) once the pool has refilled what the
        run took (the refill is part of what a one-shot costs) and the last
        sandbox is torn down."""
        self.wait_pool(30)
        time.sleep(0.3)
        return self.cpu_s(), time.monotonic()

    def pids(self):
        """Every process in this server's cgroup (its own and its
        sandboxes', which petri makes below it)."""
        out = set()
        if self.cg:
            for root, _, _ in os.walk(self.cg.acct):
                out.update(int(x) for x in read(os.path.join(root, 'cgroup.procs')).split())
        return out or {self.pid}

    def stop(self):
        """SIGTERM, wait; then check that nothing of this server is left."""
        if self.stopped:
            return {}
        self.stopped = True
        report = {'exit': None, 'left_processes': [], 'left_cgroups': []}
        if getattr(self, 'client', None):
            self.client.close()
        try:
            self.proc.send_signal(signal.SIGTERM)
            report['exit'] = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            report['exit'] = 'did not stop within 60 s of SIGTERM: killed'
            self.proc.kill()
            self.proc.wait()
        except ProcessLookupError:
            report['exit'] = self.proc.wait()
        self.logf.close()
        if self.proc.stdout:
            self.proc.stdout.close()
        time.sleep(0.3)
        left = processes_in_cgroups_of(self.pid)
        if left:
            report['left_processes'] = sorted(left)
            for p in left:          # ours: started by this server, which is gone
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        report['left_cgroups'] = sorted(petri_cgroups(self.pid))
        if self.cg:
            left = self.cg.remove()
            if left:
                report['left_cgroups'] += left
        return report

    def health(self):
        """The server process's own RSS, open fds and threads."""
        st = read('/proc/%d/status' % self.pid)
        rss = re.search(r'VmRSS:\s+(\d+)', st)
        thr = re.search(r'Threads:\s+(\d+)', st)
        try:
            fds = len(os.listdir('/proc/%d/fd' % self.pid))
        except OSError:
            fds = None
        return {'rss_kb': int(rss.group(1)) if rss else None, 'fds': fds,
                'threads': int(thr.group(1)) if thr else None,
                'sandbox_cgroups': len(self.cgroups())}

    def cpu_s(self):
        """CPU time of this server and all its sandboxes so far (None: unknown)."""
        return self.cg.usage_s() if self.cg else None


def petri_cgroups(server_pid):
    """{cgroup name: {'pids', 'paths'}} for the sandboxes of one petri
    process: cgroups named p<pid>-<starttime>-<n> (docs/configuration.md),
    in every hierarchy under /sys/fs/cgroup (v1: one per controller)."""
    prefix = 'p%d-' % server_pid
    out = {}
    base = '/sys/fs/cgroup'
    for root, dirs, _ in os.walk(base):
        depth = root[len(base):].count('/')
        keep = []
        for d in dirs:
            if d.startswith(prefix):
                path = os.path.join(root, d)
                e = out.setdefault(d, {'pids': set(), 'paths': set()})
                e['paths'].add(path)
                e['pids'].update(int(x) for x in read(os.path.join(path, 'cgroup.procs')).split())
            elif depth < 5 and not re.match(r'p\d+-\d+-\d+$', d):
                keep.append(d)
        dirs[:] = keep
    return out


def processes_in_cgroups_of(server_pid):
    """Live processes whose cgroup is one of this petri's sandbox cgroups."""
    needle = '/p%d-' % server_pid
    pids = set()
    for d in os.listdir('/proc'):
        if d.isdigit() and needle in read('/proc/%s/cgroup' % d):
            pids.add(int(d))
    return pids


def smaps(pid):
    out = {}
    for line in read('/proc/%d/smaps_rollup' % pid).splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            out[parts[0].rstrip(':')] = int(parts[1]) * 1024
    if not out:
        return None
    out['USS'] = out.get('Private_Clean', 0) + out.get('Private_Dirty', 0)
    return out


def proc_uid(pid):
    for line in read('/proc/%d/status' % pid).splitlines():
        if line.startswith('Uid:'):
            return int(line.split()[1])
    return -1


# ------------------------------------------------------------------ workloads

PRINT_CODE = 'print(1+1)'

# The same analysis for everyone: a DataFrame, its mean, a line chart as PNG.
PANDAS_CODE = '''\
import pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame({"x": range(200), "y": [(i * 37) % 101 for i in range(200)]})
print(df["y"].mean())
fig, ax = plt.subplots()
df.plot(x="x", y="y", ax=ax)
'''
PANDAS_MEAN = '%r' % (sum((i * 37) % 101 for i in range(200)) / 200)
# petri sends every open figure as image/png (savefig(format='png',
# bbox_inches='tight')); the peers encode the same PNG themselves.
PANDAS_PEER_TAIL = '''\
import io
buf = io.BytesIO()
fig.savefig(buf, format="png", bbox_inches="tight")
print("png", len(buf.getvalue()))
'''

LOOP_CODE = '''\
import json, time
t0 = time.perf_counter(); c0 = time.process_time()
s = 0
for i in range(%d):
    s += i * i %% 7
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "s": s}))
'''

MATMUL_CODE = '''\
import json, time
import numpy as np
a = np.random.default_rng(1).random((%d, %d))
t0 = time.perf_counter(); c0 = time.process_time()
for _ in range(%d):
    b = a @ a
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "threads": __import__("threading").active_count()}))
'''


def runsc_cgroups():
    import glob
    return glob.glob('/sys/fs/cgroup/*/runsc-*') + glob.glob('/sys/fs/cgroup/runsc-*')


class Peers:
    """The command-line peers: each runs `python3 -c CODE` in its sandbox."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.mpl = os.path.join(workdir, 'mplconfig')
        self.home = os.path.join(workdir, 'home')
        os.makedirs(self.mpl)
        os.makedirs(self.home)
        self.env = {
            'PATH': '/usr/bin:/bin', 'HOME': self.home, 'LANG': 'C.UTF-8',
            'MPLBACKEND': 'Agg', 'MPLCONFIGDIR': self.mpl, 'TMPDIR': '/tmp',
        }
        # matplotlib's font cache, built once, so that no peer pays for it.
        subprocess.run([PY, '-c', 'import matplotlib.pyplot'], env=self.env, check=True,
                       capture_output=True, timeout=300)
        self.runsc_tmp = os.path.join(workdir, 'runsc-tmp')
        self.runsc_root = os.path.join(workdir, 'runsc-root')
        os.makedirs(self.runsc_tmp)
        os.makedirs(self.runsc_root)
        self.systems = {}       # name -> argv prefix (code appended) or None
        self.notes = {}
        self.unavailable = {}   # name -> reason

    def bwrap_argv(self):
        a = bwrap_base()
        # The same few host files as petri's synthesized /etc
        # (src/jail/mounts.c): numpy finds its BLAS through
        # /etc/alternatives, Debian's matplotlib reads /etc/matplotlibrc.
        etc = ['/etc/ld.so.cache', '/etc/ld.so.conf', '/etc/ld.so.conf.d',
               '/etc/alternatives', '/etc/matplotlibrc', '/etc/fonts', '/etc/mime.types',
               '/etc/localtime']
        etc += sorted('/etc/' + d for d in os.listdir('/etc') if d.startswith('python3'))
        for f in etc:
            if os.path.exists(f):
                a += ['--ro-bind', f, f]
        a += ['--tmpfs', '/tmp', '--proc', '/proc', '--dev', '/dev',
              '--bind', self.mpl, self.mpl, '--chdir', '/tmp', '--clearenv']
        for k, v in self.env.items():
            a += ['--setenv', k, v if k != 'HOME' else '/tmp']
        return a + [PY, '-c']

    def probe(self, name, argv, timeout=10):
        """Run print(1+1) once; None if it works, else why not."""
        before = set(runsc_cgroups())
        try:
            p = subprocess.Popen(argv + [PRINT_CODE], env=self.env_for(name),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            return str(e)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Our own child and whatever it started in its session.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.communicate()
            # A killed `runsc do` leaves its sandbox (in a session of its
            # own) and its cgroups behind: end them, they are ours.
            end = time.monotonic() + 15
            while time.monotonic() < end:
                left = set(runsc_cgroups()) - before
                for d in left:
                    for pid in read(os.path.join(d, 'cgroup.procs')).split():
                        try:
                            os.kill(int(pid), signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    try:
                        os.rmdir(d)
                    except OSError:
                        pass
                if not set(runsc_cgroups()) - before and time.monotonic() > end - 12:
                    break
                time.sleep(0.5)
            return 'no answer within %d s (hangs)' % timeout
        if p.returncode != 0 or out.strip() != b'2':
            lines = (err or b'').decode('utf-8', 'replace').strip().splitlines()
            return 'exit %d: %s' % (p.returncode, lines[-1][:160] if lines else 'no output')
        return None

    def env_for(self, name):
        if name.startswith('runsc'):
            return dict(self.env, TMPDIR=self.runsc_tmp)
        return self.env

    def discover(self):
        cands = [('bwrap+python3', self.bwrap_argv()),
                 ('firejail+python3', ['firejail', '--quiet', '--noprofile', '--net=none',
                                       '--private', PY, '-c'])]
        default_platform = None
        flags = ''
        if shutil.which('runsc'):
            r = subprocess.run(['runsc', 'flags'], capture_output=True, text=True, timeout=30)
            flags = r.stdout + r.stderr
        m = re.search(r'-platform string\s+[^\n]*\n?[^\n]*\(default "(\w+)"\)', flags)
        if m:
            default_platform = m.group(1)
        base = ['runsc', '--root', self.runsc_root, '--rootless', '--network=none']
        for plat in ('ptrace', 'systrap', 'kvm'):
            argv = base + ['--platform=' + plat, 'do', PY, '-c']
            name = 'runsc-%s+python3' % plat
            cands.append((name, argv))
            self.notes[name] = 'runsc --rootless --network=none --platform=%s do%s' % (
                plat, ' (the default platform of this runsc)' if plat == default_platform else '')
        cands.append(('bare python3', [PY, '-c']))
        for name, argv in cands:
            if not shutil.which(argv[0]):
                self.unavailable[name] = '%s is not installed (bench/deps)' % argv[0]
                continue
            why = self.probe(name, argv)
            if why:
                self.unavailable[name] = why
            else:
                self.systems[name] = argv
        self.notes['bwrap+python3'] = ('bwrap --unshare-all --die-with-parent --new-session '
                                       '--cap-drop ALL, ro /usr + lib links + the host files of '
                                       'petri\'s /etc (ld.so, alternatives, matplotlibrc, fonts, '
                                       'python3), tmpfs /tmp, proc, dev, clean env '
                                       '(no seccomp, no cgroup limits)')
        self.notes['firejail+python3'] = 'firejail --quiet --noprofile --net=none --private'
        self.notes['bare python3'] = 'no sandbox'

    def run(self, name, code):
        """(seconds, stdout, returncode)."""
        argv = self.systems[name] + [code]
        env = self.env_for(name)
        t0 = time.perf_counter()
        r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        dt = time.perf_counter() - t0
        return dt, r.stdout.decode('utf-8', 'replace'), r.returncode, r.stderr


# ------------------------------------------------------------------ the suite

class Suite:
    def __init__(self, args):
        self.args = args
        self.results = {'sections': {}, 'targets': [], 'warnings': [], 'issues': []}
        self.rows = []          # (section, system, summary, extra)
        self.servers = []
        self.kernel = None
        self.workdir = tempfile.mkdtemp(prefix='petri-bench-')
        self.sampler = LoadSampler()
        self.floor = None               # fork_floor(), measured in 1b
        self.last_section = None
        self.last_duration_ms = None

    # -- helpers

    def warn(self, msg):
        log('WARNING: ' + msg)
        self.results['warnings'].append(msg)

    def issue(self, msg):
        log('PETRI ISSUE: ' + msg)
        self.results['issues'].append(msg)

    def section(self, key, title):
        log('\n== %s' % title)
        t0 = time.monotonic()
        probe = spin_probe()
        return {'key': key, 'title': title, 't0': t0, 'probe0': probe}

    def end_section(self, sec, data):
        t1 = time.monotonic()
        probe = spin_probe()
        self.best_probe = min(self.best_probe, sec['probe0'], probe)
        data['load'] = self.sampler.window(sec['t0'], t1)
        data['seconds'] = round(t1 - sec['t0'], 1)
        data['cpu_probe_slowdown'] = round(statistics.fmean([sec['probe0'], probe])
                                           / self.best_probe, 2)
        data['title'] = sec['title']
        self.results['sections'][sec['key']] = data
        self.last_section = sec['key']
        ld = data['load']
        log('   (%.0f s; load avg %.1f mean / %.1f max; machine CPU busy %s; '
            'spin probe x%.2f slower than the best seen)'
            % (data['seconds'], ld['load1_mean'], ld['load1_max'],
               '%.0f%%' % (100 * ld['cpu_busy_mean']) if ld['cpu_busy_mean'] is not None
               else '?', data['cpu_probe_slowdown']))

    def target(self, name, goal, measured, ok, note=''):
        """A goal, judged on the section that just ended (its load is kept
        beside the verdict)."""
        res = 'PASS' if ok else 'MISS'
        if ok is None:
            res = 'n/a'
        if note:
            res += ' (%s)' % note
        sec = self.results['sections'].get(self.last_section, {})
        self.results['targets'].append({'target': name, 'goal': goal, 'measured': measured,
                                        'result': res, 'load': sec.get('load', {}),
                                        'section': self.last_section})

    def petri_oneshot(self, srv, code, check):
        t0 = time.perf_counter()
        st, data = srv.client.request('POST', '/v1/execute', {'code': code})
        dt = time.perf_counter() - t0
        ok = False
        why = None
        if st == 200:
            r = json.loads(data)
            ok, why = check(r)
            if self is not None and isinstance(r.get('duration_ms'), int):
                self.last_duration_ms = r['duration_ms']
        else:
            why = 'HTTP %d %s' % (st, data[:200])
        return dt, ok, why

    # -- setup

    def setup(self):
        self.sampler.start()
        self.best_probe = spin_probe()
        petri_src = os.path.abspath(self.args.petri)
        if not os.access(petri_src, os.X_OK):
            raise SystemExit('bench: %s is not an executable (run make first)' % petri_src)
        # A copy: others may rebuild build/petri while we measure.
        self.petri = os.path.join(self.workdir, 'petri')
        shutil.copy2(petri_src, self.petri)
        self.machine = machine_description(petri_src)
        self.results['machine'] = self.machine
        m = self.machine
        log('petri benchmark%s — %s' % (' (BENCH_QUICK)' if QUICK else '', m['date']))
        log('machine: %s, %d cores, %.1f GiB, kernel %s, %s' % (
            m['cpu'], m['cores'], m['memory_gib'], m['kernel'], m['os']))
        log('cgroups: %s' % m['cgroups'])
        log('load average at start: %s (runnable/total %s); busiest: %s' % (
            ' '.join('%.2f' % x for x in m['loadavg_start']), m['runnable_start'],
            ', '.join(m['top_cpu_start'])))
        if m['loadavg_start'][0] > 0.5 * m['cores']:
            self.warn('the load average at start (%.2f on %d cores) is high: other work '
                      'shares this machine, so timings are noisy; runs are interleaved '
                      'and repeated, and medians are reported'
                      % (m['loadavg_start'][0], m['cores']))
            self.loaded = True
        else:
            self.loaded = False
        log('starting petri serve (warm, pool 16) and petri serve (cold, warm = false)...')
        self.warm = PetriServer(self.petri, self.workdir, 'warm', True, 16)
        self.servers.append(self.warm)
        self.cold = PetriServer(self.petri, self.workdir, 'cold', False, 0)
        self.servers.append(self.cold)
        if not self.warm.wait_pool(120):
            self.warn('the warm pool did not fill within 120 s: %s' % self.warm.log_tail(500))
        time.sleep(0.5)
        self.health0 = {s.name: s.health() for s in self.servers}
        log('petri warm at %s:%d (pid %d), cold at %s:%d (pid %d)' % (
            self.warm.host, self.warm.port, self.warm.pid,
            self.cold.host, self.cold.port, self.cold.pid))
        self.peers = Peers(self.workdir)
        self.peers.discover()
        for name, why in self.peers.unavailable.items():
            log('peer %s: cannot run here: %s' % (name, why))

    # -- 0: client overhead

    def client_overhead(self):
        sec = self.section('client', 'client overhead: GET /healthz (keep-alive) and '
                           'spawning /bin/true from the bench client')
        n = n_of('healthz') * (2 if self.loaded else 1)
        c = self.warm.client
        for _ in range(10):
            c.request('GET', '/healthz')
        t = []
        for _ in range(n):
            t0 = time.perf_counter()
            st, _ = c.request('GET', '/healthz')
            t.append(time.perf_counter() - t0)
            assert st == 200
        sp = []
        for _ in range(n_of('spawn_probe')):
            t0 = time.perf_counter()
            subprocess.run(['/bin/true'], stdin=subprocess.DEVNULL)
            sp.append(time.perf_counter() - t0)
        data = {'healthz': summary(t), 'spawn_true': summary(sp)}
        log('   GET /healthz p50 %s p90 %s; subprocess /bin/true p50 %s p90 %s' % (
            ms(data['healthz']['p50']), ms(data['healthz']['p90']),
            ms(data['spawn_true']['p50']), ms(data['spawn_true']['p90'])))
        self.end_section(sec, data)

    # -- 1 and 2: one-shot runs against the peers

    def oneshot_section(self, key, title, code, peer_code, check_petri, check_peer,
                        rounds, per_round):
        sec = self.section(key, title)
        systems = ['petri (warm)', 'petri (cold)'] + list(self.peers.systems)
        times = {s: [] for s in systems}
        exec_ms = collections.defaultdict(list)     # petri's own duration_ms
        fails = collections.Counter()
        why_failed = {}
        srv = {'petri (warm)': self.warm, 'petri (cold)': self.cold}

        def once(s, record=True):
            if s in srv:
                self.last_duration_ms = None
                dt, ok, why = self.petri_oneshot(srv[s], code, check_petri)
                if record and ok and self.last_duration_ms is not None:
                    exec_ms[s].append(self.last_duration_ms / 1000.0)
                if s == 'petri (warm)':
                    # Every run starts from a full pool, as on a server that
                    # is not saturated (4. measures the refill), and the
                    # refill does not overlap the next system's run.
                    self.warm.wait_pool(10)
            else:
                dt, out, rc, err = self.peers.run(s, peer_code)
                ok = rc == 0 and check_peer(out)
                why = None if ok else 'exit %d: %s' % (
                    rc, (err.decode('utf-8', 'replace').strip().splitlines() or ['?'])[-1][:200])
            if not record:
                return
            if ok:
                times[s].append(dt)
            else:
                fails[s] += 1
                why_failed.setdefault(s, why)

        for s in systems:             # warm-up, not counted
            once(s, record=False)
        for r in range(rounds):
            order = systems[:]
            random.shuffle(order)
            for s in order:
                for _ in range(per_round(s)):
                    once(s)
        data = {'systems': {}}
        for s in systems:
            sm = summary(times[s])
            sm['failed'] = fails[s]
            if s in why_failed:
                sm['first_failure'] = why_failed[s]
            if exec_ms.get(s):
                # The execution itself, as petri measured it; the rest of
                # the round trip is HTTP, taking a sandbox, results, teardown.
                sm['petri_duration'] = summary(exec_ms[s])
            data['systems'][s] = sm
            log('   %-22s n=%-4d fail=%-3d p50 %-10s p90 %s%s' % (
                s, sm['n'], fails[s], ms(sm.get('p50')), ms(sm.get('p90')),
                ' (first failure: %s)' % why_failed[s] if s in why_failed else
                ' (of which the execution, by petri\'s duration_ms: p50 %s)' % ms(
                    sm['petri_duration']['p50']) if 'petri_duration' in sm else ''))
            if fails[s] and s.startswith('petri'):
                self.issue('%s: %d of %d one-shot runs of %s failed; first: %s' % (
                    s, fails[s], fails[s] + sm['n'], key, why_failed[s]))
        data['unavailable'] = dict(self.peers.unavailable)
        data['notes'] = dict(self.peers.notes)
        self.end_section(sec, data)
        return data

    def oneshot_print(self):
        def per_round(s):
            if s == 'petri (warm)':
                return 10
            if s.startswith('runsc'):
                return 1 if QUICK else 2
            return 2 if s == 'petri (cold)' else 3

        def check_petri(r):
            ok = r.get('status') == 'ok' and r.get('stdout') == '2\n'
            return ok, None if ok else json.dumps(r)[:300]

        d = self.oneshot_section('oneshot_print', '1. one-shot print(1+1)', PRINT_CODE,
                                 PRINT_CODE, check_petri, lambda out: out.strip() == '2',
                                 n_of('s1_rounds'), per_round)
        warm = d['systems']['petri (warm)'].get('p50')
        # Against bwrap: 1c, one client as an agent sends them.
        self.target('one-shot print(1+1), p50 (pool refilled between runs)', '≤ 3 ms',
                    ms(warm), warm is not None and warm <= 0.003)

    def oneshot_cpu(self):
        """CPU time that one one-shot costs petri: the server's threads and
        every process of the sandbox, the pool's refill (a fork of the
        template) included; from the cpuacct cgroup the bench runs each
        server in.  Unlike wall times, this hardly depends on other load."""
        sec = self.section('oneshot_cpu', '1b. CPU time per one-shot print(1+1) '
                           '(server + sandbox + pool refill)')
        data = {'systems': {}, 'fork_floor_s': []}
        data['fork_floor_s'].append(fork_floor())
        for srv, label, n in ((self.warm, 'petri (warm)', 60 if not QUICK else 20),
                              (self.cold, 'petri (cold)', 12 if not QUICK else 5)):
            if srv.cpu_s() is None:
                data['systems'][label] = {'error': getattr(srv, 'cg_error', 'no cpuacct')}
                continue
            idle_rate = srv.idle_cpu_rate()
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            u0, t0 = srv.cpu_s(), time.monotonic()
            ok = 0
            for _ in range(n):
                dt, good, why = self.petri_oneshot(srv, PRINT_CODE,
                                                   lambda r: (r.get('status') == 'ok', None))
                ok += good
                if srv.warm:
                    srv.wait_pool(10)
            u1, t1 = srv.settled_cpu_s()
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            per = (u1 - u0 - idle_rate * (t1 - t0)) / n
            cli = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n
            data['systems'][label] = {'n': n, 'ok': ok, 'cpu_per_oneshot_s': per,
                                      'idle_cpu_rate': idle_rate,
                                      'client_cpu_per_request_s': cli}
            log('   %-14s %d runs: %s CPU per one-shot (server + sandbox + refill); idle '
                'server %.1f ms CPU/s; bench client %s CPU per request' % (
                    label, n, ms(per), idle_rate * 1000, ms(cli)))
        data['fork_floor_s'].append(fork_floor())
        floors = [f for f in data['fork_floor_s'] if f]
        floor = self.floor = statistics.median(floors) if floors else None
        if floor:
            log('   the fork floor (fork + exit of python3 with the data stack, before and '
                'after): %s CPU each' % ' and '.join(ms(f) for f in floors))
        w = data['systems'].get('petri (warm)', {}).get('cpu_per_oneshot_s')
        if w:
            data['idle_machine_bound_per_s'] = os.cpu_count() / w
            log('   -> on %d idle cores petri alone could run at most ~%.0f one-shots/s '
                '(its CPU only: no client, no other load)' % (os.cpu_count(),
                                                              data['idle_machine_bound_per_s']))
        self.end_section(sec, data)
        self.target('CPU per warm one-shot (server + sandbox + pool refill)', '≤ 8 ms',
                    ms(w) if w else 'no cpuacct cgroup', w <= 0.008 if w else None)
        if w and floor:
            self.target('CPU per warm one-shot vs the fork floor beside it', '≤ 2 ×',
                        '%.2f × (%s vs %s)' % (w / floor, ms(w), ms(floor)), w <= 2 * floor)

    def oneshot_one_client(self):
        """One client sending one-shots one after another, as an agent does:
        back to back (the next request as soon as the answer is in, so the
        pool's refill overlaps the next one-shots) and 100 ms apart (an
        agent's pace: the refill is done before the next request), petri
        (warm) beside bwrap+python3 in the same shuffled rounds.  Beside the
        wall times: petri's CPU per one-shot, the server cgroup's cpuacct
        delta over each block of petri runs until its pool is full again,
        less the idle rate."""
        sec = self.section('oneshot_client', '1c. one client: one-shot print(1+1) back to '
                           'back and 100 ms apart, petri (warm) vs bwrap+python3')
        srv = self.warm
        modes = (('back to back', 0.0), ('100 ms apart', 0.1))
        systems = ['petri (warm)'] + (['bwrap+python3'] if 'bwrap+python3' in
                                      self.peers.systems else [])
        # One-shots per block: enough petri ones back to back to drain the
        # pool (16) and see the refill compete with the one-shots.
        block = {('petri (warm)', 0.0): 20 if QUICK else 30,
                 ('petri (warm)', 0.1): 5 if QUICK else 10,
                 ('bwrap+python3', 0.0): 3 if QUICK else 5,
                 ('bwrap+python3', 0.1): 2 if QUICK else 3}
        idle = srv.idle_cpu_rate() if srv.cpu_s() is not None else None
        times = collections.defaultdict(list)
        exec_s = collections.defaultdict(list)
        fails = collections.Counter()
        why_failed = {}
        cpu = collections.Counter()
        cpu_n = collections.Counter()

        def check(r):
            ok = r.get('status') == 'ok' and r.get('stdout') == '2\n'
            return ok, None if ok else json.dumps(r)[:300]

        def run_block(system, mode, pause, n, record=True):
            u0, t0 = srv.cpu_s(), time.monotonic()
            for _ in range(n):
                if pause:
                    time.sleep(pause)
                if system == 'petri (warm)':
                    self.last_duration_ms = None
                    dt, ok, why = self.petri_oneshot(srv, PRINT_CODE, check)
                    if ok and record and self.last_duration_ms is not None:
                        exec_s[mode].append(self.last_duration_ms / 1000.0)
                else:
                    dt, out, rc, err = self.peers.run(system, PRINT_CODE)
                    ok = rc == 0 and out.strip() == '2'
                    why = None if ok else 'exit %d: %s' % (rc, err.decode('utf-8', 'replace')[-200:])
                if not record:
                    continue
                if ok:
                    times[(system, mode)].append(dt)
                else:
                    fails[(system, mode)] += 1
                    why_failed.setdefault((system, mode), why)
            if system == 'petri (warm)':
                u1, t1 = srv.settled_cpu_s()
                if record and idle is not None:
                    cpu[mode] += u1 - u0 - idle * (t1 - t0)
                    cpu_n[mode] += n

        for s in systems:               # warm-up, not counted
            for mode, pause in modes:
                run_block(s, mode, pause, 2, record=False)
        blocks = [(s, m, p) for s in systems for m, p in modes]
        for _ in range(n_of('s1c_rounds')):
            random.shuffle(blocks)
            for s, m, p in blocks:
                run_block(s, m, p, block[(s, p)])
        data = {'modes': {}, 'idle_cpu_rate': idle,
                'block': {'%s, %s' % (s, m): block[(s, p)] for s, m, p in blocks}}
        for mode, pause in modes:
            d = {'pause_s': pause, 'systems': {}}
            for s in systems:
                sm = summary(times[(s, mode)])
                sm['failed'] = fails[(s, mode)]
                if (s, mode) in why_failed:
                    sm['first_failure'] = why_failed[(s, mode)]
                d['systems'][s] = sm
                if fails[(s, mode)] and s.startswith('petri'):
                    self.issue('%s, one client %s: %d of %d one-shots failed; first: %s' % (
                        s, mode, fails[(s, mode)], fails[(s, mode)] + sm['n'],
                        why_failed[(s, mode)]))
            d['petri_duration'] = summary(exec_s[mode])
            d['petri_cpu_per_oneshot_s'] = cpu[mode] / cpu_n[mode] if cpu_n[mode] else None
            p = d['systems']['petri (warm)'].get('p50')
            b = d['systems'].get('bwrap+python3', {}).get('p50')
            d['ratio_bwrap'] = p / b if p and b else None
            data['modes'][mode] = d
            log('   %-13s petri p50 %-9s p90 %-9s (execution p50 %s) | bwrap+python3 p50 %-9s'
                '| petri ÷ bwrap %s | petri CPU %s per one-shot' % (
                    mode, ms(p), ms(d['systems']['petri (warm)'].get('p90')),
                    ms(d['petri_duration'].get('p50')), ms(b),
                    '%.3f' % d['ratio_bwrap'] if d['ratio_bwrap'] else '—',
                    ms(d['petri_cpu_per_oneshot_s'])))
        self.end_section(sec, data)
        for mode, goal in (('back to back', 0.25), ('100 ms apart', 0.1)):
            d = data['modes'][mode]
            name = 'one-shot print(1+1), one client %s, p50 vs bwrap+python3' % mode
            if d['ratio_bwrap'] is None:
                self.target(name, '≤ %g ×' % goal, 'bwrap unavailable', None)
                continue
            self.target(name, '≤ %g ×' % goal, '%.3f × (%s vs %s; petri CPU %s per one-shot)' % (
                d['ratio_bwrap'], ms(d['systems']['petri (warm)']['p50']),
                ms(d['systems']['bwrap+python3']['p50']), ms(d['petri_cpu_per_oneshot_s'])),
                d['ratio_bwrap'] <= goal)

    def oneshot_pandas(self):
        def per_round(s):
            return 5 if s == 'petri (warm)' else 1

        def check_petri(r):
            ok = (r.get('status') == 'ok' and r.get('stdout', '').strip() == PANDAS_MEAN and
                  any('image/png' in b for b in r.get('results', [])))
            return ok, None if ok else json.dumps(r)[:300]

        def check_peer(out):
            lines = out.split()
            return out.startswith(PANDAS_MEAN) and 'png' in lines and int(lines[-1]) > 1000

        d = self.oneshot_section('oneshot_pandas', '2. one-shot pandas mean + matplotlib PNG',
                                 PANDAS_CODE, PANDAS_CODE + PANDAS_PEER_TAIL, check_petri,
                                 check_peer, n_of('s2_rounds'), per_round)
        s = d['systems']
        warm = s['petri (warm)'].get('p50')
        bare = s.get('bare python3', {}).get('p50')
        if warm and bare:
            self.target('one-shot pandas + PNG, p50 vs bare python3', '≤ 0.15 ×',
                        '%.3f × (%s vs %s)' % (warm / bare, ms(warm), ms(bare)),
                        warm / bare <= 0.15)

    # -- 3: stateful round trip against a Jupyter kernel

    def stateful(self):
        sec = self.section('stateful', '3. stateful round trip: x += 1 in a warm session '
                           'vs a Jupyter kernel')
        c = self.warm.client
        st, ses = c.json('POST', '/v1/sessions', {})
        if st != 201:
            self.issue('POST /v1/sessions: %d %s' % (st, ses))
            self.end_section(sec, {'error': 'no session'})
            return
        sid = ses['id']
        path = '/v1/sessions/%s/execute' % sid
        st, r = c.json('POST', path, {'code': 'x = 0'})
        jup = self.start_jupyter()
        times = collections.defaultdict(list)
        fails = collections.Counter()
        counts = collections.Counter()

        def petri_once():
            t0 = time.perf_counter()
            st, data = c.request('POST', path, {'code': 'x += 1'})
            dt = time.perf_counter() - t0
            counts['petri'] += 1
            if st == 200 and json.loads(data).get('status') == 'ok':
                return dt
            if not fails['petri']:
                self.issue('session execute failed: %d %s' % (st, data[:200]))
            fails['petri'] += 1
            return None

        def jup_once():
            t0 = time.perf_counter()
            ok = jup('x += 1')
            dt = time.perf_counter() - t0
            counts['jupyter'] += 1
            if ok:
                return dt
            fails['jupyter'] += 1
            return None

        # Back to back (the benchmark), and with a 10 ms pause before each
        # execution (not timed): an agent never sends its next cell within
        # the same millisecond, and petri waits for a clock tick after an
        # execution (see bench/README.md).
        variants = {'petri session': (petri_once, 0.0),
                    'petri session, 10 ms apart': (petri_once, 0.01)}
        if jup:
            jup('x = 0')
            variants['Jupyter kernel'] = (jup_once, 0.0)
            variants['Jupyter kernel, 10 ms apart'] = (jup_once, 0.01)
        for _ in range(20):                     # warm-up
            petri_once()
            if jup:
                jup_once()
        for _ in range(n_of('s3_rounds')):
            order = list(variants)
            random.shuffle(order)
            for name in order:
                f, pause = variants[name]
                for _ in range(10):
                    if pause:
                        time.sleep(pause)
                    dt = f()
                    if dt is not None:
                        times[name].append(dt)
        st, r = c.json('POST', path, {'code': 'x'})
        px = r['results'][0]['text/plain'] if st == 200 and r.get('results') else None
        data = {'systems': {}, 'petri_x': px, 'petri_expected': counts['petri']}
        if px != str(counts['petri']):
            self.issue('session state: x is %s after %d increments' % (px, counts['petri']))
        for name in variants:
            data['systems'][name] = summary(times[name])
            data['systems'][name]['failed'] = fails['jupyter' if 'Jupyter' in name else 'petri']
        if jup:
            data['jupyter_x'] = self.jupyter_value('x')
            data['jupyter_expected'] = counts['jupyter']
            data['notes'] = {'Jupyter kernel': 'ipykernel via jupyter_client '
                             'BlockingKernelClient: execute, then wait for the reply and '
                             'for status idle on IOPub; unsandboxed'}
        c.request('DELETE', '/v1/sessions/' + sid)
        self.stop_jupyter()
        for s, sm in data['systems'].items():
            log('   %-28s n=%-4d p50 %-10s p90 %s' % (s, sm['n'], ms(sm.get('p50')),
                                                      ms(sm.get('p90'))))
        self.end_section(sec, data)
        p = data['systems']['petri session'].get('p50')
        j = data['systems'].get('Jupyter kernel', {}).get('p50')
        if p and j:
            self.target('stateful round trip, p50 vs Jupyter kernel', '≤ 0.25 ×',
                        '%.3f × (%s vs %s)' % (p / j, ms(p), ms(j)), p / j <= 0.25)
            p2 = data['systems']['petri session, 10 ms apart'].get('p50')
            j2 = data['systems']['Jupyter kernel, 10 ms apart'].get('p50')
            if p2 and j2:
                self.target('(same, 10 ms between executions)', '≤ 0.25 ×',
                            '%.3f × (%s vs %s)' % (p2 / j2, ms(p2), ms(j2)), p2 / j2 <= 0.25)
        else:
            self.target('stateful round trip vs Jupyter kernel', '≤ 0.25 ×',
                        'Jupyter kernel unavailable', None)

    def start_jupyter(self):
        try:
            import jupyter_client
        except ImportError:
            self.warn('jupyter_client is not installed (bench/deps): no Jupyter peer')
            return None
        rt = os.path.join(self.workdir, 'jupyter')
        os.makedirs(rt, exist_ok=True)
        os.environ['JUPYTER_RUNTIME_DIR'] = rt
        os.environ['PYDEVD_DISABLE_FILE_VALIDATION'] = '1'
        km = jupyter_client.KernelManager(kernel_name='python3')
        km.start_kernel(extra_arguments=['--HistoryManager.enabled=False'],
                        env=dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION='1'),
                        stderr=subprocess.DEVNULL)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        self.kernel = (km, kc)

        def execute(code):
            msg_id = kc.execute(code.strip(), store_history=False)
            while True:
                m = kc.get_iopub_msg(timeout=60)
                if (m['parent_header'].get('msg_id') == msg_id and
                        m['msg_type'] == 'status' and
                        m['content']['execution_state'] == 'idle'):
                    break
            while True:
                reply = kc.get_shell_msg(timeout=60)
                if reply['parent_header'].get('msg_id') == msg_id:
                    return reply['content']['status'] == 'ok'
        return execute

    def jupyter_value(self, expr):
        km, kc = self.kernel
        msg_id = kc.execute('', store_history=False, user_expressions={'v': expr})
        while True:
            reply = kc.get_shell_msg(timeout=60)
            if reply['parent_header'].get('msg_id') == msg_id:
                return reply['content']['user_expressions']['v']['data']['text/plain']

    def stop_jupyter(self):
        if self.kernel:
            km, kc = self.kernel
            self.kernel = None
            try:
                kc.stop_channels()
                km.shutdown_kernel(now=True)
            except Exception as e:      # noqa: BLE001 -- best effort at exit
                log('jupyter shutdown: %s' % e)

    # -- 4: sustained throughput

    def throughput(self):
        sec = self.section('throughput', '4. sustained one-shot throughput, print(1+1), '
                           'N concurrent keep-alive clients')
        dur = n_of('s4_seconds')
        # petri's CPU per one-shot: the cgroup's delta from the start of a
        # run until the pool has refilled what it took, less the idle rate.
        idle = self.warm.idle_cpu_rate() if self.warm.cpu_s() is not None else None
        data = {'duration_s': dur, 'runs': {}, 'idle_cpu_rate': idle}
        for n in (1, 2, 4, 8):
            self.warm.wait_pool(30)
            m0 = self.warm.metrics()
            c0 = cpu_times()
            u0, tu0 = self.warm.cpu_s(), time.monotonic()
            outs, start_at = run_clients(self.warm, n, dur)
            c1 = cpu_times()
            u1 = self.warm.cpu_s()
            m1 = self.warm.metrics()
            u2, tu2 = self.warm.settled_cpu_s()
            ok = sum(o['ok'] for o in outs)
            total = sum(o['ok'] + sum(o['errors'].values()) for o in outs)
            elapsed = max(o['last'] for o in outs) - start_at
            errors = collections.Counter()
            for o in outs:
                errors.update(o['errors'])
            lat = [x for o in outs for x in o['lat']]
            client_cpu = sum(o['cpu'] for o in outs)
            run = {
                'clients': n, 'ok': ok, 'total': total, 'elapsed_s': round(elapsed, 2),
                'ok_per_s': round(ok / elapsed, 1) if elapsed > 0 else 0,
                'latency': summary(lat), 'errors': dict(errors),
                'samples': [e for o in outs for e in o['samples']][:5],
                'client_cpu_s': round(client_cpu, 2),
                'machine_cpu_busy': round((c1[0] - c0[0]) / max(1, c1[1] - c0[1]), 3),
                'petri_cpu_s': round(u1 - u0, 2) if u0 is not None else None,
                'petri_cpu_per_oneshot_s': (u2 - u0 - idle * (tu2 - tu0)) / total
                if u0 is not None and total else None,
                'petri_machine_share': (u1 - u0) / (elapsed * os.cpu_count())
                if u0 is not None and elapsed > 0 else None,
                'pool_ready_after': m1.get('petri_pool_ready'),
                'spawn_failures': m1.get('petri_sandbox_spawn_failures_total', 0)
                - m0.get('petri_sandbox_spawn_failures_total', 0),
                'rejected_capacity': m1.get('petri_requests_rejected_total{reason="capacity"}', 0)
                - m0.get('petri_requests_rejected_total{reason="capacity"}', 0),
            }
            data['runs'][str(n)] = run
            log('   N=%d: %d ok of %d in %.1f s = %.1f ok/s, petri CPU %s per one-shot '
                '(with the refill); latency p50 %s p90 %s; machine CPU %.0f%%, petri %s of '
                'it, bench clients %.1f s%s' % (
                    n, ok, total, elapsed, run['ok_per_s'], ms(run['petri_cpu_per_oneshot_s']),
                    ms(run['latency'].get('p50')),
                    ms(run['latency'].get('p90')), 100 * run['machine_cpu_busy'],
                    '%.0f%%' % (100 * run['petri_machine_share'])
                    if run['petri_machine_share'] is not None else '?',
                    client_cpu, '; errors %s' % dict(errors) if errors else ''))
            if errors:
                self.issue('throughput N=%d: %d of %d one-shots failed: %s; e.g. %s' % (
                    n, total - ok, total, dict(errors), run['samples'][:2]))
        # Nothing may be left behind: back to the template + a full pool.
        time.sleep(1.0)
        self.warm.wait_pool(30)
        time.sleep(1.0)
        cg = self.warm.cgroups()
        live = [k for k, v in cg.items() if v['pids']]
        data['sandbox_cgroups_after'] = len(cg)
        data['sandbox_cgroups_with_processes_after'] = len(live)
        expect = self.warm.expected_cgroups()
        if len(cg) > expect:
            self.issue('after the throughput runs %d sandbox cgroups exist (%d with processes); '
                       'expected %d (templates + pools): %s' % (len(cg), len(live), expect,
                                                               sorted(cg)[:10]))
        self.end_section(sec, data)
        r4 = data['runs']['4']
        best = max(data['runs'].values(), key=lambda r: r['ok_per_s'])
        floor = self.floor or fork_floor()
        if floor:
            goal = 0.7 * os.cpu_count() / floor
            self.target('sustained one-shots/s, 4 clients, vs the fork floor',
                        '≥ 0.7 × cores ÷ floor', '%.1f /s (goal %.0f /s: floor %s)' % (
                            r4['ok_per_s'], goal, ms(floor)), r4['ok_per_s'] >= goal)
        self.target('sustained one-shot throughput, 4 clients', '≥ 200 /s',
                    '%.1f /s (petri CPU %s per one-shot; best %.1f /s at N = %d)' % (
                        r4['ok_per_s'], ms(r4['petri_cpu_per_oneshot_s']), best['ok_per_s'],
                        best['clients']), r4['ok_per_s'] >= 200)

    # -- 7: fairness, a good session beside three CPU hogs

    def fairness(self):
        """Three sessions spin on the CPU (each up to its quota, the default
        1 core: 3 cores' worth on this machine's cores) while a good session
        does `x += 1` round trips 20 ms apart, an agent's pace; the front
        door (GET /healthz) and one-shots are timed beside them too.  The
        goal: the good session's p99 beside the hogs <= 5 x its idle p50 +
        50 ms."""
        sec = self.section('fair', '7. a good session beside 3 CPU hogs: x += 1 round '
                           'trips 20 ms apart; GET /healthz and one-shots beside them')
        n = n_of('s7_trips')
        srv = self.warm
        c = srv.client
        st, ses = c.json('POST', '/v1/sessions', {})
        if st != 201:
            self.issue('POST /v1/sessions: %d %s' % (st, ses))
            self.end_section(sec, {'error': 'no session'})
            return
        path = '/v1/sessions/%s/execute' % ses['id']
        c.json('POST', path, {'code': 'x = 0'})
        fails = collections.Counter()

        def timed(kind, k, pause, method, path, body, ok, client=None):
            """k requests `pause` apart (untimed); the times of those ok()
            accepts, the others counted as failures of kind."""
            h = client or Client(srv.host, srv.port)
            out = []
            for _ in range(k):
                time.sleep(pause)
                t0 = time.perf_counter()
                st, data = h.request(method, path, body)
                if ok(st, data):
                    out.append(time.perf_counter() - t0)
                else:
                    fails[kind] += 1
            if not client:
                h.close()
            return out

        def trips(k):
            return timed('good', k, 0.02, 'POST', path, {'code': 'x += 1'},
                         lambda st, d: st == 200 and json.loads(d).get('status') == 'ok', c)

        def front_door(k):
            return timed('healthz', k, 0.02, 'GET', '/healthz', None,
                         lambda st, d: st == 200)

        def oneshots(k):
            return timed('oneshot', k, 0.05, 'POST', '/v1/execute', {'code': 'print(1+1)'},
                         lambda st, d: st == 200 and json.loads(d).get('stdout') == '2\n')

        trips(20)                               # warm-up
        idle = {'session': trips(n), 'healthz': front_door(n), 'oneshot': oneshots(n // 5)}
        stop = threading.Event()
        hog_ids, started = [], []
        spin = 'import time\nt = time.monotonic()\nwhile time.monotonic() - t < 3:\n    pass\n'

        def hog():
            h = Client(srv.host, srv.port)
            st, hs = h.json('POST', '/v1/sessions', {})
            if st != 201:
                fails['hog session'] += 1
                return
            hog_ids.append(hs['id'])
            started.append(1)
            while not stop.is_set():
                st, _ = h.request('POST', '/v1/sessions/%s/execute' % hs['id'],
                                  {'code': spin})
                if st != 200:
                    fails['hog'] += 1
                    break
            h.close()

        hogs = [threading.Thread(target=hog, daemon=True) for _ in range(3)]
        for t in hogs:
            t.start()
        end = time.monotonic() + 10
        while len(started) < 3 and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(1.0)                         # the hogs are spinning
        c0 = cpu_times()
        side = {}
        for key, f, k in (('session', trips, n), ('healthz', front_door, n),
                          ('oneshot', oneshots, n // 5)):
            side[key] = f(k)
        c1 = cpu_times()
        stop.set()
        for sid in hog_ids:                     # ends a running spin at once
            c.request('DELETE', '/v1/sessions/' + sid)
        for t in hogs:
            t.join(10)
        c.request('DELETE', '/v1/sessions/' + ses['id'])
        data = {'idle': {}, 'hogs': {}, 'failed': dict(fails),
                'machine_cpu_busy_beside_hogs':
                round((c1[0] - c0[0]) / max(1, c1[1] - c0[1]), 3)}
        for name, got in (('idle', idle), ('hogs', side)):
            for key, v in got.items():
                sm = summary(v)
                sm['p99'] = percentile(v, 99) if v else None
                data[name][key] = sm
        for key in ('session', 'healthz', 'oneshot'):
            i, b = data['idle'][key], data['hogs'][key]
            log('   %-8s idle p50 %-9s p99 %-9s | beside 3 hogs p50 %-9s p99 %s' % (
                key, ms(i.get('p50')), ms(i.get('p99')), ms(b.get('p50')), ms(b.get('p99'))))
        log('   machine CPU busy beside the hogs: %.0f%%%s' % (
            100 * data['machine_cpu_busy_beside_hogs'],
            '; failed: %s' % dict(fails) if fails else ''))
        if fails:
            self.issue('fairness: failures %s' % dict(fails))
        self.end_section(sec, data)
        i50, b99 = data['idle']['session'].get('p50'), data['hogs']['session'].get('p99')
        if i50 and b99:
            goal = 5 * i50 + 0.05
            self.target('a good session beside 3 CPU hogs, p99', '≤ 5 × idle p50 + 50 ms',
                        '%s (idle p50 %s: goal %s)' % (ms(b99), ms(i50), ms(goal)),
                        b99 <= goal)

    # -- 5: memory of idle sessions

    def memory(self):
        nses = n_of('s5_sessions')
        sec = self.section('memory', '5. private memory (USS) per idle session with pandas '
                           'imported, %d sessions' % nses)
        c = self.warm.client
        ids, create_t = [], []
        for i in range(nses):
            t0 = time.perf_counter()
            st, r = c.json('POST', '/v1/sessions', {})
            create_t.append(time.perf_counter() - t0)
            if st != 201:
                self.issue('creating session %d: %d %s' % (i, st, r))
                break
            ids.append(r['id'])
        for sid in ids:
            st, r = c.json('POST', '/v1/sessions/%s/execute' % sid,
                           {'code': 'import pandas\n_ = open("/tmp/.petri-bench-id", "w")'
                                    '.write(%r)' % sid})
            if st != 200 or r.get('status') != 'ok':
                self.issue('import pandas in a session: %d %s' % (st, r))
        time.sleep(2.0)
        cg = self.warm.cgroups()
        per = {}
        template, pooled = None, []
        for name, info in cg.items():
            pids = sorted(info['pids'])
            if not pids:
                continue
            marker = None
            for p in pids:
                marker = read('/proc/%d/root/tmp/.petri-bench-id' % p).strip() or marker
            sm = [x for x in (smaps(p) for p in pids) if x]
            agg = {k: sum(x.get(k, 0) for x in sm) for k in ('USS', 'Pss', 'Rss')}
            agg['processes'] = len(sm)
            agg['cgroup_charge'] = cgroup_memory(info['paths'])
            if marker in ids:
                per[marker] = agg
            elif any(proc_uid(p) == 2000000000 for p in pids):
                template = agg
            else:
                pooled.append(agg)
        uss = [v['USS'] for v in per.values()]
        data = {
            'sessions': len(ids), 'measured': len(per),
            'create': summary(create_t),
            'uss': summary(uss),
            'pss': summary([v['Pss'] for v in per.values()]),
            'rss': summary([v['Rss'] for v in per.values()]),
            'cgroup_charge': summary([v['cgroup_charge'] for v in per.values()
                                      if v['cgroup_charge']]),
            'processes_per_session': sorted({v['processes'] for v in per.values()}),
            'template': template,
            'pooled_unused': summary([v['USS'] for v in pooled]),
            'uss_total_sessions': sum(uss),
        }
        if len(per) < len(ids):
            self.warn('found the processes of only %d of %d sessions' % (len(per), len(ids)))
        # The peers: a cold interpreter that imported pandas; and one that
        # imported what petri's template preloads.
        data['bare'] = {}
        for label, mods in (('bare python3, import pandas', 'pandas'),
                            ('bare python3, import numpy pandas matplotlib.pyplot scipy',
                             'numpy, pandas, matplotlib.pyplot, scipy.stats')):
            vals = []
            for _ in range(3):
                vals.append(bare_memory(mods, self.peers.env))
            data['bare'][label] = {k: statistics.median(v[k] for v in vals)
                                   for k in ('USS', 'Rss', 'Pss')}
        t0 = time.perf_counter()
        for sid in ids:
            c.request('DELETE', '/v1/sessions/' + sid)
        data['delete_all_s'] = round(time.perf_counter() - t0, 2)
        time.sleep(2.0)
        self.warm.wait_pool(60)
        time.sleep(0.5)
        after = self.warm.cgroups()
        data['sandbox_cgroups_after_delete'] = len(after)
        expect = self.warm.expected_cgroups()
        if len(after) > expect:
            self.issue('after deleting %d sessions, %d sandbox cgroups remain (expected %d)'
                       % (len(ids), len(after), expect))
        mb = 1 << 20
        u = data['uss']
        log('   %d sessions (created p50 %s): USS per session p50 %.2f MiB p90 %.2f MiB '
            'max %.2f MiB; PSS p50 %.1f MiB; RSS p50 %.1f MiB; %s processes each' % (
                len(per), ms(data['create'].get('p50')), u['p50'] / mb, u['p90'] / mb,
                u['max'] / mb, data['pss']['p50'] / mb, data['rss']['p50'] / mb,
                data['processes_per_session']))
        if template:
            log('   template (once per server): USS %.1f MiB, RSS %.1f MiB' % (
                template['USS'] / mb, template['Rss'] / mb))
        for label, v in data['bare'].items():
            log('   %s: USS %.1f MiB, RSS %.1f MiB' % (label, v['USS'] / mb, v['Rss'] / mb))
        self.end_section(sec, data)
        self.target('private memory per idle session with pandas, p50', '≤ 8 MB',
                    '%.2f MB (%.2f MiB; max %.2f MiB)' % (u['p50'] / 1e6, u['p50'] / mb,
                                                          u['max'] / mb), u['p50'] <= 8e6)

    # -- 6: compute-bound overhead

    def cpu_overhead(self):
        sec = self.section('cpu', '6. CPU overhead of compute-bound code: a ~2 s pure '
                           'Python loop and a numpy matmul, in a session vs bare python3')
        env = self.peers.env
        # Calibrate on bare python3: ~2 s of loop, ~1 s of matmul.
        r = json.loads(subprocess.run([PY, '-c', LOOP_CODE % 2000000], env=env,
                                      capture_output=True, text=True).stdout)
        n_loop = int(2000000 * 2.0 / max(r['wall'], 0.01))
        size = 1024
        r = json.loads(subprocess.run([PY, '-c', MATMUL_CODE % (size, size, 4)], env=env,
                                      capture_output=True, text=True).stdout)
        reps = max(4, int(4 * 1.0 / max(r['wall'], 0.001)))
        codes = {'pure Python loop': LOOP_CODE % n_loop,
                 'numpy matmul': MATMUL_CODE % (size, size, reps)}
        c = self.warm.client
        # cpu 2.0: as many cores as bare python3 has (BLAS threads).
        st, ses = c.json('POST', '/v1/sessions', {'limits': {'cpu': 2.0, 'timeout_s': 300}})
        if st != 201:
            self.issue('session for the CPU test: %d %s' % (st, ses))
            self.end_section(sec, {'error': 'no session'})
            return
        path = '/v1/sessions/%s/execute' % ses['id']
        data = {'loop_iterations': n_loop, 'matmul': '%dx%d x %d' % (size, size, reps),
                'workloads': {}}
        for wl, code in codes.items():
            petri, bare = [], []

            def run_petri():
                t0 = time.perf_counter()
                st, r = c.json('POST', path, {'code': code})
                wall = time.perf_counter() - t0
                if st != 200 or r.get('status') != 'ok':
                    self.issue('CPU test execute: %d %s' % (st, json.dumps(r)[:300]))
                    return None
                inner = json.loads(r['stdout'])
                return {'client_wall': wall, 'duration': r['duration_ms'] / 1000.0,
                        'cpu': r['cpu_ms'] / 1000.0, 'inner_wall': inner['wall'],
                        'inner_cpu': inner['cpu']}

            def run_bare():
                t0 = time.perf_counter()
                p = subprocess.run([PY, '-c', code], env=env, capture_output=True, text=True)
                wall = time.perf_counter() - t0
                inner = json.loads(p.stdout)
                return {'process_wall': wall, 'inner_wall': inner['wall'],
                        'inner_cpu': inner['cpu']}

            run_petri()
            run_bare()       # warm-up
            for _ in range(n_of('s6_pairs')):
                pair = [('p', run_petri), ('b', run_bare)]
                random.shuffle(pair)
                got = {}
                for k, f in pair:
                    got[k] = f()
                if got['p']:
                    petri.append(got['p'])
                    bare.append(got['b'])
            # Paired ratios (each petri run against the bare run next to it)
            # cancel the drift of other load on the machine.
            wall_ratio = [p['duration'] / b['inner_wall'] for p, b in zip(petri, bare)]
            cpu_ratio = [p['cpu'] / b['inner_cpu'] for p, b in zip(petri, bare)]
            inner_ratio = [p['inner_wall'] / b['inner_wall'] for p, b in zip(petri, bare)]
            w = {
                'petri_duration': summary([p['duration'] for p in petri]),
                'petri_cpu': summary([p['cpu'] for p in petri]),
                'petri_client_wall': summary([p['client_wall'] for p in petri]),
                'petri_inner_wall': summary([p['inner_wall'] for p in petri]),
                'bare_inner_wall': summary([b['inner_wall'] for b in bare]),
                'bare_inner_cpu': summary([b['inner_cpu'] for b in bare]),
                'bare_process_wall': summary([b['process_wall'] for b in bare]),
                'wall_overhead': statistics.median(wall_ratio) - 1 if wall_ratio else None,
                'cpu_overhead': statistics.median(cpu_ratio) - 1 if cpu_ratio else None,
                'inner_wall_overhead': statistics.median(inner_ratio) - 1 if inner_ratio else None,
                'pairs': len(petri),
                # The noise floor: how much identical bare runs differ.
                'bare_cpu_spread': (max(b['inner_cpu'] for b in bare) -
                                    min(b['inner_cpu'] for b in bare)) /
                statistics.median(b['inner_cpu'] for b in bare) if bare else None,
                'bare_wall_spread': (max(b['inner_wall'] for b in bare) -
                                     min(b['inner_wall'] for b in bare)) /
                statistics.median(b['inner_wall'] for b in bare) if bare else None,
            }
            data['workloads'][wl] = w
            log('   %-17s petri duration p50 %.3f s, cpu %.3f s | bare python3 %.3f s, cpu '
                '%.3f s | overhead wall %+.1f%%, cpu %+.1f%% (%d pairs; bare runs spread '
                '%.0f%% wall, %.0f%% cpu)' % (
                    wl, w['petri_duration']['p50'], w['petri_cpu']['p50'],
                    w['bare_inner_wall']['p50'], w['bare_inner_cpu']['p50'],
                    100 * w['wall_overhead'], 100 * w['cpu_overhead'], w['pairs'],
                    100 * w['bare_wall_spread'], 100 * w['bare_cpu_spread']))
        c.request('DELETE', '/v1/sessions/' + ses['id'])
        self.end_section(sec, data)
        for wl, w in data['workloads'].items():
            # An overhead is resolved only when identical bare runs agree
            # to within a few per cent.
            for kind, key, spread in (('wall', 'wall_overhead', 'bare_wall_spread'),
                                      ('CPU', 'cpu_overhead', 'bare_cpu_spread')):
                self.target('compute-bound overhead, %s (%s)' % (wl, kind), '≤ 3 %',
                            '%+.1f %% (bare runs spread %.0f %%)' % (100 * w[key],
                                                                     100 * w[spread]),
                            w[key] <= 0.03,
                            'not resolved: noise above the target' if w[spread] > 0.06
                            else '')

    # -- P: a profile of what a one-shot still costs

    def profile(self):
        """A CPU profile of the warm server's process tree (server, template,
        sandboxes) while 2 clients send one-shots: bench/cpuprofile.py."""
        import cpuprofile
        tool = self.args.profile or 'auto'
        why_not = None
        if tool in ('auto', 'perf'):
            why_not = cpuprofile.perf_unusable(self.workdir)
            if why_not:
                self.warn('no perf profile: %s; strace -c instead' % why_not)
        if tool == 'strace' or why_not:
            tool = 'strace' if shutil.which('strace') else None
        else:
            tool = 'perf'
        dur = n_of('profile_seconds')
        clients = 2
        sec = self.section('profile', 'P. where petri\'s CPU goes: %s during %g s of one-shot '
                           'print(1+1) from %d clients' % (tool or 'no profiler', dur, clients))
        data = {'tool': tool, 'perf_unusable': why_not, 'clients': clients, 'burst_s': dur}
        if not tool:
            data['error'] = 'neither perf nor strace is installed (bench/deps)'
            self.end_section(sec, data)
            return
        srv = self.warm
        srv.wait_pool(30)
        roots = srv.pids()
        rec = cpuprofile.Recorder(tool, self.workdir, roots)
        data['command'] = rec.command()
        idle = srv.idle_cpu_rate() if srv.cpu_s() is not None else None
        rec.start()
        u0, t0 = srv.cpu_s(), time.monotonic()
        outs, _ = run_clients(srv, clients, dur)
        u1, t1 = srv.settled_cpu_s()
        rec.stop()
        ok = sum(o['ok'] for o in outs)
        total = sum(o['ok'] + sum(o['errors'].values()) for o in outs)
        data['oneshots'] = total
        data['ok'] = ok
        data['ok_per_s'] = ok / dur
        if idle is not None and total:
            data['cpu_per_oneshot_s'] = (u1 - u0 - idle * (t1 - t0)) / total
        if tool == 'perf':
            data.update(cpuprofile.perf_shares(rec.out, srv.pid, roots))
            data['fork_floor_s'] = self.floor or fork_floor()
            os.unlink(rec.out)
            log('   %d one-shots (%.0f/s, petri CPU %s each while profiled); %d of %d samples '
                'are petri\'s process tree (%d processes): kernel %.0f %%, user %.0f %%' % (
                    total, data['ok_per_s'], ms(data.get('cpu_per_oneshot_s')),
                    data['samples_petri'], data['samples_all'], data['processes_petri'],
                    100 * (data['kernel_share'] or 0), 100 * (data['user_share'] or 0)))
            log('   by process name: ' + ', '.join('%s %.0f %%' % (c, 100 * v)
                                                    for c, v in data['by_comm']))
            log('   by forks below the server: ' + ', '.join(
                '%d %s %.0f %%' % (d, c, 100 * v) for d, c, v in data['by_depth']))
            for title, key in (('self', 'self'), ('inclusive (callers too)', 'inclusive')):
                log('   top symbols, %s:' % title)
                for name, v in data[key][:15]:
                    log('     %5.1f %%  %s' % (100 * v, name))
        else:
            data.update(cpuprofile.strace_shares(rec.out))
            log('   %d one-shots under strace (%.0f/s, petri CPU %s each while traced); '
                'syscalls by share of the time in them:' % (
                    total, data['ok_per_s'], ms(data.get('cpu_per_oneshot_s'))))
            for r in data['syscalls'][:15]:
                log('     %5.1f %%  %-18s %8d calls %6d errors' % (
                    100 * r['share'], r['syscall'], r['calls'], r['errors']))
        if total - ok:
            self.issue('profile: %d of %d one-shots failed while profiled with %s' % (
                total - ok, total, tool))
        self.end_section(sec, data)

    # -- teardown and report

    def teardown(self):
        self.stop_jupyter()
        if getattr(self, 'health0', None):
            # Leak check: the servers once everything is idle again.
            for s in self.servers:
                if s.warm:
                    s.wait_pool(30)
            time.sleep(1.0)
            h1 = {s.name: s.health() for s in self.servers if not s.stopped}
            self.results['server_health'] = {'start': self.health0, 'end': h1}
            for name, h in h1.items():
                h0 = self.health0.get(name, {})
                if h0.get('fds') is not None and h['fds'] is not None and \
                        h['fds'] > h0['fds'] + 8:
                    self.issue('petri serve (%s): open fds grew from %d to %d over the run'
                               % (name, h0['fds'], h['fds']))
                if h0.get('sandbox_cgroups') is not None and \
                        h['sandbox_cgroups'] > h0['sandbox_cgroups']:
                    self.issue('petri serve (%s): %d sandbox cgroups at the end, %d at the '
                               'start' % (name, h['sandbox_cgroups'], h0['sandbox_cgroups']))
        stops = {}
        for s in self.servers:
            try:
                stops[s.name] = s.stop()
            except Exception as e:      # noqa: BLE001 -- keep stopping the others
                stops[s.name] = {'error': str(e)}
        self.results['servers_stopped'] = stops
        for name, rep in stops.items():
            if rep.get('exit') not in (0, None) or rep.get('left_processes') or \
                    rep.get('left_cgroups'):
                self.issue('petri serve (%s) at SIGTERM: exit %s, %d processes and %d cgroups '
                           'left (killed by the bench): %s' % (
                               name, rep.get('exit'), len(rep.get('left_processes', [])),
                               len(rep.get('left_cgroups', [])), rep))
        self.sampler.stop_ev.set()
        self.results['loadavg_end'] = loadavg()[0]
        shutil.rmtree(self.workdir, ignore_errors=True)


def cgroup_memory(paths):
    for p in paths:
        for f in ('memory.usage_in_bytes', 'memory.current'):
            v = read(os.path.join(p, f)).strip()
            if v.isdigit():
                return int(v)
    return None


def bare_memory(mods, env):
    p = subprocess.Popen([PY, '-c', 'import sys\nimport %s\nprint("ready", flush=True)\n'
                          'sys.stdin.read()' % mods], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        p.stdout.readline()
        time.sleep(0.2)
        return smaps(p.pid)
    finally:
        p.stdin.close()
        p.wait(30)


def run_clients(srv, n, duration):
    """n tp_worker processes against srv for duration s: (their reports,
    the time they started at)."""
    ctx = multiprocessing.get_context('fork')
    q = ctx.Queue()
    start_at = time.monotonic() + 0.5
    procs = [ctx.Process(target=tp_worker, args=(srv.host, srv.port, start_at, duration, q))
             for _ in range(n)]
    for p in procs:
        p.start()
    outs = [q.get(timeout=duration + 300) for _ in procs]
    for p in procs:
        p.join(30)
    return outs, start_at


def tp_worker(host, port, start_at, duration, q):
    """One throughput client (a process of its own: no shared GIL)."""
    c = Client(host, port)
    body = json.dumps({'code': PRINT_CODE}).encode()
    lat, ok, errors, samples = [], 0, collections.Counter(), []
    c.request('GET', '/healthz')
    while time.monotonic() < start_at:
        time.sleep(0.001)
    end = start_at + duration
    last = start_at
    while time.monotonic() < end:
        t0 = time.perf_counter()
        try:
            st, data = c.request('POST', '/v1/execute', body)
        except (OSError, http.client.HTTPException) as e:
            errors[type(e).__name__] += 1
            samples.append(str(e)[:200])
            c.close()
            continue
        lat.append(time.perf_counter() - t0)
        last = time.monotonic()
        if st == 200:
            r = json.loads(data)
            if r.get('status') == 'ok' and r.get('stdout') == '2\n':
                ok += 1
            else:
                errors['status ' + str(r.get('status'))] += 1
                samples.append(data[:300].decode('utf-8', 'replace'))
        else:
            errors['HTTP %d' % st] += 1
            samples.append(data[:300].decode('utf-8', 'replace'))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    q.put({'ok': ok, 'errors': dict(errors), 'lat': lat, 'last': last,
           'samples': samples[:3], 'cpu': ru.ru_utime + ru.ru_stime,
           'reconnects': c.reconnects})
    c.close()


# ------------------------------------------------------------------ report

def fmt_bytes(b):
    return '%.1f MiB' % (b / 1048576.0)


def render(res):
    m = res['machine']
    S = res['sections']
    L = []
    L.append('# petri benchmark — %s%s' % (m['date'], ' (BENCH_QUICK)' if m['quick'] else ''))
    L.append('')
    L.append('| machine | |')
    L.append('| --- | --- |')
    for k, label in (('host', 'host'), ('cpu', 'CPU'), ('cores', 'cores'),
                     ('memory_gib', 'memory (GiB)'), ('kernel', 'kernel'), ('os', 'OS'),
                     ('cgroups', 'cgroups'), ('petri', 'petri'), ('python', 'python'),
                     ('bwrap', 'bwrap'), ('firejail', 'firejail'), ('runsc', 'runsc'),
                     ('jupyter', 'Jupyter'), ('perf', 'perf')):
        L.append('| %s | %s |' % (label, m.get(k)))
    L.append('| load average at start | %s (runnable/total %s) |' % (
        ' '.join('%.2f' % x for x in m['loadavg_start']), m['runnable_start']))
    L.append('| busiest processes at start | %s |' % ', '.join(m['top_cpu_start']))
    L.append('| load average at end | %s |' % ' '.join('%.2f' % x for x in res.get(
        'loadavg_end', [])))
    L.append('')
    for w in res['warnings']:
        L.append('> **Warning:** %s' % w)
        L.append('')
    L.append('Times are the whole run as its client sees it: petri over HTTP with a '
             'keep-alive connection, from sending the request to the last byte of the '
             'answer; the peers from spawning the command to its exit.  "petri ÷ this" '
             'is petri (warm)\'s median over this system\'s median.')
    L.append('')
    L.append('| # | benchmark | system | ok | failed | p50 | p90 | petri ÷ this | load avg (mean/max) |')
    L.append('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |')

    def load_of(key):
        ld = S.get(key, {}).get('load', {})
        return '%.1f / %.1f' % (ld.get('load1_mean', 0), ld.get('load1_max', 0))

    if 'client' in S:
        c = S['client']
        L.append('| 0 | client overhead | GET /healthz (keep-alive) | %d | 0 | %s | %s | | %s |'
                 % (c['healthz']['n'], ms(c['healthz']['p50']), ms(c['healthz']['p90']),
                    load_of('client')))
        L.append('| 0 | client overhead | spawn /bin/true | %d | 0 | %s | %s | | |' % (
            c['spawn_true']['n'], ms(c['spawn_true']['p50']), ms(c['spawn_true']['p90'])))
    for key, num, label in (('oneshot_print', 1, 'one-shot print(1+1)'),
                            ('oneshot_pandas', 2, 'one-shot pandas + PNG')):
        if key not in S:
            continue
        sy = S[key]['systems']
        ref = sy['petri (warm)'].get('p50')
        for name, sm in sy.items():
            ratio = ('%.3f' % (ref / sm['p50'])) if sm.get('p50') and ref else ''
            p50 = ms(sm.get('p50'))
            if not sm.get('n') and sm.get('first_failure'):
                p50 = 'every run failed: %s' % sm['first_failure'].replace('|', '/')[:160]
            L.append('| %d | %s | %s | %d | %d | %s | %s | %s | %s |' % (
                num, label, name, sm['n'], sm.get('failed', 0), p50,
                ms(sm.get('p90')), ratio, load_of(key)))
        for name, why in S[key].get('unavailable', {}).items():
            L.append('| %d | %s | %s | — | — | cannot run here: %s | | | |' % (
                num, label, name, why.replace('|', '/')))
    if 'stateful' in S and 'systems' in S['stateful']:
        sy = S['stateful']['systems']
        for name, sm in sy.items():
            ref = sy['petri session, 10 ms apart' if '10 ms' in name
                     else 'petri session'].get('p50')
            ratio = ('%.3f' % (ref / sm['p50'])) if sm.get('p50') and ref else ''
            L.append('| 3 | stateful x += 1 | %s | %d | %d | %s | %s | %s | %s |' % (
                name, sm['n'], sm.get('failed', 0), ms(sm.get('p50')), ms(sm.get('p90')),
                ratio, load_of('stateful')))
    L.append('')
    if 'throughput' in S:
        t = S['throughput']
        L.append('**4. Sustained one-shot throughput** (print(1+1), %g s per N, petri warm, '
                 'pool 16; load avg %s):' % (t['duration_s'], load_of('throughput')))
        L.append('')
        L.append('| clients N | ok/s | petri CPU per one-shot (with the refill) | ok | not ok | latency p50 | latency p90 | machine CPU busy | petri\'s share of the machine | bench clients CPU |')
        L.append('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
        for n, r in t['runs'].items():
            share = r.get('petri_machine_share')
            L.append('| %s | %.1f | %s | %d | %d%s | %s | %s | %.0f %% | %s | %.1f s |' % (
                n, r['ok_per_s'], ms(r.get('petri_cpu_per_oneshot_s')), r['ok'],
                r['total'] - r['ok'],
                (' (%s)' % ', '.join('%s: %d' % kv for kv in r['errors'].items()))
                if r['errors'] else '', ms(r['latency'].get('p50')),
                ms(r['latency'].get('p90')), 100 * r['machine_cpu_busy'],
                '%.0f %%' % (100 * share) if share is not None else '?', r['client_cpu_s']))
        L.append('')
    if 'oneshot_cpu' in S:
        oc = S['oneshot_cpu']
        parts = []
        for name, v in oc['systems'].items():
            if 'cpu_per_oneshot_s' in v:
                parts.append('%s %s' % (name, ms(v['cpu_per_oneshot_s'])))
        if parts:
            L.append('**1b. CPU time per one-shot print(1+1)**, sequential, petri\'s server '
                     'threads + the sandbox + the pool refill (cpuacct of the cgroup the bench '
                     'runs each server in): %s; the bench client spent %s per request.%s' % (
                         ', '.join(parts),
                         ms(oc['systems'].get('petri (warm)', {}).get(
                             'client_cpu_per_request_s')),
                         ' With this, %d idle cores would run at most ~%.0f one-shots/s '
                         '(petri\'s CPU alone, no client). 1c and 4 give the same '
                         'measure for other request patterns.' % (
                             m['cores'], oc['idle_machine_bound_per_s'])
                         if oc.get('idle_machine_bound_per_s') else ''))
            L.append('')
    if 'oneshot_client' in S:
        oc = S['oneshot_client']
        L.append('**1c. One client, one-shot print(1+1) one after another** (petri warm and '
                 'bwrap+python3 in the same shuffled rounds; petri\'s CPU per one-shot from '
                 'its cgroup, over each block of runs until the pool is full again, less the '
                 'idle rate; load avg %s):' % load_of('oneshot_client'))
        L.append('')
        L.append('| requests | petri p50 | petri p90 | petri execution (duration_ms) p50 | bwrap+python3 p50 | bwrap+python3 p90 | petri ÷ bwrap | petri CPU per one-shot | n petri / bwrap | failed petri / bwrap |')
        L.append('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
        for mode, d in oc['modes'].items():
            p = d['systems']['petri (warm)']
            b = d['systems'].get('bwrap+python3', {})
            L.append('| %s | %s | %s | %s | %s | %s | %s | %s | %d / %s | %d / %s |' % (
                mode, ms(p.get('p50')), ms(p.get('p90')), ms(d['petri_duration'].get('p50')),
                ms(b.get('p50')), ms(b.get('p90')),
                '%.3f' % d['ratio_bwrap'] if d.get('ratio_bwrap') else '—',
                ms(d.get('petri_cpu_per_oneshot_s')), p['n'], b.get('n', '—'),
                p.get('failed', 0), b.get('failed', '—')))
        L.append('')
    if 'memory' in S:
        mm = S['memory']
        u = mm['uss']
        L.append('**5. Memory of idle sessions with pandas imported** (%d sessions, all '
                 'processes of each session\'s cgroup; USS = Private_Clean + Private_Dirty '
                 'of smaps_rollup; load avg %s):' % (mm['measured'], load_of('memory')))
        L.append('')
        L.append('| what | USS p50 | USS p90 | USS max | PSS p50 | RSS p50 |')
        L.append('| --- | ---: | ---: | ---: | ---: | ---: |')
        L.append('| petri session (%s processes) | %s | %s | %s | %s | %s |' % (
            '/'.join(str(x) for x in mm['processes_per_session']), fmt_bytes(u['p50']),
            fmt_bytes(u['p90']), fmt_bytes(u['max']), fmt_bytes(mm['pss']['p50']),
            fmt_bytes(mm['rss']['p50'])))
        if mm.get('template'):
            tp = mm['template']
            L.append('| petri template (one per server, shared) | %s | | | %s | %s |' % (
                fmt_bytes(tp['USS']), fmt_bytes(tp['Pss']), fmt_bytes(tp['Rss'])))
        if mm.get('pooled_unused', {}).get('n'):
            L.append('| petri pooled sandbox, unused (%d) | %s | | | | |' % (
                mm['pooled_unused']['n'], fmt_bytes(mm['pooled_unused']['p50'])))
        for label, v in mm['bare'].items():
            L.append('| %s | %s | | | %s | %s |' % (label, fmt_bytes(v['USS']),
                                                    fmt_bytes(v['Pss']), fmt_bytes(v['Rss'])))
        L.append('')
        L.append('%d sessions: all USS together %s; session creation p50 %s p90 %s; '
                 'cgroup memory charge p50 %s; deleting all took %.2f s.' % (
                     mm['sessions'], fmt_bytes(mm['uss_total_sessions']),
                     ms(mm['create'].get('p50')), ms(mm['create'].get('p90')),
                     fmt_bytes(mm['cgroup_charge']['p50']) if mm['cgroup_charge'].get('n')
                     else '?', mm['delete_all_s']))
        L.append('')
    if 'cpu' in S and 'workloads' in S['cpu']:
        cp = S['cpu']
        L.append('**6. Compute-bound code** (session with limits.cpu = 2, alternating with '
                 'bare python3; overhead = median of paired ratios, petri duration_ms and '
                 'cpu_ms against the same code\'s own timing in bare python3; loop %d '
                 'iterations, matmul %s; load avg %s):' % (cp['loop_iterations'], cp['matmul'],
                                                           load_of('cpu')))
        L.append('')
        L.append('| workload | petri wall p50 | petri CPU p50 | bare wall p50 | bare CPU p50 | wall overhead | CPU overhead | pairs | noise: spread of the bare runs (wall / CPU) |')
        L.append('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
        for wl, w in cp['workloads'].items():
            L.append('| %s | %.3f s | %.3f s | %.3f s | %.3f s | %+.1f %% | %+.1f %% | %d | %.0f %% / %.0f %% |' % (
                wl, w['petri_duration']['p50'], w['petri_cpu']['p50'],
                w['bare_inner_wall']['p50'], w['bare_inner_cpu']['p50'],
                100 * w['wall_overhead'], 100 * w['cpu_overhead'], w['pairs'],
                100 * (w.get('bare_wall_spread') or 0), 100 * (w.get('bare_cpu_spread') or 0)))
        L.append('')
    if 'fair' in S and 'idle' in S['fair']:
        fa = S['fair']
        L.append('**7. Fairness** (a good session, the front door and one-shots, idle and '
                 'beside three sessions that spin; machine CPU busy beside them %.0f %%; '
                 'load avg %s):' % (100 * fa['machine_cpu_busy_beside_hogs'], load_of('fair')))
        L.append('')
        L.append('| what | idle p50 | idle p99 | beside 3 hogs p50 | beside 3 hogs p99 |')
        L.append('| --- | ---: | ---: | ---: | ---: |')
        for key, label in (('session', '`x += 1` in a session, 20 ms apart'),
                           ('healthz', '`GET /healthz`, 20 ms apart'),
                           ('oneshot', 'one-shot `print(1+1)`, 50 ms apart')):
            i, b = fa['idle'][key], fa['hogs'][key]
            L.append('| %s | %s | %s | %s | %s |' % (label, ms(i.get('p50')), ms(i.get('p99')),
                                                   ms(b.get('p50')), ms(b.get('p99'))))
        L.append('')
    if 'profile' in S:
        L.extend(render_profile(S['profile'], load_of('profile')))
    L.append('**Targets** (goals, not assertions):')
    L.append('')
    L.append('| target | goal | measured | result | load avg meanwhile (%d cores) |' % m['cores'])
    L.append('| --- | --- | --- | --- | ---: |')
    for t in res['targets']:
        L.append('| %s | %s | %s | %s | %s |' % (t['target'], t['goal'], t['measured'],
                                                 t['result'],
                                                 t.get('load', {}).get('load1_mean', '')))
    L.append('')
    L.append('**Noise** (per section: load average mean/max, machine CPU busy, and how much '
             'slower a fixed spin loop ran than its best time in this run):')
    L.append('')
    L.append('| section | seconds | load avg mean | load avg max | machine CPU busy | spin slowdown |')
    L.append('| --- | ---: | ---: | ---: | ---: | ---: |')
    for key, s in S.items():
        ld = s.get('load', {})
        L.append('| %s | %s | %s | %s | %s | ×%s |' % (
            s.get('title', key), s.get('seconds'), ld.get('load1_mean'), ld.get('load1_max'),
            '%.0f %%' % (100 * ld['cpu_busy_mean']) if ld.get('cpu_busy_mean') is not None
            else '?', s.get('cpu_probe_slowdown')))
    L.append('')
    sh = res.get('server_health')
    if sh:
        L.append('Server health (petri serve itself, start → end of the run): ' + '; '.join(
            '%s: RSS %s → %s KiB, fds %s → %s, threads %s → %s, sandbox cgroups %s → %s' % (
                n, sh['start'][n]['rss_kb'], h['rss_kb'], sh['start'][n]['fds'], h['fds'],
                sh['start'][n]['threads'], h['threads'], sh['start'][n]['sandbox_cgroups'],
                h['sandbox_cgroups']) for n, h in sh['end'].items() if n in sh['start']) + '.')
        L.append('')
    if res['issues']:
        L.append('**petri issues seen during the run:**')
        L.append('')
        for i in res['issues']:
            L.append('- %s' % i)
        L.append('')
    notes = {}
    for key in ('oneshot_print', 'oneshot_pandas', 'stateful'):
        notes.update(S.get(key, {}).get('notes', {}))
    if notes:
        L.append('Peers: ' + '; '.join('**%s**: %s' % kv for kv in sorted(notes.items())) + '.')
        L.append('')
    return '\n'.join(L)


def render_profile(pr, load):
    L = []
    head = ('**P. Where petri\'s CPU goes** (%d clients, %g s of one-shot print(1+1); '
            '`%s`; load avg %s): ' % (pr['clients'], pr['burst_s'], pr.get('command', '?'), load))
    if pr.get('error'):
        return [head + pr['error'], '']
    head += '%d one-shots, %.0f/s, petri CPU %s per one-shot while profiled.' % (
        pr['oneshots'], pr['ok_per_s'], ms(pr.get('cpu_per_oneshot_s')))
    if pr.get('perf_unusable'):
        head += ' perf could not record here (%s).' % pr['perf_unusable']
    L += [head, '']
    if pr['tool'] == 'strace':
        L.append('| syscall | share of the syscall time strace -c counted | calls | errors |')
        L.append('| --- | ---: | ---: | ---: |')
        for r in pr['syscalls']:
            L.append('| %s | %.1f %% | %d | %d |' % (r['syscall'], 100 * r['share'],
                                                    r['calls'], r['errors']))
        return L + ['']
    n = pr['samples_petri']
    L.append('%d of %d samples are petri\'s process tree (%d processes): kernel %.0f %%, '
             'user %.0f %%; by process name: %s; by forks below the server (0 is the '
             'server) and name, from 0.5 %%: %s. '
             'Self = the function the sample was in '
             '(past the interrupt-enable frame where a timer sample lands on a VM); '
             'inclusive = the sample\'s stack contains it (kernel stacks are whole, '
             'user ones mostly not: Debian\'s python3 has no frame pointers).' % (
                 n, pr['samples_all'], pr['processes_petri'], 100 * (pr['kernel_share'] or 0),
                 100 * (pr['user_share'] or 0),
                 ', '.join('%s %.0f %%' % (c, 100 * v) for c, v in pr['by_comm']),
                 ', '.join('%d %s %.1f %%' % (d, c, 100 * v)
                           for d, c, v in pr.get('by_depth', []))))
    L.append('')
    L.append('| # | self | share | inclusive | share |')
    L.append('| ---: | --- | ---: | --- | ---: |')
    rows = max(len(pr['self']), len(pr['inclusive']))
    for i in range(min(rows, 20)):
        a = pr['self'][i] if i < len(pr['self']) else ('', None)
        b = pr['inclusive'][i] if i < len(pr['inclusive']) else ('', None)
        L.append('| %d | %s | %s | %s | %s |' % (
            i + 1, a[0].replace('|', '/'), '%.1f %%' % (100 * a[1]) if a[1] is not None else '',
            b[0].replace('|', '/'), '%.1f %%' % (100 * b[1]) if b[1] is not None else ''))
    L.append('')
    L.append('Inclusive shares of a few kernel functions, for comparing runs: ' + ', '.join(
        '%s %.1f %%' % (k, 100 * v) for k, v in pr['markers'].items()) + '.')
    L.append('')
    if pr.get('steps'):
        per = pr.get('cpu_per_oneshot_s')
        floor = pr.get('fork_floor_s')
        L.append('**By step** (each sample counted once, for the first step its stack '
                 'shows, in the order of bench/cpuprofile.py\'s STEPS); ms per one-shot = '
                 'the share × petri\'s CPU per one-shot while profiled%s:' % (
                     ' (%s), and its ratio to the fork floor measured beside it (%s)' % (
                         ms(per), ms(floor)) if per and floor else ''))
        L.append('')
        L.append('| step | share | ms per one-shot | × fork floor |')
        L.append('| --- | ---: | ---: | ---: |')
        for name, v in pr['steps']:
            L.append('| %s | %.1f %% | %s | %s |' % (
                name, 100 * v, '%.2f' % (1000 * v * per) if per else '',
                '%.2f' % (v * per / floor) if per and floor else ''))
        if pr.get('netns_release_elsewhere') is not None:
            L.append('| (network namespaces released by kernel workers, outside petri\'s '
                     'tree, against its samples) | %.1f %% | | |'
                     % (100 * pr['netns_release_elsewhere']))
        L.append('')
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--petri', default=os.path.join(REPO, 'build', 'petri'))
    ap.add_argument('--out', default=os.path.join(HERE, 'results'))
    ap.add_argument('--only', default='', help='comma-separated: client,print,oneclient,'
                    'pandas,stateful,throughput,memory,cpu,fair,profile')
    ap.add_argument('--quick', action='store_true',
                    help='fewer repetitions (as BENCH_QUICK=1)')
    ap.add_argument('--profile', nargs='?', const='auto', choices=('auto', 'perf', 'strace'),
                    help='also profile petri\'s process tree during a burst of one-shots '
                    '(perf, or strace -c where perf cannot record)')
    args = ap.parse_args()
    global QUICK
    QUICK = QUICK or args.quick
    if os.geteuid() != 0:
        log('bench: note: not root; petri and the peers may have fewer features')
    suite = Suite(args)

    def on_signal(sig, frame):
        raise KeyboardInterrupt('signal %d' % sig)
    signal.signal(signal.SIGTERM, on_signal)
    only = set(filter(None, args.only.split(',')))
    t0 = time.monotonic()
    try:
        suite.setup()
        steps = [('client', suite.client_overhead), ('print', suite.oneshot_print),
                 ('print', suite.oneshot_cpu), ('oneclient', suite.oneshot_one_client),
                 ('pandas', suite.oneshot_pandas), ('stateful', suite.stateful),
                 ('throughput', suite.throughput), ('memory', suite.memory),
                 ('cpu', suite.cpu_overhead), ('fair', suite.fairness)]
        for name, f in steps:
            if not only or name in only:
                f()
        if args.profile or 'profile' in only:
            suite.profile()
    finally:
        suite.teardown()
    res = suite.results
    res['total_seconds'] = round(time.monotonic() - t0, 1)
    md = render(res)
    log('\n' + md)
    os.makedirs(args.out, exist_ok=True)
    stem = '%s-%s%s' % (datetime.date.today().isoformat(), socket.gethostname(),
                        '-quick' if QUICK else '')
    base, k = stem, 1
    while os.path.exists(os.path.join(args.out, stem + '.md')):   # keep earlier runs
        k += 1
        stem = '%s-%d' % (base, k)
    with open(os.path.join(args.out, stem + '.md'), 'w') as f:
        f.write(md + '\n')
    with open(os.path.join(args.out, stem + '.json'), 'w') as f:
        json.dump(res, f, indent=1, default=str)
        f.write('\n')
    log('results: %s.{md,json} (%.0f s in all)' % (os.path.join(args.out, stem),
                                                    res['total_seconds']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
