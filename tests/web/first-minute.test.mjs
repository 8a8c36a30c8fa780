// The web page's first minute (issue 30), in Debian's chromium against a
// live `petri serve` without keys: the first paint says it is loading, a
// plotly figure is drawn in a frame with scripts but without the page's
// origin, a session opened by link is found even when it has ended, and a
// wide or long table's frame takes its content's height up to a bound.
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
    const { context, page } = await openPage(browser, server.url + `/#/session/${sid}`);
    const frames = page.locator('iframe.html-result');
    await frames.nth(1).waitFor();
    assert.equal(await frames.first().getAttribute('sandbox'), 'allow-same-origin');
    await page.frameLocator('iframe.html-result >> nth=0').locator('table').waitFor();
    await page.frameLocator('iframe.html-result >> nth=1').locator('table').waitFor();
    // describe(): nothing cut off at the bottom; sideways it scrolls.
    await page.waitForFunction(() => {
      const f = document.querySelector('iframe.html-result');
      const root = f.contentDocument.documentElement;
      return root.scrollHeight <= root.clientHeight + 1 && f.getBoundingClientRect().height > 220;
    });
    const wide = await frames.first().evaluate((f) => {
      const root = f.contentDocument.documentElement;
      return { rows: f.contentDocument.querySelectorAll('tbody tr').length,
        scrollsSideways: root.scrollWidth > root.clientWidth };
    });
    assert.deepEqual(wide, { rows: 8, scrollsSideways: true });
    // 300 rows: the bound, then it scrolls.
    await page.waitForFunction(() => {
      const f = document.querySelectorAll('iframe.html-result')[1];
      return Math.round(f.getBoundingClientRect().height) === 640;
    });
    await context.close();
  });
});
