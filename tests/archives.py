"""Archives built in memory for the tests of POST/GET /v1/sessions/{id}/archive
(tests/api/test_archive.py, tests/hostile/test_archives.py), and a look at a
session's /work from inside it.

entry()       a TarInfo made by hand: any name, type, mode, mtime, link
tar_bytes()   a tar (plain, gz, bz2 or xz) of entries
zip_bytes()   a zip of (ZipInfo or name, bytes), deflated
zip_entry()   a ZipInfo with Unix mode bits (a symlink: S_IFLNK, its target as data)
SNAPSHOT      Python code for a session: prints every path under /work with its
              lstat (mode, mtime, links, inode), a link's target and a file's bytes
snapshot()    run it, parse it
deflate_zeros(), gzip_zeros_tar(), zip_raw(), zip_overlapping(), zip64_claims(),
zip_claims_central(), many_entries_tgz():
              bombs and liars, made in milliseconds
"""
import gzip
import io
import json
import stat
import struct
import tarfile
import zipfile
import zlib

MTIME = 1_600_000_000


def entry(name, data=b'', mode=0o644, mtime=MTIME, type=tarfile.REGTYPE, link=''):
    """(TarInfo, data) for tar_bytes(); size is len(data) for a file, 0 else."""
    ti = tarfile.TarInfo(name)
    ti.type = type
    ti.size = len(data) if type == tarfile.REGTYPE else 0
    ti.mode = mode
    ti.mtime = mtime
    ti.linkname = link
    return ti, data


def tar_bytes(entries, compression=''):
    """A tar of (TarInfo, data) pairs; compression '', 'gz', 'bz2' or 'xz'."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode='w:' + compression, format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if ti.type == tarfile.REGTYPE else None)
    return out.getvalue()


def zip_entry(name, mode, date_time=(2020, 1, 2, 3, 4, 6)):
    """A ZipInfo made on Unix with these st_mode bits (S_IFREG, S_IFLNK...)."""
    zi = zipfile.ZipInfo(name, date_time)
    zi.create_system = 3
    zi.external_attr = mode << 16 | (0x10 if stat.S_ISDIR(mode) else 0)
    return zi


def zip_bytes(entries):
    out = io.BytesIO()
    with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
        for info, data in entries:
            z.writestr(info, data)
    return out.getvalue()


SNAPSHOT = r'''
import json, os, stat
def look(top):
    out = {}
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            e = {'mode': st.st_mode, 'mtime': st.st_mtime, 'nlink': st.st_nlink,
                 'ino': st.st_ino}
            if stat.S_ISLNK(st.st_mode):
                e['link'] = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                with open(p, 'rb') as f:
                    e['data'] = f.read(1 << 16).decode('latin-1')
            out[os.path.relpath(p, top)] = e
    return out
print(json.dumps(look(%r)))
'''


def snapshot(execute, top='/work'):
    """{path relative to top: its lstat and content} as the session sees it;
    execute(code) -> a result (the Api's execute bound to a session)."""
    r = execute(SNAPSHOT % top)
    assert r['status'] == 'ok', r
    return json.loads(r['stdout'])


def leftovers(names):
    """The names that are the server's own temporary files in /work."""
    return [n for n in names if n.startswith(('.petri-archive-', '.petri-unpack-',
                                              '.petri-upload-'))]


# ---- hand-made archives (hostile ones: sizes that lie, bombs) -------------

def deflate_zeros(mib):
    """A raw deflate stream of mib MiB of zeros, made in a blink: one MiB
    compressed once, its full-flushed blocks repeated (nothing refers across
    a full flush), then the final block."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(b'\0' * (1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    return block * mib + c.flush()


def crc_zeros(mib):
    crc, zeros = 0, b'\0' * (1 << 20)
    for _ in range(mib):
        crc = zlib.crc32(zeros, crc)
    return crc


def gzip_zeros_tar(name, mib):
    """A tar.gz of one file of mib MiB of zeros: gzip members (one MiB each,
    compressed once) one after another, as gzip allows."""
    ti = tarfile.TarInfo(name)
    ti.size = mib << 20
    zeros = gzip.compress(b'\0' * (1 << 20), 9)
    return gzip.compress(ti.tobuf(tarfile.USTAR_FORMAT)) + zeros * mib + \
        gzip.compress(b'\0' * 1024)


def _local(name, method, data, crc, size):
    raw = name.encode()
    return struct.pack('<4s2B4HL2L2H', b'PK\x03\x04', 20, 0, 0, method, 0, 0x5021, crc,
                       len(data), size, len(raw), 0) + raw + data


def _central(name, method, data, crc, size, mode, offset):
    raw = name.encode()
    return struct.pack('<4s4B4HL2L5H2L', b'PK\x01\x02', 20, 3, 20, 0, 0, method, 0, 0x5021,
                       crc, len(data), size, len(raw), 0, 0, 0, 0, mode << 16, offset) + raw


def _end(count, central, offset):
    return struct.pack('<4s4H2LH', b'PK\x05\x06', 0, 0, count, count, central, offset, 0)


def zip_raw(entries):
    """A zip written field by field, so that it may lie: entries of (name,
    method, data as stored, crc, size, st_mode)."""
    out, central = bytearray(), bytearray()
    for name, method, data, crc, size, mode in entries:
        central += _central(name, method, data, crc, size, mode, len(out))
        out += _local(name, method, data, crc, size)
    return bytes(out + central + _end(len(entries), len(central), len(out)))


def zip_overlapping(mib, copies):
    """The overlapping-files bomb: one deflated entry of mib MiB of zeros,
    and copies central directory entries that all point at it."""
    data, crc = deflate_zeros(mib), crc_zeros(mib)
    local = _local('z', 8, data, crc, mib << 20)
    central = b''.join(_central('z', 8, data, crc, mib << 20, 0o100644, 0) for _ in range(copies))
    return local + central + _end(copies, len(central), len(local))


def zip_claims_central(size):
    """An empty zip whose end of central directory claims one entry in a
    central directory of size bytes."""
    return _end(1, size, 0)


def zip64_claims(count):
    """A zip of one entry whose zip64 end of central directory claims
    count entries."""
    local = _local('a', 0, b'a', zlib.crc32(b'a'), 1)
    central = _central('a', 0, b'a', zlib.crc32(b'a'), 1, 0o100644, 0)
    end64 = struct.pack('<4sQ2H2L4Q', b'PK\x06\x06', 44, 45, 45, 0, 0, count, count,
                        len(central), len(local))
    locator = struct.pack('<4sLQL', b'PK\x06\x07', 0, len(local) + len(central), 1)
    return local + central + end64 + locator + struct.pack(
        '<4s4H2LH', b'PK\x05\x06', 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)


def many_entries_tgz(n, name='f'):
    """A tar.gz of n empty files of one name: one ustar header repeated
    (quick to make; gzip keeps it small)."""
    ti = tarfile.TarInfo(name)
    header = ti.tobuf(tarfile.USTAR_FORMAT)
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    step = 10_000
    parts = [c.compress(header * min(step, n - i)) for i in range(0, n, step)]
    return b''.join(parts) + c.compress(b'\0' * 1024) + c.flush()
