"""Helpers of the adversarial tier (tests/hostile), which the CPython tier
uses too: running code on the three paths, and looking at the host from the
outside.  It stands in tests/, where every tier finds it by name
(`import hostilehelp as H`), not beside the tier's tests.

Paths
-----
run         `petri run --json` (the cold path, one sandbox per run)
serve-cold  a `petri serve` session with `[sessions] warm = false`
serve-warm  a `petri serve` session forked from the template (the default)

Host-side views
---------------
HOST_FEATURES  what an attack may need of the kernel (the 32-bit syscall
               entry), probed outside any sandbox (conftest's host_lacks).
HostSnapshot   hashes of host files a sandbox must never change (and the
               kernel knobs it must never turn), the LISTEN sockets of the
               host's network namespace owned by a sandbox uid.
sandbox_procs  every host process running as a sandbox uid (>= 2000000000),
               with its pid namespace, cgroups and ancestors.
orphans        sandbox processes with no live petri process above them.

Everything here waits with bounded polls (never a sleep-and-hope), so a
noisy machine makes a test slower, never flaky.
"""
import base64
import contextlib
import hashlib
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import weakref
from pathlib import Path

import requests

import harness
import memcg
from harness import (PETRI, SANDBOX_UID_MIN, all_pids, cgroup_tag, petri_lock,  # noqa: F401
                     proc_status, read_text, stat_fields, wait_for)

HERE = Path(__file__).resolve().parent / 'hostile'    # the tier: its corpus, its sweep
ROOT = HERE.parents[1]
CORPUS = HERE / 'corpus'
SWEEP_C = HERE / 'sweep' / 'syscall_sweep.c'
PYTHON = '/usr/bin/python3'
CGROUP_FS = '/sys/fs/cgroup'
# Put in the environment of every petri process the tier starts: a sandbox
# must never see it (the daemon's and pid 1's environment are host secrets).
CANARY_NAME = 'PETRI_HOSTILE_CANARY'
CANARY_VALUE = 'c4n4ry-' + 'e3b9a1f07d'
PATHS = ('run', 'serve-cold', 'serve-warm')
SETTLE_S = 30                            # bounded wait for teardown, per check

# Up to 3dd9757 the warm path lost every byte a session wrote to fd 1
# (test_findings.py::test_session_stdout_reaches_the_client).  Programs
# report on stderr so that the corpus stays meaningful if it comes back;
# set this to True to skip the stdout checks of warm sessions meanwhile.
WARM_STDOUT_LOST = False

DEFAULT_LIMITS = {'timeout': 5, 'memory': 256, 'pids': 64, 'disk': 64, 'cpu': 1.0,
                  'output_kb': 256}

SERVER_CONFIG = """\
[server]
max_sessions = 40
max_executions = 16
log_level = info

[sessions]
idle_timeout_s = 900
max_lifetime_s = 3600
pool_size = 1
{warm}
[limits]
memory_mb = 256
cpu = 1.0
pids = 64
disk_mb = 64
timeout_s = 5
output_kb = 256

[max_limits]
memory_mb = 2048
cpu = 2.0
pids = 1024
disk_mb = 1024
timeout_s = 120
output_kb = 8192
"""


def petri_env():
    env = dict(os.environ)
    env.pop('PETRI_NO_CGROUPS', None)
    env[CANARY_NAME] = CANARY_VALUE
    return env


def wait_until(pred, timeout=SETTLE_S, step=0.1):
    """harness.wait_for with this tier's default deadline: poll pred()
    until it returns a truthy value or timeout; return the last value."""
    return wait_for(pred, timeout, step)


# ---------------------------------------------------------------- /proc views

def ns_inode(pid, ns):
    try:
        link = os.readlink(f'/proc/{pid}/ns/{ns}')
    except OSError:
        return None
    m = re.search(r'\[(\d+)\]', link)
    return int(m.group(1)) if m else None


