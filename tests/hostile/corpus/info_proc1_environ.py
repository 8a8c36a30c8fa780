# attack: read pid 1's environment, memory map, memory, root and cwd (on the cold path pid 1 is a clone of the daemon)
# expect: all refused (pid 1 is not dumpable and runs under seccomp); the canary of the daemon's environment is never seen
# status: ok
import os, sys
needle = ('yrān4c'[::-1]).replace('ā', 'a').encode()  # 'c4n4ry' built at run time
leaks = []
for name in ('environ', 'maps', 'smaps', 'mem', 'auxv', 'stack', 'syscall', 'pagemap', 'io'):
    try:
        with open('/proc/1/' + name, 'rb') as f:
            data = f.read(1 << 16)
        if data:
            leaks.append(name)
        if needle in data:
            leaks.append(name + ' holds the canary')
    except OSError:
        pass
for name in ('root', 'cwd', 'exe'):
    try:
        leaks.append('%s -> %s' % (name, os.readlink('/proc/1/' + name)))
    except OSError:
        pass
try:
    os.listdir('/proc/1/fd')
    leaks.append('fd list')
except OSError:
    pass
if leaks:
    print('ESCAPE: pid 1 exposes', leaks, file=sys.stderr)
else:
    print('CONTAINED: pid 1 is opaque', file=sys.stderr)
