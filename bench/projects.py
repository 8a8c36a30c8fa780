"""A project's round trip in petri against the same steps in bubblewrap, side
by side: a 20 MB, 5,000-file Python project (4,800 data and source files,
200 test modules with 1,000 tests) as a tar.gz

  petri:  POST /v1/sessions/{id}/archive (extracted by the session's driver),
          `python3 -m pytest -q` as one execution, GET .../archive (tar.gz);
  bwrap:  one `bwrap --unshare-all` with a tmpfs /work that reads the tar.gz
          from stdin (`tar xzf -`), runs the same pytest, and writes the tree
          back to stdout (`tar czf -`), each step timed inside.

Runs alternate (petri, bwrap, petri, ...) so that the machine's load falls
on both alike; one warm-up each, then --runs of each.  petri's daemon CPU
per step (its own process, utime + stime) is reported too: what a client's
upload and download cost the server, the rest being the session's.

    /usr/bin/python3 bench/projects.py --petri build/petri [--runs 5]

Writes bench/results/<date>-projects.{md,json}."""
import argparse
import datetime
import io
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import time
import urllib.request

from bench import bwrap_base, small_serve

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FILES, TESTS, TOTAL = 5000, 200, 20 << 20
PYTEST = 'cd /work/proj && python3 -m pytest -q -p no:cacheprovider tests >/dev/null; echo rc=$?'
WORDS = ('alpha beta gamma delta value index frame series record table column row '
         'sample mean total count error result model input output state').split()


def project_tgz():
    """The project, made the same for every run (a fixed seed): text that
    compresses as code and data do, about 3 to 1."""
    rnd = random.Random(17)
    bio = io.BytesIO()
    per = (TOTAL - TESTS * 600) // (FILES - TESTS)

    def add(t, name, data, mode=0o644):
        info = tarfile.TarInfo('proj/' + name)
        info.size, info.mode, info.mtime = len(data), mode, 1700000000
        t.addfile(info, io.BytesIO(data))

    with tarfile.open(fileobj=bio, mode='w:gz', compresslevel=6) as t:
        for i in range(FILES - TESTS):
            words = []
            while sum(len(w) + 1 for w in words) < per:
                words.append(rnd.choice(WORDS) + str(rnd.randrange(1000)))
            add(t, f'data/d{i // 100:02d}/f{i:04d}.txt', ' '.join(words).encode())
        for i in range(TESTS):
            body = ''.join(f'def test_{i}_{k}():\n    assert sum(range({k + 10})) == '
                           f'{(k + 10) * (k + 9) // 2}\n\n' for k in range(5))
            add(t, f'tests/test_m{i:03d}.py', body.encode())
    return bio.getvalue()


def percentile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def daemon_cpu_ms(pid):
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf('SC_CLK_TCK')


