# attack: create device nodes for /dev/mem, /dev/sda and /dev/kmsg with mknod(2) in /tmp and /work
# expect: refused (no CAP_MKNOD, Landlock forbids device nodes); a FIFO is fine
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
import stat
bad = []
for path, mode, dev in (("/tmp/mem", stat.S_IFCHR | 0o666, os.makedev(1, 1)), ("/work/sda", stat.S_IFBLK | 0o666, os.makedev(8, 0)),
                        ("/tmp/kmsg", stat.S_IFCHR | 0o666, os.makedev(1, 11))):
    try:
        os.mknod(path, mode, dev)
        bad.append(path)
    except OSError:
        pass
os.mkfifo("/tmp/fifo-ok")
report(bad, "no device node can be made")
