"""Tests of the in-sandbox driver against docs/protocol.md (harness: driverhelp.py)."""

import base64
import os
import signal
import struct
import sys

import pytest

from driverhelp import PROGRAMS, Driver
from harness import cpu_seconds, ended, proc_status, signal_pending, wait_for

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


# ---------------------------------------------------------------- session

def test_ready_frame(driver):
    assert driver.ready == {'type': 'ready', 'python': '%d.%d.%d' % sys.version_info[:3],
                            'pid': driver.proc.pid}


def test_start_up_is_cheap(tmp_path):
    """Start-up imports little: the CPU the driver spent until it said ready
    (the wall clock is the machine's load; bench/ measures it)."""
    driver = Driver(tmp_path)
    try:
        cpu_s = cpu_seconds(driver.proc.pid)
        assert cpu_s < 1.0, cpu_s       # about 0.03 s
    finally:
        assert driver.close() == 0


def test_eof_on_control_socket_ends_the_driver(driver):
    driver.run('x = 1')
    assert driver.close() == 0


def framed(body):
    return struct.pack('>I', len(body)) + body


@pytest.mark.parametrize('frame', [
    framed(b'notjs'),
    framed(b'[]'),
    framed(b'{}'),
    framed(b'{"type":"hello"}'),
    struct.pack('>I', (16 << 20) + 1),
    framed(b'\xff\xfe{}'),
    framed(b'{"type":"exec","id":1,"language":"cobol","code":"x = 1"}'),
    framed(b'{"type":"exec","id":"1","language":"python","code":"x = 1"}'),
    framed(b'{"type":"exec","id":true,"language":"python","code":"x = 1"}'),
    framed(b'{"type":"exec","id":1,"language":"python","code":NaN}'),
    framed(b'{"type":"exec","id":1,"language":"python"}'),
    struct.pack('>I', 100) + b'{"type":"exec"',
    framed(b'{"type":"exec","id":1,"language":"python","code":"1","env":"A=1"}'),
    framed(b'{"type":"exec","id":1,"language":"python","code":"1","env":["A"]}'),
    framed(b'{"type":"exec","id":1,"language":"python","code":"1","env":[1]}'),
    framed(b'{"type":"exec","id":1,"language":"python","code":"1","context":""}'),
    framed(b'{"type":"exec","id":1,"language":"python","code":"1","context":"\\n"}'),
    framed(b'{"type":"exec","id":1,"language":"python","code":"1","cwd":"work"}'),
    framed(b'{"type":"exec","id":1,"language":"python","code":"1","fresh":1}'),
    framed(b'{"type":"exec","id":1,"language":"python","code":"1","stdin":1}'),
    framed(b'{"type":"restart","now":true}'),
    # A driver that is no sandbox's main process (this harness's) refuses to
    # restart: the fresh one's kill(-1) would reach every process of its user.
    framed(b'{"type":"restart"}'),
], ids=['not-json', 'array', 'no-type', 'unknown-type', 'too-long', 'not-utf8',
        'bad-language', 'string-id', 'bool-id', 'nan', 'no-code', 'truncated',
        'env-not-list', 'env-no-equals', 'env-not-string', 'context-empty',
        'context-control', 'cwd-relative', 'fresh-not-bool', 'stdin-not-string', 'restart-with-members',
        'restart-outside-a-sandbox'])
def test_malformed_frame_is_a_protocol_error(tmp_path, frame):
    driver = Driver(tmp_path)
    driver.send_raw(frame)
    assert driver.close() == 2
    assert b'protocol error' in driver.stderr


def test_exec_env_is_restored_after_the_exec(driver):
    driver.send({'type': 'env', 'env': ['KEPT=session']})
    show = "import os; print(os.environ.get('ONCE'), os.environ.get('KEPT'))"
    driver.send({'type': 'exec', 'id': 100, 'language': 'python', 'code': show,
                 'env': ['ONCE=1', 'KEPT=exec']})
    assert driver.collect(100).out == '1 exec\n'
    assert driver.run(show).out == 'None session\n'
    driver.send({'type': 'exec', 'id': 101, 'language': 'bash', 'code': 'echo "$ONCE"',
                 'env': ['ONCE=b']})
    assert driver.collect(101).out == 'b\n'
    assert driver.run('echo "[$ONCE]"', 'bash').out == '[]\n'


