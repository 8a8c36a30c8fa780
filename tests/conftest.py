"""Root of every pytest tier: puts tests/ on sys.path once, so that a tier
imports the shared harness (`from harness import Daemon, wait_for`) and
tests/memcg.py without a sys.path.insert of its own.  It defines no
fixture: each directory sees the fixtures of its own conftest.py only.

It runs the tests marked `slow` (tens of seconds, mostly waiting) first:
with several test processes, the others then fill the time beside them,
where a slow test collected last would end its tier alone.  Under xdist
they are also spread out: its scheduler (3.1, Debian's) hands each process
a first chunk of the collection in order, so slow tests that come first
all together would all run, one after the other, in the first process.
Tiers import no conftest, so that any of them run in one pytest process
(docs/testing.md, tests/docs/test_one_run.py)."""
import os
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes tens of seconds; run before the others")


def pytest_collection_modifyitems(config, items):
    slow = [item for item in items if item.get_closest_marker("slow")]
    rest = [item for item in items if not item.get_closest_marker("slow")]
    items[:] = spread(slow, rest, getattr(config, "workerinput", {}).get("workercount", 1))


def spread(slow, rest, workers):
    """The order in which xdist's load scheduler starts one slow test on
    each of the workers at once: it gives worker k the k-th chunk of
    max(n / workers / 4, 2) tests, then one or two tests at a time from the
    front to whichever worker runs short.  So: a slow test at the head of
    each first chunk, the other slow tests next, then the rest.  Every
    worker computes the same order (xdist insists on it)."""
    n = len(slow) + len(rest)
    if workers < 2 or not slow or n < 2 * workers:
        return slow + rest
    chunk = max(n // workers // 4, 2)
    out = []
    for k in range(workers):
        head = slow[k:k + 1]
        fill = chunk - len(head)
        out += head + rest[:fill]
        rest = rest[fill:]
    return out + slow[workers:] + rest
