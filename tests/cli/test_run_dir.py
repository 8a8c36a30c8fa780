"""petri run --dir PROJECT: the project's tree is the workspace (copied in,
extracted by the sandbox's driver as an archive), PROJECT is left as it is,
and --save-dir writes what the code wrote or changed back at its paths."""
import os
import stat


def make_project(root):
    (root / 'src').mkdir(parents=True)
    (root / 'tests').mkdir()
    (root / 'src' / '__init__.py').write_text('')
    (root / 'src' / 'calc.py').write_text('def add(a, b):\n    return a - b\n')
    (root / 'tests' / 'test_calc.py').write_text(
        'from src.calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n')
    run = root / 'run.sh'
    run.write_text('#!/bin/sh\necho ran\n')
    run.chmod(0o755)
    os.symlink('src/calc.py', root / 'calc_link.py')
    os.mkfifo(root / 'pipe')
    return root


def tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            out[rel] = (stat.S_IFMT(st.st_mode), None if stat.S_ISFIFO(st.st_mode) or
                        stat.S_ISLNK(st.st_mode) else open(p, 'rb').read())
    return out


def test_dir_is_the_workspace(petri_json, tmp_path):
    proj = make_project(tmp_path / 'proj')
    before = tree(proj)
    r = petri_json('ls -A | tr "\\n" " "; echo; ./run.sh; readlink calc_link.py; '
                   'python3 -m pytest -q tests 2>&1 | tail -1; '
                   'echo changed > src/calc.py', '--dir', proj, lang='bash')
    out = r['stdout']
    assert r['status'] == 'ok', r.describe()
    lines = out.splitlines()
    # the FIFO is left out (said on stderr), everything else is there
    assert lines[0].split() == ['calc_link.py', 'run.sh', 'src', 'tests'], out
    assert 'ran' in lines and 'src/calc.py' in lines, out
    assert '1 failed' in out, out
    assert b'pipe' in r.proc.stderr and b'left out' in r.proc.stderr
    # without --save-dir the project is untouched
    assert tree(proj) == before


def test_save_dir_writes_back_in_place(petri_json, tmp_path):
    proj = make_project(tmp_path / 'proj')
    r = petri_json("sed -i 's/a - b/a + b/' src/calc.py && mkdir -p out && "
                   "echo new > out/new.txt && python3 -m pytest -q tests | tail -1",
                   '--dir', proj, '--save-dir', proj, lang='bash')
    assert r['status'] == 'ok', r.describe()
    assert '1 passed' in r['stdout']
    assert (proj / 'src' / 'calc.py').read_text() == 'def add(a, b):\n    return a + b\n'
    assert (proj / 'out' / 'new.txt').read_text() == 'new\n'
    assert not (proj / 'files').exists()        # at their paths, not under files/
    assert (proj / 'tests' / 'test_calc.py').exists()


def test_dir_errors(petri_raw, tmp_path):
    r = petri_raw(['run', '--dir', tmp_path / 'nope', '-c', '1'])
    assert r.rc == 2 and b'--dir' in r.proc.stderr
    f = tmp_path / 'file'
    f.write_text('x')
    r = petri_raw(['run', '--dir', f, '-c', '1'])
    assert r.rc == 2 and b'not a directory' in r.proc.stderr
    big = tmp_path / 'big'
    big.mkdir()
    (big / 'blob').write_bytes(b'\0' * (3 << 20))
    r = petri_raw(['run', '--disk', '2', '--dir', big, '-c', '1'])
    assert r.rc == 2 and b'MiB' in r.proc.stderr, r.proc.stderr
