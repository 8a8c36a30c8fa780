"""Rich results, the data stack, files, and structured errors."""

import base64
import io
import json
import os
import struct

import pytest

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def _png_size(data):
    assert data[:8] == PNG_SIGNATURE
    length, ctype = struct.unpack('>I4s', data[8:16])
    assert ctype == b'IHDR' and length == 13
    return struct.unpack('>II', data[16:24])


def test_dataframe_gives_html_table(petri_json):
    r = petri_json('import pandas as pd\n'
                   'pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [3, 19]})')
    assert r['status'] == 'ok', r.describe()
    assert len(r['results']) == 1
    bundle = r['results'][0]
    assert '<table' in bundle['text/html']
    assert 'Oslo' in bundle['text/html'] and 'Lima' in bundle['text/html']
    assert 'Oslo' in bundle['text/plain']


def test_matplotlib_figure_gives_a_png(petri_json):
    r = petri_json('import matplotlib.pyplot as plt\n'
                   'fig, ax = plt.subplots(figsize=(4, 3), dpi=50)\n'
                   'ax.plot([1, 3, 2])\n'
                   'None')
    assert r['status'] == 'ok', r.describe()
    pngs = [b for b in r['results'] if 'image/png' in b]
    assert len(pngs) == 1, r.describe()
    data = base64.b64decode(pngs[0]['image/png'], validate=True)
    width, height = _png_size(data)
    # 4x3 inches at 50 dpi; the driver may crop the margins (bbox "tight")
    assert 100 <= width <= 200 and 75 <= height <= 150, (width, height)
    assert 'Figure' in pngs[0].get('text/plain', '')
    try:
        from PIL import Image
    except ImportError:
        return
    img = Image.open(io.BytesIO(data))
    img.verify()
    assert img.size == (width, height)


PLOTLY = 'application/vnd.plotly.v1+json'
PLOTLY_JS = '/usr/lib/R/site-library/plotly/htmlwidgets/lib/plotlyjs/plotly-latest.min.js'


def _plotly_js_or_skip():
    if not os.path.exists(PLOTLY_JS):
        pytest.skip('plotly.js is not installed (Debian package r-cran-plotly)')


def test_plotly_figure_gives_its_json_and_html(petri_json):
    """A plotly figure as the last expression, from fig.show() and from
    plotly.io.show() (a dict too): Jupyter's plotly type, and HTML that
    draws it with a plotly.js on the page, never from a CDN."""
    _plotly_js_or_skip()
    r = petri_json('import plotly.express as px, plotly.io as pio\n'
                   'fig = px.bar(x=["a", "b"], y=[1, 2], title="t</script><b>x")\n'
                   'fig.update_layout(height=300)\n'
                   'fig.show()\n'
                   'pio.show({"data": [{"type": "scatter", "y": [3, 1, 2]}]})\n'
                   'fig')
    assert r['status'] == 'ok', r.describe()
    assert 'renderer' not in r['stderr'] and '[petri]' not in r['stderr'], r['stderr']
    assert len(r['results']) == 3, r.describe()
    for bundle in r['results']:
        assert set(bundle) == {PLOTLY, 'text/html', 'text/plain'}, bundle.keys()
        figure = json.loads(bundle[PLOTLY])
        assert isinstance(figure['data'], list) and isinstance(figure['layout'], dict)
        html = bundle['text/html']
        assert 'Plotly.newPlot' in html and '<noscript>' in html
        assert 'cdn' not in html.lower() and 'http' not in html
        assert '</script>' not in html.replace('</script>\n', '', 1)   # the figure's title cannot close it
    bar, scatter, last = (json.loads(b[PLOTLY]) for b in r['results'])
    assert bar['data'][0]['type'] == 'bar' and bar['data'][0]['y'] == [1, 2]
    assert bar['layout']['title']['text'] == 't</script><b>x'
    assert 'height:300px' in r['results'][0]['text/html']
    assert scatter['data'][0] == {'type': 'scatter', 'y': [3, 1, 2]}
    assert last == bar
    assert r['results'][0]['text/plain'].startswith('Figure(')


