"""The systemd unit (packaging/petri.service) as installed: systemd accepts
it, and petri serve works inside the confinement it describes.

systemd itself cannot run the unit here (pid 1 of a container is not
systemd), so the part that can be reproduced without it is: the
capability bounding set, no_new_privs and the umask the unit gives petri
(setpriv and umask do the same), and the readiness protocol (petri serve
sends READY=1 and STOPPING=1 to $NOTIFY_SOCKET, which the test binds as
systemd would).  test_deb.py runs the real service where pid 1 is systemd."""
import os
import re
import shutil
import socket
import subprocess

import pytest
import requests

from harness import Daemon, petri_lock, still_alive
from installhelp import cgroups_of, repo_man_pages, unit_file


def unit_settings(path):
    """{key: [values]} of the unit's [Service] section."""
    out, section = {}, None
    for line in path.read_text().splitlines():
        if line.startswith('['):
            section = line.strip('[]')
        elif section == 'Service' and re.match(r'^\w+=', line):
            k, v = line.split('=', 1)
            out.setdefault(k, []).append(v)
    return out


def verify(unit, man_root=None):
    """systemd-analyze verify: (rc, everything it said).  It warns about
    unknown keys and bad values but exits 0 for them: both must be clean."""
    env = dict(os.environ)
    args = ['systemd-analyze', 'verify']
    if man_root:
        env['MANPATH'] = str(man_root)
    else:
        args.append('--man=no')      # man pages are not in the repository yet
    p = subprocess.run([*args, str(unit)], capture_output=True, text=True, env=env, timeout=120)
    return p.returncode, (p.stdout + p.stderr).strip()


@pytest.mark.skipif(not shutil.which('systemd-analyze'), reason='no systemd-analyze (Debian: systemd)')
def test_systemd_accepts_the_installed_unit(installed, tmp_path):
    # verify checks that ExecStart's binary exists and is executable: point
    # it at the DESTDIR copy (with --root, verify would look for systemd's
    # own targets in the DESTDIR too).
    text = unit_file(installed).read_text()
    assert 'ExecStart=/usr/bin/petri serve\n' in text
    (tmp_path / 'petri.service').write_text(
        text.replace('ExecStart=/usr/bin/petri', f'ExecStart={installed}/usr/bin/petri'))
    rc, said = verify(tmp_path / 'petri.service',
                      installed / 'usr/share/man' if repo_man_pages() else None)
    assert rc == 0 and said == '', said

    # The check is real: a binary that is not there is refused.
    (tmp_path / 'petri.service').write_text(
        text.replace('ExecStart=/usr/bin/petri', f'ExecStart={tmp_path}/missing/petri'))
    rc, said = verify(tmp_path / 'petri.service')
    assert rc != 0 and 'missing/petri' in said


def caps_of(settings):
    caps = settings['CapabilityBoundingSet'][-1].split()
    assert caps and all(c.startswith('CAP_') for c in caps), caps
    return '-all,' + ','.join('+' + c[4:].lower() for c in caps)


def confined(binary, settings, *args):
    """The command line that gives petri what the unit gives it."""
    assert settings['NoNewPrivileges'] == ['yes']
    return ['setpriv', '--no-new-privs', '--bounding-set', caps_of(settings), '--', str(binary), *args]


def recv_notify(sock, timeout):
    sock.settimeout(timeout)
    try:
        return sock.recv(4096).decode()
    except socket.timeout:
        return None


@pytest.mark.skipif(os.geteuid() != 0, reason='the unit runs petri as root: needs root')
def test_serve_works_with_the_units_capabilities_and_notifies_systemd(installed, tmp_path):
    binary = installed / 'usr/bin/petri'
    settings = unit_settings(unit_file(installed))
    umask = int(settings['UMask'][-1], 8)
    assert settings['Type'] == ['notify'] and settings['NotifyAccess'] == ['main']

    # The one-shot path (petri run), cold, confined the same way.
    with petri_lock():
        r = subprocess.run(confined(binary, settings, 'run', '-c', 'print(sum(range(10)))'),
                           capture_output=True, text=True, timeout=120,
                           preexec_fn=lambda: os.umask(umask))
    assert r.returncode == 0 and r.stdout == '45\n', r

    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / 'notify'))
    try:
        # Raises when it prints no address.
        d = Daemon(tmp_path, '[sessions]\npool_min = 1\npool_max = 1\n', name='unit',
                   command=confined(binary, settings),
                   env={**os.environ, 'NOTIFY_SOCKET': str(tmp_path / 'notify')},
                   preexec_fn=lambda: os.umask(umask))
    except BaseException:
        notify.close()
        raise
    try:
        url = d.url
        ready = recv_notify(notify, 60)
        assert ready is not None and 'READY=1' in ready.split('\n'), ready
        assert f'STATUS=listening on {url.removeprefix("http://")}' in ready

        s = requests.Session()
        r = s.post(f'{url}/v1/sessions', json={}, timeout=120)
        assert r.status_code == 201, r.text
        sid = r.json()['id']
        r = s.put(f'{url}/v1/sessions/{sid}/files/in.txt', data=b'upload\n', timeout=60)
        assert r.status_code == 201, r.text
        code = ("import os\ndata = open('in.txt').read()\n"
                "fd = os.open('out.txt', os.O_WRONLY | os.O_CREAT, 0o600)\n"
                "os.write(fd, data.upper().encode())\nos.close(fd)\nprint(data, end='')\n")
        r = s.post(f'{url}/v1/sessions/{sid}/execute', json={'code': code}, timeout=120)
        assert r.status_code == 200 and r.json()['stdout'] == 'upload\n', r.text
        # A file only its sandbox uid may read, read by petri for the client.
        r = s.get(f'{url}/v1/sessions/{sid}/files/out.txt', timeout=60)
        assert r.status_code == 200 and r.content == b'UPLOAD\n', r.text
        r = s.post(f'{url}/v1/execute', json={'code': 'print(2 + 2)'}, timeout=120)
        assert r.status_code == 200 and r.json()['stdout'] == '4\n', r.text
        assert s.delete(f'{url}/v1/sessions/{sid}', timeout=60).status_code == 204

        tree = d.descendants()
        code, _ = d.terminate(60)       # SIGTERM; what it sent stays queued on notify
        stopping = recv_notify(notify, 30)
        assert stopping is not None and 'STOPPING=1' in stopping.split('\n'), stopping
        assert code == 0, d.stderr_text()[-3000:]
    finally:
        d.kill()                        # if it still runs
        notify.close()
    assert still_alive(tree) == []
    assert cgroups_of([d.pid]) == []