def test_sigint_between_execs_is_ignored(driver):
    driver.run('kept = 5')
    os.kill(driver.proc.pid, signal.SIGINT)
    assert wait_for(lambda: not signal_pending(driver.proc.pid, signal.SIGINT), 10), \
        "the driver never took the SIGINT"
    outcome = driver.run('kept')
    assert outcome.error is None and outcome.plain == ['5']


# ---------------------------------------------------------------- python

def test_print_and_expression_value(driver):
    outcome = driver.run('print("hello")\n6 * 7')
    assert outcome.stdout == b'hello\n'
    assert outcome.results == [{'text/plain': '42'}]
    assert outcome.error is None and outcome.exit_code == 0


def test_state_persists_across_execs(driver):
    driver.run('x = 10\ndef add(y):\n    return x + y')
    assert driver.run('add(5)').plain == ['15']
    assert driver.run('_ * 2').plain == ['30']      # `_` holds the last value, like the REPL


def test_none_and_statements_show_nothing(driver):
    for code in ('None', 'x = 1', 'print("a")', 'def f():\n    pass\nf()', '1 + 1;', ''):
        outcome = driver.run(code)
        assert outcome.results == [] and outcome.exit_code == 0, code


def test_display_builtin_keeps_order(driver):
    outcome = driver.run('display(1, "two")\nprint("between")\ndisplay([3])\n4')
    assert outcome.plain == ['1', "'two'", '[3]', '4']
    assert outcome.stdout == b'between\n'


def test_the_last_expression_is_the_main_result(driver):
    """display() output and figures are results; only the value of the
    cell's last expression is marked main (E2B's is_main_result)."""
    outcome = driver.run('display(1)\n2')
    marks = [f.get('main', False) for f in outcome.frames if f['type'] == 'result']
    assert outcome.plain == ['1', '2'] and marks == [False, True]
    outcome = driver.run('display(3)')
    assert [f.get('main', False) for f in outcome.frames if f['type'] == 'result'] == [False]


def run_in(driver, code, **fields):
    exec_id = driver.next_id
    driver.next_id += 1
    driver.send({'type': 'exec', 'id': exec_id, 'language': fields.pop('language', 'python'),
                 'code': code, **fields})
    return driver.collect(exec_id)


def test_stdin_of_an_exec_is_fd_0_for_it_only(driver):
    out = run_in(driver, "import sys\nprint(input(), sys.stdin.read().split())", stdin="a\nb c\n")
    assert out.error is None and out.out == "a ['b', 'c']\n", out.out
    out = run_in(driver, "cat; echo", language="bash", program=PROGRAMS['bash'], stdin="piped")
    assert out.out == "piped\n", out.out
    out = run_in(driver, "input()")
    assert out.error['name'] == 'EOFError', out.error


def test_contexts_keep_separate_variables(driver):
    driver.run('x = "default"')
    assert run_in(driver, 'x = "a"\nx', context='a').plain == ["'a'"]
    outcome = run_in(driver, 'x', context='b')
    assert outcome.error['name'] == 'NameError', outcome
    assert driver.run('x').plain == ["'default'"]
    assert run_in(driver, 'x', context='a').plain == ["'a'"]
    # Modules are the process's: imported in one context, cached for all.
    run_in(driver, 'import json', context='a')
    assert run_in(driver, 'import sys; "json" in sys.modules', context='b').plain == ['True']
    # fresh: the context starts empty again.
    assert run_in(driver, 'x', context='a', fresh=True).error['name'] == 'NameError'


