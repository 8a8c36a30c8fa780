"""What the load test turned up, reduced to a deterministic case.

Under load, the memory bomb of test_under_load.py sometimes passes its time limit
before the kernel kills it; petri interrupts it (SIGINT), the OOM killer
ends it a moment later, within the 2 s grace, and the result says
`timeout` with "the code did not stop when interrupted", exit_code null,
nothing about memory; petri_executions_total counts it as a timeout.  The
same happens for any death of the runtime during the grace: box_exec()
(src/runtime/box.c) takes the "did not stop" branch whenever pump() returns
without "done", never looking at the cgroup's OOM counter or the wait
status, as classify_death() does for a death before the time limit.
Here the interrupt handler itself does what the load produced by chance.
"""
import pytest

from faulthelp import metric

CONFIG = """
[server]
shutdown_grace_s = 1

[limits]
memory_mb = 128
"""

OOM_ON_INTERRUPT = (
    "import signal, time\n"
    "def h(*a):\n"
    "    b = []\n"
    "    while True:\n"
    "        b.append(bytearray(16 << 20))\n"
    "signal.signal(signal.SIGINT, h)\n"
    "time.sleep(100)\n")

EXIT_ON_INTERRUPT = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGINT, lambda *a: os._exit(3))\n"
    "time.sleep(100)\n")


def test_oom_during_the_interrupt_grace_is_reported_as_oom(daemons):
    srv = daemons(CONFIG, "finding-oom")
    api = srv.api()
    sid = api.session()
    r = api.execute(sid, OOM_ON_INTERRUPT, timeout_s=1)
    m = srv.metrics()
    print(f"\n{srv.tag}: { {k: r[k] for k in ('status', 'exit_code', 'duration_ms', 'memory_peak_bytes', 'reason')} }")
    # The memory limit was reached (the peak is the limit) and the runtime
    # died of it well within the grace.
    assert r["memory_peak_bytes"] >= 120 << 20, r
    assert r["duration_ms"] < 1000 + 2000, r
    assert r["status"] == "oom", r
    assert "did not stop" not in (r["reason"] or ""), r
    assert metric(m, "petri_executions_total", status="oom") == 1, m


def test_exit_during_the_interrupt_grace_is_reported_as_such(daemons):
    srv = daemons(CONFIG, "finding-exit")
    api = srv.api()
    sid = api.session()
    r = api.execute(sid, EXIT_ON_INTERRUPT, timeout_s=1)
    print(f"\n{ {k: r[k] for k in ('status', 'exit_code', 'duration_ms', 'reason')} }")
    assert r["duration_ms"] < 1000 + 2000, r
    assert r["status"] in ("timeout", "error"), r
    assert r["exit_code"] == 3, r
    assert "did not stop" not in (r["reason"] or ""), r
