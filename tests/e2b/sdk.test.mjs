// The official E2B JS SDKs, unchanged, against a running `petri serve`
// (issue 11; the wire contract they speak is read from their sources).
//
//   PETRI_URL=http://127.0.0.1:PORT  base URL of the server (E2B_API_URL and
//                                    E2B_SANDBOX_URL are both set to it)
//   E2B_SDK=new|old|2.14             which pinned SDK set (tests/e2b/{new,old})
//   E2B_API_KEY=e2b_<hex>            a key of that server ([server] api_keys)
//
// test_e2b.py starts the server and runs this once per SDK set. Every SDK
// call has a short request timeout, so a server that does not answer fails
// the test quickly instead of hanging it.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
// Each set: its entry module, and where its e2b and code interpreter live.
const SDKS = {
  new: { entry: 'new/sdk.mjs', e2b: 'new/node_modules/e2b',
    ci: 'new/node_modules/@e2b/code-interpreter' },
  old: { entry: 'old/sdk.mjs', e2b: 'old/node_modules/e2b',
    ci: 'old/node_modules/@e2b/code-interpreter' },
  '2.14': { entry: 'old/sdk-2.14.mjs', e2b: 'old/node_modules/e2b-2.14', ci: null },
};
const which = process.env.E2B_SDK || 'new';
const set = SDKS[which];
if (!set) throw new Error(`E2B_SDK must be one of ${Object.keys(SDKS)}, not ${which}`);
const versionOf = (dir) => dir && JSON.parse(readFileSync(join(here, dir, 'package.json'), 'utf8')).version;
const PETRI_URL = process.env.PETRI_URL;
if (!PETRI_URL) throw new Error('PETRI_URL must name a running petri serve');
process.env.E2B_API_URL = PETRI_URL;
process.env.E2B_SANDBOX_URL = PETRI_URL;
delete process.env.E2B_DEBUG;
delete process.env.E2B_DOMAIN;
const API_KEY = process.env.E2B_API_KEY;
if (!API_KEY) throw new Error('E2B_API_KEY must be a key of the server');

const sdk = await import(pathToFileURL(join(here, set.entry)).href);
const { Sandbox, CommandExitError, NotFoundError, AuthenticationError, SandboxError, TimeoutError } = sdk;
const versions = { e2b: versionOf(set.e2b), ci: versionOf(set.ci) };
const CI = set.ci !== null;
const ciOnly = CI ? {} : { skip: `e2b ${versions.e2b} has no code interpreter` };

const REQ = { requestTimeoutMs: 20_000 };      // every HTTP request of the SDK
const T = { timeout: 90_000 };                 // every test
const HOME = '/home/user';
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const created = [];

async function create(opts = {}) {
  const sbx = await Sandbox.create({ ...REQ, timeoutMs: 300_000, ...opts });
  created.push(sbx.sandboxId);
  return sbx;
}

async function run(sbx, code, opts = {}) {
  return sbx.runCode(code, { ...REQ, timeoutMs: 60_000, ...opts });
}

// The one line of stdout of a command (throws CommandExitError on failure).
async function sh(sbx, cmd, opts = {}) {
  const r = await sbx.commands.run(cmd, { ...REQ, timeoutMs: 60_000, ...opts });
  return r.stdout.trim();
}

