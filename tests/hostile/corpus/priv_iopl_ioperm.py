# attack: direct port I/O: iopl(3), ioperm on the keyboard controller, modify_ldt
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
for nr, args in ((172, (3,)), (173, (0x60, 8, 1)), (154, (0, None, 0))):
    r, e = sc(nr, *args)
    if r >= 0 or e != errno.EPERM:
        bad.append((nr, r, e))
report(bad, "no port I/O")
