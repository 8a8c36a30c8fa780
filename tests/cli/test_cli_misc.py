"""Other petri commands: policy and check."""

import json
import re


def test_policy_count_matches_the_listed_names(petri_raw):
    count = petri_raw(['policy', '--count'])
    assert count.rc == 0, count.stderr
    n = int(count.stdout.decode().strip())
    assert n > 0

    listing = petri_raw(['policy'])
    assert listing.rc == 0, listing.stderr
    names = [line for line in listing.stdout.decode().splitlines()
             if line and not line.startswith('#')]
    assert len(names) == n
    assert len(set(names)) == n                     # no duplicates
    assert all(re.fullmatch(r'[a-z_][a-z0-9_]*', name) for name in names), names
    assert {'read', 'write', 'exit_group'} <= set(names)
    for dangerous in ('ptrace', 'mount', 'bpf', 'kexec_load', 'init_module', 'keyctl',
                      'io_uring_setup', 'unshare', 'setns', 'pivot_root', 'chroot'):
        assert dangerous not in names, dangerous
    assert str(n) in listing.stdout.decode().splitlines()[0]


def test_check_says_the_sandbox_works(petri_raw):
    r = petri_raw(['check'])
    assert r.rc == 0, (r.stdout, r.stderr)
    text = r.stdout.decode()
    assert re.search(r'^sandbox:\s+works', text, re.M), text
    assert re.search(r'^cgroups:\s+v[12] under', text, re.M), text   # the suite needs them
    assert re.search(r'leased from \d+-\d+, \d+ of 65536 free', text), text
    # The languages, from the one table the front ends read, with the
    # versions a sandbox found; the packages it can import.
    assert re.search(r'^languages:\s+python \(also py, python3\): 3\.\d+\.\d+,$', text, re.M), text
    assert re.search(r'^\s+bash \(also sh\): GNU bash, version', text, re.M), text
    assert re.search(r'^\s+javascript \(also js, node, nodejs\): v\d+', text, re.M), text
    assert re.search(r'^\s+typescript \(also ts\): TypeScript \d+\.\d+', text, re.M), text
    assert re.search(r'^\s+r \(also R\): R', text, re.M), text
    assert re.search(r'^packages:\s+\d+ Python packages', text, re.M), text
    assert re.search(r'\bnumpy \d', text) and re.search(r'\bseaborn \d', text), text
    # The tools a project's tests need, each as a sandbox ran it: one table.
    table = text[text.index('\ntools:'):text.index('\npackages:')]
    assert re.search(r'^tools:\s+git: git version \d', table, re.M), table
    for line in (r'make: GNU Make \d', r'gcc: gcc \(', r'g\+\+: g\+\+ \(', r'pkg-config: \d',
                 r'pytest: pytest \d', r'npm: \d+\.', r'jq: jq-\d', r'sqlite3: 3\.',
                 r'rg: ripgrep \d', r'patch: GNU patch \d', r'diff: diff \(GNU diffutils\)',
                 r'tar: tar \(GNU tar\)', r'unzip: UnZip \d'):
        assert re.search(r'^\s+' + line, table, re.M), (line, table)
    assert 'NOT FOUND' not in table, table   # scripts/deps installs every one
    # A network for sessions, made as petri serve makes one (router, link).
    assert re.search(r'^network:\s+works: the router started in \d+ ms', text, re.M), text


def test_check_json(petri_raw):
    r = petri_raw(['check', '--json'])
    assert r.rc == 0, r.stderr
    info = json.loads(r.stdout)
    assert info['sandbox']['works'] is True
    assert info['seccomp']['available'] is True
    assert info['network']['works'] is True, info['network']
    assert info['network']['clients_may'] == 'none' and info['network']['link_ms'] > 0
    count = int(petri_raw(['policy', '--count']).stdout)
    assert info['seccomp']['allowed_syscalls'] == count
    assert info['uid_map']['host_uid'] >= 2_000_000_000
    names = [(l['name'], l['aliases'], l['extensions']) for l in info['languages']]
    assert names == [('python', ['py', 'python3'], ['.py']),
                     ('bash', ['sh'], ['.sh', '.bash']), ('c', [], ['.c']),
                     ('javascript', ['js', 'node', 'nodejs'], ['.js', '.cjs']),
                     ('typescript', ['ts'], ['.ts', '.cts']),
                     ('r', ['R'], ['.R', '.r']), ('java', ['jshell'], ['.jsh', '.java'])]
    assert all(l['available'] and l['version'] for l in info['languages'])
    packages = {p['name']: p['version'] for p in info['packages']}
    # Found in the sandbox, not written down: what Debian installed.
    import importlib.metadata
    assert packages['numpy'] == importlib.metadata.version('numpy')
    assert 'seaborn' in packages and 'scikit-learn' in packages
    tools = {t['name']: t['version'] for t in info['tools']}
    assert list(tools) == ['git', 'make', 'gcc', 'g++', 'pkg-config', 'pytest', 'npm', 'jq',
                           'sqlite3', 'rg', 'patch', 'diff', 'tar', 'unzip'], tools
    assert all(tools.values()), tools
    assert tools['git'].startswith('git version ') and tools['pytest'].startswith('pytest ')
    # The range sandboxes lease their host uids from, and how much of it
    # no daemon of this host holds.
    assert info['uid_map']['uid_count'] == 65536
    assert 0 <= info['uid_map']['uids_free'] <= info['uid_map']['uid_count']
