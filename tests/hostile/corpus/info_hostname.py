# attack: read the host's name (uname, /proc/sys/kernel/hostname, /etc/hostname) and change the sandbox's
# expect: the sandbox's own UTS namespace: "petri"; sethostname refused
# status: ok
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
bad = []
names = {os.uname().nodename, socket.gethostname(), open('/proc/sys/kernel/hostname').read().strip(),
         open('/etc/hostname').read().strip()}
if names != {'petri'}:
    bad.append(names)
if libc.sethostname(b'pwned', 5) == 0:
    bad.append('sethostname worked')
if bad:
    print('ESCAPE:', bad, file=sys.stderr)
else:
    print('CONTAINED: hostname petri, errno', ctypes.get_errno(), file=sys.stderr)
