# attack: rarely audited memory calls: memfd_secret, process_madvise, mbind, migrate_pages, move_pages on pid 1
# expect: each is refused (EPERM) or not allowed (ENOSYS)
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
for nr, args in ((447, (0,)), (440, (1, None, 0, 0, 0)), (256, (1, 0, None, None)), (279, (1, 1, None, None, None, 0)), (237, (0, 4096, 0, None, 0, 0))):
    r, e = sc(nr, *args)
    if r >= 0 or e not in (errno.EPERM, errno.ENOSYS):
        bad.append((nr, r, e))
report(bad, "all refused")
