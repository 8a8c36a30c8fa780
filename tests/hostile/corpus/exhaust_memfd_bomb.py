# attack: grow anonymous memory files (memfd) to many GiB and write into them
# expect: the memory cgroup (or RLIMIT_FSIZE) stops it; never the host's memory
# status: oom killed error ok
# limits: memory=128 timeout=20
# marker: -
import os, sys
fd = os.memfd_create('bomb')
print('growing a memfd', file=sys.stderr, flush=True)
written = 0
try:
    while written < (8 << 30):
        written += os.write(fd, b'\1' * (8 << 20))
    print('ESCAPE: 8 GiB in a memfd under a 128 MiB limit', file=sys.stderr)
except OSError as e:
    print('CONTAINED: memfd stopped at', written >> 20, 'MiB:', e.strerror, file=sys.stderr)
