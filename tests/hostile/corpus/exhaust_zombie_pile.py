# attack: leave a pile of zombies (children never reaped)
# expect: they count against the pids limit only; pid 1 reaps them at teardown; nothing left on the host
# status: ok
# limits: pids=64
import os, sys
n = 0
for _ in range(40):
    try:
        if os.fork() == 0:
            os._exit(0)
        n += 1
    except OSError:
        break
print('CONTAINED: left', n, 'zombies', file=sys.stderr)
