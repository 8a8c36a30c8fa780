"""The host's shared tables (config/budget.h): a configuration whose
sessions could take the host's pid or pty table is refused at start by the
commands that hold sessions (petri serve, petri mcp), naming its keys and
the numbers; petri run, which holds one sandbox, runs with it; the
per-sandbox pty bound is the operator's to set.  The numbers come from this
host's /proc, so the configurations are impossible here whatever its
tables."""
import subprocess

from conftest import PETRI

POOL_AND_PROBE = 8 + 3      # the default pool_max, two templates, the probe


def host(name):
    with open('/proc/sys/kernel/' + name) as f:
        return int(f.read())


def refused(tmp_path, text, command):
    cfg = tmp_path / 'petri.ini'
    cfg.write_text(text)
    args = {'serve': ['serve', '--listen', '127.0.0.1:0'], 'mcp': ['mcp']}[command]
    p = subprocess.run([PETRI, *args[:1], '--config', str(cfg), *args[1:]],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 2, (command, p.returncode, p.stdout[-500:], p.stderr[-2000:])
    return p.stderr


def test_sessions_that_could_take_the_pid_table_are_refused(tmp_path):
    table = min(host('pid_max'), host('threads-max'))
    sessions = table // 1024 + 1            # at 1024 each, more than the whole table
    text = (f"[server]\nmax_sessions = {sessions}\n[max_limits]\npids = 1024\n"
            f"[sandbox]\nuid_count = {sessions + POOL_AND_PROBE}\n")
    for command in ('mcp', 'serve'):     # serve last: it would stay up
        err = refused(tmp_path, text, command)
        assert '[max_limits] pids = 1024' in err and f'max_sessions = {sessions}' in err, err
        assert 'kept for the host' in err and ('kernel.pid_max' in err or 'kernel.threads-max' in err), err
        assert 'lower [max_limits] pids or max_sessions' in err, err
    # petri run holds one sandbox: 2 x 1024 fits any host
    p = subprocess.run([PETRI, 'run', '--config', str(tmp_path / 'petri.ini'), '-c', 'print(1)'],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout == '1\n', (p.stdout, p.stderr[-2000:])


def test_sessions_that_could_take_the_pty_table_are_refused(tmp_path):
    room = host('pty/max') - host('pty/reserve')
    sessions = room // 64 + 1
    text = (f"[server]\nmax_sessions = {sessions}\n[limits]\npids = 8\n[max_limits]\npids = 8\n"
            f"[sandbox]\nptys = 64\nuid_count = {sessions + POOL_AND_PROBE}\n")
    for command in ('mcp', 'serve'):
        err = refused(tmp_path, text, command)
        assert 'ptys = 64 in [sandbox]' in err and f'max_sessions = {sessions}' in err, err
        assert f"kernel.pty.max = {host('pty/max')}" in err, err


def test_the_operator_sets_the_ptys_of_a_sandbox(make_server):
    """[sandbox] ptys is each sandbox's devpts max: the sixth pty is
    ENOSPC."""
    srv = make_server("[sandbox]\nptys = 5\n")
    api = srv.api()
    sid = api.session()
    r = api.execute(sid, "import os, errno\nheld = []\ntry:\n"
                         "    for _ in range(100):\n        held.append(os.openpty())\n"
                         "except OSError as e:\n    print(len(held), errno.errorcode[e.errno])\n")
    assert r['status'] == 'ok' and r['stdout'] == '5 ENOSPC\n', r
