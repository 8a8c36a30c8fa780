# attack: personality(2) flags that weaken exploit mitigations: READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, PER_LINUX32, MMAP_PAGE_ZERO
# expect: only querying and PER_LINUX are allowed: EPERM for the rest
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
for persona in (0x0400000, 0x0040000, 0x0008, 0x0100000):
    r, e = sc(135, persona)
    if r != -1 or e != errno.EPERM:
        bad.append((hex(persona), r, e))
r, e = sc(135, 0xffffffff)
if r < 0:
    bad.append(("query", r, e))
report(bad, "personality locked to PER_LINUX")
