# attack: steal pid 1's descriptors: pidfd_open + pidfd_getfd, kcmp
# expect: pidfd_open is not allowed (ENOSYS), pidfd_getfd and kcmp are refused (EPERM)
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
r, e = sc(434, 1, 0)
if r >= 0:
    bad.append(("pidfd_open", r))
    for fd in range(0, 10):
        r2, e2 = sc(438, r, fd, 0)
        if r2 >= 0:
            bad.append(("pidfd_getfd got", fd))
r, e = sc(438, 3, 3, 0)
if e != errno.EPERM:
    bad.append(("pidfd_getfd", r, e))
r, e = sc(312, 1, os.getpid(), 0, 0, 0)
if e != errno.EPERM:
    bad.append(("kcmp", r, e))
report(bad, "no way to another process's descriptors")
