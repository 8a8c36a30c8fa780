# attack: fill the /work workspace (many files of 1 MiB, then one big one)
# expect: ENOSPC at the workspace size (or EFBIG at RLIMIT_FSIZE)
# status: ok
# limits: disk=16 memory=512 timeout=20
import errno, os, sys
n = 0
try:
    while n < 100000:
        with open('/work/f%05d' % n, 'wb') as f:
            f.write(b'\1' * (1 << 20))
        n += 1
    print('ESCAPE: 100 GiB in /work', file=sys.stderr)
except OSError as e:
    print('CONTAINED: /work full after', n, 'MiB:', e.strerror if e.errno in (errno.ENOSPC, errno.EFBIG) else e, file=sys.stderr)
for i in range(n + 1):
    try:
        os.unlink('/work/f%05d' % i)
    except OSError:
        pass
