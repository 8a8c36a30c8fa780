# attack: start threads until something breaks
# expect: thread creation fails (pids limit / RLIMIT_NPROC) with an exception; the daemon is unaffected
# status: ok
# limits: pids=64
import sys, threading, time
ev = threading.Event()
n = 0
try:
    for n in range(100000):
        threading.Thread(target=ev.wait, daemon=True).start()
    print('ESCAPE: 100000 threads started', file=sys.stderr)
except (RuntimeError, OSError) as e:
    print('CONTAINED: thread', n, 'failed:', e, file=sys.stderr)
ev.set()
