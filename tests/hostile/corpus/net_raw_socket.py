# attack: raw sockets: AF_INET/AF_INET6 SOCK_RAW (ICMP, TCP, IPPROTO_RAW), SOCK_PACKET
# expect: EPERM (no CAP_NET_RAW); SOCK_PACKET refused
# status: ok
import errno, os, socket, sys
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
def try_connect(family, addr, kind=socket.SOCK_STREAM, timeout=1.0):
    s = socket.socket(family, kind)
    s.settimeout(timeout)
    try:
        s.connect(addr)
        if kind == socket.SOCK_DGRAM:
            s.send(b"x")
            s.recv(1)
        return "connected"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
    finally:
        s.close()
bad = []
for fam, typ, proto in ((2, 3, 1), (2, 3, 6), (2, 3, 255), (10, 3, 58), (2, 10, 0x0300)):
    try:
        socket.socket(fam, typ, proto).close()
        bad.append((fam, typ, proto))
    except OSError:
        pass
report(bad, "no raw socket")
