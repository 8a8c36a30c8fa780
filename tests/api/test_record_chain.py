"""The record is evidence (docs/record.md): kept in the state directory by
default, hash-chained, its head signed, checked by `petri record verify`.

Each tampering a person with the SQLite file could do is tried on a copy of
a real daemon's record: verify must fail and name the first entry that is
not what the chain says.  The chain is also recomputed here from the
format docs/record.md gives (an independent reader of the record), which
proves the format is what the docs say, and that an attacker who recomputes
it is caught by the head's signature.
"""
import hashlib
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import time

import pytest

from apihelp import PETRI, Server
import version  # noqa: E402 -- tests/version.py, on the path conftest.py sets


def petri_version():
    return version.reported(PETRI)

GENESIS = bytes(32)


def verify(config, *args):
    p = subprocess.run([PETRI, "record", "verify", "--config", str(config), *args],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def verify_json(config, *args):
    code, out = verify(config, "--json", *args)
    return code, json.loads(out.strip().splitlines()[-1]) if out.strip().startswith("{") else out


def field(tag, data):
    return bytes([tag]) + struct.pack(">Q", len(data)) + data


def digest(row):
    """The digest docs/record.md defines, from a row of its columns: with
    the engine and the node that wrote it, or (an entry of an older petri)
    without the node, or without either."""
    seq, session, started_at, language, code, truncated, status, limits, result, engine, node = row
    h = hashlib.sha256()
    h.update(field(3, b"petri-record-entry-v3" if node is not None else
                   b"petri-record-entry-v2" if engine is not None else b"petri-record-entry-v1"))
    h.update(bytes([1]) + struct.pack(">q", seq))
    h.update(field(0, b"") if session is None else field(3, session.encode()))
    h.update(bytes([2]) + struct.pack(">d", started_at))
    for text in (language, code):
        h.update(field(3, text.encode()))
    h.update(bytes([1]) + struct.pack(">q", truncated))
    h.update(field(3, status.encode()))
    h.update(field(0, b"") if limits is None else field(3, limits.encode()))
    h.update(field(3, result.encode()))
    if node is not None or engine is not None:
        h.update(field(0, b"") if engine is None else field(3, engine.encode()))
    if node is not None:
        h.update(field(3, node.encode()))
    return h.digest()


def record_in(tmp_path):
    """A record file in a directory of its own, and a config naming it."""
    path = tmp_path / "rec" / "record.sqlite"
    path.parent.mkdir()
    conf = tmp_path / "verify.ini"
    conf.write_text(f"[server]\nrecord = {path}\n")
    return path, conf


COLUMNS = ("seq, session, started_at, language, code, code_truncated, status, limits, result, engine,"
           " node")


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A record a real daemon wrote: a session's executions and a one-shot,
    the daemon stopped; (config path, record path, the daemon's stderr).
    Shared: the tests read it, or change copies of it."""
    path, conf = record_in(tmp_path_factory.mktemp("kept"))
    srv = Server(path.parent.parent, f"[server]\nrecord = {path}\nnode = kept\n", light=True)
    api = srv.api()
    sid = api.session()
    for i in range(4):
        assert api.execute(sid, f"x = {i}\nprint(x * 10)")["status"] == "ok"
    assert api.post("/v1/execute", {"code": "print('one-shot')"}).status_code == 200
    code, err = srv.stop()
    assert code == 0, err
    return conf, path, err


def tampered(tmp_path, path, sql, name):
    """A copy of the record with sql applied, and a config naming it."""
    d = tmp_path / name
    d.mkdir()
    copy = d / path.name
    # SQLite's own copy, not the files': a reader of the original (a
    # verify) makes and removes its -wal and -shm files as it goes.
    src, db = sqlite3.connect(f"file:{path}?mode=ro", uri=True), sqlite3.connect(copy)
    src.backup(db)
    src.close()
    db.close()
    shutil.copy2(path.parent / (path.name + ".key"), d / (path.name + ".key"))
    with sqlite3.connect(copy) as db:
        db.executescript(sql)
    conf = d / "petri.ini"
    conf.write_text(f"[server]\nrecord = {copy}\n")
    return conf


def test_an_intact_record_verifies_and_is_private(kept):
    conf, path, err = kept
    code, out = verify(conf)
    assert code == 0, out
    assert "intact: 5 entries" in out and "signed by ed25519:" in out
    # Code and output are the tenants': the file, its journals and its key
    # are the daemon's alone.
    for f in os.listdir(path.parent):
        assert os.stat(path.parent / f).st_mode & 0o077 == 0, f
    # The head is logged when the record opens and when it closes.
    assert "opened: 0 entries, head seq 0" in err
    assert "closed: 5 entries, head seq 5 sha256 " in err


def test_the_chain_is_the_documented_format(kept):
    conf, path, _ = kept
    with sqlite3.connect(path) as db:
        rows = db.execute(f"SELECT {COLUMNS}, digest, link FROM executions ORDER BY seq").fetchall()
    link = GENESIS
    for row in rows:
        d = digest(row[:11])
        assert d.hex() == row[11], row[0]
        link = hashlib.sha256(link + d).digest()
        assert link.hex() == row[12], row[0]
    # Every entry names the petri and the node that wrote it.
    assert {row[9] for row in rows} == {petri_version()}
    assert {row[10] for row in rows} == {"kept"}
    _, body = verify_json(conf)
    assert body["head"] == link.hex() and body["head_seq"] == 5


@pytest.mark.parametrize("name, sql, broken", [
    ("code", "UPDATE executions SET code = 'print(666)' WHERE seq = 3;", 3),
    ("result", "UPDATE executions SET result = replace(result, '20', '21') WHERE seq = 3;", 3),
    ("status", "UPDATE executions SET status = 'error' WHERE seq = 2;", 2),
    ("engine", "UPDATE executions SET engine = '0.0.1' WHERE seq = 4;", 4),
    # An entry passed off as one of a petri that did not record engines.
    ("engine-null", "UPDATE executions SET engine = NULL WHERE seq = 2;", 2),
    ("node", "UPDATE executions SET node = 'elsewhere' WHERE seq = 4;", 4),
    # An entry passed off as one of a petri that did not record nodes.
    ("node-null", "UPDATE executions SET node = NULL WHERE seq = 3;", 3),
    # A node given to an entry that names no engine (as an older petri's).
    ("node-no-engine", "UPDATE executions SET engine = NULL WHERE seq = 2;"
                       "UPDATE executions SET node = 'elsewhere' WHERE seq = 2;", 2),
    ("deleted", "DELETE FROM executions WHERE seq = 2;", 2),
    ("deleted-last", "DELETE FROM executions WHERE seq = 5;", 5),
    ("inserted", "UPDATE executions SET seq = seq + 10 WHERE seq >= 3;"
                 "UPDATE executions SET seq = seq - 9 WHERE seq >= 13;"
                 "INSERT INTO executions (seq, session, started_at, language, code, status, result,"
                 " digest, link) SELECT 3, session, started_at, language, 'import os', status,"
                 " result, digest, link FROM executions WHERE seq = 2;", 3),
    ("appended", "INSERT INTO executions (seq, session, started_at, language, code, status, result,"
                 " digest, link) SELECT 6, session, started_at, language, code, status, result,"
                 " digest, link FROM executions WHERE seq = 5;", 6),
    ("swapped", "UPDATE executions SET seq = -1 WHERE seq = 2;"
                "UPDATE executions SET seq = 2 WHERE seq = 4;"
                "UPDATE executions SET seq = 4 WHERE seq = -1;", 2),
])
def test_verify_names_the_first_broken_entry(kept, tmp_path, name, sql, broken):
    conf = tampered(tmp_path, kept[1], sql, name)
    code, body = verify_json(conf)
    assert code == 1, body
    assert body["intact"] is False and body["broken"] == broken, body


def test_a_recomputed_chain_is_caught_by_the_signature(kept, tmp_path):
    """An attacker who rewrites an entry and every digest and link after it,
    and the head, still cannot sign the new head."""
    conf = tampered(tmp_path, kept[1], "UPDATE executions SET code = 'print(666)' WHERE seq = 3;",
                    "recomputed")
    copy = conf.parent / "record.sqlite"
    with sqlite3.connect(copy) as db:
        rows = db.execute(f"SELECT {COLUMNS} FROM executions ORDER BY seq").fetchall()
        link = GENESIS
        for row in rows:
            d = digest(row)
            link = hashlib.sha256(link + d).digest()
            db.execute("UPDATE executions SET digest = ?, link = ? WHERE seq = ?",
                       (d.hex(), link.hex(), row[0]))
        db.execute("UPDATE chain SET head_link = ?", (link.hex(),))
    code, body = verify_json(conf)
    assert code == 1 and body["broken"] == 5 and "signature" in body["why"], body
    # A head logged before the rewrite names it too, with the key given
    # by its id (as logged) instead of the file beside the record.
    head = [ln for ln in kept[2].splitlines() if "closed:" in ln][0]
    seq, sha = head.split("head seq ")[1].split(" sha256 ")
    sha, key = sha.split(", key ")
    os.unlink(copy.parent / "record.sqlite.key")
    # The recomputed chain holds together up to the head it made: where
    # the rewrite began cannot be told, only that the head logged is gone.
    code, body = verify_json(conf, "--key", key.strip(), "--head", f"{seq}:{sha}")
    assert code == 1 and body["broken"] == 5, body
    code, body = verify_json(kept[0], "--key", key.strip(), "--head", f"{seq}:{sha}")
    assert code == 0, body


def test_without_the_key_the_signature_cannot_be_checked(kept, tmp_path):
    conf = tampered(tmp_path, kept[1], "", "nokey")
    os.unlink(conf.parent / "record.sqlite.key")
    code, out = verify(conf)
    assert code == 2 and "key" in out, out


def test_a_restart_keeps_the_record_and_the_chain(make_server, kept, tmp_path):
    conf = tampered(tmp_path, kept[1], "", "restarted")
    path = conf.parent / "record.sqlite"
    srv = make_server(f"[server]\nrecord = {path}\n")
    api = srv.api()
    api.post("/v1/execute", {"code": "print('after the restart')"})
    _, err = srv.stop()
    assert "opened: 5 entries, head seq 5" in err
    code, body = verify_json(conf)
    assert code == 0 and body["entries"] == 6 and body["head_seq"] == 6, body


def test_a_session_over_its_share_leaves_signed_gaps(make_server, tmp_path):
    """A session over a quarter of the record loses its own oldest entries
    from the middle of the chain: the chain still verifies across them, and
    a gap nobody signed is caught."""
    path, conf = record_in(tmp_path)
    srv = make_server(f"[server]\nrecord = {path}\nrecord_max_mb = 16\n")
    api = srv.api()
    quiet, hog = api.session(), api.session()
    api.execute(quiet, "print('quiet')")
    # 4 MiB is a quarter of 16: entries of 256 KiB (as stored) go past it.
    for _ in range(24):
        r = api.execute(hog, "print('h' * 200_000)")
        assert r["status"] == "ok"
    api.execute(quiet, "print('still here')")
    srv.stop()
    code, body = verify_json(conf)
    assert code == 0 and body["gaps"] > 0, body
    with sqlite3.connect(path) as db:
        sessions = [r[0] for r in db.execute("SELECT session FROM executions ORDER BY seq")]
        assert sessions[0] == quiet and sessions[-1] == quiet
        gap = db.execute("SELECT seq FROM executions WHERE gap_link IS NOT NULL").fetchone()[0]
    # A forged gap: an entry removed, and the gap after it claimed unsigned.
    forged = tampered(tmp_path, path, f"UPDATE executions SET gap_sig = NULL WHERE seq = {gap};",
                      "forged-gap")
    code, body = verify_json(forged)
    assert code == 1, body


def test_retention_by_age_keeps_the_chain_verifiable(make_server, tmp_path):
    path, conf = record_in(tmp_path)
    # 0.00002 days: 1.7 s.
    srv = make_server(f"[server]\nrecord = {path}\nrecord_keep_days = 0.00002\n")
    api = srv.api()
    for i in range(3):
        api.post("/v1/execute", {"code": f"print({i})"})
    time.sleep(2.5)     # the three entries must grow older than record_keep_days
    api.post("/v1/execute", {"code": "print('new')"})
    srv.stop()
    code, body = verify_json(conf)
    assert code == 0 and body["entries"] == 1 and body["start"] == 4, body


def test_the_default_record_is_in_the_state_directory(make_server):
    srv = make_server("")
    srv.api().post("/v1/execute", {"code": "print(1)"})
    srv.stop()
    assert (srv.state_dir / "record.sqlite").exists()
    assert os.stat(srv.state_dir).st_mode & 0o777 == 0o700


def test_a_record_file_is_named_on_the_command_line(kept):
    """`petri record verify RECORD` and `petri record export ... RECORD`
    read that file, with no configuration."""
    _, path, _ = kept
    p = subprocess.run([PETRI, "record", "verify", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "intact: 5 entries" in p.stdout + p.stderr, p
    p = subprocess.run([PETRI, "record", "export", "--oneshots", "--format", "jsonl", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "one-shot" in p.stdout, p
    p = subprocess.run([PETRI, "record", "verify", "--config", "/dev/null", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "not both" in p.stderr, p
    p = subprocess.run([PETRI, "record", "verify", str(path) + ".none"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and ".none" in p.stderr, p


def test_verify_errors(tmp_path):
    conf = tmp_path / "memory.ini"
    conf.write_text("[server]\nrecord =\n")
    code, out = verify(conf)
    assert code == 2 and "memory" in out, out
    conf.write_text(f"[server]\nrecord = {tmp_path}/none.sqlite\n")
    code, out = verify(conf)
    assert code == 2, out
    assert not (tmp_path / "none.sqlite").exists()      # read-only: nothing made
    code, out = verify(conf, "--head", "nope")
    assert code == 2 and "SEQ:SHA256" in out, out
    code, out = verify(conf, "--key", "ed25519:short")
    assert code == 2 and "key id" in out, out


def rechain(db, start_link=GENESIS):
    """Recompute every digest and link of db and its head, as the daemon
    would have (the head is left unsigned)."""
    link = start_link
    for row in db.execute(f"SELECT {COLUMNS} FROM executions ORDER BY seq").fetchall():
        d = digest(row)
        link = hashlib.sha256(link + d).digest()
        db.execute("UPDATE executions SET digest = ?, link = ? WHERE seq = ?",
                   (d.hex(), link.hex(), row[0]))
    db.execute("UPDATE chain SET head_link = ?", (link.hex(),))


def test_a_record_of_an_older_petri_verifies_and_grows(make_server, kept, tmp_path):
    """Entries kept before entries named their engine (engine and node null,
    the v1 digest) still verify, read-only also from a file without those
    columns; and a daemon adds its own entries after them."""
    conf = tampered(tmp_path, kept[1], "UPDATE executions SET engine = NULL, node = NULL;", "older")
    path = conf.parent / "record.sqlite"
    with sqlite3.connect(path) as db:
        rechain(db)
    make_server(f"[server]\nrecord = {path}\n[sessions]\nwarm = false\n").stop()   # signs the head
    # The file as an older petri left it: no engine column, no node column.
    old = tampered(tmp_path, path, "ALTER TABLE executions DROP COLUMN engine;"
                   "ALTER TABLE executions DROP COLUMN node;", "no-column")
    code, body = verify_json(old)
    assert code == 0 and body["entries"] == 5, body
    with sqlite3.connect(old.parent / "record.sqlite") as db:     # read-only: unchanged
        assert "engine" not in [c[1] for c in db.execute("PRAGMA table_info(executions)")]
    # A node given to such an entry is caught: no petri wrote one.
    code, body = verify_json(tampered(tmp_path, path, "UPDATE executions SET node = 'n9' WHERE seq = 2;",
                                      "node-on-old"))
    assert code == 1 and body["broken"] == 2, body
    srv = make_server(f"[server]\nrecord = {path}\n")
    api = srv.api()
    assert api.post("/v1/execute", {"code": "print('new')"}).status_code == 200
    listed = api.get("/v1/executions").json()["executions"]
    assert [e["engine"] for e in listed] == [petri_version()] + [None] * 5
    assert [e["node"] for e in listed] == [api.get("/healthz").json()["node"]] + [None] * 5
    srv.stop()
    code, body = verify_json(conf)
    assert code == 0 and body["entries"] == 6, body
