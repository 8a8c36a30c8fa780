# attack: a zero-length control frame
# expect: protocol violation: killed
# status: killed
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
os.write(3, b"\0\0\0\0")
import time; time.sleep(10)
