// petri's web page (docs/web.md): what ran, and a notebook to run more.
//
// Everything shown here came out of a sandbox, or from whoever called the
// API: it is text.  It is put in the page with textContent and DOM nodes,
// never innerHTML; images only as data:image/png (or jpeg) URLs after their
// base64 was checked.  The server's Content-Security-Policy is the second
// wall: no inline script or style, nothing from elsewhere.  An HTML result
// is shown by /ui/html-frame.html, a plotly figure drawn by
// /ui/plotly-frame.html, each in <iframe sandbox="allow-scripts"> without
// allow-same-origin (an opaque origin): the page posts them the result, and
// takes from them only their height, a number.
//
// The API key, when the server wants one, is asked for first and kept in
// sessionStorage (this tab only).  EventSource cannot send it, so the
// event stream (GET /v1/events) and streamed executions are read with
// fetch() and a ReadableStream.
'use strict';

(() => {
  const KEY_STORE = 'petri.key';
  const SESSION_ID = /^[A-Za-z0-9_-]{1,80}$/;
  const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
  const PLOTLY = 'application/vnd.plotly.v1+json';
  // A result's frame grows to its content up to this height, then scrolls.
  const FRAME_MIN = 60, FRAME_MAX = 640, PLOTLY_MAX = 1200;
  const $ = (id) => document.getElementById(id);

  const state = {
    key: sessionStorage.getItem(KEY_STORE) || '',
    view: { kind: 'all', id: null },
    entries: [],		// the listing shown
    sessions: [],		// live sessions
    recent: [],			// session ids seen in the record
    languages: [],
    full: new Map(),		// seq -> the whole result of a run made here (with images)
    running: false,
    sessionCount: -1,
    refreshTimer: null,
  };

  // ---- the API ---------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (state.key) h.Authorization = 'Bearer ' + state.key;
    return h;
  }

  async function request(method, path, opts) {
    opts = opts || {};
    const init = { method, headers: headers(opts.headers), credentials: 'omit',
      cache: 'no-store', signal: opts.signal };
    if (opts.json !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.json);
    } else if (opts.body !== undefined) {
      init.body = opts.body;
    }
    const r = await fetch(path, init);
    if (r.status === 401) {
      showKeyPrompt(state.key ? 'The server refused this key.' : '');
      throw new ApiError(401, 'unauthorized', 'an API key is needed');
    }
    if (!r.ok && !opts.raw) {
      let code = 'http_' + r.status, msg = r.statusText || 'request failed';
      try {
        const j = await r.json();
        if (j && j.error) { code = String(j.error.code); msg = String(j.error.message); }
      } catch (e) { /* not JSON */ }
      throw new ApiError(r.status, code, msg);
    }
    return r;
  }

  async function getJSON(path) {
    return (await request('GET', path)).json();
  }

  // Server-Sent Events from a fetch() response: onEvent(name, data).
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let name = 'message', data = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('event:')) name = line.slice(6).trim();
          else if (line.startsWith('data:')) data += line.slice(5).replace(/^ /, '');
        }
        if (!data) continue;	// a comment (keepalive)
        let parsed;
        try { parsed = JSON.parse(data); } catch (e) { continue; }
        onEvent(name, parsed);
      }
    }
  }

  // ---- building the page's nodes ----------------------------------------

  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') n.className = v;
      else if (k === 'text') n.textContent = v;
      else n.setAttribute(k, v);
    }
    for (const c of children) if (c) n.append(c);
    return n;
  }

  function clear(n) {
    while (n.firstChild) n.firstChild.remove();
  }

  // A small tokenizer per language: enough to colour keywords, strings,
  // comments and numbers.  Each token becomes a <span> holding text.
  const KEYWORDS = {
    python: 'and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield None True False match case',
    javascript: 'async await break case catch class const continue default delete do else export extends finally for function if import in instanceof let new of return switch this throw try typeof var void while yield null undefined true false',
    bash: 'if then else elif fi for while until do done case esac in function return local export echo exit set unset read cd',
    r: 'if else repeat while function for in next break return TRUE FALSE NULL NA Inf NaN library',
    c: 'auto break case char const continue default do double else enum extern float for goto if int long register return short signed sizeof static struct switch typedef union unsigned void volatile while include define',
  };
  const COMMENT = { python: '#[^\\n]*', bash: '#[^\\n]*', r: '#[^\\n]*',
    javascript: '//[^\\n]*|/\\*[\\s\\S]*?\\*/', c: '//[^\\n]*|/\\*[\\s\\S]*?\\*/' };
  const STRING = '"""[\\s\\S]*?"""|\'\'\'[\\s\\S]*?\'\'\'|"(?:\\\\.|[^"\\\\\\n])*"|\'(?:\\\\.|[^\'\\\\\\n])*\'|`(?:\\\\.|[^`\\\\])*`';
  const tokenizers = new Map();

  function tokenizer(lang) {
    const l = KEYWORDS[lang] ? lang : 'python';
    if (!tokenizers.has(l)) {
      const kw = KEYWORDS[l].split(' ').join('|');
      tokenizers.set(l, new RegExp('(' + COMMENT[l] + ')|(' + STRING + ')|(\\b\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?\\b)|\\b(' + kw + ')\\b', 'g'));
    }
    return tokenizers.get(l);
  }

  function highlight(code, lang) {
    const pre = el('pre', { class: 'code' });
    const re = tokenizer(lang);
    let last = 0, m;
    re.lastIndex = 0;
    while ((m = re.exec(code)) !== null) {
      if (m[0] === '') { re.lastIndex++; continue; }
      if (m.index > last) pre.append(code.slice(last, m.index));
      const cls = m[1] ? 'tok-comment' : m[2] ? 'tok-string' : m[3] ? 'tok-number' : 'tok-keyword';
      pre.append(el('span', { class: cls, text: m[0] }));
      last = re.lastIndex;
    }
    if (last < code.length) pre.append(code.slice(last));
    return pre;
  }

  function fmtBytes(n) {
    if (typeof n !== 'number') return '?';
    if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + ' GiB';
    if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
    if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
    return n + ' B';
  }

  function isImage(data) {
    return typeof data === 'string' && data.length > 0 && data.length % 4 === 0 &&
      BASE64.test(data);
  }

  function clamp(n, lo, hi) {
    return Math.max(lo, Math.min(hi, Math.ceil(n)));
  }

  // A result shown by a static page of petri's in a frame of its own, with
  // scripts, in an opaque origin ('*': it has no other name).  It is given
  // the result each time it has loaded (moving a frame in the page reloads
  // it); it answers its height (onFrameMessage).
  function resultFrame(cls, title, src, message) {
    const frame = el('iframe', { class: cls, sandbox: 'allow-scripts', title,
      referrerpolicy: 'no-referrer', src });
    frame.addEventListener('load', () => frame.contentWindow.postMessage(message, '*'));
    return frame;
  }

  // What a result's frame may say: its content's height (the frame adds its
  // border), for frames of its kind, up to a bound (then the frame scrolls).
  const FRAME_SIZES = new Map([
    ['plotly-size', { frames: 'iframe.plotly-result', max: PLOTLY_MAX }],
    ['html-size', { frames: 'iframe.html-result', max: FRAME_MAX }],
  ]);

  // The only message the page takes: a number, from the window of one of
  // its result frames.  Whatever else a frame sends is dropped.
  function onFrameMessage(ev) {
    const m = ev.data;
    const size = m && typeof m === 'object' && typeof m.petri === 'string' && FRAME_SIZES.get(m.petri);
    if (!size || typeof m.height !== 'number' || !isFinite(m.height)) return;
    for (const f of document.querySelectorAll(size.frames))
      if (f.contentWindow === ev.source) f.style.height = clamp(m.height + 2, FRAME_MIN, size.max) + 'px';
  }

  // One MIME bundle: the richest representation the page can show safely.
  function renderBundle(bundle) {
    const box = el('div', { class: 'result' });
    if (!bundle || typeof bundle !== 'object') return box;
    if (typeof bundle[PLOTLY] === 'string') {
      box.append(resultFrame('plotly-result', 'plotly figure', '/ui/plotly-frame.html',
        { petri: 'plotly', figure: bundle[PLOTLY] }));
      return box;
    }
    for (const type of ['image/png', 'image/jpeg']) {
      if (isImage(bundle[type])) {
        box.append(el('img', { class: 'chart', alt: String(bundle['text/plain'] || 'image result'),
          src: 'data:' + type + ';base64,' + bundle[type] }));
        return box;
      }
    }
    const html = bundle['text/html'] || bundle['image/svg+xml'];
    if (typeof html === 'string') {
      // The frame's script puts it in its document so that it runs nothing
      // (html-frame.js), and its policy runs nothing inline.
      box.append(resultFrame('html-result', 'HTML result', '/ui/html-frame.html',
        { petri: 'html', html }));
      return box;
    }
    let text = bundle['text/plain'];
    if (typeof text !== 'string') {
      const note = bundle['image/png'] || bundle['image/jpeg'];
      text = typeof note === 'string' ? note : JSON.stringify(bundle);
    }
    box.append(el('pre', { class: 'plain', text }));
    return box;
  }

  function renderError(err) {
    const box = el('div', { class: 'exc' });
    if (!err || typeof err !== 'object') return box;
    box.append(el('div', { class: 'exc-head', text: String(err.name || 'Error') + ': ' + String(err.message || '') }));
    if (err.traceback) box.append(el('pre', { class: 'traceback', text: String(err.traceback) }));
    return box;
  }

  function metaLine(entry, res) {
    const parts = [];
    if (entry.seq !== undefined) parts.push('#' + entry.seq);
    if (entry.language) parts.push(String(entry.language));
    if (entry.started_at) parts.push(String(entry.started_at).replace('T', ' ').replace('Z', ' UTC'));
    if (res && typeof res.duration_ms === 'number') parts.push(res.duration_ms + ' ms');
    if (res && typeof res.cpu_ms === 'number') parts.push('cpu ' + res.cpu_ms + ' ms');
    if (res && typeof res.memory_peak_bytes === 'number') parts.push('peak ' + fmtBytes(res.memory_peak_bytes));
    const l = entry.limits;
    if (l && typeof l === 'object')
      parts.push('limits ' + l.memory_mb + ' MB, ' + l.cpu + ' cpu, ' + l.timeout_s + ' s, ' + l.pids + ' pids');
    return parts.join(' · ');
  }

  // The body of a cell: what the result holds, in order.
  function fillOutputs(out, res) {
    clear(out);
    if (!res || typeof res !== 'object') return;
    if (res.stdout) out.append(el('pre', { class: 'stdout', text: String(res.stdout) }));
    if (res.stdout_truncated) out.append(el('p', { class: 'meta', text: '(stdout truncated)' }));
    if (res.stderr) out.append(el('pre', { class: 'stderr', text: String(res.stderr) }));
    if (res.stderr_truncated) out.append(el('p', { class: 'meta', text: '(stderr truncated)' }));
    if (Array.isArray(res.results)) for (const b of res.results) out.append(renderBundle(b));
    if (res.error) out.append(renderError(res.error));
    if (res.reason) out.append(el('p', { class: 'reason', text: String(res.reason) }));
    if (Array.isArray(res.files) && res.files.length)
      out.append(el('p', { class: 'meta', text: 'files: ' + res.files.map((f) => f.path + ' (' + fmtBytes(f.size) + ')').join(', ') }));
    if (res.record_truncated) out.append(el('p', { class: 'meta', text: '(cut to fit the record)' }));
  }

  function statusBadge(status) {
    const s = String(status || 'running');
    return el('span', { class: 'badge status-' + (/^[a-z]+$/.test(s) ? s : 'other'), text: s });
  }

  function renderEntry(entry) {
    const res = state.full.get(entry.seq) || entry.result;
    const li = el('li', { class: 'cell', 'data-seq': String(entry.seq), 'data-status': String(entry.status) });
    const head = el('div', { class: 'cell-head' }, statusBadge(entry.status),
      el('span', { class: 'meta', text: metaLine(entry, res) }));
    if (state.view.kind !== 'session') {
      if (entry.session && SESSION_ID.test(entry.session))
        head.append(el('a', { class: 'session-link', href: '#/session/' + entry.session, text: entry.session }));
      else if (!entry.session)
        head.append(el('span', { class: 'meta', text: 'one-shot' }));
    }
    li.append(head, highlight(String(entry.code || ''), entry.language));
    if (entry.code_truncated) li.append(el('p', { class: 'meta', text: '(code cut at 256 KiB)' }));
    const out = el('div', { class: 'outputs' });
    fillOutputs(out, res);
    li.append(out);
    return li;
  }

  // ---- views -------------------------------------------------------------

  function filtered(entries) {
    const st = $('filter-status').value, lang = $('filter-language').value;
    return entries.filter((e) => (!st || e.status === st) && (!lang || e.language === lang));
  }

  function renderEntries() {
    const list = $('executions');
    const live = list.querySelector('.cell.running');
    clear(list);
    const shown = filtered(state.entries);
    for (const e of shown) list.append(renderEntry(e));
    if (live) list.append(live);
    $('empty').hidden = shown.length > 0 || !!live;
  }

  function message(text) {
    $('message').textContent = text || '';
  }

  function sessionLink(id, label, current) {
    const a = el('a', { href: '#/session/' + id, text: label });
    if (current) a.setAttribute('aria-current', 'page');
    return el('li', null, a);
  }

  function renderSessions() {
    const cur = state.view.kind === 'session' ? state.view.id : null;
    const ul = $('sessions');
    clear(ul);
    for (const s of state.sessions) {
      if (!SESSION_ID.test(String(s.id))) continue;
      ul.append(sessionLink(s.id, s.id + ' (' + s.language + ', ' + s.status + ')', s.id === cur));
    }
    if (!ul.firstChild) ul.append(el('li', { class: 'meta', text: 'none' }));
    const live = new Set(state.sessions.map((s) => s.id));
    const rec = $('recent');
    clear(rec);
    for (const id of state.recent) {
      if (live.has(id) || !SESSION_ID.test(id)) continue;
      rec.append(sessionLink(id, id + ' (ended)', id === cur));
    }
    if (!rec.firstChild) rec.append(el('li', { class: 'meta', text: 'none' }));
  }

  async function loadSessions() {
    const j = await getJSON('/v1/sessions');
    state.sessions = Array.isArray(j.sessions) ? j.sessions : [];
    state.sessionCount = state.sessions.length;
    renderSessions();
  }

  function noteRecent(entries) {
    for (const e of entries)
      if (e.session && !state.recent.includes(e.session)) state.recent.push(e.session);
    if (state.recent.length > 50) state.recent.length = 50;
  }

  async function loadView() {
    const v = state.view;
    let path;
    if (v.kind === 'session') path = '/v1/sessions/' + encodeURIComponent(v.id) + '/executions';
    else if (v.kind === 'oneshots') path = '/v1/executions?session=none';
    else path = '/v1/executions';
    const loading = setTimeout(() => { if (v === state.view) $('view-loading').hidden = false; }, 150);
    try {
      const j = await getJSON(path);
      const list = Array.isArray(j.executions) ? j.executions : [];
      if (v !== state.view) return;	// the user moved on
      state.entries = list;
      noteRecent(list);
      message(j.truncated ? 'Older executions are not shown (the listing was cut).' : '');
      renderEntries();
      renderSessions();
    } catch (e) {
      if (e.status !== 401) message(e.message);
    } finally {
      clearTimeout(loading);
      if (v === state.view) $('view-loading').hidden = true;
    }
  }

  // The record's sessions for Recent sessions, whatever view the page
  // opened on (a #/session/ID link opens on one session).
  async function loadRecent() {
    try {
      noteRecent((await getJSON('/v1/executions')).executions || []);
      renderSessions();
    } catch (e) { /* the listing's own view says why */ }
  }

  // A session opened by link that the list of live ones does not have (yet):
  // ask for it.  Live, it joins the list; ended, its record is still there.
  async function findSession(id) {
    let live = null;
    try {
      live = await getJSON('/v1/sessions/' + encodeURIComponent(id));
    } catch (e) {
      if (e.status !== 404) return;
    }
    if (state.view.kind !== 'session' || state.view.id !== id) return;
    if (live && live.id === id) {
      if (!state.sessions.some((s) => s.id === id)) state.sessions.push(live);
      showSessionInfo(id);
    } else {
      if (!state.recent.includes(id)) state.recent.unshift(id);
      $('session-info').textContent = 'ended: its record stays readable';
      $('notebook').hidden = true;
      $('delete-session').hidden = true;
    }
    renderSessions();
  }

  function showSessionInfo(id) {
    const s = state.sessions.find((x) => x.id === id);
    $('session-info').textContent = s ? s.language + ' · ' + s.status + ' · expires ' + s.expires_at : '';
    if (s) $('language').value = s.language;
    return s;
  }

  function setView(kind, id) {
    state.view = { kind, id };
    state.entries = [];
    clear($('executions'));
    message('');
    const inSession = kind === 'session';
    $('view-title').textContent = inSession ? 'Session ' + id : kind === 'oneshots' ? 'One-shot runs' : 'All executions';
    $('session-tools').hidden = !inSession;
    $('notebook').hidden = !inSession;
    $('delete-session').hidden = false;
    $('view-loading').hidden = true;
    if (inSession) {
      const base = '/v1/sessions/' + encodeURIComponent(id) + '/export?format=';
      $('export-ipynb').href = base + 'ipynb';
      $('export-html').href = base + 'html';
      if (!showSessionInfo(id)) findSession(id);
      loadFiles();
    }
    loadView();
  }

  function route() {
    const h = location.hash;
    const m = h.match(/^#\/session\/([A-Za-z0-9_-]{1,80})$/);
    if (m) setView('session', m[1]);
    else if (h === '#/oneshots') setView('oneshots', null);
    else setView('all', null);
  }

  function scheduleRefresh() {
    if (state.refreshTimer) return;
    state.refreshTimer = setTimeout(() => {
      state.refreshTimer = null;
      if (!state.running) loadView();
    }, 150);
  }

  // ---- running code --------------------------------------------------------

  function maxSeq() {
    return state.entries.reduce((m, e) => Math.max(m, e.seq || 0), 0);
  }

  async function run() {
    if (state.view.kind !== 'session' || state.running) return;
    const id = state.view.id, code = $('code').value, language = $('language').value;
    if (!code.trim()) return;
    state.running = true;
    $('run').disabled = true;
    const baseSeq = maxSeq();
    const out = el('div', { class: 'outputs' });
    const stdout = el('pre', { class: 'stdout' }), stderr = el('pre', { class: 'stderr' });
    const badge = statusBadge('running');
    const metaSpan = el('span', { class: 'meta', text: language });
    const cell = el('li', { class: 'cell running', 'aria-busy': 'true' },
      el('div', { class: 'cell-head' }, badge, metaSpan), highlight(code, language), out);
    out.append(stdout, stderr);
    $('executions').append(cell);
    $('empty').hidden = true;
    let result = null;
    try {
      const r = await request('POST', '/v1/sessions/' + encodeURIComponent(id) + '/execute', {
        json: { code, language }, headers: { Accept: 'text/event-stream' } });
      await readEvents(r, (name, data) => {
        if (name === 'stdout') stdout.append(String(data.text));
        else if (name === 'stderr') stderr.append(String(data.text));
        else if (name === 'result') out.append(renderBundle(data));
        else if (name === 'error') out.append(renderError(data));
        else if (name === 'notice') out.append(el('p', { class: 'meta', text: String(data.reason) }));
        else if (name === 'done') result = data;
      });
    } catch (e) {
      if (e.status !== 401) out.append(el('p', { class: 'error-text', text: e.message }));
    }
    cell.classList.remove('running');
    cell.removeAttribute('aria-busy');
    if (result && result.error && result.status === undefined) {
      out.append(el('p', { class: 'error-text', text: String(result.error.message) }));
      result = null;
    }
    if (result) {
      badge.replaceWith(statusBadge(result.status));
      metaSpan.textContent = metaLine({ language }, result);
      fillOutputs(out, result);
    }
    state.running = false;
    $('run').disabled = false;
    if (state.view.kind !== 'session' || state.view.id !== id) return;
    // The record has the run without its images: keep the whole result
    // for its entry, the first of our code after what was listed.
    try {
      const j = await getJSON('/v1/sessions/' + encodeURIComponent(id) + '/executions');
      const mine = (j.executions || []).find((e) => e.seq > baseSeq && e.code === code && !state.full.has(e.seq));
      if (mine && result) state.full.set(mine.seq, result);
      if (state.view.id === id) {
        cell.remove();
        state.entries = j.executions || [];
        renderEntries();
      }
    } catch (e) { /* the cell stays as it is */ }
    loadSessions().catch(() => {});
    loadFiles();
  }

  // ---- sessions and files ---------------------------------------------------

  async function newSession() {
    try {
      const lang = $('language').value || undefined;
      const r = await request('POST', '/v1/sessions', { json: lang ? { language: lang } : {} });
      const s = await r.json();
      await loadSessions();
      location.hash = '#/session/' + s.id;
    } catch (e) {
      if (e.status !== 401) message(e.message);
    }
  }

  async function deleteSession() {
    if (state.view.kind !== 'session') return;
    const id = state.view.id;
    try {
      await request('DELETE', '/v1/sessions/' + encodeURIComponent(id));
      if (!state.recent.includes(id)) state.recent.unshift(id);
      await loadSessions();
      location.hash = '#/';
    } catch (e) {
      if (e.status !== 401) message(e.message);
    }
  }

  function saveBlob(blob, name) {
    const url = URL.createObjectURL(blob);
    const a = el('a', { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  async function download(path, name) {
    try {
      const r = await request('GET', path);
      saveBlob(await r.blob(), name);
    } catch (e) {
      if (e.status !== 401) message(e.message);
    }
  }

  function filePath(p) {
    return String(p).split('/').map(encodeURIComponent).join('/');
  }

  async function loadFiles() {
    if (state.view.kind !== 'session') return;
    const id = state.view.id, ul = $('files');
    try {
      const j = await getJSON('/v1/sessions/' + encodeURIComponent(id) + '/files');
      if (state.view.id !== id) return;
      clear(ul);
      for (const f of j.files || []) {
        const li = el('li', null, el('span', { text: String(f.path) + (f.type === 'directory' ? '/' : '') }),
          el('span', { class: 'meta', text: ' ' + fmtBytes(f.size) + ' ' }));
        if (f.type === 'file') {
          const b = el('button', { type: 'button', 'aria-label': 'Download ' + f.path, text: 'Download' });
          b.addEventListener('click', () => download('/v1/sessions/' + encodeURIComponent(id) + '/files/' + filePath(f.path),
            String(f.path).split('/').pop()));
          li.append(b);
        }
        ul.append(li);
      }
      if (!ul.firstChild) ul.append(el('li', { class: 'meta', text: 'empty' }));
    } catch (e) {
      clear(ul);
      if (e.status !== 401) ul.append(el('li', { class: 'meta', text: e.message }));
    }
  }

  async function upload() {
    const input = $('upload');
    if (state.view.kind !== 'session' || !input.files.length) return;
    const id = state.view.id;
    for (const f of input.files) {
      try {
        await request('PUT', '/v1/sessions/' + encodeURIComponent(id) + '/files/' + filePath(f.name),
          { body: f, headers: { 'Content-Type': 'application/octet-stream' } });
      } catch (e) {
        if (e.status !== 401) message(e.message);
      }
    }
    input.value = '';
    loadFiles();
  }

  function exportLink(ev) {
    // With a key the browser's own download would carry none: fetch it.
    if (!state.key) return;
    ev.preventDefault();
    const a = ev.currentTarget;
    const fmt = new URL(a.href).searchParams.get('format');
    download(a.getAttribute('href'), state.view.id + '.' + fmt);
  }

  // ---- the event stream ------------------------------------------------------

  async function watch() {
    for (;;) {
      try {
        const r = await request('GET', '/v1/events', { headers: { Accept: 'text/event-stream' } });
        $('live').textContent = 'live';
        await readEvents(r, (name, data) => {
          if (name === 'execution') {
            const v = state.view;
            if (v.kind === 'all' || (v.kind === 'oneshots' && data.session === null) ||
                (v.kind === 'session' && data.session === v.id))
              scheduleRefresh();
            if (data.session && !state.sessions.some((s) => s.id === data.session)) loadSessions().catch(() => {});
          } else if (name === 'session') {
            loadSessions().catch(() => {});
          } else if (name === 'heartbeat') {
            if (data.sessions !== state.sessionCount) loadSessions().catch(() => {});
          } else if (name === 'resync') {
            loadSessions().catch(() => {});
            scheduleRefresh();
          }
        });
      } catch (e) {
        if (e.status === 401) return;
      }
      $('live').textContent = 'reconnecting';
      await new Promise((res) => setTimeout(res, 2000));
    }
  }

  // ---- start -------------------------------------------------------------------

  function showKeyPrompt(why) {
    $('loading').hidden = true;
    $('app').hidden = true;
    $('keyprompt').hidden = false;
    $('key-error').textContent = why || '';
    $('key').focus();
  }

  async function useKey() {
    state.key = $('key').value.trim();
    if (state.key) sessionStorage.setItem(KEY_STORE, state.key);
    else sessionStorage.removeItem(KEY_STORE);
    start();
  }

  async function loadLanguages() {
    try {
      const j = await getJSON('/v1/languages');
      state.languages = (j.languages || []).filter((l) => l.available !== false).map((l) => String(l.name));
    } catch (e) {
      state.languages = ['python'];
    }
    for (const sel of [$('language'), $('filter-language')]) {
      const keep = sel.id === 'filter-language' ? sel.firstElementChild : null;
      clear(sel);
      if (keep) sel.append(keep);
      for (const name of state.languages) sel.append(el('option', { value: name, text: name }));
    }
  }

  let started = false;
  async function start() {
    // Nothing is shown, nor fetched, before the server took the key.
    try {
      await loadSessions();
    } catch (e) {
      if (e.status !== 401) showKeyPrompt(e.message);
      return;
    }
    $('loading').hidden = true;
    $('keyprompt').hidden = true;
    $('app').hidden = false;
    if (started) { route(); return; }
    started = true;
    await loadLanguages();
    window.addEventListener('hashchange', route);
    window.addEventListener('message', onFrameMessage);
    route();
    if (state.view.kind !== 'all') loadRecent();
    watch();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('key-submit').addEventListener('click', useKey);
    $('key').addEventListener('keydown', (e) => { if (e.key === 'Enter') useKey(); });
    $('new-session').addEventListener('click', newSession);
    $('delete-session').addEventListener('click', deleteSession);
    $('run').addEventListener('click', run);
    $('code').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); }
    });
    $('filter-status').addEventListener('change', renderEntries);
    $('filter-language').addEventListener('change', renderEntries);
    $('upload').addEventListener('change', upload);
    $('refresh-files').addEventListener('click', loadFiles);
    $('export-ipynb').addEventListener('click', exportLink);
    $('export-html').addEventListener('click', exportLink);
    start();
  });
})();