def test_cwd_of_an_exec(driver, tmp_path):
    (tmp_path / 'sub').mkdir()
    assert run_in(driver, 'import os; os.getcwd()', cwd=str(tmp_path / 'sub')).plain == \
        [repr(str(tmp_path / 'sub'))]
    assert run_in(driver, 'pwd', language='bash', cwd=str(tmp_path / 'sub')).out.strip() == \
        str(tmp_path / 'sub')
    assert driver.run('import os; os.getcwd()').plain == [repr(str(driver.cwd))]
    outcome = run_in(driver, '1', cwd=str(tmp_path / 'missing'))
    assert outcome.error['name'] == 'FileNotFoundError' and outcome.exit_code == 1


def test_namespace_is_a_fresh_main_module(driver):
    outcome = driver.run(
        'import __main__, sys\n'
        '(__name__, __main__.__dict__ is globals(), sys.argv,\n'
        ' [n for n in ("S", "State", "send", "run_python", "main") if n in globals()])')
    assert outcome.plain == ["('__main__', True, [''], [])"]


def test_pickle_and_dataclasses_find_user_classes(driver):
    outcome = driver.run(
        'import pickle, dataclasses\n'
        '@dataclasses.dataclass\n'
        'class Point:\n'
        '    x: int\n'
        '    y: int = 0\n'
        'pickle.loads(pickle.dumps(Point(3)))')
    assert outcome.error is None, outcome
    assert outcome.plain == ['Point(x=3, y=0)']


def test_modules_in_cwd_are_importable(driver):
    driver.run('open("helper.py", "w").write("VALUE = 99\\n")')
    assert driver.run('import helper\nhelper.VALUE').plain == ['99']


def test_user_modules_do_not_shadow_the_drivers(driver):
    for name in ('json', 'traceback', 'base64', 'subprocess', 'ast'):
        (driver.cwd / (name + '.py')).write_text('raise ImportError("shadowed")\n')
    outcome = driver.run('display({"a": 1})\n1 / 0')
    assert outcome.plain == ["{'a': 1}"]
    assert outcome.error['name'] == 'ZeroDivisionError'
    assert driver.run('echo fine', 'bash').stdout == b'fine\n'


def test_top_level_await(driver):
    outcome = driver.run('import asyncio\nasync def f():\n    await asyncio.sleep(0)\n'
                         '    return 7\nawait f()')
    assert outcome.error is None, outcome
    assert outcome.plain == ['7']


def test_top_level_await_error_shows_the_cell(driver):
    outcome = driver.run('import asyncio\nawait asyncio.sleep(0)\nawait 1')
    assert outcome.error['name'] == 'TypeError'
    assert outcome.error['traceback'].startswith(
        'Traceback (most recent call last):\n  File "<cell 1>", line 3, in <module>\n')


def test_future_imports_persist(driver):
    driver.run('from __future__ import annotations')
    outcome = driver.run('def f(x: Undefined):\n    pass\nf.__annotations__')
    assert outcome.plain == ["{'x': 'Undefined'}"]


def test_binary_output_arrives_intact(driver):
    outcome = driver.run('import sys, os\n'
                         'sys.stdout.buffer.write(b"\\xff\\x00\\xfe raw|")\n'
                         'print("text")\n'
                         'os.write(1, b"\\x80\\x00end")')
    assert outcome.stdout == b'\xff\x00\xfe raw|text\n\x80\x00end'
    outcome = driver.run(r"printf '\377\000x'", 'bash')
    assert outcome.stdout == b'\xff\x00x'


def test_c_stdio_of_python_is_flushed_before_done(driver):
    outcome = driver.run('import ctypes\nctypes.CDLL(None).printf(b"from C stdio");')
    assert outcome.stdout == b'from C stdio'


def test_fd_3_is_not_inherited_by_children(driver):
    outcome = driver.run('import os\nos.system("readlink /proc/self/fd/3 || echo closed")')
    assert outcome.stdout.strip() == b'closed'


