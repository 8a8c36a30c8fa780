# attack: write outside the writable trees: /, /usr, /etc, /opt/petri, /proc, /dev; and a new Landlock ruleset
# expect: every write fails (read-only root and binds, Landlock); landlock calls refused
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
r, e = sc(444, None, 0, 1)
if r >= 0:
    bad.append("landlock ruleset")
for p in ("/x", "/usr/x", "/etc/x", "/etc/passwd", "/opt/petri/driver.py", "/opt/petri/x", "/proc/x", "/dev/x", "/bin/x"):
    try:
        with open(p, "a") as f:
            f.write("x")
        bad.append(p)
    except OSError:
        pass
report(bad, "writable only where it should be")
