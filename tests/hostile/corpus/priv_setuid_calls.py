# attack: become root: setuid(0), setresuid, setgid, setresgid, setgroups, setreuid, capset with every capability
# expect: EPERM for each; uid stays 1000 and no capability appears
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
for nr, args in ((105, (0,)), (117, (0, 0, 0)), (106, (0,)), (119, (0, 0, 0)), (116, (0, None)), (113, (0, 0)), (114, (0, 0))):
    r, e = sc(nr, *args)
    if r == 0:
        bad.append((nr, r))
hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)(*([0xffffffff] * 6))
r, e = sc(126, hdr, data)
if r == 0:
    bad.append("capset")
if os.getresuid() != (1000, 1000, 1000) or os.getresgid() != (1000, 1000, 1000):
    bad.append(("ids", os.getresuid(), os.getresgid()))
with open("/proc/self/status") as f:
    caps = [l.split()[1] for l in f if l.startswith("Cap")]
if any(int(c, 16) for c in caps):
    bad.append(("caps", caps))
report(bad, "still uid 1000 with no capability")
