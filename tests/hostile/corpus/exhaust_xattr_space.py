# attack: fill the tmpfs with extended attributes (64 KiB values, thousands of names) instead of data: kernel memory the file's size does not show
# expect: the tmpfs's inode space (nr_inodes KiB) answers ENOSPC, or the memory cgroup, which they are charged to, answers ENOMEM or ends the sandbox; nothing of the host is involved
# status: ok oom
# limits: timeout=60 memory=256
import errno, os, sys
os.makedirs('/tmp/xa', exist_ok=True)
value = b'v' * 65536
n = 0
try:
    for i in range(100_000):
        p = f'/tmp/xa/{i}'
        open(p, 'w').close()
        for k in range(64):
            os.setxattr(p, f'user.{k}', value)
            n += 1
    print('ESCAPE: 6.4 million attributes of 64 KiB', file=sys.stderr)
except OSError as e:
    if e.errno in (errno.ENOSPC, errno.ENOMEM, errno.E2BIG):
        print(f'CONTAINED: {errno.errorcode[e.errno]} after {n} attributes '
              f'({n * len(value) >> 20} MiB)', file=sys.stderr)
    else:
        print('unexpected', e, file=sys.stderr)
