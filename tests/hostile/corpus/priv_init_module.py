# attack: load a kernel module: init_module, finit_module, delete_module
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
img = ctypes.create_string_buffer(b"\x7fELF" + b"\0" * 60)
for nr, args in ((175, (img, 64, ctypes.c_char_p(b""))), (313, (0, ctypes.c_char_p(b""), 0)), (176, (ctypes.c_char_p(b"ext4"), 0))):
    r, e = sc(nr, *args)
    if r == 0 or e != errno.EPERM:
        bad.append((nr, r, e))
report(bad, "module calls refused")
