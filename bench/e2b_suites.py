#!/usr/bin/python3
"""E2B's own JavaScript test suites against petri: how much of what E2B
tests its SDKs with passes against a `petri serve`, test by test.

    /usr/bin/python3 bench/e2b_suites.py --petri build/petri
        [--e2b DIR] [--code-interpreter DIR] [--only PATTERN] [--json OUT]

Two suites, each from a checkout (or a git directory: its HEAD) of E2B's
repositories, which the repository never holds a copy of:

  e2b               e2b-dev/E2B, packages/js-sdk/tests/sandbox/** (the base
                    SDK: lifecycle, files, commands, PTY, git, snapshots...),
                    without network.test.ts and internetAccess.test.ts (they
                    reach public addresses)
  code-interpreter  e2b-dev/code-interpreter, js/tests/** (runCode, contexts,
                    charts, languages), without tests/runtimes (bun, deno)

The tests run unchanged: they are copied into a temporary directory at run
time with one change, their imports of the SDK's source ('../../src',
'../src/errors', ...) made imports of the npm packages the project tests
(tests/e2b/new: e2b 2.51.0, @e2b/code-interpreter 2.8.0; `make e2b-test`, or
`make tests/e2b/new/node_modules`, installs them).  A name the npm package
does not export (an SDK internal) is then undefined and its test fails: a
failure of the harness, not of petri; so is a test of a file that mocks
E2B's API with msw (the SDK calls petri, never the mock).  vitest (and msw,
which some files import) comes from the npm registry into build/e2b-suites/
once.  Two test files run at a time (--workers), the tests of a file one by
one, each with 60 s.

It starts a `petri serve` of its own (127.0.0.1:0, an API key shaped as the
SDKs want, a uid range and a state directory of its own in the temporary
directory, output in files there), waits for its warm template, runs vitest
once per suite with the SDKs pointed at it (E2B_API_URL, E2B_SANDBOX_URL,
E2B_API_KEY; E2B_DEBUG and E2B_DOMAIN unset), stops it with SIGTERM and
removes the temporary directory, also on Ctrl-C.  It prints passed, failed
and skipped per file and per suite, and the failing tests with the first
line of their errors, grouped by a likely cause (CAUSES below: the harness's
failures are named so); --json writes all of it.  --only keeps the test files
whose path (e.g. `e2b/sandbox/files/write.test.ts`) contains one of the
comma-separated patterns.
"""
import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SDK_MODULES = os.path.join(ROOT, 'tests', 'e2b', 'new', 'node_modules')
CACHE = os.path.join(ROOT, 'build', 'e2b-suites')
# The runner, as E2B's package.json files ask for it (vitest ^4.1, msw ^2.12).
RUNNER_DEPS = {'vitest': '4.1.12', 'msw': '2.14.7'}
MIRRORS = {'e2b': '/work/.mirror/e2b-dev+E2B/repo',
           'code-interpreter': '/work/.mirror/e2b-dev+code-interpreter/repo'}
UID_BASE = 1700000000          # apart from the tests' (2000000000) and bench/preload.py's
RUN_TIMEOUT_S = 3600          # a deadline on each suite's vitest run


class Suite:
    def __init__(self, name, repo_dir, package, include, exclude, setup_files=()):
        self.name = name
        self.repo_dir = repo_dir        # inside the repository: what to copy
        self.package = package          # the npm package its '../src' becomes
        self.include = include          # globs, relative to the copied directory
        self.exclude = exclude
        self.setup_files = setup_files


SUITES = [
    Suite('e2b', 'packages/js-sdk', 'e2b',
          ['tests/sandbox/**/*.test.ts'],
          ['tests/sandbox/network.test.ts', 'tests/sandbox/internetAccess.test.ts']),
    Suite('code-interpreter', 'js', '@e2b/code-interpreter',
          ['tests/**/*.test.ts'], ['tests/runtimes/**']),
]