def test_forked_child_sends_no_frames(driver):
    outcome = driver.run('import os\npid = os.fork()\nif pid == 0:\n    print("child")\n'
                         'else:\n    os.waitpid(pid, 0)\n    print("parent")\npid > 0')
    assert sorted(outcome.stdout.split()) == [b'child', b'parent']
    assert outcome.plain == ['True']
    assert driver.run('2 + 2').plain == ['4']


def test_display_from_a_thread_after_done_is_dropped(driver):
    threads = int(proc_status(driver.proc.pid)["Threads"])
    driver.run('import threading, time\n'
               'threading.Thread(target=lambda: (time.sleep(0.3), display("late"))).start()')
    # The thread has displayed and ended.
    assert wait_for(lambda: int(proc_status(driver.proc.pid)["Threads"]) == threads, 10), \
        proc_status(driver.proc.pid)["Threads"]
    outcome = driver.run('"now"')
    assert outcome.plain == ["'now'"]       # the harness rejects frames of a finished exec


def test_display_from_a_thread_goes_to_the_exec_in_flight(driver):
    outcome = driver.run('import threading\n'
                         't = threading.Thread(target=display, args=("threaded",))\n'
                         't.start(); t.join()')
    assert outcome.plain == ["'threaded'"]


# ---------------------------------------------------------------- rich results

def test_rich_representations(driver):
    outcome = driver.run(
        'class Rich:\n'
        '    def __repr__(self): return "Rich()"\n'
        '    def _repr_html_(self): return "<b>rich</b>"\n'
        '    def _repr_markdown_(self): return "**rich**"\n'
        '    def _repr_svg_(self): return "<svg></svg>"\n'
        '    def _repr_png_(self): return b"\\x89PNG\\r\\n\\x1a\\nfake"\n'
        '    def _repr_jpeg_(self): return "not base64!"\n'
        '    def _repr_latex_(self): return "$x$"\n'
        '    def _repr_json_(self): return {"a": [1, 2]}\n'
        'Rich()')
    assert outcome.results == [{
        'text/plain': 'Rich()', 'text/html': '<b>rich</b>', 'text/markdown': '**rich**',
        'image/svg+xml': '<svg></svg>', 'text/latex': '$x$', 'application/json': '{"a": [1, 2]}',
        'image/png': base64.b64encode(PNG_SIGNATURE + b'fake').decode()}]
    assert 'neither bytes nor base64' in outcome.err          # the bad _repr_jpeg_


def test_classes_get_only_text(driver):
    outcome = driver.run('class Rich:\n    def _repr_html_(self): return "<b>x</b>"\nRich')
    assert outcome.results == [{'text/plain': "<class '__main__.Rich'>"}]


def test_repr_that_raises(driver):
    outcome = driver.run(
        'class Bad:\n'
        '    def __repr__(self): raise ValueError("no repr")\n'
        '    def _repr_html_(self): raise RuntimeError("no html")\n'
        'Bad()')
    assert outcome.error is None and outcome.exit_code == 0
    [data] = outcome.results
    assert list(data) == ['text/plain']
    assert 'Bad object at 0x' in data['text/plain']
    assert 'ValueError: no repr' in data['text/plain']
    assert 'RuntimeError: no html' in outcome.err
    assert driver.run('1').plain == ['1']


def test_huge_repr_is_capped(driver):
    outcome = driver.run('"é" * 5_000_000')
    [text] = outcome.plain
    assert len(text.encode()) < (64 << 10) + 200
    assert 'cut at 64 KiB' in text
    outcome = driver.run('class Big:\n    def _repr_html_(self): return "x" * (9 << 20)\nBig()')
    assert 'text/html' not in outcome.results[0]
    assert 'larger than 8 MiB' in outcome.err


def test_dataframe_and_series_give_html(driver):
    outcome = driver.run('import pandas as pd\ndf = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})\n'
                         'display(df)\ndf["a"]')
    frame, series = outcome.results
    assert '<table' in frame['text/html'] and 'a  b' in frame['text/plain']
    assert '<table' in series['text/html'] and 'Name: a' in series['text/plain']


