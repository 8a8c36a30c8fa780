# attack: connect to the host's loopback services: the listener the test opened on 127.0.0.1:47123 and [::1]:47123, ssh, the daemon's default port 8080
# expect: refused: the sandbox's 127.0.0.1 is its own loopback, where nothing listens
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
for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.53")):
    for port in (47123, 22, 8080, 53, 5432, 6379):
        r = try_connect(fam, (host, port))
        if r != "ECONNREFUSED":
            bad.append((host, port, r))
report(bad, "host loopback unreachable")
