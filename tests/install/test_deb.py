"""`make deb`: the package's control data and files, then the package on
this host: apt installs it (its dependencies are what scripts/deps already
installed), it works, it starts nothing, and purge takes everything back:
its files, processes, cgroups and the state it made.

The host part needs root and a host without a petri package (or any file the
package would own) of someone else's: otherwise it skips, saying so.  It
always purges what it installed."""
import os
import re
import shutil
import stat
import subprocess
import threading

import pytest
import requests

from harness import ROOT, free_port, petri_lock, wait_for
from installhelp import BUILD, cgroups_of, clean_env, make, petri_exe_pids, repo_man_pages

DEB_VERSION_CASES = {
    'v0.1.0-12-gabc1234-dirty': '0.1.0+12.gabc1234.dirty',
    '0.1.0-12-gabc': '0.1.0+12.gabc',
    '0.1.0': '0.1.0',
    '0.2.0-rc1': '0.2.0~rc1',
    'c1688c5': '0~gc1688c5',
    '1688c5a-dirty': '0~g1688c5a.dirty',
}
APT = ['apt-get', '-y', '-q', '-o', 'DPkg::Lock::Timeout=300']
BIN = '/usr/bin/petri'


def deb_version(v):
    p = subprocess.run([ROOT / 'packaging' / 'deb-version', v], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_deb_versions_are_valid_and_ordered():
    for git, want in DEB_VERSION_CASES.items():
        got = deb_version(git)
        assert got == want, git
        assert subprocess.run(['dpkg', '--validate-version', got]).returncode == 0, got
    order = ['0~gc1688c5', '0.1.0', '0.1.0+12.gabc', '0.2.0~rc1', '0.2.0']
    for a, b in zip(order, order[1:]):
        assert subprocess.run(['dpkg', '--compare-versions', a, 'lt', b]).returncode == 0, (a, b)


@pytest.fixture(scope='module')
def deb():
    make('deb')
    debs = sorted((ROOT / BUILD).glob('petri_*.deb'))
    assert len(debs) == 1, debs
    return debs[0]


def listed(lines):
    return [w.strip() for w in lines.split(',') if w.strip()]


def package_list(name):
    return [line.strip() for line in (ROOT / 'packaging' / name).read_text().splitlines()
            if line.strip() and not line.startswith('#')]


def test_deb_control_and_contents(deb):
    version = subprocess.run([str(ROOT / 'scripts' / 'version')], capture_output=True,
                             text=True, check=True).stdout.strip()
    arch = subprocess.run(['dpkg', '--print-architecture'], capture_output=True, text=True).stdout.strip()
    assert deb.name == f'petri_{deb_version(version)}_{arch}.deb'

    def field(name):
        return subprocess.run(['dpkg-deb', '-f', str(deb), name], capture_output=True,
                              text=True, check=True).stdout.strip()

    assert field('Package') == 'petri' and field('Architecture') == arch
    depends = listed(field('Depends'))
    names = {re.match(r'[\w.+-]+', d).group(0) for d in depends}
    # The libraries the binary links, from dpkg-shlibdeps.
    for lib in ('libc6', 'libseccomp2', 'libjansson4', 'libmicrohttpd12', 'libsqlite3-0',
                'libsystemd0', 'libcurl4', 'libarchive13', 'libinih1'):
        assert lib in names, lib
    # The Python the embedded template extension was built for, and what
    # the sandboxes import.
    assert re.search(r'python3 \(>= 3\.\d+\)', field('Depends'))
    assert re.search(r'python3 \(<< 3\.\d+\)', field('Depends'))
    assert set(package_list('depends')) <= names
    assert listed(field('Recommends')) == package_list('recommends')

    info = subprocess.run(['dpkg-deb', '--info', str(deb)], capture_output=True, text=True,
                          check=True).stdout
    for script in ('postinst', 'prerm', 'postrm', 'conffiles', 'md5sums'):
        assert re.search(rf'\b{script}\b', info), script
    conffiles = subprocess.run(['dpkg-deb', '--info', str(deb), 'conffiles'], capture_output=True,
                               text=True, check=True).stdout
    assert conffiles == '/etc/petri/petri.ini.example\n'

    contents = subprocess.run(['dpkg-deb', '--contents', str(deb)], capture_output=True,
                              text=True, check=True).stdout
    files = {line.split()[-1].removeprefix('.') for line in contents.splitlines()
             if not line.startswith('d')}
    want = {BIN, '/lib/systemd/system/petri.service', '/etc/petri/petri.ini.example',
            '/usr/share/doc/petri/README.md', '/usr/share/doc/petri/copyright',
            '/usr/share/doc/petri/docs/configuration.md'}
    want |= {f'/usr/share/man/man{p[-1]}/{os.path.basename(p)}.gz' for p in repo_man_pages()}
    assert want <= files, want - files
    assert all(line.split()[1] == 'root/root' for line in contents.splitlines())


# ---- on this host ----------------------------------------------------------

def deb_files(deb):
    out = subprocess.run(['dpkg-deb', '--contents', str(deb)], capture_output=True, text=True,
                         check=True).stdout
    return [line.split()[-1].removeprefix('.') for line in out.splitlines()
            if not line.startswith('d')]


def installed_packages():
    out = subprocess.run(['dpkg-query', '-W', '-f', '${Package} ${Status}\n'],
                         capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith(' installed')}


def refuse_to_touch(deb):
    """Why this host's package state is not ours to change, or None."""
    if os.geteuid() != 0:
        return 'installing a package needs root'
    status = subprocess.run(['dpkg-query', '-W', '-f', '${Status}', 'petri'],
                            capture_output=True, text=True).stdout
    if status and 'not-installed' not in status:
        return f'a petri package is already on this host ({status}): not ours to replace'
    there = [f for f in deb_files(deb) if os.path.lexists(f)]
    if there:
        return f'files the package would own exist already (someone installed petri by hand): {there[:3]}'
    if petri_exe_pids(BIN):
        return f'{BIN} is running'
    return None


def pid1_is_systemd():
    try:
        return os.path.isdir('/run/systemd/system') and \
            os.path.basename(os.readlink('/proc/1/exe')) == 'systemd'
    except OSError:
        return False


class Installed:
    """The package installed with apt for the block, purged after it
    whatever happens; .files is `dpkg -L petri` while installed."""

    def __init__(self, deb):
        self.deb = deb
        self.before = installed_packages()
        self.state_existed = os.path.exists('/var/lib/petri')
        self.etc_existed = os.path.exists('/etc/petri')

    def __enter__(self):
        env = clean_env(DEBIAN_FRONTEND='noninteractive')
        try:
            p = subprocess.run([*APT, 'install', str(self.deb)], capture_output=True, text=True,
                               env=env, timeout=600)
            assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
            self.apt_output = p.stdout
            self.files = subprocess.run(['dpkg', '-L', 'petri'], capture_output=True, text=True,
                                        check=True).stdout.split('\n')
            self.files = [f for f in self.files if f]
        except BaseException:
            self.purge()
            raise
        return self

    def purge(self):
        p = subprocess.run([*APT, 'purge', 'petri'], capture_output=True, text=True,
                           env=clean_env(DEBIAN_FRONTEND='noninteractive'), timeout=600)
        self.purge_output = p.stdout + p.stderr
        return p.returncode

    def __exit__(self, *exc):
        rc = self.purge()
        if exc[0] is None:
            assert rc == 0, self.purge_output[-3000:]


def test_deb_installs_works_starts_nothing_and_purges_clean(deb, tmp_path):
    why = refuse_to_touch(deb)
    if why:
        pytest.skip(why)
    mounts_before = open('/proc/self/mountinfo').read().count('petri')
    with Installed(deb) as pkg:
        # Only petri was installed: every dependency was there already.
        assert installed_packages() - pkg.before == {'petri'}, pkg.apt_output
        for f in deb_files(deb):
            assert f in pkg.files and os.path.exists(f), f
        assert stat.S_IMODE(os.stat('/var/lib/petri').st_mode) == 0o700
        assert os.path.exists('/var/lib/petri/.made-by-package') != pkg.state_existed

        runs = []
        with petri_lock():
            for args in (['check'], ['run', '-c', 'print(1)']):
                p = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
                out, err = p.communicate(timeout=300)
                runs.append(p.pid)
                assert p.returncode == 0, (args, out[-2000:], err[-2000:])
        assert out == '1\n'
        if shutil.which('systemd-analyze'):
            man = ['--man=no'] if not repo_man_pages() else []
            v = subprocess.run(['systemd-analyze', 'verify', *man, '/lib/systemd/system/petri.service'],
                               capture_output=True, text=True)
            assert v.returncode == 0 and not (v.stdout + v.stderr).strip(), v

        # Nothing started, nothing enabled.
        assert petri_exe_pids(BIN) == []
        assert not os.path.lexists('/etc/systemd/system/multi-user.target.wants/petri.service')
        if pid1_is_systemd():
            state = subprocess.run(['systemctl', 'is-active', 'petri'], capture_output=True, text=True)
            assert state.stdout.strip() == 'inactive'
        files = pkg.files

        # A daemon started by hand: removing the package stops it (prerm),
        # and it stops as on any SIGTERM, its sandboxes with it.
        with petri_lock():
            serve = subprocess.Popen([BIN, 'serve', '--listen', '127.0.0.1:0'],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env={**os.environ, 'STATE_DIRECTORY': str(tmp_path / 'state')})
            line = serve.stdout.readline()
        runs.append(serve.pid)
        waiter = threading.Thread(target=serve.wait, daemon=True)
        waiter.start()          # reaped at once: prerm waits for it to go
        assert 'listening on' in line, line

    waiter.join(60)
    if serve.poll() is None:        # prerm missed it: do not leave it behind
        serve.kill()
        serve.wait()
    serve.stdout.close()
    assert serve.returncode == 0, 'petri serve did not stop cleanly when the package went'

    # Purged: its files, its processes and its sandboxes' cgroups, the state
    # it made, its systemd state.
    left = [f for f in files if os.path.lexists(f) and not os.path.isdir(f)]
    assert left == [], left
    for own in ('/usr/share/doc/petri', *(() if pkg.etc_existed else ('/etc/petri',))):
        assert not os.path.exists(own), own
    status = subprocess.run(['dpkg-query', '-W', '-f', '${Status}', 'petri'], capture_output=True,
                            text=True).stdout
    assert not status or 'not-installed' in status, status
    assert petri_exe_pids(BIN) == []
    assert cgroups_of(runs) == []
    assert os.path.exists('/var/lib/petri') == pkg.state_existed
    assert open('/proc/self/mountinfo').read().count('petri') == mounts_before


def systemctl(*args, check=True):
    p = subprocess.run(['systemctl', *args], capture_output=True, text=True, timeout=120)
    assert not check or p.returncode == 0, (args, p.stdout, p.stderr)
    return p.stdout.strip()


def test_deb_as_a_systemd_service(deb):
    """The package's unit under the host's systemd: started by hand, ready
    when it answers, sandboxes in its own delegated cgroup, stopped clean."""
    if not pid1_is_systemd():
        pytest.skip('pid 1 is not systemd (a container): the unit cannot be started here')
    why = refuse_to_touch(deb)
    if why:
        pytest.skip(why)
    dropin = '/run/systemd/system/petri.service.d'
    port = free_port()
    with Installed(deb):
        try:
            os.makedirs(dropin, exist_ok=True)
            with open(f'{dropin}/test.conf', 'w') as f:
                f.write(f'[Service]\nExecStart=\nExecStart={BIN} serve --listen 127.0.0.1:{port}\n')
            systemctl('daemon-reload')
            systemctl('start', 'petri')          # Type=notify: returns once READY=1
            main = int(systemctl('show', '-P', 'MainPID', 'petri'))
            cgroup = '/sys/fs/cgroup' + systemctl('show', '-P', 'ControlGroup', 'petri')
            r = requests.post(f'http://127.0.0.1:{port}/v1/execute', json={'code': 'print(7)'},
                              timeout=120)
            assert r.status_code == 200 and r.json()['stdout'] == '7\n', r.text
            if os.path.exists('/sys/fs/cgroup/cgroup.controllers'):
                # cgroup v2: petri moved itself into the unit's leaf and
                # makes its sandboxes in "petri" beside it.
                procs = open(f'{cgroup}/petri-supervisor/cgroup.procs').read().split()
                assert str(main) in procs
                assert wait_for(lambda: [d for d in os.listdir(f'{cgroup}/petri')
                                         if d.startswith(f'p{main}-')], 60, 0.2), \
                    os.listdir(f'{cgroup}/petri')
            systemctl('stop', 'petri')
            assert systemctl('show', '-P', 'Result', 'petri') == 'success'
            assert systemctl('show', '-P', 'ExecMainStatus', 'petri') == '0'
            assert petri_exe_pids(BIN) == []
            assert not os.path.exists(cgroup)
            assert cgroups_of([main]) == []
        finally:
            systemctl('stop', 'petri', check=False)
            shutil.rmtree(dropin, ignore_errors=True)
            systemctl('daemon-reload', check=False)
