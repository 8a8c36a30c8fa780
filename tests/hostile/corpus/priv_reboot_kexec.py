# attack: reboot(2) (with the harmless CAD_OFF command) and kexec_load
# expect: EPERM from seccomp
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
r, e = sc(169, 0xfee1dead, 672274793, 0)
if r == 0 or e != errno.EPERM:
    bad.append(("reboot", r, e))
r, e = sc(246, 0, 0, None, 0)
if r == 0 or e != errno.EPERM:
    bad.append(("kexec_load", r, e))
report(bad, "reboot and kexec refused")
