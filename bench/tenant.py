#!/usr/bin/python3
"""What one hostile tenant costs everyone else: the numbers of
docs/security.md ("What a tenant can cost the daemon"), measured.

    /usr/bin/python3 bench/tenant.py --petri build/petri [--only frames,flood,...]

Starts a `petri serve` of its own (warm, inside a memory cgroup of the
bench's own, with a uid range of its own), then, one at a time:

  frames   four sessions each write a 15 MiB hostile frame (a tree of empty
           objects) on their control channel while two clients POST 60 MiB
           hostile JSON bodies: the daemon's peak RSS, whether it lived, and
           whether a bystander session still answers.  Target: < 300 MiB.
  flood    one session rewrites a prebuilt 15 MiB result frame in a loop: the
           daemon's CPU time per second of flooding.  Target: < 0.2 s.
  hangup   one session closes its fds 1, 2 and 3 and sleeps: the daemon's CPU
           per second.  Target: ~0.
  slow     1000 connections that trickle a header byte now and then are held
           open while /healthz is asked 300 times: its p50 and p99.
           Target: p99 < 1 s.
  held     answers held for slow readers, against a daemon of its
           own (two API keys, max_sessions = 20, max_executions = 8, in a
           3 GiB memory cgroup): 8 sessions of key A loop executions that
           display() 3 x 6 MiB of HTML, each on a new connection that reads
           256 KiB every 5 s, for --duration seconds (90), while key B's
           bystander does `1+1` round trips.  The daemon alive, its RSS at
           start, peak and 10 s after every attacking connection is closed,
           the statuses key A got, the connections the daemon closed with
           their answer unread, the bystander's p50/p99 against its idle
           p50.  Targets: alive, peak RSS under the bound for the attack
           (RSS at start + max_answers_mb + max_executions x 84 MiB), RSS
           back near its start, the bystander never refused and its p99
           < 2 x idle p50.
           With --baseline PATH (a build from before), run against both.

Every daemon keeps its state (the execution record) in the bench's temporary
directory ($STATE_DIRECTORY), never the machine's.

Prints a table and writes bench/results/<date>-tenant.{md,json}.
"""
import argparse
import http.client
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
import memcg  # noqa: E402

CONFIG = """\
[server]
{server}
log_level = info

[sessions]
pool_size = 2

[sandbox]
{sandbox}
"""
SHARED_SERVER = "max_sessions = 40\nmax_executions = 16"

# held: two tenants (the attacker A, the bystander B) and the limits of the
# review that found the attack.
# max_answers_mb and min_read_kbps stay at their defaults (256 MiB, 256 KiB/s):
# a build from before the change does not know them.
KEY_A, KEY_B = 'bench-key-a-' + 'a' * 24, 'bench-key-b-' + 'b' * 24
HELD_SERVER = f"api_keys = {KEY_A}, {KEY_B}\nmax_sessions = 20\nmax_executions = 8"
HELD_MAX_EXECUTIONS = 8
HELD_CGROUP = 3 << 30
# What docs/security.md charges a running execution (frame buffer, results
# and their JSON, output): 84 MiB; and max_answers_mb's default.
EXECUTION_MIB, ANSWERS_MIB = 84, 256
# One representation holds at most 8 MiB: three of 6 MiB make an answer of
# ~18 MiB, well under the 32 MiB results cap.
HTML_MIB, HTML_COUNT = 6, 3
HTML_CODE = (f"class Page:\n"
             f"    def _repr_html_(self):\n"
             f"        return '<p>' + 'x' * {HTML_MIB << 20} + '</p>'\n"
             f"for _ in range({HTML_COUNT}):\n"
             f"    display(Page())\n")
READ_BYTES, READ_EVERY_S = 256 << 10, 5

