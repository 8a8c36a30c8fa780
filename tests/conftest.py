"""Root of every pytest tier: puts tests/ on sys.path once, so that a tier
imports the shared harness (`from harness import Daemon, wait_for`) and
tests/memcg.py without a sys.path.insert of its own.  It defines no
fixture: each directory sees the fixtures of its own conftest.py only.

It runs the tests marked `slow` (tens of seconds, mostly waiting) first:
with several test processes, the others then fill the time beside them,
where a slow test collected last would end its tier alone.
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
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)   # stable