# Why a test failed, for the summary: the first rule whose pattern is found
# in "<file> <notes> :: <test> :: <first line of the error>" (notes: [msw]
# for a file that mocks E2B's API with msw, [mocks-internals] for one that
# vi.mock()s a module of the SDK's source).  A guide, not a verdict: read
# the errors.
CAUSES = [
    ('harness: the file mocks E2B\'s API (msw); the SDK reaches petri instead', r'\[msw\]'),
    ('harness: SDK internals the npm package does not export',
     r'\[mocks-internals\]|__vite_ssr_import_\d+__|could not find an object to spy upon'
     r'|Cannot read properties of undefined|Cannot find package'),
    ('harness: the test expects E2B\'s own URLs (E2B_SANDBOX_URL is set)', r'e2b\.app'),
    ('pause, snapshots, fork', r'pause|snapshot|fork'),
    ('stdin (SendInput)', r'SendInput'),
    ('PTY', r'/pty/|\(pty\)'),
    ('watchDir', r'files/watch\.test|WatchDir'),
    ('process list, connect, signals; background commands (one at a time per sandbox)',
     r'Process/|busy: an execution is already running|commands/kill\.test'),
    ('file metadata (envd 0.6.2: xattrs)', r'files/metadata\.test'),
    ('files outside /home/user', r'only files under /home/user|as root user'),
    ('a sandbox\'s ports from outside (getHost)', r'host\.test'),
    ('Java in runCode', r'\bjava\b'),
    ('R results', r'\bR\b|cwd r|env_vars/r\.test'),
    ('E2B\'s image: systemd restarts its Jupyter', r'systemd\.test'),
]

