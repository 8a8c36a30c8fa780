"""A memory cgroup of a test's own, for a daemon that the test attacks.

A test that tries to make `petri serve` grow (hostile frames, hostile bodies,
floods) starts the daemon inside one of these, with a limit well above what
the daemon may use and well below what would hurt the machine: a regression
then fails that test (the daemon is OOM-killed inside its own cgroup, and
the test says so) instead of the machine or a neighbour's run.

    with MemoryCgroup('frames', 1 << 30) as cg:
        proc = subprocess.Popen(args, preexec_fn=cg.enter)
        ...
        assert cg.oom_kills() == 0

Both kernel interfaces: cgroup v1 (a directory under
/sys/fs/cgroup/memory) and v2 (under the v2 mount, when its root offers the
memory controller).  The sandboxes of the daemon live in cgroups of their
own below this one: petri's default cgroup parent is made under the cgroup
the daemon runs in, so the limit must leave room for the sessions the test
starts (and their memory counts here too: a sandbox escaping its own limit
fails the test as well).
"""
import os
import secrets
import signal
import time

V1_ROOT = '/sys/fs/cgroup/memory'
V2_ROOTS = ('/sys/fs/cgroup', '/sys/fs/cgroup/unified')


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _v2_root():
    for root in V2_ROOTS:
        ctl = _read(os.path.join(root, 'cgroup.subtree_control'))
        if ctl is not None and 'memory' in ctl.split():
            return root
    return None


def available():
    """None when a memory cgroup can be made here, else why not."""
    if os.geteuid() != 0:
        return 'not root: no memory cgroup of the test\'s own'
    if os.path.isfile(os.path.join(V1_ROOT, 'memory.limit_in_bytes')) or _v2_root():
        return None
    return 'no memory cgroup controller on this host'


class MemoryCgroup:
    def __init__(self, name, limit_bytes):
        why = available()
        if why:
            raise RuntimeError(why)
        leaf = f'petri-test-{name}-{os.getpid()}-{secrets.token_hex(3)}'
        if os.path.isfile(os.path.join(V1_ROOT, 'memory.limit_in_bytes')):
            self.version = 1
            self.path = os.path.join(V1_ROOT, leaf)
        else:
            self.version = 2
            self.path = os.path.join(_v2_root(), leaf)
        os.mkdir(self.path)
        if self.version == 1:
            self._write('memory.limit_in_bytes', str(limit_bytes))
            # No swap either, where the kernel accounts it.
            if os.path.exists(os.path.join(self.path, 'memory.memsw.limit_in_bytes')):
                self._write('memory.memsw.limit_in_bytes', str(limit_bytes))
        else:
            self._write('memory.max', str(limit_bytes))
            if os.path.exists(os.path.join(self.path, 'memory.swap.max')):
                self._write('memory.swap.max', '0')
        self.limit = limit_bytes

    def _write(self, name, text):
        with open(os.path.join(self.path, name), 'w') as f:
            f.write(text)

    def enter(self):
        """For subprocess.Popen(preexec_fn=...): move the child in before it
        execs.  Only os calls here (the child of a threaded parent)."""
        fd = os.open(os.path.join(self.path, 'cgroup.procs'), os.O_WRONLY)
        try:
            os.write(fd, b'0')
        finally:
            os.close(fd)

    def procs(self):
        text = _read(os.path.join(self.path, 'cgroup.procs')) or ''
        return [int(p) for p in text.split()]

    def oom_kills(self):
        """Processes the kernel killed for this cgroup's limit."""
        name = 'memory.oom_control' if self.version == 1 else 'memory.events'
        for line in (_read(os.path.join(self.path, name)) or '').splitlines():
            k, _, v = line.partition(' ')
            if k == 'oom_kill':
                return int(v)
        return 0

    def peak(self):
        """The most memory the cgroup held (bytes)."""
        name = 'memory.max_usage_in_bytes' if self.version == 1 else 'memory.peak'
        text = _read(os.path.join(self.path, name))
        return int(text) if text and text.strip().isdigit() else 0

    def close(self):
        """Kill what is still inside (only processes the test started are:
        the daemon and its sandboxes) and remove the cgroup with the cgroups
        petri made below it."""
        deadline = time.monotonic() + 10
        while os.path.isdir(self.path):
            dirs = [d for d, _, _ in os.walk(self.path)]
            for d in reversed(dirs):          # the deepest first
                for p in (_read(os.path.join(d, 'cgroup.procs')) or '').split():
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    os.rmdir(d)
                except FileNotFoundError:
                    pass
                except OSError:
                    if time.monotonic() > deadline:
                        raise
            time.sleep(0.05)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def peak_rss(pid):
    """VmHWM of a live process, in bytes (0 when gone)."""
    for line in (_read(f'/proc/{pid}/status') or '').splitlines():
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
    return 0
