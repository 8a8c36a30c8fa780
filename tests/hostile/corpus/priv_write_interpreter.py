# attack: overwrite the interpreter and the driver: /usr/bin/python3 (through its real path and /proc/self/exe), the driver, a shared library
# expect: EROFS/EACCES/ETXTBSY every time; the host sees python3 unchanged
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
targets = [os.path.realpath("/usr/bin/python3"), "/proc/self/exe", "/opt/petri/driver.py",
           os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6"), "/usr/bin/bash"]
for p in targets:
    for flags in (os.O_WRONLY, os.O_RDWR | os.O_APPEND, os.O_WRONLY | os.O_TRUNC):
        try:
            fd = os.open(p, flags)
            os.close(fd)
            bad.append((p, flags))
        except OSError:
            pass
for p in ("/usr/bin/python3", "/usr/lib/python3/dist-packages"):
    try:
        os.rename(p, p + ".x")
        bad.append(("rename", p))
    except OSError:
        pass
try:
    os.chmod(os.path.realpath("/usr/bin/python3"), 0o777)
    bad.append("chmod")
except OSError:
    pass
report(bad, "the interpreter is read-only")