VITEST_CONFIG = """\
import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: %(include)s,
    exclude: %(exclude)s,
    globals: false,
    environment: 'node',
    isolate: true,
    // Two cores: two test files at a time, the tests of a file one by one
    // (as E2B runs them); generous timeouts, a sandbox is made per test.
    pool: 'forks',
    maxWorkers: %(workers)d,
    testTimeout: 60000,
    hookTimeout: 60000,
    teardownTimeout: 30000,
    bail: 0,
    deps: { interopDefault: true },
  },
})
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def first_line(text):
    for line in (text or '').splitlines():
        line = re.sub(r'\x1b\[[0-9;]*m', '', line).strip()
        if line:
            return line[:300]
    return ''


# ------------------------------------------------------------ the sources

def export_tree(src, sub, dest):
    """Copy src/sub (a checkout's directory, or HEAD's in a git directory)
    to dest/sub; returns the commit, or None for a plain directory."""
    if os.path.isdir(os.path.join(src, sub)):
        shutil.copytree(os.path.join(src, sub), os.path.join(dest, sub), symlinks=True,
                        ignore=shutil.ignore_patterns('node_modules', 'dist', '.git'))
        try:
            return subprocess.run(['git', '-C', src, 'rev-parse', 'HEAD'], capture_output=True,
                                  text=True, timeout=30).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            return None
    commit = subprocess.run(['git', '-C', src, 'rev-parse', 'HEAD'], capture_output=True,
                            text=True, timeout=30)
    if commit.returncode:
        raise SystemExit(f'{src}: neither a checkout with {sub}/ nor a git directory')
    archive = subprocess.Popen(['git', '-C', src, 'archive', 'HEAD', sub],
                               stdout=subprocess.PIPE)
    untar = subprocess.run(['tar', '-x', '-C', dest], stdin=archive.stdout, timeout=120)
    archive.stdout.close()
    if archive.wait(timeout=120) or untar.returncode:
        raise SystemExit(f'{src}: git archive HEAD {sub} failed')
    return commit.stdout.strip()


IMPORT_RE = re.compile(r'''(\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)(['"])([^'"]+)\2''',
                       re.MULTILINE)


def rewrite_imports(root, package):
    """Make every import of root/src (the SDK's source) an import of the npm
    package; vi.mock() of a source module stays as it is.  Returns
    {file: [(old, new), ...]}."""
    src = os.path.join(root, 'src')
    changed = {}
    for d, _, names in os.walk(os.path.join(root, 'tests')):
        for n in names:
            if not n.endswith(('.ts', '.tsx', '.mts', '.mjs', '.js')):
                continue
            path = os.path.join(d, n)
            with open(path, encoding='utf-8') as f:
                text = f.read()

            def repl(m):
                spec = m.group(3)
                if not spec.startswith('.'):
                    return m.group(0)
                target = os.path.normpath(os.path.join(d, spec))
                if target != src and not target.startswith(src + os.sep):
                    return m.group(0)
                changed.setdefault(os.path.relpath(path, root), []).append((spec, package))
                return f'{m.group(1)}{m.group(2)}{package}{m.group(2)}'

            new = IMPORT_RE.sub(repl, text)
            if new != text:
                with open(path, 'w', encoding='utf-8') as f:
                    f.write(new)
    return changed


# ------------------------------------------------------------ node modules

def runner_modules():
    """build/e2b-suites/node_modules: vitest and msw, installed once from the
    npm registry (npm install --prefer-offline).  Returns its path."""
    modules = os.path.join(CACHE, 'node_modules')
    want = json.dumps({'name': 'petri-e2b-suites', 'private': True, 'type': 'module',
                       'dependencies': RUNNER_DEPS}, indent=1) + '\n'
    pkg = os.path.join(CACHE, 'package.json')
    have = open(pkg).read() if os.path.exists(pkg) else None
    if have != want or not os.path.isdir(os.path.join(modules, 'vitest')):
        os.makedirs(CACHE, exist_ok=True)
        with open(pkg, 'w') as f:
            f.write(want)
        log(f'installing {", ".join(f"{k}@{v}" for k, v in RUNNER_DEPS.items())} into {CACHE}')
        r = subprocess.run(['npm', 'install', '--prefer-offline', '--no-audit', '--no-fund',
                            '--loglevel=error'], cwd=CACHE, timeout=600,
                           stdin=subprocess.DEVNULL)
        if r.returncode:
            raise SystemExit('npm install of the runner failed')
    return modules


def link_modules(dest, *sources):
    """dest/: a node_modules of symlinks to the packages of each source
    node_modules, the first source's where two have the same package (the
    runner's, then the SDKs': e2b, @e2b/code-interpreter and what they
    need, which some tests import themselves, as @bufbuild/protobuf)."""
    os.makedirs(dest)
    for src in sources:
        for entry in sorted(os.listdir(src)):
            if entry.startswith('.'):
                continue
            if entry.startswith('@'):
                os.makedirs(os.path.join(dest, entry), exist_ok=True)
                names = [os.path.join(entry, n) for n in sorted(os.listdir(os.path.join(src, entry)))]
            else:
                names = [entry]
            for n in names:
                if not os.path.lexists(os.path.join(dest, n)):
                    os.symlink(os.path.join(src, n), os.path.join(dest, n))
    return dest


def package_version(name):
    with open(os.path.join(SDK_MODULES, name, 'package.json')) as f:
        return json.load(f)['version']


# ------------------------------------------------------------ the daemon

class Petri:
    """One `petri serve` of the bench's own: detached (a session of its own,
    stdin from /dev/null), output in files of workdir."""

    def __init__(self, binary, workdir):
        self.key = 'e2b_' + secrets.token_hex(20)
        self.workdir = workdir
        cfg = os.path.join(workdir, 'petri.ini')
        with open(cfg, 'w') as f:
            f.write(f'[server]\napi_keys = {self.key}\n'
                    f'[sandbox]\nuid_base = {UID_BASE}\nuid_count = 65536\n')
        self.out_path = os.path.join(workdir, 'petri.out')
        self.log_path = os.path.join(workdir, 'petri.log')
        env = {**os.environ, 'STATE_DIRECTORY': os.path.join(workdir, 'state')}
        with open(self.out_path, 'wb') as out, open(self.log_path, 'wb') as err:
            self.proc = subprocess.Popen([binary, 'serve', '--listen', '127.0.0.1:0',
                                          '--config', cfg], stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, env=env,
                                         start_new_session=True)
        self.url = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            m = re.search(r'listening on (http://\S+)', self.read(self.out_path))
            if m:
                self.url = m.group(1)
                break
            time.sleep(0.1)
        if not self.url:
            raise RuntimeError(f'petri serve did not start: {self.read(self.log_path)[-3000:]}')
        # The warm path settled (GET /healthz: ready, off or failed), or 120 s.
        self.warm = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.url + '/healthz', timeout=5) as r:
                    self.warm = json.load(r).get('warm')
            except (OSError, ValueError):
                pass
            if self.warm in ('ready', 'off', 'failed'):
                break
            time.sleep(0.2)

    @staticmethod
    def read(path):
        try:
            with open(path, errors='replace') as f:
                return f.read()
        except OSError:
            return ''

    def running(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM, 60 s, then SIGKILL; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            return 'killed after 60 s of SIGTERM'


# ------------------------------------------------------------ a suite's run

def selected_files(root, suite, only):
    """The test files vitest will run (relative to root), for --only and the
    summary."""
    import glob
    files = set()
    for pat in suite.include:
        files |= {os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pat),
                                                                recursive=True)}
    for pat in suite.exclude:
        files -= {os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pat),
                                                                recursive=True)}
    if only:
        files = {f for f in files
                 if any(p in f'{suite.name}/{f[len("tests/"):]}' for p in only)}
    return sorted(files)


def run_suite(suite, src, tmp, modules, petri, only, workers):
    root = os.path.join(tmp, suite.name)
    os.makedirs(root)
    commit = export_tree(src, suite.repo_dir, root)
    root_in = os.path.join(root, suite.repo_dir)
    # The tests (with their setup and helpers) and nothing else of the repository.
    for entry in os.listdir(root_in):
        if entry != 'tests':
            p = os.path.join(root_in, entry)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
    rewritten = rewrite_imports(root_in, suite.package)
    files = selected_files(root_in, suite, only)
    res = {'source': src, 'commit': commit, 'files': {}, 'rewritten_imports': rewritten}
    notes = {}
    for f in files:
        with open(os.path.join(root_in, f), encoding='utf-8') as fh:
            text = fh.read()
        notes[f] = ' '.join(n for n, pat in (('[msw]', r"""from\s+['"]msw"""),
                                             ('[mocks-internals]',
                                              r"""vi\.(?:do)?[mM]ock\(\s*['"]\.[^'"]*/src\b"""))
                            if re.search(pat, text))
    if not files:
        return res
    os.symlink(modules, os.path.join(root_in, 'node_modules'))
    with open(os.path.join(root_in, 'vitest.config.mjs'), 'w') as f:
        f.write(VITEST_CONFIG % {'include': json.dumps(files), 'exclude': json.dumps([]),
                                 'workers': workers})
    env = {k: v for k, v in os.environ.items()
           if k not in ('E2B_DEBUG', 'E2B_DOMAIN', 'E2B_ACCESS_TOKEN', 'E2B_USER_AGENT_SOURCE',
                        'E2B_TESTS_TEMPLATE', 'E2B_INTEGRATION_TEST', 'NODE_OPTIONS')}
    env.update(E2B_API_URL=petri.url, E2B_SANDBOX_URL=petri.url, E2B_API_KEY=petri.key,
               CI='1', NO_COLOR='1', FORCE_COLOR='0')
    out_json = os.path.join(tmp, f'{suite.name}.json')
    out_log = os.path.join(tmp, f'{suite.name}.log')
    cmd = ['node', os.path.join(modules, 'vitest', 'vitest.mjs'), 'run',
           '--config', 'vitest.config.mjs', '--reporter=default', '--reporter=json',
           f'--outputFile.json={out_json}']
    log(f'{suite.name}: {len(files)} test files ({commit or src})')
    t0 = time.monotonic()
    with open(out_log, 'wb') as logf:
        proc = subprocess.Popen(cmd, cwd=root_in, env=env, stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            res['error'] = 'vitest did not finish in time: killed'
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    res['seconds'] = round(time.monotonic() - t0, 1)
    res['vitest_exit'] = proc.returncode
    try:
        with open(out_json) as f:
            report = json.load(f)
    except (OSError, ValueError):
        with open(out_log, errors='replace') as f:
            res['error'] = res.get('error') or 'no JSON report'
            res['log_tail'] = f.read()[-4000:]
        return res
    for tr in report.get('testResults', []):
        name = os.path.relpath(tr['name'], root_in)
        tests = []
        for a in tr.get('assertionResults', []):
            status = a.get('status')
            status = {'pending': 'skipped', 'todo': 'skipped', 'disabled': 'skipped'}.get(
                status, status)
            err = first_line((a.get('failureMessages') or [''])[0]) if status == 'failed' else ''
            t = {'name': ' > '.join([*a.get('ancestorTitles', []), a.get('title', '')]),
                 'status': status, 'ms': round(a.get('duration') or 0)}
            if status == 'failed':
                t['error'] = err
                t['cause'] = cause_of(name, notes.get(name, ''), t['name'], err)
            tests.append(t)
        entry = {'tests': tests}
        if notes.get(name):
            entry['notes'] = notes[name]
        if tr.get('status') == 'failed' and not any(t['status'] == 'failed' for t in tests):
            entry['error'] = first_line(tr.get('message')) or 'failed (no message)'
            entry['cause'] = cause_of(name, notes.get(name, ''), '', entry['error'])
        res['files'][name] = entry
    return res


def cause_of(fname, notes, test, error):
    hay = f'{fname} {notes} :: {test} :: {error}'
    for label, pat in CAUSES:
        if re.search(pat, hay):
            return label
    return 'other'


def counts(files):
    c = {'passed': 0, 'failed': 0, 'skipped': 0, 'file_errors': 0}
    for f in files.values():
        for t in f['tests']:
            c[t['status'] if t['status'] in c else 'failed'] += 1
        c['file_errors'] += 'error' in f
    return c


def summary(results):
    lines = []
    for name, res in results['suites'].items():
        c = counts(res['files'])
        harness = sum(t.get('cause', '').startswith('harness') for f in res['files'].values()
                      for t in f['tests'])
        lines.append(f'== {name} ({res.get("commit") or res["source"]}): {c["passed"]} passed, '
                     f'{c["failed"]} failed ({harness} of them failures of the harness), '
                     f'{c["skipped"]} skipped'
                     + (f', {c["file_errors"]} files that did not run' if c['file_errors'] else '')
                     + (f' in {res["seconds"]} s' if 'seconds' in res else ''))
        if res.get('error'):
            lines.append(f'   !! {res["error"]}')
            if res.get('log_tail'):
                lines.append(res['log_tail'])
        width = max([len(f) for f in res['files']] + [10])
        for fname in sorted(res['files']):
            f = res['files'][fname]
            fc = counts({fname: f})
            lines.append(f'   {fname:<{width}}  {fc["passed"]:3d} passed {fc["failed"]:3d} failed '
                         f'{fc["skipped"]:3d} skipped' + ('  (did not run)' if 'error' in f else ''))
        failing = [(fname, t['name'], t['error'], t['cause'])
                   for fname in sorted(res['files'])
                   for t in res['files'][fname]['tests'] if t['status'] == 'failed']
        failing += [(fname, '(the file did not run)', f['error'], f['cause'])
                    for fname, f in sorted(res['files'].items()) if 'error' in f]
        if failing:
            lines.append(f'   failing ({name}), by cause:')
        by_cause = {}
        for item in failing:
            by_cause.setdefault(item[3], []).append(item)
        order = [label for label, _ in CAUSES] + ['other']
        for cause in sorted(by_cause, key=order.index):
            lines.append(f'   - {cause}: {len(by_cause[cause])}')
            for fname, test, err, _ in by_cause[cause]:
                lines.append(f'       {fname} :: {test}: {err}')
        lines.append('')
    total = {'passed': 0, 'failed': 0, 'skipped': 0}
    for res in results['suites'].values():
        c = counts(res['files'])
        for k in total:
            total[k] += c[k]
    lines.append(f'{total["passed"]} passed, {total["failed"]} failed, {total["skipped"]} skipped')
    return '\n'.join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--e2b', default=MIRRORS['e2b'] if os.path.isdir(MIRRORS['e2b']) else None,
                    help="a checkout (or git directory) of e2b-dev/E2B")
    ap.add_argument('--code-interpreter', dest='ci',
                    default=MIRRORS['code-interpreter']
                    if os.path.isdir(MIRRORS['code-interpreter']) else None,
                    help='a checkout (or git directory) of e2b-dev/code-interpreter')
    ap.add_argument('--petri', default=os.path.join(ROOT, 'build', 'petri'))
    ap.add_argument('--only', default='',
                    help='comma-separated substrings of the test files to run, e.g. '
                         'e2b/sandbox/files,code-interpreter/charts')
    ap.add_argument('--workers', type=int, default=2, help='test files at once (2)')
    ap.add_argument('--json', help='write every result here')
    args = ap.parse_args()
    if not os.path.isdir(SDK_MODULES):
        sys.exit('tests/e2b/new/node_modules is missing: run make tests/e2b/new/node_modules '
                 '(npm ci) first')
    if not os.access(args.petri, os.X_OK):
        sys.exit(f'{args.petri}: no petri binary (make)')
    sources = {'e2b': args.e2b, 'code-interpreter': args.ci}
    only = [p for p in args.only.split(',') if p]
    suites = [s for s in SUITES if sources[s.name]]
    if not suites:
        sys.exit('no suite: give --e2b DIR and/or --code-interpreter DIR')

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    runner = runner_modules()
    results = {'petri': os.path.abspath(args.petri),
               'sdk': {n: package_version(n) for n in ('e2b', '@e2b/code-interpreter')},
               'runner': RUNNER_DEPS, 'only': only, 'suites': {}}
    tmp = tempfile.mkdtemp(prefix='petri-e2b-suites-')
    petri = None
    t0 = time.monotonic()
    try:
        modules = link_modules(os.path.join(tmp, 'node_modules'), runner, SDK_MODULES)
        petri = Petri(os.path.abspath(args.petri), tmp)
        log(f'petri serve at {petri.url} (warm: {petri.warm})')
        for s in suites:
            results['suites'][s.name] = run_suite(s, sources[s.name], tmp, modules, petri,
                                                  only, args.workers)
            if not petri.running():
                log('petri serve died: ' + petri.read(petri.log_path)[-3000:])
                break
    except KeyboardInterrupt:
        log('interrupted')
        results['interrupted'] = True
    finally:
        if petri:
            results['petri_exit'] = petri.stop()
            if results['petri_exit'] not in (0, None):
                results['petri_log_tail'] = petri.read(petri.log_path)[-3000:]
        shutil.rmtree(tmp, ignore_errors=True)
    results['seconds'] = round(time.monotonic() - t0, 1)
    text = summary(results)
    print(text)
    print(f'({results["seconds"]} s; petri serve exit {results.get("petri_exit")})')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    if results.get('interrupted'):
        sys.exit(130)


if __name__ == '__main__':
    main()
