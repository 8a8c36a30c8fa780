#!/usr/bin/python3
"""What the warm template's preload ([python] preload) buys and costs.

    /usr/bin/python3 bench/preload.py --petri build/petri [--rounds 12]

For each candidate preload set it starts a `petri serve` of its own (warm,
pool_size 4, its own uid_base, 127.0.0.1:0, in a cpu/cpuacct cgroup of its
own as bench.py's are: bench/README.md) and measures, interleaved with the
other sets in shuffled rounds so that the machine's load hits them alike:

  (a) the import a fresh session saves: `import seaborn, sklearn,
      statsmodels` (the issue's line) and an analyst's usual imports
      (seaborn as sns, statsmodels.api, sklearn's linear model and model
      selection) as the first execution of a new session: the client's round
      trip of that execution and the import's own perf_counter time inside;
      against the same imports in a fresh bare /usr/bin/python3 (the import
      statement's time, and the whole process from spawn to exit);
  (b) what every fresh sandbox costs: one-shot `print(1+1)` back to back
      (each takes a pooled sandbox, which the template refills by a fork),
      and 4 clients for a few seconds: sandboxes per second, and CPU ms per
      sandbox = the server cgroup's cpuacct.usage delta (server, template,
      sandboxes) / one-shots;
  (c) memory: the template's RSS/PSS/USS, and per fresh idle session
      (`print(1)` run) the cgroup's charge and the USS/PSS/RSS of its
      processes.

It writes bench/results/<date>-preload.{md,json}.  Every server gets SIGTERM
at the end, and the bench checks that no process or cgroup of it is left.
"""
import argparse
import datetime
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402

TODAY = ('numpy', 'pandas', 'matplotlib', 'matplotlib.pyplot', 'scipy', 'scipy.stats',
         'openpyxl', 'PIL.Image')
LEAN = TODAY + ('seaborn', 'sklearn', 'statsmodels')
ANALYST = LEAN + ('statsmodels.api',)
WIDE = ANALYST + ('sklearn.linear_model', 'sklearn.model_selection', 'sklearn.ensemble',
                  'statsmodels.formula.api', 'sympy', 'networkx', 'docx',
                  'reportlab.pdfgen.canvas')
SETS = [('none', ()), ('today', TODAY), ('lean', LEAN), ('analyst', ANALYST), ('wide', WIDE)]
PARTS = ('imports', 'throughput', 'memory')

IMPORTS = {
    'issue': 'import seaborn, sklearn, statsmodels',
    'usual': ('import seaborn as sns\nimport statsmodels.api as sm\n'
              'from sklearn.linear_model import LogisticRegression\n'
              'from sklearn.model_selection import train_test_split'),
}
TIMED = ('import time as _t\n_t0 = _t.perf_counter()\n%s\n'
         'print("%%.6f" %% (_t.perf_counter() - _t0))')
UID_BASE = 1600000000          # below the tests' sandbox uids (>= 2000000000)


def log(msg):
    B.log(msg)


def bare_env(tmp):
    env = {'PATH': '/usr/bin:/bin', 'HOME': tmp, 'LANG': 'C.UTF-8', 'MPLBACKEND': 'Agg',
           'MPLCONFIGDIR': os.path.join(tmp, 'mpl')}
    # The font cache, built once: no run pays for it.
    subprocess.run([B.PY, '-c', 'import matplotlib.pyplot as p; p.figure()'], env=env,
                   capture_output=True, check=True)
    return env


