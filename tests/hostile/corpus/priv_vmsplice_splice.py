# attack: write into a read-only file's page cache the Dirty-Pipe way: splice from /usr/bin/python3 into a pipe, then vmsplice/write
# expect: vmsplice denied (EPERM), splice not on the allow-list (ENOSYS); the host's python3 unchanged
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
fd = os.open("/usr/bin/python3", os.O_RDONLY)
r_, w_ = os.pipe()
off = ctypes.c_long(1)
r, e = sc(275, fd, ctypes.byref(off), w_, None, 1, 0)
if r >= 0:
    bad.append(("splice", r))
iov = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.create_string_buffer(b"pwn"), ctypes.c_void_p), 3)
r, e = sc(278, w_, iov, 1, 0)
if r >= 0 or e != errno.EPERM:
    bad.append(("vmsplice", r, e))
report(bad, "no splice into read-only pages")
