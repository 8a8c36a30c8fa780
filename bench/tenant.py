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
max_sessions = 40
max_executions = 16
log_level = info

[sessions]
pool_size = 2

[sandbox]
{sandbox}
"""

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
    def __init__(self, binary, workdir, cg, sandbox_cfg):
        cfg = Path(workdir) / 'tenant.ini'
        cfg.write_text(CONFIG.format(sandbox=sandbox_cfg))
        self.proc = subprocess.Popen([binary, 'serve', '--listen', '127.0.0.1:0', '--config',
                                      str(cfg)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, errors='replace',
                                     preexec_fn=cg.enter)
        self.err = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()
        line = self.proc.stdout.readline()
        m = re.search(r'http://([\d.]+):(\d+)', line)
        if not m:
            raise SystemExit(f'petri serve did not start: {line!r} {"".join(self.err)[-2000:]}')
        self.host, self.port = m.group(1), int(m.group(2))
        deadline = time.monotonic() + 120
        while 'warm template ready' not in ''.join(self.err):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                break
            time.sleep(0.2)

    def request(self, method, path, body=None, timeout=120):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {'Content-Type': 'application/json'} if data is not None else {}
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            text = r.read()
            return r.status, text
        finally:
            c.close()

    def session(self):
        st, text = self.request('POST', '/v1/sessions', {})
        assert st == 201, (st, text)
        return json.loads(text)['id']

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--petri', default=str(HERE.parent / 'build' / 'petri'))
    ap.add_argument('--only', default='frames,flood,hangup,slow')
    ap.add_argument('--sandbox-config', default='',
                    help='lines for [sandbox] (e.g. a uid range of the bench\'s own)')
    args = ap.parse_args()
    out = {'date': time.strftime('%Y-%m-%d %H:%M'), 'petri': args.petri}
    with tempfile.TemporaryDirectory(prefix='petri-tenant-') as tmp, \
            memcg.MemoryCgroup('tenant', 2 << 30) as cg:
        srv = Server(args.petri, tmp, cg, args.sandbox_config)
        try:
            by = srv.session()
            for name in args.only.split(','):
                if not srv.alive():
                    out[name] = 'daemon dead'
                    continue
                out[name] = globals()[f'bench_{name}'](srv, by)
                print(name, json.dumps(out[name], indent=1), flush=True)
            out['daemon_cgroup_peak_mib'] = cg.peak() / 2**20
            out['daemon_oom_kills'] = cg.oom_kills()
        finally:
            srv.stop()
    res = HERE / 'results'
    res.mkdir(exist_ok=True)
    stem = res / f"{time.strftime('%Y-%m-%d')}-tenant"
    stem.with_suffix('.json').write_text(json.dumps(out, indent=1) + '\n')
    lines = ['# One tenant against the others', '', f"{out['date']}, `{args.petri}`", '',
             '| measure | value | target |', '|---|---|---|']
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
    stem.with_suffix('.md').write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
