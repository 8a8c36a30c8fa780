"""Charts and tables as data (docs/api.md, "Charts as data"): a matplotlib
figure's result carries, beside its PNG, what it shows as JSON
(application/vnd.petri.chart+json: the kind of chart, its title, axes and
elements); a DataFrame's, its columns (application/vnd.petri.dataframe+json).
PIL's Image.show() and Image.save() give the image as a result, and start no
viewer."""
import json

import pytest

from harness import Api

CHART = "application/vnd.petri.chart+json"
FRAME = "application/vnd.petri.dataframe+json"


@pytest.fixture(scope="module")
def sid(server):
    api = Api(server.url)
    s = api.session()
    yield api, s
    api.delete(f"/v1/sessions/{s}")


def chart_of(sid, code):
    api, s = sid
    res = api.execute(s, code)
    assert res["status"] == "ok", res
    charts = [json.loads(b[CHART]) for b in res["results"] if CHART in b]
    assert len(charts) == 1, res["results"]
    assert all("image/png" in b for b in res["results"] if CHART in b)
    return charts[0]


def test_a_bar_chart(sid):
    c = chart_of(sid, "import matplotlib.pyplot as plt\n"
                      "plt.bar(['A', 'B', 'C'], [10, 20, 5], label='sold')\n"
                      "plt.xlabel('Author'); plt.ylabel('Books [k]'); plt.title('Sales')\n"
                      "plt.show()")
    assert (c["type"], c["title"], c["x_label"], c["y_label"]) == ("bar", "Sales", "Author", "Books [k]")
    assert (c["x_unit"], c["y_unit"]) == (None, "k")
    assert c["elements"] == [{"label": l, "value": v, "group": "sold"}
                             for l, v in (("A", 10), ("B", 20), ("C", 5))]


def test_lines_with_dates_and_a_categorical_axis(sid):
    c = chart_of(sid, "import datetime, matplotlib.pyplot as plt\n"
                      "days = [datetime.date(2024, 1, d) for d in range(1, 6)]\n"
                      "plt.plot(days, [1, 4, 9, 16, 25], label='squares')\n"
                      "plt.plot(days, [1, 2, 3, 4, 5])\n"
                      "plt.xlabel('Day'); plt.ylabel('Value (m)')")
    assert c["type"] == "line" and c["title"] is None and c["y_unit"] == "m"
    assert c["x_scale"] == "datetime" and c["y_scale"] == "linear"
    assert all(isinstance(t, str) and t.startswith("20") for t in c["x_ticks"])
    assert all(isinstance(t, (int, float)) for t in c["y_ticks"])
    assert len(c["x_tick_labels"]) == len(c["x_ticks"])
    squares, unnamed = c["elements"]
    assert squares == {"label": "squares", "points": [[f"2024-01-0{d}", d * d] for d in range(1, 6)]}
    assert unnamed["label"].startswith("Line ")
    c = chart_of(sid, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], ['low', 'mid', 'high'])")
    assert (c["x_scale"], c["y_scale"]) == ("linear", "categorical")
    assert c["elements"][0]["points"] == [[1, "low"], [2, "mid"], [3, "high"]]


