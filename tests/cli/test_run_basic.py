"""petri run: the happy paths of every language and every way to give code."""

import json
import os
import signal

import pytest

from clihelp import popen_petri, wait_for_procs


def test_python_print(petri_json):
    r = petri_json('print("hello from petri")')
    assert r['status'] == 'ok', r.describe()
    assert r['exit_code'] == 0
    assert r['stdout'] == 'hello from petri\n'
    assert r['stderr'] == ''
    assert r['error'] is None
    assert r['results'] == []
    assert r.rc == 0


def test_final_expression_value_is_a_text_plain_result(petri_json):
    r = petri_json('x = 20\nx * 2 + 2')
    assert r['status'] == 'ok', r.describe()
    assert r['results'] == [{'text/plain': '42'}]
    assert r['stdout'] == ''


def test_final_expression_none_gives_no_result(petri_json):
    r = petri_json('x = 1\nNone')
    assert r['status'] == 'ok', r.describe()
    assert r['results'] == []


def test_state_is_not_shared_between_runs(petri_json):
    first = petri_json(
        'secret = 41\n'
        'open("/work/left.txt", "w").write("x")\n'
        'open("/tmp/left.txt", "w").write("x")\n'
        'import os; os.environ["LEFT"] = "1"\n'
        'print("set")')
    assert first['status'] == 'ok', first.describe()
    assert [f['path'] for f in first['files']] == ['left.txt']

    second = petri_json(
        'import os\n'
        'print(os.path.exists("/work/left.txt"), os.path.exists("/tmp/left.txt"),'
        ' "LEFT" in os.environ, "secret" in globals())\n'
        'secret + 1')
    assert second['stdout'] == 'False False False False\n', second.describe()
    assert second['status'] == 'error'
    assert second['error']['name'] == 'NameError'
    assert second['files'] == []


def test_bash(petri_json):
    r = petri_json('echo "shell $((6 * 7))"; echo oops >&2; exit 0', lang='bash')
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'] == 'shell 42\n'
    assert r['stderr'] == 'oops\n'
    assert r['exit_code'] == 0


def test_bash_nonzero_exit_is_an_error(petri_json):
    r = petri_json('echo partial; exit 7', lang='bash')
    assert r['status'] == 'error', r.describe()
    assert r['exit_code'] == 7
    assert r['stdout'] == 'partial\n'
    assert r['error']['name'] == 'NonZeroExit'
    assert r.rc == 7


C_PROGRAM = r'''
#include <stdio.h>
int main(void) {
    printf("sum=%d\n", 40 + 2);
    fprintf(stderr, "to stderr\n");
    return 3;
}
'''


def test_c_compiles_runs_and_returns_its_exit_code(petri_json):
    r = petri_json(C_PROGRAM, lang='c')
    assert r['stdout'] == 'sum=42\n', r.describe()
    assert r['stderr'] == 'to stderr\n'
    assert r['exit_code'] == 3
    assert r['status'] == 'error'          # a non-zero exit is a failed program
    assert r.rc == 3


def test_c_exit_zero_is_ok(petri_json):
    r = petri_json('#include <stdio.h>\nint main(void){puts("c ok");return 0;}', lang='c')
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'] == 'c ok\n'
    assert r['exit_code'] == 0


def test_c_compile_error(petri_json):
    r = petri_json('int main(void) { return undeclared_thing; }', lang='c')
    assert r['status'] == 'error', r.describe()
    assert r['error']['name'] == 'CompileError'
    assert 'undeclared_thing' in r['error']['message'] + r['error']['traceback']
    assert r['exit_code'] != 0


def test_code_from_stdin_with_dash(petri_json):
    r = petri_json(None, stdin=b'import sys\nprint("from stdin", 6 * 7)\n')
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'] == 'from stdin 42\n'


def test_code_from_stdin_with_dash_and_lang(petri_json):
    r = petri_json(None, lang='bash', stdin=b'echo bash from stdin\n')
    assert r['stdout'] == 'bash from stdin\n', r.describe()


@pytest.mark.parametrize('ext, code, expected', [
    ('.py', 'import sys\nprint("py", sys.version_info[0])\n', 'py 3\n'),
    ('.sh', 'echo "sh $BASH_VERSION" | cut -c1-4\n', 'sh 5\n'),
    ('.c', '#include <stdio.h>\nint main(void){printf("c %d\\n", (int)sizeof(char));return 0;}\n',
     'c 1\n'),
])
def test_file_extension_picks_the_language(petri_json, tmp_path, ext, code, expected):
    path = tmp_path / f'prog{ext}'
    path.write_text(code)
    r = petri_json(None, file=path)
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'] == expected