# Inside a sandbox: write one frame of about `mb` MiB whose JSON is a tree
# of empty objects, or rewrite it `loop` seconds long.
# KIND tree: a tree of empty objects (what jansson would build at ~80 times
# its size); KIND text: one long string, the most a result may carry.
FRAME_CODE = r'''
import os, struct, sys, time
def exec_id():
    f = sys._getframe()
    while f is not None:
        s = f.f_globals.get("S")
        if s is not None and hasattr(s, "exec_id"):
            return s.exec_id
        f = f.f_back
ID = exec_id()
n = MB * (1 << 20) // 3
head = b'{"type":"result","id":%d,"data":' % ID
if 'KIND' == 'tree':
    body = head + b'{"x":[' + b'{},' * (n - 1) + b'{}]}}'
else:
    body = head + b'{"text/plain":"' + b'A' * (3 * n) + b'"}}'
frame = struct.pack('>I', len(body)) + body
end = time.monotonic() + LOOP
sent = 0
while True:
    view = memoryview(frame)
    try:
        while view:
            k = os.write(3, view)
            view = view[k:]
        sent += 1
    except OSError:
        break
    if time.monotonic() >= end:
        break
time.sleep(SLEEP)
print(sent)
'''


def frame_code(mb, loop, sleep, kind='tree'):
    return (FRAME_CODE.replace('MB', str(mb)).replace('LOOP', str(loop))
            .replace('SLEEP', str(sleep)).replace('KIND', kind))


HANGUP_CODE = r'''
import os, time
for fd in (1, 2, 3):
    os.close(fd)
time.sleep({secs})
'''


def proc_cpu_s(pid):
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def rss(pid):
    out = {}
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            k, _, v = line.partition(':')
            if k in ('VmRSS', 'VmHWM'):
                out[k] = int(v.split()[0]) * 1024
    return out


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Server:
    def __init__(self, binary, workdir, cg, sandbox_cfg, server_cfg=SHARED_SERVER, key=None):
        cfg = Path(workdir) / 'tenant.ini'
        cfg.write_text(CONFIG.format(server=server_cfg, sandbox=sandbox_cfg))
        self.key = key
        # The record (persistent by default) goes to the bench's temporary
        # directory, not to the machine's /var/lib/petri.
        env = {**os.environ, 'STATE_DIRECTORY': str(Path(workdir) / 'state')}
        self.proc = subprocess.Popen([binary, 'serve', '--listen', '127.0.0.1:0', '--config',
                                      str(cfg)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, errors='replace',
                                     preexec_fn=cg.enter, env=env)
        self.err = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()
        line = self.proc.stdout.readline()
        m = re.search(r'http://([\d.]+):(\d+)', line)
        if not m:
            raise SystemExit(f'petri serve did not start: {line!r} {"".join(self.err)[-2000:]}')
        self.host, self.port = m.group(1), int(m.group(2))
        # The warm path settled (GET /healthz: ready, off, failed), the
        # daemon exited, or 120 s passed.
        deadline = time.monotonic() + 120
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                if json.loads(self.request('GET', '/healthz', timeout=5)[1]).get('warm') in \
                        ('ready', 'off', 'failed'):
                    break
            except (OSError, ValueError, http.client.HTTPException):
                pass
            time.sleep(0.2)

    def request(self, method, path, body=None, timeout=120, key=None):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {'Content-Type': 'application/json'} if data is not None else {}
            if key or self.key:
                headers['Authorization'] = f'Bearer {key or self.key}'
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            text = r.read()
            return r.status, text
        finally:
            c.close()

    def session(self, key=None):
        st, text = self.request('POST', '/v1/sessions', {}, key=key)
        assert st == 201, (st, text)
        return json.loads(text)['id']

    def metric(self, name):
        """A metric's value, or None (a build without it, or no answer)."""
        try:
            st, text = self.request('GET', '/metrics', timeout=10)
        except (OSError, http.client.HTTPException):
            return None
        for line in text.decode(errors='replace').splitlines() if st == 200 else ():
            if line.startswith(name + ' '):
                return float(line.split()[1])
        return None

    def execute(self, sid, code, timeout_s=30):
        st, text = self.request('POST', f'/v1/sessions/{sid}/execute',
                                {'code': code, 'timeout_s': timeout_s}, timeout=timeout_s + 30)
        try:
            return st, json.loads(text)
        except ValueError:
            return st, {'raw': text[:200]}

    def alive(self):
        return self.proc.poll() is None

    def bystander_ok(self, sid):
        st, r = self.execute(sid, '1+1')
        return st == 200 and r.get('results') == [{'text/plain': '2'}]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def hostile_body(mb):
    n = mb * (1 << 20) // 3
    return b'[' + b'{},' * (n - 1) + b'{}]'


def post_raw(host, port, body, out):
    """POST body chunked (no Content-Length to refuse it by)."""
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=120)
        pieces = (body[i:i + (1 << 20)] for i in range(0, len(body), 1 << 20))
        c.request('POST', '/v1/sessions', body=pieces, encode_chunked=True,
                  headers={'Content-Type': 'application/json'})
        r = c.getresponse()
        r.read()
        out.append((r.status, time.monotonic() - t0))
        c.close()
    except OSError as e:
        out.append((f'{type(e).__name__}', time.monotonic() - t0))


