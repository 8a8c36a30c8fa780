# attack: unprivileged ICMP (ping) sockets: SOCK_DGRAM IPPROTO_ICMP and ICMPV6
# expect: EACCES (ping_group_range excludes the sandbox), or at most loopback
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
for fam, proto, dst in ((2, 1, "192.0.2.1"), (10, 58, "2001:db8::1")):
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM, proto)
    except OSError:
        continue
    try:
        s.sendto(b"\x08\0\0\0\0\0\0\0", (dst, 0))
        bad.append((fam, "sent"))
    except OSError:
        pass
report(bad, "no ICMP out")
