# attack: change the host's clock: settimeofday, clock_settime (to 1970), adjtimex
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
ts = (ctypes.c_long * 2)(0, 0)
for nr, args in ((164, (ts, None)), (227, (0, ts)), (159, (ctypes.create_string_buffer(256),))):
    r, e = sc(nr, *args)
    if e != errno.EPERM:
        bad.append((nr, r, e))
report(bad, "the clock is untouchable")