def bench_frames(srv, by):
    before = rss(srv.proc.pid)
    sids = [srv.session() for _ in range(4)]
    results, bodies = [], []
    threads = [threading.Thread(target=lambda s=s: results.append(
        srv.execute(s, frame_code(15, 0, 2)))) for s in sids]
    threads += [threading.Thread(target=post_raw, args=(srv.host, srv.port, hostile_body(60),
                                                        bodies)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = rss(srv.proc.pid) if srv.alive() else {}
    return {
        'rss_before_mib': before['VmRSS'] / 2**20,
        'peak_rss_mib': after.get('VmHWM', 0) / 2**20,
        'daemon_alive': srv.alive(),
        'bystander_ok': srv.alive() and srv.bystander_ok(by),
        'sessions': [f"{st} {r.get('status')}: {(r.get('reason') or '')[:80]}" for st, r in results],
        'bodies': [f'{st} in {t:.2f} s' for st, t in bodies],
    }


def daemon_cpu_during(srv, by, code, timeout_s):
    """Run code in a new session; the daemon's CPU meanwhile, per second."""
    sid = srv.session()
    c0, t0 = proc_cpu_s(srv.proc.pid), time.monotonic()
    st, r = srv.execute(sid, code, timeout_s=timeout_s)
    wall = time.monotonic() - t0
    cpu = proc_cpu_s(srv.proc.pid) - c0
    return {'window_s': wall, 'daemon_cpu_s': cpu, 'daemon_cpu_per_s': cpu / wall,
            'ended': f"{st} {r.get('status')}: {(r.get('reason') or '')[:100]}",
            'bystander_ok': srv.bystander_ok(by)}


def bench_flood(srv, by, secs=10):
    return daemon_cpu_during(srv, by, frame_code(15, secs, 0, 'text'), secs + 20)


def bench_hangup(srv, by, secs=8):
    return daemon_cpu_during(srv, by, HANGUP_CODE.format(secs=secs), secs + 5)


def bench_slow(srv, by, n=1000, samples=300):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 256)), hard))
    socks, refused = [], 0
    for i in range(n):
        s = socket.socket()
        s.bind((f'127.0.0.{2 + i % 8}', 0))
        try:
            s.settimeout(2)
            s.connect((srv.host, srv.port))
            s.sendall(b'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n')
            socks.append(s)
        except OSError:
            refused += 1
            s.close()
    stop = threading.Event()

    def trickle():
        while not stop.wait(2):
            for s in list(socks):
                try:
                    s.send(b'X')
                except OSError:
                    pass

    tr = threading.Thread(target=trickle, daemon=True)
    tr.start()
    lat, fails = [], 0
    for _ in range(samples):
        t0 = time.monotonic()
        try:
            c = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
            c.request('GET', '/healthz')
            ok = c.getresponse().status == 200
            c.close()
        except OSError:
            ok = False
        lat.append(time.monotonic() - t0)
        fails += not ok
    held = 0
    for s in socks:
        try:
            s.setblocking(False)
            held += s.recv(1, socket.MSG_PEEK) != b''
        except BlockingIOError:
            held += 1
        except OSError:
            pass
    bystander = srv.bystander_ok(by)
    stop.set()
    for s in socks:
        s.close()
    return {'connections_opened': len(socks), 'refused': refused, 'still_held': held,
            'healthz_p50_ms': statistics.median(lat) * 1000, 'healthz_p99_ms': pct(lat, 99) * 1000,
            'healthz_failures': fails, 'bystander_ok': bystander}


