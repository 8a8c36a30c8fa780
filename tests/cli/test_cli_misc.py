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
    # The languages, from the one table the front ends read.
    assert re.search(r'^languages:\s+python \(also py, python3\), bash \(also sh\), c$',
                     text, re.M), text


def test_check_json(petri_raw):
    r = petri_raw(['check', '--json'])
    assert r.rc == 0, r.stderr
    info = json.loads(r.stdout)
    assert info['sandbox']['works'] is True
    assert info['seccomp']['available'] is True
    count = int(petri_raw(['policy', '--count']).stdout)
    assert info['seccomp']['allowed_syscalls'] == count
    assert info['uid_map']['host_uid'] >= 2_000_000_000
    assert info['languages'] == [
        {'name': 'python', 'aliases': ['py', 'python3'], 'extensions': ['.py']},
        {'name': 'bash', 'aliases': ['sh'], 'extensions': ['.sh', '.bash']},
        {'name': 'c', 'aliases': [], 'extensions': ['.c']}]
    # The range sandboxes lease their host uids from, and how much of it
    # no daemon of this host holds.
    assert info['uid_map']['uid_count'] == 65536
    assert 0 <= info['uid_map']['uids_free'] <= info['uid_map']['uid_count']
