# attack: connect to host unix sockets by path: docker, containerd, systemd, dbus, the journal, X11
# expect: none exists in the sandbox root
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
for p in ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/run/systemd/private",
          "/run/dbus/system_bus_socket", "/dev/log", "/run/systemd/journal/socket", "/tmp/.X11-unix/X0"):
    if os.path.exists(p):
        bad.append(p)
report(bad, "no host unix socket")