// A raw data-plane request, the way the SDK routes one, with the headers given.
function dataPlane(path, sandboxId, port, headers = {}, init = {}) {
  return fetch(new URL(path.replace(/^\//, ''), PETRI_URL.replace(/\/?$/, '/')), {
    ...init,
    headers: { 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': String(port), ...headers },
    signal: AbortSignal.timeout(20_000),
  });
}

before(async () => {
  // Fail at once, with the reason, when nothing listens there.
  const r = await fetch(new URL('/healthz', PETRI_URL), { signal: AbortSignal.timeout(5_000) });
  assert.ok(r.ok, `${PETRI_URL}/healthz answered ${r.status}`);
});

after(async () => {
  await Promise.allSettled(created.map((id) => Sandbox.kill(id, REQ)));
});

describe(`E2B SDK ${which}: e2b ${versions.e2b}, code-interpreter ${versions.ci}`, () => {
  let sbx;
  before(async () => { sbx = await create(); });

  describe('lifecycle', () => {
    test('create gives a running sandbox with an id', T, async () => {
      assert.match(sbx.sandboxId, /^[A-Za-z0-9_-]{4,}$/);
      assert.equal(await sbx.isRunning(REQ), true);
    });

    test('getInfo describes it', T, async () => {
      const info = await sbx.getInfo(REQ);
      assert.equal(info.sandboxId, sbx.sandboxId);
      assert.equal(info.state, 'running');
      assert.equal(typeof info.templateId, 'string');
      assert.ok(!isNaN(info.startedAt.getTime()), 'startedAt is a date');
      assert.ok(!isNaN(info.endAt.getTime()), 'endAt is a date');
      assert.ok(info.endAt > info.startedAt);
      assert.ok(Number.isInteger(info.cpuCount) && info.cpuCount >= 1, `cpuCount ${info.cpuCount}`);
      assert.ok(Number.isInteger(info.memoryMB) && info.memoryMB > 0, `memoryMB ${info.memoryMB}`);
      assert.match(info.envdVersion, /^\d+\.\d+\.\d+$/);
    });

    test('list includes it', T, async () => {
      const pager = Sandbox.list(REQ);
      const ids = [];
      for (let page = 0; pager.hasNext && page < 20; page++)
        ids.push(...(await pager.nextItems(REQ)).map((s) => s.sandboxId));
      assert.ok(ids.includes(sbx.sandboxId), `${sbx.sandboxId} in ${ids}`);
    });

    test('setTimeout moves the end, counted from now, both ways', T, async () => {
      await sbx.setTimeout(900_000, REQ);
      let left = (await sbx.getInfo(REQ)).endAt - Date.now();
      assert.ok(left > 600_000 && left <= 960_000, `extended: ${left} ms left`);
      await sbx.setTimeout(240_000, REQ);
      left = (await sbx.getInfo(REQ)).endAt - Date.now();
      assert.ok(left > 0 && left <= 300_000, `shortened: ${left} ms left`);
      await sbx.setTimeout(300_000, REQ);
    });

    test('connect by id reaches the same sandbox and its state', T, async () => {
      await sbx.files.write(`${HOME}/connect-marker.txt`, 'same sandbox', REQ);
      if (CI) await run(sbx, 'connect_marker = 1234');
      const again = await Sandbox.connect(sbx.sandboxId, REQ);
      assert.equal(again.sandboxId, sbx.sandboxId);
      assert.equal(await again.files.read(`${HOME}/connect-marker.txt`, REQ), 'same sandbox');
      if (CI) assert.equal((await run(again, 'connect_marker + 1')).text, '1235');
    });

    test('a wrong API key is refused with AuthenticationError', T, async () => {
      const wrong = 'e2b_' + '0'.repeat(40);
      assert.notEqual(wrong, API_KEY);
      await assert.rejects(Sandbox.create({ ...REQ, apiKey: wrong }),
        (e) => e instanceof AuthenticationError, 'create with a wrong key');
      await assert.rejects(Sandbox.connect(sbx.sandboxId, { ...REQ, apiKey: wrong }),
        (e) => e instanceof AuthenticationError, 'connect with a wrong key');
    });

    test('kill ends it; killing, connecting to or asking about it again says not found', T, async () => {
      const victim = await create();
      const id = victim.sandboxId;
      // The instance method answers true from e2b 2.51; before, it returns
      // nothing (2.28's is `await SandboxApi.kill(...)` without a return).
      const killed = await victim.kill(REQ);
      assert.ok(killed === true || (which !== 'new' && killed === undefined), `kill gave ${killed}`);
      assert.equal(await Sandbox.kill(id, REQ), false);
      await assert.rejects(Sandbox.getInfo(id, REQ), (e) => e instanceof NotFoundError);
      await assert.rejects(Sandbox.connect(id, REQ), (e) => e instanceof NotFoundError);
      // Its data plane is gone too: an error, not a hang.
      await assert.rejects(victim.files.read(`${HOME}/x`, REQ));
      await assert.rejects(victim.commands.run('true', { ...REQ, timeoutMs: 20_000 }));
      if (CI) await assert.rejects(run(victim, '1'));
    });

    test('list filters by metadata and state, and pages newest first', T, async () => {
      const tag = `t${Date.now()}${Math.random().toString(16).slice(2)}`;
      const older = await create({ metadata: { tag, name: 'a b+c%d' } });
      const newer = await create({ metadata: { tag } });
      const other = await create({ metadata: { tag: `${tag}-not` } });
      const ids = async (opts) => (await Sandbox.list({ ...REQ, ...opts }).nextItems(REQ)).map((s) => s.sandboxId);
      assert.deepEqual(await ids({ query: { metadata: { tag } } }), [newer.sandboxId, older.sandboxId]);
      assert.deepEqual(await ids({ query: { metadata: { tag, name: 'a b+c%d' } } }), [older.sandboxId]);
      assert.deepEqual(await ids({ query: { metadata: { tag }, state: ['running'] } }),
        [newer.sandboxId, older.sandboxId]);
      assert.deepEqual(await ids({ query: { metadata: { tag }, state: ['paused'] } }), []);
      const pager = Sandbox.list({ ...REQ, limit: 1, query: { metadata: { tag } } });
      assert.deepEqual((await pager.nextItems(REQ)).map((s) => s.sandboxId), [newer.sandboxId]);
      assert.equal(pager.hasNext, true);
      assert.deepEqual((await pager.nextItems(REQ)).map((s) => s.sandboxId), [older.sandboxId]);
      assert.equal(pager.hasNext, false);
      for (const victim of [older, newer, other]) await victim.kill(REQ);
    });

    test('killing a sandbox that never existed returns false', T, async () => {
      assert.equal(await Sandbox.kill('nosuchsandbox0000000000', REQ), false);
    });
  });

  describe('code', ciOnly, () => {
    test('state persists across runCode calls; execution.text is the last value', T, async () => {
      let e = await run(sbx, 'x = 41\ny = "kept"');
      assert.equal(e.error, undefined);
      assert.equal(e.text, undefined, 'an assignment has no value');
      e = await run(sbx, 'x + 1');
      assert.equal(e.text, '42');
      assert.equal(e.results.length, 1);
      assert.equal(e.results[0].isMainResult, true);
      assert.equal((await run(sbx, '1+1')).text, '2');
      assert.deepEqual((await run(sbx, 'print(y)')).logs.stdout.join(''), 'kept\n');
    });

    test('onStdout and onStderr arrive while the code still runs', T, async () => {
      // The code waits for a file that the test writes only when the first
      // stdout chunk has reached it: if petri buffered output until the
      // end, the code would wait out its 20 s and print "not released".
      await sbx.files.remove(`${HOME}/release`, REQ).catch(() => {});
      const out = [], err = [];
      let released = false;
      const e = await run(sbx, [
        'import os, sys, time',
        'print("first", flush=True)',
        'print("to stderr", file=sys.stderr, flush=True)',
        'deadline = time.time() + 20',
        'while not os.path.exists("/home/user/release") and time.time() < deadline:',
        '    time.sleep(0.05)',
        'print("released" if os.path.exists("/home/user/release") else "not released")',
      ].join('\n'), {
        onStdout: async (m) => {
          out.push(m.line);
          if (!released && m.line.includes('first')) {
            released = true;
            await sbx.files.write(`${HOME}/release`, '', REQ);
          }
        },
        onStderr: (m) => { err.push(m.line); assert.equal(m.error, true); },
      });
      assert.equal(e.error, undefined, JSON.stringify(e.error));
      assert.match(out.join(''), /first\n[^]*released\n/);
      assert.doesNotMatch(out.join(''), /not released/);
      assert.match(err.join(''), /to stderr/);
      assert.deepEqual(e.logs.stdout.join(''), out.join(''));
      assert.deepEqual(e.logs.stderr.join(''), err.join(''));
    });

    test('one print is one stdout event, as a notebook sends it', T, async () => {
      for (let i = 0; i < 10; i++) {
        const out = [], err = [];
        const e = await run(sbx, 'import sys\nprint("hello")\nprint("oops", file=sys.stderr)',
          { onStdout: (m) => out.push(m.line), onStderr: (m) => err.push(m.line) });
        assert.deepEqual(out, ['hello\n']);
        assert.deepEqual(err, ['oops\n']);
        assert.deepEqual(e.logs.stdout, ['hello\n']);
      }
    });

    test('an indented cell runs as a notebook runs it', T, async () => {
      const e = await run(sbx, '\n        a = 20\n    \n        if a:\n            a += 1\n        a * 2\n        ');
      assert.equal(e.error, undefined, JSON.stringify(e.error));
      assert.equal(e.text, '42');
    });

    test('a sandbox killed under runCode is TimeoutError, not an error item', T, async () => {
      const victim = await create();
      const execution = run(victim, 'import time; time.sleep(300)', { timeoutMs: 300_000 });
      await new Promise((r) => setTimeout(r, 1_000));
      await victim.kill(REQ);
      await assert.rejects(execution, (e) => e instanceof TimeoutError
        && /killed while the request was in progress/.test(e.message));
    });

    test('a matplotlib chart comes back as a PNG result', T, async () => {
      const seen = [];
      const e = await run(sbx, [
        'import matplotlib.pyplot as plt',
        'plt.plot([1, 2, 3], [2, 4, 1])',
        'plt.title("t")',
        'plt.show()',
      ].join('\n'), { onResult: (r) => seen.push(r) });
      assert.equal(e.error, undefined, JSON.stringify(e.error));
      const pngs = e.results.filter((r) => r.png);
      assert.equal(pngs.length, 1, JSON.stringify(e.results.map((r) => r.formats())));
      assert.ok(Buffer.from(pngs[0].png, 'base64').subarray(0, 8).equals(PNG_MAGIC));
      assert.equal(pngs[0].isMainResult, false, 'a display output is not the main result');
      assert.ok(pngs[0].formats().includes('png'));
      assert.equal(seen.length, e.results.length, 'onResult saw every result');
    });

    test('a figure\'s result has its chart as data; a DataFrame\'s, its columns', T, async () => {
      let e = await run(sbx, `
        import matplotlib.pyplot as plt
        plt.bar(['A', 'B'], [3, 5], label='n')
        plt.title('Counts'); plt.xlabel('Letter'); plt.ylabel('Number (k)')
        plt.show()
      `);
      assert.equal(e.error, undefined, JSON.stringify(e.error));
      const chart = e.results[0].chart;
      assert.ok(chart, JSON.stringify(e.results.map((r) => r.formats())));
      assert.equal(chart.type, 'bar');
      assert.equal(chart.title, 'Counts');
      assert.equal(chart.y_unit, 'k');
      assert.deepEqual(chart.elements, [{ label: 'A', value: 3, group: 'n' }, { label: 'B', value: 5, group: 'n' }]);
      e = await run(sbx, 'import pandas as pd\npd.DataFrame({"a": [1, 2, 3]})');
      assert.deepEqual(e.results[0].data, { a: [1, 2, 3] });
      e = await run(sbx, 'from PIL import Image\nImage.new("RGB", (4, 4)).show()');
      assert.ok(e.results[0].png, 'show() gives the image');
    });

    test('a DataFrame as the last value comes back as HTML and text', T, async () => {
      const e = await run(sbx, 'import pandas as pd\ndf = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})\ndf');
      assert.equal(e.error, undefined, JSON.stringify(e.error));
      const main = e.results.find((r) => r.isMainResult);
      assert.ok(main, 'a main result');
      assert.match(main.html, /<table/);
      assert.match(main.html, /<td>x<\/td>/);
      assert.match(e.text, /a\s+b/);
    });

    test('an exception is execution.error with name, value and traceback; the state survives', T, async () => {
      const errors = [];
      const e = await run(sbx, 'def f(d):\n    return d["missing"]\nf({})',
        { onError: (err) => errors.push(err) });
      assert.ok(e.error, 'execution.error is set');
      assert.equal(e.error.name, 'KeyError');
      assert.match(e.error.value, /missing/);
      assert.equal(typeof e.error.traceback, 'string');
      assert.match(e.error.traceback, /KeyError/);
      assert.match(e.error.traceback, /in f|line 2/);
      assert.equal(errors.length, 1);
      assert.equal(e.text, undefined);
      assert.equal((await run(sbx, 'x')).text, '41');
      const z = await run(sbx, '1/0');
      assert.equal(z.error.name, 'ZeroDivisionError');
    });

    test('JavaScript and R through runCode: their value, output, charts and errors', T, async () => {
      let e = await run(sbx, 'const xs = [1, 2, 3];\nconsole.log("sum", xs.reduce((a, b) => a + b))\nxs.length',
        { language: 'js' });
      assert.equal(e.text, '3');
      assert.equal(e.logs.stdout.join(''), 'sum 6\n');
      e = await run(sbx, 'null.x', { language: 'javascript' });
      assert.equal(e.error.name, 'TypeError');
      e = await run(sbx, 'await Promise.resolve("Hello World!")', { language: 'js' });
      assert.equal(e.text, 'Hello World!', 'top-level await gives its value, quotes dropped');
      e = await run(sbx, 'x <- c(3, 5)\nmean(x)\nplot(x)', { language: 'r' });
      assert.equal(e.logs.stdout.join(''), '', 'a value is not printed on stdout');
      assert.equal(e.results[0].text, '[1] 4', 'but displayed, as IRkernel does');
      assert.equal(e.results[0].isMainResult, false);
      assert.equal(e.text, undefined);
      assert.ok(e.results.some((r) => r.png), 'the plot comes back as a PNG');
      e = await run(sbx, 'getwd()', { language: 'r' });
      assert.deepEqual(e.results.map((r) => r.text), [`[1] "${HOME}"`]);
      e = await run(sbx, 'print("Hello, World!")\ninvisible(1)', { language: 'r' });
      assert.equal(e.logs.stdout.join(''), '[1] "Hello, World!"\n', 'print() still writes');
      assert.equal(e.results.length, 0);
      e = await run(sbx, 'stop("no")', { language: 'r' });
      assert.equal(e.error.value, 'no');
    });

    test('Java through runCode: the last value, envs as system properties, errors', T, async () => {
      let e = await run(sbx, 'int x = 20;\nSystem.out.println("hi " + x);\nx + 22', { language: 'java' });
      assert.equal(e.text, '42');
      assert.equal(e.logs.stdout.join(''), 'hi 20\n');
      e = await run(sbx, 'System.getProperty("FOO")', { language: 'java', envs: { FOO: 'bar' } });
      assert.equal(e.results[0]?.text.trim(), 'bar');
      e = await run(sbx, 'System.getProperty("FOO", "default")', { language: 'java' });
      assert.equal(e.results[0]?.text.trim(), 'default');
      e = await run(sbx, 'Integer.parseInt("x")', { language: 'java' });
      assert.equal(e.error.name, 'NumberFormatException');
    });

    test('TypeScript through runCode: JavaScript once its types are stripped', T, async () => {
      let e = await run(sbx, 'process.cwd()', { language: 'typescript' });
      assert.equal(e.text, HOME, 'the value of the last expression, quotes dropped');
      e = await run(sbx, 'type Pair = [string, number];\nconst p: Pair = ["n", 2];\n' +
        'console.log(`${p[0]}=${p[1]}`);\nawait Promise.resolve(p[1] as number * 21)',
        { language: 'ts' });
      assert.deepEqual(e.logs.stdout, ['n=2\n']);
      assert.equal(e.text, '42', 'top-level await gives its value');
      e = await run(sbx, 'let wrong: number = "a string";\nwrong', { language: 'ts' });
      assert.equal(e.text, 'a string', 'no type checking: a type error still runs');
      e = await run(sbx, 'function f(s: string {\n}', { language: 'ts' });
      assert.equal(e.error.name, 'SyntaxError');
      assert.match(e.error.value, /^main\.ts:1:\d+: /, 'the place of the syntax error');
    });

    test('code runs in /home/user, where the files API writes', T, async () => {
      const e = await run(sbx, 'import os\nprint(os.getcwd())');
      assert.equal(e.logs.stdout.join('').trim(), HOME);
      const ctx = await sbx.createCodeContext({ ...REQ, cwd: '/tmp' });
      assert.equal(ctx.cwd, '/tmp', 'a context may work anywhere in the sandbox');
      assert.equal((await run(sbx, 'import os\nos.getcwd()', { context: ctx })).text, '/tmp');
      assert.equal((await run(sbx, '"it\'s"')).text, "it's", 'one pair of quotes dropped, as E2B');
    });

    test('contexts: separate state, listed, restarted, removed', T, async () => {
      const ctx = await sbx.createCodeContext({ ...REQ });
      assert.equal(typeof ctx.id, 'string');
      assert.equal(ctx.language, 'python');
      assert.equal(ctx.cwd, HOME);
      await run(sbx, 'only_in_ctx = "ctx"', { context: ctx });
      assert.equal((await run(sbx, 'only_in_ctx', { context: ctx })).text, 'ctx');
      const outside = await run(sbx, 'only_in_ctx');
      assert.equal(outside.error?.name, 'NameError', 'the default context does not see it');
      const inside = await run(sbx, 'x', { context: ctx });
      assert.equal(inside.error?.name, 'NameError', 'the context does not see the default one');

      // Same files, though.
      await run(sbx, 'open("/home/user/from_ctx.txt", "w").write("shared")', { context: ctx });
      assert.equal(await sbx.files.read(`${HOME}/from_ctx.txt`, REQ), 'shared');

      const listed = await sbx.listCodeContexts();
      assert.ok(listed.some((c) => c.id === ctx.id), JSON.stringify(listed));

      await sbx.restartCodeContext(ctx);
      const after = await run(sbx, 'only_in_ctx', { context: ctx });
      assert.equal(after.error?.name, 'NameError', 'a restarted context starts empty');

      await sbx.removeCodeContext(ctx.id);
      assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
      await assert.rejects(run(sbx, '1', { context: ctx }), (e) => e instanceof SandboxError);
      assert.equal((await run(sbx, 'x')).text, '41', 'the default context is untouched');
    });

    test('a second sandbox created while this one is warm has its own state', T, async () => {
      const other = await create();
      const e = await run(other, 'x');
      assert.equal(e.error?.name, 'NameError');
      await other.kill(REQ);
    });
  });

  describe('files', () => {
    test('write and read text, by absolute and relative path', T, async () => {
      const info = await sbx.files.write(`${HOME}/notes/hello.txt`, 'héllo\nworld\n', REQ);
      assert.equal(info.name, 'hello.txt');
      assert.equal(info.path, `${HOME}/notes/hello.txt`);
      assert.equal(await sbx.files.read(`${HOME}/notes/hello.txt`, REQ), 'héllo\nworld\n');
      await sbx.files.write('rel.txt', 'relative', REQ);
      assert.equal(await sbx.files.read(`${HOME}/rel.txt`, REQ), 'relative');
      assert.equal(await sbx.files.read('rel.txt', REQ), 'relative');
    });

    test('bytes round-trip, and empty files', T, async () => {
      const bytes = new Uint8Array([0, 1, 2, 250, 255, 0, 7, 13, 10]);
      await sbx.files.write(`${HOME}/data.bin`, bytes.buffer, REQ);
      const back = await sbx.files.read(`${HOME}/data.bin`, { ...REQ, format: 'bytes' });
      assert.deepEqual(Buffer.from(back), Buffer.from(bytes));
      const blob = await sbx.files.read(`${HOME}/data.bin`, { ...REQ, format: 'blob' });
      assert.deepEqual(Buffer.from(await blob.arrayBuffer()), Buffer.from(bytes));
      await sbx.files.write(`${HOME}/empty.txt`, '', REQ);
      assert.equal(await sbx.files.read(`${HOME}/empty.txt`, REQ), '');
    });

    test('several files in one write', T, async () => {
      const infos = await sbx.files.write([
        { path: `${HOME}/multi/a.txt`, data: 'A' },
        { path: `${HOME}/multi/b.txt`, data: 'B' },
      ], REQ);
      assert.deepEqual(infos.map((i) => i.path).sort(), [`${HOME}/multi/a.txt`, `${HOME}/multi/b.txt`]);
      assert.equal(await sbx.files.read(`${HOME}/multi/b.txt`, REQ), 'B');
    });

    test('a file the code or a command wrote can be read; an uploaded one can be used', T, async () => {
      if (CI) {
        await run(sbx, 'open("/home/user/from_code.txt", "w").write("written by code")');
        assert.equal(await sbx.files.read(`${HOME}/from_code.txt`, REQ), 'written by code');
        await sbx.files.write(`${HOME}/upload.csv`, 'n\n1\n2\n3\n', REQ);
        assert.equal((await run(sbx, 'import pandas as pd\nint(pd.read_csv("upload.csv").n.sum())')).text, '6');
      }
      await sh(sbx, 'echo "written by bash" > from_bash.txt');
      assert.equal(await sbx.files.read(`${HOME}/from_bash.txt`, REQ), 'written by bash\n');
    });

    test('list, exists, makeDir, getInfo, remove', T, async () => {
      await sbx.files.write(`${HOME}/tree/f.txt`, '12345', REQ);
      assert.equal(await sbx.files.makeDir(`${HOME}/tree/sub/deeper`, REQ), true);
      assert.equal(await sbx.files.makeDir(`${HOME}/tree/sub/deeper`, REQ), false, 'already there');
      const entries = await sbx.files.list(`${HOME}/tree`, REQ);
      const byName = Object.fromEntries(entries.map((e) => [e.name, e]));
      assert.deepEqual(Object.keys(byName).sort(), ['f.txt', 'sub']);
      assert.equal(byName['f.txt'].type, 'file');
      assert.equal(byName['f.txt'].path, `${HOME}/tree/f.txt`);
      assert.equal(byName['sub'].type, 'dir');
      assert.equal(byName['f.txt'].size, 5);
      const info = await sbx.files.getInfo(`${HOME}/tree/f.txt`, REQ);
      assert.equal(info.type, 'file');
      assert.equal(info.name, 'f.txt');

      assert.equal(await sbx.files.exists(`${HOME}/tree/f.txt`, REQ), true);
      assert.equal(await sbx.files.exists(`${HOME}/tree/sub`, REQ), true);
      assert.equal(await sbx.files.exists(`${HOME}/tree/nope.txt`, REQ), false);

      await sbx.files.remove(`${HOME}/tree/f.txt`, REQ);
      assert.equal(await sbx.files.exists(`${HOME}/tree/f.txt`, REQ), false);
      await sbx.files.remove(`${HOME}/tree`, REQ);
      assert.equal(await sbx.files.exists(`${HOME}/tree/sub/deeper`, REQ), false);
    });

    test('reading a missing file is NotFoundError', T, async () => {
      await assert.rejects(sbx.files.read(`${HOME}/does-not-exist.txt`, REQ),
        (e) => e instanceof NotFoundError, 'read');
      await assert.rejects(sbx.files.list(`${HOME}/no-such-dir`, REQ),
        (e) => e instanceof NotFoundError, 'list');
    });

    test('signed file URLs download and upload without a token, until they expire', T, async () => {
      await sbx.files.write(`${HOME}/signed.txt`, 'hello world', REQ);
      const get = async (opts) => fetch(await sbx.downloadUrl('signed.txt', opts),
        { signal: AbortSignal.timeout(20_000) });
      let r = await get({ useSignatureExpiration: 10_000 });
      assert.equal(r.status, 200);
      assert.equal(await r.text(), 'hello world');
      r = await get({ useSignatureExpiration: -10_000 });
      assert.equal(r.status, 401);
      assert.deepEqual(await r.json(), { code: 401, message: 'signature is already expired' });
      const form = new FormData();
      form.append('file', 'file content');
      r = await fetch(await sbx.uploadUrl('signed-up.txt', { useSignatureExpiration: 10_000 }),
        { method: 'POST', body: form, signal: AbortSignal.timeout(20_000) });
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), [{ name: 'signed-up.txt', type: 'file', path: `${HOME}/signed-up.txt` }]);
      assert.equal(await sbx.files.read(`${HOME}/signed-up.txt`, REQ), 'file content');
    });

    test('removing what is not there is done, as envd has it', T, async () => {
      await sbx.files.remove(`${HOME}/no-such-file`, REQ);
      await sbx.files.remove(`${HOME}/no-such-dir/no-such-file`, REQ);
    });

    test('a symlink\'s target is absolute, from the link\'s directory', T, async () => {
      await sbx.files.write(`${HOME}/links/target.txt`, 'pointed at', REQ);
      await sh(sbx, 'cd links && ln -sf target.txt rel && ln -sf ../links/./target.txt up '
        + '&& ln -sf /etc/hostname abs && ln -sf missing dangling');
      for (const [name, target] of [['rel', `${HOME}/links/target.txt`],
        ['up', `${HOME}/links/target.txt`], ['abs', '/etc/hostname'],
        ['dangling', `${HOME}/links/missing`]]) {
        const info = await sbx.files.getInfo(`${HOME}/links/${name}`, REQ);
        // e2b 2.51 names the type; older SDKs know no symlink type
        if (which === 'new') assert.equal(info.type, 'symlink', name);
        assert.equal(info.symlinkTarget, target, name);
      }
    });

    test('watchDir tells what is made, written and removed, recursively', T, async () => {
      await sbx.files.makeDir(`${HOME}/watched/sub`, REQ);
      const seen = [];
      const handle = await sbx.files.watchDir(`${HOME}/watched`, (e) => { seen.push([e.type, e.name]); },
        { ...REQ, recursive: true, timeoutMs: 0 });
      await sbx.files.write(`${HOME}/watched/a.txt`, 'one', REQ);
      await sh(sbx, 'echo two > watched/sub/b.txt && rm watched/a.txt');
      for (let i = 0; i < 100 && !seen.some(([t, n]) => t === 'remove' && n === 'a.txt'); i++)
        await new Promise((r) => setTimeout(r, 50));
      await handle.stop();
      const has = (t, n) => seen.some(([a, b]) => a === t && b === n);
      assert.ok(has('write', 'a.txt') && has('write', 'sub/b.txt') && has('remove', 'a.txt'),
        JSON.stringify(seen));
      await assert.rejects(sbx.files.watchDir(`${HOME}/no-such-dir`, () => {}, REQ),
        (e) => e instanceof NotFoundError || /not/i.test(e.message));
    });

    test('/tmp and /dev/shm are the sandbox\'s own, as its code sees them', T, async () => {
      const dir = `/tmp/sdk-${process.pid}`;
      await sbx.files.write(`${dir}/in.txt`, 'from the SDK', REQ);
      assert.equal(await sh(sbx, `cat ${dir}/in.txt; echo -n made > ${dir}/out.txt; `
        + 'echo -n shared > /dev/shm/s'), 'from the SDK');
      assert.equal(await sbx.files.read(`${dir}/out.txt`, REQ), 'made');
      assert.equal(await sbx.files.read('/dev/shm/s', REQ), 'shared');
      assert.deepEqual((await sbx.files.list(dir, REQ)).map((e) => e.path),
        [`${dir}/in.txt`, `${dir}/out.txt`]);
      assert.equal((await sbx.files.getInfo(`${dir}/out.txt`, REQ)).name, 'out.txt');
      await sbx.files.rename(`${dir}/out.txt`, `${dir}/moved.txt`, REQ);
      assert.equal(await sbx.files.exists(`${dir}/out.txt`, REQ), false);
      await sbx.files.remove(dir, REQ);
      assert.equal(await sbx.files.exists(dir, REQ), false);
      // the system's files are the system's: read by commands, not this API
      await assert.rejects(sbx.files.read('/usr/bin/python3', REQ));
    });
  });

  describe('commands', () => {
    test('stdout, stderr and exit code 0', T, async () => {
      const chunks = [];
      const r = await sbx.commands.run('echo out; echo err >&2',
        { ...REQ, timeoutMs: 30_000, onStdout: (d) => chunks.push(d) });
      assert.equal(r.exitCode, 0);
      assert.equal(r.stdout, 'out\n');
      assert.equal(r.stderr, 'err\n');
      assert.equal(chunks.join(''), 'out\n');
    });

    test('getHost: a server a command starts, reached through petri with the sandbox\'s token', T, async () => {
      const cmd = await sbx.commands.run('python3 -m http.server 8123',
        { ...REQ, background: true });
      try {
        assert.match(sbx.getHost(8123), new RegExp(`^8123-${sbx.sandboxId}\\.`));
        // trafficAccessToken is the SDK's since 2.3; the older ones keep the same token as
        // envdAccessToken.
        const token = sbx.trafficAccessToken ?? sbx.envdAccessToken;
        assert.equal(typeof token, 'string');
        const headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8123',
          'E2B-Traffic-Access-Token': token };
        let res;
        for (let i = 0; i < 100; i++) {      // until it listens
          res = await fetch(`${PETRI_URL}/`, { headers });
          if (res.status !== 502) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.equal(res.status, 200);
        assert.match(await res.text(), /Directory listing/);
        const denied = await fetch(`${PETRI_URL}/`, { headers: { ...headers,
          'E2B-Traffic-Access-Token': 'tok_wrong' } });
        assert.equal(denied.status, 401);
      } finally {
        await cmd.kill();
      }
    });

    test('a non-zero exit is CommandExitError with the output so far', T, async () => {
      await assert.rejects(sbx.commands.run('echo before; echo oops >&2; exit 3',
        { ...REQ, timeoutMs: 30_000 }), (e) => {
        assert.ok(e instanceof CommandExitError, `${e?.name}: ${e?.message}`);
        assert.equal(e.exitCode, 3);
        assert.equal(e.stdout, 'before\n');
        assert.equal(e.stderr, 'oops\n');
        return true;
      });
    });

    test('python is python3; sudo runs as the one user there is', T, async () => {
      assert.equal(await sh(sbx, 'python -c "print(6 * 7)"'), '42');
      assert.equal(await sh(sbx, 'sudo id -u'), await sh(sbx, 'id -u'));
      assert.equal(await sh(sbx, 'sudo echo "$FOO"', { envs: {} }), '');
    });

    test('commands run in /home/user and see the uploaded files', T, async () => {
      assert.equal(await sh(sbx, 'pwd'), HOME);
      await sbx.files.write(`${HOME}/for_cmd.txt`, 'seen by bash', REQ);
      assert.equal(await sh(sbx, 'cat for_cmd.txt'), 'seen by bash');
      assert.equal(await sh(sbx, 'echo $GREETING', { envs: { GREETING: 'hi there' } }), 'hi there');
    });

    test('a command past its timeoutMs is TimeoutError, and the sandbox is free again', T, async () => {
      await assert.rejects(sbx.commands.run('sleep 60', { ...REQ, timeoutMs: 2_000 }),
        (e) => e instanceof TimeoutError && /timeoutMs/.test(e.message), 'run');
      const handle = await sbx.commands.run('sleep 60', { ...REQ, timeoutMs: 2_000, background: true });
      await assert.rejects(handle.wait(), (e) => e instanceof TimeoutError, 'wait');
      assert.equal(await sh(sbx, 'echo still here'), 'still here');
    });

    test('background commands: stdin, then its end; list, connect, kill', T, async () => {
      const cat = await sbx.commands.run('cat', { ...REQ, background: true, stdin: true, timeoutMs: 60_000 });
      await sbx.commands.sendStdin(cat.pid, 'Hello, ', REQ);
      await sbx.commands.sendStdin(cat.pid, 'World!', REQ);
      if (cat.closeStdin) {     // e2b 2.51; before, stdin stays open until a kill
        await cat.closeStdin();
        const done = await cat.wait();
        assert.equal(done.exitCode, 0);
        assert.equal(done.stdout, 'Hello, World!');
      } else {
        for (let i = 0; i < 50 && cat.stdout !== 'Hello, World!'; i++)
          await new Promise((r) => setTimeout(r, 100));
        assert.equal(cat.stdout, 'Hello, World!');
        await cat.kill();
      }
      const sleeper = await sbx.commands.run('echo up; sleep 60', { ...REQ, background: true, timeoutMs: 0 });
      const listed = await sbx.commands.list(REQ);
      const mine = listed.find((p) => p.pid === sleeper.pid);
      assert.ok(mine, `${sleeper.pid} in ${JSON.stringify(listed)}`);
      assert.equal(mine.cmd, '/bin/bash');
      assert.equal(mine.cwd, HOME);
      // while it runs, code and other commands run too
      assert.equal(await sh(sbx, 'echo beside'), 'beside');
      if (CI) assert.equal((await run(sbx, '6 * 7')).text, '42');
      const seen = [];
      const again = await sbx.commands.connect(sleeper.pid, { ...REQ, onStdout: (d) => seen.push(d) });
      assert.equal(again.pid, sleeper.pid);
      assert.equal(await sbx.commands.kill(sleeper.pid, REQ), true);
      await assert.rejects(again.wait(), (e) => e instanceof CommandExitError);
      await assert.rejects(sbx.commands.run(`kill -0 ${sleeper.pid}`, REQ), (e) => e instanceof CommandExitError);
      assert.equal(await sbx.commands.kill(999999, REQ), false);
      await assert.rejects(sbx.commands.connect(999999, REQ));
    });

    test('a terminal: keys in, the screen out, resized, killed', T, async () => {
      let screen = '';
      const dec = new TextDecoder();
      const term = await sbx.pty.create({ ...REQ, cols: 80, rows: 24, timeoutMs: 60_000,
        onData: (d) => { screen += dec.decode(d); } });
      const until = async (re) => {
        for (let i = 0; i < 300 && !re.test(screen); i++) await new Promise((r) => setTimeout(r, 50));
        assert.match(screen, re);
      };
      const enc = new TextEncoder();
      await sbx.pty.sendInput(term.pid, enc.encode('stty size; echo "$TERM"\n'), REQ);
      await until(/24 80/);
      await until(/xterm-256color/);
      await sbx.pty.resize(term.pid, { cols: 100, rows: 30 }, REQ);
      await sbx.pty.sendInput(term.pid, enc.encode('stty size\n'), REQ);
      await until(/30 100/);
      assert.equal(await sbx.pty.kill(term.pid, REQ), true);
      await assert.rejects(term.wait());
      assert.equal(await sbx.pty.kill(term.pid, REQ), false);
    });

    test('a sandbox killed under a command is TimeoutError, not an exit', T, async () => {
      const victim = await create();
      const handle = await victim.commands.run('sleep 60', { ...REQ, timeoutMs: 60_000, background: true });
      await victim.kill(REQ);
      const err = await handle.wait().catch((e) => e);
      // From e2b 2.51 the SDK asks the sandbox's /health (502: gone) and
      // says so; before, a cut stream is an error of its own.
      if (which === 'new') {
        assert.ok(err instanceof TimeoutError, `${err?.name}: ${err?.message}`);
        assert.match(err.message, /killed or reached its end of life/);
      } else {
        assert.ok(err instanceof Error && !(err instanceof CommandExitError), `${err?.name}: ${err?.message}`);
      }
      // Its token now hears 502, what the SDKs read as a sandbox that ended.
      const r = await dataPlane('/health', victim.sandboxId, 49983,
        { 'X-Access-Token': victim.envdAccessToken });
      assert.equal(r.status, 502);
      await r.body?.cancel();
      const wrong = await dataPlane('/health', victim.sandboxId, 49983,
        { 'X-Access-Token': 'x'.repeat(victim.envdAccessToken.length) });
      assert.equal(wrong.status, 401, 'a wrong token learns nothing of it');
      await wrong.body?.cancel();
    });
  });

  describe('isolation: an E2B sandbox is a petri sandbox', () => {
    test('code and commands run as one unprivileged uid', T, async () => {
      const uid = await sh(sbx, 'id -u');
      assert.notEqual(uid, '0');
      if (CI) assert.equal((await run(sbx, 'import os\nos.getuid()')).text, uid);
      // Asking for root changes nothing, or is refused.
      let asRoot;
      try { asRoot = await sh(sbx, 'id -u', { user: 'root' }); } catch (e) { asRoot = null; }
      assert.notEqual(asRoot, '0', 'user: "root" must not give root');
    });

    test('/etc/shadow cannot be read, by a command or through the files API', T, async () => {
      const r = await sbx.commands.run('cat /etc/shadow 2>&1; echo "rc=$?"', { ...REQ, timeoutMs: 30_000 });
      assert.doesNotMatch(r.stdout, /^root:/m);
      assert.match(r.stdout, /rc=[1-9]/);
      await assert.rejects(sbx.files.read('/etc/shadow', REQ));
      await assert.rejects(sbx.files.read(`${HOME}/../../etc/shadow`, REQ));
      await assert.rejects(sbx.files.write('/etc/petri-e2b-test', 'x', REQ));
    });

    test('no network but loopback', T, async () => {
      const ifaces = await sh(sbx, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
      assert.deepEqual(ifaces.split('\n'), ['lo']);
      const probe = await sh(sbx, [
        'python3 -c "',
        'import socket',
        'try:',
        '    socket.create_connection((\'1.1.1.1\', 53), timeout=3); print(\'connected\')',
        'except OSError as e:',
        '    print(\'blocked\')',
        '"',
      ].join('\n'));
      assert.equal(probe, 'blocked');
    });

    test('network options within what the server lets a client ask', T, async () => {
      // This server ([network] as by default) gives sessions none and lets a
      // client ask for no more: asking for none is fine, more is refused.
      const closed = await create({ allowInternetAccess: false,
        network: { denyOut: ['0.0.0.0/0'] } });
      assert.equal(await sh(closed, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"), 'lo');
      // SDKs send allowInternetAccess: true unasked: it is what the server gives.
      const given = await create({ allowInternetAccess: true });
      assert.equal(await sh(given, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"), 'lo');
      await given.kill(REQ);
      await assert.rejects(create({ network: { allowOut: ['pypi.org'], denyOut: ['0.0.0.0/0'] } }),
        /more than this server/);
      if (typeof closed.updateNetwork === 'function') {
        await closed.updateNetwork({ allowInternetAccess: false }, REQ);
        await assert.rejects(closed.updateNetwork({ allowOut: ['pypi.org'],
          denyOut: ['0.0.0.0/0'] }, REQ), /more than this server/);
      }
      await closed.kill(REQ);
    });

    test('another sandbox sees none of this one\'s files', T, async () => {
      await sbx.files.write(`${HOME}/secret.txt`, 'for sbx only', REQ);
      const other = await create();
      assert.equal(await other.files.exists(`${HOME}/secret.txt`, REQ), false);
      assert.doesNotMatch(await sh(other, 'ls -a /home/user; ls -a /tmp'), /secret/);
      await other.kill(REQ);
    });

    test('the data plane needs that sandbox\'s access token', T, async () => {
      await sbx.files.write(`${HOME}/guarded.txt`, 'guarded', REQ);
      const other = await create();
      const path = `/files?path=${encodeURIComponent(`${HOME}/guarded.txt`)}`;
      const mine = sbx.envdAccessToken;
      assert.ok(mine, 'create returned an envdAccessToken');
      let r = await dataPlane(path, sbx.sandboxId, 49983, { 'X-Access-Token': mine });
      assert.equal(r.status, 200, 'the right token works');
      assert.equal(await r.text(), 'guarded');
      for (const [what, headers] of [
        ['no token', {}],
        ['another sandbox\'s token', { 'X-Access-Token': other.envdAccessToken }],
        ['a made-up token', { 'X-Access-Token': 'x'.repeat(mine.length) }],
        ['the API key instead', { 'X-API-KEY': API_KEY }],
        ['a Basic user', { Authorization: 'Basic ' + Buffer.from('root:').toString('base64') }],
      ]) {
        r = await dataPlane(path, sbx.sandboxId, 49983, headers);
        assert.ok([401, 403].includes(r.status), `${what}: /files answered ${r.status}`);
        assert.doesNotMatch(await r.text(), /guarded/);
        if (CI) {
          r = await dataPlane('/execute', sbx.sandboxId, 49999,
            { ...headers, 'Content-Type': 'application/json' },
            { method: 'POST', body: JSON.stringify({ code: 'print(1)' }) });
          assert.ok([401, 403].includes(r.status), `${what}: /execute answered ${r.status}`);
          await r.body?.cancel();
          r = await dataPlane('/contexts', sbx.sandboxId, 49999, headers);
          assert.ok([401, 403].includes(r.status), `${what}: /contexts answered ${r.status}`);
          await r.body?.cancel();
        }
      }
      await other.kill(REQ);
    });
  });

  describe('what petri does not offer answers an error, not a hang', () => {
    test('pause', T, async () => {
      const pause = sbx.betaPause ? () => sbx.betaPause(REQ) : () => sbx.pause(REQ);
      await assert.rejects(pause(), (e) => e instanceof SandboxError && /pause/i.test(e.message),
        'pause is refused with a message naming it');
      assert.equal(await sbx.isRunning(REQ), true, 'and the sandbox runs on');
    });

    test('snapshots', T, async () => {
      await assert.rejects(sbx.createSnapshot(REQ), (e) => e instanceof SandboxError);
    });

    test('another template', T, async () => {
      await assert.rejects(Sandbox.create('no-such-template-xyz', { ...REQ }),
        (e) => e instanceof Error && /template/i.test(e.message));
    });

  });

  describe('code and a command at the same time', ciOnly, () => {
    test('both run: a command is a process beside the interpreter', T, async () => {
      const [code, cmd] = await Promise.all([
        run(sbx, 'import time\ntime.sleep(2)\n"slept"'),
        (async () => { await new Promise((r) => setTimeout(r, 300)); return sh(sbx, 'echo alongside'); })(),
      ]);
      assert.equal(code.text, 'slept');
      assert.equal(cmd, 'alongside');
    });
  });
});
