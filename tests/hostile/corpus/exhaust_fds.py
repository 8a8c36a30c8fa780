# attack: open file descriptors until none is left
# expect: EMFILE at RLIMIT_NOFILE; raising the hard limit is refused
# status: ok
import errno, os, resource, sys
fds = []
try:
    while len(fds) < 1_000_000:
        fds.append(os.open('/dev/null', os.O_RDONLY))
    print('ESCAPE: a million fds', file=sys.stderr)
except OSError as e:
    print('stopped at', len(fds), e.strerror, file=sys.stderr)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 1024, hard * 1024))
        print('ESCAPE: raised the hard RLIMIT_NOFILE', file=sys.stderr)
    except (ValueError, OSError) as e2:
        if e.errno == errno.EMFILE:
            print('CONTAINED: EMFILE, hard limit', hard, 'kept:', e2, file=sys.stderr)
for fd in fds:
    os.close(fd)
