# attack: loosen the seccomp filter: seccomp(SET_MODE_FILTER) with an allow-all program, prctl(PR_SET_SECCOMP), then retry a denied call
# expect: seccomp(2) is denied (EPERM); a stacked filter only adds restrictions: unshare still fails
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
class sock_filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]
class sock_fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(sock_filter))]
allow = (sock_filter * 1)(sock_filter(0x06, 0, 0, 0x7fff0000))
prog = sock_fprog(1, allow)
bad = []
r, e = sc(317, 1, 0, ctypes.byref(prog))
if r == 0 or e != errno.EPERM:
    bad.append(("seccomp", r, e))
libc.prctl(22, 2, ctypes.byref(prog), 0, 0)
r, e = sc(272, 0x10000000)
if r == 0 or e != errno.EPERM:
    bad.append(("unshare after", r, e))
report(bad, "the filter cannot be loosened")
