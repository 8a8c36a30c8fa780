"""Packages an operator adds, on the daemon's warm path (a template forks
every sandbox) and its cold path (warm = false): `[sandbox] ro_bind`,
`[python] path` and offline pip from `[python] wheelhouse` (docs/
configuration.md).  The wheels are built here (tests/wheels.py).

Without the fixes: the warm template was started without the operator's
binds (ro_bind silently missing in every warm sandbox), `[python]` was an
unknown section, and pip in the sandbox refused to install (PEP 668)."""
import os
import subprocess

import pytest

from apihelp import PETRI, Server

from wheels import make_wheel, operator_dir, snapshot

HELLO = "petrihello"
SITE = "/work/.local/lib/python3.11/site-packages"


@pytest.fixture(scope="module")
def dirs():
    """A wheelhouse, a directory for sys.path and one of data for ro_bind."""
    with operator_dir("wheels") as wh, operator_dir("path") as extra, operator_dir("data") as data:
        make_wheel(wh, HELLO, "1.0", {f"{HELLO}/__init__.py": "ANSWER = 42\n"})
        # Hostile wheels: one that writes outside its target, one far larger
        # unpacked (64 MiB of zeros) than a small session's disk.
        make_wheel(wh, "petriescape", "1.0", {"petriescape/__init__.py": ""},
                   raw={"../../../../../../tmp/petri-escaped.py": b"x = 1\n"})
        make_wheel(wh, "petribomb", "1.0", {"petribomb/__init__.py": "",
                                            "petribomb/zeros.bin": bytes(64 << 20)})
        with open(os.path.join(extra, "operatormod.py"), "w") as f:
            f.write("WHERE = 'operator path'\n")
        with open(os.path.join(data, "table.csv"), "w") as f:
            f.write("a,b\n1,2\n")
        for d in (wh, extra, data):
            for name in os.listdir(d):
                os.chmod(os.path.join(d, name), 0o644)
        yield {"wheelhouse": wh, "path": extra, "data": data}


def config(dirs, warm):
    return (f"[sessions]\nwarm = {'true' if warm else 'false'}\n"
            f"[sandbox]\nro_bind = {dirs['data']}\n"
            f"[python]\npath = {dirs['path']}\nwheelhouse = {dirs['wheelhouse']}\n")


@pytest.fixture(scope="module", params=["warm", "cold"])
def srv(request, dirs, tmp_path_factory):
    warm = request.param == "warm"
    s = Server(tmp_path_factory.mktemp(request.param), config(dirs, warm))
    if warm:
        assert s.warm_state == "ready", s.stderr_text()
    yield s
    code, err = s.stop()
    assert code == 0, err[-3000:]
    assert not s.leaked and not s.leaked_cgroups


@pytest.fixture
def api(srv):
    return srv.api()


def bash(api, sid, code):
    return api.execute(sid, code, language="bash")


def test_ro_bind_is_there_read_only(api, dirs):
    sid = api.session()
    path = os.path.join(dirs["data"], "table.csv")
    r = api.execute(sid, f"import pandas\npandas.read_csv({path!r}).b.sum()")
    assert r["status"] == "ok", r
    assert r["results"][0]["text/plain"] == "2"
    r = bash(api, sid, f"echo x > {path}; touch {dirs['data']}/new; mount | grep -F {dirs['data']}")
    assert "Read-only file system" in r["stderr"], r
    assert "ro," in r["stdout"] and "nosuid" in r["stdout"] and "nodev" in r["stdout"], r
    assert not os.path.exists(os.path.join(dirs["data"], "new"))


def test_python_path(api, dirs):
    sid = api.session()
    r = api.execute(sid, "import operatormod, sys\nprint(operatormod.WHERE)\n"
                         "print(sys.path.index(%r) < min(i for i, p in enumerate(sys.path) "
                         "if p.endswith('dist-packages')))" % dirs["path"])
    assert r["stdout"] == "operator path\nTrue\n", r
    # Python programs the code starts have it too (as PYTHONPATH).
    r = bash(api, sid, "python3 -c 'import operatormod; print(operatormod.WHERE)'")
    assert r["stdout"] == "operator path\n", r


