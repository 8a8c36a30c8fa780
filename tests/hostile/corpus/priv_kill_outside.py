# attack: signal processes outside the sandbox: every pid up to 70000 (and the largest) with signal 0, and SIGKILL/SIGSTOP to pid 1
# expect: only the sandbox's own processes answer; pid 1 ignores SIGKILL and SIGSTOP from inside
# status: ok
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)
def report(bad, ok):
    print(("ESCAPE: %s" % (bad,)) if bad else ("CONTAINED: " + ok), file=sys.stderr)
import signal, time
mine = {int(d) for d in os.listdir("/proc") if d.isdigit()}
alive = []
for pid in list(range(2, 70000)) + [4194303, 4194304]:
    try:
        os.kill(pid, 0)
        alive.append(pid)
    except ProcessLookupError:
        pass
    except PermissionError:
        alive.append(pid)
foreign = [p for p in alive if p not in mine]
for sig in (signal.SIGKILL, signal.SIGSTOP):
    try:
        os.kill(1, sig)      # ignored by the kernel, or refused by Landlock's signal scope
    except PermissionError:
        pass
time.sleep(0.2)
with open("/proc/1/status") as f:
    state = [l for l in f if l.startswith("State")][0].split()[1]
bad = foreign + (["pid 1 state " + state] if state not in ("S", "R") else [])
report(bad, "only own pids %s; pid 1 state %s" % (sorted(alive)[:10], state))
