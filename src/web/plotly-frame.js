// Draws one plotly figure for petri's web page (docs/web.md).
//
// This runs in <iframe sandbox="allow-scripts"> without allow-same-origin:
// an opaque origin, so it reaches neither the page nor its storage and key,
// and its policy lets it connect nowhere.  The figure came out of a sandbox:
// the page posts its JSON text, which is parsed as JSON (never evaluated)
// and drawn by plotly.js (Debian's, served at /ui/plotly.min.js).  The frame
// tells the page one thing: its height, to size the frame.
'use strict';

(() => {
  const FIGURE_MAX = 16 << 20;
  // Buttons that would open plot.ly or download a file: the sandbox
  // allows neither popups nor downloads.
  const CONFIG = { displaylogo: false, showLink: false,
    modeBarButtonsToRemove: ['sendDataToCloud', 'toImage'] };
  let done = false;

  function tellHeight() {
    const h = Math.ceil(document.documentElement.scrollHeight);
    window.parent.postMessage({ petri: 'plotly-size', height: h }, '*');
  }

  function fallback(why, text) {
    const note = document.getElementById('note'), data = document.getElementById('data');
    note.textContent = why;
    note.hidden = false;
    if (text) {
      data.textContent = text;
      data.hidden = false;
    }
    tellHeight();
  }

  // plotly.py 5 writes titles as {text, font}; plotly.js before 1.43
  // (Debian's is 1.31) reads a string and titlefont, and would draw none.
  function oldTitles(layout) {
    const fix = (o) => {
      if (o && typeof o === 'object' && o.title && typeof o.title === 'object') {
        if (o.title.font && !o.titlefont) o.titlefont = o.title.font;
        o.title = typeof o.title.text === 'string' ? o.title.text : '';
      }
    };
    fix(layout);
    for (const k of Object.keys(layout))
      if (/^(xaxis|yaxis)\d*$|^scene\d*$|^polar\d*$/.test(k)) fix(layout[k]);
    return layout;
  }

  function draw(figure) {
    let fig;
    try {
      fig = JSON.parse(figure);
    } catch (e) {
      fallback('The figure is not valid JSON.', null);
      return;
    }
    if (!fig || typeof fig !== 'object') {
      fallback('The figure is not a plotly figure.', null);
      return;
    }
    if (typeof window.Plotly === 'undefined') {
      fallback('plotly.js is not installed on the server (Debian package r-cran-plotly): ' +
        'the figure\'s data as JSON.', JSON.stringify(fig, null, 1).slice(0, 200000));
      return;
    }
    const div = document.getElementById('plot');
    const config = Object.assign({}, fig.config && typeof fig.config === 'object' ? fig.config : {}, CONFIG);
    let layout = fig.layout && typeof fig.layout === 'object' ? fig.layout : {};
    if (/^1\./.test(String(window.Plotly.version))) layout = oldTitles(layout);
    Promise.resolve()
      .then(() => window.Plotly.newPlot(div, Array.isArray(fig.data) ? fig.data : [],
        layout, config))
      .then(() => {
        document.body.dataset.drawn = 'true';
        tellHeight();
        window.addEventListener('resize', () => window.Plotly.Plots.resize(div));
      }, (e) => fallback('plotly.js could not draw this figure: ' + String(e && e.message || e), null));
  }

  window.addEventListener('message', (ev) => {
    const m = ev.data;
    if (done || ev.source !== window.parent || !m || m.petri !== 'plotly' ||
        typeof m.figure !== 'string' || m.figure.length > FIGURE_MAX)
      return;
    done = true;
    draw(m.figure);
  });
})();
