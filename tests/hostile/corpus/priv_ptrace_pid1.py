# attack: ptrace(PTRACE_ATTACH/SEIZE) pid 1, and PTRACE_TRACEME
# expect: EPERM from seccomp
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)

bad = []
for req, pid in ((16, 1), (0x4206, 1), (0, 0)):
    r, e = sc(101, req, pid, 0, 0)
    if r == 0 or e != errno.EPERM:
        bad.append((req, pid, r, e))
report(bad, "ptrace refused")
