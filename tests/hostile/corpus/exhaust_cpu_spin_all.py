# attack: spin on every core (a process per CPU, forever)
# expect: the CPU quota throttles it and the wall-clock timeout ends it; the neighbour session still answers
# status: timeout killed
# limits: timeout=3
import os, sys
print('CONTAINED: spinning on', os.cpu_count(), 'cores', file=sys.stderr, flush=True)
for _ in range(os.cpu_count() * 2):
    if os.fork() == 0:
        while True:
            pass
while True:
    pass
