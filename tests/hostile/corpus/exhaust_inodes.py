# attack: create empty files until the file system gives up (inode exhaustion)
# expect: the tmpfs inode cap answers ENOSPC; nothing of the host is involved
# status: ok
# limits: timeout=60 memory=512
import errno, os, sys
os.makedirs('/tmp/inodes', exist_ok=True)
n = 0
try:
    while n < 2_000_000:
        os.close(os.open('/tmp/inodes/%d' % n, os.O_CREAT | os.O_WRONLY, 0o600))
        n += 1
    print('ESCAPE: two million inodes', file=sys.stderr)
except OSError as e:
    if e.errno == errno.ENOSPC:
        print('CONTAINED: ENOSPC after', n, 'files', file=sys.stderr)
    else:
        print('unexpected', e, file=sys.stderr)
