# attack: a forked child of the driver writes frames (a done for the current id) while the parent keeps running
# expect: the frames are the session's own lies at most: the execution ends ok or is killed for a violation; never a crash
# status: ok killed error
import json, os, sys
def exec_id():
    """The id of the execution in flight, from the driver's own state."""
    f = sys._getframe()
    while f is not None:
        s = f.f_globals.get("S")
        if s is not None and hasattr(s, "exec_id"):
            return s.exec_id
        f = f.f_back
    raise SystemExit("no driver state")
def frame(obj=None, raw=None):
    body = raw if raw is not None else json.dumps(obj).encode()
    os.write(3, len(body).to_bytes(4, "big") + body)
ID = exec_id()
print("CONTAINED: forging frames as exec", ID, file=sys.stderr, flush=True)
pid = os.fork()
if pid == 0:
    frame({"type": "result", "id": ID, "data": {"text/plain": "from the child"}})
    os._exit(0)
os.waitpid(pid, 0)
