# attack: starve the host: SCHED_FIFO at the top priority, nice -20, ioprio realtime
# expect: sched_setscheduler is not allowed, setpriority below 0 is refused (EACCES), ioprio_set not allowed
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
param = ctypes.c_int(99)
r, e = sc(144, 0, 1, ctypes.byref(param))
if r == 0:
    bad.append("SCHED_FIFO")
try:
    os.setpriority(os.PRIO_PROCESS, 0, -20)
    bad.append("nice -20")
except OSError:
    pass
r, e = sc(251, 1, 0, (1 << 13) | 0)
if r == 0:
    bad.append("ioprio RT")
report(bad, "no realtime priority")
