# attack: send UDP datagrams out (DNS to 192.0.2.53:53, a broadcast to 255.255.255.255, multicast 224.0.0.251)
# expect: ENETUNREACH for each: no interface but lo
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
for addr in (("192.0.2.53", 53), ("255.255.255.255", 9), ("224.0.0.251", 5353)):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    try:
        s.sendto(b"x" * 32, addr)
        bad.append((addr, "sent"))
    except OSError as e:
        if e.errno not in (errno.ENETUNREACH, errno.EACCES, errno.ENODEV, errno.EPERM):
            bad.append((addr, e))
    s.close()
report(bad, "nothing leaves")
