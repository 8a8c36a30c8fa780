"""The posture of a running sandbox, seen from the host.

While a sandbox runs `sleep` (cold: a `petri run`; serve-cold and
serve-warm: a session executing it in the background), find its processes
on the host (by their petri cgroup, by the session's pid namespace) and
check each one:

* uid and gid: a sandbox uid on the host (>= 2000000000), never 0;
* CapInh, CapPrm, CapEff, CapBnd, CapAmb all 0; NoNewPrivs 1; Seccomp 2;
* every namespace (user, mnt, pid, net, ipc, uts, cgroup) differs from
  the host's;
* the driver's keeper (the main process) holds fds 0-3, its end of the
  interpreter's socket pair and a pidfd of it; the interpreter (the
  keeper's child) fds 0-3 only; every fd of every process is a pipe, a
  socket or /dev/null (nothing that points to a host file);
* its mounts: the root is a tmpfs, /usr is read-only, and no host path such
  as /root, /home, /var, /run or the checkout is mounted.
"""
import os
import signal
import subprocess
import threading

import pytest

import hostilehelp as H
from harness import command_line, poll

NAMESPACES = ('user', 'mnt', 'pid', 'net', 'ipc', 'uts', 'cgroup')
HOST_PATHS = ('/root', '/home', '/var', '/run', '/srv', '/boot', '/mnt', str(H.ROOT), '/tmp/pytest')
SLEEP = 'sleep 600'


def inspect(pids):
    """Problems with the processes of one sandbox."""
    problems = []
    host_ns = {ns: H.ns_inode('self', ns) for ns in NAMESPACES}
    # the driver: the keeper, the main process, pid 2 of the sandbox (pid 1
    # of a warm sandbox is a fork of the template and carries its command
    # line), and the interpreter, its child
    drivers = [p for p in pids if '/opt/petri/driver.py' in command_line(p)
               and (H.proc_status(p) or {}).get('NSpid', '').split()[-1:] == ['2']]
    interpreters = [p for p in pids if '/opt/petri/driver.py' in command_line(p)
                    and str(drivers[:1] and drivers[0]) == (H.proc_status(p) or {}).get('PPid')]
    if not drivers or not interpreters:
        problems.append(f'no keeper or interpreter among {[(p, command_line(p)) for p in pids]}')
    for pid in pids:
        st = H.proc_status(pid)
        if st is None:
            continue
        who = f'{pid} ({command_line(pid)[:60]})'
        uids = [int(x) for x in st['Uid'].split()]
        gids = [int(x) for x in st['Gid'].split()]
        if any(u < H.SANDBOX_UID_MIN for u in uids) or any(g < H.SANDBOX_UID_MIN for g in gids):
            problems.append(f'{who}: uid {uids} gid {gids}')
        for cap in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'):
            if int(st[cap], 16) != 0:
                problems.append(f'{who}: {cap} {st[cap]}')
        if st.get('NoNewPrivs') != '1':
            problems.append(f'{who}: NoNewPrivs {st.get("NoNewPrivs")}')
        if st.get('Seccomp') != '2':
            problems.append(f'{who}: Seccomp {st.get("Seccomp")}')
        if 'Groups' in st and st['Groups'].strip():
            problems.append(f'{who}: supplementary groups {st["Groups"]}')
        for ns in NAMESPACES:
            if H.ns_inode(pid, ns) == host_ns[ns]:
                problems.append(f'{who}: shares the host {ns} namespace')
        fds = {}
        try:
            for fd in os.listdir(f'/proc/{pid}/fd'):
                try:
                    fds[int(fd)] = os.readlink(f'/proc/{pid}/fd/{fd}')
                except OSError:
                    pass
        except OSError:
            continue
        own = set()
        for d in ('tmp', 'work', 'dev/shm'):
            try:
                own.add(os.stat(f'/proc/{pid}/root/{d}').st_dev)
            except OSError:
                pass
        for fd, target in fds.items():
            if target.startswith(('pipe:', 'socket:', 'anon_inode:')) or target == '/dev/null':
                continue
            try:
                dev = os.stat(f'/proc/{pid}/fd/{fd}').st_dev
            except OSError:
                dev = None
            if dev not in own:      # a file of the sandbox's own tmpfs is fine (bash's script)
                problems.append(f'{who}: fd {fd} -> {target} (not on a tmpfs of the sandbox)')
        if pid in drivers:
            kinds = sorted((fd, fds[fd].split(':')[0]) for fd in fds)
            if kinds != [(0, '/dev/null'), (1, 'pipe'), (2, 'pipe'), (3, 'socket'),
                         (4, 'socket'), (5, 'anon_inode')] or 'pidfd' not in fds[5]:
                problems.append(f'{who}: the keeper holds fds {sorted(fds)} ({fds})')
            problems += inspect_mounts(pid, who)
        if pid in interpreters and sorted(fds) != [0, 1, 2, 3]:
            problems.append(f'{who}: the interpreter holds fds {sorted(fds)} ({fds})')
    return problems


