# attack: lie about the status: an error frame named MemoryError and a done frame carrying status oom/timeout and a reason
# expect: a frame may lie about the code's own results (error), never about a limit: the status is never oom, timeout or killed
# status: error ok
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
frame({"type": "error", "id": ID, "name": "MemoryError", "message": "forged", "traceback": ""})
frame({"type": "done", "id": ID, "exit_code": 0, "status": "oom", "reason": "forged", "oom": True, "signal": 9})
import time; time.sleep(0.5)
