# attack: write kernel knobs: /proc/sys/kernel/core_pattern (a pipe to our program), modprobe, vm/drop_caches, hostname, ns_last_pid, /proc/sysrq-trigger ('h', harmless)
# expect: every write refused (read-only /proc/sys bind; not root); the host checks its knobs did not change
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
for p, v in (("/proc/sys/kernel/core_pattern", b"|/tmp/pwn %p"), ("/proc/sys/kernel/modprobe", b"/tmp/pwn"),
             ("/proc/sys/vm/drop_caches", b"3"), ("/proc/sys/kernel/hostname", b"pwned"),
             ("/proc/sysrq-trigger", b"h"), ("/proc/sys/kernel/ns_last_pid", b"1000")):
    try:
        fd = os.open(p, os.O_WRONLY)
    except OSError:
        continue
    try:
        os.write(fd, v)
        bad.append(p)
    except OSError:
        pass
    finally:
        os.close(fd)
report(bad, "kernel knobs are read-only")
