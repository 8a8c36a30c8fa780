"""The light template (docs/configuration.md, "The light template"): with
the data stack preloaded, a second template preloads nothing, and one-shots
whose code names none of the preloaded modules are forked from it, as are
one-shots in other languages; what names one, brings files, or is a
session's goes to the main template.  Either way the answer is the same:
only the cost differs.  Observed from inside (is pandas already imported?)
and through /metrics."""
import base64
import time

from apihelp import metric, wait_for
from harness import find_template

WARM_S = 180        # the data stack's template on a loaded machine

# Whether the sandbox's interpreter had pandas before the code ran, without
# naming it (a name would send the one-shot to the main template).
PROBE = ("import sys\n"
         "print(sorted(m for m in sys.modules if m == 'pan' + 'das'))\n"
         "6 * 7\n")
LIGHT = "[]\n"
HEAVY = "['pandas']\n"


def light_count(srv):
    return metric(srv.api().get("/metrics").text, "petri_oneshots_light_total")


def pools(api):
    """(ready in the main pool, ready in the light template's)."""
    m = api.get("/metrics").text
    return metric(m, "petri_pool_ready"), metric(m, "petri_light_pool_ready")


def oneshot(api, code, **kw):
    r = api.post("/v1/execute", {"code": code, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def test_oneshots_that_need_no_preload_are_forked_light(make_server):
    # pool_size = 2: the main pool aims at both, so the light template's
    # pool holds none and its sandboxes are forked when asked.
    srv = make_server("[sessions]\npool_size = 2\n", light=False)
    api = srv.api()
    assert wait_for(lambda: api.get("/healthz").json()["light"] == "ready", WARM_S, 0.2), \
        api.get("/healthz").text
    assert len(find_template(srv.pid, preloads=False)) == 1, find_template(srv.pid)
    assert len(find_template(srv.pid, preloads=True)) == 1, find_template(srv.pid)
    assert wait_for(lambda: pools(api) == (2, 0), WARM_S, 0.1), pools(api)

    r = oneshot(api, PROBE)
    assert (r["status"], r["stdout"]) == ("ok", LIGHT), r
    assert r["results"] == [{"text/plain": "42"}], r
    assert light_count(srv) == 1

    # Naming a preloaded module: the main template, where it is imported.
    r = oneshot(api, "import sys\nwas = 'pandas' in sys.modules\nimport pandas\nprint(was)")
    assert (r["status"], r["stdout"]) == ("ok", "True\n"), r
    # A chart needs the data stack's template too, and gets its image.
    r = oneshot(api, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
    assert r["status"] == "ok" and any("image/png" in x for x in r["results"]), r
    assert light_count(srv) == 1

    # Another language: light.
    r = oneshot(api, "echo hi", language="bash")
    assert (r["status"], r["stdout"]) == ("ok", "hi\n"), r
    assert light_count(srv) == 2

    # Files could hold modules that import anything: the main template.
    data = base64.b64encode(b"x = 1\n").decode()
    r = oneshot(api, PROBE, files=[{"path": "mod.py", "content_base64": data}])
    assert (r["status"], r["stdout"]) == ("ok", HEAVY), r
    # So could what it reads, and code that imports by a name it builds.
    r = oneshot(api, PROBE, stdin="import os\n")
    assert (r["status"], r["stdout"]) == ("ok", HEAVY), r
    r = oneshot(api, "import importlib\n" + PROBE)
    assert (r["status"], r["stdout"]) == ("ok", HEAVY), r
    # So do other limits (never pooled) and sessions (their later cells
    # may import anything).
    r = oneshot(api, PROBE, limits={"memory_mb": 300})
    assert (r["status"], r["stdout"]) == ("ok", HEAVY), r
    sid = api.session()
    assert api.execute(sid, PROBE)["stdout"] == HEAVY
    assert light_count(srv) == 2

    # An error in a light sandbox reads as in any other.
    r = oneshot(api, "1 / 0")
    assert r["status"] == "error" and r["error"]["name"] == "ZeroDivisionError", r
    assert light_count(srv) == 3


def test_light_template_can_be_switched_off(make_server):
    srv = make_server("[sessions]\npool_size = 1\n[python]\nlight_template = false\n",
                      light=False)
    api = srv.api()
    r = oneshot(api, PROBE)
    assert (r["status"], r["stdout"]) == ("ok", HEAVY), r
    m = api.get("/metrics").text
    assert metric(m, "petri_oneshots_light_total") == 0
    assert metric(m, "petri_light_pool_ready") == 0
    assert api.get("/healthz").json()["light"] == "off"
    assert len(find_template(srv.pid)) == 1, find_template(srv.pid)


def test_the_light_pool_holds_what_the_main_one_leaves(make_server):
    """Between them the two pools hold at most pool_max, the main one
    first: idle, each aims at pool_min (2), and with pool_max = 3 the light
    one gets the one place the main one leaves; a one-shot takes it, and
    the light pool refills it."""
    srv = make_server("[sessions]\npool_min = 2\npool_max = 3\n", light=False)
    api = srv.api()
    api.get("/v1/languages")            # the probe's one-shot is over
    assert wait_for(lambda: pools(api) == (2, 1), WARM_S, 0.2), pools(api)
    seen = []
    for _ in range(10):                 # it stays there
        seen.append(pools(api))
        time.sleep(0.1)
    assert set(seen) == {(2, 1)}, seen
    r = oneshot(api, PROBE)
    assert (r["status"], r["stdout"]) == ("ok", LIGHT), r
    assert light_count(srv) == 1
    assert wait_for(lambda: pools(api) == (2, 1), WARM_S, 0.1), pools(api)
