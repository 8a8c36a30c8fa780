# attack: watch shared read-only directories (/usr/lib/python3.*, /usr/bin, /etc/fonts) with dnotify (fcntl F_NOTIFY), inotify and fanotify, to see the host's and other sessions' file accesses (their inodes are shared with every sandbox)
# expect: fcntl(F_NOTIFY) fails with EPERM, inotify_init1/inotify_init/fanotify_init with EPERM, for every directory; other fcntl commands still work
# status: ok
import ctypes, errno, fcntl, glob, os, signal, sys, time
bad = []
events = []
signal.signal(signal.SIGIO, lambda *a: events.append(1))
dirs = glob.glob('/usr/lib/python3.*/sqlite3') + ['/usr/bin', '/usr/lib', '/etc/fonts', '/work']
for d in dirs:
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        continue
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)          # plain fcntl works
        fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MODIFY | fcntl.DN_MULTISHOT)
        bad.append(('F_NOTIFY set', d))
    except OSError as e:
        if e.errno != errno.EPERM:
            bad.append(('F_NOTIFY', d, errno.errorcode.get(e.errno, e.errno)))
    # keep fd open: a watch would live as long as it
libc = ctypes.CDLL(None, use_errno=True)
for name, nr, args in (('inotify_init', 253, ()), ('inotify_init1', 294, (0,)),
                       ('fanotify_init', 300, (0, 0))):
    r = libc.syscall(nr, *args)
    err = ctypes.get_errno()
    if r >= 0:
        bad.append((name, 'returned fd %d' % r))
    elif err != errno.EPERM:
        bad.append((name, errno.errorcode.get(err, err)))
time.sleep(1)          # anything watched would report the host's accesses by now
if events:
    bad.append(('SIGIO from a watch on a shared directory', len(events)))
if bad:
    print('ESCAPE: file access watches allowed:', bad, file=sys.stderr)
else:
    print('CONTAINED: dnotify, inotify and fanotify refused with EPERM', file=sys.stderr)
