# attack: raise capabilities through prctl: ambient raise of every capability, read the bounding set, PR_SET_MM
# expect: nothing to raise: every capability set is empty; PR_SET_MM refused
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
for cap in range(0, 41):
    if libc.prctl(47, 2, cap, 0, 0) == 0:
        bad.append(("ambient", cap))
    if libc.prctl(23, cap, 0, 0, 0) == 1:
        bad.append(("bounding", cap))
if libc.prctl(35, 8, 0, 0, 0) == 0:
    bad.append("PR_SET_MM")
report(bad, "no capability anywhere")
