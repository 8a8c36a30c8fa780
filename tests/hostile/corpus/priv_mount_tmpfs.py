# attack: mount(2) a tmpfs, a proc, a bind of / and a remount of / read-write
# expect: EPERM from seccomp for every mount call
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)

bad = []
os.makedirs("/tmp/m", exist_ok=True)
for src, tgt, fs, flags in ((b"none", b"/tmp/m", b"tmpfs", 0), (b"proc", b"/tmp/m", b"proc", 0),
                            (b"/", b"/tmp/m", None, 4096), (None, b"/", None, 32)):
    r, e = sc(165, ctypes.c_char_p(src), ctypes.c_char_p(tgt), ctypes.c_char_p(fs), flags, None)
    if r == 0 or e != errno.EPERM:
        bad.append((src, tgt, r, e))
report(bad, "every mount refused with EPERM")
