#!/usr/bin/python3
"""Work nobody waits for: what listings of the execution record cost the
daemon, and what abandoned ones cost everyone else (docs/security.md,
"What a tenant can cost the daemon").

    /usr/bin/python3 bench/listings.py --petri build/petri [--abandoned 1000]

Starts a `petri serve` of its own (bench/tenant.py's: warm, in a memory
cgroup of the bench's own), fills its record with ~7 MiB (30 executions
that each print 240 KB), then:

  one      the daemon's CPU for one GET /v1/executions?limit=1000 read
           whole (the median of 5).
  abandon  N connections (from 8 loopback addresses, under the per-address
           limit) each send that GET and all close at once, while a
           bystander session runs `1+1` back to back (from before until 5 s
           after): the bystander's p50 and p99.  Then the same without the
           bystander: the daemon's CPU after the clients have gone, how long
           until it is idle (under 5% of a core over 0.5 s) and what it
           spent meanwhile.  Targets: p99 < 1 s; idle within 1 s.

Prints a table and writes bench/results/<date>-listings.{md,json}.
"""
import argparse
import json
import os
import resource
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tenant import Server, memcg, pct, proc_cpu_s  # noqa: E402

LISTING = '/v1/executions?limit=1000'
IDLE_WINDOW_S = 0.5
IDLE_SHARE = 0.05           # of a core


def fill(srv, entries=30):
    sid = srv.session()
    for _ in range(entries):
        st, r = srv.execute(sid, "print('x' * 240000)")
        assert st == 200 and r.get('status') == 'ok', (st, r)
    st, text = srv.request('GET', LISTING)
    assert st == 200, st
    return len(text), len(json.loads(text)['executions'])


def bench_one(srv, runs=5):
    costs = []
    for _ in range(runs):
        c0 = proc_cpu_s(srv.proc.pid)
        st, _ = srv.request('GET', LISTING)
        assert st == 200, st
        time.sleep(0.2)     # the answer's last bytes are written by the event thread
        costs.append(proc_cpu_s(srv.proc.pid) - c0)
    return {'cpu_ms_median': statistics.median(costs) * 1000,
            'cpu_ms_all': [round(c * 1000, 1) for c in costs]}


def wait_idle(pid, deadline_s=120):
    """Seconds until the daemon used under IDLE_SHARE of a core over
    IDLE_WINDOW_S (sampled every 0.1 s), or None."""
    t0 = time.monotonic()
    samples = [(t0, proc_cpu_s(pid))]
    while time.monotonic() - t0 < deadline_s:
        time.sleep(0.1)
        now = (time.monotonic(), proc_cpu_s(pid))
        samples.append(now)
        old = [s for s in samples if s[0] <= now[0] - IDLE_WINDOW_S]
        if old:
            t, c = old[-1]
            if (now[1] - c) / (now[0] - t) < IDLE_SHARE:
                return max(0.0, t - t0)
    return None


def abandon(srv, n):
    """n connections each send the listing's GET; then all close at once.
    Returns (connected, refused)."""
    request = f'GET {LISTING} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'.encode()
    socks, refused = [], 0
    for i in range(n):
        s = socket.socket()
        s.bind((f'127.0.0.{2 + i % 8}', 0))
        try:
            s.settimeout(5)
            s.connect((srv.host, srv.port))
            s.sendall(request)
            socks.append(s)
        except OSError:
            refused += 1
            s.close()
    for s in socks:
        s.close()
    return len(socks), refused


def bench_abandon(srv, by, n):
    """Twice: with a bystander running executions back to back (its
    latency), then alone (the daemon's CPU after the clients went: the
    bystander's own executions would count in it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 256)), hard))
    lat, fails, stop = [], [0], threading.Event()

    def bystander():
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                ok = srv.bystander_ok(by)
            except OSError:
                ok = False
            lat.append(time.monotonic() - t0)
            fails[0] += not ok

    t = threading.Thread(target=bystander, daemon=True)
    t.start()
    time.sleep(0.5)
    abandon(srv, n)
    time.sleep(5)           # and on after the clients went
    stop.set()
    t.join(150)
    wait_idle(srv.proc.pid)
    c0 = proc_cpu_s(srv.proc.pid)
    connected, refused = abandon(srv, n)
    c_gone = proc_cpu_s(srv.proc.pid)
    idle = wait_idle(srv.proc.pid)
    c_idle = proc_cpu_s(srv.proc.pid)
    return {'connections': connected, 'refused': refused,
            'daemon_cpu_while_sending_s': c_gone - c0,
            'idle_after_clients_gone_s': idle,
            'daemon_cpu_after_clients_gone_s': c_idle - c_gone,
            'bystander_runs': len(lat), 'bystander_failures': fails[0],
            'bystander_p50_ms': statistics.median(lat) * 1000 if lat else None,
            'bystander_p99_ms': pct(lat, 99) * 1000 if lat else None,
            'bystander_max_ms': max(lat) * 1000 if lat else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--petri', default=str(HERE.parent / 'build' / 'petri'))
    ap.add_argument('--abandoned', type=int, default=1000)
    ap.add_argument('--sandbox-config', default='',
                    help='lines for [sandbox] (e.g. a uid range of the bench\'s own)')
    args = ap.parse_args()
    out = {'date': time.strftime('%Y-%m-%d %H:%M'), 'petri': args.petri}
    with tempfile.TemporaryDirectory(prefix='petri-listings-') as tmp, \
            memcg.MemoryCgroup('listings', 2 << 30) as cg:
        # A record of the bench's own, not the state directory's.
        os.environ['STATE_DIRECTORY'] = tmp
        srv = Server(args.petri, tmp, cg, args.sandbox_config)
        try:
            by = srv.session()
            out['listing_bytes'], out['listing_entries'] = fill(srv)
            out['one'] = bench_one(srv)
            print('one', json.dumps(out['one']), flush=True)
            out['abandon'] = bench_abandon(srv, by, args.abandoned)
            print('abandon', json.dumps(out['abandon'], indent=1), flush=True)
            out['daemon_alive'] = srv.alive()
            out['daemon_oom_kills'] = cg.oom_kills()
        finally:
            srv.stop()
    res = HERE / 'results'
    res.mkdir(exist_ok=True)
    stem = res / f"{time.strftime('%Y-%m-%d')}-listings"
    stem.with_suffix('.json').write_text(json.dumps(out, indent=1) + '\n')
    a, mib = out['abandon'], out['listing_bytes'] / 2**20
    idle = a['idle_after_clients_gone_s']
    lines = ['# Listings nobody waits for', '', f"{out['date']}, `{args.petri}`", '',
             '| measure | value | target |', '|---|---|---|',
             f"| daemon CPU, one `GET {LISTING}` of {mib:.1f} MiB ({out['listing_entries']} "
             f"entries) | {out['one']['cpu_ms_median']:.0f} ms | |",
             f"| bystander execute p99 during {a['connections']} abandoned listings "
             f"| {a['bystander_p99_ms']:.0f} ms (p50 {a['bystander_p50_ms']:.0f}, max "
             f"{a['bystander_max_ms']:.0f}, {a['bystander_failures']} failures of "
             f"{a['bystander_runs']}) | < 1 s |",
             f"| daemon idle after the clients went | "
             f"{'not within 120 s' if idle is None else f'{idle:.1f} s'} "
             f"({a['daemon_cpu_after_clients_gone_s']:.2f} s of CPU meanwhile) | < 1 s |"]
    stem.with_suffix('.md').write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