def test_lang_flag_overrides_the_extension(petri_json, tmp_path):
    path = tmp_path / 'script.py'
    path.write_text('echo "I am bash"\n')
    r = petri_json(None, '-l', 'bash', file=path)
    assert r['stdout'] == 'I am bash\n', r.describe()


def test_environment_inside(petri_json):
    r = petri_json('import os\n'
                   'print(os.getcwd(), os.environ["HOME"], os.environ["PATH"],'
                   ' os.environ["LANG"], os.environ["MPLBACKEND"])')
    assert r['stdout'] == '/work /work /usr/local/bin:/usr/bin:/bin:/work/.local/bin:/opt/petri/bin C.UTF-8 Agg\n', r.describe()


def test_stdin_of_the_program_is_empty(petri_json):
    r = petri_json('input()')
    assert r['status'] == 'error', r.describe()
    assert r['error']['name'] == 'EOFError'


# ---- usage errors ----------------------------------------------------------

@pytest.mark.parametrize('args', [
    ['run'],
    ['run', '-l', 'cobol', '-c', 'x'],
    ['run', '-c', 'print(1)', '/nonexistent.py'],
    ['run', '--timeout', '0', '-c', 'print(1)'],
    ['run', '--memory', 'lots', '-c', 'print(1)'],
    ['run', '/nonexistent/file.py'],
], ids=['no-code', 'unknown-lang', 'code-and-file', 'zero-timeout', 'bad-memory', 'missing-file'])
def test_usage_errors_exit_2(petri_raw, args):
    r = petri_raw(args)
    assert r.rc == 2, (r.rc, r.stderr)
    assert r.stdout == b''
    assert r.stderr


@pytest.mark.parametrize('code', [
    b'print(1)\x00',
    b'print("\xff")',
    b'#' * ((1 << 20) + 1),
], ids=['nul-byte', 'invalid-utf8', 'too-large'])
def test_unacceptable_code_exits_2(petri_raw, code):
    r = petri_raw(['run', '--json', '-'], input=code)
    assert r.rc == 2, (r.rc, r.stderr)
    # --json: the refusal as one JSON object, as an HTTP client reads it
    out = json.loads(r.stdout)
    assert out['status'] == 'error' and out['error']['code'] == 'invalid_request', out
    assert r.stderr.startswith(b'petri: ')


# ---- non-JSON mode -----------------------------------------------------------

def test_nonjson_prints_stdout_and_stderr_and_exits_with_the_programs_code(petri_raw):
    r = petri_raw(['run', '-c', 'import sys\nprint("out line")\n'
                   'print("err line", file=sys.stderr)\nsys.exit(5)'])
    assert r.stdout == b'out line\n'
    assert r.stderr == b'err line\n'
    assert r.rc == 5


def test_nonjson_ok_exits_0(petri_raw):
    r = petri_raw(['run', '-l', 'bash', '-c', 'echo fine'])
    assert (r.rc, r.stdout, r.stderr) == (0, b'fine\n', b'')


def test_nonjson_prints_the_final_value(petri_raw):
    r = petri_raw(['run', '-c', '6 * 7'])
    assert r.rc == 0
    assert r.stdout == b'42\n'


def test_nonjson_python_exception_exits_1_with_traceback_on_stderr(petri_raw):
    r = petri_raw(['run', '-c', 'print("before")\nraise ValueError("bad value 123")'])
    assert r.rc == 1
    assert r.stdout == b'before\n'
    err = r.stderr.decode()
    assert 'Traceback (most recent call last)' in err
    assert 'ValueError: bad value 123' in err
    assert 'line 2' in err
    assert 'driver.py' not in err


def test_nonjson_output_is_live(tmp_path):
    """The first line arrives while the program is still running: it then
    blocks in a sleep that only this test ends (it kills the sleep from the
    host once the line is here).  Buffered output would arrive after the
    program ended, with no sleep left to find."""
    token = '4711.25'
    with popen_petri(['run', '-l', 'bash', '-t', '60', '-c',
                      f'echo first\nsleep {token}\necho second']) as p:
        line = p.stdout.readline()
        assert line == b'first\n'
        sleepers = [pid for pid, _, cmd in wait_for_procs(token) if cmd == f'sleep {token}']
        assert sleepers, 'the program is no longer running: output is not streamed'
        for pid in sleepers:
            os.kill(pid, signal.SIGKILL)
        rest, err = p.communicate(timeout=30)
    assert rest == b'second\n'
    assert p.returncode == 0, err
