# attack: the kernel keyring: describe and read the session keyring, add_key, request_key
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
for nr, args in ((250, (6, -3, 0, 0, 0)), (250, (11, -3, 0, 0, 0)),
                 (248, (ctypes.c_char_p(b"user"), ctypes.c_char_p(b"x"), ctypes.c_char_p(b"y"), 1, -3)),
                 (249, (ctypes.c_char_p(b"user"), ctypes.c_char_p(b"x"), None, -3))):
    r, e = sc(nr, *args)
    if r >= 0 or e != errno.EPERM:
        bad.append((nr, r, e))
report(bad, "keyring calls refused")
