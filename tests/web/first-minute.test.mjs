// The web page's first minute (issue 30), in Debian's chromium against a
// live `petri serve` without keys: the first paint says it is loading, a
// plotly figure is drawn in a frame with scripts but without the page's
// origin, a session opened by link is found even when it has ended, a wide
// or long table's frame takes its content's height up to a bound, and an
// HTML result's frame, scripted but opaque, runs nothing of the result.
//
// Run with `node --test` from tests/web (make web-test does), PETRI_BIN
// naming the binary.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

import { startServer, launch, openPage, api } from './helpers.mjs';

const PLOTLY_JS = '/usr/lib/R/site-library/plotly/htmlwidgets/lib/plotlyjs/plotly-latest.min.js';

describe('the first minute in the web page', () => {
  let server, browser, client;

  before(async () => {
    [server, browser] = await Promise.all([startServer(), launch()]);
    client = api(server.url);
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function session() {
    const s = await client.post('/v1/sessions', {});
    assert.equal(s.status, 201);
    return s.body.id;
  }

  async function execute(sid, code) {
    const r = await client.post(`/v1/sessions/${sid}/execute`, { code });
    assert.equal(r.status, 200);
    assert.equal(r.body.status, 'ok', JSON.stringify(r.body).slice(0, 2000));
    return r.body;
  }

  // The result frames (a listing shows earlier results too) asked the
  // server for their own pages and scripts: never app.js, never the API.
  function framesAskedForTheirFilesOnly(log) {
    const own = ['html-frame.html', 'html-frame.js', 'plotly-frame.html', 'plotly-frame.js', 'plotly.min.js']
      .map((f) => new URL(server.url).origin + '/ui/' + f);
    for (const r of log.requests.filter((x) => x.frame === 'child')) assert.ok(own.includes(r.url), r.url);
  }

  test('the first paint says it is loading, until the page has its data', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    let release;
    const held = new Promise((res) => { release = res; });
    await page.route('**/v1/sessions', async (route) => { await held; await route.continue(); });
    await page.goto(server.url + '/', { waitUntil: 'domcontentloaded' });
    const loading = page.getByRole('status').filter({ hasText: 'Loading' }).first();
    await loading.waitFor();
    assert.equal(await page.locator('#app').isVisible(), false);
    release();
    await page.locator('#app').waitFor({ state: 'visible' });
    assert.equal(await page.locator('#loading').isVisible(), false);
    await context.close();
  });

  test('a plotly figure is drawn in a scripted frame without the page\'s origin', async (t) => {
    if (!existsSync(PLOTLY_JS)) t.skip('plotly.js is not installed (Debian package r-cran-plotly)');
    const sid = await session();
    const out = await execute(sid, [
      'import plotly.express as px',
      'fig = px.bar(x=["a", "b", "c"], y=[3, 1, 2],',
      '             title=\'<a href="javascript:top.pwned=1">t</a><img src=x onerror="top.pwned=2">\')',
      'fig.update_layout(height=380)',
      'fig.show()',
    ].join('\n'));
    assert.equal(out.results.length, 1);
    assert.ok(out.results[0]['application/vnd.plotly.v1+json']);
    const { context, page, log } = await openPage(browser, server.url + `/#/session/${sid}`);
    const frame = page.locator('iframe.plotly-result');
    await frame.waitFor();
    assert.equal(await frame.getAttribute('sandbox'), 'allow-scripts');
    assert.equal(await frame.getAttribute('src'), '/ui/plotly-frame.html');
    const inner = page.frameLocator('iframe.plotly-result');
    await inner.locator('body[data-drawn="true"]').waitFor();
    // plotly.js drew three bars, and the title (plotly.py writes it as
    // plotly.js 2 reads it; the frame gives Debian's 1.31 its own form).
    assert.equal(await inner.locator('.bars .point').count(), 3);
    // Its <img onerror> is text, not an element.
    assert.equal(await inner.locator('.gtitle').textContent(), 't<img src=x onerror="top.pwned=2">');
    assert.equal(await inner.locator('img').count(), 0);
    // The frame took the figure's height.
    await page.waitForFunction(() => {
      const f = document.querySelector('iframe.plotly-result');
      return f && f.getBoundingClientRect().height >= 380;
    });
    // Inside, an opaque origin: no way to the page, its storage or the API.
    const child = page.frames().find((f) => f.url().endsWith('/ui/plotly-frame.html'));
    const seen = await child.evaluate(async () => {
      const r = { origin: window.origin };
      try { r.parent = String(window.parent.document.title); } catch (e) { r.parent = e.name; }
      try { r.storage = String(window.sessionStorage.length); } catch (e) { r.storage = e.name; }
      try { await fetch('/v1/sessions', { method: 'POST' }); r.fetch = 'sent'; } catch (e) { r.fetch = e.name; }
      return r;
    });
    assert.deepEqual(seen, { origin: 'null', parent: 'SecurityError', storage: 'SecurityError',
      fetch: 'TypeError' });
    await inner.locator('a', { hasText: 't' }).first().click({ timeout: 3000 }).catch(() => {});
    await page.waitForTimeout(300);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    assert.equal(await page.title(), 'petri');
    // The frame's requests: its page and its two scripts, from the server.
    const origin = new URL(server.url).origin;
    const fromFrame = log.requests.filter((r) => r.frame === 'child').map((r) => r.url);
    assert.ok(fromFrame.includes(origin + '/ui/plotly.min.js'), fromFrame.join('\n'));
    for (const url of fromFrame) assert.ok(url.startsWith(origin + '/ui/'), url);
    assert.ok(!log.requests.some((r) => r.method === 'POST'), 'a POST left the page');
    assert.deepEqual(log.errors, []);
    await context.close();
  });

  test('a session opened by link is found, also once it has ended', async () => {
    const sid = await session();
    await execute(sid, 'print("kept in the record")');
    assert.equal((await client.post('/v1/execute', { code: 'print(1)' })).status, 200);
    const del = await fetch(server.url + `/v1/sessions/${sid}`, { method: 'DELETE' });
    assert.ok(del.ok, String(del.status));
    const { context, page } = await openPage(browser, server.url + `/#/session/${sid}`);
    await page.locator('#executions .cell', { hasText: 'kept in the record' }).waitFor();
    const link = page.locator('#recent').getByRole('link', { name: new RegExp(sid) });
    await link.waitFor();
    assert.equal(await link.getAttribute('aria-current'), 'page');
    assert.match(await page.locator('#session-info').innerText(), /ended/);
    assert.equal(await page.locator('#notebook').isVisible(), false);
    await context.close();
  });

  test('a table\'s frame takes its content\'s height, up to a bound', async () => {
    const sid = await session();
    await execute(sid, [
      'import numpy as np, pandas as pd',
      'wide = pd.DataFrame(np.arange(400).reshape(20, 20) * 1.5, columns=[f"column_{i}" for i in range(20)])',
      'display(wide.describe())',
      'pd.set_option("display.max_rows", 500)',
      'display(pd.DataFrame({"n": range(300)}))',
    ].join('\n'));
    const { context, page, log } = await openPage(browser, server.url + `/#/session/${sid}`);
    const frames = page.locator('iframe.html-result');
    await frames.nth(1).waitFor();
    assert.equal(await frames.first().getAttribute('sandbox'), 'allow-scripts');
    assert.equal(await frames.first().getAttribute('src'), '/ui/html-frame.html');
    await page.frameLocator('iframe.html-result >> nth=0').locator('table').waitFor();
    await page.frameLocator('iframe.html-result >> nth=1').locator('table').waitFor();
    const [wideFrame, longFrame] = await Promise.all([0, 1].map(
      async (i) => (await frames.nth(i).elementHandle()).contentFrame()));
    // describe(): the frame is as tall as its content, nothing cut off at
    // the bottom; sideways it scrolls.
    await page.waitForFunction(() => {
      const f = document.querySelector('iframe.html-result');
      return f.getBoundingClientRect().height > 220;
    });
    await page.waitForTimeout(300);	// the last size message
    const wide = await wideFrame.evaluate(() => {
      const root = document.documentElement;
      return { rows: document.querySelectorAll('tbody tr').length,
        cut: root.scrollHeight > root.clientHeight,
        spare: window.innerHeight - root.getBoundingClientRect().height - (window.innerHeight - root.clientHeight),
        scrollsSideways: root.scrollWidth > root.clientWidth };
    });
    assert.equal(wide.rows, 8);
    assert.equal(wide.cut, false);
    assert.equal(wide.scrollsSideways, true);
    assert.ok(wide.spare >= 0 && wide.spare < 2, `${wide.spare} px below the table`);
    // 300 rows: the bound, then it scrolls.
    await page.waitForFunction(() => {
      const f = document.querySelectorAll('iframe.html-result')[1];
      return Math.round(f.getBoundingClientRect().height) === 640;
    });
    const long = await longFrame.evaluate(() => {
      const root = document.documentElement;
      root.scrollTop = root.scrollHeight;
      return { rows: document.querySelectorAll('tbody tr').length, scrolled: root.scrollTop > 0,
        last: document.querySelector('tbody tr:last-child th').textContent };
    });
    assert.deepEqual(long, { rows: 300, scrolled: true, last: '299' });
    framesAskedForTheirFilesOnly(log);
    assert.deepEqual(log.errors, []);
    await context.close();
  });

  test('an HTML result\'s frame has an opaque origin and runs none of the result', async () => {
    const sid = await session();
    await execute(sid, [
      'class Page:',
      '    def _repr_html_(self):',
      '        return """<p id=shown>shown</p>',
      '<script>window.ran = 1; parent.postMessage("pwned-script", "*"); parent.document.title = "pwned"</script>',
      '<script src="/ui/app.js"></script>',
      '<img id=img src="data:," onerror="window.ran = 2; parent.postMessage(\'pwned-onerror\', \'*\')">',
      '<svg onload="window.ran = 3"></svg>',
      '<meta http-equiv="refresh" content="0; url=/v1/sessions">',
      '<a id=away href="/v1/sessions">away</a>"""',
      'display(Page())',
    ].join('\n'));
    const { context, page, log } = await openPage(browser, server.url + '/');
    await page.locator('#app').waitFor({ state: 'visible' });
    // Every message the page is sent, from before the frame is made.
    await page.evaluate((id) => {
      window.seen = [];
      window.addEventListener('message', (ev) => window.seen.push(ev.data));
      location.hash = '#/session/' + id;
    }, sid);
    const frame = page.locator('iframe.html-result');
    await page.frameLocator('iframe.html-result').locator('#shown').waitFor();
    const child = await (await frame.elementHandle()).contentFrame();
    await page.frameLocator('iframe.html-result').locator('#away').click();
    await page.waitForTimeout(500);
    const seen = await child.evaluate(async () => {
      const r = { origin: window.origin, ran: window.ran, url: location.pathname,
        scripts: document.scripts.length };
      r.domain = document.domain;
      try { document.domain = location.hostname; r.setDomain = 'set'; } catch (e) { r.setDomain = e.name; }
      try { r.parent = String(window.parent.document.title); } catch (e) { r.parent = e.name; }
      try { r.storage = String(window.sessionStorage.length); } catch (e) { r.storage = e.name; }
      try { await fetch('/v1/sessions'); r.fetch = 'sent'; } catch (e) { r.fetch = e.name; }
      return r;
    });
    // Its own script and the result's two, none of which ran; still on its
    // page after the refresh and the click.
    assert.deepEqual(seen, { origin: 'null', ran: undefined, url: '/ui/html-frame.html', scripts: 3,
      domain: '', setDomain: 'SecurityError', parent: 'SecurityError', storage: 'SecurityError', fetch: 'TypeError' });
    assert.equal(await page.title(), 'petri');
    const messages = await page.evaluate(() => window.seen);
    assert.ok(messages.length >= 1, 'no size message');
    for (const m of messages) {
      assert.equal(m.petri, 'html-size', JSON.stringify(m));
      assert.equal(typeof m.height, 'number');
    }
    framesAskedForTheirFilesOnly(log);
    assert.ok(log.console.some((m) => /Content Security Policy/.test(m)), log.console.join('\n'));
    assert.deepEqual(log.errors, []);
    await context.close();
  });
});
