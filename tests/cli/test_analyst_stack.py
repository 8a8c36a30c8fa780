"""The analyst's standard library (issue 12): what a model writes without
asking works inside the sandbox, from Debian's packages (scripts/deps).
Each test does what an analyst's code does with a library, not only the
import: a chart, a markdown table, a fitted model, a parsed page, a
spreadsheet, a PDF, a Word document."""
import base64

SLOW = ('--timeout', '120')

MODULES = ['numpy', 'pandas', 'matplotlib', 'scipy', 'openpyxl', 'seaborn', 'sklearn',
           'statsmodels', 'networkx', 'sympy', 'xlrd', 'xlsxwriter', 'odf', 'bs4', 'lxml',
           'tabulate', 'plotly', 'PIL', 'skimage', 'docx', 'reportlab', 'pypdf', 'yaml',
           'joblib', 'tqdm']


def test_the_analyst_packages_import(petri_json):
    code = 'import importlib\nfor m in %r:\n    importlib.import_module(m)\nprint("all")' % MODULES
    r = petri_json(code, *SLOW)
    assert r['status'] == 'ok' and r['stdout'] == 'all\n', r.describe()


def test_seaborn_chart_and_a_markdown_table(petri_json):
    code = '''
import pandas as pd, seaborn as sns
df = pd.DataFrame({"region": ["north", "south", "north", "east"], "sales": [3, 5, 4, 1]})
sns.barplot(data=df, x="region", y="sales")
print(df.groupby("region").sales.sum().reset_index().to_markdown(index=False))
'''
    r = petri_json(code, *SLOW)
    assert r['status'] == 'ok', r.describe()
    assert '| region   |   sales |' in r['stdout'], r.describe()
    pngs = [x['image/png'] for x in r['results'] if 'image/png' in x]
    assert len(pngs) == 1 and base64.b64decode(pngs[0])[:4] == b'\x89PNG', r.describe()


def test_models_fit(petri_json):
    code = '''
import numpy as np, statsmodels.api as sm, networkx as nx, sympy
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import cross_val_score
x = np.arange(50, dtype=float).reshape(-1, 1); y = 3 * x.ravel() + 2
m = LinearRegression().fit(x, y)
print(round(float(m.coef_[0]), 3), round(float(m.intercept_), 3))
print(cross_val_score(LinearRegression(), x, y, cv=3, n_jobs=2).round(3).tolist())
ols = sm.OLS(y, sm.add_constant(x)).fit()
print(ols.params.round(3).tolist())
print(nx.shortest_path_length(nx.path_graph(5), 0, 4))
print(sympy.integrate(sympy.Symbol("t") ** 2, (sympy.Symbol("t"), 0, 3)))
'''
    r = petri_json(code, *SLOW)
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'].splitlines() == ['3.0 2.0', '[1.0, 1.0, 1.0]', '[2.0, 3.0]', '4', '9'], \
        r.describe()


def test_documents_in_and_out(petri_json):
    code = '''
import io, pandas as pd, yaml, docx, pypdf
from bs4 import BeautifulSoup
from PIL import Image
from reportlab.pdfgen import canvas
pd.DataFrame({"a": [1, 2]}).to_excel("t.xlsx", engine="xlsxwriter", index=False)
print(pd.read_excel("t.xlsx", engine="openpyxl").a.sum())
pd.DataFrame({"a": [5]}).to_excel("t.ods", engine="odf", index=False)
print(pd.read_excel("t.ods", engine="odf").a.sum())
print(BeautifulSoup("<ul><li>x</li><li>y</li></ul>", "lxml").find_all("li")[1].text)
print(yaml.safe_load("k: [1, 2]")["k"][1])
Image.new("RGB", (4, 3), "red").save("r.png"); print(Image.open("r.png").size)
c = canvas.Canvas("r.pdf"); c.drawString(72, 720, "petri report"); c.save()
print("petri report" in pypdf.PdfReader("r.pdf").pages[0].extract_text())
d = docx.Document(); d.add_paragraph("hello"); d.save("r.docx")
print(docx.Document("r.docx").paragraphs[0].text)
'''
    r = petri_json(code, *SLOW)
    assert r['status'] == 'ok', r.describe()
    assert r['stdout'].splitlines() == ['3', '5', 'y', '2', '(4, 3)', 'True', 'hello'], \
        r.describe()