def test_plotly_without_plotly_js_gives_json_only_and_says_so(petri_json):
    # The driver looks for plotly.js with os.path.exists: the code hides it.
    r = petri_json('import os\n'
                   'real = os.path.exists\n'
                   'os.path.exists = lambda p: "plotly" not in str(p) and real(p)\n'
                   'import plotly.graph_objects as go\n'
                   'fig = go.Figure(go.Scatter(y=[1, 2]))\n'
                   'fig.show()\n'
                   'fig')
    assert r['status'] == 'ok', r.describe()
    assert [set(b) for b in r['results']] == [{PLOTLY, 'text/plain'}] * 2, r.describe()
    assert r['stderr'].count('plotly.js is not installed') == 1, r['stderr']
    assert 'r-cran-plotly' in r['stderr']


def test_plotly_write_html_inlines_debians_plotly_js(petri_json):
    """Debian's plotly.py has no plotly.js of its own: write_html() would
    fail; petri points it at the Debian package's, so the file works offline."""
    _plotly_js_or_skip()
    r = petri_json('import plotly.graph_objects as go\n'
                   'go.Figure(go.Scatter(y=[1, 2])).write_html("chart.html")\n'
                   'html = open("chart.html").read()\n'
                   'print(len(html) > 1_000_000, "plotly.js v" in html, "<script src=" in html)')
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'] == 'True True False\n', r.describe()


def test_data_stack_imports_and_works(petri_json):
    code = '''
import numpy as np, pandas as pd, matplotlib, scipy, openpyxl
from scipy import optimize, stats
a = np.arange(12).reshape(3, 4)
print("numpy", int(a.sum()), a.shape)
df = pd.DataFrame({"g": ["a", "b", "a"], "v": [1, 2, 3]})
print("pandas", df.groupby("g").v.sum().to_dict())
root = optimize.brentq(lambda x: x * x - 2, 0, 2)
print("scipy", round(root, 6), round(float(stats.norm.cdf(0)), 3))
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig = plt.figure(); plt.close(fig)
print("matplotlib", matplotlib.get_backend().lower())
print("openpyxl", bool(openpyxl.__version__))
'''
    r = petri_json(code)
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'].splitlines() == [
        'numpy 66 (3, 4)',
        "pandas {'a': 4, 'b': 2}",
        'scipy 1.414214 0.5',
        'matplotlib agg',
        'openpyxl True',
    ]


def test_openpyxl_xlsx_roundtrip_with_pandas(petri_json):
    code = '''
import openpyxl, pandas as pd
wb = openpyxl.Workbook()
ws = wb.active
ws.append(["name", "qty"])
ws.append(["apple", 3])
ws.append(["pear", 5])
wb.save("/work/stock.xlsx")
df = pd.read_excel("/work/stock.xlsx")
print(df.to_dict("list"))
'''
    r = petri_json(code)
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'] == "{'name': ['apple', 'pear'], 'qty': [3, 5]}\n"
    files = {f['path']: f['size'] for f in r['files']}
    assert files.get('stock.xlsx', 0) > 1000


def test_files_written_to_work_are_listed_with_sizes(petri_json):
    code = '''
import os
os.makedirs("/work/out/deep", exist_ok=True)
open("/work/a.txt", "w").write("hello")
open("/work/out/deep/b.bin", "wb").write(b"\\0" * 4321)
open("/work/empty", "w").close()
open("/tmp/not_listed.txt", "w").write("tmp is not the workspace")
'''
    r = petri_json(code)
    assert r['status'] == 'ok', r.describe()
    files = {f['path']: f['size'] for f in r['files']}
    assert files == {'a.txt': 5, 'out/deep/b.bin': 4321, 'empty': 0}


def test_files_from_bash_are_listed(petri_json):
    r = petri_json('printf abc > /work/from_bash.txt', lang='bash')
    assert r['files'] == [{'path': 'from_bash.txt', 'size': 3}], r.describe()


