# attack: find the daemon's environment (a canary variable the test put there) anywhere: every /proc/*/environ and cmdline, own env, /proc/self/auxv
# expect: the canary is nowhere: the sandbox's environment is synthesized
# status: ok
import os, sys
needle = ('yr' + 'an4c')[::-1].encode()   # the canary's prefix, built at run time
hits = []
for d in os.listdir('/proc'):
    if not d.isdigit():
        continue
    for name in ('environ', 'cmdline'):
        try:
            with open('/proc/%s/%s' % (d, name), 'rb') as f:
                if needle in f.read():
                    hits.append('/proc/%s/%s' % (d, name))
        except OSError:
            pass
for k, v in os.environ.items():
    if needle in (k + v).encode() or 'HOSTILE' in k:
        hits.append('env ' + k)
if hits:
    print('ESCAPE: the daemon environment leaks through', hits, file=sys.stderr)
else:
    print('CONTAINED: no canary; env keys', sorted(os.environ), file=sys.stderr)
