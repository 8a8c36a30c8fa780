# attack: see the host's network from /proc/net: interfaces, routes, listening sockets, unix sockets, ARP
# expect: a fresh network namespace: only lo, no route, no foreign socket
# status: ok
import sys
bad = []
with open('/proc/net/dev') as f:
    ifaces = [l.split(':')[0].strip() for l in f.read().splitlines()[2:]]
if ifaces != ['lo']:
    bad.append(('interfaces', ifaces))
with open('/proc/net/route') as f:
    if len(f.read().splitlines()) > 1:
        bad.append('routes')
for p in ('/proc/net/tcp', '/proc/net/tcp6', '/proc/net/udp', '/proc/net/udp6', '/proc/net/arp'):
    try:
        with open(p) as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        continue
    if rows:
        bad.append((p, rows[:3]))
with open('/proc/net/unix') as f:
    rows = [r for r in f.read().splitlines()[1:] if r.split()[-1].startswith(('/', '@'))]
if rows:
    bad.append(('unix', rows[:5]))
if bad:
    print('ESCAPE: host network visible:', bad, file=sys.stderr)
else:
    print('CONTAINED: only lo', file=sys.stderr)
