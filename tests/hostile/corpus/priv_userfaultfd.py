# attack: userfaultfd (a staple of kernel exploits), by system call and by /dev/userfaultfd
# expect: EPERM from seccomp; no /dev/userfaultfd
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
r, e = sc(323, 0x80000 | 0x800)
if r >= 0 or e != errno.EPERM:
    bad.append(("userfaultfd", r, e))
if os.path.exists("/dev/userfaultfd"):
    bad.append("/dev/userfaultfd exists")
report(bad, "userfaultfd refused")
