# attack: find or create network interfaces: list them, bring one up, add an address or a route (SIOCSIFADDR, SIOCADDRT)
# expect: only lo; every change refused (no CAP_NET_ADMIN)
# status: ok
import fcntl, socket, struct, sys
bad = []
names = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
if names != ["lo"]:
    bad.append(names)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ifreq = struct.pack("16sH2s4s8s", b"lo", socket.AF_INET, b"\0\0", socket.inet_aton("192.0.2.9"), b"\0" * 8)
for req in (0x8916, 0x890B):   # SIOCSIFADDR, SIOCADDRT
    try:
        fcntl.ioctl(s, req, ifreq + b"\0" * 64)
        bad.append(hex(req))
    except OSError:
        pass
print(("ESCAPE: %s" % bad) if bad else "CONTAINED: only lo, read-only", file=sys.stderr)
