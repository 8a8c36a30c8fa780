# attack: the Shocker escape: name_to_handle_at + open_by_handle_at with a guessed handle of the host root
# expect: EPERM from seccomp for both
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
handle = ctypes.create_string_buffer(128)
ctypes.memmove(handle, (ctypes.c_uint32 * 2)(8, 1), 8)
mount_id = ctypes.c_int()
bad = []
r, e = sc(303, -100, ctypes.c_char_p(b"/etc"), handle, ctypes.byref(mount_id), 0)
if r == 0 or e != errno.EPERM:
    bad.append(("name_to_handle_at", r, e))
r, e = sc(304, -100, handle, 0)
if r >= 0 or e != errno.EPERM:
    bad.append(("open_by_handle_at", r, e))
report(bad, "file handles refused")
