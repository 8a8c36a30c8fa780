# attack: a classic double-forked daemon (fork, setsid, fork) that outlives the execution
# expect: it lives on inside the sandbox at most until the run ends or the session is deleted; the host check finds no process left
# status: ok
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in range(0, 3):
            try:
                os.close(fd)
            except OSError:
                pass
        while True:
            with open('/tmp/daemon-alive', 'w') as f:
                f.write(str(time.time()))
            time.sleep(0.2)
    os._exit(0)
os.wait()
for _ in range(100):
    if os.path.exists('/tmp/daemon-alive'):
        break
    time.sleep(0.05)
print('CONTAINED: daemon started' if os.path.exists('/tmp/daemon-alive') else 'daemon did not start', file=sys.stderr)
