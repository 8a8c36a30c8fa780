"""The E2B SDK's round trip against petri: Sandbox.create() then the first
runCode('1+1'), through the real SDK (tests/e2b/new: e2b 2.51.0 and
@e2b/code-interpreter 2.8.0), 20 times, median and spread.

    /usr/bin/python3 bench/e2b.py --petri build/petri [--runs 20]

It starts a `petri serve` of its own (warm, the default configuration plus an
API key shaped as the SDKs want), waits for its template, runs the node
client below, and writes bench/results/<date>-e2b.{md,json}.  Hosted E2B's
own figure for comparison is what its documentation states (about 150-450 ms
to create a sandbox); it is not measured here (no network)."""
import argparse
import datetime
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SDK_DIR = os.path.join(ROOT, 'tests', 'e2b', 'new')

CLIENT = r'''
import { Sandbox } from '@e2b/code-interpreter';
const runs = Number(process.env.RUNS);
const out = [];
for (let i = 0; i < runs + 2; i++) {
  const t0 = performance.now();
  const sbx = await Sandbox.create({ requestTimeoutMs: 30000 });
  const t1 = performance.now();
  const ex = await sbx.runCode('1+1', { timeoutMs: 30000 });
  const t2 = performance.now();
  if (ex.text !== '2') throw new Error(`runCode gave ${JSON.stringify(ex.text)}`);
  await sbx.kill();
  if (i >= 2) out.push({ create_ms: t1 - t0, first_run_ms: t2 - t1, total_ms: t2 - t0 });
}
console.log(JSON.stringify(out));
'''


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--petri', default=os.path.join(ROOT, 'build', 'petri'))
    ap.add_argument('--runs', type=int, default=20)
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(SDK_DIR, 'node_modules')):
        sys.exit('tests/e2b/new/node_modules is missing: run make e2b-test (npm ci) first')
    key = 'e2b_' + secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix='petri-bench-e2b-') as tmp:
        cfg = os.path.join(tmp, 'petri.ini')
        with open(cfg, 'w') as f:
            f.write(f'[server]\napi_keys = {key}\n')
        client = os.path.join(SDK_DIR, '.bench-client.mjs')
        with open(client, 'w') as f:
            f.write(CLIENT)
        proc = subprocess.Popen([args.petri, 'serve', '--listen', '127.0.0.1:0', '--config', cfg],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            url = re.search(r'(http://\S+)', proc.stdout.readline()).group(1)
            time.sleep(3)       # the warm template and the pool
            env = dict(os.environ, E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=key,
                       RUNS=str(args.runs))
            r = subprocess.run(['node', client], cwd=SDK_DIR, env=env, capture_output=True,
                               text=True, timeout=600)
            if r.returncode:
                sys.exit(f'the client failed: {r.stderr[-3000:]}')
            rows = json.loads(r.stdout)
        finally:
            os.unlink(client)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    summary = {k: {'median': median([x[k] for x in rows]), 'min': min(x[k] for x in rows),
                   'max': max(x[k] for x in rows)}
               for k in ('create_ms', 'first_run_ms', 'total_ms')}
    day = datetime.date.today().isoformat()
    base = os.path.join(HERE, 'results', f'{day}-e2b')
    with open(base + '.json', 'w') as f:
        json.dump({'runs': rows, 'summary': summary, 'sdk': 'e2b 2.51.0, @e2b/code-interpreter 2.8.0'},
                  f, indent=1)
    lines = [f'# E2B SDK round trip against petri ({day}, {len(rows)} runs after 2 warm-ups)', '',
             '| step | median ms | min | max |', '| --- | --- | --- | --- |']
    for k, s in summary.items():
        lines.append(f"| {k} | {s['median']:.1f} | {s['min']:.1f} | {s['max']:.1f} |")
    lines += ['', 'Hosted E2B, as its documentation states: about 150-450 ms to create a sandbox.']
    with open(base + '.md', 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
