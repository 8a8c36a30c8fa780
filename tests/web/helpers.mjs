// What the browser tests share: a `petri serve` of their own (a free
// loopback port, its own config; host uids leased from the configured
// range like every daemon's), Debian's chromium driven by playwright-core,
// and a watch on what the page logs and requests.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const PETRI = process.env.PETRI_BIN || resolve(here, '..', '..', 'build', 'petri');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// Where screenshots of the main views go when asked (make web-screenshots).
export const SHOTS = process.env.PETRI_WEB_SCREENSHOTS || '';

// Start petri serve with config; resolves once it listens and its warm
// template is up (or it says there is none), as tests/api/conftest.py does.
export async function startServer(config = '') {
  const dir = mkdtempSync(join(tmpdir(), 'petri-web-'));
  const cfg = join(dir, 'petri.ini');
  writeFileSync(cfg, config);
  // A record of its own (persistent by default): the page shows this
  // daemon's executions only, and it goes with dir.
  const proc = spawn(PETRI, ['serve', '--listen', '127.0.0.1:0', '--config', cfg],
    { stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, STATE_DIRECTORY: join(dir, 'state') } });
  let stderr = '';
  let exited = false;
  proc.stderr.on('data', (d) => { stderr += d; });
  proc.once('exit', () => { exited = true; });
  const url = await new Promise((res, rej) => {
    let buf = '';
    proc.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/listening on (http:\/\/\S+)/);
      if (m) res(m[1]);
    });
    proc.once('exit', (c) => rej(new Error(`petri serve exited with ${c}: ${stderr}`)));
  });
  // The warm path settles (GET /healthz: warm ready, off or failed), or
  // 15 s pass: the page is tested in the steady state, never by log text.
  const deadline = Date.now() + 15000;
  while (!exited && Date.now() < deadline) {
    try {
      const h = await (await fetch(`${url}/healthz`)).json();
      if (['ready', 'off', 'failed'].includes(h.warm)) break;
    } catch { /* not answering yet */ }
    await new Promise((res) => setTimeout(res, 100));
  }
  return {
    url,
    stderr: () => stderr,
    async stop() {
      const exited = new Promise((res) => {
        if (proc.exitCode !== null) res(proc.exitCode);
        else proc.once('exit', (code) => res(code));
      });
      proc.kill('SIGTERM');
      try {
        assert.equal(await exited, 0, stderr.slice(-3000));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

export async function launch() {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: scripts/deps installs chromium`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // The machine's sandbox for chromium needs user namespaces it may not
    // have as root; the page is ours and the tests' own.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}

// A page that keeps its console messages, failed CSP checks and requests.
export async function openPage(browser, url, opts = {}) {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 },
    ...opts });
  context.setDefaultTimeout(15000);
  const page = await context.newPage();
  const log = { console: [], requests: [], responses: [], errors: [] };
  page.on('console', (m) => log.console.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => log.errors.push(String(e)));
  page.on('request', (r) => log.requests.push({ method: r.method(), url: r.url(),
    auth: r.headers().authorization || null, frame: r.frame() === page.mainFrame() ? 'main' : 'child' }));
  page.on('response', (r) => log.responses.push({ status: r.status(), url: r.url() }));
  await page.goto(url);
  return { context, page, log };
}

// The API from the test itself (as curl would call it).
export function api(base, key) {
  const h = key ? { Authorization: `Bearer ${key}` } : {};
  return {
    async post(path, body) {
      const r = await fetch(base + path, { method: 'POST', headers: { ...h, 'Content-Type': 'application/json' },
        body: JSON.stringify(body) });
      return { status: r.status, body: await r.json().catch(() => null) };
    },
    async get(path) {
      const r = await fetch(base + path, { headers: h });
      return { status: r.status, body: await r.json().catch(() => null) };
    },
  };
}
