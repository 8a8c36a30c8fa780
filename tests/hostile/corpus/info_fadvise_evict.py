# attack: posix_fadvise(POSIX_FADV_DONTNEED) on shared read-only files (python3, libc, a module source) to evict them from the host's page cache, a cache-timing side channel on the host and other sessions
# expect: DONTNEED answers 0 without reaching the kernel (on a descriptor that is not open it also answers 0, where the kernel would say EBADF); NORMAL, RANDOM, SEQUENTIAL, WILLNEED and NOREUSE reach the kernel (EBADF on a closed descriptor, 0 on a file); unknown advice EINVAL
# status: ok
import errno, glob, os, sys
bad = []
files = [os.path.realpath(sys.executable)] + glob.glob('/usr/lib/x86_64-linux-gnu/libc.so.6') + \
    glob.glob('/usr/lib/python3.*/os.py')
closed = os.open('/dev/null', os.O_RDONLY); os.close(closed)
def fadvise(fd, advice):
    try:
        os.posix_fadvise(fd, 0, 0, advice)
        return 0
    except OSError as e:
        return e.errno
if fadvise(closed, os.POSIX_FADV_DONTNEED) != 0:
    bad.append('DONTNEED reaches the kernel (a closed descriptor answers %s)'
               % errno.errorcode.get(fadvise(closed, os.POSIX_FADV_DONTNEED)))
for path in files:
    fd = os.open(path, os.O_RDONLY)
    if fadvise(fd, os.POSIX_FADV_DONTNEED) != 0:
        bad.append(('DONTNEED failed on', path))
    for name in ('NORMAL', 'RANDOM', 'SEQUENTIAL', 'WILLNEED', 'NOREUSE'):
        adv = getattr(os, 'POSIX_FADV_' + name)
        if fadvise(fd, adv) != 0:
            bad.append(('harmless advice refused', name, path))
    if fadvise(fd, 6) != errno.EINVAL or fadvise(fd, -1) != errno.EINVAL:
        bad.append(('unknown advice not EINVAL', path))
    os.close(fd)
for name in ('NORMAL', 'SEQUENTIAL', 'WILLNEED'):
    if fadvise(closed, getattr(os, 'POSIX_FADV_' + name)) != errno.EBADF:
        bad.append(('harmless advice does not reach the kernel', name))
if bad:
    print('ESCAPE: fadvise:', bad, file=sys.stderr)
else:
    print('CONTAINED: DONTNEED answered without effect; harmless advice works', file=sys.stderr)
