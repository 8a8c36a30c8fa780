# attack: unshare(2) every namespace flag, one at a time, and setns
# expect: EPERM for each (seccomp), never a new namespace
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)

bad = []
for flag in (0x10000000, 0x00020000, 0x20000000, 0x02000000, 0x04000000, 0x08000000, 0x40000000, 0x00000080):
    r, e = sc(272, flag)
    if r == 0 or e != errno.EPERM:
        bad.append((hex(flag), r, e))
r, e = sc(308, 0, 0)
if e != errno.EPERM:
    bad.append(("setns", r, e))
report(bad, "unshare and setns refused")
