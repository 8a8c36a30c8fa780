# attack: System V IPC and POSIX message queues shared with the host or other sessions: shmget/semget/msgget with well-known keys, mq_open
# expect: none is allowed (ENOSYS/EPERM); each sandbox has its own IPC namespace anyway
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
for nr, args in ((29, (0x1234, 4096, 0o1666)), (64, (0x1234, 1, 0o1666)), (68, (0x1234, 0o1666)), (240, (ctypes.c_char_p(b"/q"), 0o100 | 2, 0o666, None))):
    r, e = sc(nr, *args)
    if r >= 0:
        bad.append((nr, r))
report(bad, "no SysV IPC nor message queues")
