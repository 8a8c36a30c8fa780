# attack: syslog(2) SYSLOG_ACTION_READ_ALL and SIZE_BUFFER directly
# expect: EPERM from the seccomp filter
# status: ok
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(1 << 16)
bad = []
for action in (3, 10, 2):   # READ_ALL, SIZE_BUFFER, READ (would block: only if allowed)
    if action == 2 and bad:
        break
    r = libc.syscall(103, action, buf, len(buf))
    e = ctypes.get_errno()
    if r >= 0:
        bad.append((action, r, buf.raw[:80]))
    elif e != errno.EPERM:
        bad.append((action, 'errno %d' % e))
    if action == 10 and not bad:
        break
if bad:
    print('ESCAPE? syslog answered', bad, file=sys.stderr)
else:
    print('CONTAINED: syslog refused with EPERM', file=sys.stderr)
