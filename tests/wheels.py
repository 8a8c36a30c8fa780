"""What an operator adds to the sandbox, built by the test itself: wheels
(a wheel is a zip of the package's files and NAME-VERSION.dist-info/
{METADATA, WHEEL, RECORD}) and host directories to bind.

Directories bound into a sandbox are bound at the same place, and a bind on
or under /tmp is refused (the sandbox mounts its own /tmp there); pytest's
tmp_path lives under /tmp, in a 0700 directory the sandbox's users cannot
read.  So `operator_dir()` makes a world-readable directory under /var/tmp
and removes it afterwards.

    with operator_dir('wheels') as wh:
        make_wheel(wh, 'petrihello', '1.0', {'petrihello/__init__.py': 'ANSWER = 42\\n'})
"""
import base64
import contextlib
import hashlib
import os
import shutil
import tempfile
import zipfile

BASE = '/var/tmp'


def _digest(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()


def make_wheel(directory, name, version, files, raw=None):
    """A pure-Python wheel of `files` ({path in the wheel: text or bytes}) in directory;
    raw: {path: bytes} written as they are, not listed in RECORD (for hostile
    wheels).  Returns its path."""
    dist = f'{name}-{version}.dist-info'
    entries = {path: data if isinstance(data, bytes) else data.encode()
               for path, data in files.items()}
    entries[f'{dist}/METADATA'] = f'Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n'.encode()
    entries[f'{dist}/WHEEL'] = (b'Wheel-Version: 1.0\nGenerator: petri-tests\n'
                                b'Root-Is-Purelib: true\nTag: py3-none-any\n')
    record = [f'{path},sha256={_digest(data)},{len(data)}' for path, data in entries.items()]
    record.append(f'{dist}/RECORD,,')
    entries[f'{dist}/RECORD'] = ('\n'.join(record) + '\n').encode()
    path = os.path.join(directory, f'{name}-{version}-py3-none-any.whl')
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
        for member, data in {**entries, **(raw or {})}.items():
            z.writestr(member, data)
    os.chmod(path, 0o644)
    return path


@contextlib.contextmanager
def operator_dir(name):
    """A fresh directory the sandbox's users can read, outside /tmp; removed
    on the way out."""
    path = tempfile.mkdtemp(prefix=f'petri-test-{name}-', dir=BASE)
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def snapshot(directory):
    """What a directory holds: {relative path: (size, mtime_ns)} of every entry."""
    seen = {}
    for root, dirs, files in os.walk(directory):
        for entry in dirs + files:
            full = os.path.join(root, entry)
            st = os.lstat(full)
            seen[os.path.relpath(full, directory)] = (st.st_size, st.st_mtime_ns)
    return seen
