# attack: churn processes (fork, fork, exit) as fast as possible until the sandbox is torn down
# expect: the teardown wins the race: SIGKILL of pid 1 takes the whole pid namespace; nothing escapes the cgroup
# status: timeout killed
# limits: timeout=2 pids=64
import os, sys
print('CONTAINED: racing the teardown', file=sys.stderr, flush=True)
for _ in range(8):
    if os.fork() == 0:
        while True:
            try:
                pid = os.fork()
                if pid == 0:
                    if os.fork() == 0:
                        os._exit(0)
                    os._exit(0)
                os.waitpid(pid, 0)
            except OSError:
                pass
while True:
    try:
        os.wait()
    except OSError:
        pass
