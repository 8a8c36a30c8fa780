"""`petri run --dir PROJECT --save-dir PROJECT` against hostile code: the
sandbox chooses which files come back and what they hold, and the host
writes them into the user's project.  Whatever it writes, nothing outside
the project changes (not through a hard link to a file elsewhere), nothing
is written through the project's symbolic links, petri run never blocks on what is in the project (a
FIFO), and nothing that git runs (.git/config, .git/hooks) is written."""
import os
import subprocess

import hostilehelp as H

ATTACK = r'''
set -u
# through a hard link: the project's file is also the store's
echo 'pwned()' > node_modules/pkg/index.js
# through the project's symbolic links: replaced by what the code makes
rm lib calc_link.py
mkdir lib && echo pwned > lib/planted
echo pwned > calc_link.py
# over a FIFO of the project (left out of the upload)
echo pwned > pipe
# what git runs, in the project's repository and in a new one
printf '[core]\n\tfsmonitor = "touch %(fired)s #"\n' > .git/config
mkdir -p .git/hooks sub/.git && echo 'touch %(fired)s' > .git/hooks/pre-commit
printf '[core]\n\tfsmonitor = "touch %(fired)s #"\n' > sub/.git/config
mkdir -p .GIT && echo x > .GIT/config
# and an honest change
echo 'def add(a, b): return a + b' > calc.py
'''


def project(root, elsewhere):
    root.mkdir()
    subprocess.run(['git', 'init', '-q', str(root)], check=True)
    (root / 'calc.py').write_text('def add(a, b): return a - b\n')
    (root / 'node_modules' / 'pkg').mkdir(parents=True)
    store = elsewhere / 'store-index.js'
    store.write_text('module.exports = 1\n')
    os.link(store, root / 'node_modules' / 'pkg' / 'index.js')
    (root / 'src').mkdir()
    os.symlink('src', root / 'lib')
    os.symlink('calc.py', root / 'calc_link.py')
    os.mkfifo(root / 'pipe')
    return store


def test_save_dir_writes_only_the_project(tmp_path, host_guard):
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    proj = tmp_path / 'proj'
    store = project(proj, elsewhere)
    git_config = (proj / '.git' / 'config').read_bytes()
    fired = tmp_path / 'fired'
    script = tmp_path / 'attack.sh'
    script.write_text(ATTACK % {'fired': fired})
    with H.petri_lock():
        # a FIFO opened for writing would block it: bounded
        p = subprocess.run([H.PETRI, 'run', '--json', '-l', 'bash', '--dir', str(proj),
                            '--save-dir', str(proj), str(script)], capture_output=True,
                           env=H.petri_env(), timeout=120)
    res = H.strict_json(p.stdout.decode())
    err = p.stderr.decode(errors='replace')
    assert res['status'] == 'ok', H.describe(res) + err
    # the honest change came back (not through calc_link.py), and the hard
    # link's file as a new inode
    assert (proj / 'calc.py').read_text() == 'def add(a, b): return a + b\n', err
    assert (proj / 'node_modules' / 'pkg' / 'index.js').read_text() == 'pwned()\n', err
    # nothing else changed, outside the project or through its links
    assert store.read_text() == 'module.exports = 1\n', 'written through a hard link'
    assert os.listdir(proj / 'src') == []
    assert os.path.islink(proj / 'lib') and os.path.islink(proj / 'calc_link.py')
    # the FIFO is still one (and petri run did not wait on it)
    assert os.path.exists(proj / 'pipe') and not os.path.isfile(proj / 'pipe')
    # git's files are not the sandbox's: none written, none runs
    assert (proj / '.git' / 'config').read_bytes() == git_config
    assert not (proj / '.git' / 'hooks' / 'pre-commit').exists()
    assert not (proj / 'sub').exists() and not (proj / '.GIT').exists()
    for repo in (proj, proj / 'sub'):
        if repo.exists():
            subprocess.run(['git', '-C', str(repo), 'status'], capture_output=True)
    assert not fired.exists(), 'git ran a command the sandbox wrote'
    assert '.git/config' in err and 'git runs' in err, err
    assert not [n for n in os.listdir(proj) if n.startswith('.petri-')]
