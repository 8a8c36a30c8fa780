# attack: learn host paths from the links in /proc: /proc/1/exe (the daemon's binary on the cold path), cwd, fds of pid 1
# expect: pid 1's links are refused; the sandbox's own links point inside
# status: ok
import os, sys
bad = []
for p in ('/proc/1/exe', '/proc/1/cwd', '/proc/1/root', '/proc/1/fd/0', '/proc/1/fd/3', '/proc/1/map_files'):
    try:
        bad.append((p, os.readlink(p)))
    except OSError:
        pass
mine = os.readlink('/proc/self/exe')
if not mine.startswith('/usr/'):
    bad.append(('self exe', mine))
if bad:
    print('ESCAPE:', bad, file=sys.stderr)
else:
    print('CONTAINED: pid 1 links hidden; self is', mine, file=sys.stderr)
