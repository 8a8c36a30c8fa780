"""Every system call number against the policy petri declares.

sweep/syscall_sweep.c runs inside a sandbox (compiled there by the driver,
once per path) and calls every x86_64 number 0..511, every x32 number and a
sample of i386 numbers, each in its own child.  What the kernel let through
is compared with `petri policy` (names turned into numbers with the host's
<asm/unistd_64.h>):

* a call counts as denied when it fails with ENOSYS (the filter's default
  action) or EPERM (the filter's deny list); anything else (a return value,
  another errno, a signal other than SIGSYS, a block) means it ran;
* a number the header does not name must be denied (ENOSYS);
* nothing on the x86_64 ABI may be killed (SIGSYS), and every x32 and i386
  call must be (SIGSYS): the filter kills a foreign ABI outright.  One
  exception, probed on the host outside any sandbox (hostilehelp.i386_entry):
  a kernel with no 32-bit entry answers int 0x80 with SIGSEGV before any
  filter sees it, so there an i386 SIGSEGV is the call not running, is
  accepted, and the test says so in a warning; where the host takes int
  0x80, SIGSYS is required;
* calls that end or block the caller by design (exit, pause, ...) are not
  made and count as what their name says.

The test fails on any difference and lists it.
"""
import errno
import re
import signal
import subprocess
import warnings

import pytest

import hostilehelp as H

SWEEP_C = H.SWEEP_C
UNISTD = '/usr/include/x86_64-linux-gnu/asm/unistd_64.h'
LIMITS = dict(H.DEFAULT_LIMITS, timeout=90, pids=64, memory=512, output_kb=1024)

# Allowed calls that answer EPERM from the kernel itself for the sweep's
# arguments (so EPERM alone cannot tell them from a denial): none known.
KERNEL_EPERM = set()
KILLED = ('sig', str(int(signal.SIGSYS)))          # the filter's answer to a foreign ABI
NO_ENTRY = ('sig', str(int(signal.SIGSEGV)))       # int 0x80 on a kernel without the entry
# Numbers newer than the host's header that the kernel runs WITHOUT asking
# seccomp at all (kernel/seccomp.c, seccomp_is_const_allow passthrough):
# uretprobe (335, Linux 6.11) and uprobe (336, 6.16) only work from the
# kernel's uprobe trampoline; called from anywhere else they raise SIGILL
# (uretprobe) or fail with ENXIO (uprobe).  No filter can deny them; the
# sweep checks that they stay harmless.
KERNEL_PASSTHROUGH = {335: ('uretprobe', {('sig', str(int(signal.SIGILL)))}),
                      336: ('uprobe', {('err', str(errno.ENXIO))})}


def syscall_table():
    table = {}
    with open(UNISTD) as f:
        for line in f:
            m = re.match(r'#define __NR_(\w+)\s+(\d+)', line)
            if m:
                table[int(m.group(2))] = m.group(1)
    return table


