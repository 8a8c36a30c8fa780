# attack: connect to outside addresses over TCP (documentation prefixes 192.0.2.1, 198.51.100.1, 203.0.113.1 on 80 and 443)
# expect: no route: ENETUNREACH at once (the network namespace has only lo)
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
for host in ("192.0.2.1", "198.51.100.1", "203.0.113.1"):
    for port in (80, 443):
        r = try_connect(socket.AF_INET, (host, port))
        if r != "ENETUNREACH":
            bad.append((host, port, r))
report(bad, "no route outside")
