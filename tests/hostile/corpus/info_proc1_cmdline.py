# attack: read pid 1's command line and status (world-readable even when not dumpable)
# expect: nothing that names a host path (on the cold path pid 1 is a clone of the daemon: its argv is the daemon's)
# status: ok
import sys
with open('/proc/1/cmdline', 'rb') as f:
    cmd = f.read()
words = [w.decode('utf-8', 'replace') for w in cmd.split(b'\0') if w]
host = [w for w in words if w.startswith('/') and not w.startswith(('/usr/', '/opt/petri/', '/bin/'))]
if host:
    print('ESCAPE: pid 1 cmdline names host paths:', host, file=sys.stderr)
else:
    print('CONTAINED: pid 1 cmdline', words[:4], file=sys.stderr)
