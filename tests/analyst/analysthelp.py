"""The analyst suite (issue 12): 25 tasks an analyst gives a code interpreter,
each run in petri and in bare /usr/bin/python3 on the same input files, whose
answers must be identical.  The fixtures are in conftest.py (`inputs`, from
make_inputs(); `servers`, a preloaded and an importing `petri serve`).

make_inputs() -> {name: bytes}
    the input files, from fixed seeds: sales.csv, budget.xlsx (two sheets),
    measurements.csv, customers.csv.

run_petri(server, code, inputs) / run_bare(code, inputs, tmp) -> Answer
    the task as a one-shot (POST /v1/execute with the inputs as files and
    return_files out/*) or as `python3 -c` in a directory holding the
    inputs; Answer: status, stdout and the files under out/, each reduced to
    what the analyst gets from it (see comparable()).
"""
import base64
import io
import os
import subprocess
from dataclasses import dataclass, field

from harness import Api

PY = '/usr/bin/python3'
# What a sandbox's environment has (base_env in src/runtime/box.c), with
# the directory of the run for /work.
BARE_ENV = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'LANG': 'C.UTF-8', 'MPLBACKEND': 'Agg',
            'PYTHONUNBUFFERED': '1', 'PYTHONDONTWRITEBYTECODE': '1', 'TERM': 'dumb'}
# Every task starts with it, inside and out.
PRELUDE = 'import os\nos.makedirs("out", exist_ok=True)\n'
TIMEOUT_S = 120


# ---------------------------------------------------------------- inputs

def make_inputs():
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(12)
    n = 400
    regions = np.array(['north', 'south', 'east', 'west'])
    products = np.array(['apples', 'bread', 'cheese', 'dates', 'eggs'])
    sales = pd.DataFrame({
        'date': pd.date_range('2025-01-01', periods=n, freq='D').strftime('%Y-%m-%d'),
        'region': regions[rng.integers(0, 4, n)],
        'product': products[rng.integers(0, 5, n)],
        'units': rng.integers(1, 60, n),
        'price': rng.uniform(0.5, 9.5, n).round(2),
        'returned': rng.random(n) < 0.07,
    })
    out = {'sales.csv': sales.to_csv(index=False).encode()}

    buf = io.BytesIO()
    months = pd.period_range('2025-01', periods=12, freq='M').astype(str)
    plan = pd.DataFrame([(r, m, int(rng.integers(800, 3000))) for r in regions for m in months],
                        columns=['region', 'month', 'budget'])
    staff = pd.DataFrame({'region': regions, 'headcount': rng.integers(3, 25, 4),
                          'manager': ['Ada', 'Grace', 'Linus', 'Barbara']})
    with pd.ExcelWriter(buf, engine='openpyxl') as xw:
        plan.to_excel(xw, sheet_name='plan', index=False)
        staff.to_excel(xw, sheet_name='staff', index=False)
    out['budget.xlsx'] = buf.getvalue()

    m = 300
    x = rng.normal(size=(m, 3))
    group = np.array(['a', 'b', 'c'])[rng.integers(0, 3, m)]
    y = 1.5 + x @ np.array([2.0, -1.0, 0.5]) + (group == 'b') * 0.8 + rng.normal(0, 0.7, m)
    meas = pd.DataFrame({'x1': x[:, 0], 'x2': x[:, 1], 'x3': x[:, 2], 'group': group, 'y': y})
    out['measurements.csv'] = meas.round(6).to_csv(index=False).encode()

    k = 500
    age = rng.integers(18, 80, k)
    income = rng.normal(50, 15, k).round(2)
    visits = rng.poisson(4, k)
    logit = -2 + 0.03 * (age - 45) - 0.04 * (income - 50) + 0.35 * (visits - 4)
    churned = (rng.random(k) < 1 / (1 + np.exp(-logit))).astype(int)
    cust = pd.DataFrame({'age': age, 'income': income, 'visits': visits,
                         'plan': np.array(['basic', 'plus', 'pro'])[rng.integers(0, 3, k)],
                         'churned': churned})
    out['customers.csv'] = cust.to_csv(index=False).encode()
    return out


# ---------------------------------------------------------------- answers

@dataclass
class Answer:
    status: str
    stdout: str
    files: dict = field(default_factory=dict)
    detail: str = ''


def comparable(path, data):
    """What an analyst takes from a file, without what differs by the clock
    alone: PNG, CSV, text bytes as they are (the tasks fix savefig's
    metadata); a workbook's cell values; a Word document's paragraphs and
    tables; a PDF's page count and text."""
    ext = os.path.splitext(path)[1]
    if ext == '.xlsx':
        import openpyxl
        wb = openpyxl.load_workbook(io.BytesIO(data))
        return {ws.title: [list(r) for r in ws.iter_rows(values_only=True)]
                for ws in wb.worksheets}
    if ext == '.docx':
        import docx
        d = docx.Document(io.BytesIO(data))
        return {'paragraphs': [(p.style.name, p.text) for p in d.paragraphs],
                'tables': [[[c.text for c in row.cells] for row in t.rows] for t in d.tables]}
    if ext == '.pdf':
        import pypdf
        r = pypdf.PdfReader(io.BytesIO(data))
        return {'pages': len(r.pages), 'text': [p.extract_text() for p in r.pages]}
    return data


def run_petri(server, code, inputs):
    body = {'code': PRELUDE + code,
            'files': [{'path': name, 'content_base64': base64.b64encode(data).decode()}
                      for name, data in inputs.items()],
            'return_files': ['out/*'],
            'limits': {'timeout_s': TIMEOUT_S}}
    resp = Api(server.url).post('/v1/execute', body, timeout=TIMEOUT_S + 30)
    assert resp.status_code == 200, resp.text[:2000]
    r = resp.json()
    files = {}
    for f in r['files']:
        if f['path'].startswith('out/'):
            assert not f.get('truncated') and 'content_base64' in f, f
            files[f['path']] = comparable(f['path'], base64.b64decode(f['content_base64']))
    detail = 'stderr: %s\nerror: %s' % (r['stderr'][-3000:], r['error'])
    return Answer(r['status'], r['stdout'], files, detail)


def run_bare(code, inputs, tmp):
    for name, data in inputs.items():
        (tmp / name).write_bytes(data)
    env = dict(BARE_ENV, HOME=str(tmp), TMPDIR=str(tmp), MPLCONFIGDIR=str(tmp / '.matplotlib'))
    p = subprocess.run([PY, '-c', PRELUDE + code], cwd=tmp, env=env, capture_output=True,
                       text=True, timeout=TIMEOUT_S)
    files = {}
    out = tmp / 'out'
    for f in sorted(out.iterdir()) if out.is_dir() else ():
        files['out/' + f.name] = comparable(f.name, f.read_bytes())
    return Answer('ok' if p.returncode == 0 else 'error', p.stdout, files,
                  'stderr: %s' % p.stderr[-3000:])
