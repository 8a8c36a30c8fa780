#!/usr/bin/python3
"""The first chart in a cold sandbox, against bare Python (issue 30).

    /usr/bin/python3 bench/caches.py --petri build/petri [--rounds 10]

Runs, interleaved in shuffled rounds so that the machine's load hits them
alike, each of these codes (a chart: plt.plot and savefig; and the issue's
`import matplotlib.font_manager`) four ways:

  bare      a fresh /usr/bin/python3 with a writable MPLCONFIGDIR whose font
            list was built before the first round (a host whose matplotlib
            has run before), and the page cache warm;
  petri     `petri run --json -c CODE`: a cold sandbox, with the caches
            petri builds once (src/runtime/cache.h) in CACHE_DIRECTORY, a
            directory of the bench's own, built before the first round;
  nocache   the same `petri run` with a CACHE_DIRECTORY petri cannot make
            (under /proc): it says so and goes without, as before the cache: every sandbox builds matplotlib's
            font list and fontconfig's caches in its own /tmp;
  baseline  with --baseline PETRI, that binary (a build from before).

Each way runs in a cpu/cpuacct cgroup of its own (bench.py's BenchCgroup):
petri makes its sandboxes' cgroups under the one it runs in, so they
compete for the CPU as one group, as bare Python does, and not together
with the sandboxes of every other petri of the machine (a CI run's), which
share the default /petri.  Each is timed from spawn to exit (the client's
wall), with its cgroup's CPU time (cpuacct.usage: petri, its sandbox), and
for petri with the result's duration_ms and whether the sandbox's stderr
said "building the font cache".  One warm-up
round is not counted.  It writes bench/results/<date>-caches.{md,json}
and removes its directories.
"""
import argparse
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402

CODES = {
    'chart': ('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 1, 3])\n'
              'plt.savefig("chart.png")\n'),
    'font_manager': 'import matplotlib.font_manager\n',
}
BUILDING = 'building the font cache'


def timed(cg, argv, env, cwd):
    """(wall seconds, the cgroup's CPU seconds, CompletedProcess)."""
    before = cg.usage_s()
    t0 = time.monotonic()
    p = subprocess.run(cg.wrap(argv), env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=300)
    wall = time.monotonic() - t0
    return wall, cg.usage_s() - before, p


def bare(cg, code, env, cwd):
    wall, cpu, p = timed(cg, [B.PY, '-c', code], env, cwd)
    if p.returncode != 0:
        raise RuntimeError('bare python failed: %s' % p.stderr[-500:])
    return {'wall': wall, 'cpu': cpu, 'building': BUILDING in p.stderr}


