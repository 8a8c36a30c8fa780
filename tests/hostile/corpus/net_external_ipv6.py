# attack: connect to an outside IPv6 address (2001:db8::1, documentation) and to the IPv6 link-local all-routers address
# expect: no route: ENETUNREACH (or EINVAL/EADDRNOTAVAIL for link-local without an interface)
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
for addr in (("2001:db8::1", 80), ("2001:db8::53", 53)):
    r = try_connect(socket.AF_INET6, addr)
    if r not in ("ENETUNREACH", "EADDRNOTAVAIL"):
        bad.append((addr, r))
r = try_connect(socket.AF_INET6, ("ff02::2", 80, 0, 0))
if r == "connected":
    bad.append(("ff02::2", r))
report(bad, "no IPv6 route")
