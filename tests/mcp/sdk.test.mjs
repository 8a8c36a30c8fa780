// petri's MCP server driven by a client petri did not write: the official
// MCP TypeScript SDK (@modelcontextprotocol/sdk), over stdio (`petri mcp`
// as a subprocess) and over Streamable HTTP (`petri serve`, /mcp).
//
// Run with `node --test` from tests/mcp (make mcp-test does), PETRI_BIN
// naming the binary.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, ErrorCode, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

const here = dirname(fileURLToPath(import.meta.url));
const PETRI = process.env.PETRI_BIN || resolve(here, '..', '..', 'build', 'petri');
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function texts(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// A transport that keeps every message it receives (to see the raw
// initialize result), passing everything through.
class Recorder {
  constructor(inner) { this.inner = inner; this.received = []; }
  async start() {
    this.inner.onmessage = (m, extra) => { this.received.push(m); this.onmessage?.(m, extra); };
    this.inner.onclose = () => this.onclose?.();
    this.inner.onerror = (e) => this.onerror?.(e);
    return this.inner.start();
  }
  send(m, o) { return this.inner.send(m, o); }
  close() { return this.inner.close(); }
  setProtocolVersion(v) { this.inner.setProtocolVersion?.(v); }
  get sessionId() { return this.inner.sessionId; }
}

async function run(client, code, extra = {}) {
  return client.callTool({ name: 'execute', arguments: { code, ...extra } });
}

// The same scenarios for both transports: what a model does with petri.
function scenarios(connect) {
  let client;

  before(async () => { client = await connect(); });

  test('the server says who it is and lists its tools with strict schemas', async () => {
    assert.equal(client.getServerVersion().name, 'petri');
    assert.ok(client.getServerCapabilities().tools);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['download_archive', 'execute', 'list_files', 'process_input',
      'process_output', 'processes', 'read_file', 'reset', 'start_process', 'upload_archive',
      'write_file']);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.equal(t.inputSchema.additionalProperties, false, t.name);
      assert.ok(t.description.length > 40, t.name);
    }
    const exec = tools.find((t) => t.name === 'execute');
    assert.deepEqual(exec.inputSchema.required, ['code']);
    assert.deepEqual(exec.inputSchema.properties.language.enum, ['python', 'bash', 'c', 'javascript', 'typescript', 'r', 'java']);
    assert.match(exec.description, /Python 3\.\d+\.\d+/);
    for (const pkg of ['numpy', 'pandas', 'matplotlib', 'scipy', 'openpyxl', '/work', 'network'])
      assert.ok(exec.description.includes(pkg), `execute's description names ${pkg}`);
  });

  test('state persists across calls, and the last value comes back', async () => {
    let r = await run(client, 'import pandas as pd\ndf = pd.DataFrame({"x": [1, 2, 3]})\nprint("made")');
    assert.equal(r.isError, false);
    assert.match(texts(r), /made/);
    r = await run(client, 'df.x.sum() * 7');
    assert.equal(r.isError, false);
    assert.match(texts(r), /\b42\b/);
  });

  test('a chart comes back as an image item (base64 PNG)', async () => {
    const r = await run(client,
      'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 4, 1])\nplt.title("t")\nplt.savefig("plot.png")');
    assert.equal(r.isError, false);
    const images = r.content.filter((c) => c.type === 'image');
    assert.equal(images.length, 1);
    assert.equal(images[0].mimeType, 'image/png');
    assert.ok(Buffer.from(images[0].data, 'base64').subarray(0, 8).equals(PNG_MAGIC));
    assert.match(texts(r), /image 1/);
  });

  test('an exception comes back as isError with its name, message and traceback', async () => {
    const r = await run(client, 'def f(d):\n    return d["missing"]\nf({})');
    assert.equal(r.isError, true);
    const t = texts(r);
    assert.match(t, /KeyError: 'missing'/);
    assert.match(t, /Traceback/);
    assert.match(t, /line 2, in f/);
  });

  test('a timeout is an error with the reason, and the session survives it', async () => {
    await run(client, 'kept = 5');
    const r = await run(client, 'import time\ntime.sleep(30)', { timeout_s: 1 });
    assert.equal(r.isError, true);
    assert.match(texts(r), /timeout/i);
    const again = await run(client, 'kept + 1');
    assert.match(texts(again), /\b6\b/);
  });

  test('bash and C run in the same /work', async () => {
    let r = await run(client, 'echo $((6 * 7)) > answer.txt; cat answer.txt', { language: 'bash' });
    assert.equal(r.isError, false);
    assert.match(texts(r), /42/);
    r = await run(client, '#include <stdio.h>\nint main(void) { puts("from C"); return 0; }',
      { language: 'c' });
    assert.equal(r.isError, false, texts(r));
    assert.match(texts(r), /from C/);
  });

  test('files: write, read back as text, image and blob, list', async () => {
    let r = await client.callTool({ name: 'write_file',
      arguments: { path: 'notes/hello.txt', content: 'héllo\nworld\n' } });
    assert.equal(r.isError, false, texts(r));
    r = await run(client, 'open("notes/hello.txt", encoding="utf-8").read().upper()');
    assert.match(texts(r), /HÉLLO/);

    r = await client.callTool({ name: 'read_file', arguments: { path: '/work/notes/hello.txt' } });
    assert.equal(r.isError, false);
    assert.equal(r.content[0].type, 'text');
    assert.equal(r.content[0].text, 'héllo\nworld\n');

    const bytes = Buffer.from([0, 1, 2, 250, 255, 0, 7]);
    r = await client.callTool({ name: 'write_file',
      arguments: { path: 'data.bin', content: bytes.toString('base64'), encoding: 'base64' } });
    assert.equal(r.isError, false, texts(r));
    r = await client.callTool({ name: 'read_file', arguments: { path: 'data.bin' } });
    const res = r.content.find((c) => c.type === 'resource');
    assert.ok(res, JSON.stringify(r));
    assert.equal(res.resource.uri, 'file:///work/data.bin');
    assert.ok(Buffer.from(res.resource.blob, 'base64').equals(bytes));

    r = await client.callTool({ name: 'read_file', arguments: { path: 'plot.png' } });
    assert.equal(r.content[0].type, 'image');
    assert.equal(r.content[0].mimeType, 'image/png');
    assert.ok(Buffer.from(r.content[0].data, 'base64').subarray(0, 8).equals(PNG_MAGIC));

    r = await client.callTool({ name: 'list_files', arguments: {} });
    const listing = texts(r);
    for (const name of ['notes/', 'data.bin', 'plot.png', 'answer.txt'])
      assert.ok(listing.includes(name), `${name} in ${listing}`);

    r = await client.callTool({ name: 'read_file', arguments: { path: '../../etc/passwd' } });
    assert.equal(r.isError, true);
    r = await client.callTool({ name: 'read_file', arguments: { path: 'nope.txt' } });
    assert.equal(r.isError, true);
    assert.match(texts(r), /no such file/);
  });

  test('bad arguments are tool errors the model can read; an unknown tool is -32602', async () => {
    let r = await client.callTool({ name: 'execute', arguments: { code: 'x', language: 'cobol' } });
    assert.equal(r.isError, true);
    assert.match(texts(r), /language/);
    r = await client.callTool({ name: 'execute', arguments: {} });
    assert.equal(r.isError, true);
    assert.match(texts(r), /'code' is required/);
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }),
      (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams);
  });

  test('a background command: started, typed into, read, beside the code', async () => {
    let r = await client.callTool({ name: 'start_process',
      arguments: { command: 'echo ready; while read line; do echo "got $line"; done', stdin: true } });
    assert.equal(r.isError, false, texts(r));
    const pid = Number(/Started process (\d+)\./.exec(texts(r))[1]);
    assert.match(texts(r), /is running/);
    assert.match(texts(r), /ready/);
    // The interpreter works on while it runs.
    r = await run(client, '6 * 7');
    assert.match(texts(r), /42/);
    r = await client.callTool({ name: 'process_input', arguments: { pid, input: 'ping\n', close: true } });
    assert.equal(r.isError, false, texts(r));
    r = await client.callTool({ name: 'process_output', arguments: { pid, wait_s: 30 } });
    assert.match(texts(r), /exited with code 0/);
    assert.match(texts(r), /got ping/);
    assert.doesNotMatch(texts(r), /ready/);  // read before: only what is new
    r = await client.callTool({ name: 'process_output', arguments: { pid: 99999 } });
    assert.equal(r.isError, true);
  });

  test('reset gives a fresh interpreter and keeps the files', async () => {
    await run(client, 'survivor = 1');
    await run(client, 'open("kept.txt", "w").write("yes")');
    const r = await client.callTool({ name: 'reset', arguments: {} });
    assert.equal(r.isError, false);
    const after = await run(client, 'survivor');
    assert.equal(after.isError, true);
    assert.match(texts(after), /NameError/);
    const files = await client.callTool({ name: 'list_files', arguments: {} });
    assert.match(texts(files), /kept\.txt/);
  });

  test('ping', async () => {
    assert.deepEqual(await client.ping(), {});
  });

  return () => client;
}

