"""What petri says it is (docs/releasing.md): `petri --version` is what
scripts/version prints for the tree it was built from, which in a git
checkout is git describe's; and a release tarball (make dist) unpacked
where there is no .git builds and reports the version it was made with."""
import os
import subprocess
import tarfile

import pytest

import version  # tests/version.py
from harness import PETRI, ROOT

IN_GIT = (ROOT / ".git").exists()
# A make run from a test starts clean: not a sub-make of the one running
# the suite (its jobserver, its command-line variables).
MAKE_ENV = {k: v for k, v in os.environ.items()
            if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          timeout=60)


def test_version_is_the_source_trees():
    v = version.reported(PETRI)
    assert v == version.of_source()
    for argv in ([PETRI, "version"], [PETRI, "--version"]):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0 and p.stdout == f"petri {v}\n" and p.stderr == "", p


@pytest.mark.skipif(not IN_GIT, reason="not a git checkout")
def test_version_is_git_describe():
    v = version.reported(PETRI)
    tag = git("describe", "--tags", "--dirty", "--match", "v[0-9]*", "--match", "[0-9]*")
    if tag.returncode == 0:
        assert v == tag.stdout.strip().removeprefix("v")
    else:
        # No release tag yet: the base release, the commits, the commit.
        sha = git("describe", "--always", "--dirty").stdout.strip()
        count = git("rev-list", "--count", "HEAD").stdout.strip()
        assert v.endswith(f"-{count}-g{sha}") and v.split("-")[0].count(".") == 2, v


# Slow (a whole build, about a minute on two cores): one test, in the plain
# run of the suite only, not again in the sanitizer builds' runs.
@pytest.mark.skipif(not IN_GIT, reason="make dist needs a git checkout")
@pytest.mark.skipif(bool(os.environ.get("PETRI_SANITIZED")),
                    reason="the release tarball is built once, in the plain run of the suite")
def test_a_release_tarball_builds_and_reports_its_version(tmp_path):
    v = version.of_source()
    p = subprocess.run(["make", "-s", "-C", str(ROOT), "dist", f"DISTDIR={tmp_path}"],
                       capture_output=True, text=True, timeout=300, env=MAKE_ENV)
    assert p.returncode == 0, p.stderr
    tarball = tmp_path / f"petri-{v}.tar.gz"
    with tarfile.open(tarball) as t:
        names = {m.name for m in t.getmembers() if m.isfile()}
        # Unpacked inside a git repository of someone else's: the tarball's
        # VERSION, not that repository's describe, is what it reports.
        outer = tmp_path / "elsewhere"
        subprocess.run(["git", "init", "-q", str(outer)], check=True, timeout=60)
        t.extractall(outer)
    top = outer / f"petri-{v}"
    tracked = set(git("ls-files").stdout.split()) - set(git("ls-files", "--deleted").stdout.split())
    assert names == {f"petri-{v}/{n}" for n in tracked | {"VERSION"}}
    assert (top / "VERSION").read_text() == v + "\n"
    assert not (top / ".git").exists()
    assert version.of_source(top) == v
    p = subprocess.run(["make", "-j2", "-s"], cwd=top, capture_output=True, text=True,
                       timeout=1800, env=MAKE_ENV)
    assert p.returncode == 0, p.stderr[-3000:]
    assert version.reported(str(top / "build" / "petri")) == v
