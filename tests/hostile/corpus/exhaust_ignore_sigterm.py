# attack: ignore SIGTERM, SIGINT, SIGHUP and keep running past the timeout
# expect: petri escalates to SIGKILL; status timeout (or killed when the session must be ended)
# status: timeout killed
# limits: timeout=2
import signal, sys, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
    signal.signal(s, signal.SIG_IGN)
print('CONTAINED: ignoring every polite signal', file=sys.stderr, flush=True)
while True:
    try:
        time.sleep(1)
    except BaseException:
        pass