def test_pip_from_bash_then_import(api, dirs):
    before = snapshot(dirs["wheelhouse"])
    sid = api.session()
    r = bash(api, sid, f"pip install {HELLO}")
    assert r["exit_code"] == 0, r
    assert f"Successfully installed {HELLO}-1.0" in r["stdout"], r
    assert r["files"] == [], "installed packages are not the code's output files"
    r = api.execute(sid, f"import {HELLO}\n{HELLO}.ANSWER, {HELLO}.__file__")
    assert r["status"] == "ok", r
    assert r["results"][0]["text/plain"] == f"(42, '{SITE}/{HELLO}/__init__.py')"
    assert snapshot(dirs["wheelhouse"]) == before


@pytest.mark.parametrize("magic", ["%pip", "!pip"])
def test_pip_magic_in_a_cell(api, magic):
    sid = api.session()
    code = (f"import os\nseen = sorted(os.listdir('/tmp') + os.listdir('/dev/shm'))\n"
            f"if True:\n    {magic} install {HELLO}\n"
            f"import {HELLO}\nprint({HELLO}.ANSWER, _exit_code)\n"
            "assert sorted(os.listdir('/tmp') + os.listdir('/dev/shm')) == seen\n"
            "1/0\n")
    r = api.execute(sid, code)
    assert "Successfully installed" in r["stdout"] and "42 0\n" in r["stdout"], r
    # line numbers as written: 1/0 is line 8
    assert r["error"]["name"] == "ZeroDivisionError", r
    assert 'line 8' in r["error"]["traceback"], r["error"]["traceback"]
    # A `!` inside a string is not a command.
    r = api.execute(sid, "s = '''\n!pip install nothing\n'''\ns")
    assert r["results"][0]["text/plain"] == repr("\n!pip install nothing\n"), r


def test_missing_package_says_what_pip_says(api):
    sid = api.session()
    r = bash(api, sid, "pip install petri-no-such-package")
    assert r["exit_code"] != 0, r
    assert "No matching distribution found for petri-no-such-package" in r["stderr"], r
    # in Python a failed pip is an error (the install did not happen), and
    # _exit_code says pip's status as IPython's does
    r = api.execute(sid, "%pip install petri-no-such-package\nprint('not reached')")
    assert "No matching distribution found" in r["stderr"], r
    assert r["status"] == "error" and r["error"]["name"].endswith("CalledProcessError"), r
    assert "not reached" not in r["stdout"], r
    assert api.execute(sid, "print('exit', _exit_code)")["stdout"] == "exit 1\n"


def test_hostile_wheels_stay_inside(api):
    # A session whose /work is 16 MiB: the 64 MiB file does not fit.
    sid = api.session(limits={"disk_mb": 16})
    r = bash(api, sid, "pip install petribomb; echo rc=$?; df -k /work | tail -1")
    assert "rc=0" not in r["stdout"], r
    assert "No space left on device" in r["stderr"] or "Errno 28" in r["stderr"], r
    total_kb = int(r["stdout"].split("\n")[-2].split()[1])
    assert total_kb <= 16 << 10, r
    r = api.execute(sid, "1 + 1")      # the session goes on
    assert r["results"][0]["text/plain"] == "2", r
    sid = api.session()
    r = bash(api, sid, "pip install petriescape; echo rc=$?; ls /tmp /work")
    assert "rc=0" not in r["stdout"] and "petri-escaped" not in r["stdout"], r
    assert "outside" in r["stderr"], r
    assert not os.path.exists("/tmp/petri-escaped.py")


def test_a_bind_that_cannot_work_is_refused_at_start(tmp_path, dirs):
    bad = tmp_path / "bad.ini"
    bad.write_text(f"[sandbox]\nro_bind = {tmp_path}\n")
    p = subprocess.run([PETRI, "serve", "--listen", "127.0.0.1:0", "--config", str(bad)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert f"ro_bind = {tmp_path} in [sandbox]" in p.stderr and "/tmp" in p.stderr, p.stderr
