# attack: perf_event_open on ourselves, on pid 1 and system-wide
# expect: EPERM from seccomp
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
attr = ctypes.create_string_buffer(128)
ctypes.memmove(attr, (ctypes.c_uint32 * 2)(1, 128), 8)
bad = []
for pid, cpu in ((0, -1), (1, -1), (-1, 0)):
    r, e = sc(298, attr, pid, cpu, -1, 0)
    if r >= 0 or e != errno.EPERM:
        bad.append((pid, cpu, r, e))
report(bad, "perf_event_open refused")
