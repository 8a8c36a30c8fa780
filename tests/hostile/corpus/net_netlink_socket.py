# attack: open AF_NETLINK sockets of every protocol but routing (audit, uevents, xfrm, sock_diag, netfilter, generic...) and every type; with a routing socket, list the links and change them (add a link, take lo down, add an address)
# expect: EPROTONOSUPPORT for every other protocol; routing lists only the sandbox's own lo, and every change fails with EPERM (no CAP_NET_ADMIN)
# status: ok
import errno, os, socket, struct, sys
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
bad = []
for proto in range(1, 32):
    for typ in (1, 2, 3, 5):
        try:
            s = socket.socket(16, typ, proto)
            bad.append((proto, typ))
            s.close()
        except OSError as e:
            if e.errno != errno.EPROTONOSUPPORT:
                bad.append((proto, typ, e.errno))
if socket.if_nameindex() != [(1, 'lo')]:
    bad.append(("links", socket.if_nameindex()))

def request(msg_type, flags, body):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    s.settimeout(3)
    s.bind((0, 0))
    hdr = struct.pack("=LHHLL", 16 + len(body), msg_type, flags | 0x1 | 0x4, 1, 0)  # REQUEST|ACK
    s.send(hdr + body)
    data = s.recv(65536)
    s.close()
    length, typ = struct.unpack("=LH", data[:6])
    if typ != 2:                       # NLMSG_ERROR carries the answer
        return "no error message: type %d" % typ
    return -struct.unpack("=i", data[16:20])[0]

IFINFO = struct.pack("=BxHiII", 0, 0, 1, 0, 1)                 # lo, flags 0 (down), change IFF_UP
NEWLINK = struct.pack("=BxHiII", 0, 0, 0, 0, 0) + struct.pack("=HH", 9, 3) + b"x1\0\0" + \
    struct.pack("=HH", 16, 18) + struct.pack("=HH", 10, 1) + b"dummy\0\0\0"   # IFLA_IFNAME, IFLA_LINKINFO/KIND
NEWADDR = struct.pack("=BBBBi", socket.AF_INET, 8, 0, 0, 1) + struct.pack("=HH", 8, 2) + socket.inet_aton("192.0.2.9")
for name, typ, flags, body in (("link down", 16, 0, IFINFO),             # RTM_NEWLINK on lo
                               ("add dummy link", 16, 0x400 | 0x200, NEWLINK),  # CREATE|EXCL
                               ("add address", 20, 0x400 | 0x200, NEWADDR)):    # RTM_NEWADDR
    try:
        answer = request(typ, flags, body)
    except OSError as e:
        answer = "socket error %s" % errno.errorcode.get(e.errno, e.errno)
    if answer != errno.EPERM:
        bad.append((name, answer))
report(bad, "only routing, in its own namespace, read-only")