def test_log_scale_scatter_pie_and_box(sid):
    c = chart_of(sid, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [10, 1000, 100000])\n"
                      "plt.yscale('log'); plt.grid(True)")
    assert c["type"] == "line" and c["y_scale"] == "log" and len(c["elements"]) == 1
    c = chart_of(sid, "import matplotlib.pyplot as plt\n"
                      "plt.scatter([1, 2], [3, 4], label='a'); plt.scatter([5], [6], label='b')")
    assert c["type"] == "scatter"
    assert [(e["label"], e["points"]) for e in c["elements"]] == [("a", [[1, 3], [2, 4]]),
                                                                  ("b", [[5, 6]])]
    c = chart_of(sid, "import matplotlib.pyplot as plt\n"
                      "plt.pie([75, 25], labels=['yes', 'no']); plt.title('Vote')")
    assert c == {"type": "pie", "title": "Vote", "elements": [
        {"label": "yes", "angle": 270, "radius": 1}, {"label": "no", "angle": 90, "radius": 1}]}
    c = chart_of(sid, "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
                      "ax.boxplot([[1, 2, 3, 4, 5], [2, 3, 4, 5, 6, 20]], labels=['p', 'q'],"
                      " patch_artist=True)")
    assert c["type"] == "box_and_whisker"
    assert c["elements"] == [
        {"label": "p", "min": 1, "first_quartile": 2, "median": 3, "third_quartile": 4,
         "max": 5, "outliers": []},
        {"label": "q", "min": 2, "first_quartile": 3.25, "median": 4.5, "third_quartile": 5.75,
         "max": 6, "outliers": [20]}]


def test_several_axes_an_unknown_chart_and_the_bounds(sid):
    c = chart_of(sid, "import matplotlib.pyplot as plt\nfig, (a, b) = plt.subplots(1, 2)\n"
                      "fig.suptitle('Both'); a.plot([1, 2]); a.set_title('left')\n"
                      "b.bar(['x'], [1]); b.set_title('right')")
    assert (c["type"], c["title"]) == ("superchart", "Both")
    assert [(e["type"], e["title"]) for e in c["elements"]] == [("line", "left"), ("bar", "right")]
    c = chart_of(sid, "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
                      "ax.add_patch(plt.Circle((0, 0), 1)); ax.set_title('round')")
    assert c == {"type": "unknown", "title": "round", "elements": []}
    # Past 20 000 values a figure is only a picture; a blank one has no chart.
    api, s = sid
    res = api.execute(s, "import matplotlib.pyplot as plt\nplt.plot(range(30000))\nplt.show()\n"
                         "plt.figure()\nplt.show()")
    assert res["status"] == "ok", res
    assert [CHART in b for b in res["results"]] == [False, False]
    assert all("image/png" in b for b in res["results"])


def test_a_dataframe_comes_with_its_columns(sid):
    api, s = sid
    res = api.execute(s, "import pandas as pd, numpy as np\n"
                         "pd.DataFrame({'n': [1, 2, None], 'when': pd.to_datetime(['2024-05-01',"
                         " '2024-05-02', '2024-05-03']), 'ok': [True, False, True], 3: ['a', 'b', 'c']})")
    assert res["status"] == "ok", res
    main = res["results"][-1]
    assert "text/html" in main
    assert json.loads(main[FRAME]) == {
        "n": [1.0, 2.0, None], "when": ["2024-05-01T00:00:00", "2024-05-02T00:00:00",
                                        "2024-05-03T00:00:00"],
        "ok": [True, False, True], "3": ["a", "b", "c"]}
    res = api.execute(s, "pd.DataFrame(np.zeros((200, 60)))")
    assert FRAME not in res["results"][-1] and "text/html" in res["results"][-1]


def test_pil_show_and_save_give_the_image_and_start_no_viewer(sid):
    api, s = sid
    res = api.execute(s, "from PIL import Image\nimg = Image.new('RGB', (8, 8), 'red')\n"
                         "img.show()\nimg.save('red.png')\nimport io; img.save(io.BytesIO(), 'PNG')\n"
                         "print('done')")
    assert res["status"] == "ok" and res["stdout"] == "done\n", res
    assert [("image/png" in b) for b in res["results"]] == [True, True]
    assert "red.png" in [f["path"] for f in res["files"]]
    procs = api.process_names(s)
    assert not any("xdg" in p or "display" in p for p in procs), procs
    # matplotlib writes its PNG files through PIL: that save is no result.
    res = api.execute(s, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig('fig.png')")
    assert res["status"] == "ok", res
    assert [("image/png" in b, CHART in b) for b in res["results"]] == [(True, True)]
