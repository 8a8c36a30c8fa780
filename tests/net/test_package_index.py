"""Packages through the policy (issue 35, docs/configuration.md
"[network]"): with `[network] package_index` (and `npm_registry`), pip and
npm in a session whose policy reaches the index install from it; a session
whose policy does not, or that has no network, stays offline; a change of
policy turns them on and off in a live session.  The index is the test's
own: a PEP 503 page and an npm registry's documents, served as files by the
small internet's HTTP server (networld.py)."""
import base64
import hashlib
import io
import json
import os
import tarfile

import pytest

from harness import Api, Daemon
from networld import World, refused_at_start, uid_range
from wheels import make_wheel

PKG = "petrinethello"
SITE = "/work/.local/lib/python3.11/site-packages"


def npm_tarball(name, version, files):
    """An npm package's tarball: its files under package/."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as t:
        for path, text in {"package.json": json.dumps({"name": name, "version": version,
                                                       "main": "index.js"}),
                           **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{path}")
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("world"))
    # pip's index: /simple/NAME/ links to the wheel.
    (w.dir / "pkgs").mkdir()
    wheel = os.path.basename(make_wheel(str(w.dir / "pkgs"), PKG, "1.0",
                                        {f"{PKG}/__init__.py": "ANSWER = 42\n"}))
    (w.dir / "simple" / PKG).mkdir(parents=True)
    (w.dir / "simple" / PKG / "index.html").write_text(
        f'<html><body><a href="../../pkgs/{wheel}">{wheel}</a></body></html>\n')
    # npm's registry: /npm/NAME is the package's document, naming its tarball.
    tgz = npm_tarball(PKG, "1.0.0", {"index.js": "module.exports = { answer: 42 };\n"})
    (w.dir / "npm-files").mkdir()
    (w.dir / "npm-files" / f"{PKG}-1.0.0.tgz").write_bytes(tgz)
    (w.dir / "npm").mkdir()
    (w.dir / "npm" / PKG).write_text(json.dumps({
        "name": PKG, "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {
            "name": PKG, "version": "1.0.0", "main": "index.js",
            "dist": {"tarball": f"http://allowed.test/npm-files/{PKG}-1.0.0.tgz",
                     "shasum": hashlib.sha1(tgz).hexdigest(),
                     "integrity": "sha512-" + base64.b64encode(
                         hashlib.sha512(tgz).digest()).decode()}}}}))
    yield w
    w.close()


INDEX = ("package_index = http://allowed.test/simple/\n"
         "npm_registry = http://allowed.test/npm/\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory, world):
    d = Daemon(tmp_path_factory.mktemp("packages"),
               world.config("clients_may = allowlist\n" + INDEX), uid_range=uid_range())
    d.wait_warm(120)
    yield d
    code = d.stop()
    assert not d.problems(code), d.problems(code)


@pytest.fixture
def api(server):
    return Api(server.url)


def bash(api, sid, command):
    return api.execute(sid, command, language="bash", timeout_s=30)


PIP_ENV = "import os; print(os.environ.get('PIP_NO_INDEX'), os.environ.get('PIP_INDEX_URL'))"


def test_pip_installs_from_the_operators_index(api):
    sid = api.session(network={"allow": ["allowed.test"]})
    r = bash(api, sid, f"pip install {PKG}")
    assert r["exit_code"] == 0, r
    assert f"Successfully installed {PKG}-1.0" in r["stdout"], r
    # The record shows where it went.
    assert r["network"]["names"] == ["allowed.test"], r["network"]
    r = api.execute(sid, f"import {PKG}\n{PKG}.ANSWER, {PKG}.__file__")
    assert r["results"][0]["text/plain"] == f"(42, '{SITE}/{PKG}/__init__.py')", r
    api.delete(f"/v1/sessions/{sid}")


def test_pip_magic_in_a_cell_uses_the_index(api):
    sid = api.session(network={"allow": ["allowed.test"]})
    r = api.execute(sid, f"%pip install {PKG}\nimport {PKG}\nprint({PKG}.ANSWER)")
    assert r["status"] == "ok" and r["stdout"].endswith("42\n"), r
    assert r["network"]["names"] == ["allowed.test"], r["network"]
    api.delete(f"/v1/sessions/{sid}")


def test_npm_installs_from_the_operators_registry(api):
    sid = api.session(network={"allow": ["allowed.test"]})
    r = bash(api, sid, f"npm install {PKG} && node -e \"console.log(require('{PKG}').answer)\"")
    assert r["exit_code"] == 0, r
    assert r["stdout"].strip().endswith("42"), r
    # npm's cache stays out of the workspace.
    names = {f["path"].split("/")[0] for f in api.get(f"/v1/sessions/{sid}/files").json()["files"]}
    assert ".npm" not in names and "node_modules" in names, names
    api.delete(f"/v1/sessions/{sid}")


def test_a_policy_that_does_not_reach_the_index_stays_offline(api):
    for network in ({"allow": ["other.test"]}, None):
        sid = api.session(**({"network": network} if network else {}))
        assert api.execute(sid, PIP_ENV)["stdout"] == "1 None\n", network
        r = bash(api, sid, f"pip install {PKG}")
        assert r["exit_code"] != 0 and "No matching distribution" in r["stderr"], r
        api.delete(f"/v1/sessions/{sid}")


def test_a_change_of_policy_turns_the_index_on_and_off(api):
    sid = api.session()
    assert api.execute(sid, PIP_ENV)["stdout"] == "1 None\n"
    r = api.request("PATCH", f"/v1/sessions/{sid}", json={"network": {"allow": ["allowed.test"]}})
    assert r.status_code == 200, r.text
    assert api.execute(sid, PIP_ENV)["stdout"] == "0 http://allowed.test/simple/\n"
    # The keeper has it too: a command started now installs.
    assert bash(api, sid, f"pip install {PKG}")["exit_code"] == 0
    # Denied again: pip is offline again, in the interpreter and in commands.
    r = api.request("PATCH", f"/v1/sessions/{sid}", json={"network": {"allow": ["other.test"]}})
    assert r.status_code == 200, r.text
    assert api.execute(sid, PIP_ENV)["stdout"].startswith("1 ")
    r = bash(api, sid, "echo $PIP_NO_INDEX $NPM_CONFIG_OFFLINE")
    assert r["stdout"] == "1 true\n", r
    # A client's own variables for one execution still win over the session's.
    r = api.execute(sid, PIP_ENV, env={"PIP_INDEX_URL": "http://mine.test/"})
    assert r["stdout"] == "1 http://mine.test/\n", r
    api.delete(f"/v1/sessions/{sid}")


def test_a_clients_own_index_is_left_alone(api):
    """A client that sets pip's index itself (the session's env) keeps it:
    petri sets npm's only."""
    sid = api.session(network={"allow": ["allowed.test"]},
                      env={"PIP_INDEX_URL": "http://mine.test/simple/", "PIP_NO_INDEX": "0"})
    assert api.execute(sid, PIP_ENV)["stdout"] == "0 http://mine.test/simple/\n"
    r = bash(api, sid, "echo $NPM_CONFIG_REGISTRY")
    assert r["stdout"] == "http://allowed.test/npm/\n", r
    api.delete(f"/v1/sessions/{sid}")


