# attack: a Python fork bomb: every child forks again, forever
# expect: the pids limit stops it (fork fails with EAGAIN); the run ends by timeout; no process survives the run or the session
# status: timeout killed
# limits: timeout=8 pids=48
import os, sys, time
def bomb():
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)
for _ in range(4):
    try:
        pid = os.fork()
    except OSError as e:        # the first bombers may reach the limit before the fourth starts
        print('CONTAINED: fork failed with', e.strerror, file=sys.stderr, flush=True)
        time.sleep(60)
    if pid == 0:
        bomb()
deadline = time.time() + 20
while time.time() < deadline:
    try:
        pid = os.fork()
    except OSError as e:
        print('CONTAINED: fork failed with', e.strerror, file=sys.stderr, flush=True)
        break
    if pid == 0:
        bomb()
    time.sleep(0.001)
else:
    print('ESCAPE: forked for 20 s without hitting a limit', file=sys.stderr, flush=True)
time.sleep(60)
