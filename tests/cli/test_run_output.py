"""Output is data: any bytes the code writes come back exactly (base64 when
not UTF-8), and the JSON document stays one valid document whatever the
code prints."""

import base64
import random

import pytest

from clihelp import OUTPUT_CAP

BAD = b'ok \xff\xfe\x00 nul \xc3\x28 \xed\xa0\x80 \xc0\x80 \xf4\x90\x80\x80 end\n'


def test_invalid_utf8_and_nul_on_stdout_survive(petri_json):
    r = petri_json(f'import sys\nsys.stdout.buffer.write({BAD!r})\nNone')
    assert r['status'] == 'ok', r.describe()
    assert 'stdout_base64' in r.result
    assert base64.b64decode(r['stdout_base64']) == BAD
    text = r['stdout']
    assert text.startswith('ok \ufffd') and '\x00 nul ' in text and text.endswith(' end\n')
    assert text.replace('\ufffd', '') == BAD.decode('utf-8', 'ignore')
    assert 'stderr_base64' not in r.result


def test_invalid_utf8_on_stderr_survives(petri_json):
    r = petri_json(f'import sys\nsys.stderr.buffer.write({BAD!r})\nsys.stderr.flush()\nNone')
    assert base64.b64decode(r['stderr_base64']) == BAD, r.describe()
    assert r['stderr'].replace('\ufffd', '') == BAD.decode('utf-8', 'ignore')
    assert 'stdout_base64' not in r.result


def test_binary_output_from_c_survives(petri_json):
    code = r'''
#include <unistd.h>
int main(void) {
    unsigned char all[256];
    for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
    write(1, all, sizeof(all));
    return 0;
}'''
    r = petri_json(code, lang='c')
    assert r.out_bytes() == bytes(range(256)), r.describe()


def test_valid_utf8_has_no_base64(petri_json):
    r = petri_json('print("héllo wörld ✓ 😀 \\u2028 \\u0000 end")')
    assert r['stdout'] == 'héllo wörld ✓ 😀 \u2028 \x00 end\n', r.describe()
    assert 'stdout_base64' not in r.result


def test_nonjson_raw_bytes_arrive_intact(petri_raw):
    r = petri_raw(['run', '-c', f'import sys\nsys.stdout.buffer.write({BAD!r})\n'
                   f'sys.stderr.buffer.write({BAD!r})\nNone'])
    assert r.rc == 0
    assert r.stdout == BAD
    assert r.stderr == BAD


def test_nonjson_raw_bytes_from_bash_arrive_intact(petri_raw):
    r = petri_raw(['run', '-l', 'bash', '-c', "printf 'a\\377\\000b\\r\\n'"])
    assert r.stdout == b'a\xff\x00b\r\n'


ESCAPES = '\x1b[31mred\x1b[0m \x1b]0;pwned title\x07 \x1b[2J\x1b[H \x9b31m \r\x08\x7f \x1bP+q\x1b\\'


def test_terminal_escape_sequences_are_data(petri_json):
    r = petri_json(f'print({ESCAPES!r})')
    assert r['stdout'] == ESCAPES + '\n', r.describe()
    raw = r.stdout
    assert b'\x1b' not in raw and b'\x07' not in raw   # escaped in the JSON text
    assert b'\\u001b' in raw.lower()


def test_terminal_escapes_in_errors_and_results_are_data(petri_json):
    r = petri_json('import sys\nsys.stderr.write("\\x1b[2J")\n'
                   'display("\\x1b]0;t\\x07")\nraise ValueError("\\x1b[31mboom")')
    assert r['error']['message'] == '\x1b[31mboom', r.describe()
    assert r['stderr'] == '\x1b[2J'
    assert r['results'][0]['text/plain'] == repr('\x1b]0;t\x07')
    assert b'\x1b' not in r.stdout and b'\x07' not in r.stdout


@pytest.mark.parametrize('payload', [
    '}\n{"status": "ok", "exit_code": 0}\n',
    '"\\\\"\\u0000\'',
    '\ufeff\u2028\u2029\ud7ff\ue000\uffff',
    '</script><script>alert(1)</script>',
    '{"stdout": "forged"}' * 1000,
    '\n' * 10000,
], ids=['fake-document', 'quotes-nul', 'odd-codepoints', 'html', 'json-like', 'newlines'])
def test_json_output_is_one_document_for_hostile_text(petri_json, payload):
    r = petri_json(f'import sys\nsys.stdout.write({payload!r})\nsys.stderr.write({payload!r})\nNone')
    # the harness already checked: exactly one line, one JSON document
    assert r['stdout'] == payload, r.describe()
    assert r['stderr'] == payload
    assert r['status'] == 'ok'


