# attack: resolve names: getaddrinfo of a public name and of names the host machine may have, and /etc/resolv.conf
# expect: resolution fails (hosts: files dns, no resolv.conf: the C library asks 127.0.0.1:53, where nothing listens; no network); only localhost and petri resolve
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
for name in ("example.com", "metadata.google.internal", "host.docker.internal", "gateway"):
    try:
        bad.append((name, socket.getaddrinfo(name, 80)[0][4]))
    except OSError:
        pass
if os.path.exists("/etc/resolv.conf"):
    bad.append("resolv.conf")
report(bad, "no name resolves")
