"""POST and GET /v1/sessions/{id}/archive against a real `petri serve`: a
project in (tar, tar.gz, tar.bz2, tar.xz, zip; extracted by the session's own
driver, all or nothing) and out (a streamed tar.gz or tar).

What every extraction must leave: the archive's files with their content,
permission bits (the exec bit kept, set-user-id dropped), modification times,
symbolic links as links and hard links as links; what was in /work before
and is not in the archive, untouched; and never the server's own temporary
files (.petri-upload-*, .petri-archive-*, .petri-unpack-*), whether the
archive was taken or refused.  The malicious archives are in
tests/hostile/test_archives.py."""
import io
import os
import signal
import socket
import stat
import tarfile
import threading

import pytest
import requests

from apihelp import Server, cgroup_dirs, error_of, process_tree, wait_for

from archives import MTIME, entry, leftovers, snapshot, tar_bytes, zip_bytes, zip_entry

# A small project: a file, an executable that asked for set-user-id, its
# directory (after its files, with its own mode and time), a symbolic link
# and a hard link.
PROJECT = [
    entry("p/a.txt", b"hi"),
    entry("p/run.sh", b"#!/bin/sh\necho ran\n", mode=0o4755),
    entry("p", mode=0o750, mtime=MTIME - 100_000, type=tarfile.DIRTYPE),
    entry("p/l", mtime=MTIME - 200_000, type=tarfile.SYMTYPE, link="a.txt"),
    entry("p/h", type=tarfile.LNKTYPE, link="p/a.txt"),
]
SUMMARY = {"entries": 5, "files": 3, "directories": 1, "links": 1, "bytes": 2 + 19}


