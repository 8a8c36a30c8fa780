// The web page against a server with API keys: without the key it shows
// only the prompt and fetches no data; a wrong key is refused; with the
// key it works (listings, the event stream, a run), sending the key as the
// API expects and keeping it in this tab's sessionStorage only.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, launch, openPage, api } from './helpers.mjs';

const KEY = 'web-test-key-7f3a';

describe('the web page, with keys', () => {
  let server, browser, marker, sid;

  before(async () => {
    [server, browser] = await Promise.all([startServer(`[server]\napi_keys = ${KEY}\n`), launch()]);
    // Something the page must not show before the key is given.
    marker = `secret-output-${Date.now()}`;
    const client = api(server.url, KEY);
    const s = await client.post('/v1/sessions', {});
    assert.equal(s.status, 201);
    sid = s.body.id;
    const r = await client.post(`/v1/sessions/${sid}/execute`, { code: `print("${marker}")` });
    assert.equal(r.status, 200);
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('without a key: the prompt alone, and no data fetched', async () => {
    const { context, page, log } = await openPage(browser, server.url + '/');
    try {
      const prompt = page.locator('#keyprompt');
      await prompt.waitFor({ state: 'visible' });
      assert.equal(await page.locator('#app').isVisible(), false);
      await page.getByLabel('API key').waitFor();
      const text = await page.locator('body').innerText();
      assert.doesNotMatch(text, new RegExp(marker));
      assert.doesNotMatch(text, new RegExp(sid));
      assert.doesNotMatch(await page.content(), new RegExp(`${marker}|${sid}`));
      // Every API request was refused; the page did not go on to others.
      const apiResponses = log.responses.filter((r) => new URL(r.url).pathname.startsWith('/v1/'));
      assert.ok(apiResponses.length >= 1);
      assert.ok(apiResponses.every((r) => r.status === 401), JSON.stringify(apiResponses));
      assert.deepEqual([...new Set(apiResponses.map((r) => new URL(r.url).pathname))], ['/v1/sessions']);

      // A wrong key: refused, still only the prompt.
      await page.getByLabel('API key').fill('wrong-key');
      await page.getByRole('button', { name: 'Use key' }).click();
      await page.locator('#key-error', { hasText: 'refused' }).waitFor();
      assert.equal(await page.locator('#app').isVisible(), false);
      assert.ok(log.responses.filter((r) => new URL(r.url).pathname.startsWith('/v1/'))
        .every((r) => r.status === 401));
    } finally {
      await context.close();
    }
  });

  test('with the key: the record, live updates and a run', async () => {
    const { context, page, log } = await openPage(browser, server.url + '/');
    try {
      await page.getByLabel('API key').fill(KEY);
      await page.getByRole('button', { name: 'Use key' }).click();
      await page.locator('#app').waitFor({ state: 'visible' });
      assert.equal(await page.locator('#keyprompt').isVisible(), false);
      await page.locator('#executions .cell', { hasText: marker }).waitFor();
      // Kept for this tab only, and sent as a Bearer key.
      assert.equal(await page.evaluate(() => sessionStorage.getItem('petri.key')), KEY);
      assert.equal(await page.evaluate(() => localStorage.length), 0);
      assert.deepEqual(await context.cookies(), []);
      const apiRequests = log.requests.filter((r) => new URL(r.url).pathname.startsWith('/v1/'));
      assert.ok(apiRequests.filter((r) => r.auth === `Bearer ${KEY}`).length >= 2);

      // The event stream works with the key: a run made by the API appears.
      const live = `live-with-key-${Date.now()}`;
      assert.equal((await api(server.url, KEY).post('/v1/execute', { code: `print("${live}")` })).status, 200);
      await page.locator('#executions .cell', { hasText: live }).waitFor();
      assert.ok(log.requests.some((r) => r.url.endsWith('/v1/events') && r.auth === `Bearer ${KEY}`));

      // A run from the page, in the session made by the API.
      await page.locator('#sessions').getByRole('link', { name: new RegExp(sid) }).click();
      await page.getByRole('textbox', { name: 'Code' }).fill('print(6 * 7)');
      await page.getByRole('button', { name: 'Run' }).click();
      // The whole text: the marker printed above (a time in ms) may hold "42".
      await page.locator('#executions .cell pre.stdout', { hasText: /^42\s*$/ }).waitFor();

      // A reload keeps the key (same tab); a new tab has none.
      await page.reload();
      await page.locator('#app').waitFor({ state: 'visible' });
      const other = await context.newPage();
      await other.goto(server.url + '/');
      await other.locator('#keyprompt').waitFor({ state: 'visible' });
      await other.close();
    } finally {
      await context.close();
    }
  });
});
