# attack: one rich result just under the 16 MiB frame limit, three times
# expect: two fill the results cap (32 MiB); the third is more than the execution may still send (its frame budget): protocol violation, killed (honest code gets a note instead: tests/hostile/test_budget_frames.py)
# status: killed
# limits: timeout=30 memory=512
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
big = "A" * ((16 << 20) - 200)
for _ in range(3):
    frame({"type": "result", "id": ID, "data": {"text/plain": big}})
