# attack: process_vm_readv and process_vm_writev on pid 1 (a clone of the daemon on the cold path)
# expect: EPERM from seccomp
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(4096)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 4096)
remote = iovec(0x400000, 4096)
bad = []
for nr in (310, 311):
    r, e = sc(nr, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if r >= 0 or e != errno.EPERM:
        bad.append((nr, r, e))
report(bad, "process_vm_* refused")
