"""Where a `petri serve`'s CPU goes: a profile of its process tree.

Used by `bench/bench.py --profile` (bench/README.md, "P."): while the bench
sends a burst of one-shots, one of two recorders runs, and this module turns
what it recorded into shares.

- perf (Debian's linux-perf): `perf record -a -g -e cpu-clock` over the whole
  machine, then `perf script --show-task-events`.  Only the samples of the
  server's process tree count: the server, and every process forked from it
  or from one of its descendants, known from perf's FORK records (the ones
  perf synthesizes for processes that already exist at the start, and the
  ones the kernel reports meanwhile).  `perf record -p` would be simpler but
  does not follow the sandboxes forked after it starts.
- strace, where perf cannot record: `strace -c -f` attached to every process
  of the server's cgroup, a per-syscall summary (it slows what it traces
  several times; the shares are what is worth reading, not the rates).

Not named profile.py: that would shadow the standard library's `profile`,
which cProfile imports.
"""
import collections
import os
import re
import shutil
import signal
import subprocess
import time

# On a virtual machine without a PMU perf samples with a timer, and the
# timer's interrupt is taken only when interrupts get enabled again: a
# sample taken after a section that ran with interrupts off lands on the
# paravirtual "enable interrupts" function.  Its caller is what ran.
IRQ_ENABLE = re.compile(r'(^|_)(pvm|native|xen|paravirt|pv)_(safe_halt|irq_enable)'
                        r'|^__raw_callee_save_\w*irq_enable')

# Kernel functions whose inclusive share is always shown (0 when absent),
# so that runs can be compared: fork, its page-table copy, exit and its
# unmapping, page faults, namespaces, cgroup directories, mounts, seccomp.
MARKERS = ('copy_process', 'dup_mmap', 'copy_page_range', 'do_exit', 'exit_mmap',
           'asm_exc_page_fault', 'do_wp_page', 'ksys_unshare', 'copy_namespaces',
           'cgroup_mkdir', 'cgroup_rmdir', 'path_mount', '__seccomp_filter',
           'do_syscall_64', 'schedule')

# The steps of a sandbox's life, for the table of where a one-shot's CPU
# goes: each sample of petri's tree counts for the first step (in this
# order) that one of its frames, or its process, belongs to.  A kernel
# function matches by name (a prefix where it ends in '*'), a user frame by
# its library ('dso:'), a process by its name ('comm:').
STEPS = (
    ('network namespace: create', ('copy_net_ns', 'setup_net')),
    ('network namespace: release', ('cleanup_net', 'put_net', 'free_nsproxy')),
    ('mount namespace and mounts', ('copy_mnt_ns', 'path_mount', 'do_move_mount',
                                    'do_umount', 'umount_tree', 'cleanup_mnt',
                                    '__x64_sys_fsconfig', '__x64_sys_fsmount',
                                    '__x64_sys_open_tree', '__x64_sys_mount_setattr',
                                    'put_mnt_ns', 'pivot_root*', '__x64_sys_pivot_root')),
    ('other namespaces (user, pid, ipc, uts, cgroup)', ('copy_namespaces', 'ksys_unshare',
                                                        'create_user_ns', 'free_ipc*',
                                                        'put_ipc_ns')),
    ('cgroups (mkdir, rmdir, moves, limits)', ('cgroup_mkdir', 'cgroup_rmdir',
                                               'cgroup_attach_task', 'cgroup_procs_write',
                                               'cgroup1_procs_write*', '__cgroup1_procs_write*',
                                               'cgroup_file_write', 'cgroup_kn_lock_live',
                                               'cgroup_apply_control*')),
    ('seccomp (load and filter)', ('do_seccomp', '__seccomp_filter', 'seccomp_*')),
    ('Landlock', ('landlock_*', '__x64_sys_landlock_*', 'hook_*')),
    ('fork: page tables (dup_mmap)', ('dup_mmap',)),
    ('fork: the rest (copy_process)', ('copy_process',)),
    ('copy-on-write faults', ('do_wp_page', 'wp_page_copy')),
    ('other page faults', ('asm_exc_page_fault', 'handle_mm_fault')),
    ('exit: unmapping (exit_mmap)', ('exit_mmap',)),
    ('exit: the rest (do_exit)', ('do_exit',)),
    ('the record (SQLite)', ('dso:libsqlite3',)),
    ('HTTP (libmicrohttpd)', ('dso:libmicrohttpd',)),
    ('JSON (jansson)', ('dso:libjansson',)),
    ('petri-init (pid 1)', ('comm:petri-init',)),
    ('Python (the driver and the code)', ('dso:python3', 'dso:libpython')),
)