def test_display_builtin_produces_results_in_order(petri_json):
    r = petri_json('display(1)\ndisplay("two")\n3')
    assert r['status'] == 'ok', r.describe()
    assert [b['text/plain'] for b in r['results']] == ['1', "'two'", '3']


# ---- errors --------------------------------------------------------------------

def test_exception_name_message_and_traceback(petri_json):
    code = ('def divide(a, b):\n'
            '    return a / b\n'
            '\n'
            'print("start")\n'
            'divide(1, 0)\n')
    r = petri_json(code)
    assert r['status'] == 'error', r.describe()
    assert r['exit_code'] == 1
    assert r['stdout'] == 'start\n'
    err = r['error']
    assert err['name'] == 'ZeroDivisionError'
    assert err['message'] == 'division by zero'
    tb = err['traceback']
    assert tb.startswith('Traceback (most recent call last):')
    assert 'line 5' in tb and 'divide(1, 0)' in tb
    assert 'line 2' in tb and 'return a / b' in tb
    assert tb.rstrip().endswith('ZeroDivisionError: division by zero')
    assert 'driver.py' not in tb and '/opt/petri' not in tb


def test_exception_from_library_keeps_user_frame(petri_json):
    r = petri_json('import json\njson.loads("{not json")')
    # non-builtin exceptions may be given with their module
    assert r['error']['name'].split('.')[-1] == 'JSONDecodeError', r.describe()
    tb = r['error']['traceback']
    assert 'line 2' in tb and 'json.loads' in tb
    assert 'driver.py' not in tb


def test_syntax_error(petri_json):
    r = petri_json('print("ok")\ndef broken(:\n    pass\n')
    assert r['status'] == 'error', r.describe()
    assert r['exit_code'] == 1
    assert r['stdout'] == ''          # nothing ran
    assert r['error']['name'] == 'SyntaxError'
    tb = r['error']['traceback']
    assert 'line 2' in tb
    assert 'def broken(:' in tb
    assert '^' in tb
    assert 'driver.py' not in tb


def test_sys_exit_3_gives_exit_code_3(petri_json):
    r = petri_json('import sys\nprint("bye")\nsys.exit(3)')
    assert r['exit_code'] == 3, r.describe()
    assert r['status'] == 'error'
    assert r['stdout'] == 'bye\n'
    assert r.rc == 3


def test_sys_exit_0_is_ok(petri_json):
    r = petri_json('import sys\nsys.exit(0)')
    assert r['status'] == 'ok', r.describe()
    assert r['exit_code'] == 0


def test_c_crash_reports_the_signal(petri_json):
    r = petri_json('#include <signal.h>\nint main(void){ raise(SIGSEGV); return 0; }', lang='c')
    assert r['status'] == 'error', r.describe()
    assert r['exit_code'] == 128 + 11
    assert r['error']['name'] == 'Signal'
    assert 'SIGSEGV' in r['error']['message']


# ---- statuses that come from the supervisor ------------------------------------------

def test_runtime_killed_by_a_signal_is_killed(petri_json):
    r = petri_json('import os, signal\nprint("bye", flush=True)\nos.kill(os.getpid(), signal.SIGKILL)')
    assert r['status'] == 'killed', r.describe()
    assert r['signal'] == 9
    assert r['stdout'] == 'bye\n'
    assert r['reason']
    assert r.rc == 128 + 9


def test_garbage_on_the_control_socket_is_a_protocol_violation(petri_json):
    r = petri_json('import os\nos.write(3, b"\\x00\\x00\\x00\\x05hello")\nimport time\ntime.sleep(5)')
    assert r['status'] == 'killed', r.describe()
    assert 'protocol' in r['reason']
    assert r.wall < 4


def test_oversized_frame_is_a_protocol_violation(petri_json):
    r = petri_json('import os\nos.write(3, b"\\xff\\xff\\xff\\xff")\nimport time\ntime.sleep(5)')
    assert r['status'] == 'killed', r.describe()
    assert 'protocol' in r['reason']