@pytest.mark.parametrize("lines, why", [
    ("clients_may = allowlist\npackage_index = ftp://allowed.test/", "not an http:// or https://"),
    ("clients_may = allowlist\npackage_index = http://[::1]/simple", "not a domain name or an IPv4"),
    ("clients_may = allowlist\npackage_index = http://a b/", "printable ASCII"),
    ("clients_may = allowlist\ndeny = *.corp.internal\npackage_index = https://pypi.corp.internal/",
     "its host is in [network] deny"),
    ("clients_may = allowlist\ndeny = corp.internal\npackage_index = https://pypi.corp.internal/",
     "its host is in [network] deny"),
    ("npm_registry = https://npm.internal/", "no session can have a network"),
    ("clients_may = allowlist\npackage_index = http://10.1.2.3/simple/",
     "a private address that [network] reachable does not name"),
    ("clients_may = allowlist\nreachable = 10.9.0.0/16\npackage_index = http://10.1.2.3/simple/",
     "a private address that [network] reachable does not name"),
    ("clients_may = allowlist\npackage_index = http://169.254.169.254/", "never reachable"),
])
def test_a_bad_index_is_refused_at_start(tmp_path, lines, why):
    code, err = refused_at_start(tmp_path, lines)
    assert code != 0 and why in err, (lines, err)