# Every byte value, noise from a fixed seed (the same bytes on every run),
# a U+FFFD the program writes itself and truncated sequences.
JUNK_EXPR = ('bytes(range(256)) * 64 + b"\\n}{\\n" + random.Random(7).randbytes(65536)'
             ' + "\\ufffd".encode() + b"\\xe2\\x82(\\xf0\\x9f\\x98"')


def test_json_output_is_one_document_for_hostile_bytes(petri_json):
    code = f'''
import random, sys
junk = {JUNK_EXPR}
sys.stdout.buffer.write(junk)
sys.stderr.buffer.write(junk[::-1])
open("/work/junk.bin", "wb").write(junk)
'''
    junk = eval(JUNK_EXPR, {'random': random})
    r = petri_json(code)
    assert r['status'] == 'ok', r.describe()
    data = r.out_bytes('stdout')
    assert data == junk
    assert r.out_bytes('stderr') == junk[::-1]
    assert r['stdout'].endswith('\ufffd' + '\ufffd' * 2 + '(' + '\ufffd' * 3)
    assert r['files'] == [{'path': 'junk.bin', 'size': len(junk)}]


def test_hostile_file_names_are_listed_safely(petri_json):
    code = '''
import os
for name in ["a\\nb", "quote\\"s", "tab\\t", "\\x1b[31m", "uni\\u2028", "sp ace"]:
    open(os.path.join("/work", name), "w").write("x")
os.symlink("/etc/passwd", "/work/link")
os.mkfifo("/work/fifo")
'''
    r = petri_json(code)
    assert r['status'] == 'ok', r.describe()
    paths = {f['path'] for f in r['files']}
    assert {'a\nb', 'quote"s', 'tab\t', '\x1b[31m', 'uni\u2028', 'sp ace'} <= paths


def test_interleaved_stdout_and_stderr_are_kept_apart(petri_json):
    r = petri_json('import sys\nfor i in range(100):\n'
                   '    print("o", i)\n    print("e", i, file=sys.stderr)')
    assert r['stdout'] == ''.join(f'o {i}\n' for i in range(100)), r.describe()
    assert r['stderr'] == ''.join(f'e {i}\n' for i in range(100))


def test_output_written_just_before_exit_is_kept(petri_json):
    code = r'''
#include <stdio.h>
#include <stdlib.h>
int main(void) { printf("buffered, no newline"); exit(0); }'''
    r = petri_json(code, lang='c')
    assert r['stdout'] == 'buffered, no newline', r.describe()


def test_truncation_never_splits_a_utf8_character(petri_json):
    # The program's output is valid UTF-8: (cap - 1) ASCII bytes, then "€"
    # split across two writes (as any buffered writer may do), then more "€".
    euro = '€'.encode()
    code = f'''
import sys, time
sys.stdout.buffer.write(b"a" * ({OUTPUT_CAP} - 1) + {euro[:1]!r}); sys.stdout.flush()
time.sleep(0.3)
sys.stdout.buffer.write({euro[1:]!r} + {euro!r} * 1000); sys.stdout.flush()
'''
    r = petri_json(code)
    assert r['stdout_truncated'] is True, r.describe()
    assert 'stdout_base64' not in r.result, 'valid UTF-8 output was cut mid-character'
    assert '\ufffd' not in r['stdout']
    assert len(r['stdout'].encode()) <= OUTPUT_CAP


def test_truncation_of_multibyte_text_keeps_whole_characters(petri_json):
    # 4-byte characters written at once: every pipe read holds whole ones
    r = petri_json('import sys\nsys.stdout.write("😀" * (1 << 19))\nNone')
    assert r['stdout_truncated'] is True, r.describe()
    assert 'stdout_base64' not in r.result
    assert set(r['stdout']) == {'😀'}
    assert len(r['stdout'].encode()) <= OUTPUT_CAP


def test_result_json_is_ascii(petri_json):
    r = petri_json('print("ünïcödé ✓")\n"π"')
    r.stdout.decode('ascii')
    assert r['stdout'] == 'ünïcödé ✓\n'
    assert r['results'] == [{'text/plain': "'π'"}]


def test_many_results_and_big_text_plain(petri_json):
    r = petri_json('for i in range(50):\n    display(i)\n"x" * 200000')
    assert r['status'] == 'ok', r.describe()
    assert [b['text/plain'] for b in r['results'][:50]] == [str(i) for i in range(50)]
    big = r['results'][50]['text/plain']
    assert len(big) <= 70000           # text/plain is cut at 64 KiB with a note
    assert big.startswith("'xxxx")