class SlowReader:
    """One attacking connection: an execution asked for on it, its answer
    read READ_BYTES every READ_EVERY_S (by the trickle thread)."""

    def __init__(self, srv, index, sid):
        self.sock = socket.socket()
        # A small receive buffer, so that what the client has not read
        # stays with the daemon, not in the kernel's socket buffers.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, READ_BYTES)
        # Eight source addresses, as eight clients: max_connections_per_ip
        # is not what stops the attack.
        self.sock.bind((f'127.0.0.{2 + index % 8}', 0))
        self.sock.settimeout(120)
        self.sock.connect((srv.host, srv.port))
        body = json.dumps({'code': HTML_CODE}).encode()
        self.sock.sendall((f'POST /v1/sessions/{sid}/execute HTTP/1.1\r\n'
                           f'Host: {srv.host}:{srv.port}\r\n'
                           f'Authorization: Bearer {KEY_A}\r\n'
                           f'Content-Type: application/json\r\n'
                           f'Content-Length: {len(body)}\r\n\r\n').encode() + body)
        head = b''
        while b'\r\n\r\n' not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionResetError('closed before the headers')
            head += chunk
        head, _, rest = head.partition(b'\r\n\r\n')
        self.status = int(head.split(b' ', 2)[1])
        m = re.search(rb'(?im)^content-length:\s*(\d+)', head)
        self.length = int(m.group(1)) if m else None
        self.got = len(rest)
        # What it was: an answer to hold, or (small: read it whole) a refusal
        # or an execution that did not return the HTML.
        self.kind = f'{self.status} answer'
        if self.length is not None and self.length < (1 << 20):
            while len(rest) < self.length:
                chunk = self.sock.recv(self.length - len(rest))
                if not chunk:
                    break
                rest += chunk
            try:
                r = json.loads(rest)
                self.kind = f"{self.status} {(r.get('error') or {}).get('code') or r.get('status')}"
            except ValueError:
                self.kind = f'{self.status} (not JSON)'
            self.held = False
        else:
            self.held = True
        self.sock.setblocking(False)

    def trickle(self):
        """Read up to READ_BYTES; 'open', 'whole' (all read) or 'cut'."""
        want = READ_BYTES
        try:
            while want:
                chunk = self.sock.recv(want)
                if not chunk:
                    return 'whole' if self.length is not None and self.got >= self.length \
                        else 'cut'
                self.got += len(chunk)
                want -= len(chunk)
        except BlockingIOError:
            pass
        except OSError:
            return 'cut'
        return 'open'


def closed_unread(port):
    """The daemon's connections on port that it closed while what it had
    sent was still unread (FIN_WAIT1: its end queued behind the data)."""
    n = 0
    for name in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(name) as f:
                for line in list(f)[1:]:
                    fields = line.split()
                    n += int(fields[1].rsplit(':', 1)[1], 16) == port and fields[3] == '04'
        except OSError:
            pass
    return n


def mib_or_none(v):
    return None if v is None else v / 2**20


