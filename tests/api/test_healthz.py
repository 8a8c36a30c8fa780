"""Readiness is a fact a client reads: GET /healthz says whether the warm
path is starting, ready, off or failed, how many warm sandboxes are ready,
the live sessions and the cap; a session asked for while the template
starts waits for it at most [sessions] warm_wait_s, and the log says
whether it waited or went cold (docs/api.md, docs/configuration.md).
GET /readyz says the same by its status alone (a Kubernetes
readinessProbe): 503 "warming" while the template starts, 200 once the
warm path has settled (drain and undrain: test_drain.py).

The template is made slow on purpose (it preloads a module of the
operator's [python] path that sleeps), so that "starting" is a state the
tests can see on any machine; no timing is asserted.

Without the change: /healthz had no warm, pool nor max_sessions; a session
asked for during the start went cold at once (tens of seconds on a loaded
machine, competing with the template's imports) and said nothing."""
import os
import re

import pytest

from apihelp import healthz, wait_for

from wheels import operator_dir

SLOW_S = 6      # the slow template's import; a session never waits that long unless told


@pytest.fixture(scope="module")
def slow_path():
    """A [python] path with a module whose import takes SLOW_S seconds."""
    with operator_dir("slow") as d:
        p = os.path.join(d, "petrislow.py")
        with open(p, "w") as f:
            f.write(f"import time\ntime.sleep({SLOW_S})\n")
        os.chmod(p, 0o644)
        yield d


def slow_config(slow_path, wait_s):
    return (f"[sessions]\nwarm_wait_s = {wait_s}\npool_min = 1\n"
            f"[python]\npath = {slow_path}\npreload = petrislow\n")


def test_healthz_says_warm_pool_sessions_and_capacity(make_server):
    srv = make_server("[server]\nmax_sessions = 7\n")
    h = srv.api().get("/healthz").json()
    # What it answered before, unchanged.
    assert h["status"] == "ok" and isinstance(h["version"], str) and h["version"], h
    assert isinstance(h["cgroups"], bool), h
    assert h["warm"] == "ready", (h, srv.stderr_text()[-2000:])
    assert h["max_sessions"] == 7, h
    assert h["sessions"] == 0, h
    # The pool fills to pool_min (2) in the background.
    assert wait_for(lambda: srv.api().get("/healthz").json()["pool"] >= 1, 60), \
        srv.api().get("/healthz").json()
    sid = srv.api().session()
    assert srv.api().get("/healthz").json()["sessions"] == 1
    assert srv.api().delete(f"/v1/sessions/{sid}").status_code == 204
    assert srv.api().get("/healthz").json()["sessions"] == 0


def test_healthz_says_off_without_a_warm_path(cold_server):
    h = cold_server.api().get("/healthz").json()
    assert h["warm"] == "off" and h["pool"] == 0, h
    assert h["max_sessions"] == 100, h


def test_healthz_answers_needs_no_key_and_only_get(make_server):
    srv = make_server("[server]\napi_keys = k1\n")
    h = healthz(srv.url)
    assert h and h["warm"] == "ready", h
    assert srv.api().post("/healthz", {}).status_code == 405


def readyz(srv, key=None):
    r = srv.api(key).get("/readyz")
    return r.status_code, r.json()


def test_readyz_is_503_warming_until_the_template_is_ready(make_server, slow_path):
    srv = make_server(slow_config(slow_path, 600), light=False, wait_warm=False)
    status, body = readyz(srv)
    assert status == 503, body
    assert body["status"] == "not_ready" and body["reason"] == "warming", body
    assert body["warm"] == "starting" and body["draining"] is False, body
    # The rest of the body is /healthz's.
    h = srv.api().get("/healthz").json()
    assert set(body) == set(h) | {"reason"} and body["node"] == h["node"], (body, h)
    assert srv.wait_warm(120) == "ready"
    status, body = readyz(srv)
    assert status == 200 and body["status"] == "ok" and "reason" not in body, body
    assert body["warm"] == "ready", body


def test_readyz_is_200_at_once_without_a_warm_path(cold_server):
    status, body = readyz(cold_server)
    assert status == 200 and body["warm"] == "off" and "reason" not in body, body


def test_readyz_needs_no_key_and_only_get(make_server):
    srv = make_server("[server]\napi_keys = k1\n")
    status, body = readyz(srv)                  # no key
    assert status == 200 and body["status"] == "ok", body
    assert srv.api("wrong").get("/readyz").status_code == 200
    assert srv.api().get("/metrics").status_code == 401     # keys are on
    for method in ("POST", "PUT", "DELETE"):
        r = srv.api().request(method, "/readyz")
        assert r.status_code == 405 and r.headers["Allow"] == "GET", (method, r.text)
        assert r.json()["error"]["code"] == "method_not_allowed", r.text


def test_a_session_waits_for_the_starting_template(make_server, slow_path):
    srv = make_server(slow_config(slow_path, 600), light=False, wait_warm=False)
    h = srv.api().get("/healthz").json()
    assert h["warm"] == "starting", h
    sid = srv.api().session()           # waits for the template, not cold
    assert srv.api().execute(sid, "1 + 1")["results"] == [{"text/plain": "2"}]
    err = srv.stderr_text()
    assert re.search(r"a sandbox waited \d+ ms for the warm template", err), err[-3000:]
    assert "went cold" not in err, err[-3000:]
    assert srv.api().get("/healthz").json()["warm"] == "ready"
    # Each log line: an ISO-8601 time (UTC), the command, a level.
    line = next(ln for ln in err.splitlines() if "a sandbox waited" in ln)
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z petri serve: info: ", line), line


def test_a_session_goes_cold_after_warm_wait_s(make_server, slow_path):
    srv = make_server(slow_config(slow_path, 0.2), light=False, wait_warm=False)
    assert srv.api().get("/healthz").json()["warm"] == "starting"
    sid = srv.api().session()
    assert srv.api().execute(sid, "1 + 1")["results"] == [{"text/plain": "2"}]
    err = srv.stderr_text()
    assert re.search(r"a sandbox went cold: the warm template was not ready after \d+ ms "
                     r"\(\[sessions\] warm_wait_s = 0.2\)", err), err[-3000:]


def test_warm_wait_s_0_never_waits(make_server, slow_path):
    srv = make_server(slow_config(slow_path, 0), light=False, wait_warm=False)
    sid = srv.api().session()
    assert srv.api().execute(sid, "1 + 1")["results"] == [{"text/plain": "2"}]
    err = srv.stderr_text()
    assert "a sandbox waited" not in err and "went cold" not in err, err[-3000:]
    assert srv.wait_warm(120) == "ready"


def test_informational_lines_are_not_warnings(make_server):
    srv = make_server()
    code, err = srv.stop()
    assert code == 0, err[-3000:]
    # The record's head is kept by operators, but nothing is wrong.
    assert re.search(r"info: record '.*' opened: ", err), err[-3000:]
    assert re.search(r"info: record '.*' closed: ", err), err[-3000:]
    assert ": warning: " not in err, err[-3000:]