def test_file_goes_into_work(petri_json, petri_raw, tmp_path):
    (tmp_path / 'sales.csv').write_text('region,amount\nnorth,10\nsouth,32\n')
    (tmp_path / 'notes.bin').write_bytes(b'\x00\xff')
    r = petri_json('import pandas as pd\nprint(pd.read_csv("sales.csv").amount.sum())\n'
                   'print(open("notes.bin", "rb").read())',
                   '--file', tmp_path / 'sales.csv', '-f', tmp_path / 'notes.bin')
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'] == "42\nb'\\x00\\xff'\n"
    # Not written by the code: not listed.
    assert r['files'] == []
    bad = petri_raw(['run', '--file', tmp_path / 'missing.csv', '-c', '1'])
    assert bad.rc == 2 and b'missing.csv' in bad.proc.stderr


def test_save_dir_keeps_charts_and_written_files(petri_raw, tmp_path):
    (tmp_path / 'sales.csv').write_text('a,b\n1,2\n3,5\n')
    out = tmp_path / 'out'
    r = petri_raw(['run', '--file', tmp_path / 'sales.csv', '--save-dir', out, '-c',
                   'import os, pandas as pd, matplotlib.pyplot as plt\n'
                   'df = pd.read_csv("sales.csv")\nos.makedirs("sub")\n'
                   'df.assign(c=df.a + df.b).to_csv("sub/total.csv", index=False)\n'
                   'plt.plot(df.a, df.b)\nplt.show()\n'])
    assert r.rc == 0, r.describe()
    png = (out / 'result-1.png').read_bytes()
    assert _png_size(png)[0] > 0
    assert (out / 'files' / 'sub' / 'total.csv').read_text() == 'a,b,c\n1,2,3\n3,5,8\n'
    err = r.proc.stderr.decode()
    assert f'saved {out}/result-1.png' in err and f'saved {out}/files/sub/total.csv' in err


def test_tests_come_back_as_data(petri_json, petri_raw, tmp_path):
    (tmp_path / 'test_m.py').write_text('def test_ok():\n    pass\n\n'
                                        'def test_no():\n    assert 1 == 2\n')
    r = petri_json('python3 -m pytest -q -p no:cacheprovider --junitxml=out.xml',
                   '--tests', 'junit:out.xml', '-f', tmp_path / 'test_m.py', lang='bash')
    assert r['status'] == 'error', r.describe()
    t = r['tests']
    assert (t['passed'], t['failed'], t['reports']) == (1, 1, ['out.xml']), r.describe()
    no = [c for c in t['cases'] if c['name'] == 'test_no'][0]
    assert (no['file'], no['line'], no['message']) == ('test_m.py', 5, 'assert 1 == 2'), no
    bad = petri_raw(['run', '--tests', 'junit:../x.xml', '-c', '1'])
    assert bad.rc == 2 and b"'tests'" in bad.proc.stderr


def test_json_refusals_are_one_json_object(petri_raw, tmp_path):
    """With --json, a refused run still prints exactly one JSON object on
    stdout (status error, the code and message an HTTP client reads) and
    exits non-zero: a script that parses it never gets nothing."""
    import json
    cases = [
        (['run', '--json', '--timeout', '999999', '-c', '1'], 'invalid_request', 'timeout_s'),
        (['run', '--json', '-l', 'ruby', '-c', 'x'], 'invalid_request', "'ruby'"),
        (['run', '--json', str(tmp_path / 'none.py')], 'invalid_request', 'none.py'),
        (['run', '--json', '-c', '1', str(tmp_path / 'none.py')], 'invalid_request', 'not both'),
    ]
    for args, code, words in cases:
        run = petri_raw(args)
        out = run.proc.stdout
        assert out.count(b'\n') == 1 and out.endswith(b'\n'), (args, out, run.proc.stderr)
        r = json.loads(out)
        assert r['status'] == 'error' and r['error']['code'] == code, (args, r)
        assert words in r['error']['message'], (args, r)
        assert run.rc == 2, (args, run.rc)
