# attack: the driver itself (Python runs in-process) sends itself SIGSTOP
# expect: the supervisor's timeout still fires and the sandbox is killed; the daemon is not blocked
# status: timeout killed
# limits: timeout=2
import os, signal, sys
print('CONTAINED: stopping the driver', file=sys.stderr, flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
