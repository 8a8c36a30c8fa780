"""/v1/sessions/{id}/files: upload, compute, download, list, delete; and
every way a path could reach outside the session's /work: "..", encoded
dots, absolute paths, NUL and control characters, over-long names, and
symlinks, FIFOs and sockets planted by the sandboxed code itself."""
import hashlib
import os
import re
import time
import uuid

import pytest

from apihelp import error_of, raw


@pytest.fixture
def sid(api):
    s = api.session()
    yield s
    api.delete(f"/v1/sessions/{s}")


def files(api, sid, path=None):
    r = api.get(f"/v1/sessions/{sid}/files", params={"path": path} if path is not None else None)
    assert r.status_code == 200, r.text
    return r.json()


def test_upload_csv_and_compute_mean(api, sid):
    csv = b"name,score\nada,90\nbob,75\ncy,84\n"
    r = api.put(f"/v1/sessions/{sid}/files/scores.csv", data=csv)
    assert r.status_code == 201, r.text
    assert r.json() == {"path": "scores.csv", "size": len(csv)}
    res = api.execute(sid, "import pandas as pd\ndf = pd.read_csv('scores.csv')\ndf['score'].mean()")
    assert res["status"] == "ok", res
    assert res["results"] == [{"text/plain": "83.0"}]
    # The same bytes are there for bash.
    res = api.execute(sid, "sha256sum scores.csv", language="bash")
    assert res["stdout"].split()[0] == hashlib.sha256(csv).hexdigest()


def test_download_what_the_code_wrote(api, sid):
    res = api.execute(sid, "data = bytes(range(256)) * 64\nopen('blob.bin', 'wb').write(data)\n"
                           "open('report.csv', 'w').write('a,b\\n1,2\\n')\n"
                           "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig('chart.png')\n"
                           "plt.close('all')\nopen('notes.txt', 'w').write('héllo\\n')")
    assert res["status"] == "ok", res
    written = {f["path"]: f["size"] for f in res["files"]}
    assert written.get("blob.bin") == 256 * 64 and written.get("report.csv") == 8, res["files"]
    assert "chart.png" in written and "notes.txt" in written

    r = api.get(f"/v1/sessions/{sid}/files/blob.bin")
    assert r.status_code == 200
    assert r.content == bytes(range(256)) * 64
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.headers.get("Content-Security-Policy") == "sandbox"

    r = api.get(f"/v1/sessions/{sid}/files/report.csv")
    assert r.content == b"a,b\n1,2\n"
    assert r.headers["Content-Type"].startswith("text/csv")

    r = api.get(f"/v1/sessions/{sid}/files/chart.png")
    assert r.headers["Content-Type"] == "image/png"
    assert r.content[:8] == b"\x89PNG\r\n\x1a\n" and len(r.content) == written["chart.png"]

    r = api.get(f"/v1/sessions/{sid}/files/notes.txt")
    assert r.content == "héllo\n".encode()
    assert r.headers["Content-Type"].startswith("text/plain")


def test_binary_upload_round_trip(api, sid):
    blob = os.urandom(300_000)
    r = api.put(f"/v1/sessions/{sid}/files/deep/er/r.bin", data=blob)
    assert r.status_code == 201, r.text
    assert api.get(f"/v1/sessions/{sid}/files/deep/er/r.bin").content == blob
    res = api.execute(sid, "import hashlib\nhashlib.sha256(open('deep/er/r.bin','rb').read()).hexdigest()")
    assert res["results"] == [{"text/plain": repr(hashlib.sha256(blob).hexdigest())}]
    # Overwriting replaces the whole content.
    api.put(f"/v1/sessions/{sid}/files/deep/er/r.bin", data=b"short")
    assert api.get(f"/v1/sessions/{sid}/files/deep/er/r.bin").content == b"short"
    # An empty upload is a valid empty file.
    r = api.put(f"/v1/sessions/{sid}/files/empty.txt", data=b"")
    assert r.status_code == 201 and r.json()["size"] == 0
    r = api.get(f"/v1/sessions/{sid}/files/empty.txt")
    assert r.status_code == 200 and r.content == b""