def bare_import(env, code):
    t0 = time.perf_counter()
    p = subprocess.run([B.PY, '-c', TIMED % code], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise RuntimeError('bare python3: %s' % p.stderr[-500:])
    return float(p.stdout.split()[-1]), wall


def fresh_import(server, code):
    """A new session's first execution: (round trip s, import s inside, create s)."""
    c = server.client
    t0 = time.perf_counter()
    st, r = c.json('POST', '/v1/sessions', {})
    t1 = time.perf_counter()
    if st != 201:
        raise RuntimeError('%s: create: %s %s' % (server.name, st, r))
    sid = r['id']
    try:
        t2 = time.perf_counter()
        st, r = c.json('POST', '/v1/sessions/%s/execute' % sid, {'code': TIMED % code})
        t3 = time.perf_counter()
        if st != 200 or r.get('status') != 'ok':
            raise RuntimeError('%s: import: %s %s' % (server.name, st, r))
        return t3 - t2, float(r['stdout'].split()[-1]), t1 - t0
    finally:
        c.request('DELETE', '/v1/sessions/' + sid)


def sequential_oneshots(server, n):
    """n one-shots back to back: (per second, CPU ms per one-shot)."""
    c = server.client
    body = {'code': B.PRINT_CODE}
    cpu0, t0 = server.cpu_s(), time.perf_counter()
    for _ in range(n):
        st, r = c.json('POST', '/v1/execute', body)
        if st != 200 or r.get('stdout') != '2\n':
            raise RuntimeError('%s: one-shot: %s %s' % (server.name, st, r))
    wall = time.perf_counter() - t0
    # The pool's refill of the last ones is part of their cost.
    server.wait_pool(60)
    cpu = server.cpu_s() - cpu0
    return n / wall, cpu * 1e3 / n


def concurrent_oneshots(server, clients, duration):
    """clients processes for duration s: (ok per second, CPU ms per one-shot, errors)."""
    q = multiprocessing.Queue()
    start_at = time.monotonic() + 0.5
    procs = [multiprocessing.Process(target=B.tp_worker,
                                     args=(server.host, server.port, start_at, duration, q))
             for _ in range(clients)]
    cpu0 = server.cpu_s()
    for p in procs:
        p.start()
    res = [q.get(timeout=duration + 120) for _ in procs]
    for p in procs:
        p.join(30)
    server.wait_pool(60)
    cpu = server.cpu_s() - cpu0
    ok = sum(r['ok'] for r in res)
    errors = {}
    for r in res:
        for k, v in r['errors'].items():
            errors[k] = errors.get(k, 0) + v
    return ok / duration, cpu * 1e3 / max(ok, 1), errors


def template_pid(server):
    for info in server.cgroups().values():
        for p in info['pids']:
            if b'--zygote' in read_bytes('/proc/%d/cmdline' % p).split(b'\0'):
                return p
    return None


def read_bytes(path):
    try:
        with open(path, 'rb') as f:
            return f.read()
    except OSError:
        return b''


def memory(server, n):
    """The template's smaps and per-session memory of n fresh idle sessions."""
    c = server.client
    ids = []
    for _ in range(n):
        st, r = c.json('POST', '/v1/sessions', {})
        if st != 201:
            raise RuntimeError('%s: create: %s %s' % (server.name, st, r))
        ids.append(r['id'])
    for sid in ids:
        st, r = c.json('POST', '/v1/sessions/%s/execute' % sid,
                       {'code': 'print(1)\n_ = open("/tmp/.petri-bench-id", "w").write(%r)'
                        % sid})
        if st != 200 or r.get('status') != 'ok':
            raise RuntimeError('%s: print: %s %s' % (server.name, st, r))
    time.sleep(1.0)
    per = []
    for info in server.cgroups().values():
        pids = sorted(info['pids'])
        marker = None
        for p in pids:
            marker = B.read('/proc/%d/root/tmp/.petri-bench-id' % p).strip() or marker
        if marker not in ids:
            continue
        sm = [x for x in (B.smaps(p) for p in pids) if x]
        per.append({'USS': sum(x['USS'] for x in sm), 'Pss': sum(x.get('Pss', 0) for x in sm),
                    'Rss': sum(x.get('Rss', 0) for x in sm),
                    'charge': B.cgroup_memory(info['paths']) or 0})
    tp = template_pid(server)
    tmpl = B.smaps(tp) if tp else None
    for sid in ids:
        c.request('DELETE', '/v1/sessions/' + sid)
    server.wait_pool(60)
    med = {k: statistics.median(v[k] for v in per) for k in ('USS', 'Pss', 'Rss', 'charge')}
    return {'sessions': len(per), 'session_p50': med,
            'template': {k: tmpl.get(k) for k in ('Rss', 'Pss', 'USS')} if tmpl else None}


def p(values, q):
    return B.percentile(values, q)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--petri', default=os.path.join(B.REPO, 'build', 'petri'))
    ap.add_argument('--rounds', type=int, default=12, help='fresh-session imports per set')
    ap.add_argument('--oneshots', type=int, default=40, help='back-to-back one-shots per round')
    ap.add_argument('--duration', type=float, default=6.0, help='s of 4 concurrent clients')
    ap.add_argument('--sets', default='none,today,lean,analyst,wide',
                    help='of %s' % ', '.join(n for n, _ in SETS))
    ap.add_argument('--parts', default=','.join(PARTS), help='of %s' % ', '.join(PARTS))
    ap.add_argument('--tp-rounds', type=int, default=3, help='throughput rounds')
    ap.add_argument('--out', default='preload', help='bench/results/<date>-OUT.{md,json}')
    ap.add_argument('--render', metavar='JSON', help='only write the report of an earlier run')
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            return write(json.load(f), args.render[:-len('.json')])
    sets = [(n, m) for n, m in SETS if n in args.sets.split(',')]
    res = {'machine': {k: v for k, v in B.machine_description(args.petri).items()
                       if k in ('host', 'date', 'cpu', 'cores', 'memory_gib', 'kernel',
                                'loadavg_start', 'petri', 'python')},
           'sets': {n: list(m) for n, m in sets}, 'imports': IMPORTS, 'results': {}}
    tmp = tempfile.mkdtemp(prefix='petri-bench-preload-')
    binary = os.path.join(tmp, 'petri')
    shutil.copy(args.petri, binary)
    env = bare_env(tmp)
    servers = {}
    try:
        for i, (name, mods) in enumerate(sets):
            # A line per module: a line of the file holds 198 characters.
            extra = ('[sandbox]\nuid_base = %d\n[python]\n%s\n'
                     % (UID_BASE + i * 100000,
                        '\n'.join('preload = ' + m for m in mods) or 'preload ='))
            t0 = time.perf_counter()
            s = B.PetriServer(binary, tmp, name, True, 4, extra)
            servers[name] = s
            if not s.wait_pool(120):
                raise RuntimeError('%s: the pool did not fill: %s' % (name, s.log_tail()))
            res['results'][name] = {'ready_s': round(time.perf_counter() - t0, 2)}
            log('%s: pool of 4 ready after %.1f s' % (name, time.perf_counter() - t0))
        names = [n for n, _ in sets]

        parts = args.parts.split(',')
        # (a) imports, interleaved with bare python3
        imp = {k: {n: {'rt': [], 'inside': [], 'create': []} for n in names + ['bare']}
               for k in IMPORTS}
        for rnd in range(args.rounds + 1 if 'imports' in parts else 0):
            for key, code in IMPORTS.items():
                order = names + ['bare']
                random.shuffle(order)
                for n in order:
                    if n == 'bare':
                        inside, wall = bare_import(env, code)
                        rt, create = wall, 0.0
                    else:
                        rt, inside, create = fresh_import(servers[n], code)
                        servers[n].wait_pool(60)
                    if rnd:            # the first round warms the page cache
                        d = imp[key][n]
                        d['rt'].append(rt)
                        d['inside'].append(inside)
                        d['create'].append(create)
            log('imports: round %d/%d' % (rnd, args.rounds))
        if 'imports' in parts:
            res['import'] = imp

        # (b) fresh-sandbox throughput and CPU, interleaved
        tp = {n: {'seq_per_s': [], 'seq_cpu_ms': [], 'conc_per_s': [], 'conc_cpu_ms': [],
                  'errors': {}} for n in names}
        for rnd in range(args.tp_rounds if 'throughput' in parts else 0):
            order = list(names)
            random.shuffle(order)
            for n in order:
                s = servers[n]
                rate, cpu = sequential_oneshots(s, args.oneshots)
                tp[n]['seq_per_s'].append(rate)
                tp[n]['seq_cpu_ms'].append(cpu)
                rate, cpu, errors = concurrent_oneshots(s, 4, args.duration)
                tp[n]['conc_per_s'].append(rate)
                tp[n]['conc_cpu_ms'].append(cpu)
                for k, v in errors.items():
                    tp[n]['errors'][k] = tp[n]['errors'].get(k, 0) + v
            log('throughput: round %d/%d' % (rnd + 1, args.tp_rounds))
        if 'throughput' in parts:
            res['throughput'] = tp

        # (c) memory
        if 'memory' in parts:
            res['memory'] = {n: memory(servers[n], 10) for n in names}
    finally:
        stops = {}
        for n, s in servers.items():
            stops[n] = s.stop()
        res['stop'] = stops
        shutil.rmtree(tmp, ignore_errors=True)
    res['machine']['loadavg_end'] = B.loadavg()[0]
    write(res, name=args.out)


def write(res, out=None, name='preload'):
    date = res['machine']['date'][:10]
    if out is None:
        out = os.path.join(HERE, 'results', '%s-%s' % (date, name))
        with open(out + '.json', 'w') as f:
            json.dump(res, f, indent=1, sort_keys=True)
    mb = 1 << 20
    names = [n for n, _ in SETS if n in res['sets']]
    lines = ['# [python] preload: what it saves and what it costs (%s)' % date, '',
             '`/usr/bin/python3 bench/preload.py` (bench/preload.py says how). Machine: %s, '
             '%s cores, %s GiB, load average %s at the start and %s at the end; %s.'
             % (res['machine']['cpu'], res['machine']['cores'], res['machine']['memory_gib'],
                res['machine']['loadavg_start'], res['machine']['loadavg_end'],
                res['machine']['petri']), '', '## Sets', '']
    for n in names:
        lines.append('- **%s**: %s' % (n, ', '.join(res['sets'][n]) or '(nothing)'))
    for key, code in res['imports'].items() if 'import' in res else ():
        bare = res['import'][key]['bare']
        bare50 = p(bare['inside'], 50)
        lines += ['', '## (a) `%s` as a fresh session\'s first execution'
                  % code.replace('\n', '; '), '',
                  'round trip = the client\'s time for the execution; inside = the import '
                  'statement\'s perf_counter; ratio = round trip p50 / bare python3\'s import '
                  'p50 (%.0f ms; its whole process %.0f ms)' % (bare50 * 1e3,
                                                                p(bare['rt'], 50) * 1e3), '',
                  '| set | round trip p50 | p90 | inside p50 | ratio | session create p50 |',
                  '| --- | --- | --- | --- | --- | --- |']
        for n in names:
            d = res['import'][key][n]
            lines.append('| %s | %.1f ms | %.1f ms | %.1f ms | %.3f × | %.1f ms |' % (
                n, p(d['rt'], 50) * 1e3, p(d['rt'], 90) * 1e3, p(d['inside'], 50) * 1e3,
                p(d['rt'], 50) / bare50, p(d['create'], 50) * 1e3))
        lines.append('| bare python3 | %.1f ms (process) | %.1f ms | %.1f ms | 1 | |' % (
            p(bare['rt'], 50) * 1e3, p(bare['rt'], 90) * 1e3, bare50 * 1e3))
    tps = res.get('throughput', {})
    lines += ['', '## (b) fresh sandboxes: one-shot `print(1+1)`', '',
              'medians of %d interleaved rounds; CPU = the server cgroup\'s cpuacct (server, '
              'template, sandboxes, pool refill) per one-shot; vs today: the 4 clients\' rate, '
              'and the CPU of all one-shots' % len(next(iter(tps.values()))['seq_per_s'])
              if tps else '', '',
              '| set | back to back /s | CPU ms each | 4 clients /s | CPU ms each | vs today |'
              , '| --- | --- | --- | --- | --- | --- |']
    base = tps.get('today')
    for n in names if tps else ():
        d = tps[n]
        rel = ''
        if base:
            rel = '%+.0f %% /s, %+.0f %% CPU' % (
                (statistics.median(d['conc_per_s']) / statistics.median(base['conc_per_s'])
                 - 1) * 100,
                (statistics.median(d['conc_cpu_ms'] + d['seq_cpu_ms']) /
                 statistics.median(base['conc_cpu_ms'] + base['seq_cpu_ms']) - 1) * 100)
        lines.append('| %s | %.1f | %.1f | %.1f | %.1f | %s |' % (
            n, statistics.median(d['seq_per_s']), statistics.median(d['seq_cpu_ms']),
            statistics.median(d['conc_per_s']), statistics.median(d['conc_cpu_ms']), rel)
            + (' errors %s' % d['errors'] if d['errors'] else ''))
    lines += ['', '## (c) memory', '',
              '| set | template RSS | template USS | idle session charge | USS | PSS | RSS |',
              '| --- | --- | --- | --- | --- | --- | --- |']
    for n in names if 'memory' in res else ():
        m = res['memory'][n]
        t = m['template'] or {}
        s = m['session_p50']
        lines.append('| %s | %.0f MiB | %.0f MiB | %.1f MiB | %.2f MiB | %.1f MiB | %.0f MiB |'
                     % (n, (t.get('Rss') or 0) / mb, (t.get('USS') or 0) / mb,
                        s['charge'] / mb, s['USS'] / mb, s['Pss'] / mb, s['Rss'] / mb))
    lines += ['', 'Template start (server start to a full pool of 4): ' + ', '.join(
        '%s %.1f s' % (n, res['results'][n]['ready_s']) for n in names), '']
    left = {n: r for n, r in res['stop'].items()
            if r.get('left_processes') or r.get('left_cgroups') or r.get('exit') != 0}
    lines.append('Left behind after SIGTERM: %s' % (left or 'nothing'))
    with open(out + '.md', 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
