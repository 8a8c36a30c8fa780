"""Run CPython's regression tests (Debian's libpython3.11-testsuite) for
some modules and print one line: `CPYTHON {json}`, for each module the
number of test cases run and skipped and the ids of those that failed or
raised.  The same file runs bare and inside petri (as the code of a
`petri run` or of a session's execution), so MODULES is given by
assignment in front of it."""
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

MODULES = globals().get('MODULES') or sys.argv[1:]
# Resources (-u): none.  network would reach outside (there is none inside),
# cpu/walltime make modules minutes long; the default set is what a
# developer's `python3 -m test MODULE` runs.  -j3: the modules sleep a lot.
# Left out of every run, bare and inside alike (-i): what petri refuses on
# purpose (docs/security.md says why), and what hangs bare.
ARGS = [
    '-j3', '--timeout', '300', '--slowest',
    # The host's vsock (a virtual machine's) hangs the threaded stream test
    # bare; inside AF_VSOCK is refused and the tests skip.
    '-i', '*VSOCK*',
    # UDP-Lite (deprecated in Linux) answers EPROTONOSUPPORT, as a kernel
    # without it would; test_socket assumes every kernel has it.
    '-i', '*UDPLITE*',
    # fcntl(F_NOTIFY), dnotify: EPERM (watches on shared inodes).
    '-i', '*test_fcntl_64_bit',
    # RLIMIT_FSIZE is the disk limit's backstop, never infinite.
    '-i', '*test_fsize_ismax',
]


def summarize(xml_path):
    """{module: {run, skipped, bad: [test ids that failed or raised], ids: [all]}}"""
    out = {}
    root = ET.parse(xml_path).getroot()
    for case in root.iter('testcase'):
        name = case.get('name') or ''        # test.test_os.FileTests.test_x
        parts = name.split('.')
        mod = parts[1] if len(parts) > 2 and parts[0] == 'test' else parts[0]
        m = out.setdefault(mod, {'run': 0, 'skipped': 0, 'bad': [], 'ids': []})
        m['run'] += 1
        m['ids'].append(name)
        if case.find('skipped') is not None:
            m['skipped'] += 1
        if case.find('failure') is not None or case.find('error') is not None:
            m['bad'].append(name)
    return out


def failed_modules(text):
    """The modules regrtest's summary lists as failed (a crash, a timeout or
    an error outside any test case shows only there)."""
    failed, take = set(), False
    for line in text.splitlines():
        if take and line.startswith('    '):
            failed.update(line.split())
            continue
        take = bool(re.match(r'(\d+ tests?|test_\w+) failed', line.strip()) or
                    'failed again' in line or 'crashed' in line)
        m = re.match(r'(test_\w+) failed', line.strip())
        if m:
            failed.add(m.group(1))
    return sorted(failed)


def regrtest(d, xml, args):
    """One run of regrtest in the directory d: (its summary by module, the
    modules it lists as failed, its output's tail)."""
    env = dict(os.environ, TMPDIR=d, HOME=d)
    p = subprocess.run([sys.executable if 'python3' in sys.executable else '/usr/bin/python3',
                        '-m', 'test', '--junit-xml', xml, *args],
                       cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    text = p.stdout.decode('utf-8', 'replace')
    return (p.returncode, summarize(xml) if os.path.exists(xml) else {},
            failed_modules(text), text[-3000:])


def main():
    """The modules once; then the test cases that failed once more, alone.
    Some of CPython's tests time themselves (a barrier's 0.3 s timeout, a
    thread that must end within a second) and fail on a machine loaded many
    times over, bare or inside alike; a case that passes when run again is
    listed as flaky, not bad, and its module passes if nothing else in it
    failed.  What the sandbox refuses fails both times."""
    with tempfile.TemporaryDirectory(prefix='cpython-') as d:
        code, modules, failed, tail = regrtest(d, os.path.join(d, 'junit.xml'),
                                               [*ARGS, *MODULES])
        bad = [t for m in modules.values() for t in m['bad']]
        flaky = []
        if bad:
            again = sorted(n for n, m in modules.items() if m['bad'])
            args = [a for a in ARGS if a != '-j3'] + [f'-m{t}' for t in bad] + again
            _, rerun, still_failed, rerun_tail = regrtest(d, os.path.join(d, 'rerun.xml'),
                                                          args)
            still_bad = {t for m in rerun.values() for t in m['bad']}
            ran = {t for m in rerun.values() for t in m['ids']}
            for name, m in modules.items():
                passed = [t for t in m['bad'] if t in ran and t not in still_bad]
                flaky += passed
                m['bad'] = [t for t in m['bad'] if t not in passed]
                if name in failed and not m['bad'] and name not in still_failed:
                    failed.remove(name)
            tail += '\n--- the failed cases run again:\n' + rerun_tail[-1500:]
        for m in modules.values():
            del m['ids']
        result = {'code': code, 'modules': modules, 'failed': failed, 'flaky': flaky,
                  'tail': tail}
    print('CPYTHON ' + json.dumps(result))


main()