describe('stdio: petri mcp as a subprocess', () => {
  let transport, recorder;
  const get = scenarios(async () => {
    transport = new StdioClientTransport({ command: PETRI, args: ['mcp'], stderr: 'pipe' });
    transport.stderr.resume();
    recorder = new Recorder(transport);
    const client = new Client({ name: 'petri-sdk-test', version: '1.0.0' });
    await client.connect(recorder);
    return client;
  });

  test('protocol version: petri answers with the version the SDK asked for', () => {
    const init = recorder.received.find((m) => m.result && m.result.protocolVersion);
    assert.equal(init.result.protocolVersion, LATEST_PROTOCOL_VERSION);
    assert.equal(init.result.serverInfo.name, 'petri');
  });

  test('closing stdin ends petri mcp by itself, with status 0', async () => {
    const pid = transport.pid;
    assert.ok(pid > 0);
    const exited = new Promise((res) => transport._process.once('exit', (code, sig) => res({ code, sig })));
    await get().close();
    const { code, sig } = await exited;
    // The SDK ends stdin, and sends SIGTERM after 2 s; either way petri
    // deletes its sandbox and exits 0.
    assert.equal(sig, null);
    assert.equal(code, 0);
  });
});

describe('Streamable HTTP: petri serve at /mcp', () => {
  let server, baseUrl, transport, dir;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petri-mcp-'));
    const cfg = join(dir, 'petri.ini');
    writeFileSync(cfg, '');
    server = spawn(PETRI, ['serve', '--listen', '127.0.0.1:0', '--config', cfg],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    server.stderr.resume();
    baseUrl = await new Promise((res, rej) => {
      let buf = '';
      server.stdout.on('data', (d) => {
        buf += d;
        const m = buf.match(/listening on (http:\/\/\S+)/);
        if (m) res(m[1]);
      });
      server.once('exit', (c) => rej(new Error(`petri serve exited with ${c}`)));
    });
  });

  after(async () => {
    const exited = new Promise((res) => server.once('exit', (code) => res(code)));
    server.kill('SIGTERM');
    try {
      assert.equal(await exited, 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const get = scenarios(async () => {
    transport = new StreamableHTTPClientTransport(new URL(baseUrl + '/mcp'));
    const client = new Client({ name: 'petri-sdk-test', version: '1.0.0' });
    await client.connect(transport);
    return client;
  });

  test('the negotiated version is sent back as a header, and the session id was assigned', () => {
    assert.equal(transport.protocolVersion, LATEST_PROTOCOL_VERSION);
    assert.match(transport.sessionId, /^mcp_[a-z0-9]{1,16}-[0-9a-f]{32}$/);
  });

  test('terminating the session deletes its sandbox; its id is then unknown', async () => {
    const before = await (await fetch(baseUrl + '/v1/sessions')).json();
    assert.equal(before.sessions.length, 1);
    const sid = transport.sessionId;
    await transport.terminateSession();
    const after = await (await fetch(baseUrl + '/v1/sessions')).json();
    assert.equal(after.sessions.length, 0);
    const r = await fetch(baseUrl + '/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
        'mcp-session-id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }),
    });
    assert.equal(r.status, 404);
    await get().close();
  });
});
