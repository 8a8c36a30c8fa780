# attack: io_uring_setup/enter/register (io_uring runs operations that seccomp never sees)
# expect: EPERM from seccomp for all three
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
params = ctypes.create_string_buffer(120)
bad = []
for nr, args in ((425, (8, params)), (426, (0, 1, 0, 0, None, 0)), (427, (0, 0, None, 0))):
    r, e = sc(nr, *args)
    if r >= 0 or e != errno.EPERM:
        bad.append((nr, r, e))
report(bad, "io_uring refused")
