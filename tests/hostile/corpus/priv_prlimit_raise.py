# attack: raise our own and pid 1's hard limits (RLIMIT_NOFILE, RLIMIT_NPROC, RLIMIT_FSIZE) with prlimit64
# expect: raising a hard limit needs CAP_SYS_RESOURCE: EPERM
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
class rlim(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]
for pid in (0, 1):
    for res in (7, 6, 1):
        old = rlim()
        sc(302, pid, res, None, ctypes.byref(old))
        if old.max == (1 << 64) - 1:
            continue
        big = rlim(old.max * 4 + 1024, old.max * 4 + 1024)
        r, e = sc(302, pid, res, ctypes.byref(big), None)
        if r == 0:
            bad.append((pid, res))
report(bad, "hard limits stay")
