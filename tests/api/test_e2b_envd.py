"""E2B's envd on petri serve (issue 11): files, the filesystem RPCs and
Process.Start, driven with raw requests as the SDKs send them (multipart
bodies and Connect envelopes built by hand), and the hostile inputs they
never send: bad envelopes, truncated multipart, paths out of /home/user,
symlinks the sandbox's code planted pointing at the host.
"""
import base64
import gzip
import http.client
import os.path
import hashlib
import json
import secrets
import socket
import struct
import time
import urllib.parse

import pytest
import requests

from apihelp import Server

HOME = "/home/user"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    key = "e2b_" + secrets.token_hex(16)
    s = Server(tmp_path_factory.mktemp("envd"), f"[server]\napi_keys = {key}\n", light=True)
    s.key = key
    yield s
    code, err = s.stop()
    assert code == 0, err[-3000:]
    assert not s.leaked, f"processes of petri serve outlived it: {s.leaked}"
    assert not s.leaked_cgroups, f"cgroups left behind: {s.leaked_cgroups}"


class Envd:
    def __init__(self, url, sid, token):
        self.url, self.sid, self.token = url, sid, token
        self.s = requests.Session()

    def headers(self, extra=None, token=None):
        h = {"E2b-Sandbox-Id": self.sid, "E2b-Sandbox-Port": "49983",
             "X-Access-Token": self.token if token is None else token}
        h.update(extra or {})
        return h

    def request(self, method, path, headers=None, token=None, **kw):
        kw.setdefault("timeout", 120)
        return self.s.request(method, self.url + path, headers=self.headers(headers, token), **kw)

    # files
    def upload(self, parts, path=None, boundary="----petri-test-b0undary", raw=None):
        """parts: [(filename, bytes)] as undici's FormData writes them."""
        body = raw if raw is not None else multipart(parts, boundary)
        params = {"path": path} if path is not None else {}
        return self.request("POST", "/files", params=params, data=body, headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}"})

    def upload_octet(self, data, path, headers=None, gzipped=False):
        """The file as the body, as the SDK writes with useOctetStream (and
        gzip: the body compressed, Content-Encoding: gzip)."""
        h = {"Content-Type": "application/octet-stream"}
        if gzipped:
            h["Content-Encoding"] = "gzip"
        h.update(headers or {})
        params = {"path": path} if path is not None else {}
        return self.request("POST", "/files", params=params, data=data, headers=h)

    def upload_with(self, parts, headers, path=None, boundary="----petri-test-b0undary"):
        """A multipart upload with headers of its own (X-Metadata-...)."""
        params = {"path": path} if path is not None else {}
        return self.request("POST", "/files", params=params, data=multipart(parts, boundary),
                            headers={"Content-Type": f"multipart/form-data; boundary={boundary}",
                                     **headers})

    def raw_upload(self, path, header_lines, body=b"x"):
        """An octet-stream upload sent byte for byte (header_lines: bytes,
        each "Name: value"), for what no HTTP client library sends: the
        status and the body."""
        u = urllib.parse.urlsplit(self.url)
        head = (f"POST /files?path={urllib.parse.quote(path)} HTTP/1.1\r\n"
                f"Host: {u.netloc}\r\n").encode()
        for k, v in self.headers({"Content-Type": "application/octet-stream"}).items():
            head += f"{k}: {v}\r\n".encode()
        for line in header_lines:
            head += line + b"\r\n"
        head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        with socket.create_connection((u.hostname, u.port), timeout=60) as c:
            c.sendall(head + body)
            got = b""
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                got += chunk
        status = int(got.split(b" ", 2)[1])
        return status, got.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in got else b""

    def download(self, path):
        return self.request("GET", "/files", params={"path": path})

    # Connect
    def rpc(self, method, body, service="filesystem.Filesystem"):
        return self.request("POST", f"/{service}/{method}", data=json.dumps(body), headers={
            "Content-Type": "application/json", "Connect-Protocol-Version": "1"})

    def start_raw(self, body, timeout_ms=None, stream=False):
        h = {"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
        if timeout_ms is not None:
            h["Connect-Timeout-Ms"] = str(timeout_ms)
        return self.request("POST", "/process.Process/Start", data=body, headers=h,
                            stream=stream)

    def start(self, cmd, envs=None, cwd=None, timeout_ms=60000, args=None, raw_cmd=None):
        proc = {"cmd": raw_cmd or "/bin/bash",
                "args": args if args is not None else ["-l", "-c", cmd]}
        if envs is not None:
            proc["envs"] = envs
        if cwd is not None:
            proc["cwd"] = cwd
        r = self.start_raw(envelope(0, {"process": proc, "stdin": False}), timeout_ms)
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"].startswith("application/connect+json")
        return envelopes(r.content)

    def run(self, cmd, **kw):
        """stdout, stderr, the end event and the end-of-stream message."""
        evs = self.start(cmd, **kw)
        return summarize(evs)


def multipart(parts, boundary):
    out = b""
    for name, data in parts:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
        out += data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def envelope(flags, obj):
    data = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
    return struct.pack(">BI", flags, len(data)) + data


def envelopes(raw):
    out, pos = [], 0
    while pos < len(raw):
        assert pos + 5 <= len(raw), f"a cut envelope header at {pos}: {raw!r}"
        flags, n = struct.unpack(">BI", raw[pos:pos + 5])
        assert pos + 5 + n <= len(raw), f"a cut envelope at {pos}"
        out.append((flags, json.loads(raw[pos + 5:pos + 5 + n])))
        pos += 5 + n
    return out


def summarize(evs):
    assert evs, "no envelope"
    assert evs[-1][0] == 2, f"the last envelope is not the end of the stream: {evs[-1]}"
    trailer = evs[-1][1]
    body = [e for f, e in evs[:-1]]
    assert all(f == 0 for f, _ in evs[:-1])
    out = {"stdout": b"", "stderr": b"", "end": None, "trailer": trailer, "start": None}
    if body:
        assert "start" in body[0]["event"], f"the first event is not start: {body[0]}"
        out["start"] = body[0]["event"]["start"]
    for e in body[1:]:
        ev = e["event"]
        if "data" in ev:
            for k in ("stdout", "stderr"):
                if k in ev["data"]:
                    out[k] += base64.b64decode(ev["data"][k])
        elif "end" in ev:
            out["end"] = ev["end"]
        else:
            assert "keepalive" in ev, ev
    return out


def new_box(srv, **body):
    r = requests.post(srv.url + "/sandboxes", headers={"X-API-KEY": srv.key},
                      json={"templateID": "base", "timeout": 600, **body}, timeout=120)
    assert r.status_code == 201, r.text
    j = r.json()
    return Envd(srv.url, j["sandboxID"], j["envdAccessToken"])


def kill(srv, sid):
    r = requests.delete(f"{srv.url}/sandboxes/{sid}", headers={"X-API-KEY": srv.key}, timeout=60)
    assert r.status_code == 204, r.text


@pytest.fixture(scope="module")
def box(srv):
    return new_box(srv)


# ---- health and auth -----------------------------------------------------

def test_health_is_204_and_needs_the_token(box):
    r = box.request("GET", "/health")
    assert r.status_code == 204 and r.content == b""
    for token in ("", "0" * 64, box.token[:-1] + ("0" if box.token[-1] != "0" else "1")):
        r = box.request("GET", "/health", token=token)
        assert r.status_code == 401, r.text
        assert r.json()["code"] == 401
    r = box.request("GET", "/files", params={"path": "x"}, token="nope")
    assert r.status_code == 401
    r = requests.get(box.url + "/health", headers={"E2b-Sandbox-Id": "ses_" + "0" * 32,
                                                   "E2b-Sandbox-Port": "49983",
                                                   "X-Access-Token": box.token})
    assert r.status_code == 401


# ---- files ---------------------------------------------------------------

def test_upload_then_download_by_absolute_and_relative_path(box):
    r = box.upload([(f"{HOME}/up/deep/a.txt", b"h\xc3\xa9llo\n")], path=f"{HOME}/up/deep/a.txt")
    assert r.status_code == 200, r.text
    assert r.json() == [{"name": "a.txt", "type": "file", "path": f"{HOME}/up/deep/a.txt"}]
    assert box.download(f"{HOME}/up/deep/a.txt").content == b"h\xc3\xa9llo\n"
    assert box.download("up/deep/a.txt").content == b"h\xc3\xa9llo\n"
    r = box.upload([("rel.bin", bytes(range(256)))], path="rel.bin")
    assert r.json()[0]["path"] == f"{HOME}/rel.bin"
    assert box.download(f"{HOME}/rel.bin").content == bytes(range(256))
    r = box.upload([("empty", b"")], path="empty.txt")
    assert r.status_code == 200 and box.download("empty.txt").content == b""
    # the code sees them in its cwd
    assert box.run("cat up/deep/a.txt; pwd")["stdout"] == "héllo\n/home/user\n".encode()


def test_several_files_in_one_upload_by_their_filenames(box):
    r = box.upload([(f"{HOME}/multi/a.txt", b"A"), ("multi/b.txt", b"B" * 100000)])
    assert r.status_code == 200, r.text
    assert [e["path"] for e in r.json()] == [f"{HOME}/multi/a.txt", f"{HOME}/multi/b.txt"]
    assert box.download("multi/b.txt").content == b"B" * 100000


def test_download_errors_are_json_the_sdk_reads(box):
    r = box.download(f"{HOME}/nope.txt")
    assert r.status_code == 404 and r.json()["code"] == 404 and "nope.txt" in r.json()["message"]
    box.upload([("d/f", b"x")], path="d/f")
    r = box.download(f"{HOME}/d")
    assert r.status_code == 400 and r.json()["code"] == 400
    r = box.request("GET", "/files")
    assert r.status_code == 400


@pytest.mark.parametrize("path", ["/etc/passwd", "/etc/shadow", "/home/user2/x", "/home",
                                  f"{HOME}/../../etc/shadow", "../etc/passwd", "a/../../x",
                                  "/proc/self/environ", "/proc/1/environ", "a\x01b", "/",
                                  "/usr/bin/python3", "/dev/null", "/tmp/../etc/passwd",
                                  "/tmpx/a", "/dev/shmx"])
def test_paths_out_of_home_are_refused(box, path):
    r = box.download(path)
    assert r.status_code in (400, 403), r.text
    assert r.json()["code"] == r.status_code
    if path.startswith("/") and ".." not in path:
        assert r.status_code == 403
    r = box.upload([(path, b"evil")], path=path)
    assert r.status_code in (400, 403), r.text
    r = box.rpc("Stat", {"path": path})
    assert r.status_code in (400, 403)
    assert r.json()["code"] in ("invalid_argument", "permission_denied")


def test_symlinks_the_code_planted_stay_inside_the_workspace(box, srv, tmp_path):
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    (host_dir / "secret.txt").write_text("host secret")
    res = box.run(f"ln -sfn {host_dir} hostlink; ln -sfn {host_dir}/secret.txt filelink; "
                  f"ln -sfn {srv.config_path} cfglink; ln -sfn ../../.. uplink; echo ok")
    assert res["stdout"] == b"ok\n", res
    for p in ("hostlink/secret.txt", "filelink", "cfglink", f"uplink{host_dir}/secret.txt"):
        r = box.download(p)
        assert r.status_code == 404, (p, r.status_code, r.text)
        assert b"host secret" not in r.content and srv.key.encode() not in r.content
    # writes through them land inside /work, or nowhere
    r = box.upload([("x", b"planted")], path="hostlink/planted.txt")
    assert not (host_dir / "planted.txt").exists()
    r = box.rpc("MakeDir", {"path": f"{HOME}/hostlink/newdir"})
    assert not (host_dir / "newdir").exists()
    r = box.rpc("Move", {"source": f"{HOME}/rel.bin", "destination": f"{HOME}/hostlink/moved"})
    assert not (host_dir / "moved").exists()
    box.upload([("rel.bin", bytes(range(256)))], path="rel.bin")
    # a listing shows the links and never what is behind them
    r = box.rpc("ListDir", {"path": HOME, "depth": 3})
    assert r.status_code == 200
    names = {e["path"]: e for e in r.json()["entries"]}
    assert names[f"{HOME}/hostlink"]["type"] == "FILE_TYPE_SYMLINK"
    assert names[f"{HOME}/hostlink"]["symlinkTarget"] == str(host_dir)
    assert not any("secret" in p for p in names)
    # removing a link removes the link
    for p in ("hostlink", "filelink", "cfglink", "uplink"):
        r = box.rpc("Remove", {"path": f"{HOME}/{p}"})
        assert r.status_code == 200, r.text
    assert (host_dir / "secret.txt").read_text() == "host secret"
    assert srv.config_path.exists()


def test_the_sandboxs_tmp_and_dev_shm_are_reached_as_its_user_sees_them(srv, box, tmp_path):
    unique = secrets.token_hex(8)
    r = box.upload([("a.txt", b"in tmp")], path=f"/tmp/{unique}/deep/a.txt")
    assert r.status_code == 200, r.text
    assert r.json() == [{"name": "a.txt", "type": "file", "path": f"/tmp/{unique}/deep/a.txt"}]
    assert not os.path.exists(f"/tmp/{unique}"), "the host's /tmp was written"
    res = box.run(f"cat /tmp/{unique}/deep/a.txt; mkdir -p /tmp/{unique}/made; "
                  f"echo by code > /tmp/{unique}/made/z; echo shm > /dev/shm/s; "
                  f"ln -sfn {tmp_path} /tmp/{unique}/hostlink; ln -sfn /etc/passwd /tmp/{unique}/pw")
    assert res["stdout"] == b"in tmp", res
    assert box.download(f"/tmp/{unique}/made/z").content == b"by code\n"
    assert box.download("/dev/shm/s").content == b"shm\n"
    r = box.rpc("Stat", {"path": f"/tmp/{unique}/made/z"})
    e = r.json()["entry"]
    assert e["path"] == f"/tmp/{unique}/made/z" and e["name"] == "z" and e["owner"] == "user"
    r = box.rpc("Stat", {"path": "/tmp"})
    assert r.status_code == 200 and r.json()["entry"]["path"] == "/tmp", r.text
    r = box.rpc("ListDir", {"path": f"/tmp/{unique}/", "depth": 2})
    assert [e["path"] for e in r.json()["entries"]] == [
        f"/tmp/{unique}/deep", f"/tmp/{unique}/deep/a.txt", f"/tmp/{unique}/hostlink",
        f"/tmp/{unique}/made", f"/tmp/{unique}/made/z", f"/tmp/{unique}/pw"]
    # links the code planted: shown, never followed out of the sandbox
    entries = {e["name"]: e for e in r.json()["entries"]}
    assert entries["hostlink"]["symlinkTarget"] == str(tmp_path)
    (tmp_path / "secret.txt").write_text("host secret")
    for p in (f"/tmp/{unique}/hostlink/secret.txt", f"/tmp/{unique}/pw"):
        r = box.download(p)
        assert r.status_code == 404 and b"host secret" not in r.content
        assert b"root:" not in r.content
    box.upload([("x", b"planted")], path=f"/tmp/{unique}/hostlink/planted.txt")
    assert not (tmp_path / "planted.txt").exists()
    # make, move within /tmp, but not across filesystems, remove
    r = box.rpc("MakeDir", {"path": f"/tmp/{unique}/new"})
    assert r.status_code == 200 and r.json()["entry"]["path"] == f"/tmp/{unique}/new"
    r = box.rpc("Move", {"source": f"/tmp/{unique}/made/z", "destination": f"/tmp/{unique}/new/z"})
    assert r.status_code == 200 and r.json()["entry"]["path"] == f"/tmp/{unique}/new/z", r.text
    r = box.rpc("Move", {"source": f"/tmp/{unique}/new/z", "destination": f"{HOME}/z"})
    assert r.status_code == 400 and "filesystem" in r.json()["message"], r.text
    r = box.rpc("Remove", {"path": f"/tmp/{unique}"})
    assert r.status_code == 200
    assert box.run(f"ls /tmp/{unique} 2>&1; echo $?")["stdout"].endswith(b"2\n")
    # another sandbox has a /tmp of its own
    other = new_box(srv)
    box.upload([("s", b"mine")], path="/tmp/only-here")
    assert other.download("/tmp/only-here").status_code == 404
    assert box.download("/tmp/only-here").content == b"mine"
    kill(srv, other.sid)


# ---- hostile multipart -----------------------------------------------------

def not_there(box, path):
    return box.rpc("Stat", {"path": path}).status_code == 404


@pytest.mark.parametrize("body", [
    b"",
    b"no delimiter",
    b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"t1.txt\"\r\n\r\ncut",
    b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"t2.txt\"\r\n\r\nx\r\n--B",
    b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"t3.txt\"",
    b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"t4.txt\r\n\r\nx\r\n--B--",
    b"--B\r\nX-Long: " + b"a" * 20000 + b"\r\n\r\nx\r\n--B--",
    b"--B\r\n" + b"".join(b"Content-Disposition: form-data; name=\"file\"; filename=\"t5.txt\"\r\n"
                          for _ in range(300)) + b"\r\nx\r\n--B--",
])
def test_malformed_multipart_is_refused_and_writes_nothing(box, body):
    r = box.upload([], path=None, boundary="B", raw=body)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == 400 and r.json()["message"]
    for i in range(1, 6):
        assert not_there(box, f"t{i}.txt")


def test_too_many_parts_and_a_bad_path_late_write_nothing(box):
    parts = [(f"many/{i}.txt", b"x") for i in range(101)]
    r = box.upload(parts)
    assert r.status_code == 400 and "100" in r.json()["message"], r.text
    assert not_there(box, f"{HOME}/many")
    r = box.upload([("late/ok.txt", b"x"), ("/etc/late.txt", b"x")])
    assert r.status_code == 403, r.text
    assert not_there(box, f"{HOME}/late")


def test_upload_refusals(box):
    r = box.request("POST", "/files", params={"path": "o.txt"}, data=b"raw",
                    headers={"Content-Type": "text/plain"})
    assert r.status_code == 400 and "multipart" in r.json()["message"]
    assert "octet-stream" in r.json()["message"]
    r = box.request("POST", "/files", params={"path": "o.txt"}, data=b"--x--",
                    headers={"Content-Type": "multipart/form-data"})
    assert r.status_code == 400
    # an octet-stream upload has no filename: the query names the file
    r = box.upload_octet(b"raw", None)
    assert r.status_code == 400 and "'path'" in r.json()["message"], r.text
    for bad in ("/etc/o.txt", "../o.txt"):
        r = box.upload_octet(b"raw", bad)
        assert r.status_code in (400, 403), r.text
    assert not_there(box, "o.txt")
    # no filename and no path
    body = b"--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n--B--\r\n"
    r = box.upload([], boundary="B", raw=body)
    assert r.status_code == 400 and "filename" in r.json()["message"]
    # no part named file
    body = b"--B\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--B--\r\n"
    r = box.upload([], boundary="B", raw=body, path="x.txt")
    assert r.status_code == 400 and "'file'" in r.json()["message"]
    # a directory is not overwritten
    box.rpc("MakeDir", {"path": "adir"})
    r = box.upload([("adir", b"x")], path="adir")
    assert r.status_code == 400, r.text


# ---- octet-stream uploads, gzip and metadata (envd 0.5.7 and 0.6.2) ---------

def meta_of(box, path):
    r = box.rpc("Stat", {"path": path})
    assert r.status_code == 200, r.text
    return r.json()["entry"].get("metadata")


def test_an_octet_stream_upload_is_the_file_as_the_body(box):
    data = bytes(range(256)) * 300
    r = box.upload_octet(data, f"{HOME}/octet/deep/o.bin")
    assert r.status_code == 200, r.text
    assert r.json() == [{"name": "o.bin", "type": "file", "path": f"{HOME}/octet/deep/o.bin"}]
    assert box.download("octet/deep/o.bin").content == data
    # relative to /home/user, in /tmp, empty, replacing what was there
    r = box.upload_octet(b"rel", "octet/rel.txt")
    assert r.json()[0]["path"] == f"{HOME}/octet/rel.txt"
    r = box.upload_octet(b"", "/tmp/octet-empty")
    assert r.status_code == 200 and box.download("/tmp/octet-empty").content == b""
    r = box.upload_octet(b"second", "octet/rel.txt")
    assert r.status_code == 200 and box.download("octet/rel.txt").content == b"second"
    assert box.run("cat octet/rel.txt")["stdout"] == b"second"
    # a directory is not overwritten
    r = box.upload_octet(b"x", "octet/deep")
    assert r.status_code == 400, r.text


def test_metadata_is_set_by_either_upload_and_read_back_by_stat_list_and_move(box):
    meta = {"X-Metadata-Author": "mish", "x-metadata-purpose": "up load!"}
    want = {"author": "mish", "purpose": "up load!"}     # keys lowercased, as envd does
    r = box.upload_with([("m/multi.txt", b"m")], meta, path="m/multi.txt")
    assert r.status_code == 200, r.text
    assert r.json() == [{"name": "multi.txt", "type": "file", "path": f"{HOME}/m/multi.txt",
                         "metadata": want}]
    assert meta_of(box, "m/multi.txt") == want
    r = box.upload_octet(b"o", "m/octet.txt", headers=meta)
    assert r.status_code == 200 and r.json()[0]["metadata"] == want, r.text
    assert meta_of(box, f"{HOME}/m/octet.txt") == want
    # every file of one upload gets it
    r = box.upload_with([("m/a.txt", b"a"), ("m/b.txt", b"b")], {"X-Metadata-source": "suite"})
    assert [e.get("metadata") for e in r.json()] == [{"source": "suite"}] * 2
    for f in ("m/a.txt", "m/b.txt"):
        assert meta_of(box, f) == {"source": "suite"}
    # in /tmp as well, and an empty value is a value
    r = box.upload_octet(b"t", "/tmp/m/t.txt", headers={"X-Metadata-empty": ""})
    assert r.status_code == 200 and r.json()[0]["metadata"] == {"empty": ""}, r.text
    assert meta_of(box, "/tmp/m/t.txt") == {"empty": ""}
    # ListDir gives each entry's; one without none at all (proto3 leaves it out)
    box.upload_octet(b"n", "m/none.txt")
    r = box.rpc("ListDir", {"path": "m"})
    got = {e["name"]: e.get("metadata") for e in r.json()["entries"]}
    assert got == {"a.txt": {"source": "suite"}, "b.txt": {"source": "suite"},
                   "multi.txt": want, "none.txt": None, "octet.txt": want}, got
    assert "metadata" not in box.upload_octet(b"n", "m/none.txt").json()[0]
    # Move answers the entry where it went, its metadata with it
    r = box.rpc("Move", {"source": "m/octet.txt", "destination": "m/moved/octet.txt"})
    assert r.status_code == 200 and r.json()["entry"]["metadata"] == want, r.text
    # the code sees them as attributes
    res = box.run("python3 -c \"import os; print(sorted(os.listxattr('m/moved/octet.txt')))\"")
    assert res["stdout"] == b"['user.e2b.author', 'user.e2b.purpose']\n", res


def test_an_upload_replaces_the_metadata_whole(box):
    box.upload_octet(b"first", "over.txt", headers={"X-Metadata-author": "mish",
                                                    "X-Metadata-stale": "1"})
    assert meta_of(box, "over.txt") == {"author": "mish", "stale": "1"}
    r = box.upload_octet(b"second", "over.txt", headers={"X-Metadata-author": "other"})
    assert r.json()[0]["metadata"] == {"author": "other"}
    assert meta_of(box, "over.txt") == {"author": "other"}
    r = box.upload([("over.txt", b"third")], path="over.txt")
    assert "metadata" not in r.json()[0]
    assert meta_of(box, "over.txt") is None
    assert box.download("over.txt").content == b"third"


def test_attributes_the_sandboxs_code_sets_are_its_metadata(box):
    code = ("import os\n"
            "open('own.txt', 'w').write('x')\n"
            "os.setxattr('own.txt', 'user.e2b.author', b'mish')\n"
            "os.setxattr('own.txt', 'user.other', b'not e2b')\n"
            "os.makedirs('owndir', exist_ok=True)\n"
            "os.setxattr('owndir', 'user.e2b.kind', b'dir')\n"
            "os.symlink('own.txt', 'ownlink')\n"
            "open('/tmp/own.txt', 'w').write('x')\n"
            "os.setxattr('/tmp/own.txt', 'user.e2b.where', b'tmp')\n"
            "open('many.txt', 'w').write('x')\n"
            "for i in range(100):\n"
            "    os.setxattr('many.txt', f'user.e2b.k{i:03}', b'v' * 100)\n"
            "open('big.txt', 'w').write('x')\n"
            "for i in range(10):\n"
            "    os.setxattr('big.txt', f'user.e2b.b{i}', b'v' * 1000)\n"
            "open('odd.txt', 'w').write('x')\n"
            "os.setxattr('odd.txt', 'user.e2b.caf\\u00e9', b'\\xff\\x00\\x01')\n"
            "print('ok')\n")
    box.upload_octet(code.encode(), "setx.py")
    res = box.run("python3 setx.py")
    assert res["stdout"] == b"ok\n", res
    assert meta_of(box, "own.txt") == {"author": "mish"}        # user.other is not metadata
    assert meta_of(box, "owndir") == {"kind": "dir"}
    assert meta_of(box, "/tmp/own.txt") == {"where": "tmp"}
    # a link is described, not followed: its target's metadata is not its own
    assert meta_of(box, "ownlink") is None
    # bounded however many the code set: 32 keys, 4096 bytes as E2B counts them
    many = meta_of(box, "many.txt")
    assert 0 < len(many) <= 32
    assert sum(len("user.e2b.") + len(k) + len(v) for k, v in many.items()) <= 4096
    assert all(v == "v" * 100 for v in many.values())
    # 4 of 1000 bytes fit in 4096 with their keys (9 + 2 + 1000 each), not 5;
    # which 4: the first the filesystem lists
    big = meta_of(box, "big.txt")
    assert len(big) == 4 and set(big) < {f"b{i}" for i in range(10)}, big
    assert set(big.values()) == {"v" * 1000}
    # any bytes the code set come back as valid JSON
    odd = meta_of(box, "odd.txt")
    assert list(odd) == ["caf\u00e9"] and len(odd["caf\u00e9"]) == 3, odd


@pytest.mark.parametrize("headers", [
    {"X-Metadata-": "empty key"},
    {"X-Metadata-a@b": "x"},                  # not an HTTP token
    {"X-Metadata-a/b": "x"},
    {"X-Metadata-good": "caf\u00e9".encode()},  # not US-ASCII
    {"X-Metadata-good": b"bell\x07"},          # not printable
    {"X-Metadata-good": b"tab\tinside"},
    {"X-Metadata-" + "k" * 247: "x"},         # past the VFS's name limit, less the prefix
    {f"X-Metadata-k{i}": "v" for i in range(33)},
    {"X-Metadata-big": "v" * 4090},           # 9 + 3 + 4090 > 4096
])
def test_bad_metadata_is_refused_and_writes_nothing(box, headers):
    name = "badmeta-" + secrets.token_hex(4)
    r = box.upload_with([(f"{name}/m.txt", b"x")], headers, path=f"{name}/m.txt")
    assert r.status_code == 400, r.text
    assert r.json()["code"] == 400 and r.json()["message"]
    r = box.upload_octet(b"x", f"{name}/o.txt", headers=headers)
    assert r.status_code == 400, r.text
    assert not_there(box, f"{HOME}/{name}")


def test_metadata_at_its_bounds_is_taken(box):
    headers = {f"X-Metadata-k{i:02}": "v" for i in range(32)}
    r = box.upload_octet(b"x", "bounds/32.txt", headers=headers)
    assert r.status_code == 200 and len(r.json()[0]["metadata"]) == 32, r.text
    assert len(meta_of(box, "bounds/32.txt")) == 32
    longest = "k" * 246
    r = box.upload_octet(b"x", "bounds/key.txt", headers={"X-Metadata-" + longest: "v"})
    assert r.status_code == 200 and meta_of(box, "bounds/key.txt") == {longest: "v"}, r.text
    value = "v" * (4096 - 9 - 3)            # exactly 4096 as E2B counts it
    r = box.upload_octet(b"x", "bounds/big.txt", headers={"X-Metadata-big": value})
    assert r.status_code == 200 and meta_of(box, "bounds/big.txt") == {"big": value}, r.text
    # the same key twice (any case): the first counts
    c = http.client.HTTPConnection(urllib.parse.urlsplit(box.url).netloc, timeout=60)
    c.putrequest("POST", "/files?path=bounds/twice.txt")
    for k, v in box.headers({"Content-Type": "application/octet-stream"}).items():
        c.putheader(k, v)
    c.putheader("X-Metadata-Dup", "first")
    c.putheader("x-metadata-dup", "second")
    c.putheader("Content-Length", "1")
    c.endheaders(b"x")
    resp = c.getresponse()
    assert resp.status == 200 and json.loads(resp.read())[0]["metadata"] == {"dup": "first"}
    c.close()


def test_header_names_no_client_library_sends_are_refused(box):
    for line in (b"X-Metadata-bad key: value", b"X-Metadata-k\x80: value"):
        status, body = box.raw_upload("rawmeta/a.txt", [line])
        assert status == 400, (line, status, body)
    assert not_there(box, f"{HOME}/rawmeta")


def test_a_gzip_upload_is_inflated(box):
    data = b"This is a test file with gzip encoding.\n" * 1000
    r = box.upload_octet(gzip.compress(data), "gz/a.txt", gzipped=True,
                         headers={"X-Metadata-enc": "gzip"})
    assert r.status_code == 200, r.text
    assert r.json() == [{"name": "a.txt", "type": "file", "path": f"{HOME}/gz/a.txt",
                         "metadata": {"enc": "gzip"}}]
    assert box.download("gz/a.txt").content == data
    # several members, as gzip -c a b makes; an empty file
    r = box.upload_octet(gzip.compress(b"one ") + gzip.compress(b"two"), "gz/two.txt",
                         gzipped=True)
    assert r.status_code == 200 and box.download("gz/two.txt").content == b"one two"
    r = box.upload_octet(gzip.compress(b""), "gz/empty.txt", gzipped=True)
    assert r.status_code == 200 and box.download("gz/empty.txt").content == b""
    # incompressible data: the body is a little larger than the file
    noise = secrets.token_bytes(1 << 20)
    r = box.upload_octet(gzip.compress(noise), "gz/noise.bin", gzipped=True)
    assert r.status_code == 200 and box.download("gz/noise.bin").content == noise


def test_a_bad_gzip_upload_is_refused_and_writes_nothing(box):
    good = gzip.compress(b"hello" * 1000)
    for body in (b"", b"not gzip at all", good[:len(good) // 2], good[:-4],
                 good + b"trailing", good[:20] + bytes(64) + good[84:]):
        r = box.upload_octet(body, "gzbad/deep/x.txt", gzipped=True)
        assert r.status_code == 400, (body[:30], r.text)
        assert "gzip" in r.json()["message"]
    assert not_there(box, f"{HOME}/gzbad")
    # gzip is an octet-stream upload's; other encodings are not taken
    r = box.request("POST", "/files", params={"path": "gzbad/m.txt"},
                    data=multipart([("gzbad/m.txt", b"x")], "B"),
                    headers={"Content-Type": "multipart/form-data; boundary=B",
                             "Content-Encoding": "gzip"})
    assert r.status_code == 415, r.text
    r = box.upload_octet(b"x", "gzbad/br.txt", headers={"Content-Encoding": "br"})
    assert r.status_code == 415 and "br" in r.json()["message"], r.text
    r = box.upload_octet(b"plain", "gzbad/id.txt", headers={"Content-Encoding": "identity"})
    assert r.status_code == 200 and box.download("gzbad/id.txt").content == b"plain"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A server whose max_file_mb is 1."""
    key = "e2b_" + secrets.token_hex(16)
    s = Server(tmp_path_factory.mktemp("envd-small"),
               f"[server]\napi_keys = {key}\nmax_file_mb = 1\n", light=True)
    s.key = key
    yield s
    code, err = s.stop()
    assert code == 0, err[-3000:]
    assert not s.leaked and not s.leaked_cgroups


def test_uploads_past_max_file_mb_are_refused_and_write_nothing(small):
    box = new_box(small)
    mib = 1 << 20
    r = box.upload_octet(b"x" * mib, "lim/exact.bin")
    assert r.status_code == 200 and len(box.download("lim/exact.bin").content) == mib
    r = box.upload_octet(b"x" * (mib + 1), "lim/over/o.bin")
    assert r.status_code == 413 and r.json()["code"] == 413, r.text
    assert "1 MiB" in r.json()["message"]
    # a gzip body inflating past it: refused before a byte is written
    for body in (gzip.compress(bytes(mib + 1)), gzip.compress(bytes(mib)) * 2,
                 gzip.compress(bytes(64 * mib))):
        r = box.upload_octet(body, "lim/over/bomb.bin", gzipped=True)
        assert r.status_code == 413 and "inflates" in r.json()["message"], r.text
    r = box.upload_octet(gzip.compress(bytes(mib)), "lim/z.bin", gzipped=True)
    assert r.status_code == 200 and box.download("lim/z.bin").content == bytes(mib)
    r = box.upload([("m.bin", b"x" * (mib + (64 << 10)))], path="lim/over/m.bin")
    assert r.status_code == 413, r.text
    assert not_there(box, f"{HOME}/lim/over")
    res = box.run("ls -A lim")
    assert res["stdout"] == b"exact.bin\nz.bin\n", res      # no temporary file left either
    kill(small, box.sid)


def test_metadata_keeps_a_listing_of_ten_thousand_cheap(box):
    res = box.run("python3 -c \"import os\n"
                  "os.makedirs('tenk', exist_ok=True)\n"
                  "for i in range(10000):\n"
                  "    p = f'tenk/f{i:05}'\n"
                  "    open(p, 'w').close()\n"
                  "    os.setxattr(p, 'user.e2b.n', str(i).encode())\n"
                  "print('ok')\"", timeout_ms=120000)
    assert res["stdout"] == b"ok\n", res
    t = time.monotonic()
    r = box.rpc("ListDir", {"path": "tenk"})
    took = time.monotonic() - t
    assert r.status_code == 200, r.text[:500]
    entries = r.json()["entries"]
    assert len(entries) == 10000
    assert all(e["metadata"] == {"n": str(int(e["name"][1:]))} for e in entries)
    assert took < 10, took
    box.rpc("Remove", {"path": "tenk"})


def test_a_listing_carries_at_most_4_mib_of_metadata(box):
    # 1100 files of 4096 bytes each, as E2B counts it: past 4 MiB in all
    res = box.run("python3 -c \"import os\n"
                  "os.makedirs('fat/d', exist_ok=True)\n"
                  "for i in range(1100):\n"
                  "    p = f'fat/d/f{i:04}'\n"
                  "    open(p, 'w').close()\n"
                  "    os.setxattr(p, 'user.e2b.v', b'\\x01' * (4096 - 10))\n"
                  "print('ok')\"", timeout_ms=120000)
    assert res["stdout"] == b"ok\n", res
    r = box.rpc("ListDir", {"path": "fat", "depth": 2})
    assert r.status_code == 400 and r.json()["code"] == "failed_precondition", r.text[:300]
    assert "metadata" in r.json()["message"]
    box.run("cd fat/d && rm f10*")          # 1000 left: within it
    r = box.rpc("ListDir", {"path": "fat", "depth": 2})
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["entries"]) == 1001
    assert r.json()["entries"][1]["metadata"] == {"v": "\x01" * 4086}
    box.rpc("Remove", {"path": "fat"})


# ---- the filesystem RPCs -----------------------------------------------------

def test_stat_list_makedir_move_remove(box):
    box.upload([("tree/f.txt", b"12345")], path=f"{HOME}/tree/f.txt")
    r = box.rpc("Stat", {"path": f"{HOME}/tree/f.txt"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    e = r.json()["entry"]
    assert e["name"] == "f.txt" and e["type"] == "FILE_TYPE_FILE"
    assert e["path"] == f"{HOME}/tree/f.txt" and e["size"] == "5"
    assert e["permissions"] == "-rw-r--r--" and e["mode"] == 0o644
    assert e["owner"] == "user" and e["group"] == "user"
    assert e["modifiedTime"].endswith("Z") and e["modifiedTime"][:2] == "20"
    r = box.rpc("MakeDir", {"path": f"{HOME}/tree/sub/deeper"})
    assert r.status_code == 200 and r.json()["entry"]["type"] == "FILE_TYPE_DIRECTORY"
    assert r.json()["entry"]["permissions"] == "drwxr-xr-x"
    r = box.rpc("MakeDir", {"path": f"{HOME}/tree/sub/deeper"})
    assert r.status_code == 409 and r.json()["code"] == "already_exists"
    r = box.rpc("ListDir", {"path": f"{HOME}/tree"})
    assert [e["name"] for e in r.json()["entries"]] == ["f.txt", "sub"]
    r = box.rpc("ListDir", {"path": f"{HOME}/tree", "depth": 3})
    assert [e["path"] for e in r.json()["entries"]] == [
        f"{HOME}/tree/f.txt", f"{HOME}/tree/sub", f"{HOME}/tree/sub/deeper"]
    r = box.rpc("Move", {"source": f"{HOME}/tree/f.txt", "destination": "tree/sub/g.txt"})
    assert r.status_code == 200 and r.json()["entry"]["path"] == f"{HOME}/tree/sub/g.txt"
    assert box.download("tree/sub/g.txt").content == b"12345"
    r = box.rpc("Remove", {"path": f"{HOME}/tree"})
    assert r.status_code == 200 and r.json() == {}
    assert box.rpc("Stat", {"path": f"{HOME}/tree"}).json()["code"] == "not_found"
    for gone in (f"{HOME}/tree", f"{HOME}/tree/sub/g.txt"):   # envd: removed already
        r = box.rpc("Remove", {"path": gone})
        assert r.status_code == 200 and r.json() == {}, r.text
    r = box.rpc("Stat", {"path": HOME})
    assert r.json()["entry"]["path"] == HOME and r.json()["entry"]["type"] == "FILE_TYPE_DIRECTORY"


def test_a_links_target_is_absolute_from_the_links_directory(box):
    res = box.run("mkdir -p links && cd links && ln -sf t rel && ln -sf ../links/./t up && "
                  "ln -sf ../../.. high && ln -sf /etc/hostname abs")
    assert res["end"]["exitCode"] == 0, res
    for name, target in [("rel", f"{HOME}/links/t"), ("up", f"{HOME}/links/t"),
                         ("high", "/"), ("abs", "/etc/hostname")]:
        e = box.rpc("Stat", {"path": f"links/{name}"}).json()["entry"]
        assert e["type"] == "FILE_TYPE_SYMLINK", e
        assert e["symlinkTarget"] == target, (name, e)


def test_rpc_errors_are_connect_json(box):
    for method, body, status, code in [
        ("Stat", {"path": "missing"}, 404, "not_found"),
        ("ListDir", {"path": "missing"}, 404, "not_found"),
        ("Move", {"source": "missing", "destination": "x"}, 404, "not_found"),
        ("Remove", {"path": HOME}, 400, "invalid_argument"),
        ("ListDir", {"path": HOME, "depth": 1000}, 400, "invalid_argument"),
        ("ListDir", {"path": HOME, "depth": "x"}, 400, "invalid_argument"),
        ("Stat", {"path": 5}, 400, "invalid_argument"),
        ("MakeDir", {"path": "/etc/x"}, 403, "permission_denied"),
        ("CreateWatcher", {"path": HOME}, 501, "unimplemented"),
        ("Nope", {}, 404, "unimplemented"),
    ]:
        r = box.rpc(method, body)
        assert r.status_code == status, (method, body, r.text)
        assert r.headers["Content-Type"].startswith("application/json")
        assert r.json()["code"] == code and r.json()["message"], (method, r.text)
    for method, body, status, code in [
        ("SendSignal", {}, 400, "invalid_argument"),
        ("SendSignal", {"process": {"pid": 1}, "signal": "SIGNAL_SIGSTOP"}, 400, "invalid_argument"),
        ("SendSignal", {"process": {"pid": 1}, "signal": "SIGNAL_SIGKILL"}, 404, "not_found"),
        ("SendSignal", {"process": {"tag": "none"}, "signal": 15}, 404, "not_found"),
        ("SendInput", {}, 400, "invalid_argument"),
        ("SendInput", {"process": {"pid": 2}, "input": {"stdin": "!!"}}, 400, "invalid_argument"),
        ("SendInput", {"process": {"pid": 2}, "input": {"stdin": "aGk="}}, 404, "not_found"),
        ("CloseStdin", {"process": {"pid": -5}}, 404, "not_found"),
        ("CloseStdin", {"process": {"pid": "x"}}, 404, "not_found"),
        ("Update", {}, 400, "invalid_argument"),
        ("Update", {"process": {"pid": 2}, "pty": {"size": {"rows": 5, "cols": 5}}}, 404,
         "not_found"),
        ("Nope", {}, 404, "unimplemented"),
    ]:
        r = box.rpc(method, body, service="process.Process")
        assert r.status_code == status and r.json()["code"] == code, (method, body, r.text)
    r = box.rpc("List", {}, service="process.Process")
    assert r.status_code == 200 and "processes" in r.json()
    r = box.request("POST", "/filesystem.Filesystem/Stat", data=b"{not json",
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_argument"
    r = box.request("POST", "/filesystem.Filesystem/Stat", data=b"\x00\x01",
                    headers={"Content-Type": "application/proto"})
    assert r.status_code == 415
    r = box.request("GET", "/filesystem.Filesystem/Stat")
    assert r.status_code == 405


def test_a_big_tree_is_refused_whole(box):
    res = box.run("mkdir -p big && cd big && for i in $(seq 1 10001); do : > f$i; done; echo ok",
                  timeout_ms=30000)
    assert res["stdout"] == b"ok\n", res
    r = box.rpc("ListDir", {"path": "big"})
    assert r.status_code == 400 and r.json()["code"] == "failed_precondition"
    r = box.rpc("Remove", {"path": "big"})
    assert r.status_code == 200, r.text


# ---- Process.Start -------------------------------------------------------------

def test_a_command_streams_start_data_end_and_the_trailer(box):
    res = box.run("echo out; echo err >&2; exit 3")
    assert res["start"]["pid"] > 0
    assert res["stdout"] == b"out\n" and res["stderr"] == b"err\n"
    assert res["end"] == {"exitCode": 3, "exited": True, "status": "exit status 3",
                          "error": "exit status 3"}
    assert res["trailer"] == {}
    res = box.run("printf '\\xff\\x00bin'")
    assert res["stdout"] == b"\xff\x00bin"
    assert res["end"]["exitCode"] == 0 and res["end"]["exited"] and "error" not in res["end"]


def test_envs_cwd_and_quoted_commands(box):
    box.rpc("MakeDir", {"path": f"{HOME}/multi"})      # whichever test made it before
    res = box.run('echo "$GREETING"; pwd', envs={"GREETING": "hi there"}, cwd=f"{HOME}/multi")
    assert res["stdout"] == b"hi there\n/home/user/multi\n", res
    res = box.run("pwd", cwd="multi")
    assert res["stdout"] == b"/home/user/multi\n"
    # another command than bash -c: its words are quoted, never expanded
    res = box.run(None, raw_cmd="/bin/echo", args=["a  b", "$HOME", "'q'", "`id`"])
    assert res["stdout"] == b"a  b $HOME 'q' `id`\n", res
    res = box.run(None, raw_cmd="/bin/bash", args=["-c", "echo $0 $1", "zero", "one"])
    assert res["stdout"] == b"zero one\n", res
    evs = box.start("echo no", envs={"PATH": "/evil"})
    assert evs[-1][0] == 2 and evs[-1][1]["error"]["code"] == "invalid_argument"
    assert "PATH" in evs[-1][1]["error"]["message"]
    evs = box.start("pwd", cwd="/nonexistent-dir")
    assert evs[-1][0] == 2 and evs[-1][1]["error"]["code"] == "invalid_argument", evs
    assert "no such directory" in evs[-1][1]["error"]["message"]


def test_a_command_past_the_clients_deadline_is_deadline_exceeded(box):
    # envd's answer, which the SDK throws as TimeoutError; the output so far
    # came first, and the sandbox is free for the next command.
    res = box.run("echo started; sleep 60", timeout_ms=1500)
    assert res["stdout"] == b"started\n"
    assert res["end"] is None
    assert res["trailer"]["error"]["code"] == "deadline_exceeded", res["trailer"]
    assert "timeoutMs" in res["trailer"]["error"]["message"]
    assert box.run("echo free")["stdout"] == b"free\n"


def test_a_sandbox_killed_under_a_command_cuts_the_stream_then_answers_502(srv):
    victim = new_box(srv)
    r = victim.start_raw(envelope(0, {"process": {"cmd": "/bin/bash", "args": [
        "-l", "-c", "echo started; sleep 60"]}}), timeout_ms=60000, stream=True)
    assert r.status_code == 200
    raw, cut, killed = b"", False, False
    try:
        for chunk in r.iter_content(None):
            raw += chunk
            if not killed and any("data" in e["event"] for f, e in envelopes_prefix(raw) if f == 0):
                kill(srv, victim.sid)       # once the command has written
                killed = True
    except requests.exceptions.ChunkedEncodingError:
        cut = True
    finally:
        r.close()
    evs = envelopes_prefix(raw)
    assert killed and cut, f"the stream ended properly: {evs}"
    assert not any(f == 2 for f, _ in evs), f"an end of stream after the kill: {evs}"
    # The token of a sandbox that ended hears 502 (gone), a wrong one 401.
    assert victim.request("GET", "/health").status_code == 502
    assert victim.request("GET", "/files", params={"path": "x"}).status_code == 502
    assert victim.request("GET", "/health", token="x" * len(victim.token)).status_code == 401


def signed(path, operation, token, expiration=None, user=""):
    """A file URL's signature as E2B's SDKs make it (downloadUrl, uploadUrl)."""
    text = f"{path}:{operation}:{user}:{token}" + (f":{expiration}" if expiration else "")
    return "v1_" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode().rstrip("=")


def test_python_and_sudo_are_there_and_sudo_changes_no_one(box):
    res = box.run("python -c 'import sys; print(sys.version_info[0])'; sudo -u root id -u; "
                  "sudo -E -- sh -c 'echo $0'; id -u; sudo; echo rc=$?")
    out = res["stdout"].decode().split()
    assert out[0] == "3" and out[2] == "sh" and out[-1] == "rc=1", res
    assert out[1] == out[3] != "0", "sudo runs as the sandbox's own, unprivileged user"
    assert b"usage: sudo" in res["stderr"]


def test_signed_file_urls_need_no_token_and_only_open_their_file(srv, box):
    box.upload([("signed.txt", b"by signature")], path="signed.txt")
    url = srv.url + "/files"
    later = int(time.time()) + 60

    def get(**params):
        return requests.get(url, params=params, timeout=60)

    r = get(path="signed.txt", signature=signed("signed.txt", "read", box.token))
    assert r.status_code == 200 and r.content == b"by signature"
    r = get(path="signed.txt", signature=signed("signed.txt", "read", box.token, later),
            signature_expiration=later)
    assert r.status_code == 200 and r.content == b"by signature"
    past = int(time.time()) - 10
    r = get(path="signed.txt", signature=signed("signed.txt", "read", box.token, past),
            signature_expiration=past)
    assert (r.status_code, r.json()) == (401, {"code": 401, "message": "signature is already expired"})
    for params in ({"path": "other.txt", "signature": signed("signed.txt", "read", box.token)},
                   {"path": "signed.txt", "signature": signed("signed.txt", "write", box.token)},
                   {"path": "signed.txt", "signature": signed("signed.txt", "read", box.token, later),
                    "signature_expiration": later + 1},
                   {"path": "signed.txt", "signature": signed("signed.txt", "read", "tok_" + "0" * 40)},
                   {"path": "signed.txt", "signature": "v1_"},
                   {"path": "signed.txt", "signature": "x" * 5000}):
        r = get(**params)
        assert r.status_code == 401 and b"by signature" not in r.content, (params, r.text)
    # Another sandbox's signature opens that sandbox only.
    other = new_box(srv)
    try:
        r = get(path="signed.txt", signature=signed("signed.txt", "read", other.token))
        assert r.status_code == 404, r.text
    finally:
        kill(srv, other.sid)
    # Uploads: a write signature, the multipart body the SDK sends.
    body = multipart([("up.txt", b"uploaded by signature")], "----b0undary")
    r = requests.post(url, params={"path": "up.txt", "signature": signed("up.txt", "write", box.token)},
                      data=body, headers={"Content-Type": "multipart/form-data; boundary=----b0undary"},
                      timeout=60)
    assert r.status_code == 200, r.text
    assert r.json() == [{"name": "up.txt", "type": "file", "path": f"{HOME}/up.txt"}]
    assert box.download("up.txt").content == b"uploaded by signature"
    r = requests.post(url, params={"path": "up.txt", "signature": signed("up.txt", "read", box.token)},
                      data=body, headers={"Content-Type": "multipart/form-data; boundary=----b0undary"},
                      timeout=60)
    assert r.status_code == 401


def test_metrics_are_the_sandbox_as_it_is_now(srv):
    victim = new_box(srv)
    url = f"{srv.url}/sandboxes/{victim.sid}/metrics"
    key = {"X-API-KEY": srv.key}

    def sample(**params):
        r = requests.get(url, headers=key, params=params, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()

    try:
        first, = sample()
        assert set(first) == {"timestamp", "timestampUnix", "cpuUsedPct", "cpuCount", "memUsed",
                              "memTotal", "diskUsed", "diskTotal"}
        assert abs(first["timestampUnix"] - time.time()) < 60 and first["timestamp"].endswith("Z")
        assert first["cpuCount"] >= 1 and 0 <= first["cpuUsedPct"] <= 100
        assert 0 < first["memUsed"] < first["memTotal"]
        assert 0 <= first["diskUsed"] < first["diskTotal"]
        # Busy since the last sample: some CPU; a file: more disk.
        res = victim.run("head -c 4194304 /dev/urandom > big.bin; end=$((SECONDS + 1)); "
                         "while [ $SECONDS -lt $end ]; do :; done")
        assert res["end"]["exitCode"] == 0, res
        busy, = sample()
        assert busy["cpuUsedPct"] > 0, busy
        assert busy["diskUsed"] >= first["diskUsed"] + (4 << 20), (first, busy)
        now = int(time.time())
        assert sample(start=now - 60, end=now + 60) != []
        assert sample(start=now - 7200, end=now - 3600) == []
        for params in ({"start": "x"}, {"end": "1.5"}):
            assert requests.get(url, headers=key, params=params, timeout=60).status_code == 400
    finally:
        kill(srv, victim.sid)
    r = requests.get(url, headers=key, timeout=60)
    assert r.status_code == 404, r.text


def test_list_filters_by_metadata_and_state_and_pages(srv):
    tag = secrets.token_hex(8)
    older = new_box(srv, metadata={"tag": tag, "name": "a b+c%d&e=f"})
    newer = new_box(srv, metadata={"tag": tag})
    other = new_box(srv, metadata={"tag": tag + "-not"})
    key = {"X-API-KEY": srv.key}

    def ids(**params):
        r = requests.get(srv.url + "/v2/sandboxes", headers=key, params=params, timeout=60)
        assert r.status_code == 200, r.text
        return [b["sandboxID"] for b in r.json()], r.headers.get("X-Next-Token")

    # as the SDKs send it: each pair encoded, then the whole
    def meta(**pairs):
        return urllib.parse.urlencode({urllib.parse.quote(k, safe=""): urllib.parse.quote(v, safe="")
                                       for k, v in pairs.items()})

    try:
        assert ids(metadata=meta(tag=tag)) == ([newer.sid, older.sid], None)
        assert ids(metadata=meta(tag=tag, name="a b+c%d&e=f")) == ([older.sid], None)
        assert ids(metadata=meta(tag=tag), state="running") == ([newer.sid, older.sid], None)
        assert ids(metadata=meta(tag=tag), state=["paused", "running"])[0] == [newer.sid, older.sid]
        assert ids(metadata=meta(tag=tag), state="paused") == ([], None)
        first, token = ids(metadata=meta(tag=tag), limit=1)
        assert first == [newer.sid] and token
        assert ids(metadata=meta(tag=tag), limit=1, nextToken=token) == ([older.sid], None)
        all_ids, _ = ids()
        assert {older.sid, newer.sid, other.sid} <= set(all_ids)
        for params in ({"state": "stopped"}, {"limit": "0"}, {"limit": "x"},
                       {"nextToken": "nope"}, {"nextToken": "1." + "x" * 200}):
            r = requests.get(srv.url + "/v2/sandboxes", headers=key, params=params, timeout=60)
            assert r.status_code == 400, (params, r.text)
    finally:
        for b in (older, newer, other):
            kill(srv, b.sid)


@pytest.mark.parametrize("body,code", [
    (b"", "invalid_argument"),
    (b"\x00\x00\x00", "invalid_argument"),
    (struct.pack(">BI", 0, 100) + b"{}", "invalid_argument"),
    (struct.pack(">BI", 0, 1) + b"{}", "invalid_argument"),
    (struct.pack(">BI", 0, 0xffffffff) + b"{}", "invalid_argument"),
    (envelope(0, {}) + envelope(0, {}), "invalid_argument"),
    (envelope(1, {"process": {"cmd": "true"}}), "unimplemented"),
    (envelope(2, {"process": {"cmd": "true"}}), "invalid_argument"),
    (envelope(0, b"{not json"), "invalid_argument"),
    (envelope(0, {"process": {}}), "invalid_argument"),
    (envelope(0, {"process": {"cmd": "true", "args": "x"}}), "invalid_argument"),
    (envelope(0, {"process": {"cmd": "true", "args": [1]}}), "invalid_argument"),
    (envelope(0, {"process": {"cmd": "true", "args": ["x"] * 300}}), "invalid_argument"),
    (envelope(0, {"process": {"cmd": "true", "cwd": "a\nb"}}), "invalid_argument"),
    (envelope(0, {"process": {"cmd": "true"}, "pty": {"size": {"rows": -1, "cols": 1}}}),
     "invalid_argument"),
    (envelope(0, {"process": {"cmd": "true"}, "pty": {"size": {"rows": 1, "cols": 5000}}}),
     "invalid_argument"),
    (envelope(0, {"process": {"cmd": "true"}, "pty": "yes"}), "invalid_argument"),
    (envelope(0, b"[" * 100 + b"]" * 100), "invalid_argument"),
])
def test_bad_start_requests_end_the_stream_with_an_error(box, body, code):
    r = box.start_raw(body)
    assert r.status_code == 200, r.text
    evs = envelopes(r.content)
    assert len(evs) == 1 and evs[0][0] == 2, evs
    assert evs[0][1]["error"]["code"] == code, evs
    assert evs[0][1]["error"]["message"]


def test_bad_timeout_header(box):
    r = box.start_raw(envelope(0, {"process": {"cmd": "true"}}), timeout_ms="12345678901")
    assert envelopes(r.content)[0][1]["error"]["code"] == "invalid_argument"


def started(box, cmd, stdin=False, tag=None, timeout_ms=None):
    """Start cmd, read its stream up to its start event, and hang up: the
    process goes on (E2B's background command); its pid."""
    body = {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", cmd]}, "stdin": stdin}
    if tag:
        body["tag"] = tag
    r = box.start_raw(envelope(0, body), timeout_ms=timeout_ms, stream=True)
    assert r.status_code == 200
    got = b""
    try:
        for chunk in r.iter_content(None):
            got += chunk
            evs = envelopes_prefix(got)
            if evs:
                assert "start" in evs[0][1].get("event", {}), evs
                return evs[0][1]["event"]["start"]["pid"]
    finally:
        r.close()
    raise AssertionError(f"no start event: {got!r}")


def follow(box, pid, until=None, timeout=60):
    """Connect to pid; read until until(summary) or the end."""
    r = box.request("POST", "/process.Process/Connect", data=envelope(0, {"process": {"pid": pid}}),
                    headers={"Content-Type": "application/connect+json"}, stream=True,
                    timeout=timeout)
    got = b""
    try:
        for chunk in r.iter_content(None):
            got += chunk
            evs = envelopes_prefix(got)
            if evs and evs[-1][0] == 2:
                return summarize(evs)
            if until and evs and until(summarize(evs + [(2, {})])):
                return summarize(evs + [(2, {})])
    finally:
        r.close()
    return summarize(envelopes_prefix(got))


def listed(box):
    r = box.rpc("List", {}, service="process.Process")
    assert r.status_code == 200, r.text
    return {p["pid"]: p for p in r.json()["processes"]}


def test_commands_run_beside_each_other_and_are_listed_while_they_run(box):
    box.rpc("Remove", {"path": "release"})
    body = envelope(0, {"process": {"cmd": "/bin/bash", "args": [
        "-l", "-c", "echo waiting; while [ ! -e release ]; do sleep 0.05; done; echo released"],
        "envs": {"SHOWN": "1"}}, "tag": "waiter"})
    first = box.start_raw(body, timeout_ms=60000, stream=True)
    assert first.status_code == 200
    got = b""
    it = first.iter_content(chunk_size=None)
    while b"waiting" not in b"".join(base64.b64decode(e["event"]["data"]["stdout"])
                                     for f, e in envelopes_prefix(got)
                                     if "data" in e.get("event", {})):
        got += next(it)
    pid = envelopes_prefix(got)[0][1]["event"]["start"]["pid"]
    # a second command runs and ends while the first waits
    assert box.run("echo second")["stdout"] == b"second\n"
    p = listed(box)[pid]
    assert p["tag"] == "waiter" and p["config"] == {
        "cmd": "/bin/bash", "args": ["-l", "-c", p["config"]["args"][2]], "envs": {"SHOWN": "1"},
        "cwd": HOME}
    assert "release" in p["config"]["args"][2]
    box.upload([("release", b"")], path="release")
    for chunk in it:
        got += chunk
    res = summarize(envelopes(got))
    assert res["stdout"] == b"waiting\nreleased\n" and res["end"]["exitCode"] == 0
    assert pid not in listed(box)


def test_stdin_is_sent_then_closed_and_the_process_sees_its_end(box):
    body = {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "cat; echo done"]},
            "stdin": True}
    r = box.start_raw(envelope(0, body), timeout_ms=60000, stream=True)
    it, got = r.iter_content(None), b""
    while not envelopes_prefix(got):
        got += next(it)
    pid = envelopes_prefix(got)[0][1]["event"]["start"]["pid"]
    for text in (b"hello ", b"", b"w\x00rld\n"):
        r = box.rpc("SendInput", {"process": {"pid": pid},
                                  "input": {"stdin": base64.b64encode(text).decode()}},
                    service="process.Process")
        assert r.status_code == 200 and r.json() == {}, r.text
    r = box.rpc("CloseStdin", {"process": {"pid": pid}}, service="process.Process")
    assert r.status_code == 200, r.text
    for chunk in it:
        got += chunk
    res = summarize(envelopes(got))
    assert res["stdout"] == b"hello w\x00rld\ndone\n", res
    assert res["end"]["exitCode"] == 0
    # without stdin kept open it reads end of file at once, and may not be sent any
    res = box.run("cat; echo eof")
    assert res["stdout"] == b"eof\n"
    pid = started(box, "sleep 30")
    r = box.rpc("SendInput", {"process": {"pid": pid}, "input": {"stdin": "aGk="}},
                service="process.Process")
    assert r.status_code == 400 and r.json()["code"] == "failed_precondition"
    r = box.rpc("SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"},
                service="process.Process")
    assert r.status_code == 200


def test_a_signal_ends_a_process_and_its_followers_hear_it(box):
    pid = started(box, "echo up; sleep 60", tag="sleeper")
    assert listed(box)[pid]["tag"] == "sleeper"
    import threading
    box2 = Envd(box.url, box.sid, box.token)
    got = {}
    t = threading.Thread(target=lambda: got.update(res=follow(box2, pid)))
    t.start()
    time.sleep(0.5)
    r = box.rpc("SendSignal", {"process": {"tag": "sleeper"}, "signal": "SIGNAL_SIGTERM"},
                service="process.Process")
    assert r.status_code == 200, r.text
    t.join(30)
    res = got["res"]
    assert res["end"] == {"exitCode": -1, "exited": False, "status": "signal: terminated",
                          "error": "signal: terminated"}, res
    assert pid not in listed(box)
    # gone: the pid is free, and asking for it again is not found
    r = box.rpc("SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"},
                service="process.Process")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert box.run(f"kill -0 {pid} 2>/dev/null; echo $?")["stdout"] == b"1\n"
    evs = envelopes(box.request("POST", "/process.Process/Connect",
                                data=envelope(0, {"process": {"pid": pid}}),
                                headers={"Content-Type": "application/connect+json"}).content)
    assert evs == [(2, {"error": {"code": "not_found", "message": evs[0][1]["error"]["message"]}})]


