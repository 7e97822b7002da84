// The server's undici dispatchers without undici's index (src/net/undici-dispatchers.ts): they must work as
// the index's do, and the server's modules must not load the index (it costs a sidecar ~9 MB per pod).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { createRequire } from 'node:module';
import { Agent, parseHeaders, Pool } from '../../src/net/undici-dispatchers.js';
import { probeModules, type ModuleProbe } from '../helpers/child-node.js';

type Test = Parameters<Parameters<typeof t.test>[0]>[0];

const SRC = (rel: string) => fileURLToPath(new URL(`../../src/${rel}`, import.meta.url));

async function echoServer(t: Test): Promise<string> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ method: req.method, url: req.url, body, auth: req.headers.authorization ?? null }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test('a Pool and an Agent from the dispatcher module send requests and read answers', async (t) => {
  const origin = await echoServer(t);
  const pool = new Pool(origin, { connections: 1 });
  t.teardown(() => pool.close());
  const a = await pool.request({ path: '/v1/x?y=1', method: 'POST', headers: { authorization: 'Bearer k' }, body: 'hello' });
  t.equal(a.statusCode, 201);
  t.same(await a.body.json(), { method: 'POST', url: '/v1/x?y=1', body: 'hello', auth: 'Bearer k' });
  const agent = new Agent({ connections: 2 });
  t.teardown(() => agent.close());
  const b = await agent.request({ origin, path: '/classify', method: 'POST', body: '{"text":"x"}' });
  t.equal(b.statusCode, 201);
  t.same(await b.body.json(), { method: 'POST', url: '/classify', body: '{"text":"x"}', auth: null });
});

t.test("parseHeaders is the index's public util.parseHeaders", async (t) => {
  const index = createRequire(import.meta.url)('undici') as { util: { parseHeaders: unknown } };
  t.equal(parseHeaders, index.util.parseHeaders, 'the same function, loaded without the index');
  t.same(
    parseHeaders([Buffer.from('Content-Type'), Buffer.from('application/json'), Buffer.from('Set-Cookie'), Buffer.from('a=1'), Buffer.from('set-cookie'), Buffer.from('b=2')]),
    { 'content-type': 'application/json', 'set-cookie': ['a=1', 'b=2'] },
    'names lower-cased, a repeated header as a list',
  );
});

const probe = (body: string): Promise<ModuleProbe> =>
  probeModules(body, { env: process.env, nodeArgs: process.execArgv.filter((a) => !a.startsWith('--input-type')) });

const undiciIndex = (p: ModuleProbe) => p.loaded.filter((m) => /\/node_modules\/undici\/(index\.js|lib\/web\/)/.test(m));

t.test("the sidecar's modules load undici's dispatchers but not its index (fetch, WebSocket, mocks)", async (t) => {
  const mods = ['compose/core.ts', 'compose/sidecar.ts', 'proxy/upstream.ts', 'replication/shipper.ts', 'runtime/remote-classifier.ts'];
  const p = await probe(mods.map((m) => `await import(${JSON.stringify(SRC(m))});`).join('\n'));
  t.equal(p.code, 0, p.stderr);
  t.ok(p.loaded.some((m) => m.includes('/node_modules/undici/lib/dispatcher/pool.js')), 'the pool is loaded');
  t.same(undiciIndex(p), [], "no module of undici's index or its web APIs");
});

t.test('the probe does see the index where it is loaded', async (t) => {
  const p = await probe(`await import('undici');`);
  t.equal(p.code, 0, p.stderr);
  t.ok(undiciIndex(p).length > 0);
});