# ---------------------------------------------------------------- matplotlib

def decode_png(data):
    png = base64.b64decode(data['image/png'], validate=True)
    assert png.startswith(PNG_SIGNATURE)
    return png


def test_open_figures_become_png_results(driver):
    outcome = driver.run('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]);')
    [data] = outcome.results
    decode_png(data)
    assert data['text/plain'] == '<Figure size 640x480 with 1 Axes>'
    assert driver.run('plt.get_fignums()').plain == ['[]']     # closed afterwards


def test_pyplot_show_sends_each_figure(driver):
    outcome = driver.run('import matplotlib.pyplot as plt\n'
                         'plt.plot([1, 2]); plt.show()\n'
                         'print("between")\n'
                         'plt.hist([1, 1, 2]); plt.show()\n'
                         'fig, axes = plt.subplots(1, 2)\n'
                         'fig')
    assert [r['text/plain'] for r in outcome.results] == [
        '<Figure size 640x480 with 1 Axes>', '<Figure size 640x480 with 1 Axes>',
        '<Figure size 640x480 with 2 Axes>']                    # fig is not sent twice
    for data in outcome.results:
        decode_png(data)


def test_figures_are_sent_after_an_error_too(driver):
    outcome = driver.run('import matplotlib.pyplot as plt\nplt.plot([1, 2])\n1 / 0')
    assert outcome.error['name'] == 'ZeroDivisionError'
    [data] = outcome.results
    decode_png(data)


# ---------------------------------------------------------------- errors

def test_exception_traceback_shows_user_lines_only(driver):
    outcome = driver.run('def f():\n    return 1 / 0\n\nf()')
    error = outcome.error
    assert (error['name'], error['message']) == ('ZeroDivisionError', 'division by zero')
    tb = error['traceback']
    assert tb.startswith('Traceback (most recent call last):\n')
    assert 'File "<cell 1>", line 4, in <module>\n    f()' in tb
    assert 'File "<cell 1>", line 2, in f\n    return 1 / 0' in tb
    assert tb.endswith('ZeroDivisionError: division by zero\n')
    assert 'driver.py' not in tb
    assert outcome.exit_code == 1


def test_traceback_reaches_into_earlier_cells(driver):
    driver.run('def g(x):\n    return x["missing"]')
    outcome = driver.run('g({})')
    assert outcome.error['name'] == 'KeyError'
    assert outcome.error['message'] == "'missing'"
    assert 'File "<cell 1>", line 2, in g\n    return x["missing"]' in outcome.error['traceback']


def test_exception_names(driver):
    outcome = driver.run('class MyError(Exception):\n    pass\nraise MyError("mine")')
    assert (outcome.error['name'], outcome.error['message']) == ('MyError', 'mine')
    outcome = driver.run('import json\njson.loads("{")')
    assert outcome.error['name'] == 'json.decoder.JSONDecodeError'


def test_syntax_error_shows_line_and_caret(driver):
    outcome = driver.run('x = 1\nif x\n    pass')
    error = outcome.error
    assert error['name'] == 'SyntaxError'
    assert error['traceback'] == ('  File "<cell 1>", line 2\n    if x\n        ^\n'
                                  "SyntaxError: expected ':'\n")
    assert outcome.exit_code == 1 and outcome.results == []


def test_indentation_and_compile_time_errors(driver):
    outcome = driver.run('def f():\nreturn 1')
    assert outcome.error['name'] == 'IndentationError'
    outcome = driver.run('x = 1\nreturn x')
    assert outcome.error['name'] == 'SyntaxError'
    assert "'return' outside function" in outcome.error['message']
    assert 'line 2\n    return x\n    ^' in outcome.error['traceback']