def sandbox_procs():
    """{pid: status dict} of host processes whose real uid is a sandbox uid
    (zombies included: a zombie still holds a pid of the sandbox)."""
    out = {}
    for pid in all_pids():
        st = proc_status(pid)
        if not st or 'Uid' not in st:
            continue
        if int(st['Uid'].split()[0]) >= SANDBOX_UID_MIN:
            out[pid] = st
    return out


def proc_cgroups(pid):
    """Host cgroup directories of pid (v1 hierarchies and the v2 one)."""
    text = read_text(f'/proc/{pid}/cgroup') or ''
    dirs = []
    for line in text.splitlines():
        parts = line.split(':', 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        if ctrls == '':
            base = os.path.join(CGROUP_FS, 'unified')
        else:
            name = ctrls.replace('name=', '')
            base = os.path.join(CGROUP_FS, name)
            if not os.path.isdir(base):
                base = os.path.join(CGROUP_FS, ctrls.split(',')[0].replace('name=', ''))
        dirs.append(os.path.normpath(base + path))
    return dirs


def petri_cgroups_of(pid):
    """The cgroup directories of pid that petri made (a .../petri/... path)."""
    return [d for d in proc_cgroups(pid) if '/petri/' in d]


def ancestors(pid):
    chain = []
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        f = stat_fields(pid)
        if not f:
            break
        pid = int(f[1])
        chain.append(pid)
    return chain


def comm(pid):
    return (read_text(f'/proc/{pid}/comm') or '').strip()


# Host pids of the petri processes this worker started.  The machine is
# shared (other suites run petri too, some kill it on purpose), so the leak
# checks look only at sandboxes of our own petri processes: their cgroups
# are named p<pid>-... after the petri process that made them.
STARTED = set()


def orphans():
    """Sandbox processes in a cgroup of a petri process this worker started
    that no longer runs: what a sandbox left behind."""
    dead = {p for p in STARTED if not os.path.exists(f'/proc/{p}')}
    if not dead:
        return []
    bad = []
    for pid, st in sandbox_procs().items():
        for d in proc_cgroups(pid):
            m = re.search(r'/petri/p(\d+)-', d)
            if m and int(m.group(1)) in dead:
                bad.append((pid, comm(pid), st.get('State'), d))
                break
    return bad


def procs_in_pidns(inode):
    return [p for p in all_pids() if ns_inode(p, 'pid') == inode]


def cgroup_tasks(d):
    text = read_text(os.path.join(d, 'cgroup.procs'))
    if text is None:
        return None                      # gone
    return [int(x) for x in text.split()]


# ---------------------------------------------------------------- host state

def sha256(path):
    h = hashlib.sha256()
    try:
        with open(path, 'rb') as f:
            for chunk in iter(lambda: f.read(1 << 20), b''):
                h.update(chunk)
    except OSError as e:
        return f'error {e.errno}'
    return h.hexdigest()


def listen_sockets():
    """LISTEN sockets of the host's network namespace: {(proto, local): uid}."""
    out = {}
    for proto in ('tcp', 'tcp6'):
        text = read_text(f'/proc/net/{proto}') or ''
        for line in text.splitlines()[1:]:
            f = line.split()
            if len(f) > 7 and f[3] == '0A':
                out[(proto, f[1])] = int(f[7])
    return out


def sandbox_listeners():
    return {k: uid for k, uid in listen_sockets().items() if uid >= SANDBOX_UID_MIN}


# Why an attack cannot be made on this kernel, as the tier says it.
NO_I386_ENTRY = ('this kernel has no 32-bit syscall entry (int 0x80 is SIGSEGV without '
                 'any filter)')


def i386_entry(workdir):
    """Does this kernel take int 0x80?  Asked OUTSIDE any sandbox, with no
    filter in place: the sweep's `--i386-getpid` (one getpid through int
    0x80, in a child).  A kernel without IA32 emulation, or booted or
    virtualised so that int 0x80 does not reach it, answers SIGSEGV: then
    no i386 call ever reaches a sandbox's filter, and a SIGSEGV inside is
    the call not running rather than the filter failing to kill it."""
    exe = Path(workdir) / 'i386_getpid'
    subprocess.run(['gcc', '-O1', '-o', str(exe), str(SWEEP_C)], check=True,
                   capture_output=True)
    p = subprocess.run([str(exe), '--i386-getpid'], capture_output=True, text=True,
                       timeout=60)
    m = re.fullmatch(r'SWEEP i386 20 (\S+) (\S+)\n', p.stderr)
    assert p.returncode == 0 and m, f'the int 0x80 probe said {p.returncode} {p.stderr!r}'
    if m.group(1) == 'ret':
        return True
    if m.groups() == ('sig', str(int(signal.SIGSEGV))):
        return False
    raise AssertionError(f'int 0x80 getpid outside any sandbox: {m.group(1)} {m.group(2)}')


# The host features an attack may need (the corpus header `needs`): the
# probe, given a scratch directory, and what the tier says when it is missing.
HOST_FEATURES = {'i386-entry': (i386_entry, NO_I386_ENTRY)}


class HostSnapshot:
    """What the host looks like, for a before/after comparison."""

    def __init__(self, markers):
        self.files = {}
        for p in [*markers, '/etc/passwd', '/etc/shadow', '/etc/hostname', '/etc/hosts',
                  os.path.realpath('/usr/bin/python3'), os.path.realpath('/bin/bash')]:
            self.files[p] = sha256(p)
        self.knobs = {}
        for p in ('/proc/sys/kernel/core_pattern', '/proc/sys/kernel/hostname',
                  '/proc/sys/kernel/modprobe', '/proc/sys/vm/overcommit_memory',
                  '/proc/sys/kernel/unprivileged_bpf_disabled'):
            self.knobs[p] = read_text(p)
        self.uts = os.uname().nodename

    def changes(self, other):
        out = []
        for p, h in self.files.items():
            if other.files.get(p) != h:
                out.append(f'host file {p} changed: {h} -> {other.files.get(p)}')
        for p, v in self.knobs.items():
            if other.knobs.get(p) != v:
                out.append(f'host knob {p} changed: {v!r} -> {other.knobs.get(p)!r}')
        if other.uts != self.uts:
            out.append(f'host hostname changed: {self.uts} -> {other.uts}')
        return out


# ---------------------------------------------------------------- the corpus

HEADER_RE = re.compile(r'^\s*(?:#|//|/\*|\*)\s*([a-z][a-z-]*):\s*(.*?)\s*(?:\*/)?\s*$')
LANG_OF = {'.py': 'python', '.sh': 'bash', '.c': 'c'}


class Program:
    """A corpus file and what its header says.

    Header keys (comment lines at the top, `# key: value` or `// key: value`):
      attack   what it tries (required)
      expect   the contained outcome, in words (required)
      status   the statuses that count as contained (default: ok)
      limits   overrides of DEFAULT_LIMITS, e.g. `timeout=3 pids=32`
      marker   a string that must appear in stdout+stderr: proof the program
               got as far as checking (default CONTAINED; `-` for none)
      paths    the paths it runs on (default: all three)
      exact    a Python bytes literal the program writes to stderr (and to
               stdout): returned without loss
      truncated  stdout|stderr: that stream must come back truncated
      xfail    `PATH... -- REASON`: a known escape or bug on those paths
               (strict: the day it is fixed the test says so)
      needs    a host feature the attack needs (`i386-entry`).  A program
               that finds it cannot make its attack says `LACKS: ...` on
               stderr; that stands in for the marker only where the host,
               probed outside any sandbox, truly lacks the feature (the
               test then warns why), and is a failure anywhere else
    Any `ESCAPE` in the output means the program did what it must not."""

    def __init__(self, path):
        self.path = Path(path)
        self.name = self.path.name
        self.lang = LANG_OF[self.path.suffix]
        self.source = self.path.read_text()
        self.meta = {}
        for line in self.source.splitlines()[:40]:
            m = HEADER_RE.match(line)
            if m and m.group(1) in ('attack', 'expect', 'status', 'limits', 'marker',
                                    'paths', 'exact', 'truncated', 'xfail', 'needs'):
                self.meta.setdefault(m.group(1), m.group(2))
        assert 'attack' in self.meta and 'expect' in self.meta, f'{self.name}: header'
        self.statuses = set(self.meta.get('status', 'ok').replace(',', ' ').split())
        self.limits = dict(DEFAULT_LIMITS)
        for item in self.meta.get('limits', '').split():
            k, _, v = item.partition('=')
            assert k in DEFAULT_LIMITS, f'{self.name}: unknown limit {k}'
            self.limits[k] = float(v) if k == 'cpu' else int(v)
        self.marker = self.meta.get('marker', 'CONTAINED')
        self.paths = tuple(self.meta.get('paths', ' '.join(PATHS)).split())
        self.exact = None
        if 'exact' in self.meta:
            import ast
            self.exact = ast.literal_eval(self.meta['exact'])
        self.truncated = self.meta.get('truncated')
        self.needs = self.meta.get('needs')
        assert self.needs in (None, *HOST_FEATURES), f'{self.name}: needs {self.needs}'
        # `xfail: PATH... -- REASON`: a known escape or bug on those paths
        self.xfail = {}
        if 'xfail' in self.meta:
            where, _, reason = self.meta['xfail'].partition(' -- ')
            for p in where.split():
                assert p in PATHS, f'{self.name}: xfail path {p}'
                self.xfail[p] = reason


def corpus_programs():
    return sorted((Program(p) for p in CORPUS.iterdir() if p.suffix in LANG_OF),
                  key=lambda p: p.name)


# ---------------------------------------------------------------- results

def out_bytes(result, stream):
    if result.get(stream + '_base64') is not None:
        return base64.b64decode(result[stream + '_base64'], validate=True)
    return result[stream].encode('utf-8')


def describe(result):
    r = dict(result or {})
    for k in ('stdout', 'stderr', 'stdout_base64', 'stderr_base64'):
        if isinstance(r.get(k), str) and len(r[k]) > 1500:
            r[k] = r[k][:1000] + f'...<{len(r[k])} chars>...' + r[k][-300:]
    if isinstance(r.get('results'), list) and len(r['results']) > 5:
        r['results'] = r['results'][:5] + [f'... {len(result["results"])} in all']
    return json.dumps(r, indent=1)[:6000]


def strict_json(text):
    def reject(name):
        raise ValueError(f'non-standard JSON constant {name}')
    return json.loads(text, parse_constant=reject)


# ---------------------------------------------------------------- petri run

def petri_run(program_path, lang, limits, timeout=None, extra=()):
    """`petri run --json` on a file: (result dict, its cgroup_tag(), the
    completed Popen)."""
    args = [PETRI, 'run', '--json', '-l', lang, '-t', str(limits['timeout']),
            '-m', str(limits['memory']), '--pids', str(limits['pids']),
            '--disk', str(limits['disk']), '--cpus', str(limits['cpu']), *extra,
            str(program_path)]
    with petri_lock():
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=petri_env())
        STARTED.add(p.pid)
        tag = cgroup_tag(p.pid)
        try:
            out, err = p.communicate(timeout=timeout or limits['timeout'] + 60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError(f'petri run did not finish: {err[-2000:]!r}')
    lines = out.decode('utf-8').splitlines()
    assert len(lines) == 1, f'petri run printed {len(lines)} lines; stderr {err[-2000:]!r}'
    return strict_json(lines[0]), tag, p


def run_leftovers(tag):
    """Processes and cgroups, named by cgroup_tag(), of a petri process that
    has finished."""
    procs = [pid for pid in sandbox_procs()
             if any(f'/petri/{tag}' in d for d in proc_cgroups(pid))]
    dirs = []
    for ctrl in os.listdir(CGROUP_FS):
        for dirpath, dirnames, _ in os.walk(os.path.join(CGROUP_FS, ctrl)):
            if os.path.basename(dirpath) == 'petri':
                dirs += [os.path.join(dirpath, d) for d in dirnames
                         if d.startswith(tag)]
                dirnames[:] = []
    return procs + dirs


# ---------------------------------------------------------------- petri serve

def slow_socket(port, timeout=60):
    """A connection to the loopback port whose receive window is tiny: the
    server's writes stall."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(timeout)
    s.connect(('127.0.0.1', port))
    return s


def read_headers(s):
    """An HTTP response's head as text, once it came, and how many bytes of
    the body came with it."""
    data = b''
    while b'\r\n\r\n' not in data:
        chunk = s.recv(1024)
        assert chunk, f'closed before the headers: {data!r}'
        data += chunk
    head, _, rest = data.partition(b'\r\n\r\n')
    return head.decode('latin-1'), len(rest)


class Api(harness.Api):
    """harness.Api with this tier's own session() and execute() (the
    result read as strict JSON)."""

    def __init__(self, url, key=None):
        super().__init__(url, key, timeout=180)

    def session(self, limits=None, env=None):
        body = {}
        if limits:
            body['limits'] = limits
        if env:
            body['env'] = env
        r = self.post('/v1/sessions', body)
        assert r.status_code == 201, r.text
        return r.json()['id']

    def execute(self, sid, code, language='python', timeout_s=None):
        body = {'code': code, 'language': language}
        if timeout_s is not None:
            body['timeout_s'] = timeout_s
        r = self.post(f'/v1/sessions/{sid}/execute', body)
        assert r.status_code == 200, f'{r.status_code} {r.text[:2000]}'
        assert r.headers.get('Content-Type', '').startswith('application/json')
        return strict_json(r.text)


def starved(result, timeout_s):
    """A timeout that says more about the machine than about the program:
    the sandbox got under a quarter of a CPU for the whole of its wall-clock
    limit (CI shares its two cores; a fork bomb once got 0.76 s of CPU in
    its 8 s).  A program stuck in a way that matters times out again when
    run once more with four times the time."""
    return (result.get('status') == 'timeout' and
            (result.get('cpu_ms') or 0) < timeout_s * 1000 / 4)


def longer(limits, factor=4):
    """The same limits with `factor` times the time."""
    return dict(limits, timeout=limits['timeout'] * factor)


def api_limits(limits):
    return {'memory_mb': limits['memory'], 'cpu': limits['cpu'], 'pids': limits['pids'],
            'disk_mb': limits['disk'], 'timeout_s': limits['timeout'],
            'output_kb': limits['output_kb']}


class Server(harness.Daemon):
    """A `petri serve` (harness.Daemon) with a neighbour session that must
    keep answering whatever the others do; .api is its Api."""

    _n = itertools.count()

    def __init__(self, tmpdir, warm, extra_config='', preexec_fn=None, key=None):
        """key: the API key its own requests carry (the config names it)."""
        self.warm = warm
        cfg = SERVER_CONFIG.format(warm='' if warm else 'warm = false\n') + extra_config
        super().__init__(tmpdir, cfg, name=f'petri-hostile-{next(self._n)}', env=petri_env(),
                         preexec_fn=preexec_fn)
        STARTED.add(self.pid)
        self.api = Api(self.url, key)
        if warm:
            # The template starts in the background: wait for it, so that
            # every session of this server is a warm one.  /healthz says
            # when (never a line of the log); failed or a dead daemon ends
            # the wait at once.
            state = self.wait_warm(120)
            assert state == 'ready', \
                f'the warm template did not start ({state}): {self.stderr_text()[-2000:]}'
        self.neighbour = self.api.session()
        why = self.neighbour_ok()
        assert why is None, why

    def neighbour_ok(self):
        """None if the daemon and the neighbour session are fine, else why."""
        if self.proc.poll() is not None:
            return f'the daemon exited with {self.proc.returncode}: {self.stderr_text()[-3000:]}'
        try:
            h = self.api.get('/healthz', timeout=30)
            if h.status_code != 200:
                return f'/healthz answered {h.status_code}'
            r = self.api.post(f'/v1/sessions/{self.neighbour}/execute',
                              {'code': '1+1'}, timeout=60)
        except requests.RequestException as e:
            return f'the daemon did not answer: {e}'
        if r.status_code != 200 or r.json().get('results') != [{'text/plain': '2'}]:
            return f'the neighbour session failed: {r.status_code} {r.text[:500]}'
        return None

    def stop(self):
        """SIGTERM; the exit code (that of SIGKILL after 60 s)."""
        try:
            return super().stop(60)
        except subprocess.TimeoutExpired:
            return self.proc.returncode


@contextlib.contextmanager
def jailed_server(tmpdir, name, limit, extra_config='', key=None):
    """A `petri serve` (cold sessions) in a memory cgroup of the test's own
    (tests/memcg.py), for a test that attacks it; yields (server, cgroup).
    At the end the neighbour must still answer, nothing may have been
    OOM-killed and the daemon must exit 0."""
    with memcg.MemoryCgroup(name, limit) as cg:
        srv = Server(tmpdir, warm=False, extra_config=extra_config, preexec_fn=cg.enter,
                     key=key)
        try:
            yield srv, cg
            why = srv.neighbour_ok()
            assert why is None, why
            assert cg.oom_kills() == 0, 'the daemon was OOM-killed in its cgroup'
        finally:
            code = srv.stop()
            # The daemon leaves its (empty) cgroup parent behind in ours.
            for root, dirs, _ in os.walk(cg.path, topdown=False):
                for d in dirs:
                    try:
                        os.rmdir(os.path.join(root, d))
                    except OSError:
                        pass
            assert code == 0, srv.stderr_text()[-3000:]


class SessionWatch:
    """Host-side handle of one session: its pid namespace and cgroups, found
    through a first Python execution that reports /proc/self/ns/pid."""

    PROBE = "import os, sys\n(os.readlink('/proc/self/ns/pid'), 'pandas' in sys.modules)"

    def __init__(self, api, sid, warm=None):
        self.api = api
        self.sid = sid
        r = api.execute(sid, self.PROBE)
        for _ in range(2):
            # A probe that timed out having had next to no CPU (a few ms
            # of its 2 s on a CI machine running six test processes) says
            # the machine is busy; one stuck for a reason times out again.
            if not starved(r, 1):
                break
            r = api.execute(sid, self.PROBE)
        assert r['status'] == 'ok', describe(r)
        text = r['results'][0]['text/plain']
        self.warm = text.endswith('True)')
        if warm is not None:
            assert self.warm == warm, f'expected a {"warm" if warm else "cold"} session: {text}'
        m = re.search(r'\[(\d+)\]', text)
        self.pidns = int(m.group(1))
        self.pids = procs_in_pidns(self.pidns)
        assert self.pids, 'no host process in the session pid namespace'
        # Hold the namespace: the kernel reuses a freed namespace's inode
        # number, and the pool's next sandbox (two python3 processes) took
        # this one's within the settle time, so they looked left behind.
        fd = os.open(f'/proc/{self.pids[0]}/ns/pid', os.O_RDONLY)
        weakref.finalize(self, os.close, fd)
        assert os.fstat(fd).st_ino == self.pidns, 'the session pid 1 changed under the watch'
        self.cgroups = sorted({d for p in self.pids for d in petri_cgroups_of(p)})
        assert self.cgroups, f'the session has no petri cgroup: {proc_cgroups(self.pids[0])}'

    def host_procs(self):
        return procs_in_pidns(self.pidns)

    def leftovers(self):
        """What remains of the session on the host after its deletion."""
        left = [f'process {p} ({comm(p)})' for p in self.host_procs()]
        left += [f'cgroup {d} (tasks {cgroup_tasks(d)})' for d in self.cgroups
                 if os.path.isdir(d)]
        return left