def call(url, method, path, body=None, headers=None, timeout=300):
    req = urllib.request.Request(url + path, body, headers or {}, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def petri_once(url, pid, tgz):
    steps, cpu = {}, {}
    sid = json.loads(call(url, 'POST', '/v1/sessions', json.dumps(
        {'limits': {'timeout_s': 300, 'pids': 256, 'disk_mb': 512}}).encode(),
        {'Content-Type': 'application/json'}))['id']
    try:
        for name, method, path, body, headers in (
                ('upload', 'POST', f'/v1/sessions/{sid}/archive', tgz, {}),
                ('pytest', 'POST', f'/v1/sessions/{sid}/execute',
                 json.dumps({'language': 'bash', 'code': PYTEST}).encode(),
                 {'Content-Type': 'application/json'}),
                ('download', 'GET', f'/v1/sessions/{sid}/archive?path=proj', None, {})):
            c0, t0 = daemon_cpu_ms(pid), time.perf_counter()
            out = call(url, method, path, body, headers)
            steps[name] = (time.perf_counter() - t0) * 1e3
            cpu[name] = daemon_cpu_ms(pid) - c0
            if name == 'pytest' and 'rc=0' not in json.loads(out)['stdout']:
                raise RuntimeError(f'petri pytest: {out[:2000]!r}')
            if name == 'download':
                with tarfile.open(fileobj=io.BytesIO(out)) as t:
                    n = sum(1 for m in t if m.isfile())
                if n < FILES:
                    raise RuntimeError(f'petri download: {n} files')
    finally:
        call(url, 'DELETE', f'/v1/sessions/{sid}')
    return steps, cpu


def bwrap_once(tgz):
    script = ('t0=$(date +%s%N); tar xzf - -C /work; t1=$(date +%s%N); '
              f'{PYTEST} >&2; t2=$(date +%s%N); tar czf - -C /work proj; '
              't3=$(date +%s%N); echo "times $t0 $t1 $t2 $t3" >&2')
    argv = bwrap_base() + ['--tmpfs', '/tmp', '--tmpfs', '/work', '--proc', '/proc',
                           '--dev', '/dev', '--chdir', '/work', '--clearenv',
                           '--setenv', 'PATH', '/usr/bin:/bin', '--setenv', 'HOME', '/tmp',
                           '/bin/sh', '-c', script]
    t0 = time.perf_counter()
    out = subprocess.run(argv, input=tgz, capture_output=True, timeout=300)
    wall = (time.perf_counter() - t0) * 1e3
    err = out.stderr.decode(errors='replace')
    m = re.search(r'times (\d+) (\d+) (\d+) (\d+)', err)
    if not m or 'rc=0' not in err:
        raise RuntimeError(f'bwrap: {err[-2000:]}')
    t = [int(x) / 1e6 for x in m.groups()]
    with tarfile.open(fileobj=io.BytesIO(out.stdout)) as tf:
        if sum(1 for x in tf if x.isfile()) < FILES:
            raise RuntimeError('bwrap: the tree that came out is not whole')
    # The sandbox's start counts with the upload, its exit with the download.
    return {'upload': t[1] - t[0] + (wall - (t[3] - t[0])) / 2, 'pytest': t[2] - t[1],
            'download': t[3] - t[2] + (wall - (t[3] - t[0])) / 2}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--petri', default=os.path.join(ROOT, 'build', 'petri'))
    ap.add_argument('--runs', type=int, default=5)
    args = ap.parse_args()
    tgz = project_tgz()
    p, c, b = [], [], []
    with small_serve(args.petri, 'petri-bench-proj-') as (url, pid):
        for i in range(args.runs + 1):
            steps, cpu = petri_once(url, pid, tgz)
            bw = bwrap_once(tgz)
            if i >= 1:
                p.append(steps)
                c.append(cpu)
                b.append(bw)
    write(len(tgz), p, c, b)


def write(size, p, c, b):
    day = datetime.date.today().isoformat()
    results = {}
    for step in ('upload', 'pytest', 'download'):
        pm = percentile([r[step] for r in p], 0.5)
        bm = percentile([r[step] for r in b], 0.5)
        results[step] = {'petri_ms_p50': pm, 'bwrap_ms_p50': bm, 'ratio': pm / bm,
                         'petri_daemon_cpu_ms_p50': percentile([r[step] for r in c], 0.5),
                         'petri_all': [r[step] for r in p], 'bwrap_all': [r[step] for r in b]}
    out = os.path.join(HERE, 'results', f'{day}-projects')
    with open(out + '.json', 'w') as f:
        json.dump({'date': day, 'load': os.getloadavg(), 'archive_bytes': size,
                   'files': FILES, 'results': results}, f, indent=2)
    lines = [f'# A project round trip, {day}', '',
             f'{FILES} files, {TOTAL >> 20} MiB ({size / 1e6:.1f} MB as tar.gz), '
             f'{TESTS * 5} tests; medians of {len(p)} runs, side by side with bwrap '
             '(tar into a tmpfs, pytest, tar out). petri compresses downloads at gzip '
             'level 1, `tar czf` at 6.', '',
             '| step | petri ms | bwrap ms | ratio | petri daemon CPU ms |',
             '| --- | --- | --- | --- | --- |']
    for step, r in results.items():
        lines.append(f"| {step} | {r['petri_ms_p50']:.0f} | {r['bwrap_ms_p50']:.0f} | "
                     f"{r['ratio']:.2f} | {r['petri_daemon_cpu_ms_p50']:.0f} |")
    with open(out + '.md', 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    sys.exit(main())