def step_of(comm, frames):
    """The first of STEPS that the sample belongs to, or 'other kernel' /
    'other user space' by where the sample was."""
    for name, keys in STEPS:
        for key in keys:
            if key.startswith('comm:'):
                if comm == key[5:]:
                    return name
                continue
            if key.startswith('dso:'):
                if any(key[4:] in os.path.basename(d) for _, d in frames):
                    return name
                continue
            if any(d.startswith('[kernel') and
                   (sym == key or (key.endswith('*') and sym.startswith(key[:-1])))
                   for sym, d in frames):
                return name
    if frames and frames[0][1].startswith('[kernel'):
        return 'other kernel'
    return 'other user space'


TASK_FORK = re.compile(r'PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)')
SAMPLE_HEAD = re.compile(r'^(.*?)\s+(\d+)/(\d+)\s*$')
FRAME = re.compile(r'^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)$')


def perf_unusable(workdir):
    """None if `perf record -a` and `perf script` work here, else why not."""
    if not shutil.which('perf'):
        return 'perf is not installed (bench/deps installs linux-perf)'
    out = os.path.join(workdir, 'perf-probe.data')
    try:
        r = subprocess.run(['perf', 'record', '-a', '-g', '-e', 'cpu-clock', '-o', out,
                            '--', 'sleep', '0.2'], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            return 'perf record: exit %d: %s' % (r.returncode, r.stderr.strip()[-300:])
        s = subprocess.run(['perf', 'script', '-i', out, '-F', 'comm,pid,tid,ip,sym,dso'],
                           capture_output=True, text=True, timeout=60)
        if s.returncode != 0 or '[kernel.kallsyms]' not in s.stdout:
            return 'perf script: exit %d, no kernel samples: %s' % (
                s.returncode, s.stderr.strip()[-300:])
    except (OSError, subprocess.SubprocessError) as e:
        return 'perf: %s' % e
    finally:
        for f in (out, out + '.old'):
            if os.path.exists(f):
                os.unlink(f)
    return None


class Recorder:
    """A perf or strace run in the background, from start() to stop()."""

    def __init__(self, tool, workdir, pids, freq=999):
        self.tool = tool
        self.err_path = os.path.join(workdir, '%s.err' % tool)
        if tool == 'perf':
            self.out = os.path.join(workdir, 'perf.data')
            self.argv = ['perf', 'record', '-a', '-g', '-e', 'cpu-clock', '-F', str(freq),
                         '-o', self.out]
        else:
            self.out = os.path.join(workdir, 'strace.txt')
            self.argv = ['strace', '-c', '-f', '-q', '-o', self.out]
            for p in sorted(pids):
                self.argv += ['-p', str(p)]
        self.proc = None

    def start(self):
        self.errf = open(self.err_path, 'w')
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.errf)
        # perf first writes down the processes that exist (their FORK and
        # MMAP records), strace attaches to each pid: let them get there.
        time.sleep(2.0)
        if self.proc.poll() is not None:
            raise RuntimeError('%s exited at once: %s' % (self.tool, self.stderr()))

    def stop(self):
        """SIGINT: perf writes its file, strace detaches and writes its summary."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.errf.close()

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()[-500:]

    def command(self):
        if self.tool == 'strace':
            return 'strace -c -f -q -p <each process of the server\'s cgroup>'
        return ' '.join(self.argv[:-2])


def tree_of(parents, roots):
    """Every pid whose ancestry (parents: child -> parent) reaches a root."""
    inside = set(roots)
    outside = set()
    for pid in parents:
        chain = []
        p = pid
        while p not in inside and p not in outside and p in parents and len(chain) < 10000:
            chain.append(p)
            p = parents[p]
        (inside if p in inside else outside).update(chain)
    return inside


def depth_of(pid, parents, roots):
    """How many forks below a root pid is (0: a root)."""
    d = 0
    while pid not in roots and pid in parents and d < 10000:
        pid = parents[pid]
        d += 1
    return d


def label(sym, dso):
    if dso == '[kernel.kallsyms]' or dso.startswith('[kernel'):
        return '[k] ' + sym
    name = os.path.basename(dso) if dso not in ('[unknown]', '') else '?'
    return '[.] %s (%s)' % (sym if sym != '[unknown]' else '?', name)


def perf_shares(data_path, server, others=(), top=25):
    """Parse `perf script` of data_path: shares of the samples of the
    process tree of the server's pid (and of the pids in others, the
    processes of its cgroup when the recording started)."""
    roots = {server} | set(others)
    p = subprocess.Popen(['perf', 'script', '-i', data_path, '--show-task-events',
                          '-F', 'comm,pid,tid,ip,sym,dso'],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         errors='replace')
    samples = []            # (pid, comm, [(sym, dso), ...] innermost first)
    parents = {}
    cur = None
    for line in p.stdout:
        if line.startswith(('\t', ' ')):
            m = FRAME.match(line.rstrip('\n'))
            if cur is not None and m:
                cur[2].append((m.group(1), m.group(2)))
            continue
        cur = None
        line = line.rstrip('\n')
        if not line:
            continue
        m = TASK_FORK.search(line)
        if m:
            child, parent = int(m.group(1)), int(m.group(3))
            if child != parent:          # a new process, not a thread
                parents[child] = parent
            continue
        if 'PERF_RECORD_' in line:
            continue
        m = SAMPLE_HEAD.match(line)
        if m:
            cur = (int(m.group(2)), m.group(1).strip(), [])
            samples.append(cur)
    p.wait()
    tree = tree_of(parents, roots)
    mine = [s for s in samples if s[0] in tree]
    n = len(mine)
    self_c, incl_c, comm_c = collections.Counter(), collections.Counter(), collections.Counter()
    depth_c, step_c = collections.Counter(), collections.Counter()
    kernel = 0
    for pid, comm, frames in mine:
        comm_c[comm] += 1
        step_c[step_of(comm, frames)] += 1
        # Which generation below the server (its helper, the template, the
        # sandboxes' processes...), and under which name.
        depth_c[(depth_of(pid, parents, {server}), comm)] += 1
        if frames and frames[0][1].startswith('[kernel'):
            kernel += 1
        own = next((f for f in frames if not IRQ_ENABLE.search(f[0])),
                   frames[0] if frames else ('?', '[unknown]'))
        self_c[label(*own)] += 1
        # Unresolved frames and the interrupt-enable artefact say nothing
        # about who called.
        incl_c.update({label(*f) for f in frames
                       if f[0] != '[unknown]' and not IRQ_ENABLE.search(f[0])})

    def shares(counter, k):
        return [(name, c / n) for name, c in counter.most_common(k)] if n else []
    return {
        'samples_all': len(samples), 'samples_petri': n, 'processes_petri': len(tree),
        'kernel_share': kernel / n if n else None,
        'user_share': 1 - kernel / n if n else None,
        'by_comm': shares(comm_c, 8),
        'by_depth': sorted((d, comm, c / n) for (d, comm), c in depth_c.items()
                           if c / n >= 0.005) if n else [],
        'self': shares(self_c, top),
        'inclusive': shares(incl_c, top),
        'markers': {m: (incl_c.get('[k] ' + m, 0) / n if n else 0.0) for m in MARKERS},
        'steps': shares(step_c, len(STEPS) + 2),
        # A network namespace is released in a kernel worker, outside
        # petri's tree: its samples anywhere, against petri's own.
        'netns_release_elsewhere': (sum(1 for s in samples if s[0] not in tree and any(
            f[0] == 'cleanup_net' for f in s[2])) / n) if n else None,
    }


def strace_shares(path, top=20):
    """Parse an `strace -c` summary: the syscalls by share of the time."""
    rows, total = [], None
    row = re.compile(r'^\s*([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+(?:(\d+)\s+)?(\S+)\s*$')
    with open(path) as f:
        for line in f:
            m = row.match(line)
            if not m:
                continue
            r = {'share': float(m.group(1)) / 100, 'seconds': float(m.group(2)),
                 'calls': int(m.group(4)), 'errors': int(m.group(5) or 0),
                 'syscall': m.group(6)}
            if r['syscall'] == 'total':
                total = r
            else:
                rows.append(r)
    rows.sort(key=lambda r: -r['share'])
    return {'syscalls': rows[:top], 'total': total}
