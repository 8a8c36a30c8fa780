"""JavaScript and R one-shots in petri against the same programs in bubblewrap,
side by side: `console.log(1+1)` and `print(1+1)` as POST /v1/execute of a
`petri serve` of its own (the default configuration: warm), and as
`bwrap --unshare-all ... node -e` / `Rscript -e` with the same host files
bound read-only.  Runs alternate (petri, bwrap, petri, ...) so that the
machine's load falls on both alike; two warm-ups each, then --runs of each.

    /usr/bin/python3 bench/languages.py --petri build/petri [--runs 20]

Writes bench/results/<date>-languages.{md,json}.  The issue's target: petri's
p50 at most 1.2 x bwrap's."""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import urllib.request

from bench import bwrap_base, small_serve

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = {
    'javascript': ('console.log(1+1)', ['node', '-e', 'console.log(1+1)'], '2\n'),
    'r': ('print(1+1)', ['Rscript', '-e', 'print(1+1)'], '[1] 2\n'),
}


def bwrap_prefix():
    a = bwrap_base()
    # What petri's /etc has for these runtimes (src/jail/mounts.c).
    for f in ('/etc/ld.so.cache', '/etc/ld.so.conf', '/etc/ld.so.conf.d', '/etc/alternatives',
              '/etc/localtime', '/etc/R', '/etc/fonts'):
        if os.path.exists(f):
            a += ['--ro-bind', f, f]
    return a + ['--tmpfs', '/tmp', '--proc', '/proc', '--dev', '/dev', '--chdir', '/tmp',
                '--clearenv', '--setenv', 'PATH', '/usr/bin:/bin', '--setenv', 'HOME', '/tmp']


def percentile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--petri', default=os.path.join(ROOT, 'build', 'petri'))
    ap.add_argument('--runs', type=int, default=20)
    args = ap.parse_args()
    with small_serve(args.petri, 'petri-bench-lang-') as (url, _pid):
        results = run_all(url, bwrap_prefix(), args.runs)
    write(results)


def petri_once(url, language, code, want):
    body = json.dumps({'language': language, 'code': code}).encode()
    req = urllib.request.Request(url + '/v1/execute', body, {'Content-Type': 'application/json'})
    t0 = time.perf_counter()
    res = json.loads(urllib.request.urlopen(req, timeout=60).read())
    ms = (time.perf_counter() - t0) * 1e3
    if res['stdout'] != want:
        raise RuntimeError(f'petri {language}: {res}')
    return ms


def bwrap_once(prefix, argv, want):
    t0 = time.perf_counter()
    out = subprocess.run(prefix + argv, capture_output=True, text=True, timeout=60)
    ms = (time.perf_counter() - t0) * 1e3
    if out.stdout != want:
        raise RuntimeError(f'bwrap {argv}: {out.stdout!r} {out.stderr[-500:]!r}')
    return ms


def run_all(url, prefix, runs):
    results = {}
    for language, (code, argv, want) in CASES.items():
        p, b = [], []
        for i in range(runs + 2):
            tp = petri_once(url, language, code, want)
            tb = bwrap_once(prefix, argv, want)
            if i >= 2:
                p.append(tp)
                b.append(tb)
        results[language] = {
            'petri_ms': {'p50': percentile(p, 0.5), 'p90': percentile(p, 0.9), 'all': p},
            'bwrap_ms': {'p50': percentile(b, 0.5), 'p90': percentile(b, 0.9), 'all': b},
            'ratio_p50': percentile(p, 0.5) / percentile(b, 0.5),
        }
    return results


def write(results):
    day = datetime.date.today().isoformat()
    out = os.path.join(HERE, 'results', f'{day}-languages')
    with open(out + '.json', 'w') as f:
        json.dump({'date': day, 'load': os.getloadavg(), 'results': results}, f, indent=2)
    lines = [f'# JavaScript and R one-shots, {day}', '',
             'POST /v1/execute (warm petri serve) vs bwrap --unshare-all, side by side; '
             'target: petri p50 ≤ 1.2 × bwrap.', '',
             '| one-shot | petri p50 / p90 ms | bwrap p50 / p90 ms | ratio (p50) |',
             '| --- | --- | --- | --- |']
    for language, r in results.items():
        code = CASES[language][0]
        lines.append(f"| {language}: `{code}` | {r['petri_ms']['p50']:.1f} / "
                     f"{r['petri_ms']['p90']:.1f} | {r['bwrap_ms']['p50']:.1f} / "
                     f"{r['bwrap_ms']['p90']:.1f} | {r['ratio_p50']:.2f} |")
    with open(out + '.md', 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    sys.exit(main())
