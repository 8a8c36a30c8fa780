# attack: connect to the abstract unix socket the test bound on the host (@petri-hostile-host) and to well-known abstract names (systemd, dbus, X11)
# expect: ECONNREFUSED: abstract names belong to the network namespace (and Landlock scopes them)
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
for name in (b"\0petri-hostile-host", b"\0/org/freedesktop/systemd1/notify", b"\0/tmp/.X11-unix/X0", b"\0/tmp/dbus-x"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(name)
        bad.append(name)
    except OSError as e:
        if e.errno not in (errno.ECONNREFUSED, errno.EPERM, errno.ENOENT):
            bad.append((name, e))
    s.close()
report(bad, "no host abstract socket reachable")