@pytest.fixture
def sid(api):
    s = api.session(limits={"memory_mb": 256, "disk_mb": 64})
    yield s
    api.delete(f"/v1/sessions/{s}")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A server with small caps (cold sessions): uploads of 1 MiB, archives
    of 50 entries."""
    srv = Server(tmp_path_factory.mktemp("archive-small"),
                 "[server]\nmax_file_mb = 1\narchive_max_entries = 50\n[sessions]\nwarm = false\n")
    yield srv
    code, err = srv.stop()
    assert code == 0, err[-3000:]
    assert not srv.leaked, f"processes of petri serve outlived it: {srv.leaked}"
    assert not srv.leaked_cgroups, f"cgroups left behind: {srv.leaked_cgroups}"


def unpack(api, sid, data, path=None, **kw):
    return api.post(f"/v1/sessions/{sid}/archive", data=data,
                    params={"path": path} if path is not None else None, **kw)


def download(api, sid, **params):
    return api.get(f"/v1/sessions/{sid}/archive", params=params)


def look(api, sid, top="/work"):
    return snapshot(lambda code: api.execute(sid, code), top)


def top_names(api, sid):
    r = api.get(f"/v1/sessions/{sid}/files")
    assert r.status_code == 200, r.text
    return [f["path"] for f in r.json()["files"]]


def assert_no_leftovers(api, sid):
    """None of the server's temporary files in /work (an aborted upload's is
    removed by the waiter thread: a bounded wait)."""
    wait_for(lambda: not leftovers(top_names(api, sid)), 30)
    assert not leftovers(top_names(api, sid))


def refused(r, status, code):
    assert r.status_code == status, r.text
    err = error_of(r.text)
    assert err["code"] == code, err
    return err["message"]


def check_project(seen, base):
    """PROJECT as extracted under base ("" or "x/y/")."""
    d, a, run, link, hard = (seen[base + n] for n in ("p", "p/a.txt", "p/run.sh", "p/l", "p/h"))
    assert stat.S_ISDIR(d["mode"]) and stat.S_IMODE(d["mode"]) == 0o750, oct(d["mode"])
    assert d["mtime"] == MTIME - 100_000
    assert stat.S_ISREG(a["mode"]) and stat.S_IMODE(a["mode"]) == 0o644 and a["data"] == "hi"
    assert a["mtime"] == MTIME
    # the exec bit kept, set-user-id dropped
    assert stat.S_IMODE(run["mode"]) == 0o755, oct(run["mode"])
    assert run["data"] == "#!/bin/sh\necho ran\n" and run["mtime"] == MTIME
    assert stat.S_ISLNK(link["mode"]) and link["link"] == "a.txt"
    assert link["mtime"] == MTIME - 200_000
    assert stat.S_ISREG(hard["mode"]) and hard["ino"] == a["ino"] and a["nlink"] == 2


# ---- in -------------------------------------------------------------------


@pytest.mark.parametrize("compression,fmt", [("", "tar"), ("gz", "tar.gz"), ("bz2", "tar.bz2"),
                                             ("xz", "tar.xz")])
def test_tar_formats_extract_into_a_new_subdirectory(api, sid, compression, fmt):
    body = tar_bytes(PROJECT, compression)
    r = unpack(api, sid, body, "x/y")
    assert r.status_code == 201, r.text
    assert r.json() == {"format": fmt, **SUMMARY, "path": "x/y", "size": len(body)}
    seen = look(api, sid)
    assert stat.S_ISDIR(seen["x"]["mode"]) and stat.S_ISDIR(seen["x/y"]["mode"])
    check_project(seen, "x/y/")
    assert set(seen) == {"x", "x/y", "x/y/p", "x/y/p/a.txt", "x/y/p/run.sh", "x/y/p/l", "x/y/p/h"}
    res = api.execute(sid, "x/y/p/run.sh && cat x/y/p/l", language="bash")
    assert res["stdout"] == "ran\nhi", res
    assert_no_leftovers(api, sid)


def test_tar_extracts_into_work_itself(api, sid):
    r = unpack(api, sid, tar_bytes(PROJECT, "gz"))
    assert r.status_code == 201, r.text
    assert r.json()["path"] == ""
    seen = look(api, sid)
    check_project(seen, "")
    assert set(seen) == {"p", "p/a.txt", "p/run.sh", "p/l", "p/h"}


def test_zip_extracts_with_modes_times_and_links(api, sid):
    body = zip_bytes([
        (zip_entry("p/run.sh", 0o104755), b"#!/bin/sh\necho ran\n"),
        (zip_entry("p/l", 0o120777), b"run.sh"),
        (zip_entry("p/d/", 0o40700), b""),
        (zip_entry("p/d/data.csv", 0o100640), b"a,b\n1,2\n"),
        ("plain.txt", b"plain"),            # zipfile's default: 0600
    ])
    r = unpack(api, sid, body, "z")
    assert r.status_code == 201, r.text
    assert r.json() == {"format": "zip", "entries": 5, "files": 3, "directories": 1, "links": 1,
                        "bytes": 19 + 8 + 5, "path": "z", "size": len(body)}
    seen = look(api, sid)
    # A zip's times are local times: the sandbox's own zone says what it is.
    when = float(api.execute(sid, "import time\ntime.mktime((2020, 1, 2, 3, 4, 6, 0, 0, -1))")
                 ["results"][0]["text/plain"])
    run, link, d, csv = (seen["z/p/" + n] for n in ("run.sh", "l", "d", "d/data.csv"))
    assert stat.S_IMODE(run["mode"]) == 0o755 and run["mtime"] == when, run
    assert stat.S_ISLNK(link["mode"]) and link["link"] == "run.sh" and link["mtime"] == when
    assert stat.S_ISDIR(d["mode"]) and stat.S_IMODE(d["mode"]) == 0o700 and d["mtime"] == when
    assert stat.S_IMODE(csv["mode"]) == 0o640 and csv["data"] == "a,b\n1,2\n"
    assert stat.S_IMODE(seen["z/plain.txt"]["mode"]) == 0o600
    assert api.execute(sid, "z/p/l", language="bash")["stdout"] == "ran\n"
    assert_no_leftovers(api, sid)


def test_a_bash_session_extracts_too(api):
    sid = api.session(language="bash", limits={"memory_mb": 256})
    r = unpack(api, sid, tar_bytes(PROJECT, "gz"), "x")
    assert r.status_code == 201, r.text
    assert api.execute(sid, "cat x/p/h")["stdout"] == "hi"
    api.delete(f"/v1/sessions/{sid}")


def test_merge_into_an_existing_tree(api, sid):
    for path, data in (("proj/keep.txt", b"kept"), ("proj/src/old.py", b"old"),
                       ("proj/src/mod.py", b"v1")):
        assert api.put(f"/v1/sessions/{sid}/files/{path}", data=data).status_code == 201
    before = look(api, sid)
    body = tar_bytes([entry("src/mod.py", b"v2"), entry("src/new.py", b"new"),
                      entry("README", b"read me")], "gz")
    r = unpack(api, sid, body, "proj")
    assert r.status_code == 201, r.text
    after = look(api, sid)
    assert after["proj/src/mod.py"]["data"] == "v2"       # replaced
    assert after["proj/src/new.py"]["data"] == "new" and after["proj/README"]["data"] == "read me"
    for kept in ("proj/keep.txt", "proj/src/old.py"):     # untouched
        assert after[kept] == before[kept]
    assert set(after) == set(before) | {"proj/src/new.py", "proj/README"}
    assert_no_leftovers(api, sid)


WORKSPACE = r"""
mkdir -p d real && echo in-d > d/f && echo file > f && ln -s real ln && echo r > real/r
"""

CONFLICTS = [
    # (why, the archive's entries after new.txt, ?path=)
    ("a directory of the workspace, a file of the archive", [entry("d", b"x")], None),
    ("a file of the workspace where the archive needs a directory", [entry("f/x", b"x")], None),
    ("a file of the workspace, a directory of the archive",
     [entry("f", type=tarfile.DIRTYPE, mode=0o755)], None),
    ("a symlink of the workspace where the archive needs a directory", [entry("ln/x", b"x")], None),
    ("a directory of the workspace, a symlink of the archive",
     [entry("d", type=tarfile.SYMTYPE, link="real")], None),
    ("the destination is a symlink", [entry("x", b"x")], "ln"),
    ("the destination is a file", [entry("x", b"x")], "f"),
    ("the destination is under a file", [entry("x", b"x")], "f/sub"),
]


@pytest.mark.parametrize("why,entries,path", CONFLICTS, ids=[c[0] for c in CONFLICTS])
def test_conflicts_are_refused_and_nothing_changes(api, sid, why, entries, path):
    assert api.execute(sid, WORKSPACE, language="bash")["exit_code"] == 0
    before = look(api, sid)
    # new.txt comes first: a refusal must take it back too (nothing is written)
    body = tar_bytes([entry("new.txt", b"new"), *entries])
    message = refused(unpack(api, sid, body, path), 400, "invalid_archive")
    assert "workspace" in message, message
    assert look(api, sid) == before
    assert_no_leftovers(api, sid)


def test_a_busy_session_is_409_and_the_archive_goes(api, sid):
    out = {}
    t = threading.Thread(target=lambda: out.update(r=api.execute(
        sid, "import time, os\ntime.sleep(2)\nsorted(os.listdir('/work'))")))
    t.start()
    try:
        assert api.wait_busy(sid, 20)
        refused(unpack(api, sid, tar_bytes(PROJECT, "gz")), 409, "session_busy")
    finally:
        t.join()
    assert out["r"]["status"] == "ok", out["r"]
    assert_no_leftovers(api, sid)
    assert top_names(api, sid) == []    # the archive was neither kept nor extracted


def test_unknown_and_deleted_sessions_are_404(api):
    body = tar_bytes(PROJECT)
    for sid in ("ses_00000000000000000000000000000000", "nope"):
        refused(unpack(api, sid, body), 404, "session_not_found")
        refused(download(api, sid), 404, "session_not_found")
    sid = api.session()
    assert api.delete(f"/v1/sessions/{sid}").status_code == 204
    refused(unpack(api, sid, body), 404, "session_not_found")
    refused(download(api, sid), 404, "session_not_found")


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc", "/work/x", "a//b", "a/./b", "a\x01b",
                                  "x" * 300])
def test_a_bad_path_is_400_and_leaves_nothing(api, sid, path):
    message = refused(unpack(api, sid, tar_bytes(PROJECT, "gz"), path), 400, "invalid_path")
    assert message
    refused(download(api, sid, path=path), 400, "invalid_path")
    assert_no_leftovers(api, sid)
    assert top_names(api, sid) == []


NOT_ARCHIVES = {
    "empty": b"",
    "text": b"just some text, not an archive at all\n" * 20,
    "random": bytes(range(256)) * 16,
    "truncated tar.gz": tar_bytes([entry("f", os.urandom(50_000))], "gz")[:20_000],
    "gzip of text": __import__("gzip").compress(b"not a tar\n" * 100),
    "zstd": b"\x28\xb5\x2f\xfd" + b"\0" * 60,
    "zip without its central directory": zip_bytes([("f", b"data" * 100)])[:60],
}


@pytest.mark.parametrize("name", sorted(NOT_ARCHIVES))
def test_not_an_archive_is_400(api, sid, name):
    message = refused(unpack(api, sid, NOT_ARCHIVES[name]), 400, "invalid_archive")
    assert message
    assert_no_leftovers(api, sid)
    assert top_names(api, sid) == []


def test_an_archive_over_max_file_mb_is_413(small):
    api = small.api()
    sid = api.session()
    body = tar_bytes([entry("big", os.urandom((1 << 20) + 4096))])
    # Content-Length says so: refused before the body is read
    message = refused(unpack(api, sid, body), 413, "too_large")
    assert "archive" in message and "1 MiB" in message, message
    # chunked: refused once it has streamed past the limit
    message = refused(unpack(api, sid, iter([body[:1 << 19], body[1 << 19:]])), 413, "too_large")
    assert "archive" in message, message
    assert_no_leftovers(api, sid)
    assert top_names(api, sid) == []
    api.delete(f"/v1/sessions/{sid}")


def test_entries_past_archive_max_entries_are_413(small):
    api = small.api()
    sid = api.session()
    fifty = [entry(f"m/f{i:02d}", b"x") for i in range(50)]
    message = refused(unpack(api, sid, tar_bytes(fifty + [entry("m/last", b"x")], "gz")), 413,
                      "archive_too_large")
    assert "50 entries" in message, message
    assert top_names(api, sid) == []
    r = unpack(api, sid, tar_bytes(fifty, "gz"))
    assert r.status_code == 201 and r.json()["entries"] == 50, r.text
    assert_no_leftovers(api, sid)
    api.delete(f"/v1/sessions/{sid}")


def test_pytest_runs_on_an_uploaded_project(api, sid):
    project = [
        entry("calc/calc.py", b"def add(a, b):\n    return a + b\n"),
        entry("calc/tests/test_calc.py",
              b"from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
              b"def test_add_str():\n    assert add('a', 'b') == 'ab'\n"),
        entry("calc/tests/conftest.py",
              b"import os, sys\nsys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))\n"),
    ]
    r = unpack(api, sid, tar_bytes(project, "gz"))
    assert r.status_code == 201, r.text
    res = api.execute(sid, "cd calc && python3 -m pytest -q -p no:cacheprovider", language="bash",
                      timeout_s=30)
    assert res["exit_code"] == 0, res
    assert "2 passed" in res["stdout"], res["stdout"]


# ---- out ------------------------------------------------------------------


def lstat_view(seen):
    """What a path is, without its inode and link count."""
    return {k: {f: v for f, v in e.items() if f not in ("ino", "nlink")} for k, e in seen.items()}


def members(r):
    """{name: (TarInfo, data)} of a downloaded archive, in its order."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:*") as t:
        for m in t:
            f = t.extractfile(m) if m.isreg() else None
            out[m.name] = (m, f.read() if f else None)
    return out


