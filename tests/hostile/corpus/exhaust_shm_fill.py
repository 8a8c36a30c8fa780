# attack: fill /dev/shm (POSIX shared memory)
# expect: ENOSPC (tmpfs size) or EFBIG (RLIMIT_FSIZE) before the host notices
# status: ok
# limits: memory=512 timeout=20
import errno, sys
written = 0
try:
    with open('/dev/shm/fill', 'wb') as f:
        chunk = b'\0' * (1 << 20)
        while written < (8 << 30):
            f.write(chunk)
            written += len(chunk)
    print('ESCAPE: wrote 8 GiB to /dev/shm', file=sys.stderr)
except OSError as e:
    if e.errno in (errno.ENOSPC, errno.EFBIG):
        print('CONTAINED: /dev/shm stopped at', written >> 20, 'MiB:', e.strerror, file=sys.stderr)
    else:
        print('unexpected error', e, file=sys.stderr)
import os
os.unlink('/dev/shm/fill')