def test_system_exit(driver):
    outcome = driver.run('print("before")\nraise SystemExit(3)\nprint("after")')
    assert (outcome.exit_code, outcome.error, outcome.stdout) == (3, None, b'before\n')
    assert driver.run('exit()').exit_code == 0
    outcome = driver.run('import sys\nsys.exit("bye")')
    assert (outcome.exit_code, outcome.error, outcome.stderr) == (1, None, b'bye\n')
    assert driver.run('"still here"').plain == ["'still here'"]


def test_keyboard_interrupt_in_python(driver):
    driver.run('kept = 42')
    outcome = driver.run('import time\nprint("sleeping", flush=True)\ntime.sleep(30)',
                         interrupt_on=b'sleeping')
    assert outcome.error['name'] == 'KeyboardInterrupt'
    assert 'time.sleep(30)' in outcome.error['traceback']
    assert 'driver.py' not in outcome.error['traceback']
    assert outcome.exit_code == 1
    assert driver.run('kept').plain == ['42']


def test_keyboard_interrupt_while_displaying(driver):
    outcome = driver.run('print("go", flush=True)\nwhile True:\n    display(1)',
                         interrupt_on=b'go')
    assert outcome.error['name'] == 'KeyboardInterrupt'
    assert 'driver.py' not in outcome.error['traceback']
    assert outcome.results and all(r == {'text/plain': '1'} for r in outcome.results)
    assert driver.run('2').plain == ['2']


def test_error_text_is_bounded_and_frame_safe(driver):
    outcome = driver.run('raise ValueError("a\\x00b" + "\\udcff" + "x" * 200_000)')
    message = outcome.error['message']
    assert message.startswith('a\ufffdb\\udcff') and 'bytes omitted' in message
    assert len(message.encode()) <= 64 << 10
    outcome = driver.run('raise ValueError("é" * 100_000)')
    message = outcome.error['message']
    assert message.startswith('éé') and message.endswith('éé')
    assert len(message.encode()) <= 64 << 10
    assert len(outcome.error['traceback'].encode()) <= 256 << 10


# ---------------------------------------------------------------- bash

def test_bash_output_and_exit_status(driver):
    outcome = driver.run('echo out\necho err >&2', 'bash')
    assert (outcome.stdout, outcome.stderr) == (b'out\n', b'err\n')
    assert (outcome.error, outcome.exit_code, outcome.results) == (None, 0, [])
    outcome = driver.run('echo partial\nexit 3', 'bash')
    assert outcome.stdout == b'partial\n'
    assert outcome.error == {'type': 'error', 'id': outcome.error['id'], 'name': 'NonZeroExit',
                             'message': 'exit status 3', 'traceback': ''}
    assert outcome.exit_code == 3


def test_bash_shares_files_and_cwd_with_python(driver):
    driver.run('import os\nopen("data.txt", "w").write("from python\\n")\n'
               'os.mkdir("sub")\nos.chdir("sub")')
    outcome = driver.run('cat ../data.txt\npwd\nreadlink /proc/$$/fd/0', 'bash')
    lines = outcome.stdout.decode().splitlines()
    assert lines == ['from python', str(driver.cwd / 'sub'), '/dev/null']


def test_bash_scratch_files_are_private_and_removed(driver):
    outcome = driver.run('echo "$0"\nstat -c %a "$(dirname "$0")"', 'bash')
    script, mode = outcome.stdout.decode().split()
    assert script.startswith('/tmp/') and mode == '700'
    assert not os.path.exists(os.path.dirname(script))


def test_sigint_kills_a_bash_child_promptly(driver):
    outcome = driver.run('sleep 30 &\necho $! > sleeper.pid\necho started\nwait\necho never',
                         'bash', interrupt_on=b'started')
    assert b'never' not in outcome.stdout
    assert outcome.error['name'] == 'KeyboardInterrupt'
    assert outcome.exit_code == 130
    sleeper = int((driver.cwd / 'sleeper.pid').read_text())
    # Ended (gone, or a zombie waiting for its reaper) within a second.
    assert wait_for(lambda: ended(sleeper), 1, 0.02), f'the sleeper {sleeper} still runs'
    assert driver.run('echo again', 'bash').stdout == b'again\n'