def inspect_mounts(pid, who):
    problems = []
    with open(f'/proc/{pid}/mountinfo') as f:
        mounts = [line.split() for line in f.read().splitlines()]
    by_point = {}
    work_dev = next((m[2] for m in mounts if m[4] == '/work'), None)
    for m in mounts:
        sep = m.index('-')
        by_point[m[4]] = (m[3], m[5].split(','), m[sep + 1])
        if m[4] == '/home/user' and m[3] == '/' and m[2] == work_dev:
            continue        # /work again under E2B's name: the sandbox's own tmpfs
        for path in (m[3], m[4]):
            if any(path == h or path.startswith(h + '/') for h in HOST_PATHS):
                problems.append(f'{who}: host path in its mounts: {" ".join(m)}')
    root = by_point.get('/')
    if not root or root[2] != 'tmpfs':
        problems.append(f'{who}: the root is not a tmpfs: {root}')
    usr = by_point.get('/usr')
    if not usr or 'ro' not in usr[1]:
        problems.append(f'{who}: /usr is not read-only: {usr}')
    for point in ('/work', '/tmp', '/home/user'):
        if point not in by_point or by_point[point][2] != 'tmpfs':
            problems.append(f'{who}: {point} is not a tmpfs of its own: {by_point.get(point)}')
    if 'nosuid' not in by_point.get('/home/user', ('', []))[1]:
        problems.append(f'{who}: /home/user is not nosuid: {by_point.get("/home/user")}')
    return problems


def wait_for_sleep(find_pids):
    def ready():
        pids = find_pids()
        return pids if any(command_line(p).startswith('sleep') for p in pids) else None
    pids = H.wait_until(ready, timeout=60)
    assert pids, f'no sleep in the sandbox: {[(p, command_line(p)) for p in find_pids()]}'
    return pids


def settled(pids):
    """What inspect() finds once the processes have settled: a program
    caught just after its exec holds the loader's fd of a library for a
    moment (seen in CI: sleep's fd 3 on libc.so.6), which a real leak
    outlasts."""
    return poll(lambda: inspect(pids), lambda problems: not problems, 2)


def test_posture_cold_run(tmp_path, host_guard):
    prog = tmp_path / 'sleep.sh'
    prog.write_text(SLEEP + '\n')
    args = [H.PETRI, 'run', '--json', '-l', 'bash', '-t', '60', str(prog)]
    with H.petri_lock():
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=H.petri_env())
        H.STARTED.add(p.pid)
        tag = H.cgroup_tag(p.pid)
        try:
            pids = wait_for_sleep(lambda: [q for q in H.sandbox_procs()
                                           if any(f'/petri/{tag}' in d
                                                  for d in H.proc_cgroups(q))])
            problems = settled(pids)
        finally:
            p.send_signal(signal.SIGINT)        # petri run cleans up on Ctrl-C
            p.communicate(timeout=60)
    assert H.wait_until(lambda: not H.run_leftovers(tag)), H.run_leftovers(tag)
    assert not problems, '\n'.join(problems)


# The program that holds the sandbox open, by language: Node.js makes
# system calls of its own (threads, epoll, its JIT), and is inspected with
# the sleep it starts.
HOLDERS = {'bash': SLEEP, 'javascript': f"require('child_process').execSync('{SLEEP}')"}


@pytest.mark.parametrize('language', HOLDERS)
@pytest.mark.parametrize('path', ('serve-cold', 'serve-warm'))
def test_posture_session(path, language, servers, host_guard):
    srv = servers(path)
    sid = srv.api.session(limits={'timeout_s': 60})
    watch = H.SessionWatch(srv.api, sid, warm=(path == 'serve-warm'))
    done = {}
    t = threading.Thread(target=lambda: done.setdefault(
        'r', srv.api.post(f'/v1/sessions/{sid}/execute',
                          {'code': HOLDERS[language], 'language': language})))
    t.start()
    try:
        pids = wait_for_sleep(watch.host_procs)
        problems = settled(pids)
        if language == 'javascript' and not any(command_line(p).startswith('node ') for p in pids):
            problems.append(f'no node among {[(p, command_line(p)) for p in pids]}')
    finally:
        srv.api.delete(f'/v1/sessions/{sid}')
        t.join(60)
    assert H.wait_until(lambda: not watch.leftovers()), watch.leftovers()
    assert not problems, '\n'.join(problems)
