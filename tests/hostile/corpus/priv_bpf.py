# attack: bpf(2): create a map and load a socket filter program
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
ctypes.memmove(attr, (ctypes.c_uint32 * 4)(1, 4, 4, 16), 16)
bad = []
for cmd in (0, 5):
    r, e = sc(321, cmd, attr, 128)
    if r >= 0 or e != errno.EPERM:
        bad.append((cmd, r, e))
report(bad, "bpf refused")