def held_attack(srv, cg, duration, sessions=8):
    """The held-answers attack against srv (see the header)."""
    pid = srv.proc.pid
    by = srv.session()
    sids = [srv.session(KEY_A) for _ in range(sessions)]
    # The bystander's idle round trip, before the attack.
    idle = []
    for _ in range(30):
        t0 = time.monotonic()
        ok = srv.bystander_ok(by)
        idle.append(time.monotonic() - t0)
        assert ok, 'the bystander fails before the attack'
        time.sleep(0.2)
    res = {'load_avg_at_start': os.getloadavg()[0], 'duration_s': duration,
           'answer_mib': HTML_MIB * HTML_COUNT, 'rss_start_mib': rss(pid)['VmRSS'] / 2**20,
           'bystander_idle_p50_ms': statistics.median(idle) * 1000}
    cpu0 = proc_cpu_s(pid)
    stop = threading.Event()
    lock = threading.Lock()
    statuses, kinds, conns, ends = {}, {}, [], {'whole': 0, 'cut': 0}
    held_bytes = [0, 0]          # the large answers key A's clients began: bytes, count
    samples, held = [], []       # (t, VmRSS); (t, petri_answers_held_bytes)
    died = [None]
    t_start = time.monotonic()

    def sample():
        n = 0
        while not stop.is_set() or n == 0:
            if srv.alive():
                try:
                    samples.append((time.monotonic() - t_start, rss(pid)['VmRSS']))
                except (OSError, KeyError):
                    pass
            if n % 4 == 0 and srv.alive():
                v = srv.metric('petri_answers_held_bytes')
                if v is not None:
                    held.append((time.monotonic() - t_start, v))
            n += 1
            time.sleep(0.5)

    def attack(i, sid):
        while not stop.is_set():
            try:
                c = SlowReader(srv, i, sid)
                code, kind = c.status, c.kind
            except (OSError, ValueError) as e:
                c, code = None, type(e).__name__
                kind = code
            with lock:
                statuses[code] = statuses.get(code, 0) + 1
                kinds[kind] = kinds.get(kind, 0) + 1
                if c is not None and c.held:
                    conns.append(c)
                    held_bytes[0] += c.length or 0
                    held_bytes[1] += 1
                    continue
            if c is not None:
                c.sock.close()
            # Refused: the attacker tries again soon.
            stop.wait(0.5)

    def trickle():
        while not stop.wait(READ_EVERY_S):
            with lock:
                live = list(conns)
            for c in live:
                end = c.trickle()
                if end != 'open':
                    c.sock.close()
                    with lock:
                        conns.remove(c)
                        ends[end] += 1

    lat, fails = [], []

    def bystander():
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                st, r = srv.execute(by, '1+1')
                why = None if st == 200 and r.get('results') == [{'text/plain': '2'}] else \
                    f"{st} {(r.get('error') or {}).get('code') or r.get('status')}"
            except (OSError, http.client.HTTPException) as e:
                why = type(e).__name__
            (lat.append(time.monotonic() - t0) if why is None else fails.append(why))
            stop.wait(0.25)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 8192)), hard))
    threads = [threading.Thread(target=f, daemon=True) for f in (sample, trickle, bystander)]
    threads += [threading.Thread(target=attack, args=(i, sid), daemon=True)
                for i, sid in enumerate(sids)]
    for t in threads:
        t.start()
    while time.monotonic() - t_start < duration:
        if not srv.alive():
            died[0] = time.monotonic() - t_start
            break
        time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(150)
    res['attack_s'] = time.monotonic() - t_start
    # (A daemon that died has all of them closed by the kernel: not counted.)
    res['key_a_closed_by_daemon_unread'] = closed_unread(srv.port) if srv.alive() else None
    res['daemon_cpu_s'] = proc_cpu_s(pid) - cpu0 if srv.alive() else None
    res['held_at_end_mib'] = held[-1][1] / 2**20 if held else None
    res['held_max_mib'] = max(v for _, v in held) / 2**20 if held else None
    # Every attacking connection closed; then ~10 s for the daemon to let go.
    with lock:
        open_at_end = len(conns)
        for c in conns:
            c.sock.close()
        conns.clear()
    time.sleep(10)
    alive = srv.alive()
    if died[0] is None and not alive:
        died[0] = time.monotonic() - t_start
    status = rss(pid) if alive else {}
    peak = max([v for _, v in samples] + [status.get('VmHWM', 0)])
    bound = res['rss_start_mib'] + ANSWERS_MIB + HELD_MAX_EXECUTIONS * EXECUTION_MIB
    lat_ms = [x * 1000 for x in lat]
    res.update({
        'daemon_alive': alive,
        'daemon_died_after_s': died[0],
        'daemon_oom_kills': cg.oom_kills(),
        'rss_peak_mib': peak / 2**20,
        'rss_bound_mib': bound,
        'rss_after_close_mib': status['VmRSS'] / 2**20 if alive else None,
        'cgroup_peak_mib': cg.peak() / 2**20,
        'cgroup_limit_mib': HELD_CGROUP / 2**20,
        'key_a_statuses': {str(k): v for k, v in sorted(statuses.items(), key=str)},
        'key_a_kinds': dict(sorted(kinds.items())),
        'key_a_answers_begun': held_bytes[1],
        'key_a_answers_mib': held_bytes[0] / 2**20,
        'key_a_answers_read_whole': ends['whole'],
        'key_a_answers_cut': ends['cut'],
        'key_a_connections_open_at_end': open_at_end,
        'answers_held_after_close_mib': mib_or_none(srv.metric('petri_answers_held_bytes'))
        if alive else None,
        'answers_cut_total': srv.metric('petri_answers_cut_total') if alive else None,
        'bystander_round_trips': len(lat_ms),
        'bystander_failures': len(fails),
        'bystander_failure_kinds': {k: fails.count(k) for k in sorted(set(fails))},
        'bystander_p50_ms': statistics.median(lat_ms) if lat_ms else None,
        'bystander_p99_ms': pct(lat_ms, 99) if lat_ms else None,
        'bystander_ok_after': alive and srv.bystander_ok(by),
        'rss_samples': [(round(t, 1), round(v / 2**20, 1)) for t, v in samples[::4]],
    })
    return res