def declared_policy():
    out = subprocess.run([H.PETRI, 'policy'], capture_output=True, text=True, check=True).stdout
    names = [ln.strip() for ln in out.splitlines() if ln.strip() and not ln.startswith('#')]
    count = subprocess.run([H.PETRI, 'policy', '--count'], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert int(count) == len(names), f'policy --count says {count}, the list has {len(names)}'
    return set(names)


def parse(text):
    rows = {}
    done = False
    for line in text.splitlines():
        if line == 'SWEEP done':
            done = True
            continue
        m = re.match(r'SWEEP (\S+) (\d+) (\S+) (\S+)$', line)
        if m:
            rows[(m.group(1), int(m.group(2)))] = (m.group(3), m.group(4))
    return rows, done


def ran(outcome, detail, name=None):
    """Did the kernel run the call (rather than the filter refuse it)?"""
    if outcome == 'err':
        return int(detail) not in (errno.ENOSYS, errno.EPERM)
    if outcome == 'sig':
        return int(detail) != signal.SIGSYS
    return outcome in ('ret', 'exit')


def compare(rows, declared, table, no_i386=None):
    """The differences from the policy, and the allowed calls seen.
    no_i386: why this kernel takes no i386 call at all (then SIGSEGV is
    accepted for them), or None."""
    problems = []
    allowed_seen = set()
    names = set(table.values())
    unknown = sorted(declared - names)
    if unknown:
        problems.append(f'policy names that x86_64 does not have: {unknown}')
    for nr in range(0, 512):
        outcome, detail = rows.get(('x86_64', nr), ('missing', ''))
        name = table.get(nr)
        want = name in declared
        if nr in KERNEL_PASSTHROUGH and name is None:
            label, harmless = KERNEL_PASSTHROUGH[nr]
            if (outcome, detail) not in harmless:
                problems.append(f'x86_64 {nr} ({label}, unfiltered by design): {outcome} '
                                f'{detail}, expected {sorted(harmless)}')
            continue
        if outcome == 'missing':
            problems.append(f'x86_64 {nr} ({name}): no result')
            continue
        if outcome == 'skip':
            if not want:
                problems.append(f'x86_64 {nr} ({name}): not called (ends or blocks the '
                                f'caller), and the policy denies it')
            if want:
                allowed_seen.add(name)
            continue
        if outcome == 'sig' and int(detail) == signal.SIGSYS:
            problems.append(f'x86_64 {nr} ({name}): killed with SIGSYS (only foreign ABIs are)')
            continue
        got = ran(outcome, detail, name)
        if name is None:
            if got or (outcome, detail) != ('err', str(errno.ENOSYS)):
                problems.append(f'x86_64 {nr} (not in unistd_64.h): {outcome} {detail}, '
                                f'expected ENOSYS')
            continue
        if got:
            allowed_seen.add(name)
        if got != want and not (want and name in KERNEL_EPERM and detail == str(errno.EPERM)):
            problems.append(f'x86_64 {nr} ({name}): {"ran" if got else "denied"} '
                            f'({outcome} {detail}), the policy says '
                            f'{"allowed" if want else "denied"}')
    for abi in ('x32', 'i386'):
        probed = [(nr, v) for (a, nr), v in rows.items() if a == abi]
        if not probed:
            problems.append(f'no {abi} call was made')
        for nr, (outcome, detail) in sorted(probed):
            if (outcome, detail) == KILLED:
                continue
            if abi == 'i386' and no_i386 and (outcome, detail) == NO_ENTRY:
                continue
            problems.append(f'{abi} {nr:#x}: {outcome} {detail}, expected SIGSYS')
    return problems, allowed_seen


@pytest.fixture(scope='module')
def policy():
    return declared_policy(), syscall_table()


def report(path, rows, declared, problems, allowed_seen, no_i386=None):
    x32 = sum(1 for (a, _) in rows if a == 'x32')
    i386 = sum(1 for (a, _) in rows if a == 'i386')
    print(f'\n[{path}] x86_64 numbers 0..511: {len(allowed_seen)} ran, '
          f'{len(declared)} declared; {x32} x32 and {i386} i386 calls')
    segv = sum(1 for (a, _), v in rows.items() if a == 'i386' and v == NO_ENTRY)
    if no_i386 and segv:
        warnings.warn(f'[{path}] {segv} of {i386} i386 calls ended with SIGSEGV, not '
                      f'SIGSYS, accepted: {no_i386}, so the filter\'s kill of the i386 '
                      f'ABI is not exercised here')


@pytest.mark.parametrize('path', H.PATHS)
def test_syscall_sweep(path, policy, servers, host_guard, host_lacks):
    declared, table = policy
    no_i386 = host_lacks('i386-entry')
    source = SWEEP_C.read_text()
    if path == 'run':
        result, _, _ = H.petri_run(SWEEP_C, 'c', LIMITS, timeout=300)
    else:
        srv = servers(path)
        sid = srv.api.session(limits=H.api_limits(LIMITS))
        H.SessionWatch(srv.api, sid, warm=(path == 'serve-warm'))
        result = srv.api.execute(sid, source, language='c')
        srv.api.delete(f'/v1/sessions/{sid}')
    rows, done = parse(H.out_bytes(result, 'stderr').decode('utf-8', 'replace'))
    assert result['status'] == 'ok' and done, H.describe(result)
    problems, allowed_seen = compare(rows, declared, table, no_i386)
    report(path, rows, declared, problems, allowed_seen, no_i386)
    assert not problems, f'{len(problems)} differences:\n' + '\n'.join(problems)
    assert allowed_seen == declared & set(table.values())


@pytest.mark.parametrize('path', ('serve-cold', 'serve-warm'))
def test_syscall_sweep_from_node(path, policy, servers, host_guard, host_lacks):
    """The same sweep, started by a JavaScript execution: what Node.js and
    the programs it starts may call is the policy, no more."""
    declared, table = policy
    no_i386 = host_lacks('i386-entry')
    srv = servers(path)
    sid = srv.api.session(limits=H.api_limits(LIMITS))
    H.SessionWatch(srv.api, sid, warm=(path == 'serve-warm'))
    r = srv.api.put(f'/v1/sessions/{sid}/files/sweep.c', data=SWEEP_C.read_bytes())
    assert r.status_code == 201, r.text
    built = srv.api.execute(sid, 'gcc -O1 -o sweep sweep.c', language='bash')
    assert built['status'] == 'ok', H.describe(built)
    result = srv.api.execute(sid, "require('child_process').spawnSync('./sweep', "
                                  "{stdio: 'inherit'}).status", language='javascript')
    srv.api.delete(f'/v1/sessions/{sid}')
    rows, done = parse(H.out_bytes(result, 'stderr').decode('utf-8', 'replace'))
    assert result['status'] == 'ok' and done, H.describe(result)
    assert result['results'] == [{'text/plain': '0'}], H.describe(result)
    problems, allowed_seen = compare(rows, declared, table, no_i386)
    report(f'{path}, from node', rows, declared, problems, allowed_seen, no_i386)
    assert not problems, f'{len(problems)} differences:\n' + '\n'.join(problems)