def test_list_files(api, sid):
    api.put(f"/v1/sessions/{sid}/files/a.csv", data=b"1,2\n")
    api.execute(sid, "import os\nos.makedirs('sub/inner')\nopen('sub/b.txt','w').write('hello')")
    t0 = time.time()
    j = files(api, sid)
    assert j["path"] == "" and j["truncated"] is False
    by_path = {e["path"]: e for e in j["files"]}
    assert set(by_path) == {"a.csv", "sub"}, by_path
    assert [e["path"] for e in j["files"]] == sorted(by_path)
    for e in j["files"]:
        assert set(e) == {"path", "size", "type", "modified_at"}, e
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", e["modified_at"]), e
        m = time.mktime(time.strptime(e["modified_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        assert abs(m - t0) < 120, (e, t0)
    assert by_path["a.csv"]["size"] == 4 and by_path["a.csv"]["type"] == "file"
    assert by_path["sub"]["type"] == "directory"
    sub = files(api, sid, "sub")
    assert sub["path"] == "sub"
    assert {e["path"]: (e["type"], e["size"]) for e in sub["files"]} == {
        "sub/b.txt": ("file", 5), "sub/inner": ("directory", sub["files"][1]["size"])}
    r = api.get(f"/v1/sessions/{sid}/files", params={"path": "nope"})
    assert r.status_code == 404
    r = api.get(f"/v1/sessions/{sid}/files", params={"path": "a.csv"})
    assert r.status_code == 400, r.text


def test_delete_files(api, sid):
    api.put(f"/v1/sessions/{sid}/files/gone.txt", data=b"x")
    api.put(f"/v1/sessions/{sid}/files/d/inside.txt", data=b"y")
    r = api.delete(f"/v1/sessions/{sid}/files/gone.txt")
    assert r.status_code == 204, r.text
    r = api.get(f"/v1/sessions/{sid}/files/gone.txt")
    assert r.status_code == 404 and error_of(r.content)["code"] == "file_not_found"
    r = api.delete(f"/v1/sessions/{sid}/files/gone.txt")
    assert r.status_code == 404
    res = api.execute(sid, "import os\nos.path.exists('gone.txt')")
    assert res["results"] == [{"text/plain": "False"}]
    r = api.delete(f"/v1/sessions/{sid}/files/d")
    assert r.status_code == 409, r.text       # not empty
    assert api.delete(f"/v1/sessions/{sid}/files/d/inside.txt").status_code == 204
    assert api.delete(f"/v1/sessions/{sid}/files/d").status_code == 204
    assert files(api, sid)["files"] == []


def test_missing_file_and_directory_download(api, sid):
    r = api.get(f"/v1/sessions/{sid}/files/none.csv")
    assert r.status_code == 404 and error_of(r.content)["code"] == "file_not_found"
    api.execute(sid, "import os\nos.mkdir('adir')")
    r = api.get(f"/v1/sessions/{sid}/files/adir")
    assert r.status_code == 400
    r = api.put(f"/v1/sessions/{sid}/files/adir", data=b"x")
    assert r.status_code == 400


def test_a_file_the_sandboxs_user_may_not_read_is_403(api, sid):
    """Every file operation runs as the sandbox's user: what its mode
    forbids that user is forbidden here too, and said so (it was 500)."""
    api.execute(sid, "import os\nopen('locked', 'w').write('x')\nos.chmod('locked', 0)\n"
                     "os.mkdir('shut')\nos.chmod('shut', 0)")
    for r in (api.get(f"/v1/sessions/{sid}/files/locked"),
              api.put(f"/v1/sessions/{sid}/files/shut/x", data=b"y")):
        assert r.status_code == 403, r.text
        err = error_of(r.content)
        assert err["code"] == "permission_denied" and "permission denied" in err["message"], err


# Paths as sent on the wire, after /files/.  Each must be refused with 400
# before anything is opened.
BAD_PATHS = {
    "dotdot": "../etc/passwd",
    "dotdot-deep": "../../../../../../etc/passwd",
    "dotdot-middle": "a/../../etc/passwd",
    "dot": "./x",
    "encoded-dotdot": "%2e%2e/%2e%2e/etc/passwd",
    "encoded-dotdot-upper": "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
    "encoded-slash": "..%2f..%2fetc%2fpasswd",
    "absolute-double-slash": "/etc/passwd",
    "absolute-encoded": "%2fetc%2fpasswd",
    "nul": "a%00b",
    "nul-end": "passwd%00.csv",
    "newline": "a%0ab",
    "carriage-return": "a%0d%0aSet-Cookie:x",
    "tab": "a%09b",
    "del": "a%7fb",
    "empty-component": "a//b",
    "trailing-slash": "a/",
    "long-component": "x" * 256,
    "long-path": "/".join(["d" * 200] * 21),       # 4220 bytes
    "bad-utf8": "%ff%fe",
}


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
@pytest.mark.parametrize("name", sorted(BAD_PATHS))
def test_bad_paths_refused(server, api, sid, name, method):
    path = BAD_PATHS[name]
    status, _, body = raw(server.url, method, f"/v1/sessions/{sid}/files/{path}",
                          body=b"PWNED" if method == "PUT" else None)
    assert status == 400, (name, method, status, body)
    assert error_of(body)["code"] == "invalid_path", body


@pytest.mark.parametrize("query", ["..", "%2e%2e", "a/../..", "/etc", "%2fetc", "a%00", "a%0a",
                                   "x" * 256])
def test_bad_list_paths_refused(server, sid, query):
    status, _, body = raw(server.url, "GET", f"/v1/sessions/{sid}/files?path={query}")
    assert status == 400, (query, status, body)


def test_long_names_within_limits_work(api, sid):
    name = "n" * 255
    assert api.put(f"/v1/sessions/{sid}/files/{name}", data=b"ok").status_code == 201
    assert api.get(f"/v1/sessions/{sid}/files/{name}").content == b"ok"
    deep = "/".join(["d" * 100] * 20) + "/f.txt"          # 2026 bytes
    assert api.put(f"/v1/sessions/{sid}/files/{deep}", data=b"deep").status_code == 201
    assert api.get(f"/v1/sessions/{sid}/files/{deep}").content == b"deep"


@pytest.fixture
def host_marker(tmp_path):
    """A host file with unique content that no request may ever return."""
    secret = f"HOST-SECRET-{uuid.uuid4()}".encode()
    d = tmp_path / "hostdir"
    d.mkdir()
    (d / "marker.txt").write_bytes(secret)
    os.chmod(tmp_path, 0o755)
    os.chmod(d, 0o755)
    os.chmod(d / "marker.txt", 0o644)
    return d / "marker.txt", secret


def test_planted_symlinks_never_read_host_files(server, api, sid, host_marker):
    marker, secret = host_marker
    hops = "../" * 12
    code = "\n".join([
        "ln -s /etc/passwd passwd",
        "ln -s / root",
        "ln -s ../../.. up",
        f"ln -s {marker} marker",
        f"ln -s {hops}{str(marker).lstrip('/')} marker_rel",
        f"ln -s {marker.parent} hostdir",
        "ln -s /proc/self/root/etc/passwd magic",
        "ln -s /proc/1/root procroot",
        "mkdir -p sub && ln -s ../../../../etc sub/etc",
        "ls -la",
    ])
    res = api.execute(sid, code, language="bash")
    assert res["status"] == "ok", res
    passwd = open("/etc/passwd", "rb").read()
    tried = ["passwd", "root/etc/passwd", "up/etc/passwd", "marker", "marker_rel",
             "hostdir/marker.txt", f"root{marker}", f"up{marker}", "magic",
             "procroot/etc/passwd", "sub/etc/passwd", "root/proc/1/root/etc/passwd"]
    for p in tried:
        status, _, body = raw(server.url, "GET", f"/v1/sessions/{sid}/files/{p}")
        assert secret not in body, p
        assert b"root:x:0:0" not in body and body != passwd, p
        assert status in (400, 404), (p, status, body[:200])
    # Listing through the links shows /work, never the host's directories.
    for d in ("root", "up", "hostdir", "procroot", "sub/etc"):
        r = api.get(f"/v1/sessions/{sid}/files", params={"path": d})
        if r.status_code == 200:
            names = {os.path.basename(e["path"]) for e in r.json()["files"]}
            assert not names & {"marker.txt", "usr", "bin", "proc", "boot"}, (d, names)
        else:
            assert r.status_code in (400, 404), (d, r.text)


def test_planted_symlinks_never_write_host_files(server, api, sid, host_marker):
    marker, secret = host_marker
    unique = f"petri-test-{uuid.uuid4().hex}"
    passwd_before = hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest()
    code = "\n".join([
        "ln -s /etc/passwd passwd",
        "ln -s / root",
        "ln -s ../../.. up",
        "ln -s /etc etc_link",
        f"ln -s {marker} marker",
        f"ln -s {marker.parent} hostdir",
        f"ln -s /etc/{unique} newfile",
    ])
    assert api.execute(sid, code, language="bash")["status"] == "ok"
    targets = ["passwd", "marker", "newfile", f"root/etc/{unique}", f"up/etc/{unique}",
               f"etc_link/{unique}", "hostdir/marker.txt", f"root{marker}", f"up/tmp/{unique}",
               f"hostdir/{unique}"]
    for p in targets:
        status, _, body = raw(server.url, "PUT", f"/v1/sessions/{sid}/files/{p}", body=b"PWNED")
        assert status in (201, 400, 404), (p, status, body)
    assert hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest() == passwd_before
    assert marker.read_bytes() == secret
    assert sorted(os.listdir(marker.parent)) == ["marker.txt"]
    assert not os.path.exists(f"/etc/{unique}")
    assert not os.path.exists(f"/tmp/{unique}")
    # What was written went into the session's own /work: an upload replaces
    # a planted link with a regular file, never writes through it.
    res = api.execute(sid, "test -L passwd || cat passwd; echo; test -L marker || cat marker; echo; "
                           f"test -e /etc/{unique} && echo LEAK || echo clean", language="bash")
    assert res["stdout"].splitlines() == ["PWNED", "PWNED", "clean"], res
    # Deleting through a link removes at most the link, never its target.
    for p in ("passwd", "marker", "root/etc/passwd", "hostdir/marker.txt"):
        raw(server.url, "DELETE", f"/v1/sessions/{sid}/files/{p}")
    assert marker.read_bytes() == secret
    assert hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest() == passwd_before


def test_symlink_swapped_during_downloads(server, api, sid, host_marker):
    """The code swaps a directory and a symlink to / as fast as it can
    while the host downloads through it: no host file ever comes back."""
    marker, secret = host_marker
    api.execute(sid, "import os\nos.makedirs('real/etc')\nopen('real/etc/passwd','w').write('sandbox')\n")
    api.execute(sid, f"""
import os, threading
def swap():
    while not stop:
        try:
            os.rename('real', 'parked'); os.symlink('/', 'real')
            os.unlink('real'); os.symlink('{marker.parent}', 'real')
            os.unlink('real'); os.rename('parked', 'real')
        except OSError:
            pass
stop = False
t = threading.Thread(target=swap, daemon=True)
t.start()
""")
    seen = set()
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        for p in ("real/etc/passwd", "real/marker.txt"):
            status, _, body = raw(server.url, "GET", f"/v1/sessions/{sid}/files/{p}")
            assert secret not in body and b"root:x:0:0" not in body, (p, body[:100])
            seen.add((p, status, body if status == 200 else b""))
    api.execute(sid, "stop = True\nt.join()")
    assert any(s == 200 for _, s, _ in seen), seen     # the race did run


def test_fifos_and_sockets_refused_without_hanging(server, api, sid):
    code = ("import os, socket\n"
            "os.mkfifo('result.csv')\nos.mkfifo('chart.png')\n"
            "s = socket.socket(socket.AF_UNIX)\ns.bind('output.json')\ns.listen(1)\n"
            "os.mkfifo('sub_fifo')\n")
    t0 = time.monotonic()
    res = api.execute(sid, code)
    assert res["status"] == "ok", res
    assert time.monotonic() - t0 < 10
    # Listing shows them as what they are, without opening them.
    types = {e["path"]: e["type"] for e in files(api, sid)["files"]}
    assert types["result.csv"] == "other" and types["output.json"] == "other", types
    for p in ("result.csv", "chart.png", "output.json"):
        t0 = time.monotonic()
        status, _, body = raw(server.url, "GET", f"/v1/sessions/{sid}/files/{p}", timeout=10)
        assert time.monotonic() - t0 < 5, p
        assert status == 400, (p, status, body)
        assert error_of(body)["code"] == "not_a_regular_file", body
    # An upload replaces the FIFO or socket with a regular file, never
    # opens it (which could block).
    for p in ("result.csv", "output.json"):
        t0 = time.monotonic()
        status, _, body = raw(server.url, "PUT", f"/v1/sessions/{sid}/files/{p}",
                              body=b"data", timeout=10)
        assert time.monotonic() - t0 < 5, p
        assert status == 201, (p, status, body)
    types = {e["path"]: e["type"] for e in files(api, sid)["files"]}
    assert types["result.csv"] == "file" and types["output.json"] == "file", types
    # And the session is still fine: a FIFO with a reader in the sandbox
    # is not a deadlock for the supervisor either.
    res = api.execute(sid, "import os\nos.path.exists('result.csv')")
    assert res["results"] == [{"text/plain": "True"}]


def test_file_names_with_spaces_and_unicode(api, sid):
    name = "my report ü €.txt"
    r = api.put(f"/v1/sessions/{sid}/files/{name}", data=b"u")
    assert r.status_code == 201, r.text
    res = api.execute(sid, "import os\nsorted(os.listdir('.'))")
    assert name in res["results"][0]["text/plain"]
    assert api.get(f"/v1/sessions/{sid}/files/{name}").content == b"u"
    assert any(e["path"] == name for e in files(api, sid)["files"])
