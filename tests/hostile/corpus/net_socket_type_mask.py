# attack: socket(AF_INET, SOCK_PACKET) (the kernel turns it into AF_PACKET after the family check), with SOCK_NONBLOCK/SOCK_CLOEXEC or'ed in, and IP sockets of the types and protocols the kernel serves by loading a module (SCTP, DCCP, L2TP, MPTCP, UDP-Lite)
# expect: ESOCKTNOSUPPORT for types other than stream/datagram/raw, EPROTONOSUPPORT for protocols other than TCP, UDP and ping, from the socket argument check; TCP and UDP still work on loopback
# status: ok
import errno, socket, sys
AF4, AF6 = socket.AF_INET, socket.AF_INET6
NB, CX = socket.SOCK_NONBLOCK, socket.SOCK_CLOEXEC
cases = [
    (AF4, 10, 0, errno.ESOCKTNOSUPPORT), (AF4, 10 | CX, 0x300, errno.ESOCKTNOSUPPORT),
    (AF4, 10 | NB | CX, 3, errno.ESOCKTNOSUPPORT), (AF6, 10, 0, errno.ESOCKTNOSUPPORT),
    (AF4, socket.SOCK_SEQPACKET, 132, errno.ESOCKTNOSUPPORT),
    (AF6, socket.SOCK_SEQPACKET, 0, errno.ESOCKTNOSUPPORT),
    (AF4, 6, 33, errno.ESOCKTNOSUPPORT), (AF4, socket.SOCK_RDM, 0, errno.ESOCKTNOSUPPORT),
    (AF4, socket.SOCK_STREAM, 132, errno.EPROTONOSUPPORT),
    (AF6, socket.SOCK_STREAM | CX, 262, errno.EPROTONOSUPPORT),
    (AF4, socket.SOCK_DGRAM, 115, errno.EPROTONOSUPPORT),
    (AF4, socket.SOCK_DGRAM, 136, errno.EPROTONOSUPPORT),
    (AF6, socket.SOCK_DGRAM, 1, errno.EPROTONOSUPPORT),
    (AF4, socket.SOCK_DGRAM, 58, errno.EPROTONOSUPPORT),
]
bad = []
for fam, typ, proto, want in cases:
    try:
        s = socket.socket(fam, typ, proto)
        bad.append((fam, typ, proto, 'created', s.family))
        s.close()
    except OSError as e:
        if e.errno != want:
            bad.append((fam, typ, proto, errno.errorcode.get(e.errno, e.errno)))
try:
    srv = socket.socket(AF4, socket.SOCK_STREAM | CX, socket.IPPROTO_TCP)
    srv.bind(('127.0.0.1', 0)); srv.listen(1)
    c = socket.create_connection(srv.getsockname(), timeout=2)
    conn, _ = srv.accept(); c.sendall(b'x')
    u = socket.socket(AF4, socket.SOCK_DGRAM, socket.IPPROTO_UDP); u.bind(('127.0.0.1', 0))
    u.sendto(b'y', u.getsockname())
    if conn.recv(1) != b'x' or u.recv(1) != b'y':
        bad.append('loopback data lost')
except OSError as e:
    bad.append(('loopback TCP/UDP broken', e))
if bad:
    print('ESCAPE: socket types or protocols beyond the policy:', bad, file=sys.stderr)
else:
    print('CONTAINED: SOCK_PACKET, SCTP, DCCP, L2TP, MPTCP and UDP-Lite refused', file=sys.stderr)
