"""25 analyst tasks (issue 12): CSV and Excel in; groupby, pivot, resample,
describe; matplotlib and seaborn charts; statsmodels regressions;
scikit-learn models; sympy; Word and PDF reports written for download.

Each task runs three times on the same input files (analysthelp.py): as a
one-shot in a `petri serve` whose template preloaded the data stack, as one
in a `petri serve` that preloads nothing (the session imports everything
itself), and as `python3 -c` in bare /usr/bin/python3.  Its stdout and the
files it wrote under out/ must be identical in all three (charts: PNG bytes,
savefig's metadata fixed; documents: their text and structure)."""
import pytest

from analysthelp import run_bare, run_petri

# savefig without the clock or the version in the file.
PNG = 'dict(format="png", dpi=72, metadata={"Software": None})'

TASKS = {
    # -------------------------------------------------------- pandas
    'describe': '''
import pandas as pd
df = pd.read_csv("sales.csv", parse_dates=["date"])
print(df.dtypes.to_string())
print(df.describe(include="all", datetime_is_numeric=True).to_string())
''',
    'groupby': '''
import pandas as pd
df = pd.read_csv("sales.csv")
df["revenue"] = df.units * df.price
g = df.groupby(["region", "product"]).agg(units=("units", "sum"), revenue=("revenue", "sum"),
                                          orders=("units", "size"), mean_price=("price", "mean"))
print(g.round(4).to_string())
g.to_csv("out/by_region_product.csv")
''',
    'pivot': '''
import pandas as pd
df = pd.read_csv("sales.csv")
p = df.pivot_table(index="region", columns="product", values="units", aggfunc="sum",
                   margins=True, fill_value=0)
print(p.to_string())
p.to_csv("out/pivot.csv")
''',
    'resample': '''
import pandas as pd
df = pd.read_csv("sales.csv", parse_dates=["date"], index_col="date")
df["revenue"] = df.units * df.price
m = df.revenue.resample("M").agg(["sum", "mean", "count"])
w = df.units.resample("W-MON").sum()
print(m.round(3).to_string())
print(w.tail(8).to_string())
print(df.revenue.rolling(14).mean().dropna().round(3).iloc[::50].to_string())
''',
    'excel_merge': '''
import pandas as pd
plan = pd.read_excel("budget.xlsx", sheet_name="plan")
staff = pd.read_excel("budget.xlsx", sheet_name="staff")
sales = pd.read_csv("sales.csv", parse_dates=["date"])
sales["month"] = sales.date.dt.strftime("%Y-%m")
sales["revenue"] = sales.units * sales.price
actual = sales.groupby(["region", "month"], as_index=False).revenue.sum()
m = plan.merge(actual, on=["region", "month"], how="left").merge(staff, on="region")
m["gap"] = (m.revenue - m.budget).round(2)
m["per_head"] = (m.revenue / m.headcount).round(2)
print(m[m.month <= "2025-06"].to_string(index=False))
''',
    'excel_out': '''
import pandas as pd
df = pd.read_csv("sales.csv")
with pd.ExcelWriter("out/summary.xlsx", engine="openpyxl") as xw:
    df.groupby("region").units.sum().to_excel(xw, sheet_name="units")
    df.pivot_table(index="product", columns="region", values="price",
                   aggfunc="mean").round(3).to_excel(xw, sheet_name="prices")
with pd.ExcelWriter("out/raw.xlsx", engine="xlsxwriter") as xw:
    df.head(50).to_excel(xw, sheet_name="raw", index=False)
print(pd.read_excel("out/summary.xlsx", sheet_name=None)["prices"].to_string())
''',
    'crosstab_json': '''
import json, pandas as pd
df = pd.read_csv("customers.csv")
ct = pd.crosstab(df.plan, df.churned, normalize="index").round(4)
print(ct.to_string())
print(df.plan.value_counts().to_string())
df["age_band"] = pd.cut(df.age, [17, 30, 45, 60, 80])
band = df.groupby("age_band", observed=True).churned.mean().round(4)
print(band.to_string())
json.dump({"churn_by_plan": ct[1].to_dict(), "n": len(df)}, open("out/summary.json", "w"),
          indent=1, sort_keys=True)
''',
    'markdown_html': '''
import pandas as pd
df = pd.read_csv("sales.csv")
t = df.groupby("product").agg(units=("units", "sum"), price=("price", "median")).reset_index()
print(t.to_markdown(index=False))
t.to_html("out/table.html", index=False)
open("out/table.md", "w").write(t.to_markdown(index=False, tablefmt="github"))
''',
    # -------------------------------------------------------- charts
    'matplotlib_line': '''
import pandas as pd, matplotlib.pyplot as plt
df = pd.read_csv("sales.csv", parse_dates=["date"], index_col="date")
s = (df.units * df.price).resample("W").sum()
fig, ax = plt.subplots(figsize=(6, 3))
s.plot(ax=ax, title="weekly revenue")
ax.set_ylabel("EUR")
fig.tight_layout()
fig.savefig("out/weekly.png", **%s)
plt.close(fig)
print(len(s), round(float(s.max()), 2))
''' % PNG,
    'matplotlib_subplots': '''
import numpy as np, pandas as pd, matplotlib.pyplot as plt
plt.rcParams["svg.hashsalt"] = "petri"     # the SVG's ids, else random
df = pd.read_csv("measurements.csv")
fig, axes = plt.subplots(1, 3, figsize=(9, 3))
axes[0].hist(df.y, bins=20)
axes[1].scatter(df.x1, df.y, s=4)
df.groupby("group").y.mean().plot.bar(ax=axes[2])
for a, t in zip(axes, ["y", "x1 vs y", "mean y"]):
    a.set_title(t)
fig.savefig("out/panels.png", **%s)
fig.savefig("out/panels.svg", format="svg", metadata={"Date": None, "Creator": None})
plt.close("all")
print(np.histogram(df.y, bins=20)[0].tolist())
''' % PNG,
    'seaborn_bar': '''
import pandas as pd, seaborn as sns, matplotlib.pyplot as plt
df = pd.read_csv("sales.csv")
ax = sns.barplot(data=df, x="region", y="units", hue="product", errorbar=None)
ax.figure.savefig("out/bar.png", **%s)
plt.close("all")
print(df.groupby(["region", "product"]).units.mean().round(3).to_string())
''' % PNG,
    'seaborn_heatmap': '''
import pandas as pd, seaborn as sns, matplotlib.pyplot as plt
df = pd.read_csv("measurements.csv")
corr = df[["x1", "x2", "x3", "y"]].corr().round(3)
fig, ax = plt.subplots(figsize=(4, 3.5))
sns.heatmap(corr, annot=True, fmt=".2f", cmap="vlag", ax=ax)
fig.savefig("out/heatmap.png", **%s)
plt.close(fig)
print(corr.to_string())
''' % PNG,
    'seaborn_dist': '''
import pandas as pd, seaborn as sns, matplotlib.pyplot as plt
df = pd.read_csv("customers.csv")
g = sns.displot(data=df, x="income", hue="plan", kind="hist", bins=15, height=3)
g.savefig("out/income.png", **%s)
fig, ax = plt.subplots()
sns.boxplot(data=df, x="plan", y="age", ax=ax)
fig.savefig("out/age_box.png", **%s)
plt.close("all")
print(df.groupby("plan").income.describe().round(3).to_string())
''' % (PNG, PNG),
    # -------------------------------------------------------- statsmodels
    'ols': '''
import pandas as pd, statsmodels.api as sm
df = pd.read_csv("measurements.csv")
X = sm.add_constant(df[["x1", "x2", "x3"]])
fit = sm.OLS(df.y, X).fit()
print(fit.params.round(8).to_string())
print(fit.bse.round(8).to_string())
print(round(fit.rsquared, 10), round(fit.aic, 6), fit.nobs)
print(fit.conf_int().round(8).to_string())
''',
    'ols_formula': '''
import pandas as pd, statsmodels.formula.api as smf
df = pd.read_csv("measurements.csv")
fit = smf.ols("y ~ x1 + x2 + x3 + C(group)", data=df).fit()
print(fit.params.round(8).to_string())
print(fit.pvalues.round(10).to_string())
print(round(float(fit.f_test("C(group)[T.b] = 0").fvalue), 6))
''',
    'logit_timeseries': '''
import pandas as pd, statsmodels.api as sm
from statsmodels.tsa.stattools import acf
c = pd.read_csv("customers.csv")
X = sm.add_constant(c[["age", "income", "visits"]])
fit = sm.Logit(c.churned, X).fit(disp=0)
print(fit.params.round(8).to_string())
s = pd.read_csv("sales.csv", parse_dates=["date"], index_col="date").units
print(acf(s, nlags=7).round(8).tolist())
''',
    # -------------------------------------------------------- scikit-learn
    'classifier': '''
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, confusion_matrix, classification_report
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.pipeline import make_pipeline
df = pd.read_csv("customers.csv")
X = pd.get_dummies(df[["age", "income", "visits", "plan"]], columns=["plan"])
Xtr, Xte, ytr, yte = train_test_split(X, df.churned, test_size=0.3, random_state=0,
                                      stratify=df.churned)
clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(Xtr, ytr)
pred = clf.predict(Xte)
print(accuracy_score(yte, pred))
print(confusion_matrix(yte, pred).tolist())
print(classification_report(yte, pred, digits=4))
print(clf[-1].coef_.round(8).tolist())
''',
    'forest': '''
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import cross_val_score
df = pd.read_csv("customers.csv")
X = df[["age", "income", "visits"]]
rf = RandomForestClassifier(n_estimators=25, max_depth=5, random_state=0)
print(cross_val_score(rf, X, df.churned, cv=3).round(8).tolist())
rf.fit(X, df.churned)
print(dict(zip(X.columns, rf.feature_importances_.round(8).tolist())))
''',
    'kmeans': '''
import numpy as np, pandas as pd
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA
df = pd.read_csv("measurements.csv")
X = df[["x1", "x2", "x3", "y"]].to_numpy()
km = KMeans(n_clusters=3, n_init=3, random_state=0).fit(X)
print(np.bincount(km.labels_).tolist(), round(float(km.inertia_), 6))
pca = PCA(n_components=2).fit(X)
print(pca.explained_variance_ratio_.round(8).tolist())
''',
    'regression_cv': '''
import pandas as pd
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, cross_val_score
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.compose import make_column_transformer
from sklearn.pipeline import make_pipeline
df = pd.read_csv("measurements.csv")
pre = make_column_transformer((StandardScaler(), ["x1", "x2", "x3"]),
                              (OneHotEncoder(), ["group"]))
model = make_pipeline(pre, Ridge(alpha=1.0))
cv = KFold(5, shuffle=True, random_state=1)
print(cross_val_score(model, df, df.y, cv=cv, scoring="r2").round(10).tolist())
print(model.fit(df, df.y)[-1].coef_.round(8).tolist())
''',
    # -------------------------------------------------------- scipy, sympy
    'scipy_tests': '''
import pandas as pd
from scipy import stats
df = pd.read_csv("sales.csv")
n, s = df[df.region == "north"].units, df[df.region == "south"].units
print(stats.ttest_ind(n, s, equal_var=False))
print(stats.mannwhitneyu(n, s))
m = pd.read_csv("measurements.csv")
print(stats.pearsonr(m.x1, m.y))
print(stats.linregress(m.x1, m.y))
print(stats.chi2_contingency(pd.crosstab(df.region, df["product"]))[:3])
''',
    'sympy_calculus': '''
import sympy as sp
x, a = sp.symbols("x a", real=True)
f = sp.exp(-a * x) * sp.sin(x)
print(sp.simplify(sp.diff(f, x)))
print(sp.integrate(x**2 * sp.exp(-x), (x, 0, sp.oo)), sp.integrate(sp.sin(x)**2, x))
print(sp.series(sp.cos(x) / (1 - x), x, 0, 6))
print(sp.solve(sp.Eq(x**3 - 6*x**2 + 11*x - 6, 0), x))
print(sp.latex(sp.Integral(f, (x, 0, sp.oo))))
''',
    'sympy_linear': '''
import sympy as sp
M = sp.Matrix([[2, 1, 0], [1, 3, 1], [0, 1, 4]])
print(M.det(), M.inv())
print(M.eigenvals())
t = sp.symbols("t")
y = sp.Function("y")
print(sp.dsolve(y(t).diff(t, 2) + 4 * y(t), y(t)))
print(sp.nsimplify(0.125 + sp.sqrt(2)), sp.N(sp.pi, 40))
''',
    # -------------------------------------------------------- reports
    'word_report': '''
import pandas as pd, docx
df = pd.read_csv("sales.csv")
t = df.groupby("region").agg(units=("units", "sum"), orders=("units", "size")).reset_index()
d = docx.Document()
d.add_heading("Sales by region", level=1)
d.add_paragraph("Total units: %d over %d orders." % (df.units.sum(), len(df)))
table = d.add_table(rows=1, cols=3)
for cell, name in zip(table.rows[0].cells, ["region", "units", "orders"]):
    cell.text = name
for row in t.itertuples(index=False):
    cells = table.add_row().cells
    for cell, v in zip(cells, row):
        cell.text = str(v)
d.add_paragraph("Best region: %s" % t.sort_values("units").region.iloc[-1], style="List Bullet")
d.save("out/report.docx")
print(t.to_string(index=False))
''',
    'pdf_report': '''
import pandas as pd
from reportlab.lib.pagesizes import A4
from reportlab.platypus import SimpleDocTemplate, Paragraph, Table, Spacer
from reportlab.lib.styles import getSampleStyleSheet
df = pd.read_csv("customers.csv")
t = df.groupby("plan").agg(customers=("churned", "size"), churn=("churned", "mean")).round(4)
styles = getSampleStyleSheet()
doc = SimpleDocTemplate("out/churn.pdf", pagesize=A4, invariant=1)
rows = [["plan", "customers", "churn"]] + [[i, str(r.customers), str(r.churn)]
                                           for i, r in t.iterrows()]
doc.build([Paragraph("Churn by plan", styles["Title"]), Spacer(1, 12), Table(rows),
           Paragraph("Overall churn: %.4f" % df.churned.mean(), styles["Normal"])])
print(t.to_string())
''',
}


def test_there_are_25_tasks():
    assert len(TASKS) == 25


@pytest.mark.parametrize('task', sorted(TASKS))
def test_task_is_answered_as_bare_python_answers(task, servers, inputs, tmp_path):
    code = TASKS[task]
    bare = run_bare(code, inputs, tmp_path)
    assert bare.status == 'ok', bare.detail     # the task itself is sound
    assert bare.stdout and (bare.files or 'out/' not in code), bare.detail
    for mode, server in servers.items():
        got = run_petri(server, code, inputs)
        assert got.status == 'ok', (mode, got.detail)
        assert got.stdout == bare.stdout, (mode, got.stdout, bare.stdout)
        assert sorted(got.files) == sorted(bare.files), mode
        for path, want in bare.files.items():
            assert got.files[path] == want, (mode, path)