# ---------------------------------------------------------------- C

HELLO = '#include <stdio.h>\nint main(void) { printf("hello"); return 0; }\n'


def test_c_hello_world(driver):
    outcome = driver.run(HELLO, 'c')
    assert (outcome.stdout, outcome.error, outcome.exit_code) == (b'hello', None, 0)


def test_c_exit_status_and_math(driver):
    outcome = driver.run('#include <math.h>\n#include <stdio.h>\n'
                         'int main(void) { printf("%.0f\\n", sqrt(49.0)); return 4; }', 'c')
    assert outcome.stdout == b'7\n'
    assert (outcome.error['name'], outcome.exit_code) == ('NonZeroExit', 4)


def test_c_compile_error(driver):
    outcome = driver.run('int main(void) { return undefined_name; }', 'c')
    error = outcome.error
    assert error['name'] == 'CompileError'
    assert 'undefined_name' in error['message'] and 'error:' in error['message']
    assert 'main.c:1' in error['traceback']
    assert b'undefined_name' in outcome.stderr            # compiler output streamed live
    assert outcome.exit_code == 1 and outcome.stdout == b''


def test_c_killed_by_a_signal(driver):
    outcome = driver.run('#include <stdlib.h>\n#include <stdio.h>\n'
                         'int main(void) { puts("dying"); fflush(stdout); abort(); }', 'c')
    assert outcome.stdout == b'dying\n'
    assert outcome.error['name'] == 'Signal'
    assert 'SIGABRT' in outcome.error['message']
    assert outcome.exit_code == 134


def test_sigint_kills_a_c_program(driver):
    outcome = driver.run('#include <stdio.h>\n#include <unistd.h>\n'
                         'int main(void) { puts("started"); fflush(stdout); sleep(30); }',
                         'c', interrupt_on=b'started')
    assert (outcome.error['name'], outcome.exit_code) == ('KeyboardInterrupt', 130)


# ---- programs: the table's (file, compile, run) ----------------------------

def test_program_paths_are_never_split_nor_read_by_a_shell(driver, tmp_path):
    odd = tmp_path / "a dir; $(touch pwned)"
    odd.mkdir()
    plain = {'file': 'main.sh', 'run': '/bin/cat {file}'}
    piped = {'file': 'main.sh', 'run': 'cat {file} | wc -c'}
    assert run_in(driver, 'echo x', language='shx', program=plain, cwd=str(odd)).out == 'echo x'
    assert run_in(driver, 'echo x', language='shx', program=piped, cwd=str(odd)).out.strip() == '6'
    assert (odd / 'main.sh').read_text() == 'echo x'     # written in the working directory
    assert not (odd / 'pwned').exists() and not (tmp_path / 'pwned').exists()


def test_a_program_whose_command_is_missing(driver):
    for program in ({'file': '{tmp}/a', 'run': 'no-such-runtime-petri {file}'},
                    {'file': '{tmp}/a', 'compile': 'no-such-compiler-petri a', 'run': 'x'}):
        outcome = run_in(driver, 'x', language='shx', program=program)
        assert outcome.error['name'] == 'CommandNotFound', outcome.error
        assert 'no-such-' in outcome.error['message'] and outcome.exit_code == 127


def test_the_value_of_a_program_is_found_among_many_files(driver):
    code = ('cd "$PETRI_RESULTS"; for i in $(seq 1200); do echo $i > f$i.txt; done; '
            'echo value > main.txt; head -c 9000000 /dev/zero > big.png')
    outcome = run_in(driver, code, language='shx',
                     program={'file': '{tmp}/m.sh', 'run': '/bin/bash {file}'})
    mains = [f for f in outcome.frames if f['type'] == 'result' and f.get('main')]
    assert [m['data'] for m in mains] == [{'text/plain': 'value\n'}]
    assert 'more than 1000 files' in outcome.err
