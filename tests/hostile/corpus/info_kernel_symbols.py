# attack: read kernel addresses and internals: /proc/kallsyms, /proc/kcore, /proc/timer_list, /proc/keys, /proc/sched_debug, /proc/kmsg
# expect: masked (empty or absent)
# status: ok
import os, sys
bad = []
for p in ('/proc/kallsyms', '/proc/kcore', '/proc/timer_list', '/proc/keys', '/proc/key-users',
          '/proc/sched_debug', '/proc/latency_stats', '/proc/kmsg'):
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        data = os.read(fd, 256)
    except OSError:
        data = b''
    os.close(fd)
    if data:
        bad.append((p, data[:60]))
if bad:
    print('ESCAPE: kernel internals readable:', bad, file=sys.stderr)
else:
    print('CONTAINED: kernel internals masked', file=sys.stderr)
