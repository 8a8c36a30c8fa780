"""pid 1 of a sandbox forked from the warm template is petri-init, a small
static program, not a copy of the Python process (docs/architecture.md):
the template makes one copy of itself per sandbox, the session's driver.
Both ways of forking are held to it: straight from a single-threaded
template, and through the runtime's own fork() when the template has
threads.  Either way the session is warm, works, and its pid 1 reaps what
its programs leave behind."""
import json
import os

import pytest

from harness import cmdline, read_text, stat_fields
from wheels import operator_dir

PROBE = r'''
import json, os, sys
status = dict(line.split(':', 1) for line in open('/proc/1/status'))
print(json.dumps({
    'name': status['Name'].strip(),
    'rss_kb': int(status['VmRSS'].split()[0]),
    'cmdline': open('/proc/1/cmdline', 'rb').read().split(b'\0')[0].decode(),
    'me': os.getpid(), 'parent': os.getppid(),
    'warm': b'--zygote' in open('/proc/self/cmdline', 'rb').read(),
    'threads_module': 'petri_test_threads' in sys.modules,
}))
'''

# An orphan: its parent exits at once, so pid 1 must reap it when it ends.
ORPHANS = r'''
import os, subprocess, time
for _ in range(20):
    subprocess.run(['sh', '-c', 'sleep 0.05 &'])
time.sleep(0.5)
zombies = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            if open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] == 'Z':
                zombies.append(pid)
        except OSError:
            pass
print(len(zombies))
'''

# sched_getcpu() of the driver's main thread, pinned to each CPU in turn:
# glibc reads it from the thread's rseq area, which the kernel keeps up to
# date only while the area is registered (B, cloned with CLONE_VM, had none
# to hand on to its fork, the driver).
CPUS = r'''
import ctypes, json, os
libc = ctypes.CDLL(None)
allowed = sorted(os.sched_getaffinity(0))[:4]
seen = {}
for cpu in allowed:
    os.sched_setaffinity(0, {cpu})
    seen[cpu] = libc.sched_getcpu()
os.sched_setaffinity(0, set(allowed))
print(json.dumps(seen))
'''

# A module whose import starts a thread: the template is not single-threaded
# then, and forks through the runtime first.
THREADS_MODULE = '''
import threading, time
threading.Thread(target=time.sleep, args=(1e9,), daemon=True).start()
'''


def probe(api, sid):
    r = api.execute(sid, PROBE)
    assert r['status'] == 'ok', r
    return json.loads(r['stdout'])


@pytest.mark.parametrize('threads', [False, True], ids=['direct', 'threaded-template'])
def test_pid1_of_a_warm_sandbox_is_petri_init(make_server, threads):
    with operator_dir('pid1') as lib:
        module = os.path.join(lib, 'petri_test_threads.py')
        with open(module, 'w') as f:
            f.write(THREADS_MODULE)
        os.chmod(module, 0o644)
        preload = 'colorsys, petri_test_threads' if threads else 'colorsys'
        # One template: a light one beside it would fork directly.
        check(make_server(f'[python]\npath = {lib}\npreload = {preload}\n'
                          'light_template = false\n'), threads)


def parent(pid):
    fields = stat_fields(pid)
    return int(fields[1]) if fields else None


def is_template(pid):
    return pid is not None and b'--zygote' in b'\0'.join(cmdline(pid))


def forked_by_the_template(srv):
    """For each petri-init of the daemon's tree (host pids): is its parent
    the template itself (a direct fork), rather than the template's pid 1
    (B reparented when the runtime's child exits)?  The runtime's child is
    a copy of the template too, but its own parent is the template: a
    petri-init seen before that child has exited is not a direct fork."""
    out = {}
    for pid in srv.descendants():
        if (read_text(f'/proc/{pid}/comm') or '').strip() != 'petri-init':
            continue
        up = parent(pid)
        above = parent(up) if up else None
        if up and above:                # none of them is gone
            out[pid] = is_template(up) and not is_template(above)
    return out


def check(srv, threads):
    assert srv.warm_state == 'ready', srv.stderr_text()[-3000:]
    api = srv.api()
    sid = api.session()
    got = probe(api, sid)
    # A single-threaded template forks straight from itself (no copy of it
    # but the driver); one with threads through a child of its own.
    direct = forked_by_the_template(srv)
    assert direct and set(direct.values()) == {not threads}, direct
    assert got['warm'], got
    assert got['threads_module'] == threads, got
    assert (got['name'], got['cmdline']) == ('petri-init', 'petri-init'), got
    # The probe runs in the interpreter, a child of the keeper (pid 2).
    assert (got['me'], got['parent']) == (3, 2), got
    # A copy of the interpreter is tens of MiB resident; petri-init a few
    # pages (the bound leaves room for the static C library).
    assert got['rss_kb'] < 4096, got
    r = api.execute(sid, CPUS)
    assert r['status'] == 'ok', r
    seen = json.loads(r['stdout'])
    assert all(int(cpu) == got for cpu, got in seen.items()), seen
    r = api.execute(sid, ORPHANS)
    assert r['status'] == 'ok' and r['stdout'].strip() == '0', r
    # A second session: the template goes on forking after the first.
    assert probe(api, api.session())['name'] == 'petri-init'
