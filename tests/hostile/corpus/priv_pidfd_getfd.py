# attack: steal pid 1's descriptors: pidfd_open + pidfd_getfd, kcmp
# expect: pidfd_open works (a process of the sandbox's own pid namespace) but pidfd_getfd and kcmp are refused (EPERM)
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
# An allowed call that did not run is no escape, but the check it guards
# did not happen: no CONTAINED marker then.
broken = []
bad = []
pidfd, e = sc(434, 1, 0)
if pidfd < 0:
    broken.append(("pidfd_open", errno.errorcode.get(e, e)))
for target in ([pidfd] if pidfd >= 0 else []) + [3]:
    for fd in range(0, 10):
        r2, e2 = sc(438, target, fd, 0)
        if r2 >= 0 or e2 != errno.EPERM:
            bad.append(("pidfd_getfd", target, fd, r2, e2))
            break
r, e = sc(312, 1, os.getpid(), 0, 0, 0)
if e != errno.EPERM:
    bad.append(("kcmp", r, e))
if broken:
    print("NOT RUN (the policy allows them): %s" % (broken,), file=sys.stderr)
    if bad:
        print("ESCAPE: %s" % (bad,), file=sys.stderr)
    sys.exit(0)
report(bad, "no way to another process's descriptors")
