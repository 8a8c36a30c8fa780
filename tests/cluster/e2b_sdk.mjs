// E2B's own SDK through the router (tests/cluster/test_cluster.py runs it
// with E2B_API_URL and E2B_SANDBOX_URL set to the router): a sandbox made
// on whichever node has room, then code, files and a command, each call
// routed by the sandbox's id or its access token alone.
import { Sandbox } from '../e2b/new/sdk.mjs';

const sbx = await Sandbox.create({ timeoutMs: 120_000 });
try {
  await sbx.runCode('x = 21');
  const doubled = await sbx.runCode('x * 2');
  await sbx.files.write('/home/user/a.txt', 'through the router\n');
  const read = await sbx.files.read('/home/user/a.txt');
  const cmd = await sbx.commands.run('cat a.txt');
  console.log(JSON.stringify({ id: sbx.sandboxId, text: doubled.text, read, stdout: cmd.stdout }));
} finally {
  await sbx.kill();
}
