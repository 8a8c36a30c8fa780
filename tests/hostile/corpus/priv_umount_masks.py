# attack: umount the masks over /proc/kallsyms and /proc/sys, and the read-only /usr bind, to reveal what lies below
# expect: umount2 refused with EPERM; the masks stay
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)

bad = []
for p in (b"/proc/kallsyms", b"/proc/sys", b"/usr", b"/proc", b"/"):
    r, e = sc(166, ctypes.c_char_p(p), 2)   # MNT_DETACH
    if r == 0 or e != errno.EPERM:
        bad.append((p, r, e))
report(bad, "umount2 refused with EPERM")
