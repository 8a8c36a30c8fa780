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
    """{module: {run, skipped, bad: [test ids that failed or raised]}}"""
    out = {}
    root = ET.parse(xml_path).getroot()
    for case in root.iter('testcase'):
        name = case.get('name') or ''        # test.test_os.FileTests.test_x
        parts = name.split('.')
        mod = parts[1] if len(parts) > 2 and parts[0] == 'test' else parts[0]
        m = out.setdefault(mod, {'run': 0, 'skipped': 0, 'bad': []})
        m['run'] += 1
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


def main():
    with tempfile.TemporaryDirectory(prefix='cpython-') as d:
        xml = os.path.join(d, 'junit.xml')
        env = dict(os.environ, TMPDIR=d, HOME=d)
        p = subprocess.run([sys.executable if 'python3' in sys.executable else '/usr/bin/python3',
                            '-m', 'test', '--junit-xml', xml, *ARGS, *MODULES],
                           cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        text = p.stdout.decode('utf-8', 'replace')
        result = {'code': p.returncode, 'modules': summarize(xml) if os.path.exists(xml) else {},
                  'failed': failed_modules(text), 'tail': text[-3000:]}
    print('CPYTHON ' + json.dumps(result))


main()