def test_a_terminal_echoes_keys_resizes_and_ends_with_its_shell(box):
    body = {"process": {"cmd": "/bin/bash", "args": ["-i", "-l"],
                        "envs": {"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}},
            "pty": {"size": {"rows": 24, "cols": 80}}}
    r = box.start_raw(envelope(0, body), timeout_ms=60000, stream=True)
    assert r.status_code == 200
    got, screen = b"", b""
    it = r.iter_content(None)

    def read_until(want):
        nonlocal got, screen
        deadline = time.monotonic() + 30
        while (want not in screen or not envelopes_prefix(got)) and time.monotonic() < deadline:
            got += next(it)
            screen = b"".join(base64.b64decode(e["event"]["data"]["pty"])
                              for f, e in envelopes_prefix(got) if "data" in e.get("event", {}))
        assert want in screen, screen[-2000:]

    def keys(text):
        r = box.rpc("SendInput", {"process": {"pid": pid},
                                  "input": {"pty": base64.b64encode(text).decode()}},
                    service="process.Process")
        assert r.status_code == 200, r.text

    read_until(b"")
    pid = envelopes_prefix(got)[0][1]["event"]["start"]["pid"]
    keys(b"tty; stty size; echo $TERM\n")
    read_until(b"/dev/pts/")
    read_until(b"24 80")
    read_until(b"xterm-256color")
    r = box.rpc("Update", {"process": {"pid": pid}, "pty": {"size": {"rows": 40, "cols": 120}}},
                service="process.Process")
    assert r.status_code == 200, r.text
    keys(b"stty size\n")
    read_until(b"40 120")
    # a pipe's process has no terminal to type into
    other = started(box, "sleep 30")
    r = box.rpc("SendInput", {"process": {"pid": other}, "input": {"pty": "aGk="}},
                service="process.Process")
    assert r.status_code == 400 and r.json()["code"] == "failed_precondition"
    r = box.rpc("Update", {"process": {"pid": other}, "pty": {"size": {"rows": 1, "cols": 1}}},
                service="process.Process")
    assert r.status_code == 400
    box.rpc("SendSignal", {"process": {"pid": other}, "signal": "SIGNAL_SIGKILL"},
            service="process.Process")
    keys(b"exit 7\n")
    for chunk in it:
        got += chunk
    res = envelopes(got)
    assert res[-1] == (2, {}), res[-3:]
    assert res[-2][1]["event"]["end"]["exitCode"] == 7, res[-2]
    r = box.rpc("Update", {"process": {"pid": pid}, "pty": {"size": {"rows": 0, "cols": 1}}},
                service="process.Process")
    assert r.status_code == 400


def test_a_process_nobody_follows_loses_its_output_not_the_daemons_memory(box, srv):
    # 64 MiB written with nobody following: drained and dropped as it comes
    pid = started(box, "head -c 67108864 /dev/zero; echo end")
    deadline = time.monotonic() + 60
    while pid in listed(box) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pid not in listed(box)
    assert box.run("echo still")["stdout"] == b"still\n"


def test_processes_per_sandbox_are_bounded_and_end_with_it(srv):
    victim = new_box(srv)
    pids = [started(victim, "sleep 120") for _ in range(32)]
    assert len(set(pids)) == 32 and set(pids) <= set(listed(victim))
    evs = victim.start("echo one too many")
    assert evs[-1][0] == 2 and evs[-1][1]["error"]["code"] == "resource_exhausted", evs
    assert "32" in evs[-1][1]["error"]["message"]
    kill(srv, victim.sid)
    r = victim.rpc("List", {}, service="process.Process")
    assert r.status_code == 502, r.text


def envelopes_prefix(raw):
    """The complete envelopes at the start of raw."""
    out, pos = [], 0
    while pos + 5 <= len(raw):
        flags, n = struct.unpack(">BI", raw[pos:pos + 5])
        if pos + 5 + n > len(raw):
            break
        out.append((flags, json.loads(raw[pos + 5:pos + 5 + n])))
        pos += 5 + n
    return out


def test_other_process_streams_are_refused_in_band(box):
    r = box.request("POST", "/process.Process/Connect", data=envelope(0, {"process": {"pid": 1}}),
                    headers={"Content-Type": "application/connect+json"})
    evs = envelopes(r.content)
    assert r.status_code == 200 and evs[0][1]["error"]["code"] == "not_found"
    r = box.request("POST", "/process.Process/StreamInput", data=envelope(0, {}),
                    headers={"Content-Type": "application/connect+json"})
    assert envelopes(r.content)[0][1]["error"]["code"] == "unimplemented"
    r = box.request("POST", "/filesystem.Filesystem/WatchFiles", data=envelope(0, {"path": HOME}),
                    headers={"Content-Type": "application/connect+json"})
    assert envelopes(r.content)[0][1]["error"]["code"] == "unimplemented"


def test_unknown_routes_and_ports(box):
    r = box.request("GET", "/nope")
    assert r.status_code == 404 and r.json()["code"] == 404
    # Another port is the sandbox's server there (tests/api/test_ports.py):
    # nothing listens on this one; a port that is no number is no route.
    r = box.request("GET", "/health", headers={"E2b-Sandbox-Port": "8080"})
    assert r.status_code == 502 and "nothing listens" in r.json()["message"], r.text
    r = box.request("GET", "/health", headers={"E2b-Sandbox-Port": "80a"})
    assert r.status_code == 404


def test_the_daemon_still_serves(box, srv):
    assert requests.get(srv.url + "/healthz", timeout=30).status_code == 200
    assert box.run("echo alive")["stdout"] == b"alive\n"


def test_lifecycle_calls_petri_lacks_answer_after_the_checks_e2b_makes_first(srv):
    def call(method, path, body=None):
        return requests.request(method, srv.url + path, headers={"X-API-KEY": srv.key},
                                json=body, timeout=60)

    live = new_box(srv)
    gone = new_box(srv)
    kill(srv, gone.sid)
    for method, rest, body in [("POST", "pause", None), ("POST", "resume", {}),
                               ("POST", "snapshots", {}), ("POST", "fork", {"count": 2}),
                               ("PUT", "network", {})]:
        r = call(method, f"/sandboxes/{live.sid}/{rest}", body)
        if rest == "network":       # petri has it (tests/net): the default again
            assert r.status_code == 204, (rest, r.text)
        else:
            assert r.status_code == 501 and rest in r.json()["message"], (rest, r.text)
        for sid in (gone.sid, "ses_" + "0" * 32, "sbx-test"):
            r = call(method, f"/sandboxes/{sid}/{rest}", body)
            assert r.status_code == 404, (rest, sid, r.text)
    # a fork of fewer than one is refused before the sandbox is looked up
    for count in (0, -1, "2", 1.5):
        r = call("POST", "/sandboxes/sbx-test/fork", {"count": count})
        assert r.status_code == 400 and "count" in r.json()["message"], (count, r.text)
    kill(srv, live.sid)


class Watcher:
    """A WatchDir stream read on a thread of its own."""

    def __init__(self, box, path, **opts):
        import threading
        self.r = box.request("POST", "/filesystem.Filesystem/WatchDir",
                             data=envelope(0, {"path": path, **opts}),
                             headers={"Content-Type": "application/connect+json"}, stream=True)
        assert self.r.status_code == 200
        self.raw, self.lock = b"", threading.Lock()
        self.t = threading.Thread(target=self.read, daemon=True)
        self.t.start()

    def read(self):
        try:
            for chunk in self.r.iter_content(None):
                with self.lock:
                    self.raw += chunk
        except Exception:
            pass

    def envelopes(self):
        with self.lock:
            return envelopes_prefix(self.raw)

    def events(self):
        return [(e["filesystem"]["type"][11:], e["filesystem"]["name"], e["filesystem"].get("entry"))
                for f, e in self.envelopes() if f == 0 and "filesystem" in e]

    def wait_for(self, pred, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self):
                return True
            time.sleep(0.05)
        return False

    def close(self):
        """Hang up now: the reading thread is woken by the socket's shutdown
        rather than by the server's next keepalive."""
        import socket
        try:
            self.r.raw._fp.fp.raw._sock.shutdown(socket.SHUT_RDWR)
        except (AttributeError, OSError):
            pass
        self.r.close()


def test_watch_dir_tells_what_changes_as_it_changes(box):
    box.rpc("Remove", {"path": "watched"})
    box.rpc("MakeDir", {"path": "watched/sub"})
    w = Watcher(box, f"{HOME}/watched")
    assert w.wait_for(lambda w: w.envelopes()), "no start event"
    assert w.envelopes()[0] == (0, {"start": {}})
    box.upload([("a.txt", b"1")], path="watched/a.txt")           # by the file API: a rename
    box.run("cd watched && echo 2 >> a.txt && mv a.txt b.txt && chmod 600 b.txt && rm b.txt && "
            "echo deep > sub/c.txt && mkdir d")
    want = [("CREATE", "a.txt"), ("WRITE", "a.txt"), ("RENAME", "a.txt"), ("CREATE", "b.txt"),
            ("CHMOD", "b.txt"), ("REMOVE", "b.txt"), ("CREATE", "d")]
    assert w.wait_for(lambda w: all(x in [e[:2] for e in w.events()] for x in want)), w.events()
    names = [e[1] for e in w.events()]
    assert not any(n.startswith(".petri-upload-") for n in names), names
    assert "sub/c.txt" not in names, "not recursive: a subdirectory's files are not told"
    w.close()


def test_watch_dir_recursive_with_entries_and_new_subdirectories(box):
    box.rpc("Remove", {"path": "rwatched"})
    box.rpc("MakeDir", {"path": "rwatched/one/two"})
    w = Watcher(box, "rwatched", recursive=True, includeEntry=True)
    assert w.wait_for(lambda w: w.envelopes())
    box.run("cd rwatched && echo x > one/two/f.txt && mkdir new && sleep 0.3 && echo y > new/g.txt")
    assert w.wait_for(lambda w: ("WRITE", "one/two/f.txt") in [e[:2] for e in w.events()] and
                      ("WRITE", "new/g.txt") in [e[:2] for e in w.events()]), w.events()
    entry = [e[2] for e in w.events() if e[:2] == ("WRITE", "one/two/f.txt")][0]
    assert entry["path"] == f"{HOME}/rwatched/one/two/f.txt" and entry["type"] == "FILE_TYPE_FILE"
    w.close()
    # the watched directory going ends the stream
    box.rpc("MakeDir", {"path": "gone-soon"})
    w = Watcher(box, "gone-soon")
    assert w.wait_for(lambda w: w.envelopes())
    box.rpc("Remove", {"path": "gone-soon"})
    assert w.wait_for(lambda w: w.envelopes() and w.envelopes()[-1] == (2, {})), w.envelopes()
    w.close()


def test_watch_dir_refusals_and_bounds(srv):
    box = new_box(srv)
    for path, code in [("missing-dir", "not_found"), ("/etc", "permission_denied"),
                       ("a/../..", "invalid_argument")]:
        r = box.request("POST", "/filesystem.Filesystem/WatchDir", data=envelope(0, {"path": path}),
                        headers={"Content-Type": "application/connect+json"})
        assert envelopes(r.content)[-1][1]["error"]["code"] == code, (path, r.content)
    box.upload([("f", b"x")], path="plain-file")
    r = box.request("POST", "/filesystem.Filesystem/WatchDir", data=envelope(0, {"path": "plain-file"}),
                    headers={"Content-Type": "application/connect+json"})
    assert envelopes(r.content)[-1][1]["error"]["code"] == "invalid_argument"
    # /tmp is the sandbox's own too
    watchers = [Watcher(box, "/tmp") for _ in range(8)]
    assert all(w.wait_for(lambda w: w.envelopes()) for w in watchers)
    r = box.request("POST", "/filesystem.Filesystem/WatchDir", data=envelope(0, {"path": "/tmp"}),
                    headers={"Content-Type": "application/connect+json"})
    assert envelopes(r.content)[-1][1]["error"]["code"] == "resource_exhausted", r.content
    for w in watchers:
        w.close()
    # a tree of more directories than a watch takes is refused whole
    box.run("mkdir -p big && cd big && for i in $(seq 1100); do mkdir d$i; done")
    deadline = time.monotonic() + 20
    while True:     # the closed watchers above are let go as their streams end
        r = box.request("POST", "/filesystem.Filesystem/WatchDir",
                        data=envelope(0, {"path": "big", "recursive": True}),
                        headers={"Content-Type": "application/connect+json"})
        err = envelopes(r.content)[-1][1].get("error", {})
        if "watches" not in err.get("message", "") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert err.get("code") == "resource_exhausted" and "1024" in err["message"], r.content
    # a flood of events costs the watch its events past the rate, not the daemon
    w = Watcher(box, "/tmp")
    assert w.wait_for(lambda w: w.envelopes())
    box.run("cd /tmp && for i in $(seq 20000); do : > f$((i % 10)); done")
    time.sleep(1)
    assert len(w.events()) < 20000 * 2
    w.close()
    assert box.run("echo alive")["stdout"] == b"alive\n"
    kill(srv, box.sid)


def test_a_keeper_the_sandbox_stopped_ends_that_sandbox_not_the_daemons_workers(srv, box):
    # The sandbox's code stops its own keeper (pid 2, the same user): a
    # command's start then waits at most 5 s for it and ends that sandbox;
    # another sandbox's commands never wait behind it.
    victim = new_box(srv)
    # (its end, which the stopped keeper never says, comes with its deadline)
    # (after the keeper said its pid: stopped before, it ends the sandbox at once)
    assert victim.run("sleep 0.5; kill -STOP 2; echo stopped",
                      timeout_ms=3000)["stdout"] == b"stopped\n"
    t0 = time.monotonic()
    evs = victim.start("echo never", timeout_ms=60000)
    assert time.monotonic() - t0 < 20
    assert evs[-1][0] == 2 and "error" in evs[-1][1], evs
    assert box.run("echo fine")["stdout"] == b"fine\n"
    # the sandbox ended: its token hears 502 (gone)
    deadline = time.monotonic() + 10
    while victim.rpc("List", {}, service="process.Process").status_code != 502:
        assert time.monotonic() < deadline, "the sandbox of a stuck keeper lives on"
        time.sleep(0.2)


def test_a_process_killed_at_its_deadline_ends_even_if_its_keeper_is_stopped(srv):
    victim = new_box(srv)
    body = {"process": {"cmd": "/bin/bash",
                        "args": ["-c", "sleep 0.5; kill -STOP 2; echo up; sleep 60"]},
            "stdin": False}
    t0 = time.monotonic()
    r = victim.start_raw(envelope(0, body), timeout_ms=3000)
    evs = envelopes(r.content)
    assert time.monotonic() - t0 < 15, "the stream outlived the deadline and its grace"
    assert evs[-1][1]["error"]["code"] == "deadline_exceeded", evs
    assert evs[0][1]["event"]["start"]["pid"] not in listed(victim)
    kill(srv, victim.sid)
