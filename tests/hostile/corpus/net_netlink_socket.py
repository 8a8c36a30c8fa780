# attack: open a AF_NETLINK (routing, audit, uevents) socket of every type
# expect: EAFNOSUPPORT from the socket argument check
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
for typ in (1, 2, 3, 5):
    try:
        s = socket.socket(16, typ, 0)
        bad.append(typ)
        s.close()
    except OSError as e:
        if e.errno != errno.EAFNOSUPPORT:
            bad.append((typ, e.errno))
report(bad, "family 16 refused")