@pytest.mark.parametrize("fmt,ctype", [(None, "application/gzip"), ("tgz", "application/gzip"),
                                       ("tar.gz", "application/gzip"), ("tar", "application/x-tar")])
def test_download_round_trips(api, sid, fmt, ctype):
    assert unpack(api, sid, tar_bytes(PROJECT, "gz"), "x/y").status_code == 201
    r = download(api, sid, path="x/y", **({"format": fmt} if fmt else {}))
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == ctype
    assert r.headers["Content-Disposition"].startswith("attachment")
    assert r.headers["Content-Security-Policy"] == "sandbox"
    assert r.content[:2] == b"\x1f\x8b" if ctype == "application/gzip" else r.content[257:262] == b"ustar"
    got = members(r)
    # names relative to ?path=, directories before what they hold
    assert list(got) == ["p", "p/a.txt", "p/h", "p/l", "p/run.sh"], list(got)
    want = {ti.name: (ti, data) for ti, data in PROJECT}
    for name, (m, data) in got.items():
        w, wdata = want[name]
        assert m.uid == 0 and m.gid == 0
        if name == "p/h":                   # a hard link goes as a second file
            assert m.isreg() and data == b"hi"
            continue
        assert m.type == w.type, name
        assert m.mtime == w.mtime, name
        assert m.mode == (w.mode & 0o777 if not m.issym() else 0o777), (name, oct(m.mode))
        if m.isreg():
            assert data == wdata
        if m.issym():
            assert m.linkname == w.linkname
    # the download extracted elsewhere is what it was made of (the hard
    # link aside: a file of its own now)
    again = api.session(limits={"memory_mb": 256})
    assert unpack(api, again, r.content, "x/y").status_code == 201
    assert lstat_view(look(api, again, "/work/x/y")) == lstat_view(look(api, sid, "/work/x/y"))
    api.delete(f"/v1/sessions/{again}")


