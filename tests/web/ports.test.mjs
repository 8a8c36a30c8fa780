// A page a sandbox serves, opened in Debian's chromium through petri's ports
// (docs/api.md "Ports") on a `petri serve` without keys, as an attacker's
// code would serve it: its scripts run, but in an origin of their own (the
// answer's Content-Security-Policy sandbox), so they can neither call
// petri's API as the page's user (a keyless loopback daemon would take the
// call from its own origin) nor read what the browser keeps for petri.
//
// Run with `node --test` from tests/web (make web-test does), PETRI_BIN
// naming the binary.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, launch, api } from './helpers.mjs';

const PAGE = `<!doctype html><title>loading</title><script>
(async () => {
  let call = 'none', storage = 'none', cookie = 'none';
  try {
    const r = await fetch('/v1/sessions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    call = 'status ' + r.status;
  } catch (e) { call = 'blocked'; }
  try { localStorage.setItem('stolen', '1'); storage = 'yes'; } catch (e) { storage = 'denied'; }
  try { document.cookie = 'x=1'; cookie = document.cookie === '' ? 'none' : 'yes'; } catch (e) { cookie = 'denied'; }
  document.title = ['call ' + call, 'storage ' + storage, 'cookie ' + cookie, 'origin ' + origin].join('; ');
})();
</script>`;

describe('a page a sandbox serves', () => {
  let server, browser, client;

  before(async () => {
    [server, browser] = await Promise.all([startServer(), launch()]);
    client = api(server.url);
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('runs its scripts in an origin of its own: no call to petri, no storage of petri\'s', async () => {
    const s = await client.post('/v1/sessions', {});
    assert.equal(s.status, 201);
    const sid = s.body.id;
    const w = await client.post(`/v1/sessions/${sid}/execute`,
      { code: `open('page.html', 'w').write(${JSON.stringify(PAGE)})` });
    assert.equal(w.body.status, 'ok', JSON.stringify(w.body));
    const c = await client.post(`/v1/sessions/${sid}/commands`,
      { args: ['python3', '-u', '-m', 'http.server', '8000'] });
    assert.equal(c.status, 201);
    // Until it listens.
    let ready = false;
    for (let i = 0; i < 100 && !ready; i++) {
      const r = await fetch(`${server.url}/v1/sessions/${sid}/ports/8000/page.html`);
      ready = r.status === 200;
      if (!ready) await new Promise((res) => setTimeout(res, 100));
    }
    assert.ok(ready, 'the server never answered');
    const before = (await client.get('/v1/sessions')).body.sessions.length;
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.url}/v1/sessions/${sid}/ports/8000/page.html`);
    await page.waitForFunction(() => document.title !== 'loading', null, { timeout: 30000 });
    const title = await page.title();
    assert.match(title, /origin null/, title);
    assert.doesNotMatch(title, /call status 2\d\d/, title);
    assert.match(title, /storage denied/, title);
    assert.doesNotMatch(title, /cookie yes/, title);
    // Nothing was made through the page.
    assert.equal((await client.get('/v1/sessions')).body.sessions.length, before);
    await context.close();
  });
});