def bench_held(binary, sandbox_cfg, duration):
    with tempfile.TemporaryDirectory(prefix='petri-held-') as tmp, \
            memcg.MemoryCgroup('held', HELD_CGROUP) as cg:
        srv = Server(binary, tmp, cg, sandbox_cfg, HELD_SERVER, key=KEY_B)
        try:
            return held_attack(srv, cg, duration)
        finally:
            srv.stop()


def held_lines(runs):
    """The held table: a column per build (before, after)."""
    def cell(r, f):
        try:
            return f(r)
        except (TypeError, KeyError):
            return 'n/a'

    def mib(v):
        return 'n/a' if v is None else f'{v:.0f} MiB'

    def alive(r):
        if r['daemon_alive']:
            return 'yes'
        return f"no (OOM kills: {r['daemon_oom_kills']}, gone after {r['daemon_died_after_s']:.0f} s)"

    def statuses(r):
        st = r['key_a_statuses']
        other = {k: v for k, v in st.items() if k not in ('200', '429', '503')}
        text = ' / '.join(str(st.get(k, 0)) for k in ('200', '429', '503'))
        return text + (f" (other: {', '.join(f'{k} {v}' for k, v in other.items())})"
                       if other else '')

    def by(r):
        if r['bystander_p99_ms'] is None:
            return f"no answer ({r['bystander_failures']} failures)"
        failed = ', '.join(f'{k} x {v}' for k, v in r['bystander_failure_kinds'].items())
        return (f"{r['bystander_p50_ms']:.0f} / {r['bystander_p99_ms']:.0f} ms "
                f"({r['bystander_round_trips']} answered, {r['bystander_failures']} failed"
                f"{': ' + failed if failed else ''})")

    rows = [
        ('daemon alive', alive, 'yes'),
        ('daemon RSS at start', lambda r: mib(r['rss_start_mib']), ''),
        ('daemon peak RSS (bound: start + max_answers_mb + max_executions x 84 MiB)',
         lambda r: f"{mib(r['rss_peak_mib'])} (bound {mib(r['rss_bound_mib'])})", '< bound'),
        ('daemon RSS 10 s after every attacking connection closed',
         lambda r: mib(r['rss_after_close_mib']), 'near start'),
        ('cgroup peak (daemon + sandboxes, limit 3 GiB)', lambda r: mib(r['cgroup_peak_mib']),
         ''),
        ('answers held (metric): max / 10 s after close',
         lambda r: f"{mib(r['held_max_mib'])} / {mib(r['answers_held_after_close_mib'])}", ''),
        ("key A's requests: 200 / 429 / 503", statuses, ''),
        ("key A's requests, what they were",
         lambda r: ', '.join(f'{k} x {v}' for k, v in r['key_a_kinds'].items()), ''),
        ("key A's large answers begun, in all",
         lambda r: f"{r['key_a_answers_begun']} ({mib(r['key_a_answers_mib'])})", ''),
        ('daemon CPU during the attack', lambda r: f"{r['daemon_cpu_s']:.1f} s", ''),
        ("key A's connections the daemon had closed, unread, at the attack's end / "
         "answers cut for their deadline (petri_answers_cut_total)",
         lambda r: ' / '.join('n/a' if v is None else str(int(v)) for v in (
             r['key_a_closed_by_daemon_unread'], r['answers_cut_total'])),
         ''),
        ('bystander (key B) `1+1`: idle p50', lambda r: f"{r['bystander_idle_p50_ms']:.0f} ms", ''),
        ('bystander during the attack: p50 / p99 of those answered', by,
         'p99 < 2 x idle p50, none refused'),
        ('load average at start', lambda r: f"{r['load_avg_at_start']:.1f}", ''),
    ]
    names = [n for n, _ in runs]
    r0 = runs[-1][1]
    lines = ['', f"## Answers held for slow readers (held): 8 sessions of key A, answers of "
             f"{r0['answer_mib']} MiB read {READ_BYTES >> 10} KiB every {READ_EVERY_S} s, "
             f"{r0['duration_s']:.0f} s", '',
             '| measure | ' + ' | '.join(names) + ' | target |',
             '|---|' + '---|' * len(names) + '---|']
    for label, f, target in rows:
        lines.append(f'| {label} | ' + ' | '.join(cell(r, f) for _, r in runs) + f' | {target} |')
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--petri', default=str(HERE.parent / 'build' / 'petri'))
    ap.add_argument('--only', default='frames,flood,hangup,slow,held')
    ap.add_argument('--sandbox-config', default='',
                    help='lines for [sandbox] (e.g. a uid range of the bench\'s own)')
    ap.add_argument('--duration', type=float, default=90,
                    help='seconds of the held attack (default 90)')
    ap.add_argument('--baseline', default=None,
                    help='a petri built from before a change: held runs against it too')
    args = ap.parse_args()
    only = args.only.split(',')
    out = {'date': time.strftime('%Y-%m-%d %H:%M'), 'petri': args.petri}
    shared = [n for n in only if n != 'held']
    if shared:
        with tempfile.TemporaryDirectory(prefix='petri-tenant-') as tmp, \
                memcg.MemoryCgroup('tenant', 2 << 30) as cg:
            srv = Server(args.petri, tmp, cg, args.sandbox_config)
            try:
                by = srv.session()
                for name in shared:
                    if not srv.alive():
                        out[name] = 'daemon dead'
                        continue
                    out[name] = globals()[f'bench_{name}'](srv, by)
                    print(name, json.dumps(out[name], indent=1), flush=True)
                out['daemon_cgroup_peak_mib'] = cg.peak() / 2**20
                out['daemon_oom_kills'] = cg.oom_kills()
            finally:
                srv.stop()
    held_runs = []
    if 'held' in only:
        if args.baseline:
            out['baseline'] = args.baseline
            out['held_baseline'] = bench_held(args.baseline, args.sandbox_config, args.duration)
            print('held (baseline)', json.dumps(out['held_baseline'], indent=1), flush=True)
            held_runs.append((f'before (`{args.baseline}`)', out['held_baseline']))
        out['held'] = bench_held(args.petri, args.sandbox_config, args.duration)
        print('held', json.dumps(out['held'], indent=1), flush=True)
        held_runs.append((f'`{args.petri}`' if not args.baseline else f'after (`{args.petri}`)',
                          out['held']))
    res = HERE / 'results'
    res.mkdir(exist_ok=True)
    stem = res / f"{time.strftime('%Y-%m-%d')}-tenant"
    stem.with_suffix('.json').write_text(json.dumps(out, indent=1) + '\n')
    lines = ['# One tenant against the others', '', f"{out['date']}, `{args.petri}`", '']
    if shared:
        lines += ['| measure | value | target |', '|---|---|---|']
    f = out.get('frames')
    if isinstance(f, dict):
        lines.append(f"| daemon peak RSS, 4 x 15 MiB hostile frames + 2 x 60 MiB hostile chunked bodies "
                     f"| {f['peak_rss_mib']:.0f} MiB (alive: {f['daemon_alive']}, bystander: "
                     f"{f['bystander_ok']}) | < 300 MiB |")
    for key, label, target in (('flood', 'daemon CPU per second of a flooding session', '< 0.2 s'),
                               ('hangup', 'daemon CPU per second, session closed fds 1-3',
                                '~0')):
        v = out.get(key)
        if isinstance(v, dict):
            lines.append(f"| {label} | {v['daemon_cpu_per_s']:.3f} s ({v['ended']}) | {target} |")
    s = out.get('slow')
    if isinstance(s, dict):
        lines.append(f"| /healthz p99 with {s['still_held']} slow connections held "
                     f"({s['refused']} refused) | {s['healthz_p99_ms']:.1f} ms "
                     f"(p50 {s['healthz_p50_ms']:.1f}, {s['healthz_failures']} failures) "
                     f"| < 1 s |")
    if held_runs:
        lines += held_lines(held_runs)
    stem.with_suffix('.md').write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