def test_download_of_all_of_work_leaves_out_fifos_and_setuid(api, sid):
    res = api.execute(sid, "mkdir -p sub && echo s > sub/s && chmod 4755 sub/s && mkfifo sub/fifo "
                           "&& ln -s s sub/sl && ln -s /etc/passwd out && "
                           "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\"",
                      language="bash")
    assert res["exit_code"] == 0, res
    got = members(download(api, sid))
    assert set(got) == {"sub", "sub/s", "sub/sl", "out"}, list(got)
    assert got["sub/s"][0].mode == 0o755 and got["sub/s"][1] == b"s\n"
    assert got["sub/sl"][0].issym() and got["sub/sl"][0].linkname == "s"
    assert got["out"][0].issym() and got["out"][0].linkname == "/etc/passwd"
    assert all(not n.startswith(("/", "./", "..")) for n in got)


def test_download_of_an_empty_workspace_is_an_empty_archive(api, sid):
    for fmt in ("tar.gz", "tar"):
        r = download(api, sid, format=fmt)
        assert r.status_code == 200
        assert members(r) == {}


def test_download_errors(api, sid):
    assert api.put(f"/v1/sessions/{sid}/files/file.txt", data=b"x").status_code == 201
    assert "tar.gz" in refused(download(api, sid, format="bogus"), 400, "invalid_request")
    refused(download(api, sid, format="zip"), 400, "invalid_request")
    refused(download(api, sid, path="file.txt"), 400, "not_a_directory")
    refused(download(api, sid, path="missing"), 404, "file_not_found")
    refused(download(api, sid, path="file.txt/x"), 400, "not_a_directory")
    refused(api.request("PUT", f"/v1/sessions/{sid}/archive"), 405, "method_not_allowed")
    refused(api.delete(f"/v1/sessions/{sid}/archive"), 405, "method_not_allowed")


