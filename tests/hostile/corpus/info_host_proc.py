# attack: read /proc files that describe the host rather than the sandbox: its kernel (cmdline, config.gz, modules, iomem, slabinfo...), its live activity (interrupts, softirqs, diskstats, pressure, zone and buddy lists, locks: side channels on neighbours) and its identity (boot_id, partitions, swaps)
# expect: each absent, unreadable or empty (masked); what the runtimes need (cpuinfo, meminfo, stat, os.cpu_count) still readable
# status: ok
import os, sys
masked = ['cmdline', 'config.gz', 'diskstats', 'interrupts', 'softirqs', 'modules', 'partitions',
          'swaps', 'vmallocinfo', 'slabinfo', 'pagetypeinfo', 'zoneinfo', 'buddyinfo', 'iomem',
          'ioports', 'kpagecount', 'kpageflags', 'kpagecgroup', 'schedstat', 'locks',
          'sys/kernel/random/boot_id', 'pressure/cpu', 'pressure/io', 'pressure/memory']
bad = []
for name in masked:
    p = '/proc/' + name
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        data = os.read(fd, 256)
    except OSError:
        data = b''
    os.close(fd)
    if data:
        bad.append((p, data[:50]))
if os.path.isdir('/proc/pressure') and os.listdir('/proc/pressure'):
    bad.append(('/proc/pressure lists', os.listdir('/proc/pressure')))
for name in ('cpuinfo', 'meminfo', 'stat', 'self/status', 'uptime'):
    with open('/proc/' + name, 'rb') as f:
        if not f.read(16):
            print('BROKEN: /proc/%s empty' % name, file=sys.stderr)
            sys.exit(0)
if not os.cpu_count():
    print('BROKEN: os.cpu_count() is %r' % os.cpu_count(), file=sys.stderr)
elif bad:
    print('ESCAPE: host-wide /proc files readable:', bad, file=sys.stderr)
else:
    print('CONTAINED: host-wide /proc files masked', file=sys.stderr)
