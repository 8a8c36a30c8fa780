# attack: poison the font caches every sandbox reads (/opt/petri/cache, /opt/petri/fonts.conf): write, replace, chmod, rename, remount rw, umount, bind over
# expect: every change fails (files of the read-only root, the namespace root's; no mount calls); what the sandbox may change is its own /tmp link only
# status: ok
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
MS_REMOUNT, MS_BIND, MS_RDONLY = 32, 4096, 1
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
cache = "/opt/petri/cache"
if not os.path.isdir(cache + "/matplotlib"):
    bad.append("no cache bound at %s" % cache)
lists = [cache + "/matplotlib/" + n for n in os.listdir(cache + "/matplotlib")] if not bad else []
fc = [cache + "/fontconfig/" + n for n in os.listdir(cache + "/fontconfig")] if not bad else []
for p in lists + fc[:3] + ["/opt/petri/fonts.conf", cache + "/x", cache + "/matplotlib/x"]:
    try:
        with open(p, "a") as f:
            f.write("x")
        bad.append("wrote " + p)
    except OSError:
        pass
for p in lists + ["/opt/petri/fonts.conf", cache + "/matplotlib"]:
    for name, call in (("chmod", lambda p: os.chmod(p, 0o777)),
                       ("rename", lambda p: os.rename(p, p + ".old")),
                       ("unlink", lambda p: os.rmdir(p) if os.path.isdir(p) else os.unlink(p)),
                       ("utime", lambda p: os.utime(p, (0, 0)))):
        try:
            call(p)
            bad.append("%s %s" % (name, p))
        except OSError:
            pass
for args in ((None, cache.encode(), None, MS_REMOUNT | MS_BIND, None),
             (b"/tmp", cache.encode(), None, MS_BIND, None),
             (b"tmpfs", cache.encode(), b"tmpfs", 0, None)):
    if libc.mount(*args) == 0:
        bad.append("mount %r" % (args,))
if libc.umount2(cache.encode(), 2) == 0:
    bad.append("umount " + cache)
if not os.statvfs(cache + "/matplotlib").f_flag & os.ST_RDONLY:
    bad.append("%s is on a writable file system" % cache)
report(bad, "the shared font caches stay as petri made them")