def petri(cg, binary, code, cache, cwd):
    env = {**os.environ, 'PETRI_CONFIG': '', 'CACHE_DIRECTORY': cache}
    wall, cpu, p = timed(cg, [binary, 'run', '--json', '--timeout', '120', '-c', code], env, cwd)
    r = json.loads(p.stdout)
    if r['status'] != 'ok':
        raise RuntimeError('petri run failed: %s' % json.dumps(r)[:800])
    return {'wall': wall, 'cpu': cpu, 'duration': r['duration_ms'] / 1000.0,
            'sandbox_cpu': r['cpu_ms'] / 1000.0, 'building': BUILDING in r['stderr']}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    ap.add_argument('--petri', default=os.path.join(B.REPO, 'build', 'petri'))
    ap.add_argument('--baseline', help='a petri binary to compare with (a build from before)')
    ap.add_argument('--rounds', type=int, default=10)
    ap.add_argument('--out', default='caches')
    args = ap.parse_args()
    petri_bin = os.path.abspath(args.petri)
    top = tempfile.mkdtemp(prefix='bench-caches-', dir=os.path.dirname(petri_bin))
    os.chmod(top, 0o755)
    cache = os.path.join(top, 'cache')
    work = os.path.join(top, 'work')
    os.mkdir(work)
    bare_env = {'PATH': '/usr/bin:/bin', 'HOME': work, 'LANG': 'C.UTF-8',
                'MPLBACKEND': 'Agg', 'MPLCONFIGDIR': os.path.join(top, 'mpl')}
    names = ['bare', 'petri', 'nocache'] + (['baseline'] if args.baseline else [])
    cgs = {n: B.BenchCgroup('petri-bench-caches-%d-%s' % (os.getpid(), n)) for n in names}
    ways = {
        'bare': lambda code: bare(cgs['bare'], code, bare_env, work),
        'petri': lambda code: petri(cgs['petri'], petri_bin, code, cache, work),
        'nocache': lambda code: petri(cgs['nocache'], petri_bin, code,
                                      '/proc/petri-bench-no-cache', work),
    }
    if args.baseline:
        base_bin = os.path.abspath(args.baseline)
        ways['baseline'] = lambda code: petri(cgs['baseline'], base_bin, code, cache, work)
    res = {'machine': B.machine_description(petri_bin), 'rounds': args.rounds,
           'codes': CODES, 'runs': {w: {c: [] for c in CODES} for w in ways}}
    res['machine']['loadavg_start'] = B.loadavg()[0][0]
    try:
        # The caches, built once, as a host that ran them before has them.
        t0 = time.monotonic()
        ways['bare'](CODES['font_manager'])
        res['bare_font_list_s'] = time.monotonic() - t0
        t0 = time.monotonic()
        ways['petri']('print(1)')
        res['petri_first_start_s'] = time.monotonic() - t0
        order = [(w, c) for w in ways for c in CODES]
        for rnd in range(args.rounds + 1):
            random.shuffle(order)
            for w, c in order:
                one = ways[w](CODES[c])
                if rnd:
                    res['runs'][w][c].append(one)
            B.log('round %d/%d, load %.2f' % (rnd, args.rounds, B.loadavg()[0][0]))
    finally:
        shutil.rmtree(top, ignore_errors=True)
        left = [d for cg in cgs.values() for d in cg.remove()]
        if left:
            B.log('cgroups left: %s' % left)
    res['machine']['loadavg_end'] = B.loadavg()[0][0]
    write(res, args.out)


def write(res, name):
    date = res['machine']['date'][:10]
    out = os.path.join(HERE, 'results', '%s-%s' % (date, name))
    with open(out + '.json', 'w') as f:
        json.dump(res, f, indent=1, sort_keys=True)
    lines = ['# The first chart in a cold sandbox (%s)' % date, '',
             '`/usr/bin/python3 bench/caches.py` (its header says how). Machine: %s, %s cores, '
             'load average %s at the start and %s at the end; %s. %d rounds, interleaved.'
             % (res['machine']['cpu'], res['machine']['cores'], res['machine']['loadavg_start'],
                res['machine']['loadavg_end'], res['machine']['petri'], res['rounds']), '',
             'Once, before the rounds: bare Python built its font list in %s; petri\'s first '
             'start built its caches in %s (a start that finds them pays a walk of the font '
             'directories\' stats).' % (B.ms(res['bare_font_list_s']),
                                       B.ms(res['petri_first_start_s'])), '',
             '| code | way | wall p50 | wall p90 | CPU p50 | sandbox duration p50 | '
             '"building the font cache" | wall / bare p50 |',
             '| --- | --- | --- | --- | --- | --- | --- | --- |']
    for c in res['codes']:
        bare_p50 = B.summary([r['wall'] for r in res['runs']['bare'][c]])['p50']
        for w, by in res['runs'].items():
            runs = by[c]
            wall = B.summary([r['wall'] for r in runs])
            cpu = B.summary([r['cpu'] for r in runs])
            dur = B.summary([r['duration'] for r in runs if 'duration' in r])
            lines.append('| %s | %s | %s | %s | %s | %s | %d of %d | %.2f |' % (
                c, w, B.ms(wall['p50']), B.ms(wall['p90']), B.ms(cpu['p50']),
                B.ms(dur.get('p50')), sum(r['building'] for r in runs), len(runs),
                wall['p50'] / bare_p50))
    with open(out + '.md', 'w') as f:
        f.write('\n'.join(lines) + '\n')
    B.log('\n'.join(lines))
    B.log('wrote %s.{md,json}' % out)


if __name__ == '__main__':
    main()
