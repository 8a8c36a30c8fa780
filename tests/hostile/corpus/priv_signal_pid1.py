# attack: stop or kill pid 1 from inside (SIGSTOP, SIGKILL, SIGTSTP, the fatal signals, a flood of real-time signals), then leave an orphan for it
# expect: every signal refused (Landlock's signal scope) or dropped by the kernel (pid 1 has no handler); pid 1 never stops, keeps no signal queued, and still reaps the orphan
# status: ok
import os, signal, subprocess, sys, time

def state():
    return open('/proc/1/stat').read().rsplit(')', 1)[1].split()[0]

def pending():
    return [ln.split()[1] for ln in open('/proc/1/status')
            if ln.startswith(('SigQ', 'SigPnd', 'ShdPnd'))]

bad = []
# Not the signals pid 1 passes on to the driver (INT, TERM, HUP, QUIT, USR1,
# USR2, WINCH, CONT): those would end or interrupt this program itself.
for s in (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGKILL,
          signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGALRM, signal.SIGXCPU,
          signal.SIGVTALRM, signal.SIGPROF, signal.SIGSYS, signal.SIGTRAP):
    try:
        os.kill(1, s)
    except OSError:
        pass
    if state() in ('T', 't'):
        bad.append('pid 1 stopped by %s' % s.name)
        os.kill(1, signal.SIGCONT)
for i in range(4096):
    try:
        os.kill(1, signal.SIGRTMIN + i % (signal.SIGRTMAX - signal.SIGRTMIN + 1))
    except OSError:
        break
q = pending()
if q and (q[0].split('/')[0] != '0' or q[1].strip('0') or q[2].strip('0')):
    bad.append('signals queued for pid 1: %s' % q)
# An orphan: its parent exits at once, so pid 1 must be there to reap it.
subprocess.run(['sh', '-c', 'sleep 0.2 &'])
def others():
    """(zombies, whether the orphaned sleep still runs)"""
    zombies, sleeping = [], False
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            if open('/proc/%s/stat' % pid).read().rsplit(')', 1)[1].split()[0] == 'Z':
                zombies.append(pid)
            elif open('/proc/%s/cmdline' % pid, 'rb').read().startswith(b'sleep'):
                sleeping = True
        except OSError:
            pass
    return zombies, sleeping

deadline = time.monotonic() + 20
while True:
    zombies, sleeping = others()
    if not zombies and not sleeping:
        break
    if time.monotonic() > deadline:
        bad.append('pid 1 left zombies %s' % zombies)
        break
    time.sleep(0.05)
if state() in ('T', 't'):
    bad.append('pid 1 is stopped')
if bad:
    print('ESCAPE:', bad, file=sys.stderr)
else:
    print('CONTAINED: pid 1 ignores every signal from inside and still reaps', file=sys.stderr)
