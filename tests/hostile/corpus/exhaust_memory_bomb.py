# attack: allocate and touch memory without end
# expect: the memory cgroup stops it: MemoryError or an OOM kill; never the host's memory
# status: oom killed error
# limits: memory=128 timeout=20
# marker: -
import sys
print('allocating', file=sys.stderr, flush=True)
hog = []
total = 0
while True:
    hog.append(bytearray(16 << 20))   # zero-filled: touched
    total += 16
    if total > 4096:
        print('ESCAPE: 4 GiB allocated under a 128 MiB limit', file=sys.stderr, flush=True)
        break