def test_download_past_archive_max_entries_is_413(small):
    api = small.api()
    sid = api.session()
    assert api.execute(sid, "mkdir d && touch d/f{01..49}", language="bash")["exit_code"] == 0
    r = download(api, sid)                      # d and 49 files: 50 entries
    assert r.status_code == 200 and len(members(r)) == 50
    assert len(members(download(api, sid, path="d"))) == 49
    assert api.execute(sid, "touch d/f50", language="bash")["exit_code"] == 0
    message = refused(download(api, sid), 413, "too_large")
    assert "50 entries" in message, message
    assert download(api, sid, path="d").status_code == 200      # a directory of it still goes
    api.delete(f"/v1/sessions/{sid}")


def test_a_download_ends_when_the_session_is_deleted(api):
    sid = api.session(limits={"memory_mb": 256, "disk_mb": 128})
    size = 48 << 20
    res = api.execute(sid, f"open('big', 'wb').write(__import__('os').urandom({size}))")
    assert res["status"] == "ok", res
    r = api.get(f"/v1/sessions/{sid}/archive", params={"format": "tar"}, stream=True, timeout=60)
    assert r.status_code == 200
    it = r.iter_content(1 << 16)
    got = len(next(it))
    assert api.delete(f"/v1/sessions/{sid}").status_code == 204
    # The rest of the stream is cut short: an error or an early end, never a
    # hang (the read timeout would fail the test) nor the whole file.
    try:
        for chunk in it:
            got += len(chunk)
    except requests.RequestException as e:     # a read timeout comes as one too
        assert "timed out" not in str(e).lower(), e
    r.close()
    assert got < size, got
    refused(download(api, sid), 404, "session_not_found")


