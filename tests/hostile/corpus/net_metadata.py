# attack: reach the cloud metadata service at 169.254.169.254 (HTTP) and fd00:ec2::254
# expect: no route: ENETUNREACH
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
r = try_connect(socket.AF_INET, ("169.254.169.254", 80))
if r != "ENETUNREACH":
    bad.append(("169.254.169.254", r))
r = try_connect(socket.AF_INET6, ("fd00:ec2::254", 80))
if r != "ENETUNREACH":
    bad.append(("fd00:ec2::254", r))
report(bad, "metadata unreachable")
