"""Helpers of the install tier: `make install` / `make uninstall` into a
temporary DESTDIR, the systemd unit, `make deb`, and the package on this
host (the fixture `installed` is in conftest.py).

make(*args)            `make -C <repo> BUILD=<PETRI_BUILD> ARGS`, checked; the
                       caller's MAKEFLAGS are dropped (a jobserver the child
                       cannot reach would only warn)
tree(root)             {relative path: mode} of the files and symlinks under root
unit_file(destdir)     the installed petri.service
petri_exe_pids(path)   pids whose executable is path (also once deleted)
cgroups_of(pids)       cgroup directories p<pid>-... of those pids anywhere under
                       /sys/fs/cgroup (the sandbox cgroups petri names after itself)
"""
import os
import subprocess
from pathlib import Path

from harness import ROOT

BUILD = os.environ.get('PETRI_BUILD', 'build')
CGROUP_FS = '/sys/fs/cgroup'


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'MAKEOVERRIDES')}
    env.update(extra)
    return env


def make(*args, timeout=600):
    p = subprocess.run(['make', '-C', str(ROOT), '--no-print-directory', f'BUILD={BUILD}', *args],
                       capture_output=True, text=True, env=clean_env(), timeout=timeout)
    assert p.returncode == 0, f'make {" ".join(args)}: rc {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}'
    return p


def tree(root):
    root = Path(root)
    return {str(p.relative_to(root)): p.lstat().st_mode & 0o7777
            for p in root.rglob('*') if p.is_symlink() or not p.is_dir()}


def unit_file(destdir, unitdir='usr/lib/systemd/system'):
    return Path(destdir) / unitdir / 'petri.service'


def repo_man_pages():
    """The man pages of the repository, as `make install` finds them."""
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / 'man').glob('*.[15]')) \
        if (ROOT / 'man').is_dir() else []


def petri_exe_pids(path):
    pids = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            exe = os.readlink(f'/proc/{d}/exe')
        except OSError:
            continue
        if exe == path or exe == path + ' (deleted)':
            pids.append(int(d))
    return pids


def cgroups_of(pids):
    found = []
    prefixes = tuple(f'p{pid}-' for pid in pids)
    if not prefixes:
        return found
    for dirpath, dirnames, _ in os.walk(CGROUP_FS):
        found += [os.path.join(dirpath, d) for d in dirnames if d.startswith(prefixes)]
    return found