def archive_writers(daemon_pid):
    """Pids of the daemon's archive writers (src/workspace/archive.h)."""
    found = []
    for pid in process_tree(daemon_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1] == b"__archive-writer":
            found.append(pid)
    return found


def cpu_s(pid):
    """The daemon's own CPU seconds (its threads; not its reaped children)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sessions_cpu_s(daemon_pid):
    """CPU seconds charged to each of the daemon's sessions' cgroups."""
    usage = {}
    for d in cgroup_dirs(daemon_pid):
        try:
            with open(os.path.join(d, "cpuacct.usage")) as f:
                usage[d] = int(f.read()) / 1e9
        except OSError:
            try:
                with open(os.path.join(d, "cpu.stat")) as f:
                    usage[d] = int(dict(line.split() for line in f)["usage_usec"]) / 1e6
            except (OSError, KeyError):
                pass
    return usage


def cpu_spent(before, after):
    """What the cgroups present at both readings spent in between."""
    return sum(after[d] - before[d] for d in before if d in after)


def test_compression_is_charged_to_the_session(make_server):
    """A tar.gz is made by a writer in the session's cgroups, not on the
    daemon's event threads: the session pays the compression's CPU, the
    daemon only copies bytes."""
    srv = make_server("[sessions]\nwarm = false\n")
    api = srv.api()
    sid = api.session(limits={"memory_mb": 512, "disk_mb": 256, "timeout_s": 60})
    res = api.execute(sid, "import os\nfor i in range(6): open('r%d' % i, 'wb')"
                      ".write(os.urandom(16 << 20))", timeout_s=60)
    assert res["status"] == "ok", res
    daemon0, sessions0 = cpu_s(srv.pid), sessions_cpu_s(srv.pid)
    r = api.get(f"/v1/sessions/{sid}/archive", timeout=300)
    assert r.status_code == 200, r.text[:300]
    daemon = cpu_s(srv.pid) - daemon0
    sessions = cpu_spent(sessions0, sessions_cpu_s(srv.pid))
    print(f"{len(r.content) >> 20} MiB of tar.gz: the session's CPU +{sessions:.2f} s, "
          f"the daemon's +{daemon:.2f} s")
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as t:
        assert sorted(t.getnames()) == [f"r{i}" for i in range(6)]
    # Compressing 96 MiB costs the better part of a second, whoever pays.
    assert sessions > 0.2, f"the session paid {sessions:.2f} s for the archive"
    assert daemon < sessions / 2, f"the daemon paid {daemon:.2f} s, the session {sessions:.2f} s"
    api.delete(f"/v1/sessions/{sid}")


def test_a_client_that_hangs_up_leaves_no_writer(server, api):
    """The writer of an archive nobody reads any more is killed and reaped;
    while it lived it was in the session's cgroups."""
    sid = api.session(limits={"memory_mb": 256, "disk_mb": 128})
    res = api.execute(sid, "open('big', 'wb').write(__import__('os').urandom(48 << 20))")
    assert res["status"] == "ok", res
    host, port = server.url.rsplit("/", 1)[1].rsplit(":", 1)
    c = socket.create_connection((host, int(port)), timeout=60)
    c.sendall(f"GET /v1/sessions/{sid}/archive HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    assert c.recv(64).startswith(b"HTTP/1.1 200"), "the download did not start"
    writers = wait_for(lambda: archive_writers(server.pid), 30)
    assert len(writers) == 1, writers
    with open(f"/proc/{writers[0]}/cgroup") as f:
        assert f"/petri/p{server.pid}-" in f.read()
    c.close()
    assert wait_for(lambda: not archive_writers(server.pid), 30), archive_writers(server.pid)
    # The session is unharmed.
    assert api.execute(sid, "print(len(open('big', 'rb').read()))")["stdout"] == f"{48 << 20}\n"
    api.delete(f"/v1/sessions/{sid}")


def test_a_client_gone_while_the_writer_makes_nothing_ends_the_download(make_server):
    """A download waits suspended while its writer has made nothing (a
    starved session's, here a stopped one): MHD neither watches nor times
    out that connection, so the wait looks at the client each second, and a
    client gone ends the download, its writer killed, long before
    http_timeout_s (it used to stay until then, writer, listing and all)."""
    srv = make_server("[server]\nhttp_timeout_s = 120\n[sessions]\nwarm = false\n")
    api = srv.api()
    sid = api.session(limits={"memory_mb": 256, "disk_mb": 128})
    res = api.execute(sid, "open('big', 'wb').write(__import__('os').urandom(48 << 20))")
    assert res["status"] == "ok", res
    host, port = srv.url.rsplit("/", 1)[1].rsplit(":", 1)
    c = socket.create_connection((host, int(port)), timeout=60)
    c.sendall(f"GET /v1/sessions/{sid}/archive?format=tar HTTP/1.1\r\nHost: {host}\r\n\r\n"
              .encode())
    assert c.recv(64).startswith(b"HTTP/1.1 200"), "the download did not start"
    writers = wait_for(lambda: archive_writers(srv.pid), 30)
    assert len(writers) == 1, writers
    os.kill(writers[0], signal.SIGSTOP)
    try:
        c.settimeout(2)            # read what it made before it stopped
        while True:
            try:
                if not c.recv(1 << 20):
                    break
            except socket.timeout:
                break
        c.close()
        assert wait_for(lambda: not archive_writers(srv.pid), 10), \
            "the writer outlived its client"
    finally:
        for pid in archive_writers(srv.pid):
            os.kill(pid, signal.SIGCONT)
    assert api.execute(sid, "print(1)")["stdout"] == "1\n"


def test_a_tree_deeper_than_64_levels_is_413_not_cut_short(api, sid):
    # 64 levels: everything goes, the deepest file included
    res = api.execute(sid, "import os\nd = '/work/' + '/'.join('d' * 63)\nos.makedirs(d)\n"
                           "open(d + '/deepest', 'w').write('bottom')")
    assert res["status"] == "ok", res
    got = members(download(api, sid))
    assert len(got) == 64 and got["/".join("d" * 63) + "/deepest"][1] == b"bottom"
    # one more level: refused, never sent without its bottom
    res = api.execute(sid, "import os\nd = '/work/' + '/'.join('d' * 64)\nos.makedirs(d)\n"
                           "open(d + '/deepest', 'w').write('bottom')")
    assert res["status"] == "ok", res
    assert "64 levels" in refused(download(api, sid), 413, "too_large")
    assert len(members(download(api, sid, path="d"))) == 65      # a directory of it goes


def test_a_trailing_slash_names_the_same_directory(api, sid):
    r = unpack(api, sid, tar_bytes(PROJECT), "t/")
    assert r.status_code == 201 and r.json()["path"] == "t", r.text
    check_project(look(api, sid), "t/")
    got = members(download(api, sid, path="t/"))
    assert list(got) == ["p", "p/a.txt", "p/h", "p/l", "p/run.sh"]
    assert got["p/a.txt"][1] == b"hi"
