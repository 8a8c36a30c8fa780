# attack: socketpair() of every family other than AF_UNIX (the kernel creates a socket of the family, loading its module, before it finds the family has no pairs; AF_TIPC has pairs), with flag bits in the type and high bits in the family
# expect: EAFNOSUPPORT from the socketpair argument check for every family but AF_UNIX; AF_UNIX pairs of every type work
# status: ok
import ctypes, errno, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
sv = (ctypes.c_int * 2)()
bad = []
for fam in [f for f in range(0, 46) if f != socket.AF_UNIX] + [(1 << 32) | 30]:
    for typ in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET,
                socket.SOCK_RAW | socket.SOCK_CLOEXEC):
        r = libc.syscall(53, ctypes.c_long(fam), typ, 0, sv)
        err = ctypes.get_errno()
        if r == 0:
            bad.append((fam, typ, 'pair created'))
        elif err != errno.EAFNOSUPPORT:
            bad.append((fam, typ, errno.errorcode.get(err, err)))
for typ in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
    try:
        a, b = socket.socketpair(socket.AF_UNIX, typ)
        a.send(b'ping')
        if b.recv(4) != b'ping':
            bad.append(('AF_UNIX', typ, 'no data'))
        a.close(); b.close()
    except OSError as e:
        bad.append(('AF_UNIX broken', typ, e))
if bad:
    print('ESCAPE: socketpair beyond AF_UNIX:', bad[:20], file=sys.stderr)
else:
    print('CONTAINED: socketpair only for AF_UNIX', file=sys.stderr)
